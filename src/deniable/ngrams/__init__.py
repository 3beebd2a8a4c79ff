"""Bayesian DP release of n-gram distributions with a public prior.

Implements Ramadan, Withers & Orr, "N-grams Bayesian Differential Privacy"
(``shared/papers/ngram_bayesian_dp.txt``): Algorithm 1 (BayesianDP) with the exact brute-force
sensitivity in O(nnz) or Claim 1's bound, the analytic Gaussian calibration (Balle & Wang 2018)
or the paper's classic one, Algorithm 2 (EndToEndDP tuning), the §4.2 Laplace baselines,
k-anonymity, and the §4.4-§5 evaluations.

Privacy rule: the n-gram vocabulary comes from PUBLIC data only (:func:`build_vocabulary`), so a
release never contains a private-only n-gram. Adjacency is user level (one user's whole data).

Guarantees. The default release is formal (ε, δ)-DP by construction
(:mod:`deniable.ngrams.formal`): ``release`` bounds each user's contribution itself (at most
``max_ngrams_per_user`` distinct n-grams, counts clamped to C), noises the bounded counts for the
global sensitivity derived from those bounds (OpenDP's samplers when installed), and combines
them with the public prior as post-processing. Laplace (bounds k and C, or a numeric cap W) and
Laplace + public (L1 sensitivity 2) are formal too. The paper's local-sensitivity calibrations
(``local_sensitivity=True``: exact or Claim 1 sensitivity, Algorithm 2, Laplace + public's local
L1) and ``W="paper-rule"`` reproduce Ramadan et al. but are NOT formal DP guarantees:
``formal_dp`` is False, the guarantee text says so, and a
:class:`~deniable.errors.PrivacyWarning` is emitted. Data-dependent values (user count, local
sensitivities, σ derived from them) are only in ``Release.diagnostics``, which release files never
contain.

Quick use::

    from deniable import ngrams
    vocab = ngrams.build_vocabulary(ngrams.count_public(public_texts, 3), n=3, max_size=50_000)
    users = ngrams.count_users(((u, t) for u, t in records), vocab)
    rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6)       # formal (ε, δ)-DP
    rel.top(10), rel.formal_dp, rel.guarantee, rel.sampler
    tuned = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, tune=True)   # formal, (S, ρ) chosen privately
    paper = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, local_sensitivity=True, rng=0)  # PrivacyWarning
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

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
from .bounding import DEFAULT_MAX_NGRAMS_PER_USER, bound_contributions, l1_sensitivity, l2_sensitivity
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
from .formal import DEFAULT_TUNE_RHO_GRID, DEFAULT_TUNE_S_GRID, formal_bayesian, formal_laplace, formal_laplace_public
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
    "DEFAULT_MAX_NGRAMS_PER_USER",
    "bound_contributions",
    "l1_sensitivity",
    "l2_sensitivity",
    "formal_bayesian",
    "formal_laplace",
    "formal_laplace_public",
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
    S: float | None = None,
    rho: float | None = None,
    C: float = 1,
    max_ngrams_per_user: int = DEFAULT_MAX_NGRAMS_PER_USER,
    sensitivity: str | float | None = None,
    local_sensitivity: bool = False,
    calibration: str = "analytic",
    tune: bool | None = None,
    S_grid: Sequence[float] | None = None,
    rho_grid: Sequence[float] | None = None,
    tune_fraction: float = 1.0 / 3.0,
    validation_fraction: float = 0.1,
    score: str = "mean",
    W: float | str | None = None,
    K: int = 50,
    sampler: str = "auto",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Release an n-gram distribution over the public vocabulary (user level).

    Guarantee: by default formal (ε, δ)-DP under user-level add/remove adjacency, for any data
    (``formal_dp`` True, no warning): the release itself bounds every user's contribution (at most
    ``max_ngrams_per_user`` distinct n-grams, a random subset, counts clamped to ``C``), derives
    the global sensitivity of exactly the statistic it perturbs (L2 C·√k for the Gaussian
    Bayesian release, L1 C·k or W for Laplace, 2 for Laplace + public) and combines the noisy
    counts with the public prior as post-processing (:mod:`deniable.ngrams.formal`). The paper's
    local-sensitivity calibrations are reachable only with ``local_sensitivity=True`` (NOT
    formal: ``formal_dp`` False and a PrivacyWarning); so is ``W="paper-rule"``; k-anonymity is
    not DP.

    Parameters
    ----------
    user_counts : :class:`UserCounts` (from :func:`count_users`) or a users × |V| count matrix.
    public_counts : the public prior α: a :class:`Vocabulary`, an aligned array, or a mapping.
    epsilon, delta : total privacy parameters (``delta`` is unused by the Laplace baselines,
        which are (ε, 0)-DP, and by k-anonymity, which is not DP).
    mechanism : "bayesian" (default), "laplace", "laplace-public", or "k-anonymity" (NOT
        differentially private; a comparison baseline).
    S, rho : decay slope (Equation 5) and private weight ρ. Giving either one fixes them (no
        tuning unless ``tune=True``); when both are None, the formal Bayesian release tunes them
        (see ``tune``) and the paper's modes use S = 1, ρ = 0.5.
    C, max_ngrams_per_user : the per-user bounds the formal releases enforce (count clamp C; at
        most k distinct n-grams per user). The paper's modes use C only.
    sensitivity : formal modes: None (the derived global bound) or a number >= it (more noise;
        a smaller number is a ValueError). With ``local_sensitivity=True``: "exact" (default),
        "claim1" (Bayesian) or a number (the paper's paths; not formal).
    local_sensitivity : reproduce the paper's local-sensitivity calibrations (Algorithm 1 with
        the exact or Claim 1 sensitivity, Algorithm 2, Laplace + public's local L1): NOT formal DP.
    calibration : local Bayesian modes only: "analytic" (default) or "classic" (ε < 1).
    tune : choose (S, ρ). Default (None): True for the formal Bayesian release when neither S nor
        ρ is given, else False. Formal: on a noisy validation split at no extra budget (see
        :func:`~deniable.ngrams.formal.formal_bayesian`; grids default to
        ``formal.DEFAULT_TUNE_S_GRID`` × ``DEFAULT_TUNE_RHO_GRID``). Local: Algorithm 2
        (report-noisy-min with local scales, ε split by ``tune_fraction``, ``score``).
    validation_fraction : share of users used to score the candidates when ``tune``.
    W : Laplace baselines: None (bounds k and C, formal), a number (the paper's per-user total cap,
        chosen without the private data: formal), or "paper-rule" (max(1, |U|/1000) from the
        private user count, §4.3; NOT formal, PrivacyWarning).
    K : k-anonymity threshold.
    sampler : formal modes: "auto" (OpenDP when installed, else numpy), "opendp" or "numpy";
        the release records the one used (:mod:`deniable.ngrams.noise`).
    keys : column keys when ``user_counts`` is a bare matrix.
    rng : Generator, seed or None (bounding subsets, splits; noise only with the numpy sampler).

    Returns
    -------
    :class:`Release` — probabilities, keys, ε, δ, ``formal_dp``, the guarantee in words, the
    sampler, the public parameters (``params``), and the data-dependent values
    (``diagnostics``, never written to release files).
    """
    if not isinstance(local_sensitivity, (bool, np.bool_)):
        raise TypeError(f"local_sensitivity must be True or False, got {local_sensitivity!r}")
    if tune is None:
        tune = not local_sensitivity and mechanism == "bayesian" and S is None and rho is None
    S = 1.0 if S is None else S
    rho = 0.5 if rho is None else rho
    if local_sensitivity:
        rel = _dispatch_local(
            user_counts, public_counts, epsilon=epsilon, delta=delta, mechanism=mechanism, S=S, rho=rho, C=C,
            sensitivity="exact" if sensitivity is None else sensitivity, calibration=calibration, tune=tune,
            S_grid=DEFAULT_S_GRID if S_grid is None else S_grid, rho_grid=DEFAULT_RHO_GRID if rho_grid is None else rho_grid,
            tune_fraction=tune_fraction, validation_fraction=validation_fraction, score=score, W=W, K=K, keys=keys, rng=rng,
        )
    else:
        rel = _dispatch_formal(
            user_counts, public_counts, epsilon=epsilon, delta=delta, mechanism=mechanism, S=S, rho=rho, C=C,
            max_ngrams_per_user=max_ngrams_per_user, sensitivity=sensitivity, tune=tune,
            S_grid=DEFAULT_TUNE_S_GRID if S_grid is None else S_grid, rho_grid=DEFAULT_TUNE_RHO_GRID if rho_grid is None else rho_grid,
            validation_fraction=validation_fraction, W=W, K=K, sampler=sampler, keys=keys, rng=rng,
        )
    if isinstance(public_counts, Vocabulary) and "n" not in rel.params:
        rel = dataclasses.replace(rel, params={**rel.params, "n": int(public_counts.n)})
    return rel


def _dispatch_formal(user_counts: object, public_counts: object, *, epsilon: float, delta: float, mechanism: str, S: float, rho: float, C: float, max_ngrams_per_user: int, sensitivity: object, tune: bool, S_grid: Sequence[float], rho_grid: Sequence[float], validation_fraction: float, W: float | str | None, K: int, sampler: str, keys: Sequence[str] | None, rng: RNGLike) -> Release:
    if tune and mechanism != "bayesian":
        raise ValueError("tune applies to the bayesian mechanism only")
    if mechanism == "bayesian":
        if W is not None:
            raise ValueError("W applies to the Laplace mechanisms only")
        return formal_bayesian(
            user_counts, public_counts, epsilon=epsilon, delta=delta, S=S, rho=rho, C=C, max_ngrams_per_user=max_ngrams_per_user,
            sensitivity=sensitivity, tune=tune, S_grid=S_grid, rho_grid=rho_grid, validation_fraction=validation_fraction,  # type: ignore[arg-type]
            sampler=sampler, keys=keys, rng=rng,
        )
    if mechanism in ("laplace", "laplace-public"):
        if W == PAPER_RULE:  # explicit opt-in to the paper's data-dependent cap (not formal, warns)
            if mechanism == "laplace":
                return laplace_release(user_counts, epsilon=epsilon, W=W, keys=keys, rng=rng)
            return laplace_public_release(
                user_counts, public_counts, epsilon=epsilon, W=W, sensitivity=2.0 if sensitivity is None else sensitivity, keys=keys, rng=rng  # type: ignore[arg-type]
            )
        if mechanism == "laplace":
            return formal_laplace(
                user_counts, epsilon=epsilon, W=W, C=C, max_ngrams_per_user=max_ngrams_per_user, sensitivity=sensitivity,  # type: ignore[arg-type]
                sampler=sampler, keys=keys, rng=rng,
            )
        return formal_laplace_public(
            user_counts, public_counts, epsilon=epsilon, W=W, C=C, max_ngrams_per_user=max_ngrams_per_user,  # type: ignore[arg-type]
            sensitivity=sensitivity, sampler=sampler, keys=keys, rng=rng,  # type: ignore[arg-type]
        )
    if mechanism == "k-anonymity":
        return k_anonymity_release(user_counts, K=K, keys=keys)
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")


def _dispatch_local(user_counts: object, public_counts: object, *, epsilon: float, delta: float, mechanism: str, S: float, rho: float, C: float, sensitivity: str | float, calibration: str, tune: bool, S_grid: Sequence[float], rho_grid: Sequence[float], tune_fraction: float, validation_fraction: float, score: str, W: float | str | None, K: int, keys: Sequence[str] | None, rng: RNGLike) -> Release:
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
                f"W is required for mechanism {mechanism!r} with local_sensitivity=True: a per-user cap, "
                f"or W={PAPER_RULE!r} for the paper's max(1, |U|/1000) (data dependent: not formal DP)"
            )
        if mechanism == "laplace":
            return laplace_release(user_counts, epsilon=epsilon, W=W, keys=keys, rng=rng)
        return laplace_public_release(user_counts, public_counts, epsilon=epsilon, W=W, sensitivity=sensitivity, keys=keys, rng=rng)
    if mechanism == "k-anonymity":
        return k_anonymity_release(user_counts, K=K, keys=keys)
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
