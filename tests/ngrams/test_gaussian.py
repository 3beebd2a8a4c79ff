"""Analytic Gaussian calibration (Balle & Wang 2018) vs the classic one; sampled (ε, δ)-DP check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, stats

from deniable import ngrams
from deniable.errors import PrivacyWarning
from deniable.ngrams.gaussian import analytic_sigma, calibrate_sigma, classic_sigma, gaussian_delta

EPSILONS = [0.01, 0.05, 0.1, 0.2, 0.5, 0.9, 0.99, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0]
DELTAS = [1e-2, 1e-5, 1e-8, 1e-12]


def delta_by_integration(eps: float, sigma: float, sens: float) -> float:
    """δ(ε) = ∫ max(0, p(x) − e^ε q(x)) dx, p = N(Δ, σ²), q = N(0, σ²): independent of the closed form."""
    # p > e^eps q  <=>  x > x0
    x0 = sigma**2 * eps / sens + sens / 2
    p_tail = stats.norm.sf(x0, loc=sens, scale=sigma)
    q_tail = stats.norm.sf(x0, loc=0, scale=sigma)
    return p_tail - math.exp(eps) * q_tail


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_delta_formula_matches_integral(eps, sigma):
    x0 = sigma**2 * eps / 1.0 + 0.5
    num, _ = integrate.quad(lambda x: stats.norm.pdf(x, 1.0, sigma) - math.exp(eps) * stats.norm.pdf(x, 0, sigma), x0, x0 + 40 * sigma)
    assert gaussian_delta(eps, sigma, 1.0) == pytest.approx(num, rel=1e-6, abs=1e-13)
    assert gaussian_delta(eps, sigma, 1.0) == pytest.approx(delta_by_integration(eps, sigma, 1.0), rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("sens", [0.1, 1.0, 37.5])
def test_analytic_sigma_is_safe_and_tight(eps, delta, sens):
    sigma = analytic_sigma(eps, delta, sens)
    assert gaussian_delta(eps, sigma, sens) <= delta  # safe side, in floating point
    # and (nearly) the smallest such sigma: 0.1 % less noise breaks the target
    assert gaussian_delta(eps, sigma * (1 - 1e-3), sens) > delta
    if eps < 1:
        assert sigma <= classic_sigma(eps, delta, sens)


def test_analytic_known_value():
    # Balle & Wang 2018 (Fig. 1 setting): eps=1, delta=1e-5, sensitivity 1 -> sigma ~ 3.73 vs classic ~ 4.84
    assert analytic_sigma(1.0, 1e-5) == pytest.approx(3.73, abs=0.01)
    assert classic_sigma(0.999, 1e-5) == pytest.approx(4.84, abs=0.01)


def test_zero_sensitivity_means_no_noise():
    assert analytic_sigma(1.0, 1e-5, 0.0) == 0.0


def test_classic_warns_outside_its_proof():
    with pytest.warns(PrivacyWarning, match="epsilon < 1"):
        classic_sigma(2.0, 1e-5)
    with pytest.warns(PrivacyWarning):
        calibrate_sigma(5.0, 1e-5, 1.0, "classic")


def test_validation():
    with pytest.raises(ValueError):
        analytic_sigma(0.0, 1e-5)
    with pytest.raises(ValueError):
        analytic_sigma(1.0, 1.5)
    with pytest.raises(TypeError):
        analytic_sigma("1", 1e-5)
    with pytest.raises(ValueError, match="calibration"):
        calibrate_sigma(1.0, 1e-5, 1.0, "bogus")


def _adjacent_pair():
    rng = np.random.default_rng(11)
    dense = rng.integers(1, 4, size=(9, 7)) * (rng.random((9, 7)) < 0.5)
    dense[0, :3] = 3  # the removed user contributes
    d = sp.csr_matrix(dense)
    d_minus = sp.csr_matrix(dense[1:])
    alpha = rng.integers(0, 30, size=7).astype(float)
    return d, d_minus, alpha


def _sampled_dp_violation(eps, delta, sigma_scale, n=100_000, seed=0):
    """Largest (P_D(E) − e^ε P_D'(E) − δ) / tolerance over threshold events E on the optimal
    1-D statistic, both directions; > 1 means a detected violation."""
    d, d_minus, alpha = _adjacent_pair()
    S, rho, C = 0.6, 0.7, 2
    gamma = max(ngrams.exact_sensitivity(ngrams.clamp_counts(x, C), S, C) for x in (d, d_minus))
    plans = [ngrams.prepare_bayesian(x, alpha, epsilon=eps, delta=delta, S=S, rho=rho, C=C, sensitivity=gamma) for x in (d, d_minus)]
    # the true mean shift is within the calibrated sensitivity
    assert np.linalg.norm(plans[0].mu - plans[1].mu) <= rho * gamma * (1 + 1e-12)
    sigma = plans[0].sigma * sigma_scale
    rng = np.random.default_rng(seed)
    u = plans[0].mu - plans[1].mu
    u = u - u.mean()  # log-probabilities are h minus a constant: project on a centred direction
    t = []
    for p in plans:
        logp = p.mu + rng.standard_normal((n, p.mu.size)) * sigma
        logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
        t.append(logp @ u)
    thresholds = np.quantile(np.concatenate(t), np.linspace(0.0005, 0.9995, 80))
    worst = -np.inf
    for a, b in ((t[0], t[1]), (t[1], t[0])):
        for tau in thresholds:
            for pa, pb in (((a > tau).mean(), (b > tau).mean()), ((a <= tau).mean(), (b <= tau).mean())):
                tol = 4.5 * math.sqrt((pa * (1 - pa) + math.exp(2 * eps) * pb * (1 - pb)) / n) + 1e-12
                worst = max(worst, (pa - math.exp(eps) * pb - delta) / tol)
    return worst


@pytest.mark.slow
def test_sampled_dp_check_on_adjacent_datasets():
    """Release log-probabilities from D and D minus one user, 100k draws each: every threshold event
    on the likelihood-ratio statistic satisfies P_D(E) <= e^ε P_D'(E) + δ + 4.5 binomial sd."""
    assert _sampled_dp_violation(eps=0.5, delta=1e-3, sigma_scale=1.0) <= 1.0


@pytest.mark.slow
def test_sampled_dp_check_detects_too_little_noise():
    """The same check fails when σ is a third of the calibrated value (the test can fail)."""
    assert _sampled_dp_violation(eps=0.5, delta=1e-3, sigma_scale=1 / 3) > 1.0
