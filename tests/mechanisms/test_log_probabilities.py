"""Exact output probabilities in log space: every mechanism with exact probabilities gives
``log_probabilities`` / ``log_probability_rows`` that stay finite on the whole support where
``probabilities`` underflows to 0, agree with ``log(probabilities)`` where it does not, and
satisfy the metric-DP inequality exactly on all pairs (with a planted control that must fail).
Diffractor on the bundled embedding at ε = 1 is the case that underflows in probability space."""

from __future__ import annotations

import math

import numpy as np
import pytest

import deniable
from deniable import Embedding, available_mechanisms, binarize, get_mechanism
from deniable.mechanisms.base import Guarantee, Mechanism, log_probability_rows_of
from deniable.mechanisms.diffractor import Diffractor

from ._metric_dp import assert_metric_dp, distance_matrix, log_rows, metric_dp_excess

#: Small instances (BRR: 8-bit codes, so its exact enumeration applies).
PARAMS: dict[str, dict] = {
    "brr": {"n_bits": 8},
    "santext_plus": {"w": 0.6, "p": 0.3},
    "custext": {"K": 5},
    "knn_tem": {"k": 5},
}
EXACT = ["brr", "custext", "diffractor", "knn_tem", "santext", "santext_plus", "tem"]
N = 30
#: The smallest normal float64: below it probabilities are denormal (or 0) and lose digits.
TINY = float(np.finfo(np.float64).tiny)


def _embedding(n: int = N, dim: int = 6) -> Embedding:
    rng = np.random.default_rng(5)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def _build(name: str, epsilon: float) -> Mechanism:
    kw = dict(PARAMS.get(name, {}))
    emb = _embedding()
    if name == "brr":
        return get_mechanism(name, binarize(emb, n_bits=kw.pop("n_bits"), method="random-projection", rng=0), epsilon=epsilon)
    try:
        return get_mechanism(name, emb, epsilon=epsilon, cache_dir=False, **kw)
    except TypeError:  # no cache_dir parameter
        return get_mechanism(name, emb, epsilon=epsilon, **kw)


def _logsumexp(rows: np.ndarray) -> np.ndarray:
    m = rows.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(rows - m).sum(axis=1, keepdims=True)))[:, 0]


def test_every_registered_mechanism_is_classified() -> None:
    """EXACT lists the mechanisms with exact probabilities (a new one must be added to a list)."""
    for name in available_mechanisms():
        assert _build(name, 1.0).has_exact_probabilities is (name in EXACT), name


@pytest.mark.parametrize("name", EXACT)
def test_log_probabilities_finite_on_the_support_and_equal_to_the_log_of_probabilities(name: str) -> None:
    """At ε = 1 nothing underflows: the log form is log(probabilities), row by row and batched.
    At ε = 800 most probabilities underflow to 0, yet the log form keeps the ε = 1 support, sums
    to 1, and satisfies ε·d-privacy on all pairs (words and UNK) and every output."""
    rows = np.r_[np.arange(N), -1]
    mild = _build(name, 1.0)
    support = None
    for eps in (1.0, 800.0):
        mech = mild if eps == 1.0 else _build(name, eps)
        L = mech.log_probability_rows(rows)
        assert L.shape == (rows.size, N) and L.dtype == np.float64
        assert not np.isnan(L).any() and not np.isposinf(L).any()
        np.testing.assert_allclose(_logsumexp(L), 0.0, atol=1e-9)
        single = np.array([mech.log_probabilities(int(r)) for r in rows])
        np.testing.assert_allclose(single, L, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(log_probability_rows_of(mech, rows), L, rtol=1e-12, atol=1e-12)
        P = np.array([mech.probabilities(int(r)) for r in rows])
        if support is None:
            support = np.isfinite(L)
            np.testing.assert_array_equal(support, P > 0)  # nothing underflows at ε = 1
        np.testing.assert_array_equal(np.isfinite(L), support)  # the support does not depend on ε
        normal = P >= TINY
        np.testing.assert_allclose(L[normal], np.log(P[normal]), rtol=0, atol=1e-12)
        assert_metric_dp(L, distance_matrix(mech, rows), eps)
        if eps == 800.0 and name not in ("custext", "tem"):  # their score ranges shrink as ε grows
            assert (support & (P == 0)).any()  # what a probability-space audit would have lost


@pytest.mark.parametrize("name", ["madlib", "mahalanobis", "vickrey"])
def test_without_exact_probabilities_the_log_form_says_so(name: str) -> None:
    mech = _build(name, 1.0)
    assert not mech.has_exact_probabilities
    for fn in (mech.log_probabilities, mech.probabilities, lambda w: mech.log_probability_rows([w])):
        with pytest.raises(NotImplementedError, match="no closed-form probabilities"):
            fn(0)


def test_brr_beyond_its_enumeration_limit_raises_in_both_forms() -> None:
    mech = get_mechanism("brr", binarize(_embedding(), n_bits=24, method="random-projection", rng=0), epsilon=1.0)
    assert not mech.has_exact_probabilities
    for fn in (mech.log_probabilities, mech.probabilities):
        with pytest.raises(NotImplementedError, match="n_bits <= 16"):
            fn(0)


class _Table(Mechanism):
    """A toy with a fixed output table, defining only ``probabilities`` or only ``log_probabilities``."""

    name = "table"

    def __init__(self, table: np.ndarray, *, epsilon: float = 1.0) -> None:
        super().__init__(_embedding(table.shape[0]), epsilon=epsilon)
        self.table = table

    def _sample_ids(self, ids, rng):
        return ids

    def distance(self, a, b):
        return np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))

    def derive_guarantee(self):
        return Guarantee(self.epsilon, "|x - y|", "toy")


def test_base_contract_derives_one_form_from_the_other() -> None:
    table = np.array([[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]])

    class OnlyProbabilities(_Table):
        def probabilities(self, word_or_id):
            return self.table[self.id_of(word_or_id)].copy()

    class OnlyLog(_Table):
        def log_probabilities(self, word_or_id):
            return log_rows(self.table[self.id_of(word_or_id)])

    for cls in (OnlyProbabilities, OnlyLog):
        mech = cls(table)
        assert mech.has_exact_probabilities
        np.testing.assert_allclose(mech.probabilities(1), table[1])
        np.testing.assert_array_equal(mech.log_probabilities(0), log_rows(table[0]))
        np.testing.assert_array_equal(mech.log_probability_rows([0, 2]), log_rows(table[[0, 2]]))
    neither = _Table(table)  # defines neither form
    assert not neither.has_exact_probabilities
    for fn in (neither.log_probabilities, neither.probabilities, lambda w: neither.log_probability_rows([w])):
        with pytest.raises(NotImplementedError, match="no closed-form probabilities"):
            fn(0)


def test_a_subclass_that_redefines_probabilities_is_read_from_them() -> None:
    """A subclass of a log-native mechanism that redefines only ``probabilities`` changes the
    distribution: the exact consumers read its ``probabilities``, not the parent's log form."""
    emb = _embedding()

    class Flat(deniable.TEM):
        def probabilities(self, word_or_id, **kw):
            return np.full(self.n_words, 1.0 / self.n_words)

    flat = Flat(emb, epsilon=2.0, cache_dir=False)
    np.testing.assert_allclose(log_probability_rows_of(flat, [0, 5, -1]), -math.log(N))
    # control: the inherited log form is TEM's, not flat
    assert not np.allclose(flat.log_probabilities(0), -math.log(N))


# -- Diffractor on the bundled embedding ----------------------------------------------------------


@pytest.fixture(scope="module")
def bundled_diffractor() -> Diffractor:
    """Diffractor at ε = 1 (geometric noise) on the bundled embedding (33,849 words).

    Building the greedy nearest-neighbour chain takes 40 s or more on two cores, and the closed
    form depends on the list only through positions, so the test list is a cheap permutation that,
    like the chain, starts at word 0 ("the", position 0) and puts the other words in order of
    their first coordinate (not the id order, so a position/word mix-up would show)."""
    emb = deniable.load_embedding()
    order = np.r_[0, 1 + np.argsort(emb.vectors[1:, 0], kind="stable")].astype(np.int64)
    mech = Diffractor(emb, epsilon=1.0, cache_dir=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("deniable.mechanisms.diffractor.greedy_word_list", lambda *a, **k: order)
        mech.precompute()
    return mech


def test_bundled_diffractor_the_is_finite_everywhere_and_sums_to_one(bundled_diffractor) -> None:
    mech = bundled_diffractor
    V = mech.n_words
    assert V == 33849 and mech.positions("the").tolist() == [0]
    lp = mech.log_probabilities("the")
    assert lp.shape == (V,) and np.isfinite(lp).all()
    assert abs(math.fsum(np.exp(lp)) - 1.0) < 1e-9
    # the closed form of the truncated geometric mechanism from position 0, written independently
    a = math.exp(-1.0)
    want = np.array([math.log((1 - a) / (1 + a)) - j for j in range(V)])
    want[0] = -math.log1p(a)
    want[V - 1] = -(V - 1) - math.log1p(a)
    np.testing.assert_allclose(lp[mech.precompute()[0]], want, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(lp, mech.log_probability_rows(np.array([0]))[0], rtol=0, atol=0)
    # control: the probability form underflows (what an audit reading it would see)
    p = mech.probabilities("the")
    normal = p >= TINY
    assert (p == 0).sum() > 33000 and (~normal & (p > 0)).any()  # zeros, and denormals beside them
    np.testing.assert_allclose(np.log(p[normal]), lp[normal], rtol=0, atol=1e-12)


def test_bundled_diffractor_exact_metric_dp_on_all_pairs(bundled_diffractor) -> None:
    """ε·d-privacy, exactly, for every pair of 100 words (and UNK) against all 33,849 outputs,
    d the mechanism's own distance; the bound is attained (the truncated geometric mechanism is
    tight). Planted controls: probabilities with ε inflated by 1.1, and the bound at 0.9·ε."""
    mech = bundled_diffractor
    order = mech.precompute()[0]
    rng = np.random.default_rng(0)
    ids = np.r_[order[0], order[-1], order[1], -1, rng.choice(mech.n_words, 96, replace=False)]
    L = mech.log_probability_rows(ids)
    D = distance_matrix(mech, ids)
    assert np.isfinite(L).all() and D.max() == mech.n_words - 1
    excess = assert_metric_dp(L, D, mech.epsilon)
    assert excess > -1e-6  # tight: some pair reaches exp(ε·d)
    sub = slice(0, 30)
    inflated = Diffractor(mech.embedding, epsilon=1.1 * mech.epsilon, cache_dir=False)
    inflated._order, inflated._pos = mech._order, mech._pos  # the same lists
    assert metric_dp_excess(inflated.log_probability_rows(ids[sub]), D[sub, sub], mech.epsilon) > 1.0
    assert metric_dp_excess(L[sub], D[sub, sub], 0.9 * mech.epsilon) > 1.0
    # and the probability form, read as logs, shows one-sided supports (+inf)
    assert metric_dp_excess(log_rows([mech.probabilities(int(i)) for i in ids[sub]]), D[sub, sub], mech.epsilon) == np.inf
