"""Formal (ε, δ)-DP n-gram releases by construction: bound, noise the bounded counts, post-process.

The paper's Algorithm 1 (Ramadan, Withers & Orr, §3, Theorem 1, Corollary 1) adds Gaussian noise to
h ~ N(ρ·w⊙x̂ + (1−ρ)·μ_p, σ²I) with σ calibrated to the *local* sensitivity of w⊙x̂ (a maximum
over removing each user of the data at hand, §3.1 and Claim 1). That σ is itself a function of the
data, and nothing bounds how many n-grams one user contributes, so it is not DP. Here the order is
reversed so that everything data dependent passes through one noisy statistic whose GLOBAL
sensitivity the library derives from bounds it enforced itself:

1. **Bound** (:func:`~deniable.ngrams.bounding.bound_contributions`): each user keeps at most k =
   ``max_ngrams_per_user`` distinct n-grams (uniformly random subset, drawn from the release's
   generator), each count clamped to C. Column sums c then have ‖Δc‖₂ ≤ C·√k and ‖Δc‖₁ ≤ C·k
   under adding or removing one user, for any data.
2. **Noise** the bounded counts once: c̃ = c + N(0, σ²I) with σ for L2 sensitivity C·√k at (ε, δ)
   (:mod:`.noise`: OpenDP's discrete Gaussian, or numpy's with the analytic calibration). This is
   the only access to private data.
3. **Post-process** (costs no privacy): ĉ = max(c̃, 0), x̃ = log(ĉ + 1) − mean(log(ĉ + 1))
   (Equation 2 on the noisy counts), w̃ = min(1, S·ĉ/C) (Equation 5 with ĉ/C in place of the user
   count N: with C = 1 and integer counts the clamped count IS the number of users, and for
   C > 1, c/C ≤ N), μ = ρ·w̃⊙x̃ + (1−ρ)·μ_p (Corollary 1 with the public prior μ_p of Equation 1),
   release θ = softmax(μ) (Equation 4). No second noise draw: the release is a deterministic
   function of c̃ and public values. N is never released separately, so no budget is split.

**Tuning (S, ρ) without extra budget** (``tune=True``; replaces Algorithm 2's report-noisy-min,
whose scales were local): users are assigned to a validation set (probability
``validation_fraction``, an independent coin per user) or the training set; the bounded counts of
both sets, stacked as one vector (c_train, c_val), get Gaussian noise for L2 sensitivity C·√k —
one Gaussian mechanism, because one user lands in only one of the two halves. Every (S, ρ) of the
grid is scored by the cross-entropy of Equation 6 against the noisy validation counts, relative
to the public prior (ρ = 0): d = −Σ c̃_val,i·(log θ_i(c̃_train) − log θ⁰_i), unbiased for the true
difference, with noise of standard deviation σ·‖log θ − log θ⁰‖₂ (σ is public). The candidate
with the smallest upper confidence bound d + z·sd (z = ``TUNE_Z`` = 2) is chosen — the prior
itself (bound 0) when no candidate is clearly better, so the noise cannot pick the candidate
whose score merely varies most — and θ is computed from c̃_train. Choice and release are post-processing of one (ε, δ)-DP output:
(ε, δ) in total, and the chosen (S, ρ) are published.

Guarantee of every function here: (ε, δ)-DP (Gaussian) or (ε, 0)-DP (Laplace) under user-level
add/remove adjacency, for any data, over the PUBLIC vocabulary. ``formal_dp`` is True.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_positive, check_unit_interval
from . import noise
from .bayesian import prior_mean, public_vector
from .bounding import DEFAULT_MAX_NGRAMS_PER_USER, bound_contributions, check_max_ngrams, l1_sensitivity, l2_sensitivity
from .counting import Vocabulary, _as_csr, cap_user_totals, keys_of
from .release import Release

__all__ = [
    "DEFAULT_TUNE_S_GRID",
    "DEFAULT_TUNE_RHO_GRID",
    "column_sums",
    "resolve_sensitivity",
    "posterior_log_probs",
    "formal_bayesian",
    "formal_laplace",
    "formal_laplace_public",
]

DEFAULT_TUNE_S_GRID = (0.001, 0.01, 0.1, 1.0, 10.0)
DEFAULT_TUNE_RHO_GRID = (0.01, 0.03, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
#: Confidence multiplier of the noisy-holdout selection (upper bound = estimate + TUNE_Z · its sd).
TUNE_Z = 2.0


def column_sums(m) -> np.ndarray:
    """Column sums of a CSR matrix: int64 for integer counts (exact), float64 otherwise."""
    c = np.bincount(m.indices, weights=m.data, minlength=m.shape[1])
    return c.astype(np.int64) if m.data.dtype.kind in "iub" else c.astype(np.float64)


def resolve_sensitivity(given: object, derived: float, norm: str, what: str) -> tuple[float, str]:
    """The sensitivity to calibrate to: ``derived`` when ``given`` is None, else ``given`` if it is
    a number >= ``derived`` (more noise is always allowed). Anything smaller is rejected."""
    if given is None:
        return derived, "derived"
    if isinstance(given, str):
        raise ValueError(
            f"sensitivity={given!r} is one of the paper's local (data-dependent) sensitivities, which are not DP: "
            "pass local_sensitivity=True to reproduce the paper, or leave sensitivity unset for the formal release"
        )
    if isinstance(given, bool) or not isinstance(given, numbers.Real):
        raise TypeError(f"sensitivity must be None (derived) or a number, got {given!r}")
    v = float(given)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"sensitivity must be a finite number > 0, got {given!r}")
    if v < derived * (1 - 1e-12):
        raise ValueError(
            f"sensitivity={v:g} is below the derived global {norm} sensitivity {derived:g} of {what}; "
            f"pass a number >= {derived:g}, or omit it to use the derived value"
        )
    return v, "given"


def posterior_log_probs(c_noisy: np.ndarray, mu_p: np.ndarray, S: float, rho: float, C: float) -> np.ndarray:
    """log θ from noisy counts (post-processing; module docstring step 3)."""
    c_hat = np.maximum(np.asarray(c_noisy, dtype=np.float64), 0.0)
    ell = np.log1p(c_hat)
    x = ell - ell.mean()
    w = np.minimum(1.0, (S / C) * c_hat)
    h = rho * (w * x) + (1.0 - rho) * mu_p
    top = h.max()
    return h - (top + np.log(np.exp(h - top).sum()))  # log-softmax (scipy's logsumexp is slow on 40 small calls)


def _params_n(params: dict[str, Any], public_counts: object) -> None:
    if isinstance(public_counts, Vocabulary):
        params["n"] = int(public_counts.n)


def _probs(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp)
    return p / p.sum()


def formal_bayesian(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    delta: float,
    S: float = 1.0,
    rho: float = 0.5,
    C: float = 1,
    max_ngrams_per_user: int = DEFAULT_MAX_NGRAMS_PER_USER,
    sensitivity: float | None = None,
    tune: bool = False,
    S_grid: Sequence[float] = DEFAULT_TUNE_S_GRID,
    rho_grid: Sequence[float] = DEFAULT_TUNE_RHO_GRID,
    validation_fraction: float = 0.1,
    sampler: str = "auto",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Bayesian release with a public prior, formal (ε, δ)-DP by construction (module docstring).

    Guarantee: (ε, δ)-DP under user-level add/remove adjacency for any data: the only private
    input to the output is the bounded count vector plus Gaussian noise calibrated to its derived
    L2 sensitivity C·√k; S, ρ (or their noisy-holdout choice) and the prior are post-processing.

    Parameters
    ----------
    user_counts : :class:`~deniable.ngrams.UserCounts` or a users × |V| count matrix (bounded here).
    public_counts : the public prior α (a Vocabulary, an aligned array or a mapping).
    epsilon, delta : the total privacy budget.
    S, rho : decay slope and private weight of Corollary 1 (public; ignored when ``tune``).
    C, max_ngrams_per_user : the contribution bounds the release enforces.
    sensitivity : None (derived C·√k) or a number >= it (more noise); smaller is a ValueError.
    tune : choose (S, ρ) over ``S_grid`` × ``rho_grid`` on a noisy validation split (no extra budget).
    validation_fraction : probability that a user goes to the validation split when ``tune``.
    sampler : "auto" (OpenDP when installed), "opendp" or "numpy" (see :mod:`.noise`).
    keys : column keys when ``user_counts`` is a bare matrix.
    rng : Generator, seed or None (subset selection, split; and the noise with ``sampler="numpy"``).

    Returns
    -------
    Release with ``formal_dp`` True, σ, the derived sensitivity, the sampler, and public params.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    C = check_positive("C", C)
    k = check_max_ngrams(max_ngrams_per_user)
    if tune:
        S_values = tuple(check_positive("S_grid entry", s) for s in S_grid)
        rho_values = tuple(check_unit_interval("rho_grid entry", r) for r in rho_grid)
        if not S_values or not rho_values:
            raise ValueError("S_grid and rho_grid must be non-empty")
        validation_fraction = check_unit_interval("validation_fraction", validation_fraction, open_low=True, open_high=True)
    else:
        S = check_positive("S", S)
        rho = check_unit_interval("rho", rho)
    derived = l2_sensitivity(k, C)
    sens, how = resolve_sensitivity(sensitivity, derived, "L2", f"the bounded counts (C*sqrt(k) with C={C:g}, k={k})")
    m = _as_csr(user_counts)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    mu_p = prior_mean(public_vector(public_counts, key_tuple, V))
    g_bound, g_split, g_noise = as_generator(rng).spawn(3)
    b = bound_contributions(m, k, C, g_bound)
    params: dict[str, Any] = {"C": C, "max_ngrams_per_user": k, "vocabulary_size": int(V), "noised": "bounded counts"}
    if how == "given":
        params["sensitivity_bound"] = sens
    if not tune:
        c = column_sums(b)
        noisy, sigma, used = noise.gaussian_mechanism(c, sens, epsilon, delta, sampler=sampler, rng=g_noise)
        logp = posterior_log_probs(noisy, mu_p, S, rho, C)
        params.update(S=S, rho=rho, tuning="none (S and rho given by the caller)")
        tuning_text = "S, rho given"
    else:
        val = g_split.random(m.shape[0]) < validation_fraction
        c2 = np.concatenate([column_sums(b[~val]), column_sums(b[val])])
        noisy, sigma, used = noise.gaussian_mechanism(c2, sens, epsilon, delta, sampler=sampler, rng=g_noise)
        c_train, c_val = noisy[:V], noisy[V:]
        # Score every candidate against the noisy validation counts, relative to the public prior
        # (rho = 0): d_k = -c_val . (log theta_k - log theta_0) is unbiased for the true difference
        # and its noise has sd sigma * ||log theta_k - log theta_0||_2 (sigma is public). Choose the
        # smallest upper confidence bound d_k + z * sd_k, so noise alone rarely beats the prior.
        lp0 = posterior_log_probs(c_train, mu_p, 1.0, 0.0, C)
        best = (0.0, 1.0, 0.0, lp0)  # the prior itself: bound 0
        for s_ in S_values:
            for r_ in rho_values:
                lp = posterior_log_probs(c_train, mu_p, s_, r_, C)
                diff = lp - lp0
                bound = -float(np.dot(c_val, diff)) + TUNE_Z * sigma * float(np.linalg.norm(diff))
                if bound < best[0]:
                    best = (bound, s_, r_, lp)
        _, S, rho, logp = best
        params.update(
            S=S,
            rho=rho,
            tuning="noisy-holdout",
            validation_fraction=validation_fraction,
            S_grid=list(S_values),
            rho_grid=list(rho_values),
        )
        tuning_text = "S, rho chosen on a noisy validation split at no extra cost (one Gaussian query on both splits)"
    _params_n(params, public_counts)
    guarantee = (
        f"({epsilon:g}, {delta:g})-DP, user-level add/remove adjacency, for any data: at most {k} distinct n-grams per user "
        f"(random subset), counts clamped to C={C:g}; Gaussian noise on the bounded counts for L2 sensitivity {sens:g} "
        f"({used} sampler); {tuning_text}; prior combination is post-processing"
    )
    return Release(
        keys=key_tuple,
        probabilities=_probs(logp),
        mechanism="bayesian",
        epsilon=epsilon,
        delta=delta,
        guarantee=guarantee,
        formal_dp=True,
        sigma=sigma,
        calibration="opendp-zcdp" if used == "opendp" else "analytic",
        sensitivity=sens,
        sensitivity_method=how,
        sampler=used,
        params=params,
        diagnostics={"n_users": int(m.shape[0])},
    )


def _bounded(m, W: object, k: int, C: float, gen: np.random.Generator) -> tuple[Any, float | None]:
    """Bounded user rows: proportional cap at a numeric W (paper §4.2), else k n-grams and clamp C."""
    if W is None:
        return bound_contributions(m, k, C, gen), None
    if isinstance(W, str):
        raise ValueError(f"W={W!r} is data dependent (not DP); use local_sensitivity=True for the paper's rule")
    W = check_positive("W", W)
    return cap_user_totals(m, W), W


def _bound_params(params: dict[str, Any], Wv: float | None, C: float, k: int, sens: float, how: str) -> dict[str, Any]:
    """``params`` with the enforced bound (W, or C and k) and a caller's larger sensitivity."""
    if Wv is not None:
        params["W"] = Wv
    else:
        params.update(C=C, max_ngrams_per_user=k)
    if how == "given":
        params["sensitivity_bound"] = sens
    return params


def _normalise(x: np.ndarray) -> np.ndarray:
    s = float(x.sum())
    return x / s if s > 0 else np.full(x.size, 1.0 / x.size)


def formal_laplace(
    user_counts: object,
    *,
    epsilon: float,
    W: float | None = None,
    C: float = 1,
    max_ngrams_per_user: int = DEFAULT_MAX_NGRAMS_PER_USER,
    sensitivity: float | None = None,
    sampler: str = "auto",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Laplace baseline (§4.2, item 1) with enforced bounds: bounded counts + Laplace, threshold at
    0, normalise.

    Guarantee: (ε, 0)-DP under user-level add/remove adjacency for any data. Bounds: with ``W``
    None, at most k n-grams per user clamped to C (derived L1 sensitivity C·k); with a number
    ``W``, each user's counts scaled to total at most W (the paper's cap; L1 sensitivity W).
    """
    epsilon = check_positive("epsilon", epsilon)
    C = check_positive("C", C)
    k = check_max_ngrams(max_ngrams_per_user)
    m = _as_csr(user_counts)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    g_bound, g_noise = as_generator(rng).spawn(2)
    b, Wv = _bounded(m, W, k, C, g_bound)
    derived = Wv if Wv is not None else l1_sensitivity(k, C)
    what = f"the capped counts (W={Wv:g})" if Wv is not None else f"the bounded counts (C*k with C={C:g}, k={k})"
    sens, how = resolve_sensitivity(sensitivity, derived, "L1", what)
    c = column_sums(b) if Wv is None else np.bincount(b.indices, weights=b.data, minlength=V)
    noisy, scale, used = noise.laplace_mechanism(c, sens, epsilon, sampler=sampler, rng=g_noise)
    params = _bound_params({"vocabulary_size": int(V), "noised": "bounded counts"}, Wv, C, k, sens, how)
    if Wv is not None:
        bound_text = f"per-user total capped at W={Wv:g}"
    else:
        bound_text = f"at most {k} distinct n-grams per user (random subset), counts clamped to C={C:g}"
    return Release(
        keys=key_tuple,
        probabilities=_normalise(np.maximum(noisy, 0.0)),
        mechanism="laplace",
        epsilon=epsilon,
        delta=0.0,
        guarantee=f"({epsilon:g}, 0)-DP, user-level add/remove adjacency, for any data: {bound_text}; Laplace noise for L1 sensitivity {sens:g} ({used} sampler)",
        formal_dp=True,
        laplace_scale=scale,
        sensitivity=sens,
        sensitivity_method=how if Wv is None else ("cap" if how == "derived" else how),
        sampler=used,
        params=params,
        diagnostics={"n_users": int(m.shape[0])},
    )


def formal_laplace_public(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    W: float | None = None,
    C: float = 1,
    max_ngrams_per_user: int = DEFAULT_MAX_NGRAMS_PER_USER,
    sensitivity: float | None = None,
    sampler: str = "auto",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Laplace + public (§4.2, item 2): max(c/‖c‖₁ − α̃ + Lap(2/ε) + α̃, 0), normalised.

    Guarantee: (ε, 0)-DP under user-level add/remove adjacency for any data. c/‖c‖₁ and α̃ are
    distributions, so f(D) = c/‖c‖₁ − α̃ (0 when c = 0) changes by at most 2 in L1 when one user is
    added or removed: the derived sensitivity is 2 (bounds as :func:`formal_laplace`, which keep
    each user's influence on c finite; the L1 bound 2 holds regardless).
    """
    epsilon = check_positive("epsilon", epsilon)
    C = check_positive("C", C)
    k = check_max_ngrams(max_ngrams_per_user)
    m = _as_csr(user_counts)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    alpha = public_vector(public_counts, key_tuple, V)
    a_sum = alpha.sum()
    alpha_n = alpha / a_sum if a_sum > 0 else np.full(V, 1.0 / V)
    g_bound, g_noise = as_generator(rng).spawn(2)
    b, Wv = _bounded(m, W, k, C, g_bound)
    sens, how = resolve_sensitivity(sensitivity, 2.0, "L1", "c/|c|_1 - alpha (a difference of two distributions)")
    c = np.bincount(b.indices, weights=b.data, minlength=V).astype(np.float64)
    T = c.sum()
    f = (c / T - alpha_n) if T > 0 else np.zeros(V)
    noisy, scale, used = noise.laplace_mechanism(f, sens, epsilon, sampler=sampler, rng=g_noise)
    params = _bound_params({"vocabulary_size": int(V), "noised": "normalised bounded counts minus the prior"}, Wv, C, k, sens, how)
    _params_n(params, public_counts)
    return Release(
        keys=key_tuple,
        probabilities=_normalise(np.maximum(noisy + alpha_n, 0.0)),
        mechanism="laplace-public",
        epsilon=epsilon,
        delta=0.0,
        guarantee=f"({epsilon:g}, 0)-DP, user-level add/remove adjacency, for any data: Laplace noise on c/|c|_1 - alpha for L1 sensitivity {sens:g} ({used} sampler)",
        formal_dp=True,
        laplace_scale=scale,
        sensitivity=sens,
        sensitivity_method=how,
        sampler=used,
        params=params,
        diagnostics={"n_users": int(m.shape[0])},
    )
