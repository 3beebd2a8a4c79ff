"""Formal (ε, δ)-DP n-gram releases by construction: bound, noise the bounded counts, post-process.

The public entry points are :func:`release_bayesian` and :func:`release_laplace` (re-exported as
``deniable.ngrams.release_bayesian`` and ``deniable.ngrams.release_laplace``).

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

**Tuning (S, ρ) without extra budget** (S and ρ both None; replaces Algorithm 2's report-noisy-min,
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

import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_positive, check_unit_interval
from . import noise
from .baselines import normalised_prior, prior_difference
from .bayesian import prior_mean, public_vector, vocabulary_params
from .bounding import DEFAULT_MAX_NGRAMS_PER_USER, bound_contributions, check_max_ngrams, l1_sensitivity, l2_sensitivity
from .counting import _as_csr, cap_user_totals, keys_of
from .release import Release
from .tuning import check_grid

__all__ = [
    "DEFAULT_TUNE_S_GRID",
    "DEFAULT_TUNE_RHO_GRID",
    "column_sums",
    "resolve_sensitivity",
    "posterior_log_probs",
    "release_bayesian",
    "release_laplace",
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
            "leave sensitivity unset (or give a number >= the derived bound) for the formal release; "
            "the paper's calibrations are in deniable.ngrams.paper (reproduction only)"
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


def _probs(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp)
    return p / p.sum()


def release_bayesian(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    delta: float,
    C: float = 1,
    max_ngrams_per_user: int = DEFAULT_MAX_NGRAMS_PER_USER,
    S: float | None = None,
    rho: float | None = None,
    S_grid: Sequence[float] = DEFAULT_TUNE_S_GRID,
    rho_grid: Sequence[float] = DEFAULT_TUNE_RHO_GRID,
    validation_fraction: float = 0.1,
    sensitivity: float | None = None,
    sampler: str = "auto",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Bayesian release of an n-gram distribution with a public prior, formal (ε, δ)-DP.

    The posterior mean of Ramadan, Withers & Orr (``shared/papers/ngram_bayesian_dp.txt``, §3:
    Equations 1, 2, 4, 5, Corollary 1) computed from the bounded counts plus Gaussian noise,
    instead of Algorithm 1's noise calibrated to a local sensitivity (§3.1; module docstring).

    Guarantee: (ε, δ)-DP (§2.1, Definition 1, adjacency: adding or removing one user's whole
    data) for any data, over the public vocabulary. The only private input to the output is the
    bounded count vector plus Gaussian noise for its L2 sensitivity C·√k (Definition 2), derived
    from the bounds the release enforced; σ from the analytic Gaussian mechanism (Balle & Wang
    2018, valid for every ε, unlike §2.2's Definition 4) or OpenDP's discrete Gaussian. S, ρ (or
    their noisy-holdout choice, replacing §3.2's report-noisy-min at no extra budget) and the prior
    are post-processing. ``formal_dp`` is True; nothing warns.

    Parameters
    ----------
    user_counts : :class:`~deniable.ngrams.UserCounts` or a users × |V| count matrix (bounded here).
    public_counts : the public prior α (an NgramVocabulary, an aligned array or a mapping).
    epsilon, delta : the total privacy budget.
    C, max_ngrams_per_user : the contribution bounds the release enforces: counts clamped to C,
        at most k distinct n-grams per user (a uniformly random subset).
    S, rho : decay slope (Equation 5) and private weight ρ (Corollary 1), public. Both None
        (default): chosen over ``S_grid`` × ``rho_grid`` on a noisy validation split at no extra
        budget. Giving either one fixes them (the other defaults to S = 1, ρ = 0.5).
    S_grid, rho_grid, validation_fraction : the tuning grid and the probability that a user goes
        to the validation split (used only when S and ρ are both None).
    sensitivity : None (the derived C·√k) or a number >= it (more noise); smaller is a ValueError.
    sampler : "auto" (OpenDP when installed), "opendp" or "numpy" (see :mod:`.noise`).
    keys : column keys when ``user_counts`` is a bare matrix.
    rng : Generator, seed or None (subset selection, split; and the noise with ``sampler="numpy"``).

    Returns
    -------
    Release with ``formal_dp`` True, σ, the derived sensitivity, the sampler, and public params
    (C, k, S, ρ, the tuning, n).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    C = check_positive("C", C)
    k = check_max_ngrams(max_ngrams_per_user)
    tuning = _check_tuning(S_grid, rho_grid, validation_fraction) if S is None and rho is None else None
    if tuning is None:
        S = check_positive("S", 1.0 if S is None else S)
        rho = check_unit_interval("rho", 0.5 if rho is None else rho)
    sens, how = resolve_sensitivity(sensitivity, l2_sensitivity(k, C), "L2", f"the bounded counts (C*sqrt(k) with C={C:g}, k={k})")
    m = _as_csr(user_counts)
    key_tuple = keys_of(user_counts, keys, m.shape[1])
    mu_p = prior_mean(public_vector(public_counts, key_tuple, m.shape[1]))
    g_bound, g_split, g_noise = as_generator(rng).spawn(3)
    b = bound_contributions(m, k, C, g_bound)

    def gaussian(x: np.ndarray) -> tuple[np.ndarray, float, str]:
        return noise.gaussian_mechanism(x, sens, epsilon, delta, sampler=sampler, rng=g_noise)

    if tuning is None:
        noisy, sigma, used = gaussian(column_sums(b))
        logp = posterior_log_probs(noisy, mu_p, S, rho, C)  # type: ignore[arg-type]
        chosen: dict[str, Any] = {"S": S, "rho": rho, "tuning": "none (S and rho given by the caller)"}
        tuning_text = "S, rho given"
    else:
        logp, sigma, used, chosen = _noisy_holdout(b, mu_p, tuning, C, gaussian, g_split)
        tuning_text = "S, rho chosen on a noisy validation split at no extra cost (one Gaussian query on both splits)"
    params = {"C": C, "max_ngrams_per_user": k, "vocabulary_size": int(m.shape[1]), "noised": "bounded counts", **chosen, **vocabulary_params(public_counts)}
    if how == "given":
        params["sensitivity_bound"] = sens
    guarantee = (
        f"({epsilon:g}, {delta:g})-DP, user-level add/remove adjacency, for any data: at most {k} distinct n-grams per user "
        f"(random subset), counts clamped to C={C:g}; Gaussian noise on the bounded counts for L2 sensitivity {sens:g} "
        f"({used} sampler); {tuning_text}; prior combination is post-processing"
    )
    return Release(
        keys=key_tuple, probabilities=_probs(logp), mechanism="bayesian", epsilon=epsilon, delta=delta, guarantee=guarantee, formal_dp=True,
        sigma=sigma, calibration="opendp-zcdp" if used == "opendp" else "analytic", sensitivity=sens, sensitivity_method=how, sampler=used,
        params=params, diagnostics={"n_users": int(m.shape[0])},
    )


_Tuning = tuple[tuple[float, ...], tuple[float, ...], float]


def _check_tuning(S_grid: Sequence[float], rho_grid: Sequence[float], validation_fraction: float) -> _Tuning:
    """The validated (S grid, ρ grid, validation fraction) of the noisy-holdout tuning."""
    S_values, rho_values = check_grid(S_grid, rho_grid)
    return S_values, rho_values, check_unit_interval("validation_fraction", validation_fraction, open_low=True, open_high=True)


def _noisy_holdout(
    b: Any,
    mu_p: np.ndarray,
    tuning: _Tuning,
    C: float,
    gaussian: Callable[[np.ndarray], tuple[np.ndarray, float, str]],
    g_split: np.random.Generator,
) -> tuple[np.ndarray, float, str, dict[str, Any]]:
    """(log θ, σ, sampler, the public tuning params) of the tuning by noisy holdout (module docstring).

    Each user (row of the bounded ``b``) goes to the validation split with probability
    ``validation_fraction``; the two splits' counts get ONE Gaussian noise draw (``gaussian``).
    Every candidate is scored against the noisy validation counts relative to the public prior
    (ρ = 0): d = −c̃_val·(log θ − log θ⁰) is unbiased for the true difference and its noise has
    sd σ·‖log θ − log θ⁰‖₂ (σ is public); the smallest upper bound d + TUNE_Z·sd wins, the prior
    itself (bound 0) when none is clearly better.
    """
    S_values, rho_values, validation_fraction = tuning
    V = b.shape[1]
    val = g_split.random(b.shape[0]) < validation_fraction
    noisy, sigma, used = gaussian(np.concatenate([column_sums(b[~val]), column_sums(b[val])]))
    c_train, c_val = noisy[:V], noisy[V:]
    lp0 = posterior_log_probs(c_train, mu_p, 1.0, 0.0, C)
    best = (0.0, 1.0, 0.0, lp0)  # the prior itself: bound 0
    for s_, r_ in itertools.product(S_values, rho_values):
        lp = posterior_log_probs(c_train, mu_p, s_, r_, C)
        diff = lp - lp0
        bound = -float(np.dot(c_val, diff)) + TUNE_Z * sigma * float(np.linalg.norm(diff))
        if bound < best[0]:
            best = (bound, s_, r_, lp)
    _, S, rho, logp = best
    chosen = {"S": S, "rho": rho, "tuning": "noisy-holdout", "validation_fraction": validation_fraction, "S_grid": list(S_values), "rho_grid": list(rho_values)}
    return logp, sigma, used, chosen


def _check_cap(W: object) -> float | None:
    """A caller's per-user total cap: None or a number > 0 (the paper's rule is data dependent)."""
    if W is None:
        return None
    if isinstance(W, str):
        raise ValueError(
            f"W={W!r} is data dependent (not DP): give a number chosen without the private data, or None for the bounds k and C; "
            "the paper's rule is deniable.ngrams.paper.laplace_not_dp / laplace_public_not_dp"
        )
    return check_positive("W", W)


def _normalise(x: np.ndarray) -> np.ndarray:
    s = float(x.sum())
    return x / s if s > 0 else np.full(x.size, 1.0 / x.size)


def release_laplace(
    user_counts: object,
    public_counts: object = None,
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
    """The Laplace baselines of Ramadan, Withers & Orr (``shared/papers/ngram_bayesian_dp.txt``,
    §4.2) with bounds the release enforces, formal (ε, 0)-DP.

    Without ``public_counts`` (§4.2, item 1): bounded counts + Laplace noise, thresholded at 0 and
    normalised. With ``public_counts`` (§4.2, item 2, "Laplace + public"):
    max(c/‖c‖₁ − α̃ + Lap(2/ε) + α̃, 0), normalised, α̃ the normalised public counts.

    Guarantee: (ε, 0)-DP (§2.1, Definition 1, with add/remove adjacency: one user's whole data)
    for any data, over the public vocabulary; the Laplace mechanism (§2.2, Definition 3) with the
    L1 sensitivity (Definition 2) derived from enforced bounds. Bounds: with ``W`` None, at most
    k n-grams per user (a random subset) clamped to C, L1 sensitivity C·k; with a number ``W``
    (chosen without the private data; the paper's cap), each user's counts scaled to total at most
    W, sensitivity W. With the prior the noised statistic c/‖c‖₁ − α̃ (0 when c = 0) is a
    difference of two distributions, so its L1 sensitivity is 2 whatever the bounds (which keep
    each user's influence on c finite). The paper's W = |U|/1000 rule (§4.3) is data dependent and
    refused here (:func:`deniable.ngrams.paper.laplace_not_dp`). ``formal_dp`` is True.

    Parameters
    ----------
    user_counts : :class:`~deniable.ngrams.UserCounts` or a users × |V| count matrix (bounded here).
    public_counts : None (item 1) or the public counts α (item 2): an NgramVocabulary, an aligned
        array or a mapping.
    epsilon : the privacy budget (δ = 0).
    W : None (bounds k and C) or a per-user total cap (a number > 0).
    C, max_ngrams_per_user : the bounds enforced when ``W`` is None.
    sensitivity : None (derived: C·k, W, or 2 with the prior) or a number >= it (more noise).
    sampler : "auto" (OpenDP when installed), "opendp" or "numpy" (see :mod:`.noise`).
    keys : column keys when ``user_counts`` is a bare matrix.
    rng : Generator, seed or None (subset selection; and the noise with ``sampler="numpy"``).
    """
    epsilon = check_positive("epsilon", epsilon)
    C = check_positive("C", C)
    k = check_max_ngrams(max_ngrams_per_user)
    Wv = _check_cap(W)
    if public_counts is not None:
        derived, what = 2.0, "c/|c|_1 - alpha (a difference of two distributions)"
    elif Wv is not None:
        derived, what = Wv, f"the capped counts (W={Wv:g})"
    else:
        derived, what = l1_sensitivity(k, C), f"the bounded counts (C*k with C={C:g}, k={k})"
    sens, how = resolve_sensitivity(sensitivity, derived, "L1", what)
    m = _as_csr(user_counts)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    alpha_n = None if public_counts is None else normalised_prior(public_counts, key_tuple, V)
    g_bound, g_noise = as_generator(rng).spawn(2)
    b = bound_contributions(m, k, C, g_bound) if Wv is None else cap_user_totals(m, Wv)
    params: dict[str, Any] = {"vocabulary_size": int(V)}
    params.update({"W": Wv} if Wv is not None else {"C": C, "max_ngrams_per_user": k})
    if how == "given":
        params["sensitivity_bound"] = sens
    if alpha_n is None:
        noisy, scale, used = noise.laplace_mechanism(column_sums(b), sens, epsilon, sampler=sampler, rng=g_noise)
        probabilities = _normalise(np.maximum(noisy, 0.0))
        bound_text = f"per-user total capped at W={Wv:g}" if Wv is not None else f"at most {k} distinct n-grams per user (random subset), counts clamped to C={C:g}"
        guarantee = f"({epsilon:g}, 0)-DP, user-level add/remove adjacency, for any data: {bound_text}; Laplace noise for L1 sensitivity {sens:g} ({used} sampler)"
        params["noised"] = "bounded counts"
        method = "cap" if Wv is not None and how == "derived" else how
    else:
        noisy, scale, used = noise.laplace_mechanism(prior_difference(b, alpha_n), sens, epsilon, sampler=sampler, rng=g_noise)
        probabilities = _normalise(np.maximum(noisy + alpha_n, 0.0))
        guarantee = f"({epsilon:g}, 0)-DP, user-level add/remove adjacency, for any data: Laplace noise on c/|c|_1 - alpha for L1 sensitivity {sens:g} ({used} sampler)"
        params.update(noised="normalised bounded counts minus the prior", **vocabulary_params(public_counts))
        method = how
    return Release(
        keys=key_tuple, probabilities=probabilities, mechanism="laplace" if alpha_n is None else "laplace-public", epsilon=epsilon, delta=0.0,
        guarantee=guarantee, formal_dp=True, laplace_scale=scale, sensitivity=sens, sensitivity_method=method, sampler=used, params=params,
        diagnostics={"n_users": int(m.shape[0])},
    )
