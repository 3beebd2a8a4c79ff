"""Embeddings and mechanisms pickle by reference (a bundled-embedding mechanism
pickled to 82 MB, shipped to every worker)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import pickle
import subprocess
import sys

import numpy as np
import pytest

import deniable
from deniable import Embedding
from deniable.mechanisms.base import Mechanism


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_bundled_embedding_pickles_by_reference_and_memory_maps(tmp_path, cache):
    emb = deniable.load_embedding()
    data = pickle.dumps(emb)
    assert len(data) < 1000  # 40 MB of vectors before
    assert pickle.loads(data) is emb  # same process: the same object
    assert (cache / "embeddings" / f"{emb.fingerprint}.f32.npy").is_file()
    (tmp_path / "emb.pkl").write_bytes(data)
    code = (
        "import pickle, sys, numpy as np; e = pickle.load(open(sys.argv[1], 'rb')); a = e.vectors\n"
        "mm = False\nwhile a is not None:\n    mm = mm or isinstance(a, np.memmap); a = getattr(a, 'base', None)\n"
        "print(e.fingerprint, len(e), mm)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "emb.pkl")], capture_output=True, text=True, check=True)
    assert r.stdout.split() == [emb.fingerprint, str(len(emb)), "True"]


def test_limited_and_file_embeddings_by_reference(tmp_path, cache):
    small = deniable.load_embedding(limit=500)
    assert len(pickle.dumps(small)) < 1000
    src = tmp_path / "e.txt"
    src.write_text("".join(f"w{i} {i} {i % 7} {i % 3}\n" for i in range(2000)))
    emb = deniable.load_embedding(src)
    data = pickle.dumps(emb)
    assert len(data) < 1000
    # in a fresh process the memory-mapped copy is used and checked against the fingerprint
    r = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; e = pickle.loads(sys.stdin.buffer.read()); print(e.fingerprint, e.words[5])"],
        input=data, capture_output=True, check=True,
    )
    assert r.stdout.decode().split() == [emb.fingerprint, "w5"]
    # without the copy it reloads the file; a changed file is refused, not silently used
    for f in (cache / "embeddings").iterdir():
        f.unlink()
    src.write_text(src.read_text().replace("w5 5", "w5 6", 1))
    r = subprocess.run([sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"], input=data, capture_output=True)
    assert r.returncode != 0 and b"changed since it was pickled" in r.stderr


def test_damaged_memory_mapped_copy_is_not_trusted(tmp_path, cache):
    src = tmp_path / "e.txt"
    src.write_text("".join(f"w{i} {i} {i % 7}\n" for i in range(100)))
    emb = deniable.load_embedding(src)
    data = pickle.dumps(emb)
    npy = cache / "embeddings" / f"{emb.fingerprint}.f32.npy"
    arr = np.load(npy)
    arr[3, 0] += 1
    np.save(npy, arr)
    r = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; e = pickle.loads(sys.stdin.buffer.read()); print(e.vectors[3, 0])"],
        input=data, capture_output=True, check=True,
    )
    assert float(r.stdout) == 3.0  # reloaded from the source, not the altered copy


def test_array_embeddings_pickle_by_value():
    e = Embedding(["a", "b"], np.array([[0.0, 1.0], [2.0, 3.0]]))
    e2 = pickle.loads(pickle.dumps(e))
    assert e2.words == e.words and np.array_equal(e2.vectors, e.vectors) and e2.fingerprint == e.fingerprint


@pytest.mark.parametrize("name,params,limit", [("madlib", {}, None), ("mahalanobis", {"lam": 0.5}, None), ("tem", {}, 3000)])
def test_mechanisms_pickle_small_and_sample_identically(name, params, limit):
    mech = deniable.get_mechanism(name, deniable.load_embedding(limit=limit), epsilon=10, **params)
    data = pickle.dumps(mech)
    assert len(data) < 1_000_000  # 82 MB for madlib on the bundled embedding before
    copy = pickle.loads(data)
    ids = np.arange(0, len(mech.embedding), 97)
    assert np.array_equal(copy.sample_ids(ids, rng=5), mech.sample_ids(ids, rng=5))
    assert repr(copy) == repr(mech)


def test_mechanism_in_spawned_workers_gives_the_same_samples():
    """Through multiprocessing (spawn: nothing inherited, everything unpickled), the same seeds
    give the same samples as in this process."""
    mech = deniable.Madlib(deniable.load_embedding(limit=3000), epsilon=8)
    ids = np.arange(0, 3000, 7)
    seeds = [0, 1, 2]
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        remote = list(pool.map(Mechanism.sample_ids, [mech] * 3, [ids] * 3, seeds))
    for seed, got in zip(seeds, remote):
        assert np.array_equal(got, mech.sample_ids(ids, rng=seed))
