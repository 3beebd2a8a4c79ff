"""The paper's own calibrations, for reproducing its tables only: NONE of these is differentially private.

Ramadan, Withers & Orr, "N-grams Bayesian Differential Privacy"
(``shared/papers/ngram_bayesian_dp.txt``) calibrate their noise to quantities computed from the
dataset at hand: the brute-force or Claim 1 sensitivity of Algorithm 1 (§3.1) and Algorithm 2's
report-noisy-min scales (§3.2, Claim 2) are LOCAL sensitivities (maxima over removing each user of
this data, so σ differs between neighbouring datasets, and nothing bounds how many n-grams one user
contributes); §4.3's Laplace cap W = max(1, |U|/1000) is derived from the private user count; and
k-anonymity (§4.5) is not a DP notion at all. The functions here reproduce those mechanisms as the
paper states them, so every name ends in ``_not_dp``: each returns a
:class:`~deniable.ngrams.Release` with ``formal_dp`` False and a guarantee line saying so, emits a
:class:`~deniable.errors.PrivacyWarning`, and keeps every data-dependent value (user count, local
sensitivities, σ, the data-derived W, Algorithm 2's choice) in ``Release.diagnostics``, which no
release file contains. A configuration that would be formal is refused with a pointer to the
formal API.

For a release with a guarantee use :func:`deniable.ngrams.release_bayesian` or
:func:`deniable.ngrams.release_laplace`: (ε, δ)-DP for any data, with contribution bounds the
release enforces itself. The functions here are not re-exported by ``deniable.ngrams`` (nor
listed in its ``__all__``): they are reached only by this module's name,
``from deniable.ngrams import paper``.

* :func:`bayesian_not_dp` — Algorithm 1 (BayesianDP) with the exact local sensitivity, Claim 1's
  bound, or a caller's unverified number.
* :func:`bayesian_tuned_not_dp` — Algorithm 2 (EndToEndDP): (S, ρ) by report-noisy-min with local
  scales, then Algorithm 1 on the training users.
* :func:`laplace_not_dp` — §4.2 item 1 with §4.3's cap W = max(1, |U|/1000).
* :func:`laplace_public_not_dp` — §4.2 item 2 with its exact local L1 sensitivity and/or §4.3's W.
* :func:`k_anonymity_not_dp` — §4.5's k-anonymity baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._rng import RNGLike
from .baselines import PAPER_RULE, k_anonymity_release, laplace_public_release, laplace_release
from .bayesian import prepare_bayesian, vocabulary_params
from .release import Release
from .tuning import end_to_end_dp

__all__ = ["bayesian_not_dp", "bayesian_tuned_not_dp", "laplace_not_dp", "laplace_public_not_dp", "k_anonymity_not_dp", "PAPER_RULE"]


def bayesian_not_dp(user_counts: object, public_counts: object, *, rng: RNGLike = None, **options: Any) -> Release:
    """Algorithm 1 (BayesianDP, §3): softmax(h), h ~ N(ρ·w⊙x̂ + (1−ρ)·μ_p, σ²I). NOT DP.

    σ is calibrated to ρ·γ with γ the local sensitivity of w⊙x̂ on THIS data (§3.1: the exact
    brute-force maximum, computed in O(nnz), or Claim 1's bound with two corrections), or to a
    caller's number that no enforced bound backs; see :mod:`deniable.ngrams.bayesian`.

    Guarantee: none (``formal_dp`` False, PrivacyWarning); the nominal (ε, δ) is the paper's.

    Parameters
    ----------
    user_counts, public_counts : as :func:`~deniable.ngrams.bayesian.prepare_bayesian`.
    rng : Generator, seed or None (the Gaussian draw).
    **options : the keyword arguments of :func:`~deniable.ngrams.bayesian.prepare_bayesian`:
        ``epsilon``, ``delta`` (required), ``S`` = 1, ``rho`` = 0.5, ``C`` = 1,
        ``sensitivity`` = "exact" ("claim1" or a number), ``calibration`` = "analytic"
        ("classic" is the paper's, proven for ε < 1 only), ``keys``.
    """
    return prepare_bayesian(user_counts, public_counts, **options).release(rng)


def bayesian_tuned_not_dp(user_counts: object, public_counts: object, *, rng: RNGLike = None, **options: Any) -> Release:
    """Algorithm 2 (EndToEndDP, §3.2, §4.3): (S, ρ) by report-noisy-min on a validation split, then
    Algorithm 1 on the training users. NOT DP: both noise scales are local sensitivities.

    Guarantee: none (``formal_dp`` False, PrivacyWarning); the nominal budget is split as in the
    paper (2ε/3 release, ε/3 tuning by default).

    Parameters
    ----------
    user_counts, public_counts : as :func:`~deniable.ngrams.tuning.end_to_end_dp`.
    rng : Generator, seed or None (split, selection noise, release).
    **options : the keyword arguments of :func:`~deniable.ngrams.tuning.end_to_end_dp`:
        ``epsilon``, ``delta`` (required), ``C``, ``S_grid``, ``rho_grid``, ``tune_fraction``,
        ``validation_fraction``, ``sensitivity`` ("exact" or "claim1"), ``calibration``,
        ``score`` ("mean", the paper's, or "expected"), ``n_noise_draws``, ``keys``.
    """
    rel = end_to_end_dp(user_counts, public_counts, rng=rng, **options)
    return rel.with_params(**vocabulary_params(public_counts))


def laplace_not_dp(user_counts: object, *, epsilon: float, keys: Sequence[str] | None = None, rng: RNGLike = None) -> Release:
    """The Laplace baseline (§4.2, item 1) with §4.3's cap W = max(1, |U|/1000). NOT DP.

    Each user's counts are scaled to total at most W, summed, noised with Lap(W/ε), thresholded
    at 0 and normalised. W comes from the private user count, so the noise scale does too.

    Guarantee: none (``formal_dp`` False, PrivacyWarning; W and the scale in ``diagnostics``).
    With a W chosen without the data the baseline is formal:
    :func:`deniable.ngrams.release_laplace` (``W=<number>``).
    """
    return laplace_release(user_counts, epsilon=epsilon, W=PAPER_RULE, keys=keys, rng=rng)


def laplace_public_not_dp(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    W: float | str = PAPER_RULE,
    sensitivity: str | float = "exact",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Laplace + public (§4.2, item 2): max(c/‖c‖₁ − α̃ + Lap(Δ₁/ε) + α̃, 0), normalised. NOT DP.

    Per-user totals are capped at ``W`` (a number, or "paper-rule": §4.3's max(1, |U|/1000) from
    the private user count); Δ₁ is "exact" (the paper: the exact L1 sensitivity over removing each
    user of THIS data, a local sensitivity) or a number >= 2.

    Guarantee: none (``formal_dp`` False, PrivacyWarning). A number ``W`` together with a number
    ``sensitivity`` would be formal and is refused here: use
    :func:`deniable.ngrams.release_laplace` with ``public_counts``.
    """
    if not isinstance(W, str) and not isinstance(sensitivity, str):
        raise ValueError(
            "a numeric W with a numeric sensitivity is the formal Laplace + public release: "
            "use deniable.ngrams.release_laplace(user_counts, public_counts, epsilon=..., W=...)"
        )
    return laplace_public_release(user_counts, public_counts, epsilon=epsilon, W=W, sensitivity=sensitivity, keys=keys, rng=rng)


def k_anonymity_not_dp(user_counts: object, *, K: int = 50, keys: Sequence[str] | None = None) -> Release:
    """k-anonymity (§4.5): keep only the n-grams used by at least ``K`` users, normalise. NOT DP.

    Guarantee: none in the DP sense (deterministic; every released n-gram was used by >= K users):
    ``formal_dp`` False and a PrivacyWarning.
    """
    return k_anonymity_release(user_counts, K=K, keys=keys)
