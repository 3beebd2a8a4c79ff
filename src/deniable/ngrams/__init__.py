"""Bayesian DP release of n-gram distributions with a public prior.

Implements Ramadan, Withers & Orr, "N-grams Bayesian Differential Privacy"
(``shared/papers/ngram_bayesian_dp.txt``): Algorithm 1 (BayesianDP) with the exact brute-force
sensitivity in O(nnz) or Claim 1's bound, the analytic Gaussian calibration (Balle & Wang 2018)
or the paper's classic one, Algorithm 2 (EndToEndDP tuning), the §4.2 Laplace baselines,
k-anonymity, and the §4.4-§5 evaluations.

Privacy rule: the n-gram vocabulary comes from PUBLIC data only (:func:`build_vocabulary`), so a
release never contains a private-only n-gram. Adjacency is user level (one user's whole data).

Guarantees. ``Release.formal_dp`` is True only when the noise scale is data independent:
``mechanism="laplace"`` with a number W, ``"laplace-public"`` with a number W and a number
``sensitivity`` (2 always bounds it), ``"bayesian"`` with ``sensitivity=<number>`` (a global bound)
and the analytic calibration (or classic with ε < 1). The paper's own calibrations — the default
``sensitivity="exact"``, ``"claim1"``, ``tune=True``, Laplace + public's local sensitivity and
``W="paper-rule"`` — reproduce Ramadan et al. but are NOT formal DP guarantees: ``formal_dp`` is
False, the guarantee text says so, and a :class:`~deniable.errors.PrivacyWarning` is emitted.
Data-dependent values (user count, local sensitivities, σ derived from them, tuned (S, ρ)) are
only in ``Release.diagnostics``, which release files never contain.

Quick use::

    from deniable import ngrams
    vocab = ngrams.build_vocabulary(ngrams.count_public(public_texts, 3), n=3, max_size=50_000)
    users = ngrams.count_users(((u, t) for u, t in records), vocab)
    rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    rel.top(10), rel.formal_dp, rel.guarantee, rel.diagnostics   # paper's method: PrivacyWarning
    formal = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, sensitivity=2.0, rng=0)  # formal_dp
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .._rng import RNGLike
from .baselines import (
    PAPER_RULE,
    k_anonymity_release,
    laplace_public_release,
    laplace_release,
    private_release,
    public_release,
)
from .bayesian import BayesianPlan, bayesian_dp, prepare_bayesian, prior_mean
from .counting import (
    UserCounts,
    Vocabulary,
    build_vocabulary,
    cap_user_totals,
    clamp_counts,
    count_public,
    count_users,
    ngrams_of,
    users_per_ngram,
)
from .evaluate import kl_divergence, membership_inference, private_distribution, smooth, trigram_perplexity
from .gaussian import analytic_sigma, classic_sigma, gaussian_delta
from .release import LOCAL_SENSITIVITY_NOTE, Release
from .sensitivity import brute_force_sensitivity, claim1_bound, exact_sensitivity, per_user_sensitivity
from .tuning import DEFAULT_RHO_GRID, DEFAULT_S_GRID, end_to_end_dp, report_noisy_min

__all__ = [
    "MECHANISMS",
    "release",
    "Release",
    "PAPER_RULE",
    "LOCAL_SENSITIVITY_NOTE",
    "Vocabulary",
    "UserCounts",
    "BayesianPlan",
    "ngrams_of",
    "count_public",
    "build_vocabulary",
    "count_users",
    "clamp_counts",
    "cap_user_totals",
    "users_per_ngram",
    "bayesian_dp",
    "prepare_bayesian",
    "prior_mean",
    "end_to_end_dp",
    "report_noisy_min",
    "DEFAULT_S_GRID",
    "DEFAULT_RHO_GRID",
    "exact_sensitivity",
    "per_user_sensitivity",
    "claim1_bound",
    "brute_force_sensitivity",
    "analytic_sigma",
    "classic_sigma",
    "gaussian_delta",
    "laplace_release",
    "laplace_public_release",
    "k_anonymity_release",
    "public_release",
    "private_release",
    "kl_divergence",
    "smooth",
    "private_distribution",
    "trigram_perplexity",
    "membership_inference",
]

MECHANISMS = ("bayesian", "laplace", "laplace-public", "k-anonymity")


def release(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    delta: float,
    mechanism: str = "bayesian",
    S: float = 1.0,
    rho: float = 0.5,
    C: float = 1,
    sensitivity: str | float = "exact",
    calibration: str = "analytic",
    tune: bool = False,
    S_grid: Sequence[float] = DEFAULT_S_GRID,
    rho_grid: Sequence[float] = DEFAULT_RHO_GRID,
    tune_fraction: float = 1.0 / 3.0,
    validation_fraction: float = 0.1,
    score: str = "mean",
    W: float | str | None = None,
    K: int = 50,
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Release an n-gram distribution over the public vocabulary (user level).

    Guarantee: formal (ε, δ)-DP under user-level add/remove adjacency only when the returned
    ``formal_dp`` is True (see the module docstring). The default (Bayesian with the exact local
    sensitivity, as in the paper) is NOT a formal guarantee and emits a PrivacyWarning; pass
    ``sensitivity=<global bound>`` for formal DP.

    Parameters
    ----------
    user_counts : :class:`UserCounts` (from :func:`count_users`) or a users × |V| count matrix.
    public_counts : the public prior α: a :class:`Vocabulary`, an aligned array, or a mapping.
    epsilon, delta : total privacy parameters (``delta`` is unused by the Laplace baselines,
        which are (ε, 0)-DP, and by k-anonymity, which is not DP).
    mechanism : "bayesian" (Algorithm 1; Algorithm 2 when ``tune``), "laplace", "laplace-public",
        or "k-anonymity" (NOT differentially private; a comparison baseline).
    S, rho, C : Algorithm 1 hyperparameters (ignored when ``tune``, except C).
    sensitivity : "exact" (default; local, not formal DP), "claim1" (local) or a number (a global
        bound: formal DP; see :func:`bayesian_dp`). For "laplace-public": "exact" (local) or a
        number bounding the L1 sensitivity (2 always does).
    calibration : "analytic" (default, any ε) or "classic" (the paper's; ε < 1 only).
    tune : run Algorithm 2 (choice of S, ρ by report-noisy-min over ``S_grid`` × ``rho_grid``, not
        formal DP since its scales are local; ε split
        ``1 − tune_fraction`` / ``tune_fraction``, ``validation_fraction`` of users held out;
        ``score`` "mean" as in the paper or "expected", see :func:`end_to_end_dp`).
    W : per-user total cap for the Laplace baselines, REQUIRED for them: a number chosen without
        the private data (formal DP; with a public bound B on the number of users, the paper's
        rule is ``max(1, B/1000)``), or ``"paper-rule"`` for max(1, |U|/1000) computed from the
        private user count (§4.3; NOT formal DP, PrivacyWarning).
    K : k-anonymity threshold.
    keys : column keys when ``user_counts`` is a bare matrix.
    rng : Generator, seed or None.

    Returns
    -------
    :class:`Release` — probabilities, keys, ε, δ, ``formal_dp``, the guarantee in words, the
    public parameters (``params``), and the data-dependent values (``diagnostics``, never written
    to release files).
    """
    rel = _dispatch(
        user_counts, public_counts, epsilon=epsilon, delta=delta, mechanism=mechanism, S=S, rho=rho, C=C,
        sensitivity=sensitivity, calibration=calibration, tune=tune, S_grid=S_grid, rho_grid=rho_grid,
        tune_fraction=tune_fraction, validation_fraction=validation_fraction, score=score, W=W, K=K, keys=keys, rng=rng,
    )
    if isinstance(public_counts, Vocabulary) and "n" not in rel.params:
        rel = dataclasses.replace(rel, params={**rel.params, "n": int(public_counts.n)})
    return rel


def _dispatch(user_counts: object, public_counts: object, *, epsilon: float, delta: float, mechanism: str, S: float, rho: float, C: float, sensitivity: str | float, calibration: str, tune: bool, S_grid: Sequence[float], rho_grid: Sequence[float], tune_fraction: float, validation_fraction: float, score: str, W: float | str | None, K: int, keys: Sequence[str] | None, rng: RNGLike) -> Release:
    if mechanism == "bayesian":
        if tune:
            return end_to_end_dp(
                user_counts,
                public_counts,
                epsilon=epsilon,
                delta=delta,
                C=C,
                S_grid=S_grid,
                rho_grid=rho_grid,
                tune_fraction=tune_fraction,
                validation_fraction=validation_fraction,
                score=score,
                sensitivity=sensitivity,  # type: ignore[arg-type]
                calibration=calibration,
                keys=keys,
                rng=rng,
            )
        return bayesian_dp(
            user_counts,
            public_counts,
            epsilon=epsilon,
            delta=delta,
            S=S,
            rho=rho,
            C=C,
            sensitivity=sensitivity,
            calibration=calibration,
            keys=keys,
            rng=rng,
        )
    if mechanism in ("laplace", "laplace-public"):
        if W is None:
            raise ValueError(
                f"W is required for mechanism {mechanism!r}: a per-user cap chosen without the private data, "
                f"or W={PAPER_RULE!r} for the paper's max(1, |U|/1000) (data dependent: not formal DP)"
            )
        if mechanism == "laplace":
            return laplace_release(user_counts, epsilon=epsilon, W=W, keys=keys, rng=rng)
        return laplace_public_release(user_counts, public_counts, epsilon=epsilon, W=W, sensitivity=sensitivity, keys=keys, rng=rng)
    if mechanism == "k-anonymity":
        return k_anonymity_release(user_counts, K=K, keys=keys)
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
