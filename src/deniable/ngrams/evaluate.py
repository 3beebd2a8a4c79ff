"""Evaluation of released n-gram distributions (paper §4.4, §4.6, §5).

* :func:`kl_divergence` — KL(P_private ‖ Q_release), the paper's utility measure (§4.4).
* :func:`trigram_perplexity` — average word perplexity of the trigram LM P(w₃ | w₁ w₂) =
  P(w₁w₂w₃)/Σ_w P(w₁w₂w) built from a released joint distribution, on held-out text restricted to
  in-vocabulary trigrams, so no back-off is needed (§4.6, Table 1).
* :func:`release_membership_inference` — §5: how often the release made WITH the top contributor
  is closer (in KL from that user's distribution) than the release made WITHOUT them.
  ``membership_inference`` is its deprecated old name (warns); the text-classifier attack of the
  same name is :func:`deniable.evaluation.membership_inference`.

Zero probabilities (Laplace thresholding, k-anonymity) make KL and perplexity infinite; the
``smoothing`` argument mixes the release with the uniform distribution, (1−λ)·q + λ/|V|, and the
same λ should be used for every mechanism compared.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from .counting import _as_csr

__all__ = [
    "private_distribution",
    "smooth",
    "kl_divergence",
    "trigram_perplexity",
    "top_contributor",
    "release_membership_inference",
    "membership_inference",
]


def private_distribution(user_counts: object) -> np.ndarray:
    """The normalised total private counts c/‖c‖₁ over the vocabulary (raw, unclamped)."""
    m = _as_csr(user_counts)
    c = np.bincount(m.indices, weights=m.data, minlength=m.shape[1]).astype(np.float64)
    s = c.sum()
    if s <= 0:
        raise ValueError("the private counts are all zero")
    return c / s


def smooth(q: np.ndarray, smoothing: float) -> np.ndarray:
    """(1 − λ)·q + λ/|V| (λ = ``smoothing`` in [0, 1))."""
    q = np.asarray(q, dtype=np.float64)
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}")
    if smoothing == 0:
        return q
    return (1.0 - smoothing) * q + smoothing / q.size


def kl_divergence(p: np.ndarray, q: np.ndarray, *, smoothing: float = 0.0) -> float:
    """KL(p ‖ q) = Σ_{p_i>0} p_i log(p_i/q_i) in nats (inf when q_i = 0 < p_i).

    ``q`` may be smoothed (see :func:`smooth`); ``p`` and ``q`` are normalised first.
    """
    p = np.asarray(p, dtype=np.float64)
    q = smooth(np.asarray(q, dtype=np.float64), smoothing)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    p = p / p.sum()
    q = q / q.sum()
    nz = p > 0
    if np.any(q[nz] <= 0):
        return float("inf")
    return float(np.sum(p[nz] * (np.log(p[nz]) - np.log(q[nz]))))


def _context_ids(keys: Sequence[str]) -> np.ndarray:
    """Column -> id of its context (all words but the last)."""
    ctx: dict[str, int] = {}
    out = np.empty(len(keys), dtype=np.int64)
    for i, k in enumerate(keys):
        head = k.rsplit(" ", 1)[0] if " " in k else ""
        out[i] = ctx.setdefault(head, len(ctx))
    return out


def conditional_log_probs(probabilities: np.ndarray, keys: Sequence[str], *, smoothing: float = 0.0) -> np.ndarray:
    """log P(w_n | w_1..w_{n-1}) for every vocabulary n-gram, from a joint distribution."""
    p = smooth(np.asarray(probabilities, dtype=np.float64), smoothing)
    ctx = _context_ids(keys)
    totals = np.bincount(ctx, weights=p)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(p) - np.log(totals[ctx])


def trigram_perplexity(
    probabilities: np.ndarray,
    keys: Sequence[str],
    test_counts: np.ndarray,
    *,
    smoothing: float = 0.0,
) -> float:
    """Average word perplexity exp(−Σ t_i log P(w₃|w₁w₂)_i / Σ t_i) of the n-gram LM built from a
    released joint distribution, on held-out n-gram counts ``test_counts`` over the same
    vocabulary (only in-vocabulary n-grams, §4.6). Works for any n (the context is the first n−1
    words). Returns inf if a test n-gram has probability 0.
    """
    t = np.asarray(test_counts, dtype=np.float64).ravel()
    if t.shape != (len(keys),):
        raise ValueError(f"test_counts must have {len(keys)} entries, got {t.shape[0]}")
    if t.sum() <= 0:
        raise ValueError("test_counts are all zero")
    logc = conditional_log_probs(probabilities, keys, smoothing=smoothing)
    nz = t > 0
    if np.any(~np.isfinite(logc[nz])):
        return float("inf")
    return float(np.exp(-np.dot(t[nz], logc[nz]) / t[nz].sum()))


def top_contributor(user_counts: object) -> int:
    """Row of the user with the largest total count (the §5 attack target)."""
    m = _as_csr(user_counts)
    return int(np.argmax(np.asarray(m.sum(axis=1)).ravel()))


def release_membership_inference(
    sample_with: Callable[[np.random.Generator], np.ndarray],
    sample_without: Callable[[np.random.Generator], np.ndarray],
    target: np.ndarray,
    *,
    n_trials: int = 200,
    smoothing: float = 1e-12,
    rng: RNGLike = None,
) -> float:
    """§5: the fraction of ``n_trials`` in which the release WITH the target user is closer to the
    target's own distribution (smaller KL(target ‖ θ)) than the release WITHOUT them.

    ``sample_with(gen)`` / ``sample_without(gen)`` return one released probability vector each
    (e.g. ``lambda g: plan.release(g).probabilities``); ``target`` is the user's count vector.
    Ties count one half. 0.5 means the attack does no better than chance.
    """
    n_trials = check_int("n_trials", n_trials, minimum=1)
    gen = as_generator(rng)
    tgt = np.asarray(target, dtype=np.float64)
    wins = 0.0
    for _ in range(n_trials):
        a = kl_divergence(tgt, sample_with(gen), smoothing=smoothing)
        b = kl_divergence(tgt, sample_without(gen), smoothing=smoothing)
        wins += 1.0 if a < b else (0.5 if a == b else 0.0)
    return wins / n_trials


def membership_inference(*args: Any, **kwargs: Any) -> float:
    """Deprecated alias of :func:`release_membership_inference` (same arguments and output)."""
    warnings.warn(
        "deniable.ngrams.membership_inference is deprecated; use deniable.ngrams.release_membership_inference "
        "(deniable.evaluation.membership_inference is the text-classifier attack)",
        DeprecationWarning,
        stacklevel=2,
    )
    return release_membership_inference(*args, **kwargs)
