"""Bayesian DP release of n-gram distributions with a public prior.

Implements Ramadan, Withers & Orr, "N-grams Bayesian Differential Privacy"
(``shared/papers/ngram_bayesian_dp.txt``): Algorithm 1 (BayesianDP) with the exact brute-force
sensitivity in O(nnz) or Claim 1's bound, the analytic Gaussian calibration (Balle & Wang 2018)
or the paper's classic one, Algorithm 2 (EndToEndDP tuning), the §4.2 Laplace baselines,
k-anonymity, and the §4.4-§5 evaluations.

Privacy rule: the n-gram vocabulary comes from PUBLIC data only (:func:`build_vocabulary`), so a
release never contains a private-only n-gram. Adjacency is user level (one user's whole data).

Formal API — (ε, δ)-DP under user-level add/remove adjacency for ANY data, by construction
(:mod:`deniable.ngrams.formal`): :func:`release_bayesian` bounds each user's contribution itself
(at most ``max_ngrams_per_user`` distinct n-grams, counts clamped to C), noises the bounded counts
once for the global sensitivity derived from those bounds (OpenDP's samplers when installed), and
combines them with the public prior as post-processing; (S, ρ) are tuned on a noisy validation
split at no extra budget unless given. :func:`release_laplace` is the formal Laplace baseline
(bounds k and C, or a numeric cap W), and with the public counts Laplace + public (L1 sensitivity
2). ``formal_dp`` is True and nothing warns.

The paper's own calibrations (local sensitivities: Algorithm 1 with the exact or Claim 1
sensitivity, Algorithm 2, Laplace + public's local L1; the W = |U|/1000 rule; k-anonymity) are NOT
differentially private and live apart, for reproducing the paper's tables only, in
:mod:`deniable.ngrams.paper` (every name ends in ``_not_dp``; ``formal_dp`` is False, the guarantee
text says so, and a :class:`~deniable.errors.PrivacyWarning` is emitted). Data-dependent values
(user count, local sensitivities, σ derived from them) are only in ``Release.diagnostics``, which
release files never contain.

The all-in-one :func:`release` is deprecated (a :class:`DeprecationWarning` names the
replacement); it dispatches to the functions above with the same outputs for the same seed.

Quick use::

    from deniable import ngrams
    vocab = ngrams.build_vocabulary(ngrams.count_public(public_texts, 3), n=3, max_size=50_000)
    users = ngrams.count_users(((u, t) for u, t in records), vocab)
    rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6)    # formal (ε, δ)-DP, (S, ρ) chosen privately
    rel.top(10), rel.formal_dp, rel.guarantee, rel.sampler
    fixed = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, S=0.01, rho=0.7)
    lap = ngrams.release_laplace(users, epsilon=1.0)                        # formal (ε, 0)-DP
    lap_pub = ngrams.release_laplace(users, vocab, epsilon=1.0)             # Laplace + public, formal

    from deniable.ngrams import paper                                       # NOT DP: reproduction only
    table = paper.bayesian_not_dp(users, vocab, epsilon=1.0, delta=1e-6, rng=0)   # PrivacyWarning
"""

from __future__ import annotations

from . import paper as paper  # the paper's modes, NOT DP (not exported by ``*``)
from ._legacy import MECHANISMS, release

# Deprecated aliases, importable but not exported by ``*`` (each call warns): formal_bayesian ->
# release_bayesian, formal_laplace and formal_laplace_public -> release_laplace, bayesian_dp ->
# paper.bayesian_not_dp, end_to_end_dp -> paper.bayesian_tuned_not_dp.
from ._legacy import bayesian_dp as bayesian_dp
from ._legacy import end_to_end_dp as end_to_end_dp
from ._legacy import formal_bayesian as formal_bayesian
from ._legacy import formal_laplace as formal_laplace
from ._legacy import formal_laplace_public as formal_laplace_public
from .baselines import (
    PAPER_RULE,
    k_anonymity_release,
    laplace_public_release,
    laplace_release,
    private_release,
    public_release,
)
from .bayesian import BayesianPlan, prepare_bayesian, prior_mean
from .bounding import DEFAULT_MAX_NGRAMS_PER_USER, bound_contributions, l1_sensitivity, l2_sensitivity
from .counting import (
    NgramVocabulary,
    UserCounts,
    _deprecated_vocabulary,
    build_vocabulary,
    cap_user_totals,
    clamp_counts,
    count_public,
    count_users,
    ngrams_of,
    users_per_ngram,
)
from .evaluate import kl_divergence, membership_inference, private_distribution, release_membership_inference, smooth, trigram_perplexity
from .formal import DEFAULT_TUNE_RHO_GRID, DEFAULT_TUNE_S_GRID, release_bayesian, release_laplace
from .gaussian import analytic_sigma, classic_sigma, gaussian_delta
from .release import LOCAL_SENSITIVITY_NOTE, Release
from .sensitivity import brute_force_sensitivity, claim1_bound, exact_sensitivity, per_user_sensitivity
from .tuning import DEFAULT_RHO_GRID, DEFAULT_S_GRID, report_noisy_min

__all__ = [
    "release_bayesian",
    "release_laplace",
    "Release",
    "PAPER_RULE",
    "LOCAL_SENSITIVITY_NOTE",
    "NgramVocabulary",
    "UserCounts",
    "BayesianPlan",
    "DEFAULT_MAX_NGRAMS_PER_USER",
    "bound_contributions",
    "l1_sensitivity",
    "l2_sensitivity",
    "ngrams_of",
    "count_public",
    "build_vocabulary",
    "count_users",
    "clamp_counts",
    "cap_user_totals",
    "users_per_ngram",
    "prepare_bayesian",
    "prior_mean",
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
    "release_membership_inference",
    "DEFAULT_TUNE_S_GRID",
    "DEFAULT_TUNE_RHO_GRID",
    # deprecated: release (-> release_bayesian, release_laplace, paper.*), membership_inference
    # (-> release_membership_inference)
    "MECHANISMS",
    "release",
    "membership_inference",
]


def __getattr__(name: str) -> object:
    # ``Vocabulary``: the deprecated old name of NgramVocabulary (warns; not exported by ``*``)
    if name == "Vocabulary":
        return _deprecated_vocabulary()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
