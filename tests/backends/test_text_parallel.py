"""ParallelPrivatizer: worker processes give byte-identical output to the serial text path."""

from __future__ import annotations

import time

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.backends.text import ParallelPrivatizer, privatize_parallel, shared_privatizer
from deniable.errors import PrivacyWarning
from deniable.text import privatize_texts

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "café", "über", "north", "south"]


@pytest.fixture(scope="module")
def mech():
    rng = np.random.default_rng(0)
    emb = Embedding(WORDS, rng.standard_normal((len(WORDS), 6)).astype(np.float32))
    return get_mechanism("madlib", emb, epsilon=2.0)


def corpus(n=400, seed=1):
    rng = np.random.default_rng(seed)
    pool = WORDS + ["The", "CAT", "Zebra", "cafe\u0301", "x😀y", "ÜBER", "emails@x.org"]
    seps = [" ", ", ", "! ", " -- ", "\n", "  ", "'"]
    out = []
    for _ in range(n):
        k = int(rng.integers(0, 12))
        out.append("".join(str(rng.choice(pool)) + str(rng.choice(seps)) for _ in range(k)))
    out[5] = ""
    out[6] = "... !!"
    return out


@pytest.mark.parametrize("oov,case", [("unk", "preserve"), ("drop", "lower"), ("unk", "lower")])
def test_parallel_output_is_identical_to_serial(mech, oov, case):
    texts = corpus()
    st1, st2, c1, c2 = {}, {}, [], []
    serial = privatize_texts(mech, texts, rng=7, oov=oov, case=case, stats=st1, privatized_per_text=c1)
    with ParallelPrivatizer(mech, workers=3, min_words_per_worker=20) as pp:
        assert len(pp._shards(texts)) == 3
        par = pp.privatize_texts(texts, rng=7, oov=oov, case=case, stats=st2, privatized_per_text=c2)
        assert par == serial and st1 == st2 and c1 == c2
        # the pool is reused across batches; a different seed gives a different output
        assert pp.privatize_texts(texts, rng=8, oov=oov, case=case) != serial


def test_keep_warns_once_with_the_total(mech):
    texts = corpus()
    with pytest.warns(PrivacyWarning) as w1:
        serial = privatize_texts(mech, texts, rng=3, oov="keep")
    with pytest.warns(PrivacyWarning) as w2:
        par = privatize_parallel(mech, texts, workers=2, rng=3, oov="keep")
    assert par == serial
    assert [str(w.message) for w in w1] == [str(w.message) for w in w2]


def test_errors_are_raised_and_the_pool_recovers(mech):
    texts = corpus()
    with ParallelPrivatizer(mech, workers=2, min_words_per_worker=20) as pp:
        with pytest.raises(TypeError, match="strings"):
            pp.privatize_texts(texts[:50] + [None])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="oov"):
            pp.privatize_texts(texts, oov="pass")
        assert pp.privatize_texts(texts, rng=1) == privatize_texts(mech, texts, rng=1)


def test_small_batches_and_one_worker_run_serially(mech):
    pp = ParallelPrivatizer(mech, workers=4)
    assert pp._shards(["the cat"] * 3) == [(0, 3)]
    assert pp.privatize_texts(["the cat sat"], rng=2) == privatize_texts(mech, ["the cat sat"], rng=2)
    assert not pp._procs
    pp.close()


def test_shared_privatizer_is_reused(mech):
    pp = shared_privatizer(mech, workers=2)
    assert shared_privatizer(mech) is pp
    texts = corpus(200, seed=4)
    assert pp.privatize_texts(texts, rng=5) == privatize_texts(mech, texts, rng=5)
    assert shared_privatizer(mech, workers=3) is not pp


# -- privatize_batches: a stream of batches, one group of batches per worker ----------------------


@pytest.fixture(scope="module")
def small_embedding():
    rng = np.random.default_rng(3)
    words = [*WORDS, *(f"w{i}" for i in range(60))]
    return Embedding(words, rng.standard_normal((len(words), 6)).astype(np.float32))


def batches(n=40, seed=2):
    out = [corpus(int(np.random.default_rng(seed + i).integers(7, 60)), seed=seed + i) for i in range(n)]
    out[3], out[4] = ["... !!", ""], []  # no words: no sample_ids call for these
    return out


def serial_batches(mech, bl, seed, **options):
    gen = np.random.default_rng(seed)
    out, st = [], {}
    for b in bl:
        counts = []
        out.append((privatize_texts(mech, b, rng=gen, stats=st, privatized_per_text=counts, **options), counts))
    return out, st


@pytest.mark.filterwarnings("ignore:BRR. binarizing")
@pytest.mark.parametrize("name,params", [("madlib", {}), ("tem", {}), ("santext", {}), ("custext", {}), ("brr", {"n_bits": 16, "method": "random-projection"})])
def test_batches_match_the_serial_path_for_every_worker_count(small_embedding, name, params):
    mech = get_mechanism(name, small_embedding, epsilon=3.0, **params)
    bl = batches()
    expected, st1 = serial_batches(mech, bl, 9, oov="drop", case="preserve")
    for workers in (1, 2, 3):
        st2 = {}
        with ParallelPrivatizer(mech, workers, group_chars=500) as pp:
            got = [(out, c) for _, out, c in pp.privatize_batches(bl, rng=9, oov="drop", stats=st2, counts=True)]
        assert got == expected and st2 == st1, workers
    # a failing control: another seed gives another output
    with ParallelPrivatizer(mech, 2, group_chars=500) as pp:
        assert [out for _, out, _ in pp.privatize_batches(bl, rng=10, oov="drop")] != [out for out, _ in expected]


def test_observers_see_every_batch_and_serial_chars(mech):
    from deniable.text.privatize import ObservedSampler

    seen = []
    sampler = ObservedSampler(mech, lambda ids, out: seen.append((ids.copy(), out.copy())))
    bl = batches(30)
    expected, st1 = serial_batches(mech, bl, 4)
    with ParallelPrivatizer(sampler, 2, group_chars=300) as pp:
        got = [(out, c) for _, out, c in pp.privatize_batches(bl, rng=4, counts=True, serial_chars=2000)]
        assert pp._procs  # the workers took over after 2,000 characters
    assert got == expected
    assert sum(len(ids) for ids, _ in seen) == st1["words"] and len(seen) == sum(1 for b in bl if any(c for c in _count(mech, b)))


def _count(mech, texts):
    counts = []
    privatize_texts(mech, texts, rng=0, privatized_per_text=counts)
    return counts


def test_errors_in_workers_and_early_stops_leave_no_process(mech):
    bl = batches(20)
    pp = ParallelPrivatizer(mech, 2, group_chars=300)
    with pytest.raises(TypeError, match="strings"):  # raised in a worker, re-raised here
        list(pp.privatize_batches([*bl[:6], ["fine", b"bytes"], *bl[6:]], rng=0))
    assert not pp._procs
    it = pp.privatize_batches(bl, rng=1)
    next(it)
    procs = list(pp._procs)
    it.close()  # the caller stops early
    assert procs and not pp._procs and not any(p.is_alive() for p in procs)
    it = pp.privatize_batches(bl, rng=1)
    next(it)
    procs, start = list(pp._procs), time.perf_counter()
    pp.close()  # the caller's own error: the stream is left unfinished and the workers stop at once
    assert time.perf_counter() - start < 2 and not any(p.is_alive() for p in procs)
    it = pp.privatize_batches(bl, rng=1)
    next(it)
    pp._procs[0].kill()
    with pytest.raises(RuntimeError, match="stopped unexpectedly"):
        list(it)
    assert not pp._procs
    assert [out for _, out, _ in pp.privatize_batches(bl, rng=5)] == [out for out, _ in serial_batches(mech, bl, 5)[0]]
    pp.close()


def test_auto_workers(monkeypatch):
    from deniable.backends import text

    monkeypatch.setattr(text, "_cores", lambda: 4)
    assert text.auto_workers(text.AUTO_MIN_CHARS - 1) == (1, 0)
    assert text.auto_workers(text.AUTO_MIN_CHARS) == (3, 0)
    assert text.auto_workers(None) == (3, text.AUTO_MIN_CHARS)
    monkeypatch.setattr(text, "_cores", lambda: 16)
    assert text.auto_workers(10**9)[0] == 15
    monkeypatch.setattr(text, "_cores", lambda: 3)
    assert text.auto_workers(10**9) == (1, 0) and text.auto_workers(None) == (1, 0)
    # workers that sample: one process per core, this one included, from a smaller input, at once
    monkeypatch.setattr(text, "_cores", lambda: 4)
    assert text.auto_workers(text.AUTO_MIN_CHARS_WHOLE - 1, whole=True) == (1, 0)
    assert text.auto_workers(text.AUTO_MIN_CHARS_WHOLE, whole=True) == (4, 0)
    assert text.auto_workers(None, whole=True) == (4, 0)


def test_privatize_parallel_workers(mech):
    texts = corpus(600, seed=8)
    serial = privatize_texts(mech, texts, rng=3)
    assert privatize_parallel(mech, texts, workers=1, rng=3) == serial
    assert privatize_parallel(mech, texts, workers=2, rng=3) == serial
    assert privatize_parallel(mech, texts, workers="auto", rng=3) == serial
    with pytest.raises(ValueError, match="auto"):
        privatize_parallel(mech, texts, workers="many")
    with pytest.raises(TypeError):
        privatize_parallel(mech, texts, workers=2, seed=3)
