"""Nearest *unassigned* words, for the greedy pre-processing of CusText and 1-Diffractor.

Both build public structures by repeatedly asking "which words, among those not yet used, are
nearest to this one?". Cached k-nearest lists answer most of these; :class:`FreeScanner`
answers the rest with a scan over the whole vocabulary: for the Euclidean metric (and the angle,
which orders like the Euclidean distance between unit vectors) one float64 matrix-vector
product gives ‖x‖² − 2x·q for every word, the used words are masked, a margin of candidates is
re-measured exactly with :func:`deniable.metrics.pairwise_distances`, and the answer is ordered
by (exact distance, id). Other metrics scan the unused words with ``pairwise_distances``.
"""

from __future__ import annotations

import numpy as np

from ..metrics import pairwise_distances

__all__ = ["FreeScanner"]

_MARGIN = 16


class FreeScanner:
    """The ``need`` nearest words to ``vectors[head]`` among those with ``free`` set."""

    def __init__(self, vectors: np.ndarray, metric: str) -> None:
        self.vectors = vectors
        self.metric = metric
        if metric in ("euclidean", "angular"):
            X = np.asarray(vectors, dtype=np.float64)
            if metric == "angular":
                X = X / np.linalg.norm(X, axis=1, keepdims=True)
            self._X = X
            self._ids = np.arange(X.shape[0])  # rows still scanned (a superset of the free words)
            self._Xc = X
            self._sqc = np.einsum("ij,ij->i", X, X)
        else:
            self._X = None  # type: ignore[assignment]  # other metrics scan with the metric function

    def nearest(self, head: int, free: np.ndarray, need: int) -> np.ndarray:
        """Ids of the ``need`` nearest free words to word ``head`` (exact distances, ties by id)."""
        if self._X is None:
            rest = np.flatnonzero(free)
            dist = pairwise_distances(self.vectors[head : head + 1], self.vectors[rest], self.metric)[0]
            return rest[np.lexsort((rest, dist))[:need]]
        live = free[self._ids]
        n_free = int(live.sum())
        if n_free < live.size // 2:  # drop used rows once half of them are used
            self._ids = self._ids[live]
            self._Xc = self._X[self._ids]
            self._sqc = np.einsum("ij,ij->i", self._Xc, self._Xc)
            live = np.ones(self._ids.size, dtype=bool)
        score = self._sqc - 2.0 * (self._Xc @ self._X[head])
        score[~live] = np.inf
        m = min(n_free, need + _MARGIN)
        pos = np.argpartition(score, m - 1)[:m] if m < score.size else np.arange(score.size)
        pos = pos[np.isfinite(score[pos])]
        cand = self._ids[pos]
        # the margin absorbs the rounding of the expansion (relative ~1e-16 of ‖x‖² + ‖q‖²)
        exact = pairwise_distances(self.vectors[head : head + 1], self.vectors[cand], self.metric)[0]
        return cand[np.lexsort((cand, exact))[:need]]
