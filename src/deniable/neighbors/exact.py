"""Exact Euclidean nearest-neighbour search with bounded memory.

For a batch of queries ``q`` the squared distance to each vocabulary vector ``e`` is
``‖q‖² + (‖e‖² − 2 q·e)``; the first term does not change the argmin. We keep only the vectors
(no copy when they are C-contiguous float32, so a memory-mapped vocabulary stays mapped) and
their squared norms ``‖e‖²`` (float32, computed in float64 blocks); per block one float32 matrix
product of ``−2q`` (exact: a power-of-two scaling) with the vectors, plus the norms, gives the
scores, and a per-block argmin (or argpartition for k > 1) follows while the block is in cache.
Blocks are sized so the score buffer stays within ``memory_bytes`` (default 64 MiB) whatever the
batch size. Scores are float32: candidates whose true distances differ by less than float32
rounding (about 1e-6 relative) may be ordered either way; ``knn`` recomputes the returned
distances exactly in float64 and sorts by them. Ties go to the lowest id.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .._validation import check_int

__all__ = ["SearchIndex", "ExactEuclideanIndex"]


@runtime_checkable
class SearchIndex(Protocol):
    """Anything that maps query vectors to the id of a vocabulary vector (1-NN)."""

    def search(self, queries: np.ndarray) -> np.ndarray: ...


class ExactEuclideanIndex:
    """Exact Euclidean 1-NN and k-NN over the rows of ``vectors``.

    Parameters
    ----------
    vectors
        ``(V, d)`` vocabulary vectors.
    memory_bytes
        Upper bound on the score buffer (and so the working set) per call, default 64 MiB.
    """

    exact = True

    def __init__(self, vectors: np.ndarray, *, memory_bytes: int = 64 << 20) -> None:
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[0] == 0:
            raise ValueError(f"vectors must be a non-empty 2-D array, got shape {vectors.shape}")
        self.memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, d = self._vectors.shape
        sqn = np.empty(n, dtype=np.float32)
        step = max(1, (16 << 20) // (8 * max(d, 1)))  # squared norms in float64, 16 MiB blocks: no full float64 copy
        for s in range(0, n, step):
            blk = self._vectors[s : s + step].astype(np.float64)
            sqn[s : s + step] = np.einsum("ij,ij->i", blk, blk)
        self._sqn = sqn

    @property
    def size(self) -> int:
        return int(self._vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self._vectors.shape[1])

    def _blocks(self, n_queries: int) -> tuple[int, int]:
        V = self.size
        cells = max(1, self.memory_bytes // 4)
        # at least 256 queries per product (fewer re-read the whole vocabulary per handful of
        # queries: ~0.7 of the matmul bound at 83 rows vs ~0.85 at 256, V = 200K); the
        # vocabulary is then tiled to keep the score buffer within memory_bytes
        qb = int(np.clip(cells // V, 256, 1024))
        qb = max(1, min(qb, n_queries))
        vb = int(min(V, max(1, cells // qb)))
        return qb, vb

    @staticmethod
    def _prepare(q: np.ndarray) -> np.ndarray:
        """``−2q`` in float32 (exact: the float32 rounding of q, scaled by a power of two)."""
        qm = np.asarray(q, dtype=np.float32)
        return np.multiply(qm, np.float32(-2.0), dtype=np.float32)

    def _scores(self, qm: np.ndarray, v0: int, w: int, out: np.ndarray) -> np.ndarray:
        """``‖e‖² − 2q·e`` for the vectors ``v0 .. v0+w`` into ``out`` (``(len(qm), w)`` float32)."""
        np.matmul(qm, self._vectors[v0 : v0 + w].T, out=out)
        out += self._sqn[v0 : v0 + w]
        return out

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """Float32 ``‖e‖² − 2q·e`` of each query row against every vocabulary vector (``(n, V)``;
        for callers that need more than the nearest id, e.g. the two nearest). Same order as the
        squared distances up to float32 rounding."""
        q = self._check(queries)
        out = np.empty((q.shape[0], self.size), dtype=np.float32)
        return self._scores(self._prepare(q), 0, self.size, out)

    def _check(self, queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {q.shape}")
        return q

    def search(self, queries: np.ndarray) -> np.ndarray:
        """Id of the nearest vocabulary vector for each query row (int64, shape ``(n,)``)."""
        q = self._check(queries)
        n = q.shape[0]
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        qb, vb = self._blocks(n)
        buf = np.empty(qb * vb, dtype=np.float32)
        V = self.size
        for s in range(0, n, qb):
            qa = self._prepare(q[s : s + qb])
            m = qa.shape[0]
            if vb == V:
                scores = self._scores(qa, 0, V, buf[: m * V].reshape(m, V))
                out[s : s + m] = scores.argmin(axis=1)
                continue
            best = np.full(m, np.inf, dtype=np.float32)
            arg = np.zeros(m, dtype=np.int64)
            rows = np.arange(m)
            for v0 in range(0, V, vb):
                w = min(vb, V - v0)
                scores = self._scores(qa, v0, w, buf[: m * w].reshape(m, w))
                a = scores.argmin(axis=1)
                val = scores[rows, a]
                better = val < best
                best[better] = val[better]
                arg[better] = a[better] + v0
            out[s : s + m] = arg
        return out

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids and their exact (float64) Euclidean distances, nearest first."""
        q = self._check(queries)
        k = check_int("k", k, minimum=1)
        k = min(k, self.size)
        n = q.shape[0]
        ids = np.empty((n, k), dtype=np.int64)
        dists = np.empty((n, k), dtype=np.float64)
        if n == 0:
            return ids, dists
        qb, vb = self._blocks(n)
        vb = max(vb, min(self.size, 2 * k))
        buf = np.empty(qb * vb, dtype=np.float32)
        V = self.size
        for s in range(0, n, qb):
            qa = self._prepare(q[s : s + qb])
            m = qa.shape[0]
            cand_ids = np.empty((m, 0), dtype=np.int64)
            cand_sc = np.empty((m, 0), dtype=np.float32)
            for v0 in range(0, V, vb):
                w = min(vb, V - v0)
                scores = self._scores(qa, v0, w, buf[: m * w].reshape(m, w))
                kk = min(k, w)
                part = np.argpartition(scores, kk - 1, axis=1)[:, :kk] if kk < w else np.broadcast_to(np.arange(w), (m, w))
                cand_ids = np.concatenate([cand_ids, part + v0], axis=1)
                cand_sc = np.concatenate([cand_sc, np.take_along_axis(scores, part, axis=1)], axis=1)
                if cand_ids.shape[1] > k:
                    keep = np.argpartition(cand_sc, k - 1, axis=1)[:, :k]
                    cand_ids = np.take_along_axis(cand_ids, keep, axis=1)
                    cand_sc = np.take_along_axis(cand_sc, keep, axis=1)
            diff = self._vectors[cand_ids].astype(np.float64) - q[s : s + m, None, :].astype(np.float64)
            d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
            order = np.lexsort((cand_ids, d), axis=1)
            ids[s : s + m] = np.take_along_axis(cand_ids, order, axis=1)
            dists[s : s + m] = np.take_along_axis(d, order, axis=1)
        return ids, dists
