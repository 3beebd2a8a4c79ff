"""Baselines of §4.2 and §4.5: Laplace, Laplace + public, k-anonymity, and the non-private
references (public-only and private-only distributions) of Table 1.

All of them release a distribution over the PUBLIC vocabulary (the columns), so private-only
n-grams never appear.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .._random import RNGLike, as_generator
from .._validation import check_int, check_positive
from ..errors import DeniableWarning
from .bayesian import public_vector
from .counting import _as_csr, cap_user_totals, keys_of, users_per_ngram
from .gaussian import laplace_scale
from .release import Release

__all__ = [
    "laplace_release",
    "laplace_public_release",
    "laplace_public_sensitivity",
    "k_anonymity_release",
    "public_release",
    "private_release",
]


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
    W: float,
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """The standard Laplace baseline (§4.2, item 1).

    Each user's counts are scaled to total at most ``W`` (:func:`cap_user_totals`), summed, noised
    with Lap(W/ε) per n-gram, thresholded at 0 and normalised.

    Guarantee: ε-DP (δ = 0), user-level add/remove adjacency: adding or removing one user changes
    the summed counts by at most W in L1, whatever the data; the vocabulary is public.
    """
    epsilon = check_positive("epsilon", epsilon)
    W = check_positive("W", W)
    m = cap_user_totals(user_counts, W)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    c = np.bincount(m.indices, weights=m.data, minlength=V)
    b = laplace_scale(epsilon, W)
    noisy = np.maximum(c + as_generator(rng).laplace(0.0, b, size=V), 0.0)
    return Release(
        keys=key_tuple,
        probabilities=_normalise_or_uniform(noisy, "laplace_release"),
        mechanism="laplace",
        epsilon=epsilon,
        delta=0.0,
        guarantee=f"({epsilon:g}, 0)-DP, user-level add/remove adjacency (per-user total capped at W={W:g})",
        laplace_scale=b,
        sensitivity=W,
        sensitivity_method="cap",
        params={"W": W, "n_users": int(m.shape[0]), "vocabulary_size": int(V)},
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
    W: float,
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Laplace + public baseline (§4.2, item 2): max(Σₙ wₙ(Δc̃ⁿ − α̃) + e + α̃, 0), normalised.

    Per-user totals are capped at ``W`` first; e ~ Lap(Δ₁/ε) with Δ₁ the exact L1 sensitivity of
    the weighted sum over removing each user (:func:`laplace_public_sensitivity`).

    Guarantee: ε-DP (δ = 0) with respect to removing any one user of the input (the paper's
    adjacency); Δ₁ is computed on the input (a local sensitivity, as in the paper).
    """
    epsilon = check_positive("epsilon", epsilon)
    W = check_positive("W", W)
    m = cap_user_totals(user_counts, W)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    alpha = public_vector(public_counts, key_tuple, V)
    a_sum = alpha.sum()
    alpha_n = alpha / a_sum if a_sum > 0 else np.full(V, 1.0 / V)
    c = np.bincount(m.indices, weights=m.data, minlength=V)
    T = c.sum()
    f = (c / T - alpha_n) if T > 0 else np.zeros(V)
    sens = laplace_public_sensitivity(m)
    b = laplace_scale(epsilon, sens)
    out = np.maximum(f + as_generator(rng).laplace(0.0, b, size=V) + alpha_n if b > 0 else f + alpha_n, 0.0)
    return Release(
        keys=key_tuple,
        probabilities=_normalise_or_uniform(out, "laplace_public_release"),
        mechanism="laplace-public",
        epsilon=epsilon,
        delta=0.0,
        guarantee=(
            f"({epsilon:g}, 0)-DP with respect to removing any one user of the input (user-level), with the exact "
            "L1 sensitivity computed on the input (data-dependent noise scale)"
        ),
        laplace_scale=b,
        sensitivity=sens,
        sensitivity_method="exact",
        params={"W": W, "n_users": int(m.shape[0]), "vocabulary_size": int(V)},
    )


def k_anonymity_release(user_counts: object, *, K: int = 50, keys: Sequence[str] | None = None) -> Release:
    """k-anonymity baseline (§4.5): keep only n-grams used by at least ``K`` users, normalise.

    Guarantee: NONE in the DP sense (deterministic; each released n-gram was used by >= K users).
    """
    K = check_int("K", K, minimum=1)
    m = _as_csr(user_counts)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    N = users_per_ngram(m)
    c = np.bincount(m.indices, weights=m.data, minlength=V).astype(np.float64)
    kept = np.where(N >= K, c, 0.0)
    return Release(
        keys=key_tuple,
        probabilities=_normalise_or_uniform(kept, "k_anonymity_release"),
        mechanism="k-anonymity",
        epsilon=None,
        delta=None,
        guarantee=f"no differential privacy: k-anonymity (every n-gram with non-zero mass was used by >= {K} users)",
        params={"K": K, "kept": int((N >= K).sum()), "n_users": int(m.shape[0]), "vocabulary_size": int(V)},
    )


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
    )


def private_release(user_counts: object, *, keys: Sequence[str] | None = None) -> Release:
    """The private baseline of Table 1: the raw private distribution. NOT PRIVATE (reference only)."""
    m = _as_csr(user_counts)
    V = m.shape[1]
    key_tuple = keys_of(user_counts, keys, V)
    c = np.bincount(m.indices, weights=m.data, minlength=V).astype(np.float64)
    return Release(
        keys=key_tuple,
        probabilities=_normalise_or_uniform(c, "private_release"),
        mechanism="private",
        epsilon=None,
        delta=None,
        guarantee="NOT PRIVATE: the exact private distribution (an evaluation reference only)",
    )
