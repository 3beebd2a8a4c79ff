"""Neighbourhood tables (k-nearest and radius CSR), element-wise distances, the on-disk cache."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import deniable.neighbors.builders as builders
import deniable.neighbors.neighborhoods as nbm
from deniable import Embedding
from deniable.errors import DeniableWarning
from deniable.metrics import pairwise_distances
from deniable.neighbors.neighborhoods import (
    FORMAT_VERSION,
    Neighborhoods,
    cache_directory,
    cache_path,
    embedding_neighborhoods,
    knn_neighborhoods,
    paired_distances,
    radius_neighborhoods,
    row_distances,
)

FLOAT_METRICS = ("euclidean", "manhattan", "chebyshev", "angular")


def make_embedding(n: int = 60, dim: int = 4, seed: int = 0) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def scaled_l1(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return 0.5 * np.abs(A[:, None, :].astype(np.float64) - B[None, :, :]).sum(axis=-1)


def data_for(metric):
    rng = np.random.default_rng(1)
    if metric == "hamming":
        X = rng.integers(0, 2**63, size=(300, 2), dtype=np.uint64)
        Q = X[:40]
    else:
        X = rng.standard_normal((300, 6)).astype(np.float32)
        Q = np.vstack([X[:40], X.mean(axis=0, keepdims=True)])
    return Q, X


ALL_METRICS = (*FLOAT_METRICS, "hamming", scaled_l1)


@pytest.mark.parametrize("metric", ALL_METRICS, ids=lambda m: m if isinstance(m, str) else "callable")
@pytest.mark.parametrize("k", [1, 7, 300, 1000])
def test_knn_matches_full_sort(metric, k: int) -> None:
    Q, X = data_for(metric)
    nb = knn_neighborhoods(Q, X, k, metric, memory_bytes=1 << 16)  # many blocks
    D = pairwise_distances(Q, X, metric)
    kk = min(k, X.shape[0])
    assert nb.kind == "knn" and nb.n_rows == Q.shape[0] and nb.nnz == Q.shape[0] * kk and nb.n_vocab == 300
    for i in range(Q.shape[0]):
        ids, d = nb.row(i)
        # GEMM-based metrics may round differently in another block shape: ulp-level tolerance
        np.testing.assert_allclose(d, D[i, ids], rtol=1e-13, atol=1e-13)
        assert np.all(np.diff(d) >= 0)
        np.testing.assert_allclose(d, np.sort(D[i])[:kk], rtol=1e-13, atol=1e-13)  # the k smallest
        others = np.setdiff1d(np.arange(300), ids)
        if kk < 300:
            # the float32 Euclidean path may lower the bound by its (tiny) rounding allowance
            assert d[-1] - 1e-3 <= nb.bound[i] <= d[-1] and np.all(D[i, others] >= nb.bound[i] * (1 - 1e-13) - 1e-13)
        else:
            assert nb.bound[i] == np.inf and others.size == 0


@pytest.mark.parametrize("metric", ALL_METRICS, ids=lambda m: m if isinstance(m, str) else "callable")
def test_radius_matches_threshold(metric) -> None:
    Q, X = data_for(metric)
    D = pairwise_distances(Q, X, metric)
    u = np.unique(D)
    j = int(0.1 * u.size)
    gamma = float((u[j] + u[j + 1]) / 2)  # halfway between two distances: no rounding ambiguity
    nb = radius_neighborhoods(Q, X, gamma, metric, memory_bytes=1 << 16)
    assert nb.kind == "radius" and nb.param == gamma
    for i in range(Q.shape[0]):
        ids, d = nb.row(i)
        np.testing.assert_array_equal(np.sort(ids), np.flatnonzero(D[i] <= gamma))
        np.testing.assert_allclose(d, D[i, ids], rtol=1e-13, atol=1e-13)
        assert np.all(np.diff(d) >= 0)
        assert nb.bound[i] == gamma
    whole = radius_neighborhoods(Q, X, float(D.max()), metric)
    assert np.all(whole.sizes() == 300) and np.all(whole.bound == np.inf)
    with pytest.raises(ValueError, match="max_entries"):
        radius_neighborhoods(Q, X, float(D.max()), metric, max_entries=1000)


@pytest.mark.parametrize("metric", ALL_METRICS, ids=lambda m: m if isinstance(m, str) else "callable")
def test_row_and_paired_distances_match_pairwise(metric) -> None:
    Q, X = data_for(metric)
    D = pairwise_distances(Q, X, metric)
    rng = np.random.default_rng(2)
    src = rng.integers(0, Q.shape[0], 500)
    dst = rng.integers(0, X.shape[0], 500)
    np.testing.assert_allclose(row_distances(Q, X, src, dst, metric, chunk=64), D[src, dst], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(paired_distances(Q[src[:50]], X[dst[:50]], metric), D[src[:50], dst[:50]], rtol=1e-12, atol=1e-12)
    assert row_distances(Q, X, np.array([], dtype=np.int64), np.array([], dtype=np.int64), metric).shape == (0,)


def test_bad_arguments() -> None:
    Q, X = data_for("euclidean")
    with pytest.raises(ValueError):
        knn_neighborhoods(Q, X, 0)
    with pytest.raises(ValueError):
        radius_neighborhoods(Q, X, -1.0)
    with pytest.raises(ValueError, match="unknown metric"):
        knn_neighborhoods(Q, X, 3, "cosine")
    with pytest.raises(ValueError, match="unknown metric"):
        row_distances(Q, X, [0], [0], "cosine")
    with pytest.raises(ValueError):
        paired_distances(Q[:2], X[:3])
    emb = make_embedding()
    with pytest.raises(ValueError):
        embedding_neighborhoods(emb, kind="ball", k=3, cache_dir=False)
    with pytest.raises(TypeError):
        embedding_neighborhoods(emb, kind="knn", cache_dir=False)
    with pytest.raises(TypeError):
        embedding_neighborhoods(emb, kind="radius", cache_dir=False)


def test_save_load_roundtrip(tmp_path) -> None:
    Q, X = data_for("euclidean")
    nb = radius_neighborhoods(Q, X, 2.0, fingerprint="abc")
    path = nb.save(tmp_path / "sub" / "t.npz")
    back = Neighborhoods.load(path)
    for f in ("indptr", "indices", "distances", "bound"):
        np.testing.assert_array_equal(getattr(back, f), getattr(nb, f))
    assert (back.kind, back.param, back.metric, back.n_vocab, back.fingerprint) == ("radius", 2.0, "euclidean", 300, "abc")
    assert [p.name for p in path.parent.iterdir()] == ["t.npz"]  # no temp files left behind


def test_cache_directory_resolution(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DENIABLE_CACHE_DIR", raising=False)
    assert cache_directory() == Path.home() / ".cache" / "deniable"
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "env"))
    assert cache_directory() == tmp_path / "env"
    assert cache_directory(tmp_path / "arg") == tmp_path / "arg"


def test_cache_key_distinguishes_everything(tmp_path) -> None:
    paths = {
        cache_path("knn", "f1", "euclidean", 8, tmp_path),
        cache_path("knn", "f2", "euclidean", 8, tmp_path),
        cache_path("knn", "f1", "angular", 8, tmp_path),
        cache_path("knn", "f1", "euclidean", 9, tmp_path),
        cache_path("radius", "f1", "euclidean", 8, tmp_path),
        cache_path("radius", "f1", "euclidean", 8.000000000000002, tmp_path),
    }
    assert len(paths) == 6
    assert all(p.parent == tmp_path and f"-v{FORMAT_VERSION}." in p.name for p in paths)


def test_embedding_cache_build_load_rebuild(tmp_path, monkeypatch) -> None:
    emb = make_embedding()
    nb, path = embedding_neighborhoods(emb, kind="knn", k=5, metric="manhattan", cache_dir=tmp_path)
    assert path is not None and path.exists() and path.parent == tmp_path
    assert nb.n_rows == len(emb) + 1  # vocabulary + UNK
    D = pairwise_distances(emb.mean[None], emb.vectors, "manhattan")[0]
    np.testing.assert_allclose(nb.row(len(emb))[1], np.sort(D)[:5], rtol=1e-13)  # last row: UNK = mean
    calls = []
    real = nbm.knn_neighborhoods

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(nbm, "knn_neighborhoods", spy)
    again, path2 = embedding_neighborhoods(emb, kind="knn", k=5, metric="manhattan", cache_dir=tmp_path)
    assert path2 == path and calls == []
    np.testing.assert_array_equal(again.indices, nb.indices)
    # another embedding (different fingerprint) does not reuse it
    embedding_neighborhoods(make_embedding(seed=1), kind="knn", k=5, metric="manhattan", cache_dir=tmp_path)
    assert calls == [1]
    # rebuild=True recomputes
    embedding_neighborhoods(emb, kind="knn", k=5, metric="manhattan", cache_dir=tmp_path, rebuild=True)
    assert calls == [1, 1]
    # a corrupt file is rebuilt with a warning
    path.write_bytes(b"not an npz")
    with pytest.warns(DeniableWarning, match="unreadable cache"):
        fixed, _ = embedding_neighborhoods(emb, kind="knn", k=5, metric="manhattan", cache_dir=tmp_path)
    np.testing.assert_array_equal(fixed.indices, nb.indices)
    assert Neighborhoods.load(path).nnz == nb.nnz


def test_no_disk_cache_for_false_or_callables(tmp_path) -> None:
    emb = make_embedding()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, p1 = embedding_neighborhoods(emb, kind="knn", k=3, cache_dir=False)
        _, p2 = embedding_neighborhoods(emb, kind="knn", k=3, metric=scaled_l1, cache_dir=tmp_path)
    assert p1 is None and p2 is None and list(tmp_path.iterdir()) == []


def test_radius_cache_for_embedding(tmp_path) -> None:
    emb = make_embedding()
    nb, path = embedding_neighborhoods(emb, kind="radius", gamma=1.5, cache_dir=tmp_path)
    assert path.name.startswith("tem-radius-") and nb.bound[0] == 1.5
    D = pairwise_distances(emb.vectors[:1], emb.vectors)[0]
    np.testing.assert_array_equal(np.sort(nb.row(0)[0]), np.flatnonzero(D <= 1.5))


@pytest.mark.parametrize("layout", ["random", "sampled-columns-nearest", "duplicates"])
def test_float32_euclidean_path_matches_float64(layout: str) -> None:
    """The float32-GEMM candidate search (with its sampled threshold and its full-partition
    fallback) returns the exact k nearest and a valid bound."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 5)).astype(np.float32)
    if layout == "sampled-columns-nearest":  # the 1-in-16 sample holds all near words: fallback path
        X[np.arange(3000) % 16 != 0] += 50.0
    elif layout == "duplicates":
        X[100:700] = X[0]
    Q = np.vstack([X[:50], X[::16][:20], X.mean(axis=0, keepdims=True)])
    fast = knn_neighborhoods(Q, X, 4, "euclidean")
    slow = knn_neighborhoods(Q.astype(np.float64), X.astype(np.float64), 4, "euclidean")  # generic path
    D = pairwise_distances(Q, X)
    np.testing.assert_allclose(fast.distances, slow.distances, rtol=1e-12, atol=1e-12)
    if layout != "duplicates":  # among exact ties any choice is right
        np.testing.assert_array_equal(fast.indices, slow.indices)
    for i in range(Q.shape[0]):
        ids, d = fast.row(i)
        others = np.setdiff1d(np.arange(3000), ids)
        assert fast.bound[i] <= d[-1] and np.all(D[i, others] >= fast.bound[i] - 1e-12)
        assert fast.bound[i] >= slow.bound[i] - 1e-3


# -- compact, resumable k-nearest tables -------------------------------------------------------


@pytest.mark.parametrize("metric", ["euclidean", "manhattan"])
def test_knn_ids_equal_the_full_table(metric: str, tmp_path) -> None:
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 6)).astype(np.float32)
    Q = np.vstack([X[:700], X.mean(axis=0, keepdims=True)])
    full = knn_neighborhoods(Q, X, 9, metric)
    for directory in (None, tmp_path / "t"):
        t = nbm.build_knn_ids(Q, X, 9, metric, directory=directory, fingerprint="fp")
        np.testing.assert_array_equal(t.ids, full.indices.reshape(-1, 9))
        np.testing.assert_array_equal(t.bound, full.bound)
        assert (t.k, t.n_rows, t.n_vocab, t.metric, t.nnz) == (9, 701, 3000, metric, 701 * 9)
    assert isinstance(t.ids, np.memmap) and not (tmp_path / "t.partial").exists()
    again = nbm.KnnIds.load(tmp_path / "t")
    np.testing.assert_array_equal(again.ids, t.ids)


class _Stop(Exception):
    pass


def test_knn_ids_build_resumes_after_an_interruption(tmp_path, monkeypatch) -> None:
    """A build stopped after some blocks continues from its last checkpoint (not from row 0) and
    ends with the same table as an uninterrupted build."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((4000, 8)).astype(np.float32)
    Q = X[:1200]
    want = nbm.build_knn_ids(Q, X, 5)
    blocks: list[int] = []
    real_block = builders._KnnEuclidean.block

    def stopping_block(self, qb):
        blocks.append(qb.shape[0])
        if len(blocks) == 3:
            raise _Stop
        return real_block(self, qb)

    monkeypatch.setattr(builders._KnnEuclidean, "block", stopping_block)
    with pytest.raises(_Stop):
        nbm.build_knn_ids(Q, X, 5, directory=tmp_path / "t", checkpoint_seconds=0.0)
    assert (tmp_path / "t.partial" / "done").read_text() == "512" and not (tmp_path / "t").exists()
    monkeypatch.setattr(builders._KnnEuclidean, "block", real_block)
    seen: list[int] = []

    def counting_block(self, qb):
        seen.append(qb.shape[0])
        return real_block(self, qb)

    monkeypatch.setattr(builders._KnnEuclidean, "block", counting_block)
    t = nbm.build_knn_ids(Q, X, 5, directory=tmp_path / "t", checkpoint_seconds=0.0)
    assert sum(seen) == 1200 - 512  # only the rows after the checkpoint were computed
    np.testing.assert_array_equal(t.ids, want.ids)
    np.testing.assert_array_equal(t.bound, want.bound)
    # a different input (k) does not resume from a stale partial build
    seen.clear()
    monkeypatch.setattr(builders._KnnEuclidean, "block", stopping_block)
    blocks.clear()
    with pytest.raises(_Stop):
        nbm.build_knn_ids(Q, X, 6, directory=tmp_path / "u", checkpoint_seconds=0.0)
    monkeypatch.setattr(builders._KnnEuclidean, "block", counting_block)
    nbm.build_knn_ids(Q, X, 7, directory=tmp_path / "u", checkpoint_seconds=0.0)
    assert sum(seen) == 1200


_KILL_SCRIPT = """
import sys, numpy as np
import deniable.neighbors.neighborhoods as nbm
X = np.random.default_rng(7).standard_normal((10000, 16)).astype(np.float32)
nbm.build_knn_ids(X, X, 8, directory=sys.argv[1], checkpoint_seconds=0.0)
"""


def test_knn_ids_build_survives_sigkill(tmp_path) -> None:
    """Black box: a build killed with SIGKILL mid-way resumes from its checkpoint and gives the
    same table as a build that was never interrupted."""
    import signal
    import subprocess
    import sys
    import time

    target = tmp_path / "t"
    proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(target)])
    done_file = tmp_path / "t.partial" / "done"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if done_file.exists() and int(done_file.read_text() or 0) >= 1024:
                break
            if proc.poll() is not None:
                pytest.fail("the build finished before it could be killed")
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = int(done_file.read_text())
    assert 1024 <= done < 10000 and not target.exists()
    X = np.random.default_rng(7).standard_normal((10000, 16)).astype(np.float32)
    t = nbm.build_knn_ids(X, X, 8, directory=target)
    want = nbm.build_knn_ids(X, X, 8)
    np.testing.assert_array_equal(t.ids, want.ids)
    np.testing.assert_array_equal(t.bound, want.bound)


def test_compact_embedding_cache_rebuilds_a_corrupt_folder(tmp_path) -> None:
    emb = make_embedding(200, 4)
    t, path = embedding_neighborhoods(emb, kind="knn", k=5, cache_dir=tmp_path, compact=True)
    assert path is not None and path.is_dir() and t.n_rows == 201
    ids = np.load(path / "ids.npy", mmap_mode="r+")
    ids[3, 0] = 999  # out of range
    ids.flush()
    del ids, t
    with pytest.warns(DeniableWarning, match="unreadable cache folder"):
        t2, _ = embedding_neighborhoods(emb, kind="knn", k=5, cache_dir=tmp_path, compact=True)
    full, _ = embedding_neighborhoods(emb, kind="knn", k=5, cache_dir=False)
    np.testing.assert_array_equal(t2.ids, full.indices.reshape(-1, 5))
    with pytest.raises(ValueError, match="compact=True needs kind='knn'"):
        embedding_neighborhoods(emb, kind="radius", gamma=1.0, cache_dir=tmp_path, compact=True)
