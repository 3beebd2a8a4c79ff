"""Nearest-neighbour search: one k-NN API with swappable exact engines, TEM's neighbourhood
tables, and FAISS's approximate indexes.

Every engine implements :class:`NearestNeighbors` — ``search(queries) -> ids`` and
``knn(queries, k) -> (ids, distances)`` — and the exact ones keep one contract
(:mod:`deniable.neighbors.base`): the answer is the float64 brute force on float32-rounded
vectors and queries, nearest first, ties to the lowest id, certified by the one rounding-error
bound :func:`score_error_bound`. Build one with :func:`nearest_neighbors`:

* ``"exact"``: numpy float32 matrix products (default);
* ``"exact-bf16"``: a bfloat16 product through torch, fast on CPUs with bfloat16 units;
* ``"faiss-flat"``: FAISS's brute force (``pip install "deniable[faiss]"``);
* ``"torch"``: a torch device, GPU or CPU, with fp32, tf32 or bf16 products
  (``pip install "deniable[torch]"``).

:func:`make_index` builds a mechanism's 1-NN index by name (:data:`INDEX_NAMES`), which also
offers FAISS's approximate ``"faiss-hnsw"`` and ``"faiss-ivf"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import NearestNeighbors, SearchIndex, score_error_bound
from .exact import ExactEuclideanIndex

__all__ = [
    "ENGINES",
    "INDEX_NAMES",
    "ExactEuclideanIndex",
    "NearestNeighbors",
    "SearchIndex",
    "make_index",
    "nearest_neighbors",
    "score_error_bound",
]

#: The exact k-NN engines of :func:`nearest_neighbors`.
ENGINES = ("exact", "exact-bf16", "faiss-flat", "torch")
#: Index names a mechanism accepts (``index=...``).
INDEX_NAMES = ("exact", "exact-bf16", "faiss-flat", "faiss-hnsw", "faiss-ivf")


def nearest_neighbors(vectors: np.ndarray, engine: str = "exact", **options: Any) -> NearestNeighbors:
    """An exact k-NN engine over the rows of ``vectors`` (see the module docs); ``options`` go to
    the engine's class (``memory_bytes``; ``device`` and ``precision`` for ``"torch"``)."""
    if engine == "exact":
        return ExactEuclideanIndex(vectors, **options)
    if engine == "exact-bf16":
        from .bf16 import Bf16EuclideanIndex

        return Bf16EuclideanIndex(vectors, **options)
    if engine == "faiss-flat":
        from .faiss_index import FaissIndex

        return FaissIndex(vectors, kind="flat", **options)
    if engine == "torch":
        from .torch_index import TorchEuclideanIndex

        return TorchEuclideanIndex(vectors, **options)
    raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")


def make_index(index: str | SearchIndex, vectors: np.ndarray) -> SearchIndex:
    """Build a 1-NN index over ``vectors`` from a name in :data:`INDEX_NAMES`, or return a
    ready object that has ``search(queries) -> ids``."""
    if isinstance(index, str):
        if index in ("exact", "exact-bf16", "faiss-flat"):
            return nearest_neighbors(vectors, index)
        if index.startswith("faiss-") and index in INDEX_NAMES:
            from .faiss_index import FaissIndex

            return FaissIndex(vectors, kind=index.split("-", 1)[1])
        raise ValueError(f"unknown index {index!r}; choose one of {', '.join(INDEX_NAMES)} or pass an object with .search()")
    if not hasattr(index, "search"):
        raise TypeError(f"index must be a name or an object with a search(queries) method, got {type(index).__name__}")
    return index
