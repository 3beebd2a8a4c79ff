"""1-Diffractor's word lists: a 1-D order of the vocabulary built greedily from a start word
(:func:`greedy_word_list`), as the authors' code builds it (docs/mechanisms/diffractor.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._progress import progress_bar
from .._validation import check_int
from ..neighbors.neighborhoods import embedding_neighborhoods
from ._em_base import PRECOMPUTED_NEIGHBORS, precomputed_neighbors_param
from ._scan import FreeScanner

__all__ = ["greedy_word_list"]


def greedy_word_list(
    embedding: Any,
    metric: str = "euclidean",
    *,
    start: int = 0,
    precomputed_neighbors: int = PRECOMPUTED_NEIGHBORS,
    cache_dir: Any = None,
    progress: bool | None = False,
    k: int | None = None,
) -> np.ndarray:
    """A 1-D order of the whole vocabulary: start at word ``start`` (default 0, the most frequent
    in GloVe-ordered files, as the authors' package starts at its file's first word), then
    repeatedly append the nearest word not yet listed (ties by id). Exact: the cached lists of the
    ``precomputed_neighbors`` nearest words of each word give the answer when they still hold an
    unlisted word within their bound, otherwise the unlisted words are scanned, so the result does
    not depend on ``precomputed_neighbors`` (only the time does). ``k`` is its deprecated alias
    (warns). Returns the ids in list order (int64)."""
    n_precomputed = precomputed_neighbors_param("greedy_word_list", precomputed_neighbors, k)
    V = len(embedding)
    start = check_int("start", start, minimum=0)
    if start >= V:
        raise ValueError(f"start must be a word id below {V}, got {start}")
    nb, _ = embedding_neighborhoods(embedding, kind="knn", k=n_precomputed, metric=metric, cache_dir=cache_dir, progress=progress)
    bar = progress_bar(V, f"1-Diffractor word list ({metric})", progress)
    scanner = FreeScanner(embedding.vectors, metric)
    free = np.ones(V, dtype=bool)
    order = np.empty(V, dtype=np.int64)
    cur = start
    free[start] = False
    order[0] = start
    for n in range(1, V):
        s, e = nb.indptr[cur], nb.indptr[cur + 1]
        ids = nb.indices[s:e]
        ok = free[ids]
        nxt = -1
        if ok.any():
            j = int(np.argmax(ok))
            if nb.distances[s + j] <= nb.bound[cur]:
                nxt = int(ids[j])
        if nxt < 0:
            nxt = int(scanner.nearest(cur, free, 1)[0])
        free[nxt] = False
        order[n] = nxt
        cur = nxt
        if n % 1024 == 0:
            bar.update(1024)
    bar.update(V - (V - 1) // 1024 * 1024)  # the rest: the loop reported 1024 per 1024 words
    bar.close()
    return order
