"""The neighbourhood table (:class:`Neighborhoods`, CSR rows of ids and exact distances, saved as
``.npz``) and :func:`row_distances`; see :mod:`deniable.neighbors.neighborhoods`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_binary
from ..metrics import _paired_builtin, get_metric

__all__ = ["FORMAT_VERSION", "Neighborhoods", "row_distances"]

#: Bumped whenever the layout or the meaning of a cached file changes.
FORMAT_VERSION = 1
_DEFAULT_MEMORY = 64 << 20
_KINDS = ("knn", "radius")


@dataclass(frozen=True)
class Neighborhoods:
    """CSR table of neighbourhoods: row ``i`` is ``indices[indptr[i]:indptr[i+1]]`` (int32 word
    ids) with ``distances`` (float64), sorted by (distance, id); ``bound[i]`` is a lower bound on
    the distance from row ``i``'s point to every word not in the row (``inf``: none left).

    ``kind`` is ``"knn"`` (``param`` = k) or ``"radius"`` (``param`` = γ); ``n_vocab`` is the
    number of words; rows are the query points (for TEM: the vocabulary, then UNK).
    """

    indptr: np.ndarray
    indices: np.ndarray
    distances: np.ndarray
    bound: np.ndarray
    kind: str
    param: float
    metric: str
    n_vocab: int
    fingerprint: str = ""

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.indices.nbytes + self.distances.nbytes + self.bound.nbytes)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, distances) of row ``i``, nearest first."""
        s, e = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.indices[s:e], self.distances[s:e]

    def sizes(self) -> np.ndarray:
        """Number of entries of every row."""
        return np.diff(self.indptr)

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write to ``path`` (an ``.npz``) atomically: a temp file in the same folder, then
        ``os.replace``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_binary(path) as f:  # a cache is not secret: normal permissions
            np.savez(
                f,
                indptr=self.indptr,
                indices=self.indices,
                distances=self.distances,
                bound=self.bound,
                meta=np.array(
                    [self.kind, repr(float(self.param)), self.metric, str(self.n_vocab), self.fingerprint, str(FORMAT_VERSION)]
                ),
            )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Neighborhoods:
        """Read a table written by :meth:`save` (raises ``ValueError`` on a malformed file)."""
        with np.load(path, allow_pickle=False) as z:
            meta = [str(x) for x in z["meta"]]
            if len(meta) != 6 or int(meta[5]) != FORMAT_VERSION:
                raise ValueError(f"{path}: not a deniable neighbourhood file of format version {FORMAT_VERSION}")
            nb = cls(
                indptr=z["indptr"],
                indices=z["indices"],
                distances=z["distances"],
                bound=z["bound"],
                kind=meta[0],
                param=float(meta[1]),
                metric=meta[2],
                n_vocab=int(meta[3]),
                fingerprint=meta[4],
            )
        nb._check()
        return nb

    def _check(self) -> None:
        n = self.n_rows
        ok = (
            self.kind in _KINDS
            and self.indptr.ndim == 1
            and n >= 0
            and self.indptr[0] == 0
            and bool(np.all(np.diff(self.indptr) >= 0))
            and self.indices.shape == (self.nnz,)
            and self.distances.shape == (self.nnz,)
            and self.bound.shape == (n,)
            and (self.nnz == 0 or (int(self.indices.min()) >= 0 and int(self.indices.max()) < self.n_vocab))
        )
        if not ok:
            raise ValueError("inconsistent neighbourhood table (corrupt cache file?)")

# -- distances -------------------------------------------------------------------------------


def row_distances(
    points: Any,
    vectors: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    metric: str | Callable[..., np.ndarray] = "euclidean",
    *,
    chunk: int = 512,
) -> np.ndarray:
    """Element-wise distances ``d(points[src[i]], vectors[dst[i]])`` (float64, shape ``(n,)``).

    ``points`` is anything that supports integer-array indexing (an array, or TEM's
    vocabulary-plus-UNK view). Built-in metrics are computed pair by pair in chunks of
    ``chunk`` pairs (vectorized). A callable metric ``f(A, B)`` is called once per distinct
    ``src`` row on all its ``dst`` vectors (a loop over distinct source rows, not over pairs).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    out = np.empty(src.shape[0], dtype=np.float64)
    if src.size == 0:
        return out
    if callable(metric):
        order = np.argsort(src, kind="stable")
        s_sorted = src[order]
        starts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])
        ends = np.r_[starts[1:], s_sorted.size]
        for a, b in zip(starts, ends):
            sel = order[a:b]
            row = np.asarray(metric(points[s_sorted[a : a + 1]], vectors[dst[sel]]), dtype=np.float64)
            out[sel] = row.reshape(-1)
        return out
    get_metric(metric)  # validates the name
    for s in range(0, src.shape[0], chunk):
        out[s : s + chunk] = _paired_builtin(metric, points[src[s : s + chunk]], vectors[dst[s : s + chunk]])
    return out
