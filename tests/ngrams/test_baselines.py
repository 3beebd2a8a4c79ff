"""Laplace, Laplace + public and k-anonymity baselines (§4.2, §4.5)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from deniable import ngrams
from deniable.errors import DeniableWarning, PrivacyWarning
from deniable.ngrams import paper
from deniable.ngrams.baselines import laplace_public_sensitivity


def counts(seed=0, users=30, vocab=12):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.integers(1, 6, size=(users, vocab)) * (rng.random((users, vocab)) < 0.4))


def test_laplace_release_fields_and_threshold():
    m = counts()
    rel = ngrams.laplace_release(m, epsilon=0.5, W=3, rng=0)
    assert rel.mechanism == "laplace" and rel.epsilon == 0.5 and rel.delta == 0.0
    assert rel.laplace_scale == pytest.approx(3 / 0.5) and rel.sensitivity == 3 and rel.sensitivity_method == "cap"
    assert np.all(rel.probabilities >= 0) and np.isclose(rel.probabilities.sum(), 1)
    assert "add/remove" in rel.guarantee and rel.formal_dp
    meta = rel.metadata()  # W given by the caller: the scale is public, the user count is not
    assert meta["formal_dp"] is True and meta["params"]["W"] == 3 and meta["laplace_scale"] == pytest.approx(6)
    assert "n_users" not in meta["params"] and rel.diagnostics["n_users"] == 30


def test_laplace_noise_scale_statistically():
    # with a huge epsilon the release equals the capped, normalised counts
    m = counts(1)
    rel = ngrams.laplace_release(m, epsilon=1e9, W=2, rng=0)
    capped = ngrams.cap_user_totals(m, 2)
    c = np.asarray(capped.sum(axis=0)).ravel()
    np.testing.assert_allclose(rel.probabilities, c / c.sum(), atol=1e-6)


def test_laplace_public_sensitivity_matches_brute_force():
    for seed in range(6):
        m = ngrams.cap_user_totals(counts(seed, users=int(3 + seed), vocab=8), 5)
        dense = m.toarray()

        def f(x):
            T = x.sum()
            return x.sum(axis=0) / T if T > 0 else np.zeros(x.shape[1])

        bf = max(np.abs(f(dense) - f(np.delete(dense, n, axis=0))).sum() for n in range(dense.shape[0]))
        assert laplace_public_sensitivity(m) == pytest.approx(bf, rel=1e-10)


def test_laplace_public_release_recovers_private_at_large_epsilon():
    m = counts(2)
    alpha = np.arange(1, 13, dtype=float)
    with pytest.warns(PrivacyWarning, match="local sensitivity"):
        rel = ngrams.laplace_public_release(m, alpha, epsilon=1e9, W=100, rng=0)
    c = np.asarray(m.sum(axis=0)).ravel()
    np.testing.assert_allclose(rel.probabilities, c / c.sum(), atol=1e-6)
    assert rel.mechanism == "laplace-public" and rel.sensitivity_method == "exact"
    # local L1 sensitivity: not formal DP, and the sensitivity/scale are diagnostics only
    assert not rel.formal_dp and "NOT a formal differential-privacy guarantee" in rel.guarantee
    meta = rel.metadata()
    assert "sensitivity" not in meta and "laplace_scale" not in meta
    assert rel.diagnostics["sensitivity"] == pytest.approx(laplace_public_sensitivity(ngrams.cap_user_totals(m, 100)))


def test_laplace_public_with_global_bound_is_formal():
    m = counts(2)
    alpha = np.arange(1, 13, dtype=float)
    rel = ngrams.laplace_public_release(m, alpha, epsilon=0.5, W=10, sensitivity=2.0, rng=0)
    assert rel.formal_dp and rel.sensitivity_method == "given" and rel.laplace_scale == pytest.approx(4.0)
    assert rel.metadata()["params"]["sensitivity_bound"] == 2.0
    # the bound 2 is never below the exact local value, whatever the data
    for seed in range(5):
        assert laplace_public_sensitivity(ngrams.cap_user_totals(counts(seed, users=2 + seed), 5)) <= 2.0
    with pytest.warns(PrivacyWarning, match="user count"):
        rel = ngrams.laplace_public_release(m, alpha, epsilon=0.5, W="paper-rule", sensitivity=2.0, rng=0)
    assert not rel.formal_dp
    with pytest.raises(ValueError, match="sensitivity"):
        ngrams.laplace_public_release(m, alpha, epsilon=0.5, W=10, sensitivity="claim1")


def test_k_anonymity_keeps_only_ngrams_of_K_users():
    dense = np.array([[1, 1, 0], [2, 0, 0], [1, 0, 5]])
    with pytest.warns(PrivacyWarning, match="NOT differentially private"):
        rel = ngrams.k_anonymity_release(sp.csr_matrix(dense), K=2, keys=["a", "b", "c"])
    assert rel.probabilities.tolist() == [1.0, 0.0, 0.0]
    assert rel.epsilon is None and "NOT differentially private" in rel.guarantee and not rel.formal_dp
    assert rel.metadata()["params"] == {"K": 2, "vocabulary_size": 3} and rel.diagnostics["kept"] == 1
    with pytest.warns(PrivacyWarning), pytest.warns(DeniableWarning, match="uniform"):
        rel = ngrams.k_anonymity_release(sp.csr_matrix(dense), K=10)
    assert np.allclose(rel.probabilities, 1 / 3)


def test_formal_laplace_and_the_paper_rule():
    m = counts(3, users=40)
    for prior in (None, np.ones(12)):
        # the formal release bounds contributions itself (k n-grams, clamp C): no W needed, no warning
        rel = ngrams.release_laplace(m, prior, epsilon=1.0, max_ngrams_per_user=4, C=2, sampler="numpy", rng=0)
        assert rel.formal_dp and rel.sensitivity == (8.0 if prior is None else 2.0) and rel.sampler == "numpy"
        assert rel.mechanism == ("laplace" if prior is None else "laplace-public")
        with pytest.raises(ValueError, match="data dependent"):  # the paper's rule is not reachable from the formal API
            ngrams.release_laplace(m, prior, epsilon=1.0, W="paper-rule")
    with pytest.raises(ValueError, match="cap\\) is required"):  # the paper's Laplace + public needs an explicit W
        paper.laplace_public_not_dp(m, np.ones(12), epsilon=1.0, W=None)
    with pytest.raises(ValueError, match="release_laplace"):  # a numeric W and bound: formal, so not a paper mode
        paper.laplace_public_not_dp(m, np.ones(12), epsilon=1.0, W=3.0, sensitivity=2.0)
    with pytest.raises(ValueError, match="paper-rule"):
        ngrams.laplace_release(m, epsilon=1.0, W="rule")
    with pytest.warns(PrivacyWarning, match="user count"):
        rel = paper.laplace_not_dp(m, epsilon=1.0, rng=0)
    assert not rel.formal_dp and rel.diagnostics["W"] == 1.0  # max(1, 40/1000)
    meta = rel.metadata()  # the data-derived W and scale are not published
    assert meta["params"]["W"] == "paper-rule" and "laplace_scale" not in meta and "sensitivity" not in meta
    rel = ngrams.release_laplace(m, epsilon=1.0, W=1.0, rng=0)
    assert rel.formal_dp and rel.params["W"] == 1.0 and rel.sensitivity == 1.0 and rel.sensitivity_method == "cap"
    with pytest.raises(ValueError, match="below the derived global L1 sensitivity"):
        ngrams.release_laplace(m, epsilon=1.0, W=1.0, sensitivity=0.5, rng=0)
    with pytest.raises(ValueError, match="below the derived global L1 sensitivity 2"):
        ngrams.release_laplace(m, np.ones(12), epsilon=1.0, sensitivity=1.0, rng=0)
    with pytest.raises(ValueError, match="below the derived global L1 sensitivity 2"):
        ngrams.laplace_public_release(m, np.ones(12), epsilon=1.0, W=1.0, sensitivity=1.0)


def test_deprecated_release_dispatch_errors():
    m = counts(3, users=40)
    for mech in ("laplace", "laplace-public"):
        with pytest.raises(ValueError, match="W is required"):  # the paper's modes still need an explicit W
            ngrams.release(m, np.ones(12), epsilon=1.0, delta=1e-5, mechanism=mech, local_sensitivity=True, rng=0)
    with pytest.raises(ValueError, match="mechanism"):
        ngrams.release(m, np.ones(12), epsilon=1.0, delta=1e-5, mechanism="nope")
    with pytest.raises(ValueError, match="bayesian mechanism only"):
        ngrams.release(m, np.ones(12), epsilon=1.0, delta=1e-5, mechanism="laplace", tune=True)


def test_public_and_private_references():
    m = counts(4)
    pub = ngrams.public_release(np.arange(12.0), [str(i) for i in range(12)])
    assert pub.probabilities[0] == 0 and np.isclose(pub.probabilities.sum(), 1)
    assert pub.formal_dp
    with pytest.warns(PrivacyWarning, match="NOT PRIVATE"):
        priv = ngrams.private_release(m)
    assert "NOT PRIVATE" in priv.guarantee and not priv.formal_dp
