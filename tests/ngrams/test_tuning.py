"""Algorithm 2: report-noisy-min frequencies, the exact score sensitivity, the end-to-end release."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, stats

from deniable import ngrams
from deniable.errors import PrivacyWarning
from deniable.ngrams import paper
from deniable.ngrams.bayesian import prior_mean
from deniable.ngrams.sensitivity import log_count_stats
from deniable.ngrams.tuning import cross_entropy_scores, report_noisy_min, train_score_sensitivity


def tuned(*args, **kwargs):
    """Algorithm 2 (local sensitivities: never formal DP, always a PrivacyWarning)."""
    with pytest.warns(PrivacyWarning, match="local sensitivity"):
        rel = paper.bayesian_tuned_not_dp(*args, **kwargs)
    assert not rel.formal_dp
    return rel


def closed_form_min_probability(scores, b, k=0):
    """P(argmin_j (q_j + e_j) = k), e_j iid Laplace(0, b): ∫ f(x) Π_{j≠k} P(e_j > q_k + x − q_j) dx."""
    lap = stats.laplace(scale=b)

    def integrand(x):
        out = lap.pdf(x)
        for j, q in enumerate(scores):
            if j != k:
                out *= lap.sf(scores[k] + x - q)
        return out

    pts = sorted({q - scores[k] for q in scores} | {0.0})
    val, _ = integrate.quad(integrand, -60 * b, 60 * b, points=pts, limit=400)
    return val


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_report_noisy_min_frequency_matches_closed_form(eps):
    scores = np.array([1.0, 0.0, 0.7, 2.5])  # true minimum at index 1
    sens = 0.5
    b = 2 * sens / eps
    n = 200_000
    picks = report_noisy_min(scores, sensitivity=sens, epsilon=eps, rng=42, size=n)
    for k in range(len(scores)):
        expected = closed_form_min_probability(scores, b, k)
        freq = float(np.mean(picks == k))
        tol = 4.5 * math.sqrt(expected * (1 - expected) / n)
        assert abs(freq - expected) <= tol, (k, freq, expected, tol)
    # the true minimum is the most frequent choice, more so at larger epsilon
    assert np.bincount(picks, minlength=4).argmax() == 1


def test_report_noisy_min_single_and_validation():
    assert report_noisy_min(np.array([3.0, 1.0, 2.0]), sensitivity=0.0, epsilon=1.0, rng=0) == 1
    with pytest.raises(ValueError):
        report_noisy_min(np.array([]), sensitivity=1.0, epsilon=1.0)
    with pytest.raises(ValueError):
        report_noisy_min(np.array([1.0]), sensitivity=-1.0, epsilon=1.0)


@pytest.mark.parametrize("seed", range(8))
def test_train_score_sensitivity_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    U, V = int(rng.integers(2, 12)), int(rng.integers(3, 12))
    dense = rng.integers(1, 4, size=(U, V)) * (rng.random((U, V)) < 0.5)
    m = ngrams.clamp_counts(sp.csr_matrix(dense), 2)
    mu_p = prior_mean(rng.integers(0, 50, V).astype(float))
    c1 = rng.integers(0, 20, V).astype(float)
    rhos = [0.2, 0.7, 1.0]

    def q_of(x, S, rho):
        st = log_count_stats(x)
        mu = rho * np.minimum(1, S * st.N / 2) * st.xhat + (1 - rho) * mu_p
        return cross_entropy_scores(c1, mu[None])[0]

    for S in (0.05, 0.5, 3.0):
        got = train_score_sensitivity(m, log_count_stats(m), S, 2, rhos, mu_p, c1, chunk_nnz=4)
        for k, rho in enumerate(rhos):
            q = q_of(m, S, rho)
            bf = max(abs(q - q_of(m[np.setdiff1d(np.arange(U), [n])], S, rho)) for n in range(U))
            assert bf <= got[k] <= bf * (1 + 1e-6) + 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_train_score_sensitivity_with_noise_offsets_equals_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    U, V = int(rng.integers(2, 10)), int(rng.integers(3, 10))
    dense = rng.integers(1, 3, size=(U, V)) * (rng.random((U, V)) < 0.6)
    m = ngrams.clamp_counts(sp.csr_matrix(dense), 1)
    mu_p = prior_mean(rng.integers(0, 50, V).astype(float))
    c1 = rng.integers(0, 9, V).astype(float)
    rhos = [0.3, 0.9]
    offsets = [rng.normal(0, 2.0, size=(3, V)) for _ in rhos]
    S = 0.4
    got = train_score_sensitivity(m, log_count_stats(m), S, 1, rhos, mu_p, c1, offsets=offsets, chunk_nnz=5)

    def q_of(x, rho, off):
        st = log_count_stats(x)
        mu = rho * np.minimum(1, S * st.N) * st.xhat + (1 - rho) * mu_p
        return cross_entropy_scores(c1, mu[None] + off).mean()

    for k, rho in enumerate(rhos):
        q = q_of(m, rho, offsets[k])
        bf = max(abs(q - q_of(m[np.setdiff1d(np.arange(U), [n])], rho, offsets[k])) for n in range(U))
        assert bf <= got[k] <= bf * (1 + 1e-6) + 1e-6


def test_expected_score_avoids_high_noise_candidates():
    """The paper's mean score ignores sigma and picks the low-bias, high-noise candidate; the expected
    score does not. Nearly all of epsilon goes to tuning so the selection itself is almost noiseless,
    while the release runs at epsilon 1 (sparse users: rho=0.95 has a large sigma)."""
    rng = np.random.default_rng(8)
    V = 200
    probs = rng.dirichlet(np.ones(V) * 0.1)
    dense = sp.csr_matrix(np.stack([rng.multinomial(5, probs) for _ in range(400)]))
    alpha = (probs * 1000 + rng.integers(0, 5, V)).astype(float)
    kw = dict(epsilon=2000.0, delta=1e-6, S_grid=[1e-3, 10.0], rho_grid=[0.1, 0.95], tune_fraction=1 - 1 / 2000)
    for seed in range(3):
        exp_pick = tuned(dense, alpha, score="expected", rng=seed, **kw)
        mean_pick = tuned(dense, alpha, score="mean", rng=seed, **kw)
        assert exp_pick.params["score"] == "expected" and exp_pick.params["n_noise_draws"] == 4
        assert mean_pick.diagnostics["rho"] == 0.95 and exp_pick.diagnostics["rho"] == 0.1
        assert exp_pick.sigma < mean_pick.sigma / 5
        assert ngrams.kl_divergence(probs, exp_pick.probabilities) < ngrams.kl_divergence(probs, mean_pick.probabilities)
    with pytest.raises(ValueError, match="score"):
        paper.bayesian_tuned_not_dp(dense, alpha, score="median", **kw)


def test_end_to_end_dp_reports_budget_and_choice():
    rng = np.random.default_rng(0)
    dense = rng.integers(1, 3, size=(60, 25)) * (rng.random((60, 25)) < 0.3)
    alpha = rng.integers(1, 100, 25).astype(float)
    rel = tuned(sp.csr_matrix(dense), alpha, epsilon=3.0, delta=1e-6, S_grid=[0.01, 1.0], rho_grid=[0.2, 0.8], rng=1)
    p, d = rel.params, rel.diagnostics
    assert rel.mechanism == "bayesian-tuned"
    assert rel.epsilon == 3.0 and rel.delta == 1e-6
    assert p["epsilon_release"] == pytest.approx(2.0) and p["epsilon_tune"] == pytest.approx(1.0)
    assert d["S"] in (0.01, 1.0) and d["rho"] in (0.2, 0.8)
    assert d["n_validation_users"] == 6 and d["n_train_users"] == 54
    assert rel.sigma == pytest.approx(ngrams.analytic_sigma(2.0, 1e-6, d["rho"] * d["gamma"]))
    assert rel.laplace_scale == pytest.approx(2 * d["tuning_sensitivity"] / 1.0)
    assert np.isclose(rel.probabilities.sum(), 1.0)
    # published metadata: public parameters only (grids, split of epsilon), not the local choice
    meta = rel.metadata()
    assert meta["formal_dp"] is False and not {"sigma", "sensitivity", "laplace_scale"} & set(meta)
    assert not {"S", "rho", "gamma", "tuning_sensitivity", "n_train_users", "n_validation_users"} & set(meta["params"])
    assert meta["params"]["S_grid"] == [0.01, 1.0]
    again = tuned(sp.csr_matrix(dense), alpha, epsilon=3.0, delta=1e-6, S_grid=[0.01, 1.0], rho_grid=[0.2, 0.8], rng=1)
    np.testing.assert_array_equal(rel.probabilities, again.probabilities)  # seeded => reproducible


def test_end_to_end_dp_picks_the_clear_winner_at_large_epsilon():
    # private data = public data shape: rho near 1 with w=1 is clearly best in cross-entropy
    rng = np.random.default_rng(5)
    V = 30
    probs = rng.dirichlet(np.ones(V) * 0.3)
    dense = np.stack([rng.multinomial(60, probs) for _ in range(400)])
    alpha = rng.integers(1, 100, V).astype(float)  # an unrelated prior
    picks = [tuned(sp.csr_matrix(dense), alpha, epsilon=2000.0, delta=1e-6, C=5, S_grid=[1e-3, 10.0], rho_grid=[0.05, 0.95], rng=s).diagnostics for s in range(5)]
    assert all((p["S"], p["rho"]) == (10.0, 0.95) for p in picks)


def test_end_to_end_dp_validation():
    m = sp.csr_matrix(np.ones((1, 3)))
    with pytest.raises(ValueError, match="at least 2 users"):
        paper.bayesian_tuned_not_dp(m, np.ones(3), epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError):
        paper.bayesian_tuned_not_dp(sp.csr_matrix(np.ones((4, 3))), np.ones(3), epsilon=1.0, delta=1e-5, sensitivity=0.5)


def test_end_to_end_dp_with_claim1_uses_the_corrected_lipschitz_bound():
    rng = np.random.default_rng(2)
    dense = sp.csr_matrix(rng.integers(1, 3, size=(50, 15)) * (rng.random((50, 15)) < 0.4))
    alpha = rng.integers(1, 50, 15).astype(float)
    ex = tuned(dense, alpha, epsilon=1.0, delta=1e-6, S_grid=[0.1], rho_grid=[0.5], rng=0)
    c1 = tuned(dense, alpha, epsilon=1.0, delta=1e-6, S_grid=[0.1], rho_grid=[0.5], sensitivity="claim1", rng=0)
    assert c1.sensitivity_method == "claim1"
    # the bound is never below the exact training-user term
    assert c1.diagnostics["tuning_sensitivity_train"] >= ex.diagnostics["tuning_sensitivity_train"]
    assert c1.diagnostics["gamma"] >= ex.diagnostics["gamma"]
