"""Distance functions between word vectors (and packed binary codes), computed exactly and blockwise.

Every function returns a float64 ``(len(A), len(B))`` matrix of distances. Built-in metrics::

    "euclidean"   ‖a − b‖₂ (Madlib, Mahalanobis after whitening, TEM default)
    "manhattan"   ‖a − b‖₁
    "chebyshev"   ‖a − b‖∞
    "angular"     the angle between a and b in radians, arccos(cos(a, b)) — a true metric,
                  unlike cosine distance; computed as 2·arcsin(‖â − b̂‖/2) for accuracy near 0
    "hamming"     number of differing bits between packed uint64 codes (BRR)

A user metric is any callable ``f(A, B) -> (len(A), len(B))`` array; it must be a metric for the
privacy guarantees that use it to hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["METRICS", "MetricLike", "MetricSpace", "get_metric", "pairwise_distances", "paired_distances", "metric_name"]

MetricLike = str | Callable[[np.ndarray, np.ndarray], np.ndarray]
METRICS = ("euclidean", "manhattan", "chebyshev", "angular", "hamming")


@dataclass(frozen=True)
class MetricSpace:
    """A finite metric space: the rows of ``points`` with ``metric`` (a name from
    :data:`METRICS`, e.g. ``"hamming"`` on packed uint64 codes, or a callable).

    ``key``, when given, identifies the space for caches (e.g. the metric and an embedding's
    fingerprint); it takes no part in comparisons."""

    points: Any
    metric: MetricLike = "euclidean"
    key: tuple[Any, ...] | None = field(default=None, compare=False)

# bytes of temporaries per block of the broadcasting metrics
_BLOCK_BYTES = 64 << 20


def _rows_per_block(nb: int, d: int, itemsize: int = 8) -> int:
    return max(1, _BLOCK_BYTES // max(1, nb * d * itemsize))


def _euclidean(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    a2 = np.einsum("ij,ij->i", A, A)
    b2 = np.einsum("ij,ij->i", B, B)
    d2 = a2[:, None] + b2[None, :] - 2.0 * (A @ B.T)
    np.maximum(d2, 0.0, out=d2)
    # Cancellation makes the expansion inexact for near-identical vectors: recompute those directly.
    close = d2 <= 1e-6 * (a2[:, None] + b2[None, :])
    if close.any():
        i, j = np.nonzero(close)
        diff = A[i] - B[j]
        d2[i, j] = np.einsum("ij,ij->i", diff, diff)
    return np.sqrt(d2)


def _broadcast(A: np.ndarray, B: np.ndarray, reduce: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    out = np.empty((A.shape[0], B.shape[0]), dtype=np.float64)
    step = _rows_per_block(B.shape[0], A.shape[1])
    for s in range(0, A.shape[0], step):
        out[s : s + step] = reduce(np.abs(A[s : s + step, None, :] - B[None, :, :]))
    return out


def _manhattan(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return _broadcast(A, B, lambda x: x.sum(axis=-1))


def _chebyshev(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return _broadcast(A, B, lambda x: x.max(axis=-1))


def _unit(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    if (n == 0).any():
        raise ValueError("the angular metric is undefined for zero vectors")
    return X / n


def _angular(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    chord = _euclidean(_unit(A), _unit(B))
    return 2.0 * np.arcsin(np.minimum(chord / 2.0, 1.0))


def _hamming(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    A = np.ascontiguousarray(A, dtype=np.uint64)
    B = np.ascontiguousarray(B, dtype=np.uint64)
    out = np.empty((A.shape[0], B.shape[0]), dtype=np.float64)
    step = _rows_per_block(B.shape[0], A.shape[1])
    for s in range(0, A.shape[0], step):
        out[s : s + step] = np.bitwise_count(A[s : s + step, None, :] ^ B[None, :, :]).sum(axis=-1, dtype=np.int64)
    return out


_BUILTIN: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "euclidean": _euclidean,
    "manhattan": _manhattan,
    "chebyshev": _chebyshev,
    "angular": _angular,
    "hamming": _hamming,
}


def get_metric(metric: str | Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Return the pairwise distance function for a metric name or a user callable."""
    if callable(metric):
        return metric
    if isinstance(metric, str) and metric in _BUILTIN:
        return _BUILTIN[metric]
    raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)} or pass a callable f(A, B)")


def metric_name(metric: str | Callable[..., np.ndarray]) -> str:
    """A printable name for a metric (the callable's qualified name for user metrics)."""
    if isinstance(metric, str):
        return metric
    return getattr(metric, "__qualname__", None) or repr(metric)


def pairwise_distances(A: np.ndarray, B: np.ndarray, metric: str | Callable[..., np.ndarray] = "euclidean") -> np.ndarray:
    """Distances between every row of ``A`` and every row of ``B`` (float64, exact)."""
    A = np.atleast_2d(A)
    B = np.atleast_2d(B)
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"A and B have different widths: {A.shape[1]} and {B.shape[1]}")
    out = np.asarray(get_metric(metric)(A, B), dtype=np.float64)
    if out.shape != (A.shape[0], B.shape[0]):
        raise ValueError(f"metric returned shape {out.shape}, expected {(A.shape[0], B.shape[0])}")
    return out


def _paired_builtin(name: str, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    if name == "hamming":
        x = np.bitwise_xor(np.asarray(A, dtype=np.uint64), np.asarray(B, dtype=np.uint64))
        return np.bitwise_count(x).sum(axis=1, dtype=np.int64).astype(np.float64)
    if name == "angular":
        A = np.asarray(A, dtype=np.float64)
        B = np.asarray(B, dtype=np.float64)
        na = np.linalg.norm(A, axis=1, keepdims=True)
        nb = np.linalg.norm(B, axis=1, keepdims=True)
        if (na == 0).any() or (nb == 0).any():
            raise ValueError("the angular metric is undefined for zero vectors")
        diff = A / na - B / nb
        chord = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        return 2.0 * np.arcsin(np.minimum(chord / 2.0, 1.0))
    # float32 inputs are widened inside the subtraction (exact, no float64 copies of A and B)
    diff = np.subtract(A, B, dtype=np.float64)
    if name == "euclidean":
        return np.sqrt(np.einsum("ij,ij->i", diff, diff))
    np.abs(diff, out=diff)
    if name == "manhattan":
        return diff.sum(axis=1)
    if name == "chebyshev":
        return diff.max(axis=1)
    raise ValueError(f"unknown metric {name!r}")


def paired_distances(A: np.ndarray, B: np.ndarray, metric: str | Callable[..., np.ndarray] = "euclidean") -> np.ndarray:
    """Element-wise distances ``d(A[i], B[i])`` (float64, shape ``(n,)``); a callable metric
    ``f(A, B)`` is called once per pair."""
    A = np.atleast_2d(A)
    B = np.atleast_2d(B)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape, got {A.shape} and {B.shape}")
    if callable(metric):
        return np.array([float(np.asarray(metric(A[i : i + 1], B[i : i + 1])).reshape(-1)[0]) for i in range(A.shape[0])])
    get_metric(metric)  # validates the name
    return _paired_builtin(metric, A, B)
