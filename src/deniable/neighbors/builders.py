"""Exact, blockwise builders of neighbourhood tables: :func:`knn_neighborhoods` (the ``k``
nearest words of each row) and :func:`radius_neighborhoods` (the words within γ); see
:mod:`deniable.neighbors.neighborhoods`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._progress import progress_bar
from .._validation import check_int
from ..metrics import metric_name, pairwise_distances
from .exact import ExactEuclideanIndex
from .table import _DEFAULT_MEMORY, Neighborhoods

__all__ = ["knn_neighborhoods", "radius_neighborhoods"]

_EUCLIDEAN_MARGIN = 16  # below k + 16 words the float64 pairwise path is as fast


def _rows_per_block(n_vocab: int, memory_bytes: int) -> int:
    # the float64 distance block plus argpartition / mask temporaries: ~3 arrays of block x V
    return max(1, memory_bytes // max(1, 3 * 8 * n_vocab))


def knn_neighborhoods(
    queries: np.ndarray, vectors: np.ndarray, k: int, metric: str | Callable[..., np.ndarray] = "euclidean", *,
    memory_bytes: int = _DEFAULT_MEMORY, progress: bool | None = False, fingerprint: str = "",
) -> Neighborhoods:
    """The ``k`` nearest rows of ``vectors`` for every row of ``queries`` (exact, blockwise).

    Row i holds ``min(k, len(vectors))`` ids sorted by (distance, id); ``bound[i]`` is the largest
    of them (every other word is at least that far), or ``inf`` when k ≥ ``len(vectors)``.
    Ties at the k-th distance are cut arbitrarily (the bound stays valid).
    """
    queries, n, V, kk, kernel = _knn_setup(queries, vectors, k, metric, memory_bytes)
    ids = np.empty((n, kk), dtype=np.int32)
    dists = np.empty((n, kk), dtype=np.float64)
    bound = np.empty(n, dtype=np.float64)
    bar = progress_bar(n, f"{kk}-nearest neighbours ({metric_name(metric)})", progress)
    try:
        for s in range(0, n, kernel.step):
            ids[s : s + kernel.step], dists[s : s + kernel.step], bound[s : s + kernel.step] = kernel.block(queries[s : s + kernel.step])
            bar.update(min(kernel.step, n - s))
    finally:
        bar.close()
    return Neighborhoods(
        indptr=np.arange(n + 1, dtype=np.int64) * kk,
        indices=ids.reshape(-1),
        distances=dists.reshape(-1),
        bound=bound,
        kind="knn",
        param=float(k),
        metric=metric_name(metric),
        n_vocab=V,
        fingerprint=fingerprint,
    )


class _StackedRows:
    """Rows of ``head`` followed by the rows of ``tail``, sliced without stacking them (the
    vocabulary plus its UNK row would otherwise be a full copy of the vectors)."""

    def __init__(self, head: np.ndarray, tail: np.ndarray) -> None:
        self.head, self.tail = head, np.atleast_2d(tail).astype(head.dtype)
        self.shape = (head.shape[0] + self.tail.shape[0], head.shape[1])
        self.dtype = head.dtype
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, sl: slice) -> np.ndarray:
        start, stop, step = sl.indices(self.shape[0])
        if step != 1:
            raise IndexError("_StackedRows supports contiguous slices only")
        n0 = self.head.shape[0]
        if stop <= n0:
            return self.head[start:stop]
        if start >= n0:
            return self.tail[start - n0 : stop - n0]
        return np.concatenate([self.head[start:], self.tail[: stop - n0]])


class _KnnEuclidean:
    """Exact Euclidean k-nearest lists of float32 data, one block of query rows at a time: the
    certified float32 search of :class:`~deniable.neighbors.exact.ExactEuclideanIndex` (its
    ``knn_bounded``), which also gives each row's bound: every word outside the list is at
    distance ≥ min(k-th distance, √(‖q‖² + s_c − δ)), s_c the lowest score of a word left out
    and δ the error bound of :func:`~deniable.neighbors.base.score_error_bound`."""

    step = 256  # query rows per block (progress and resumable checkpoints)

    def __init__(self, vectors: np.ndarray, k: int, memory_bytes: int) -> None:
        self.index = ExactEuclideanIndex(vectors, memory_bytes=memory_bytes)
        self.k = k

    def block(self, qb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids (m, k) int32, exact distances (m, k) float64, bound (m,)) for query rows ``qb``."""
        ids, d, bound = self.index.knn_bounded(qb, self.k)
        return ids.astype(np.int32), d, bound


class _KnnGeneric:
    """k-nearest lists for any metric, one block of query rows at a time: exact float64 distances
    to the whole vocabulary (``pairwise_distances``) and a partition."""

    def __init__(self, vectors: np.ndarray, k: int, metric: Any, memory_bytes: int) -> None:
        self.vectors, self.k, self.metric = vectors, k, metric
        self.V = vectors.shape[0]
        self.step = _rows_per_block(self.V, memory_bytes)

    def block(self, qb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k, V = self.k, self.V
        D = pairwise_distances(qb, self.vectors, self.metric)
        m = D.shape[0]
        part = np.argpartition(D, k - 1, axis=1)[:, :k] if k < V else np.broadcast_to(np.arange(V), (m, V))
        d = np.take_along_axis(D, part, axis=1)
        order = np.lexsort((part, d), axis=1)
        ids = np.take_along_axis(part, order, axis=1).astype(np.int32)
        dk = np.take_along_axis(d, order, axis=1)
        bound = dk[:, -1].copy() if k < V else np.full(m, np.inf)
        return ids, dk, bound


def _knn_setup(queries: Any, vectors: np.ndarray, k: int, metric: Any, memory_bytes: int) -> tuple[Any, int, int, int, _KnnEuclidean | _KnnGeneric]:
    """Validated (queries, n rows, V, min(k, V), block kernel) for the k-nearest builders."""
    k = check_int("k", k, minimum=1)
    memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
    if not isinstance(queries, _StackedRows):
        queries = np.atleast_2d(queries)
    n, V = queries.shape[0], vectors.shape[0]
    kk = min(k, V)
    return queries, n, V, kk, _knn_kernel(queries, vectors, kk, metric, memory_bytes)


def _knn_kernel(queries: Any, vectors: np.ndarray, k: int, metric: Any, memory_bytes: int) -> _KnnEuclidean | _KnnGeneric:
    kk = min(k, vectors.shape[0])
    if (
        isinstance(metric, str)
        and metric == "euclidean"
        and kk + _EUCLIDEAN_MARGIN < vectors.shape[0]
        and all(np.issubdtype(x.dtype, np.floating) and x.dtype.itemsize <= 4 for x in (queries, vectors))
    ):
        return _KnnEuclidean(vectors, kk, memory_bytes)
    return _KnnGeneric(vectors, kk, metric, memory_bytes)


def radius_neighborhoods(
    queries: np.ndarray, vectors: np.ndarray, gamma: float, metric: str | Callable[..., np.ndarray] = "euclidean", *,
    memory_bytes: int = _DEFAULT_MEMORY, max_entries: int = 50_000_000, progress: bool | None = False, fingerprint: str = "",
) -> Neighborhoods:
    """L(w) = {y : d(w, y) ≤ γ} for every row of ``queries`` (Algorithm 3, pre-processing).

    Rows are sorted by (distance, id); ``bound[i] = γ`` (every other word is farther than γ),
    ``inf`` for a row that holds the whole vocabulary. Raises ``ValueError`` once the table
    would exceed ``max_entries`` entries (at small ε, L(w) approaches the whole vocabulary:
    use ``knn_neighborhoods`` then).
    """
    gamma = float(gamma)
    if math.isnan(gamma) or gamma < 0:
        raise ValueError(f"gamma must be a number >= 0, got {gamma!r}")
    memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
    max_entries = check_int("max_entries", max_entries, minimum=0)
    if not isinstance(queries, _StackedRows):
        queries = np.atleast_2d(queries)
    n, V = queries.shape[0], vectors.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    id_parts: list[np.ndarray] = []
    d_parts: list[np.ndarray] = []
    total = 0
    step = _rows_per_block(V, memory_bytes)
    bar = progress_bar(n, f"radius {gamma:.4g} neighbourhoods ({metric_name(metric)})", progress)
    try:
        for s in range(0, n, step):
            D = pairwise_distances(queries[s : s + step], vectors, metric)
            r, c = np.divmod(np.flatnonzero(gamma >= D), D.shape[1])  # row-major: grouped by row
            total += r.size
            if total > max_entries:
                raise ValueError(
                    f"the radius-{gamma:g} neighbourhoods exceed max_entries={max_entries} entries "
                    f"(already {total} after {s + D.shape[0]} of {n} rows); use k-nearest lists instead"
                )
            d = D[r, c]
            order = np.lexsort((c, d, r))
            counts[s : s + D.shape[0]] = np.bincount(r, minlength=D.shape[0])
            id_parts.append(c[order].astype(np.int32))
            d_parts.append(d[order])
            bar.update(D.shape[0])
    finally:
        bar.close()
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    bound = np.where(counts == V, np.inf, gamma)
    return Neighborhoods(
        indptr=indptr,
        indices=np.concatenate(id_parts) if id_parts else np.empty(0, np.int32),
        distances=np.concatenate(d_parts) if d_parts else np.empty(0, np.float64),
        bound=bound.astype(np.float64),
        kind="radius",
        param=gamma,
        metric=metric_name(metric),
        n_vocab=V,
        fingerprint=fingerprint,
    )
