"""The k-nearest-neighbour engine interface, its exactness contract and its one error bound.

Every Euclidean search engine of :mod:`deniable.neighbors` (numpy ``"exact"``, ``"exact-bf16"``,
FAISS, torch) answers the same two questions about a set of vocabulary vectors:

* ``search(queries) -> ids``: the nearest vector of each query row, ``(n,)`` int64;
* ``knn(queries, k) -> (ids, distances)``: the ``k`` nearest, nearest first, ``(n, k)`` int64
  ids and float64 Euclidean distances.

**Exactness contract** (engines with ``exact = True``). Vectors and queries are first rounded to
float32 (as the mechanisms store and produce them). The answer is then the float64 brute force
on those rounded values: ids ordered by the distance √(Σᵢ (qᵢ − eᵢ)²) evaluated in float64 (the
distance returned), ties to the lowest id. Fast
engines score every vector in low precision (float32, bfloat16, TF32) and *certify* the answer
with :func:`score_error_bound`: every id whose computed score is within twice the bound of the
k-th best is re-measured in float64, so rounding can change how many ids are re-measured (speed),
never the answer.

:func:`score_error_bound` is the single rounding-error argument that every exact engine uses.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "NearestNeighbors",
    "SearchIndex",
    "VectorIndex",
    "score_error_bound",
    "squared_norms",
    "remeasure",
    "nearest_first",
    "rank_certain",
    "U32",
    "U64",
]

#: Unit roundoff of float32 and float64 (round to nearest).
U32 = 2.0**-24
U64 = 2.0**-53
_NORM_MARGIN = 1.0 + 1e-6  # norms passed in are themselves float64 (or float32) sums
_TINY = 1e-30  # absolute slack for underflow of products (far below any real score gap)


@runtime_checkable
class SearchIndex(Protocol):
    """Anything that maps query vectors to the id of a vocabulary vector (1-NN)."""

    def search(self, queries: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class NearestNeighbors(Protocol):
    """A k-nearest-neighbour engine over ``size`` vocabulary vectors of dimension ``dim``.

    ``exact`` says whether the engine keeps the exactness contract of this module (FAISS's
    HNSW and IVF indexes do not: they are approximate)."""

    exact: bool

    @property
    def size(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def search(self, queries: np.ndarray) -> np.ndarray: ...

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def score_error_bound(
    qnorm: Any,
    enorm: Any,
    dim: int,
    *,
    operand: float = 0.0,
    accumulate: float = U32,
    norm: float = U32,
    output: float = 0.0,
    value: Any = None,
    squared_query: bool = False,
) -> Any:
    """Bound on |computed − exact| of a nearest-neighbour score, plus the slack of the float64
    re-measurement; the one rounding-error argument of every exact engine.

    The score of a vocabulary vector e for a query q is s = ‖e‖² − 2q·e, which orders the
    vectors as ‖q − e‖² does (with ``squared_query``: the full ‖q‖² + ‖e‖² − 2q·e; the sign
    does not matter, T = −s has the same bound). It is computed as a sum of dim + 2 terms: the
    dim products of the (scaled) coordinates and the stored ‖e‖² (and ‖q‖²), whose own relative
    error is at most ``norm``. With P = 2‖q‖‖e‖ + (1 + norm)·(‖e‖² [+ ‖q‖²]) ≥ Σ|terms|
    (Cauchy–Schwarz):

    * each operand is rounded with relative error ≤ ``operand`` before the product (0: already
      in the product's format; scaling by −2 is exact): products off by ≤ (2·operand + operand²)
      of their magnitude;
    * the products and partial sums are rounded with unit roundoff u = ``accumulate``, in any
      order (fused or not): error ≤ γₙ·Σ|terms|, γₙ = n·u/(1 − n·u), n = dim + 2 (Higham,
      *Accuracy and Stability of Numerical Algorithms*, §3.1);
    * the result is rounded with relative error ≤ ``output``: of the computed ``value`` when it
      is given (error ≤ output/(1 − output)·|value|), else of its magnitude ≤ P + the errors above.

    So |ŝ − s| ≤ ((1 + operand)²(1 + γₙ) − 1)·P + norm·(‖e‖² [+ ‖q‖²]) + the output term. To
    this the float64 re-measurement's error is added: Σ(qᵢ − eᵢ)² evaluated in float64 is within
    γ_{dim+3}(2⁻⁵³)·(‖q‖ + ‖e‖)² of the exact value, so an id that the float64 brute force could
    rank level with the k-th stays a candidate. Norms get a relative margin of 1e-6 (they are
    computed sums themselves) and the result an absolute 1e-30 (underflow).

    Parameters
    ----------
    qnorm, enorm
        ‖q‖ and ‖e‖ (an upper bound, e.g. the largest vocabulary norm); arrays broadcast. Only
        arithmetic operators are used, so numpy arrays, floats and torch tensors all work.
    dim
        The vectors' dimension.
    operand, accumulate, norm, output
        Relative rounding errors as described above (defaults: a float32 product of float32
        operands with float32 norms, e.g. ``np.matmul`` on float32).
    value
        The computed score, when the output rounding is relative to it.
    squared_query
        Whether the score includes ‖q‖² (a squared distance as FAISS computes it).

    Returns
    -------
    The bound, shaped as ``qnorm`` and ``enorm`` broadcast (``inf`` where it overflows).
    """
    n = dim + 2
    g = n * accumulate / (1.0 - n * accumulate)
    qn = qnorm * _NORM_MARGIN
    en = enorm * _NORM_MARGIN
    squares = en * en + (qn * qn if squared_query else 0.0)
    p = 2.0 * qn * en + (1.0 + norm) * squares
    err = ((1.0 + operand) ** 2 * (1.0 + g) - 1.0) * p + norm * squares
    if output:
        err = err + (output / (1.0 - output) * abs(value) if value is not None else output * (p + err))
    n64 = dim + 3
    f64 = n64 * U64 / (1.0 - n64 * U64) * (qn + en) * (qn + en)
    return err + f64 + _TINY


def squared_norms(X: np.ndarray, block_bytes: int = 16 << 20) -> np.ndarray:
    """‖x‖² of each row in float64, computed in blocks (no float64 copy of the whole matrix)."""
    out = np.empty(X.shape[0], dtype=np.float64)
    step = max(1, block_bytes // (8 * max(1, X.shape[1])))
    for s in range(0, X.shape[0], step):
        blk = X[s : s + step].astype(np.float64)
        out[s : s + step] = np.einsum("ij,ij->i", blk, blk)
    return out


def remeasure(queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray, *, block_bytes: int = 8 << 20) -> np.ndarray:
    """Float64 distances √(Σᵢ (qᵢ − eᵢ)²) from each query row r to the vectors ``ids[r]``
    (``(m, c)`` ids for ``m`` query rows; float32 inputs widened exactly), ``(m, c)``: the values
    the exactness contract orders by."""
    m, c = ids.shape
    out = np.empty((m, c), dtype=np.float64)
    rows = max(1, block_bytes // (8 * max(1, c) * max(1, vectors.shape[1])))
    for j in range(0, m, rows):
        diff = vectors[ids[j : j + rows]].astype(np.float64) - queries[j : j + rows, None, :].astype(np.float64)
        out[j : j + rows] = np.sqrt(np.einsum("rij,rij->ri", diff, diff))
    return out


def nearest_first(ids: np.ndarray, dist: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the candidate ``ids`` and their float64 distances ``dist`` (``(m, c)``, c ≥ k):
    the ``k`` nearest ordered by (distance, id), and their distances."""
    order = np.lexsort((ids, dist), axis=1)[:, :k]
    return np.take_along_axis(ids, order, axis=1), np.take_along_axis(dist, order, axis=1)


def rank_certain(queries: np.ndarray, vectors: np.ndarray, cand: np.ndarray, sure: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k nearest of the rows whose certificate holds (``sure``): their candidates ``cand``
    (``(m, c)``, all ids that can be among the float64 k nearest) re-measured and ordered by
    (distance, id). Returns ``(ids, distances, uncertain rows)``; the uncertain rows' entries are
    left for the caller to fill."""
    if sure.all():
        ids, dist = nearest_first(cand, remeasure(queries, vectors, cand), k)
        return ids, dist, np.zeros(0, dtype=np.int64)
    m = cand.shape[0]
    ids = np.empty((m, k), dtype=np.int64)
    dist = np.empty((m, k), dtype=np.float64)
    r = np.flatnonzero(sure)
    if r.size:
        ids[r], dist[r] = nearest_first(cand[r], remeasure(queries[r], vectors, cand[r]), k)
    return ids, dist, np.flatnonzero(~sure)


class VectorIndex:
    """What the numpy-side engines share: the vocabulary as float32 (no copy of C-contiguous
    float32 or memory-mapped vectors), validated, with its float64 squared norms; ``size`` and
    ``dim``; and query validation."""

    _vectors: np.ndarray

    def _set_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """Validate and keep ``vectors``; returns their squared norms (float64, in blocks)."""
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] == 0:
            raise ValueError(f"vectors must be a non-empty 2-D array, got shape {v.shape}")
        sq = squared_norms(v)
        if not np.isfinite(sq).all():
            raise ValueError("vectors must be finite (found NaN or inf, or values beyond float32)")
        self._vectors = v
        return sq

    @property
    def size(self) -> int:
        return int(self._vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self._vectors.shape[1])

    def _queries(self, queries: np.ndarray) -> np.ndarray:
        """``queries`` as C-contiguous float32 rows of this dimension, finite."""
        q = np.asarray(queries)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {q.shape}")
        q = np.ascontiguousarray(q, dtype=np.float32)
        if not np.isfinite(q).all():
            raise ValueError("queries must be finite (found NaN or inf, or values beyond float32)")
        return q
