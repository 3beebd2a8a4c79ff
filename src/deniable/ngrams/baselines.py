"""Baselines of §4.2 and §4.5: Laplace, Laplace + public, k-anonymity, and the non-private
references (public-only and private-only distributions) of Table 1.

All of them release a distribution over the PUBLIC vocabulary (the columns), so private-only
n-grams never appear. Formal (ε, 0)-DP under user-level add/remove adjacency holds for
:func:`laplace_release` with a caller-given W and for :func:`laplace_public_release` with a
caller-given W and ``sensitivity=<number>`` >= 2 (2 is the derived global bound; a smaller number is
rejected); the paper's
W = |U|/1000 rule and the local L1 sensitivity of Laplace + public are NOT formal guarantees
(``formal_dp`` False, PrivacyWarning). k-anonymity is not DP at all. These functions draw numpy
noise and reproduce the paper's tables; the formal Laplace releases (bounds k and C or W, OpenDP
samplers when installed) are :func:`deniable.ngrams.release_laplace`, and the non-DP modes are
gathered in :mod:`deniable.ngrams.paper`.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int, check_positive
from ..errors import DeniableWarning
from .bayesian import public_vector, vocabulary_params
from .counting import _as_csr, cap_user_totals, keys_of, users_per_ngram
from .gaussian import laplace_scale
from .release import LOCAL_SENSITIVITY_NOTE, Release, warn_if_not_formal

__all__ = [
    "laplace_release",
    "laplace_public_release",
    "laplace_public_sensitivity",
    "normalised_prior",
    "prior_difference",
    "k_anonymity_release",
    "public_release",
    "private_release",
    "PAPER_RULE",
]

#: ``W="paper-rule"``: the paper's cap W = max(1, |U|/1000) (§4.3), derived from the private user
#: count, so NOT a formal DP guarantee.
PAPER_RULE = "paper-rule"


def _resolve_W(W: object, n_users: int) -> tuple[float, bool]:
    """(W value, whether W is public). ``W`` is a positive number or ``"paper-rule"``."""
    if isinstance(W, str):
        if W != PAPER_RULE:
            raise ValueError(f"W must be a number > 0 or {PAPER_RULE!r}, got {W!r}")
        return max(1.0, n_users / 1000.0), False
    if W is None:
        raise ValueError(
            f"W (the per-user total cap) is required: give a public number (e.g. max(1, public_user_bound/1000)), "
            f"or W={PAPER_RULE!r} for the paper's |U|/1000 rule (data dependent, not formal DP)"
        )
    return check_positive("W", W), True


def _capped(user_counts: object, W: object, keys: Sequence[str] | None) -> tuple[Any, tuple[str, ...], float, bool, int]:
    """§4.2's per-user total cap: (capped rows, column keys, W, whether W is public, user count)."""
    n_users = int(_as_csr(user_counts).shape[0])
    W_value, public_W = _resolve_W(W, n_users)
    m = cap_user_totals(user_counts, W_value)
    return m, keys_of(user_counts, keys, m.shape[1]), W_value, public_W, n_users


def _paper_rule_guarantee(epsilon: float) -> str:
    return (
        f"nominal ({epsilon:g}, 0), user level; reproduces Ramadan et al. \u00a74.3: the cap W = max(1, |U|/1000) is "
        "derived from this dataset's user count \u2014 NOT a formal differential-privacy guarantee"
    )


def _numpy_laplace_record(**fields: Any) -> Release:
    """The record of a Laplace baseline (δ = 0, numpy noise); warns unless ``formal_dp``."""
    return warn_if_not_formal(Release(delta=0.0, sampler="numpy", **fields))


def normalised_prior(public_counts: object, keys: Sequence[str] | None, n_cols: int) -> np.ndarray:
    """α̃: the public counts as a distribution over the columns (uniform when they are all 0)."""
    alpha = public_vector(public_counts, keys, n_cols)
    total = alpha.sum()
    return alpha / total if total > 0 else np.full(n_cols, 1.0 / n_cols)


def prior_difference(counts: Any, alpha_n: np.ndarray) -> np.ndarray:
    """f = c/‖c‖₁ − α̃, the statistic Laplace + public noises (§4.2, item 2), with c the column sums
    of the users' (capped or bounded) ``counts``; 0 when c = 0."""
    c = np.bincount(counts.indices, weights=counts.data, minlength=alpha_n.size).astype(np.float64)
    T = c.sum()
    return (c / T - alpha_n) if T > 0 else np.zeros(alpha_n.size)


def _normalise_or_uniform(x: np.ndarray, what: str) -> np.ndarray:
    total = float(x.sum())
    if total > 0:
        return x / total
    warnings.warn(f"{what}: every count is zero after noise/thresholding; releasing the uniform distribution", DeniableWarning, stacklevel=3)
    return np.full(x.size, 1.0 / x.size)


def laplace_release(
    user_counts: object,
    *,
    epsilon: float,
    W: float | str,
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """The standard Laplace baseline (§4.2, item 1).

    Each user's counts are scaled to total at most ``W`` (:func:`cap_user_totals`), summed, noised
    with Lap(W/ε) per n-gram, thresholded at 0 and normalised.

    Guarantee: with a number ``W`` chosen without looking at the private data, ε-DP (δ = 0) under
    user-level add/remove adjacency: adding or removing one user changes the summed counts by at
    most W in L1, whatever the data; the vocabulary is public (``formal_dp`` True). With
    ``W="paper-rule"`` (W = max(1, |U|/1000), §4.3) the noise scale depends on the number of
    private users: NOT formally DP (``formal_dp`` False, PrivacyWarning; W in ``diagnostics``).
    """
    epsilon = check_positive("epsilon", epsilon)
    m, key_tuple, W, public_W, n_users = _capped(user_counts, W, keys)
    V = m.shape[1]
    c = np.bincount(m.indices, weights=m.data, minlength=V)
    b = laplace_scale(epsilon, W)
    noisy = np.maximum(c + as_generator(rng).laplace(0.0, b, size=V), 0.0)
    diagnostics: dict[str, Any] = {"n_users": n_users}
    if public_W:
        guarantee = f"({epsilon:g}, 0)-DP, user-level add/remove adjacency, for any data (per-user total capped at W={W:g})"
    else:
        guarantee = _paper_rule_guarantee(epsilon)
        diagnostics.update(W=W, laplace_scale=b, sensitivity=W)
    return _numpy_laplace_record(
        keys=key_tuple, probabilities=_normalise_or_uniform(noisy, "laplace_release"), mechanism="laplace", epsilon=epsilon, guarantee=guarantee,
        formal_dp=public_W, laplace_scale=b, sensitivity=W, sensitivity_method="cap",
        params={"W": W if public_W else PAPER_RULE, "vocabulary_size": int(V)}, diagnostics=diagnostics,
    )


def laplace_public_sensitivity(capped: object) -> float:
    """Exact L1 sensitivity of f(D) = c/‖c‖₁ − α̃ over removing each user of D, in O(nnz).

    (The user weights w_n = ‖Δcⁿ‖₁/‖c‖₁ of §4.2 item 2 make Σₙ wₙ(Δc̃ⁿ − α̃) = c/‖c‖₁ − α̃.)
    For user n with support J, totals t and T: Σ_{j∈J} |c_j/T − (c_j−d_j)/(T−t)| plus
    t·(T − Σ_{j∈J} c_j)/(T(T−t)) off the support; when n is the only user, f(D₋ₙ) = 0 and the
    change is ‖c/T − α̃‖₁ ≤ 2 (bounded here by 2).
    """
    m = _as_csr(capped)
    V = m.shape[1]
    if m.nnz == 0:
        return 0.0
    c = np.bincount(m.indices, weights=m.data, minlength=V).astype(np.float64)
    T = float(c.sum())
    t = np.asarray(m.sum(axis=1)).ravel().astype(np.float64)
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    d = m.data.astype(np.float64)
    cj = c[m.indices]
    rest = T - t  # total without the user
    alone = rest <= 0
    safe_rest = np.where(alone, 1.0, rest)
    on = np.abs(cj / T - (cj - d) / safe_rest[rows])
    on_sum = np.bincount(rows, weights=on, minlength=m.shape[0])
    c_support = np.bincount(rows, weights=cj, minlength=m.shape[0])
    off = t * np.maximum(T - c_support, 0.0) / (T * safe_rest)
    per_user = np.where(alone, 2.0, on_sum + off)
    return float(per_user.max())


def laplace_public_release(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    W: float | str,
    sensitivity: str | float = "exact",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Laplace + public baseline (§4.2, item 2): max(Σₙ wₙ(Δc̃ⁿ − α̃) + e + α̃, 0), normalised.

    Per-user totals are capped at ``W`` first; e ~ Lap(Δ₁/ε). With ``sensitivity="exact"``
    (default, the paper) Δ₁ is the exact L1 sensitivity of the weighted sum over removing each
    user of THIS data (:func:`laplace_public_sensitivity`, a local sensitivity); with a number,
    Δ₁ is that number.

    Guarantee: ε-DP (δ = 0) under user-level add/remove adjacency only with a number ``W`` and a
    number ``sensitivity`` >= 2, the global bound on Δ₁ derived from c/‖c‖₁ and α̃ being
    distributions (a smaller number is a ValueError; ``formal_dp`` True). These functions draw
    numpy noise; :func:`deniable.ngrams.release_laplace` is the formal release (bounds k and C
    or W, OpenDP samplers when installed). The default local Δ₁, or
    ``W="paper-rule"``, reproduce the paper but are NOT formally DP (``formal_dp`` False,
    PrivacyWarning; Δ₁ and the scale are in ``diagnostics``).
    """
    epsilon = check_positive("epsilon", epsilon)
    if isinstance(sensitivity, str):
        if sensitivity != "exact":
            raise ValueError(f"sensitivity must be 'exact' or a number > 0 for laplace-public, got {sensitivity!r}")
    elif isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real):
        raise TypeError(f"sensitivity must be 'exact' or a number > 0, got {sensitivity!r}")
    else:
        sensitivity = check_positive("sensitivity", float(sensitivity))
        if sensitivity < 2.0:
            raise ValueError(
                f"sensitivity={sensitivity:g} is below the derived global L1 sensitivity 2 of c/|c|_1 - alpha "
                "(a difference of two distributions); pass a number >= 2, or 'exact' for the paper's local value (not DP)"
            )
    m, key_tuple, W, public_W, n_users = _capped(user_counts, W, keys)
    V = m.shape[1]
    alpha_n = normalised_prior(public_counts, key_tuple, V)
    f = prior_difference(m, alpha_n)
    given = not isinstance(sensitivity, str)
    sens = float(sensitivity) if given else laplace_public_sensitivity(m)
    b = laplace_scale(epsilon, sens)
    out = np.maximum(f + as_generator(rng).laplace(0.0, b, size=V) + alpha_n if b > 0 else f + alpha_n, 0.0)
    formal = given and public_W
    params: dict[str, Any] = {"W": W if public_W else PAPER_RULE, "vocabulary_size": int(V)}
    diagnostics: dict[str, Any] = {"n_users": n_users}
    if given:
        params["sensitivity_bound"] = sens
    if not formal:
        diagnostics.update(laplace_scale=b, sensitivity=sens)
    if not public_W:
        diagnostics["W"] = W
    if formal:
        guarantee = (
            f"({epsilon:g}, 0)-DP, user-level add/remove adjacency, provided the given L1 sensitivity bounds the change "
            f"of c/|c|_1 over every pair of datasets differing in one user (2 always does; per-user total capped at W={W:g})"
        )
    elif not given:
        guarantee = f"nominal ({epsilon:g}, 0), user level, exact L1 sensitivity; " + LOCAL_SENSITIVITY_NOTE
    else:
        guarantee = _paper_rule_guarantee(epsilon)
    params.update(vocabulary_params(public_counts))
    return _numpy_laplace_record(
        keys=key_tuple, probabilities=_normalise_or_uniform(out, "laplace_public_release"), mechanism="laplace-public", epsilon=epsilon, guarantee=guarantee,
        formal_dp=formal, laplace_scale=b, sensitivity=sens, sensitivity_method="given" if given else "exact", params=params, diagnostics=diagnostics,
    )


def k_anonymity_release(user_counts: object, *, K: int = 50, keys: Sequence[str] | None = None) -> Release:
    """k-anonymity baseline (§4.5): keep only n-grams used by at least ``K`` users, normalise.

    Guarantee: NONE in the DP sense (deterministic; each released n-gram was used by >= K users):
    ``formal_dp`` False and a PrivacyWarning.
    """
    K = check_int("K", K, minimum=1)
    m, key_tuple, c = _private_totals(user_counts, keys)
    N = users_per_ngram(m)
    return _not_dp_record(
        keys=key_tuple,
        probabilities=_normalise_or_uniform(np.where(N >= K, c, 0.0), "k_anonymity_release"),
        mechanism="k-anonymity",
        guarantee=f"NOT differentially private: k-anonymity (every n-gram with non-zero mass was used by >= {K} users)",
        params={"K": K, "vocabulary_size": int(m.shape[1])},
        diagnostics={"kept": int((N >= K).sum()), "n_users": int(m.shape[0])},
    )


def _private_totals(user_counts: object, keys: Sequence[str] | None) -> tuple[Any, tuple[str, ...], np.ndarray]:
    """(rows, column keys, float64 column totals) of the raw private counts."""
    m = _as_csr(user_counts)
    V = m.shape[1]
    return m, keys_of(user_counts, keys, V), np.bincount(m.indices, weights=m.data, minlength=V).astype(np.float64)


def _not_dp_record(**fields: Any) -> Release:
    """The record of a baseline without any DP guarantee (no ε, δ); emits the PrivacyWarning."""
    return warn_if_not_formal(Release(epsilon=None, delta=None, formal_dp=False, **fields))


def public_release(public_counts: object, keys: Sequence[str]) -> Release:
    """The public baseline of Table 1: normalised public counts α (uses no private data)."""
    keys = tuple(keys)
    alpha = public_vector(public_counts, keys, len(keys))
    return Release(
        keys=keys,
        probabilities=_normalise_or_uniform(alpha.astype(np.float64), "public_release"),
        mechanism="public",
        epsilon=0.0,
        delta=0.0,
        guarantee="(0, 0)-DP: uses public data only",
        formal_dp=True,
        params={"vocabulary_size": len(keys)},
    )


def private_release(user_counts: object, *, keys: Sequence[str] | None = None) -> Release:
    """The private baseline of Table 1: the raw private distribution. NOT PRIVATE (reference only;
    ``formal_dp`` False and a PrivacyWarning)."""
    m, key_tuple, c = _private_totals(user_counts, keys)
    return _not_dp_record(
        keys=key_tuple,
        probabilities=_normalise_or_uniform(c, "private_release"),
        mechanism="private",
        guarantee="NOT PRIVATE: the exact private distribution (an evaluation reference only)",
        diagnostics={"n_users": int(m.shape[0])},
    )
