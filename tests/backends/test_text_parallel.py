"""ParallelPrivatizer: worker processes give byte-identical output to the serial text path."""

from __future__ import annotations

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
