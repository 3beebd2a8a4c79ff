"""The one exact check of the metric-DP inequality that the mechanism tests share:

    log P[M(x) = o] − log P[M(x') = o] ≤ ε·d(x, x')    for all inputs x, x' and every output o,

read from log-probabilities, so that outputs too unlikely for a float64 probability are checked
too (and an output possible from x but impossible from x' at a finite distance is a violation).
Pairs at infinite distance carry no bound and are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Additive tolerance on the log-ratio (the relative 1e-9 of a probability-space check).
ATOL = 1e-9


def log_rows(probabilities: Any) -> np.ndarray:
    """``log`` of probability rows (0 -> -inf, no warning): for distributions written down as
    probabilities (brute-force references, planted controls)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(probabilities, dtype=np.float64))


def distance_matrix(mechanism: Any, ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """``d(ids[a], ids[b])`` for every pair, with the mechanism's own ``distance``, ``(n, n)``."""
    ids = np.asarray(ids, dtype=np.int64)
    n = ids.size
    return np.asarray(mechanism.distance(np.repeat(ids, n), np.tile(ids, n)), dtype=np.float64).reshape(n, n)


def metric_dp_excess(log_p: Any, dist: Any, epsilon: float) -> float:
    """The largest ``log P(o | x_a) − log P(o | x_b) − ε·d(x_a, x_b)`` over pairs of rows (a, b)
    at finite distance and outputs o: at most 0 (up to rounding) exactly when the rows satisfy
    ε·d-privacy. ``log_p``: ``(n, V)`` log-probability rows (``-inf``: impossible output);
    ``dist``: ``(n, n)`` distances between their inputs. ``+inf`` when an output possible from
    one input is impossible from another at a finite distance; ``-inf`` when no pair is bounded."""
    L = np.asarray(log_p, dtype=np.float64)
    D = np.asarray(dist, dtype=np.float64)
    if L.ndim != 2 or D.shape != (L.shape[0], L.shape[0]):
        raise ValueError(f"log_p must be (n, V) and dist (n, n), got {L.shape} and {D.shape}")
    if np.isnan(L).any() or np.isposinf(L).any():
        raise ValueError("log_p has nan or +inf entries")
    worst = -np.inf
    for a in range(L.shape[0]):
        bounded = np.isfinite(D[a])
        possible = L[a] > -np.inf
        if not bounded.any() or not possible.any():
            continue
        # −inf in a row b where row a is finite gives +inf: a one-sided support
        gap = (L[a, possible][None, :] - L[np.ix_(bounded, possible)]).max(axis=1)
        worst = max(worst, float((gap - epsilon * D[a, bounded]).max()))
    return worst


def assert_metric_dp(log_p: Any, dist: Any, epsilon: float, *, atol: float = ATOL) -> float:
    """Assert ε·d-privacy of the rows (:func:`metric_dp_excess` ≤ ``atol``); returns the excess."""
    excess = metric_dp_excess(log_p, dist, epsilon)
    assert excess <= atol, f"metric DP violated: log-ratio exceeds epsilon*d by {excess:.3g} (tolerance {atol:g})"
    return excess
