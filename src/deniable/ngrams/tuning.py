"""Algorithm 2 (EndToEndDP): choice of (S, ρ) by report-noisy-min, then Algorithm 1 (not formal DP: local scales).

Users are split at random into a training set U₂ (default 90 %) and a validation set U₁ (10 %)
(§4.3). For each candidate (S_k, ρ_k) the Bayesian mean μ_k is computed from U₂ and scored against
the validation counts c₁ with the un-normalised cross-entropy (Equation 6)

    q_k = − Σ_i c₁_i (μ_k,i − log Σ_j exp μ_k,j).

The index of the smallest q_k + Lap(2|Δq|/ε_tune) is selected (Theorem 2: report-noisy-min, ε_tune-
DP for scores of sensitivity |Δq|), and the final release is Algorithm 1 on U₂ with the chosen
(S, ρ) at ε_release. Basic composition gives (ε_release + ε_tune, δ) in total; defaults follow §4.3
(ε_release = 2ε/3, ε_tune = ε/3, S log-spaced over [1e-3, 1e4]).

Sensitivity of q (Claim 2, corrected). A user of U₁ changes q_k by exactly Σ_i Δcⁿ_i (−log θ_k,i)
with θ_k = softmax(μ_k); its maximum over U₁ is computed exactly (one sparse product). A user of U₂
moves μ_k; with ``sensitivity="exact"`` the resulting change of q_k is computed exactly for every
training user (:func:`train_score_sensitivity`, O(nnz + users·#distinct(w))). With
``sensitivity="claim1"`` it is bounded by the Lipschitz constant of q in μ times ‖Δμ_k‖₂ ≤ ρ_k·γ_k:
∇_μ q = −c₁ + ‖c₁‖₁·θ has L2 norm at most √(‖c₁‖₂² + ‖c₁‖₁²) (both terms are non-negative
vectors). The printed Claim 2 uses ρ‖c₁‖₂‖Δμ_ps‖₂ instead: its Appendix D drops the ‖c₁‖₁ factor
of the log-partition term's derivative, which could under-noise the selection, so it is not used.
As in the paper the maxima are over the users of the input (local sensitivities);
|Δq| = the maximum over candidates and both terms.

Guarantee. Both the selection noise and the release's σ are calibrated to local sensitivities of
the input, so Algorithm 2 reproduces the paper but is NOT a formal (ε, δ)-DP guarantee:
``formal_dp`` is False and a PrivacyWarning is emitted. The chosen (S, ρ), γ, σ, |Δq| and the
split sizes are kept in ``Release.diagnostics`` (never written to release files).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from .._rng import RNGLike, as_generator
from .._validation import check_int, check_positive, check_unit_interval
from .bayesian import (
    _check_sensitivity,
    prior_mean,
    public_vector,
    weighted_log_counts,
)
from .counting import _as_csr, clamp_counts, keys_of
from .gaussian import CALIBRATIONS, calibrate_sigma, laplace_scale
from .release import LOCAL_SENSITIVITY_NOTE, Release, warn_if_not_formal
from .sensitivity import LogCountStats, claim1_bound, decay_weights, log_count_stats, per_user_sensitivity, support_terms

__all__ = ["DEFAULT_S_GRID", "DEFAULT_RHO_GRID", "report_noisy_min", "cross_entropy_scores", "check_grid", "end_to_end_dp"]

DEFAULT_S_GRID = tuple(float(x) for x in np.logspace(-3, 4, 8))
DEFAULT_RHO_GRID = (0.01, 0.03, 0.1, 0.3, 0.5, 0.7, 0.9)


def report_noisy_min(
    scores: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    rng: RNGLike = None,
    size: int | None = None,
) -> int | np.ndarray:
    """Index of the smallest ``scores[k] + Lap(2·sensitivity/ε)`` (Theorem 2; Dwork & Roth 2014
    §3.3 with the factor 2 for scores that are not monotone in the data).

    Guarantee: ε-DP (only the index is released) when every score has sensitivity at most
    ``sensitivity`` under the adjacency of interest. ``size`` draws that many independent indices.
    """
    epsilon = check_positive("epsilon", epsilon)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {scores.shape}")
    if not np.isfinite(sensitivity) or sensitivity < 0:
        raise ValueError(f"sensitivity must be a finite number >= 0, got {sensitivity!r}")
    gen = as_generator(rng)
    b = laplace_scale(epsilon, 2.0 * float(sensitivity))
    shape = scores.shape if size is None else (int(size),) + scores.shape
    noisy = scores + (gen.laplace(0.0, b, size=shape) if b > 0 else 0.0)
    idx = np.argmin(noisy, axis=-1)
    return int(idx) if size is None else idx


def cross_entropy_scores(c1: np.ndarray, mus: np.ndarray) -> np.ndarray:
    """Equation 6 for each row of ``mus`` (K, |V|): q_k = −Σ_i c1_i·log softmax(μ_k)_i."""
    logp = mus - logsumexp(mus, axis=1, keepdims=True)
    return -(logp @ np.asarray(c1, dtype=np.float64))


def train_score_sensitivity(
    m2: Any,
    stats2: LogCountStats,
    S: float,
    C: float,
    rhos: Sequence[float],
    mu_p: np.ndarray,
    c1: np.ndarray,
    *,
    offsets: Sequence[np.ndarray] | None = None,
    chunk_nnz: int = 1 << 20,
) -> np.ndarray:
    """For each ρ in ``rhos``: maxₙ |q(c₁, μ) − q(c₁, μ₋ₙ)| over the training users n (rows of the
    clamped ``m2``), μ = ρ·w⊙x̂ + (1−ρ)·μ_p — the exact (local) sensitivity of Equation 6 to a
    training user, computed without recomputing μ per user.

    With Δr the change of r = w⊙x̂ (on the user's support ``diff``, elsewhere −w_j·m) and
    θ = softmax(μ): q(μ) − q(μ₋ₙ) = −ρ·c₁·Δr − ‖c₁‖₁·log Σ_j θ_j exp(−ρΔr_j). The off-support part
    of the sum depends on j only through w_j, so it is grouped by the distinct values of w:
    O(nnz + users·#distinct(w)) per ρ.

    ``offsets`` (one (J, |V|) array per ρ) scores μ + offset_j instead and averages the J changes
    per user before the maximum (the expected score of ``score="expected"``).
    """
    m2 = _as_csr(m2)
    V = m2.shape[1]
    w = decay_weights(stats2.N, S, C)
    r = w * stats2.xhat
    wv, w_group = np.unique(w, return_inverse=True)
    T = float(c1.sum())
    c1w_total = float(np.dot(c1, w))
    thetas = []
    for k, rho in enumerate(rhos):
        mu = rho * r + (1.0 - rho) * mu_p
        offs = np.zeros((1, V)) if offsets is None else np.atleast_2d(offsets[k])
        th = []
        for off in offs:
            h = mu + off
            theta = np.exp(h - logsumexp(h))
            th.append((theta, np.bincount(w_group, weights=theta, minlength=wv.size)))
        thetas.append(th)
    out = np.zeros(len(rhos))
    for r0, r1, rows, cols, _delta, mshift, _w_minus, diff in support_terms(m2, stats2, S, C, chunk_nnz):
        n = r1 - r0
        c1_j = c1[cols]
        w_j = w[cols]
        lin_on = np.bincount(rows, weights=c1_j * diff, minlength=n)
        c1w_on = np.bincount(rows, weights=c1_j * w_j, minlength=n)
        lin = lin_on - mshift * (c1w_total - c1w_on)  # c1 . (r - r_-n)
        for k, rho in enumerate(rhos):
            t = rho * mshift  # off support: mu_-n,j = mu_j + t * w_j
            e_all = np.exp(np.outer(t, wv))
            e_remove = np.exp(t[rows] * w_j)
            e_new = np.exp(-rho * diff)
            dq = np.zeros(n)
            for theta, big_theta in thetas[k]:
                th_j = theta[cols]
                ratio = e_all @ big_theta - np.bincount(rows, weights=th_j * e_remove, minlength=n) + np.bincount(rows, weights=th_j * e_new, minlength=n)
                dq += -rho * lin - T * np.log(np.maximum(ratio, 1e-300))
            dq /= len(thetas[k])
            out[k] = max(out[k], float(np.max(np.abs(dq))) if dq.size else 0.0)
    # float safety: a relative margin far above the rounding error of the sums
    return out * (1.0 + 1e-9) + 1e-9 * (T + 1.0)


def end_to_end_dp(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    delta: float,
    C: float = 1,
    S_grid: Sequence[float] = DEFAULT_S_GRID,
    rho_grid: Sequence[float] = DEFAULT_RHO_GRID,
    tune_fraction: float = 1.0 / 3.0,
    validation_fraction: float = 0.1,
    sensitivity: str = "exact",
    calibration: str = "analytic",
    score: str = "mean",
    n_noise_draws: int = 4,
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Algorithm 2 (EndToEndDP). Returns the final Algorithm 1 release on the training users.

    Guarantee: NOT a formal DP guarantee (``formal_dp`` False, PrivacyWarning). The budget is
    split as in the paper (ε_release = (1 − tune_fraction)·ε for the Gaussian release,
    ε_tune = tune_fraction·ε for the selection; basic composition, nominal (ε, δ) in total), but
    both noise scales are calibrated to local sensitivities computed on the input. Only the final
    sample and the public parameters are published; the chosen (S, ρ), γ, σ, |Δq| and the split
    sizes are in ``diagnostics``, never the scores.

    Parameters
    ----------
    user_counts, public_counts, C, sensitivity, calibration, keys : as
        :func:`~deniable.ngrams.bayesian.prepare_bayesian` (``sensitivity`` must be "exact" or
        "claim1" here).
    S_grid, rho_grid : the candidate grid (all pairs).
    tune_fraction : share of ε spent on tuning (paper: 1/3).
    score : "mean" (the paper: Equation 6 on the noiseless mean μ_k) or "expected" (Equation 6
        averaged over ``n_noise_draws`` fixed draws μ_k + σ_k·η_j, i.e. the cross-entropy of the
        release that candidate would actually produce; the mean score ignores σ_k and so favours
        low-bias, high-noise candidates when the sensitivity is large). The sensitivities are
        computed for the score actually used.
    validation_fraction : share of users in the validation set U₁ (paper: 10 %).
    rng : Generator, seed or None (used for the split, the selection noise and the release).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    C = check_positive("C", C)
    tune_fraction = check_unit_interval("tune_fraction", tune_fraction, open_low=True, open_high=True)
    validation_fraction = check_unit_interval("validation_fraction", validation_fraction, open_low=True, open_high=True)
    if score not in ("mean", "expected"):
        raise ValueError(f"score must be 'mean' or 'expected', got {score!r}")
    n_noise_draws = check_int("n_noise_draws", n_noise_draws, minimum=1)
    method = _check_sensitivity(sensitivity)
    if not isinstance(method, str):
        raise ValueError("end_to_end_dp needs sensitivity='exact' or 'claim1' (it is computed per candidate)")
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    S_values, rho_values = check_grid(S_grid, rho_grid)
    gen = as_generator(rng)
    m = clamp_counts(_as_csr(user_counts), C)
    n_users, V = m.shape
    key_tuple = keys_of(user_counts, keys, V)
    alpha = public_vector(public_counts, key_tuple, V)
    val_rows, train_rows = _split(n_users, validation_fraction, gen)
    eps_release = (1.0 - tune_fraction) * epsilon
    eps_tune = tune_fraction * epsilon
    eta = gen.standard_normal((n_noise_draws, V)) if score == "expected" else np.zeros((1, V))
    cand = _score_candidates(m[val_rows], m[train_rows], prior_mean(alpha), S_values, rho_values, C, method, eta, lambda rho_g: calibrate_sigma(eps_release, delta, rho_g, calibration))
    chosen = report_noisy_min(cand.scores, sensitivity=cand.dq, epsilon=eps_tune, rng=gen)
    S_star, rho_star = cand.pairs[chosen]
    gamma_star = float(cand.gammas[chosen])
    sigma = float(cand.sigmas[chosen])
    h = cand.mus[chosen] + (gen.standard_normal(V) * sigma if sigma > 0 else 0.0)
    p = np.exp(h - logsumexp(h))
    p /= p.sum()
    guarantee = (
        f"nominal ({epsilon:g}, {delta:g}) in total (Gaussian release at epsilon={eps_release:g}, report-noisy-min "
        f"tuning at epsilon={eps_tune:g}), user level, {method} sensitivity; " + LOCAL_SENSITIVITY_NOTE
    )
    b_tune = laplace_scale(eps_tune, 2.0 * cand.dq)
    params = {
        "C": C, "epsilon_release": eps_release, "epsilon_tune": eps_tune, "tune_fraction": tune_fraction, "validation_fraction": validation_fraction, "score": score,
        "n_noise_draws": int(n_noise_draws) if score == "expected" else 0, "S_grid": list(S_values), "rho_grid": list(rho_values), "vocabulary_size": int(V),
    }
    diagnostics = {  # the selection noise is calibrated to a local |Δq|, so even the choice is not DP
        "S": S_star, "rho": rho_star, "gamma": gamma_star, "sigma": sigma, "sensitivity": rho_star * gamma_star, "laplace_scale": b_tune,
        "tuning_sensitivity": cand.dq, "tuning_sensitivity_validation": cand.dq_val, "tuning_sensitivity_train": cand.dq_train,
        "n_users": int(n_users), "n_train_users": int(train_rows.size), "n_validation_users": int(val_rows.size),
    }
    rel = Release(
        keys=key_tuple, probabilities=p, mechanism="bayesian-tuned", epsilon=epsilon, delta=delta, guarantee=guarantee, formal_dp=False, sigma=sigma,
        laplace_scale=b_tune, calibration=calibration, sensitivity=rho_star * gamma_star, sensitivity_method=method, sampler="numpy",
        params=params, diagnostics=diagnostics,
    )
    return warn_if_not_formal(rel)


def check_grid(S_grid: Sequence[float], rho_grid: Sequence[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The validated, non-empty tuning grids: S > 0, ρ in [0, 1]."""
    S_values = tuple(check_positive("S_grid entry", s) for s in S_grid)
    rho_values = tuple(check_unit_interval("rho_grid entry", r) for r in rho_grid)
    if not S_values or not rho_values:
        raise ValueError("S_grid and rho_grid must be non-empty")
    return S_values, rho_values


def _split(n_users: int, validation_fraction: float, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(validation rows, training rows): a uniformly random split with round(fraction·users) in
    validation (at least 1, at most users − 1; §4.3)."""
    if n_users < 2:
        raise ValueError(f"end_to_end_dp needs at least 2 users to split, got {n_users}")
    n_val = min(max(1, int(round(validation_fraction * n_users))), n_users - 1)
    perm = gen.permutation(n_users)
    return np.sort(perm[:n_val]), np.sort(perm[n_val:])


@dataclass(frozen=True)
class _Candidates:
    """Algorithm 2's candidates (S_k, ρ_k): means μ_k, local γ_k and σ_k, scores q_k and |Δq|."""

    pairs: list[tuple[float, float]]
    mus: np.ndarray
    gammas: np.ndarray
    sigmas: np.ndarray
    scores: np.ndarray
    dq_val: float
    dq_train: float

    @property
    def dq(self) -> float:
        return max(self.dq_val, self.dq_train)


def _score_candidates(
    m1: Any,
    m2: Any,
    mu_p: np.ndarray,
    S_values: Sequence[float],
    rho_values: Sequence[float],
    C: float,
    method: str,
    eta: np.ndarray,
    sigma_for: Callable[[float], float],
) -> _Candidates:
    """Score every (S, ρ) on the validation rows ``m1`` with the mean computed on the training rows
    ``m2`` (Equation 6, averaged over the offsets σ_k·η_j), with both local sensitivity terms of
    the score (module docstring). ``sigma_for(ρ·γ)`` is the release's σ for that sensitivity."""
    V = m2.shape[1]
    stats2 = log_count_stats(m2)
    c1 = np.bincount(m1.indices, weights=m1.data, minlength=V).astype(np.float64)
    K = len(S_values) * len(rho_values)
    mus, gammas, sigmas, scores, dq_train_k, dq_val_k = (np.empty((K, V)), np.empty(K), np.empty(K), np.empty(K), np.empty(K), np.empty(K))
    pairs: list[tuple[float, float]] = []
    for S in S_values:
        g = float(per_user_sensitivity(m2, S, C, stats=stats2).max(initial=0.0)) if method == "exact" else claim1_bound(stats2, S, C)
        r = weighted_log_counts(stats2, S, C)
        sig = [sigma_for(rho * g) for rho in rho_values]
        offsets = [s_ * eta for s_ in sig]
        if method == "exact":
            dq_s = train_score_sensitivity(m2, stats2, S, C, rho_values, mu_p, c1, offsets=offsets)
        else:
            lip = np.sqrt(np.dot(c1, c1) + c1.sum() ** 2)  # Lipschitz constant of q in mu, any offset
            dq_s = lip * np.asarray(rho_values) * g
        for j, rho in enumerate(rho_values):
            k = len(pairs)
            mus[k] = rho * r + (1.0 - rho) * mu_p
            h = mus[k] + offsets[j]  # (J, V): the scored points
            logp = h - logsumexp(h, axis=1, keepdims=True)
            scores[k] = float(np.mean(-(logp @ c1)))
            # removing a validation user n changes the score by mean_j sum_i dc_i (-log theta_j,i) >= 0
            per_val_user = -(m1 @ logp.T).mean(axis=1) if m1.nnz else np.zeros(1)
            dq_val_k[k] = float(np.max(per_val_user))
            gammas[k], sigmas[k], dq_train_k[k] = g, sig[j], dq_s[j]
            pairs.append((S, rho))
    return _Candidates(pairs, mus, gammas, sigmas, scores, float(np.max(dq_val_k)), float(np.max(dq_train_k)))
