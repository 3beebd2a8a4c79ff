"""Algorithm 1 (BayesianDP) of Ramadan, Withers & Orr, "N-grams Bayesian Differential Privacy".

Public counts α give the prior mean μ_p = log(α+1) − mean(log(α+1)) (Equation 1); clamped private
counts give x̂ (Equation 2) and the decay weights w = min(1, S·N/C) (Equation 5, §3.1). The mean
of the Gaussian "posterior" is (Corollary 1)

    μ_ps = ρ·(w ⊙ x̂) + (1 − ρ)·μ_p,

one sample h ~ N(μ_ps, σ²I) is drawn and θ = softmax(h) is released (Equation 4). σ is calibrated
to the L2 sensitivity ‖Δμ_ps‖₂ = ρ·γ, with γ the exact brute-force sensitivity or Claim 1's bound
(:mod:`deniable.ngrams.sensitivity`), by the analytic Gaussian mechanism (default, valid for every
ε) or the paper's classic formula (valid for ε < 1 only).

Guarantee: NONE in the formal sense — this module reproduces the paper. With
``sensitivity="exact"`` (default) or ``"claim1"`` γ is computed on the input (a LOCAL sensitivity:
σ differs between D and D₋ₙ), and with a number nothing bounds how many n-grams one user
contributes, so the number is not backed by an enforced bound. ``formal_dp`` is False, the release
says so (:data:`~deniable.ngrams.release.LOCAL_SENSITIVITY_NOTE`), a
:class:`~deniable.errors.PrivacyWarning` is emitted, and γ, σ and the user count stay in
``Release.diagnostics`` (never written to release files). The formal release, with bounds the
library enforces and noise on the bounded counts, is :func:`deniable.ngrams.release_bayesian`
(:mod:`deniable.ngrams.formal`); the paper's release is reached through
:func:`deniable.ngrams.paper.bayesian_not_dp`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import logsumexp

from .._rng import RNGLike, as_generator
from .._validation import check_positive, check_unit_interval
from .counting import NgramVocabulary, _as_csr, clamp_counts, keys_of
from .gaussian import CALIBRATIONS, calibrate_sigma
from .release import LOCAL_SENSITIVITY_NOTE, Release, warn_if_not_formal
from .sensitivity import LogCountStats, claim1_bound, exact_sensitivity, log_count_stats

__all__ = ["prior_mean", "public_vector", "vocabulary_params", "BayesianPlan", "prepare_bayesian", "SENSITIVITY_METHODS", "is_formal", "guarantee_text"]

SENSITIVITY_METHODS = ("exact", "claim1")


def prior_mean(public_counts: np.ndarray) -> np.ndarray:
    """μ_p = log(α + 1) − mean(log(α + 1)) (Equation 1)."""
    lp = np.log1p(np.asarray(public_counts, dtype=np.float64))
    return lp - lp.mean()


def public_vector(public_counts: object, keys: Sequence[str] | None, n_cols: int) -> np.ndarray:
    """Public counts α as a float64 vector aligned with the columns.

    Accepts a :class:`NgramVocabulary`, an array of length ``n_cols``, or a mapping n-gram -> count
    (then ``keys`` gives the column order; n-grams missing from the mapping get 0).
    """
    if isinstance(public_counts, NgramVocabulary):
        alpha = np.asarray(public_counts.public_counts, dtype=np.float64)
    elif isinstance(public_counts, Mapping):
        if keys is None:
            raise ValueError("public_counts is a mapping: the column keys are needed to align it")
        alpha = np.array([float(public_counts.get(k, 0.0)) for k in keys])
    else:
        alpha = np.asarray(public_counts, dtype=np.float64).ravel()
    if alpha.shape != (n_cols,):
        raise ValueError(f"public_counts must have {n_cols} entries (one per n-gram column), got {alpha.shape[0]}")
    if not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
        raise ValueError("public_counts must be finite and >= 0")
    return alpha


def vocabulary_params(public_counts: object) -> dict[str, int]:
    """``{"n": order}`` when ``public_counts`` is a :class:`NgramVocabulary` (a public parameter every
    release records), else ``{}``."""
    return {"n": int(public_counts.n)} if isinstance(public_counts, NgramVocabulary) else {}


def _check_sensitivity(sensitivity: object) -> str | float:
    if isinstance(sensitivity, str):
        if sensitivity not in SENSITIVITY_METHODS:
            raise ValueError(f"sensitivity must be one of {SENSITIVITY_METHODS} or a number >= 0, got {sensitivity!r}")
        return sensitivity
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real):
        raise TypeError(f"sensitivity must be 'exact', 'claim1' or a number >= 0, got {sensitivity!r}")
    v = float(sensitivity)
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"sensitivity must be a finite number >= 0, got {sensitivity!r}")
    return v


def is_formal(method: str, calibration: str, epsilon: float) -> bool:
    """Whether this paper-reproduction path is formally (ε, δ)-DP: never.

    The sensitivity here is local ("exact", "claim1") or a caller's number that no enforced
    contribution bound backs (nothing limits how many n-grams one user has). The formal release
    is :func:`deniable.ngrams.release_bayesian`.
    """
    return False


def guarantee_text(epsilon: float, delta: float, method: str, calibration: str = "analytic") -> str:
    """One line stating the (absence of a) guarantee of the paper's Algorithm 1 for ``method``."""
    if method == "given":
        return (
            f"nominal ({epsilon:g}, {delta:g}), user level, caller-given sensitivity that the library did not derive "
            "(no bound on the n-grams per user is enforced on this path) \u2014 NOT a formal differential-privacy guarantee"
        )
    return f"nominal ({epsilon:g}, {delta:g}), user level, {method} sensitivity; " + LOCAL_SENSITIVITY_NOTE


@dataclass(frozen=True)
class BayesianPlan:
    """Everything Algorithm 1 computes before sampling: the mean μ_ps and the noise σ.

    ``sample`` draws log-probabilities log softmax(h), h ~ N(μ_ps, σ²I); ``release`` wraps one
    draw in a :class:`Release` (emitting a :class:`~deniable.errors.PrivacyWarning` when it is not
    formally DP). ``sigma`` and ``gamma`` are data dependent unless the sensitivity was given. Re-sampling the same plan is how repeated releases (e.g. the
    membership-inference experiment of §5) are made without recomputing the sensitivity.
    """

    keys: tuple[str, ...]
    mu: np.ndarray
    sigma: float
    gamma: float
    epsilon: float
    delta: float
    calibration: str
    sensitivity_method: str
    params: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def formal_dp(self) -> bool:
        """Always False on this paper-reproduction path (see :func:`is_formal`)."""
        return is_formal(self.sensitivity_method, self.calibration, self.epsilon)

    def sample(self, rng: RNGLike = None, size: int | None = None) -> np.ndarray:
        """Log-probabilities of ``size`` releases (shape (size, |V|); (|V|,) when ``size`` is None)."""
        gen = as_generator(rng)
        shape = self.mu.shape if size is None else (int(size),) + self.mu.shape
        h = self.mu + (gen.standard_normal(shape) * self.sigma if self.sigma > 0 else 0.0)
        return h - logsumexp(h, axis=-1, keepdims=True)

    def release(self, rng: RNGLike = None) -> Release:
        """One draw as a :class:`Release`; warns (PrivacyWarning) unless ``formal_dp``."""
        logp = self.sample(rng)
        p = np.exp(logp)
        p /= p.sum()
        formal = self.formal_dp
        diagnostics = dict(self.diagnostics)
        if not formal:
            diagnostics.update(sigma=self.sigma, sensitivity=self.rho * self.gamma)
        rel = Release(
            keys=self.keys,
            probabilities=p,
            mechanism="bayesian",
            epsilon=self.epsilon,
            delta=self.delta,
            guarantee=guarantee_text(self.epsilon, self.delta, self.sensitivity_method, self.calibration),
            formal_dp=formal,
            sigma=self.sigma,
            calibration=self.calibration,
            sensitivity=self.rho * self.gamma,
            sensitivity_method=self.sensitivity_method,
            sampler="numpy",
            params=dict(self.params),
            diagnostics=diagnostics,
        )
        return warn_if_not_formal(rel)

    @property
    def rho(self) -> float:
        return float(self.params["rho"])


def weighted_log_counts(stats: LogCountStats, S: float, C: float) -> np.ndarray:
    """r = w ⊙ x̂ with w = min(1, S·N/C) (Corollary 1)."""
    return np.minimum(1.0, (S / C) * stats.N) * stats.xhat


def prepare_bayesian(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    delta: float,
    S: float = 1.0,
    rho: float = 0.5,
    C: float = 1,
    sensitivity: str | float = "exact",
    calibration: str = "analytic",
    keys: Sequence[str] | None = None,
    clamp: bool = True,
) -> BayesianPlan:
    """Algorithm 1 up to (not including) the noise draw; NOT formally DP (module docstring).

    Parameters
    ----------
    user_counts : :class:`UserCounts` or a users × |V| sparse/dense count matrix (raw counts;
        clamped here to ``C``, §3.1, unless ``clamp`` is False).
    public_counts : α — a :class:`NgramVocabulary`, an array aligned with the columns, or a mapping.
    epsilon, delta : privacy parameters of the Gaussian mechanism (nominal: see the guarantee).
    S, rho, C : decay weight slope (Equation 5), private/public weighting ρ, per-user clamp C.
    sensitivity : "exact" (default; the brute-force maximum over this data's users, O(nnz);
        local), "claim1" (Claim 1's bound on this data; local), or a number (a bound on
        ‖Δ(w⊙x̂)‖₂ asserted by the caller; not verified, so not formal).
    calibration : "analytic" (default; Balle & Wang 2018) or "classic" (paper; ε < 1 only).
    keys : column keys when ``user_counts`` is a bare matrix.

    Returns
    -------
    :class:`BayesianPlan`: ``.release(rng)`` is Algorithm 1's output (σ, ``calibration``,
    ``sensitivity`` = ρ·γ, public ``params``, ``diagnostics`` with the user count and the local γ
    and σ, never written); ``.sample(rng, size)`` draws many.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    S = check_positive("S", S)
    C = check_positive("C", C)
    rho = check_unit_interval("rho", rho)
    method = _check_sensitivity(sensitivity)
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    m = _as_csr(user_counts)
    cols = m.shape[1]
    key_tuple = keys_of(user_counts, keys, cols)
    alpha = public_vector(public_counts, key_tuple, cols)
    if clamp:
        m = clamp_counts(m, C)  # Algorithm 1, first loop
    stats = log_count_stats(m)
    r = weighted_log_counts(stats, S, C)
    if method == "exact":
        gamma = exact_sensitivity(m, S, C, stats=stats)
        method_name = "exact"
    elif method == "claim1":
        gamma = claim1_bound(m, S, C)
        method_name = "claim1"
    else:
        gamma = float(method)
        method_name = "given"
    mu = rho * r + (1.0 - rho) * prior_mean(alpha)
    sigma = calibrate_sigma(epsilon, delta, rho * gamma, calibration)
    params: dict[str, Any] = {"S": S, "rho": rho, "C": C, "vocabulary_size": int(cols)}
    diagnostics: dict[str, Any] = {"n_users": int(m.shape[0])}
    if method_name == "given":
        params["sensitivity_bound"] = gamma  # public: supplied by the caller
    else:
        diagnostics["gamma"] = gamma  # local sensitivity: a function of the data
    params.update(vocabulary_params(public_counts))
    return BayesianPlan(key_tuple, mu, sigma, gamma, epsilon, delta, calibration, method_name, params, diagnostics)

