"""Hamming search: exact vs brute force, uniform tie-breaking, blocked path, FAISS engines."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from deniable.binary import HammingIndex, make_hamming_index, pack_bits


def _brute(codes_bits, q_bits):
    return (q_bits[:, None, :] != codes_bits[None, :, :]).sum(axis=2)


@pytest.mark.parametrize("n_bits", [7, 64, 130])
def test_search_equals_brute_force(n_bits):
    rng = np.random.default_rng(n_bits)
    cb = rng.random((300, n_bits)) < 0.5
    qb = rng.random((200, n_bits)) < 0.5
    index = HammingIndex(pack_bits(cb))
    d = _brute(cb, qb)
    assert np.array_equal(index.distances(pack_bits(qb)), d)
    ids = index.search(pack_bits(qb), rng=0)
    assert np.array_equal(d[np.arange(200), ids], d.min(axis=1))


def test_tie_rule_rank_in_id_order():
    codes = pack_bits(np.array([[0, 0], [1, 1], [0, 0], [1, 0], [0, 0]], bool))
    index = HammingIndex(codes)
    q = pack_bits(np.zeros((4, 2), bool))  # ties: ids 0, 2, 4
    out = index.search(q, ties=np.array([0.0, 0.34, 0.67, 0.9999]))
    assert out.tolist() == [0, 2, 4, 4]


def test_ties_are_uniform_frequency():
    # 5 codes tied at distance 1 from the query, one farther: each tied id ~ 1/5.
    bits = np.zeros((6, 8), bool)
    for i in range(5):
        bits[i, i] = True
    bits[5, :3] = True
    index = HammingIndex(pack_bits(bits))
    n = 50_000
    q = pack_bits(np.zeros((n, 8), bool))
    out = index.search(q, rng=123)
    counts = np.bincount(out, minlength=6)
    assert counts[5] == 0
    p = stats.chisquare(counts[:5]).pvalue
    assert p > 1e-4, counts


def test_blocked_search_equals_single_block():
    rng = np.random.default_rng(5)
    cb = rng.random((5000, 16)) < 0.5  # 16 bits: many ties across blocks
    qb = rng.random((300, 16)) < 0.5
    u = rng.random(300)
    small = HammingIndex(pack_bits(cb), memory_bytes=1 << 16)
    assert small._vb < 5000
    big = HammingIndex(pack_bits(cb))
    assert np.array_equal(small.search(pack_bits(qb), ties=u), big.search(pack_bits(qb), ties=u))


def test_knn_sorted_by_distance_then_id():
    rng = np.random.default_rng(2)
    cb = rng.random((100, 12)) < 0.5
    qb = rng.random((10, 12)) < 0.5
    ids, dists = HammingIndex(pack_bits(cb)).knn(pack_bits(qb), 7)
    d = _brute(cb, qb)
    for i in range(10):
        order = sorted(range(100), key=lambda j: (d[i, j], j))[:7]
        assert ids[i].tolist() == order and dists[i].tolist() == [d[i, j] for j in order]


def test_bad_inputs():
    with pytest.raises(ValueError):
        HammingIndex(np.zeros((0, 1), np.uint64))
    index = HammingIndex(np.zeros((3, 1), np.uint64))
    with pytest.raises(ValueError):
        index.search(np.zeros((2, 2), np.uint64))
    with pytest.raises(ValueError, match="ties"):
        index.search(np.zeros((2, 1), np.uint64), ties=np.zeros(3))
    with pytest.raises(ValueError, match="unknown"):
        make_hamming_index("annoy", np.zeros((3, 1), np.uint64))


def test_faiss_flat_matches_exact():
    pytest.importorskip("faiss")
    rng = np.random.default_rng(9)
    cb = rng.random((2000, 20)) < 0.5  # 20 bits: ties, some beyond k candidates
    qb = rng.random((500, 20)) < 0.5
    u = rng.random(500)
    codes, q = pack_bits(cb), pack_bits(qb)
    exact = HammingIndex(codes).search(q, ties=u)
    flat = make_hamming_index("faiss-flat", codes)
    assert np.array_equal(flat.search(q, ties=u), exact)
    # k-NN distances agree with the numpy scan (ids of equal distances may come in another order)
    ids_f, d_f = flat.knn(q, 7)
    ids_e, d_e = HammingIndex(codes).knn(q, 7)
    assert np.array_equal(d_f, d_e)
    assert np.array_equal(np.bitwise_count(codes[ids_f, 0] ^ q[:, :1]).astype(np.int64), d_f)
    mih = make_hamming_index("faiss-mih", codes)
    got = mih.search(q, ties=u)
    assert got.shape == (500,) and ((got >= 0) & (got < 2000)).all()


def test_faiss_search_in_threads_gives_the_same_ids(monkeypatch):
    """A large batch cut between helper threads (one OpenMP thread each) finds what one call
    finds, row for row, for search and k-NN."""
    pytest.importorskip("faiss")
    from deniable import _threads
    from deniable.binary import hamming

    rng = np.random.default_rng(10)
    codes, q = pack_bits(rng.random((3000, 24)) < 0.5), pack_bits(rng.random((1000, 24)) < 0.5)
    u = rng.random(1000)
    flat = make_hamming_index("faiss-flat", codes)
    monkeypatch.setattr(_threads, "_THREADS", [1])
    one, (ids1, d1) = flat.search(q, ties=u), flat.knn(q, 9)
    parts: list[int] = []
    run = _threads.run_parallel
    monkeypatch.setattr(hamming, "run_parallel", lambda tasks: (parts.append(len(tasks)), run(tasks))[1])
    monkeypatch.setattr(hamming, "PARALLEL_MIN_QUERIES", 100)
    monkeypatch.setattr(_threads, "_THREADS", [3])
    assert np.array_equal(flat.search(q, ties=u), one)
    ids3, d3 = flat.knn(q, 9)
    assert np.array_equal(ids3, ids1) and np.array_equal(d3, d1)
    assert parts == [3, 3]
    monkeypatch.setattr(hamming, "PARALLEL_MIN_QUERIES", 600)  # 1000 queries: one part of at least 600
    flat.search(q, ties=u)
    assert parts == [3, 3]
    _threads.stop_threads()


@pytest.mark.parametrize("memory", [64 << 20, 1 << 16])
def test_gemm_and_popcount_engines_agree(monkeypatch, memory):
    """The BLAS (±1 matrix product) engine and the popcount engine give identical distances and,
    for the same tie uniforms, identical ids — also on the blocked path."""
    import deniable.binary.hamming as H

    rng = np.random.default_rng(11)
    codes = rng.integers(0, 2**64, size=(3000, 3), dtype=np.uint64) & np.uint64(0xFFFF)  # many ties
    q = rng.integers(0, 2**64, size=(700, 3), dtype=np.uint64) & np.uint64(0xFFFF)
    u = rng.random(700)
    gemm = H.HammingIndex(codes, memory_bytes=memory)
    monkeypatch.setattr(H, "_GEMM_MAX_BYTES", 0)
    pop = H.HammingIndex(codes, memory_bytes=memory)
    assert gemm._pm is not None and pop._pm is None
    np.testing.assert_array_equal(gemm.distances(q[:50]), pop.distances(q[:50]))
    np.testing.assert_array_equal(gemm.search(q, ties=u), pop.search(q, ties=u))
