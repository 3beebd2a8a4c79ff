"""Optional FAISS backend (``pip install "deniable[faiss]"``).

``kind="flat"`` is the engine ``"faiss-flat"``: FAISS's float32 brute force, certified as every
exact engine (:mod:`deniable.neighbors.base`): FAISS returns k + 8 candidates with their float32
squared distances; where the (k+8)-th exceeds the k-th by more than twice
:func:`~deniable.neighbors.base.score_error_bound` (FAISS computes ‖q‖² + ‖e‖² − 2q·e or
Σ(qᵢ − eᵢ)² in float32, norms in float32) the candidates are re-measured in float64 and ordered
by (distance, id), and any other query goes to the numpy engine. So the answer is the float64
brute force. ``"hnsw"`` and ``"ivf"`` are approximate: they may return a vector that is not the nearest. That changes the output
distribution of a mechanism but **not its privacy guarantee**, because the search is
post-processing of the already-privatized noisy vector; utility statistics (N_w, S_w) measured
with the exact index no longer describe it exactly, so measure with the index you deploy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optional import import_optional
from .._validation import check_int
from .base import U32, VectorIndex, rank_certain, score_error_bound

_MARGIN = 8  # candidates beyond k asked of FAISS: the certificate then almost never fails

__all__ = ["FaissIndex", "FAISS_KINDS"]

FAISS_KINDS = ("flat", "hnsw", "ivf")


class FaissIndex(VectorIndex):
    """Euclidean 1-NN and k-NN with FAISS (``kind="flat"``: float64-exact, ties to the lowest id).

    Parameters
    ----------
    vectors
        ``(V, d)`` vocabulary vectors.
    kind
        ``"flat"`` (exact), ``"hnsw"`` or ``"ivf"`` (approximate).
    hnsw_m, ef_search
        HNSW graph degree and search breadth.
    nlist, nprobe
        IVF cells and cells visited per query (``nlist`` default: about 4·√V).
    """

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        kind: str = "flat",
        hnsw_m: int = 32,
        ef_search: int = 128,
        nlist: int | None = None,
        nprobe: int = 16,
    ) -> None:
        if kind not in FAISS_KINDS:
            raise ValueError(f"kind must be one of {', '.join(FAISS_KINDS)}, got {kind!r}")
        faiss = import_optional("faiss", purpose="the FAISS nearest-neighbour backend")
        sq = self._set_vectors(vectors)
        x = self._vectors
        d = x.shape[1]
        self.kind = kind
        self.exact = kind == "flat"
        if kind == "flat":
            index = faiss.IndexFlatL2(d)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, check_int("hnsw_m", hnsw_m, minimum=2))
            index.hnsw.efSearch = check_int("ef_search", ef_search, minimum=1)
        else:
            nlist = nlist if nlist is not None else max(1, int(4 * np.sqrt(x.shape[0])))
            nlist = check_int("nlist", nlist, minimum=1)
            quantizer = faiss.IndexFlatL2(d)
            index = faiss.IndexIVFFlat(quantizer, d, nlist)
            index.train(x)
            index.nprobe = check_int("nprobe", nprobe, minimum=1)
            self._quantizer = quantizer
        index.add(x)
        self._index = index
        self._max_norm = float(np.sqrt(sq.max()))
        self._fallback: Any = None
        #: Counters: queries searched, queries handed to the numpy engine (certificate failed).
        self.stats = {"queries": 0, "fallback": 0}

    def score_error_bound(self, qnorm: np.ndarray) -> np.ndarray:
        """Bound on the rounding error of FAISS's float32 squared distance for queries of norm
        ``qnorm`` against any vector, with the float64 re-measurement's slack
        (:func:`~deniable.neighbors.base.score_error_bound`: float32 sums, norms summed in float32,
        the query's squared norm included)."""
        return score_error_bound(qnorm, self._max_norm, self.dim, norm=(self.dim + 2) * U32, squared_query=True)

    def _exact(self) -> Any:
        if self._fallback is None:
            from .exact import ExactEuclideanIndex

            self._fallback = ExactEuclideanIndex(self._vectors)
        return self._fallback

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids (int64) and their float64 Euclidean distances, nearest first, ties
        to the lowest id (exact for ``"flat"``; the approximate kinds re-measure and order what
        FAISS found)."""
        q = self._queries(queries)
        k = min(check_int("k", k, minimum=1), self.size)
        n = q.shape[0]
        if n == 0:
            return np.empty((0, k), dtype=np.int64), np.empty((0, k))
        self.stats["queries"] += n
        c = min(self.size, k + _MARGIN) if self.exact else k
        sq, ids = self._index.search(q, c)
        ids = ids.astype(np.int64)
        found = (ids >= 0).all(axis=1)
        if self.exact:
            qn = np.sqrt(np.einsum("ij,ij->i", q, q, dtype=np.float64))
            tol = self.score_error_bound(qn)
            sq = sq.astype(np.float64)
            # every id FAISS left out has a computed squared distance >= the c-th returned
            sure = found & ((c == self.size) | (sq[:, c - 1] > sq[:, k - 1] + 2.0 * tol))
        else:
            sure = found
        ids[~found] = 0  # empty-handed rows are uncertain: never measured here
        out_ids, out_d, u = rank_certain(q, self._vectors, ids, sure, k)
        if u.size:  # uncertain (or, for approximate kinds, empty-handed) rows: the numpy engine
            self.stats["fallback"] += int(u.size)
            out_ids[u], out_d[u] = self._exact().knn(q[u], k)
        return out_ids, out_d

    def search(self, queries: np.ndarray) -> np.ndarray:
        """Id of the nearest vector for each query row (int64, ``(n,)``)."""
        if self.exact:
            return self.knn(queries, 1)[0][:, 0]
        q = self._queries(queries)
        if q.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        _, ids = self._index.search(q, 1)
        ids = ids[:, 0].astype(np.int64)
        miss = ids < 0
        if miss.any():  # approximate indexes can come back empty-handed; fall back exactly
            ids[miss] = self._exact().search(q[miss])
        return ids
