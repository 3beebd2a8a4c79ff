"""Nearest-neighbour search: exact blocked Euclidean search, an exact certified-bfloat16 search
(optional torch), and an optional FAISS backend."""

from __future__ import annotations

import numpy as np

from .exact import ExactEuclideanIndex, SearchIndex

__all__ = ["ExactEuclideanIndex", "SearchIndex", "make_index", "INDEX_NAMES"]

INDEX_NAMES = ("exact", "exact-bf16", "faiss-flat", "faiss-hnsw", "faiss-ivf")


def make_index(index: str | SearchIndex, vectors: np.ndarray) -> SearchIndex:
    """Build a 1-NN index over ``vectors`` from a name in :data:`INDEX_NAMES`, or return a
    ready object that has ``search(queries) -> ids``."""
    if isinstance(index, str):
        if index == "exact":
            return ExactEuclideanIndex(vectors)
        if index == "exact-bf16":
            from .bf16 import Bf16EuclideanIndex

            return Bf16EuclideanIndex(vectors)
        if index.startswith("faiss-") and index in INDEX_NAMES:
            from .faiss_index import FaissIndex

            return FaissIndex(vectors, kind=index.split("-", 1)[1])
        raise ValueError(f"unknown index {index!r}; choose one of {', '.join(INDEX_NAMES)} or pass an object with .search()")
    if not hasattr(index, "search"):
        raise TypeError(f"index must be a name or an object with a search(queries) method, got {type(index).__name__}")
    return index
