"""Which vocabulary words :func:`~deniable.calibration.plausible.plausible_deniability` measures:
a sample stratified by neighbourhood density (:func:`select_words`) and the words in the
sparsest neighbourhoods (:func:`extreme_words`), both re-exported by
:mod:`deniable.calibration.plausible`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int

__all__ = ["extreme_words", "select_words"]


def _knn_dists(mechanism: Any, ids: np.ndarray, k: int) -> np.ndarray | None:
    """Distances from each of ``ids`` to its 1st..k-th nearest *other* vocabulary word, shape
    ``(len(ids), k)`` (fewer columns in a tiny vocabulary; None when the mechanism has no
    vector points)."""
    if not mechanism.has_points:
        return None
    points = mechanism.points
    from ..neighbors import ExactEuclideanIndex

    vocab_pts = np.asarray(points(np.arange(mechanism.n_words)), dtype=np.float32)
    kk = min(k + 1, vocab_pts.shape[0])  # +1: the word itself is its own nearest neighbour
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size * 4 >= vocab_pts.shape[0]:  # most of the vocabulary: one cached all-words search
        dist = _all_knn_dists(vocab_pts, kk)[ids]
    else:
        _, dist = ExactEuclideanIndex(vocab_pts).knn(vocab_pts[ids], kk)
    return dist[:, 1:] if kk > 1 else dist


# k-NN distances of a whole point set against itself, by a hash of the points (memory, then the
# disk cache of deniable.neighbors): every calibration or ε selection on one embedding ranks the
# same words by isolation, and the search is a full V × V GEMM (≈ 20 s for 34K words here).
_KNN_MEMO: dict[tuple[str, int], np.ndarray] = {}


def _all_knn_dists(points: np.ndarray, k: int) -> np.ndarray:
    import hashlib

    from ..neighbors import ExactEuclideanIndex

    h = hashlib.blake2b(np.ascontiguousarray(points).data, digest_size=12)  # no copy of the matrix
    h.update(repr(points.shape).encode())
    key = (h.hexdigest(), int(k))
    if key in _KNN_MEMO:
        return _KNN_MEMO[key]
    path = None
    try:
        from .._files import cache_directory

        path = cache_directory(None) / "knn" / f"{key[0]}-k{k}.npy"
        if path.is_file():
            d = np.load(path, allow_pickle=False)
            if d.shape == (points.shape[0], k):
                _KNN_MEMO[key] = d
                return d
    except (OSError, ValueError):
        path = None
    _, d = ExactEuclideanIndex(points).knn(points, k)
    if len(_KNN_MEMO) >= 4:
        _KNN_MEMO.pop(next(iter(_KNN_MEMO)))
    _KNN_MEMO[key] = d
    if path is not None:
        try:
            from .._files import atomic_binary

            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_binary(path) as f:
                np.save(f, d)
        except OSError:
            pass  # a read-only cache only costs time
    return d


def _knn_radius(mechanism: Any, ids: np.ndarray, k: int) -> np.ndarray | None:
    """Distance from each of ``ids`` to its k-th nearest other vocabulary word (None when the
    mechanism has no vector points)."""
    d = _knn_dists(mechanism, ids, k)
    if d is None:
        return None
    return d[:, -1] if d.shape[1] else np.zeros(len(ids))


def extreme_words(mechanism: Any, m: int, *, k: int = 10) -> np.ndarray:
    """The vocabulary words most at risk of being released unchanged: sorted ids of the union of
    the ``m`` words farthest from their nearest neighbour and the ``m`` words with the largest
    distance to their ``k``-th nearest neighbour, over the *whole* vocabulary.

    Why these: a nearest-neighbour mechanism (Madlib, Mahalanobis) returns w unchanged when the
    noisy point stays in w's Voronoi cell, which is large when w's nearest neighbour is far, so
    the largest N_w sits in the sparsest neighbourhoods (Madlib paper §4.1, Fig. 2: the outliers
    of the N_w histograms). S_w counts the outputs that hold 1 − η of M(w)'s mass, which is
    small when few words lie within the noise scale, i.e. when the k-NN radius is large. Both
    rankings are proxies (the true extremes depend on ε and on every neighbour), so
    :func:`~deniable.calibration.select.select_epsilon` measures these words *in addition* to a
    stratified sample. Returns an empty array for mechanisms without vector points or ``m = 0``.
    Cost: one exact k-NN search of the vocabulary against itself (blocked GEMM).
    """
    m = check_int("m", m, minimum=0)
    k = check_int("k", k, minimum=1)
    V = int(mechanism.n_words)
    if m == 0 or V <= 1:
        return np.zeros(0, dtype=np.int64)
    if m >= V:
        return np.arange(V, dtype=np.int64)
    d = _knn_dists(mechanism, np.arange(V, dtype=np.int64), k)
    if d is None or d.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    ids = np.arange(V, dtype=np.int64)
    # largest distance first; ties broken by id for determinism
    first = np.lexsort((ids, -d[:, 0]))[:m]
    kth = np.lexsort((ids, -d[:, -1]))[:m]
    return np.union1d(first, kth).astype(np.int64)


def select_words(
    mechanism: Any,
    n: int,
    *,
    rng: RNGLike = None,
    strata: int = 10,
    k: int = 10,
    pool: int | None = None,
) -> np.ndarray:
    """A sample of ``n`` vocabulary ids stratified by neighbourhood density.

    Density is the Euclidean distance from a word's point to its ``k``-th nearest vocabulary
    neighbour (:meth:`deniable.neighbors.ExactEuclideanIndex.knn` on ``mechanism.points``). A
    candidate pool (all words, or ``pool`` random words; default ``max(10 n, 1000)``) is cut
    into ``strata`` equal-count quantile bins of that distance, and ``n`` words are drawn without
    replacement, equally from each bin, so the sparsest decile (the words most at risk of being
    returned unchanged) is always represented. Mechanisms without vector points get a simple
    random sample. Ids are returned sorted.
    """
    n = check_int("n", n, minimum=1)
    strata = check_int("strata", strata, minimum=1)
    gen = as_generator(rng)
    V = int(mechanism.n_words)
    if n >= V:
        return np.arange(V, dtype=np.int64)
    pool_size = min(V, pool if pool is not None else max(10 * n, 1000))
    cand = np.arange(V, dtype=np.int64) if pool_size >= V else np.sort(gen.choice(V, size=pool_size, replace=False))
    radius = _knn_radius(mechanism, cand, k)
    if radius is None or strata == 1:
        return np.sort(gen.choice(cand, size=n, replace=False))
    order = np.argsort(radius, kind="stable")
    bins = np.array_split(cand[order], strata)
    quota = np.full(strata, n // strata)
    quota[: n % strata] += 1
    # sparse strata first get the remainder; cap by bin size and hand leftovers to the others
    quota = quota[::-1]
    chosen: list[np.ndarray] = []
    spare = 0
    for b, q in zip(bins, quota):
        take = min(len(b), q + spare)
        spare = q + spare - take
        chosen.append(gen.choice(b, size=take, replace=False))
    return np.sort(np.concatenate(chosen))
