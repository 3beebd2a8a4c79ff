"""Algorithm 1: the mean of Corollary 1, the release record and its validation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from deniable import ngrams
from deniable.errors import PrivacyWarning
from deniable.ngrams import paper


def data(seed=0, users=20, vocab=10):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.integers(1, 4, size=(users, vocab)) * (rng.random((users, vocab)) < 0.5)), rng.integers(0, 40, vocab).astype(float)


def test_mean_is_corollary_1():
    m, alpha = data()
    S, rho, C = 0.3, 0.6, 2
    plan = ngrams.prepare_bayesian(m, alpha, epsilon=1.0, delta=1e-6, S=S, rho=rho, C=C)
    x = np.minimum(m.toarray(), C)
    c, N = x.sum(0), (x > 0).sum(0)
    xhat = np.log(c + 1) - np.log(c + 1).mean()
    mu_p = np.log(alpha + 1) - np.log(alpha + 1).mean()
    np.testing.assert_allclose(plan.mu, rho * np.minimum(1, S * N / C) * xhat + (1 - rho) * mu_p)


def test_release_is_softmax_of_a_gaussian_sample():
    m, alpha = data(1)
    plan = ngrams.prepare_bayesian(m, alpha, epsilon=1.0, delta=1e-6)
    assert not plan.formal_dp
    draws = plan.sample(rng=0, size=40_000)
    # log-probabilities differences are Gaussian around the mean differences with sd sigma*sqrt(2)
    diff = draws[:, 0] - draws[:, 1]
    assert abs(diff.mean() - (plan.mu[0] - plan.mu[1])) < 4.5 * plan.sigma * np.sqrt(2) / np.sqrt(40_000)
    assert abs(diff.std() / (plan.sigma * np.sqrt(2)) - 1) < 0.02
    with pytest.warns(PrivacyWarning, match="local sensitivity"):
        rel = plan.release(rng=3)
    assert np.isclose(rel.probabilities.sum(), 1) and np.all(rel.probabilities > 0)


def test_release_record_contents():
    m, alpha = data(2)
    keys = [f"k{i}" for i in range(10)]
    with pytest.warns(PrivacyWarning, match="NOT a formal differential-privacy guarantee"):
        rel = paper.bayesian_not_dp(m, alpha, epsilon=0.5, delta=1e-6, S=0.2, rho=0.4, C=1, keys=keys, rng=0)
    assert rel.keys == tuple(keys) and rel.mechanism == "bayesian"
    assert rel.epsilon == 0.5 and rel.delta == 1e-6 and rel.calibration == "analytic"
    assert rel.sensitivity_method == "exact" and rel.params["S"] == 0.2 and rel.params["rho"] == 0.4
    assert not rel.formal_dp and ngrams.LOCAL_SENSITIVITY_NOTE in rel.guarantee
    meta = rel.metadata()
    assert meta["params"]["C"] == 1 and meta["formal_dp"] is False and meta["guarantee"] == rel.guarantee
    # the local sigma, gamma and the user count are diagnostics only, never in the metadata
    assert not {"sigma", "sensitivity", "laplace_scale", "diagnostics"} & set(meta)
    assert not {"n_users", "gamma"} & set(meta["params"])
    assert rel.diagnostics["sigma"] == rel.sigma and rel.diagnostics["n_users"] == 20 and rel.diagnostics["gamma"] > 0
    assert rel.top(2)[0][1] >= rel.top(2)[1][1]
    with pytest.warns(PrivacyWarning):
        same = paper.bayesian_not_dp(m, alpha, epsilon=0.5, delta=1e-6, S=0.2, rho=0.4, C=1, keys=keys, rng=0)
    np.testing.assert_array_equal(rel.probabilities, same.probabilities)


def test_caller_number_on_the_paper_path_is_not_formal():
    """Issue 9: a number passed to the paper's Algorithm 1 is not backed by any enforced bound on
    the n-grams per user, so it never makes a release formal (it used to)."""
    m, alpha = data(3)
    with pytest.warns(PrivacyWarning, match="did not derive"):
        rel = paper.bayesian_not_dp(m, alpha, epsilon=1.0, delta=1e-6, sensitivity=3.0, rng=0)
    assert rel.sensitivity_method == "given" and not rel.formal_dp
    assert rel.sigma == pytest.approx(ngrams.analytic_sigma(1.0, 1e-6, 0.5 * 3.0))
    assert "sigma" not in rel.metadata()
    with pytest.warns(PrivacyWarning), pytest.deprecated_call(match="paper.bayesian_not_dp"):
        rel = ngrams.release(m, alpha, epsilon=1.0, delta=1e-6, sensitivity=3.0, local_sensitivity=True, rng=0)  # the deprecated route
    assert not rel.formal_dp


def test_default_release_is_formal_and_silent():
    """Only epsilon and delta: formal (ε, δ)-DP, no PrivacyWarning (the filterwarnings=error setting
    of the suite turns any into a failure), sensitivity derived from the enforced bounds."""
    m, alpha = data(3)
    rel = ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6)
    assert rel.formal_dp and rel.sensitivity_method == "derived" and rel.mechanism == "bayesian"
    assert rel.sensitivity == pytest.approx(np.sqrt(ngrams.DEFAULT_MAX_NGRAMS_PER_USER))  # C * sqrt(k), C = 1
    assert rel.sampler in ("opendp", "numpy") and rel.sampler in rel.guarantee
    meta = rel.metadata()
    assert meta["formal_dp"] is True and meta["sigma"] == rel.sigma and meta["sampler"] == rel.sampler
    assert meta["params"]["max_ngrams_per_user"] == ngrams.DEFAULT_MAX_NGRAMS_PER_USER and "n_users" not in meta["params"]
    rel = ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, sensitivity=20.0, sampler="numpy", rng=0)
    assert rel.formal_dp and rel.sensitivity == 20.0 and rel.sensitivity_method == "given"
    assert rel.sigma == pytest.approx(ngrams.analytic_sigma(1.0, 1e-6, 20.0))
    with pytest.raises(ValueError, match="below the derived global L2 sensitivity"):
        ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, sensitivity=2.0)
    for local in ("exact", "claim1"):
        with pytest.raises(ValueError, match="deniable.ngrams.paper"):
            ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, sensitivity=local)
    with pytest.raises(TypeError):
        ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, local_sensitivity=True)  # the paper's modes are not reachable here


def test_local_sigma_depends_on_the_data_and_is_not_formal():
    """The review's reproduction: with the exact (or Claim 1) sensitivity sigma(D) differs from
    sigma(D - n), so publishing it would distinguish D from D - n with certainty."""
    rng = np.random.default_rng(0)
    dense = rng.poisson(0.5, size=(30, 8))
    alpha = np.ones(8)
    for method in ("exact", "claim1"):
        sig = [ngrams.prepare_bayesian(sp.csr_matrix(x), alpha, epsilon=1.0, delta=1e-6, S=0.1, rho=0.5, sensitivity=method).sigma for x in (dense, dense[1:], np.delete(dense, 2, axis=0))]
        assert len({round(s, 12) for s in sig}) > 1, method
        with pytest.warns(PrivacyWarning):
            assert not paper.bayesian_not_dp(dense, alpha, epsilon=1.0, delta=1e-6, S=0.1, rho=0.5, sensitivity=method, rng=0).formal_dp
    # the formal release: the same sigma on every neighbour
    sig = {ngrams.release_bayesian(sp.csr_matrix(x), alpha, epsilon=1.0, delta=1e-6, S=0.1, rho=0.5, sampler="numpy", rng=0).sigma for x in (dense, dense[1:])}
    assert len(sig) == 1


def test_classic_calibration_option():
    m, alpha = data(4)
    with pytest.warns(PrivacyWarning, match="local sensitivity"):
        rel = paper.bayesian_not_dp(m, alpha, epsilon=0.5, delta=1e-6, calibration="classic", rng=0)
    assert rel.calibration == "classic"
    assert rel.sigma == pytest.approx(ngrams.classic_sigma(0.5, 1e-6, rel.sensitivity))
    with pytest.warns(PrivacyWarning, match="local sensitivity"), pytest.warns(PrivacyWarning, match="epsilon < 1"):
        paper.bayesian_not_dp(m, alpha, epsilon=2.0, delta=1e-6, calibration="classic", rng=0)
    # a given number on this path is never formal (no enforced bound backs it)
    with pytest.warns(PrivacyWarning, match="did not derive"), pytest.warns(PrivacyWarning, match="epsilon < 1"):
        rel = paper.bayesian_not_dp(m, alpha, epsilon=2.0, delta=1e-6, calibration="classic", sensitivity=1.0, rng=0)
    assert not rel.formal_dp and "sigma" not in rel.metadata()


def test_rho_zero_is_the_public_prior_without_noise():
    m, alpha = data(5)
    with pytest.warns(PrivacyWarning):
        rel = paper.bayesian_not_dp(m, alpha, epsilon=1.0, delta=1e-6, rho=0.0, rng=0)
    assert rel.sigma == 0.0
    expected = np.exp(ngrams.prior_mean(alpha))
    np.testing.assert_allclose(rel.probabilities, expected / expected.sum())


def test_public_counts_as_mapping_and_validation():
    m, alpha = data(6)
    keys = [f"k{i}" for i in range(10)]
    rel = ngrams.release_bayesian(m, dict(zip(keys, alpha)), keys=keys, epsilon=1.0, delta=1e-6, rng=0)
    assert len(rel) == 10 and rel.keys == tuple(keys)
    with pytest.raises(ValueError, match="entries"):
        paper.bayesian_not_dp(m, alpha[:5], epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError):
        paper.bayesian_not_dp(m, alpha, epsilon=-1.0, delta=1e-6)
    with pytest.raises(ValueError):
        paper.bayesian_not_dp(m, alpha, epsilon=1.0, delta=0.0)
    with pytest.raises(ValueError):
        paper.bayesian_not_dp(m, alpha, epsilon=1.0, delta=1e-6, rho=1.5)
    with pytest.raises(ValueError, match="sensitivity"):
        paper.bayesian_not_dp(m, alpha, epsilon=1.0, delta=1e-6, sensitivity="loose")
    with pytest.raises(TypeError):
        paper.bayesian_not_dp(m, alpha, epsilon=1.0, delta=1e-6, sensitivity=True)
    with pytest.raises(TypeError):
        ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="max_ngrams_per_user"):
        ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, max_ngrams_per_user=0)
    with pytest.raises(TypeError, match="max_ngrams_per_user"):
        ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, max_ngrams_per_user=2.5)
    with pytest.raises(ValueError, match="sampler"):
        ngrams.release_bayesian(m, alpha, epsilon=1.0, delta=1e-6, sampler="gpu")
