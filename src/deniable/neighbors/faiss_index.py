"""Optional FAISS backend (``pip install "deniable[faiss]"``).

``kind="flat"`` is exact (brute force, as :class:`ExactEuclideanIndex`). ``"hnsw"`` and ``"ivf"``
are approximate: they may return a vector that is not the nearest. That changes the output
distribution of a mechanism but **not its privacy guarantee**, because the search is
post-processing of the already-privatized noisy vector; utility statistics (N_w, S_w) measured
with the exact index no longer describe it exactly, so measure with the index you deploy.
"""

from __future__ import annotations

import numpy as np

from .._optional import import_optional
from .._validation import check_int

__all__ = ["FaissIndex", "FAISS_KINDS"]

FAISS_KINDS = ("flat", "hnsw", "ivf")


class FaissIndex:
    """Euclidean 1-NN with FAISS.

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
        x = np.ascontiguousarray(vectors, dtype=np.float32)
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
        self.size = x.shape[0]
        self.dim = d

    def search(self, queries: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {q.shape}")
        if q.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        _, ids = self._index.search(q, 1)
        ids = ids[:, 0].astype(np.int64)
        if (ids < 0).any():  # approximate indexes can come back empty-handed; fall back exactly
            from .exact import ExactEuclideanIndex

            miss = ids < 0
            ids[miss] = ExactEuclideanIndex(self._index.reconstruct_n(0, self.size)).search(q[miss])
        return ids
