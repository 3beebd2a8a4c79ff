"""BRR: flip rate, exact output distribution, metric-DP inequality on all pairs, sampler vs exact
distribution, text interface, construction paths."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from deniable import Embedding, get_mechanism
from deniable.binary import BinaryEmbedding, load_default_binary_embedding
from deniable.errors import DeniableWarning
from deniable.mechanisms.brr import BRR

from ._metric_dp import assert_metric_dp, distance_matrix

TINY_BITS = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1],
    ],
    dtype=bool,
)


def tiny(eps=1.0, **kw):
    be = BinaryEmbedding.from_bits(["aa", "bb", "cc", "dd", "ee", "ff"], TINY_BITS, unk_bits=np.array([0, 1, 0, 1, 0, 1, 0, 1], bool))
    return BRR(be, epsilon=eps, index="exact", **kw)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_flip_rate_matches_closed_form(eps):
    be = BinaryEmbedding(["a", "b"], np.zeros((2, 4), np.uint64), n_bits=256)
    mech = BRR(be, epsilon=eps, index="exact")
    n_words = 4096  # 4096 * 256 = 1,048,576 bits
    noisy = mech.randomize_codes(np.zeros((n_words, 4), np.uint64), rng=11)
    flips = int(np.bitwise_count(noisy).sum())
    n = n_words * 256
    p = 1.0 / (1.0 + math.exp(eps))
    assert mech.flip_probability == pytest.approx(p, rel=1e-12)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(flips - n * p) < 5 * sd, (flips, n * p)


def test_flip_probability_stable_for_huge_epsilon():
    be = BinaryEmbedding(["a"], np.zeros((1, 1), np.uint64), n_bits=8)
    assert 0 <= BRR(be, epsilon=1000.0, index="exact").flip_probability < 1e-300


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
def test_exact_distribution_satisfies_metric_dp_on_all_pairs(eps):
    mech = tiny(eps)
    ids = list(range(6)) + [-1]
    P = {w: mech.probabilities(w) for w in ids}
    for w in ids:
        assert P[w].sum() == pytest.approx(1.0, abs=1e-12)
        assert (P[w] > 0).all()
    assert_metric_dp(mech.log_probability_rows(ids), distance_matrix(mech, ids), eps, atol=1e-12)
    worst = 0.0
    for w in ids:
        for w2 in ids:
            d = float(mech.distance(np.array([w]), np.array([w2]))[0])
            worst = max(worst, float(np.max(np.log(P[w] / P[w2]) / max(d, 1e-300))) if d else 0.0)
    # the test can fail: the bound is tight up to a factor, and half the epsilon is violated
    assert worst > eps / 2


def test_exact_distribution_hand_computed():
    # two words 00 and 11 (2 bits): noisy 01/10 are tied -> each word gets half.
    be = BinaryEmbedding.from_bits(["x", "y"], np.array([[0, 0], [1, 1]], bool))
    mech = BRR(be, epsilon=1.0, index="exact")
    p = mech.flip_probability
    expected_x = (1 - p) ** 2 + p * (1 - p)  # 00 itself, plus half of (01, 10)
    assert mech.probabilities("x") == pytest.approx([expected_x, 1 - expected_x], abs=1e-15)


def test_probabilities_refuses_big_codes():
    be = BinaryEmbedding(["a", "b"], np.zeros((2, 1), np.uint64), n_bits=17)
    with pytest.raises(NotImplementedError, match="n_bits"):
        BRR(be, epsilon=1.0, index="exact").probabilities(0)


@pytest.mark.slow
@pytest.mark.parametrize("word", [0, 2, 3, -1])
def test_sampler_matches_exact_distribution(word):
    mech = tiny(0.8)
    n = 40_000
    out = mech.sample_ids(np.full(n, word), rng=1000 + word)
    counts = np.bincount(out, minlength=6)
    expected = mech.probabilities(word) * n
    assert (expected > 5).all()
    p = stats.chisquare(counts, expected).pvalue
    assert p > 1e-4, (counts, expected)


def test_sampler_matches_exact_distribution_faiss():
    pytest.importorskip("faiss")
    mech = tiny(0.8)
    fast = BRR(mech.binary_embedding, epsilon=0.8, index="faiss-flat")
    ids = np.repeat(np.arange(-1, 6), 500)
    assert np.array_equal(mech.sample_ids(ids, rng=4), fast.sample_ids(ids, rng=4))


def test_output_is_always_a_vocabulary_word_and_oov_is_unk():
    mech = tiny(0.5)
    out = mech.privatize("zzz qqq aa", rng=0)
    words = out.split(" ")
    assert all(w in {"aa", "bb", "cc", "dd", "ee", "ff"} for w in words)
    assert "zzz" not in out and "qqq" not in out
    assert mech.privatize("Aa, BB!", rng=0)[2] == ","
    out = mech.privatize(["Hello WORLD", "aa"], rng=3)
    assert out[0][0].isupper() and out[0].split(" ")[1].isupper()


def test_guarantee_and_repr():
    mech = tiny(2.0)
    g = mech.guarantee
    assert g.epsilon == 2.0 and "Hamming" in g.metric and "UNK" in g.domain
    assert "BRR(epsilon=2" in repr(mech)
    assert mech.privacy_loss_bound("aa", "ff") == pytest.approx(16.0)


def test_validation():
    be = tiny().binary_embedding
    with pytest.raises(ValueError):
        BRR(be, epsilon=0)
    with pytest.raises(TypeError):
        BRR(be, epsilon="1")
    with pytest.raises(TypeError, match="BinaryEmbedding"):
        BRR(np.zeros((3, 3)), epsilon=1.0)
    with pytest.raises(ValueError, match="index"):
        BRR(be, epsilon=1.0, index="annoy")


def test_get_mechanism_paths():
    default = load_default_binary_embedding()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeniableWarning)
        m = get_mechanism("brr", epsilon=1.0)  # bundled embedding -> prebuilt codes, no training
    assert m.binary_embedding is default and m.n_bits == 256 and len(default) == 33849
    m2 = get_mechanism("brr", default, epsilon=2.0)
    assert m2.binary_embedding is default
    out = m.privatize("the quick brown fox", rng=0)
    assert len(out.split(" ")) == 4


def test_other_embedding_is_binarized_with_a_warning():
    rng = np.random.default_rng(0)
    emb = Embedding([f"w{i}" for i in range(50)], rng.standard_normal((50, 8)).astype(np.float32))
    with pytest.warns(DeniableWarning, match="trains a model"):
        m = get_mechanism("brr", emb, epsilon=1.0, n_bits=8, method="random-projection")
    assert m.binary_embedding.n_bits == 8 and m.binary_embedding.metadata["source_fingerprint"] == emb.fingerprint
    assert m.binary_embedding.unk_method == "encoded-mean"


def test_probabilities_refuses_big_enumeration_table_and_says_the_limit():
    # 16 bits is allowed, but 2^16 * 300 > 2^24 cells: the message states both limits
    rng = np.random.default_rng(0)
    be = BinaryEmbedding.from_bits([f"w{i}" for i in range(300)], rng.random((300, 16)) < 0.5)
    with pytest.raises(NotImplementedError, match=r"2\^n_bits \* V <= 2\^24 \(at most 256 words at n_bits=16\)"):
        BRR(be, epsilon=1.0, index="exact").probabilities(0)
    small = BinaryEmbedding.from_bits(be.words[:256], rng.random((256, 16)) < 0.5)
    p = BRR(small, epsilon=1.0, index="exact").probabilities(0)  # exactly at the limit: works
    assert p.shape == (256,) and p.sum() == pytest.approx(1.0, abs=1e-12)
