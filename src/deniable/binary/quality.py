"""Binarizer quality: overlap of the k nearest neighbours in real vs. binary space."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from .codes import BinaryEmbedding
from .hamming import HammingIndex

__all__ = ["nn_overlap"]


def nn_overlap(embedding: Any, binary: BinaryEmbedding, *, k: int = 10, n_queries: int | None = 2000, rng: RNGLike = 0) -> float:
    """Mean fraction of each query word's ``k`` nearest neighbours (Euclidean, in ``embedding``)
    that are also among its ``k`` nearest in Hamming distance (in ``binary``); the query word
    itself is excluded from both lists. Hamming ties are broken by the lower id.

    Parameters
    ----------
    embedding, binary
        The real embedding and its binarization (same words, same order).
    k
        Neighbours compared (10 in ``docs/results/binarizers.md``).
    n_queries
        Size of a uniform random sample of query words (without replacement); ``None`` = all.
    rng
        Seed or Generator for the sample (default 0).
    """
    from ..neighbors import ExactEuclideanIndex

    if list(embedding.words) != list(binary.words):
        raise ValueError("embedding and binary must have the same words in the same order")
    k = check_int("k", k, minimum=1)
    V = len(embedding)
    if k + 1 > V:
        raise ValueError(f"k={k} needs at least {k + 1} words, the vocabulary has {V}")
    if n_queries is None or n_queries >= V:
        q = np.arange(V)
    else:
        q = np.sort(as_generator(rng).choice(V, size=check_int("n_queries", n_queries, minimum=1), replace=False))
    real_ids, _ = ExactEuclideanIndex(embedding.vectors).knn(embedding.vectors[q], k + 1)
    bin_ids, _ = HammingIndex(binary.codes).knn(binary.codes[q], k + 1)
    total = 0
    for i, w in enumerate(q.tolist()):
        a = [j for j in real_ids[i].tolist() if j != w][:k]
        b = [j for j in bin_ids[i].tolist() if j != w][:k]
        total += len(set(a) & set(b))
    return total / (k * len(q))
