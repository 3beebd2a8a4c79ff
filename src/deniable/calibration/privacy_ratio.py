"""The privacy ratio: comparable epsilons for mechanisms with different metrics.

BRR paper §5, Definition 5.1 and Appendix A. For a metric d on a finite space W (the
vocabulary), Definition A.2 defines

    P_d^max = max_{x, x' ∈ W} d(x, x')                  (Eq. 6)
    P_d^avg = Σ_{x, x' ∈ W} d(x, x') / |W|²             (Eq. 7)

(all |W|² ordered pairs, including the |W| pairs (x, x) with d = 0). ε·P_d estimates the privacy
loss bound of an ε·d-private mechanism (Corollary A.1, Eq. 8). Two mechanisms A and B get the same
estimate when ε_B = R_{d_A,d_B} · ε_A with the privacy ratio R_{d_A,d_B} = P_{d_A} / P_{d_B}
(Eq. 3). The paper's experiments use the average (§6).

Everything here is exact: distances in float64, computed in row blocks of bounded memory (symmetric
built-in metrics compute each unordered block once), summed per block.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from .._validation import check_int, check_positive
from ..metrics import MetricLike, MetricSpace, get_metric, metric_name

__all__ = [
    "MetricStats",
    "MetricSpace",
    "AGGREGATES",
    "metric_stats",
    "privacy_measure",
    "privacy_ratio",
    "equivalent_epsilon",
    "mechanism_metric_stats",
]

AGGREGATES = ("avg", "max")
_SYMMETRIC = ("euclidean", "manhattan", "chebyshev", "angular", "hamming")
_DEFAULT_MEMORY = 128 << 20
# bytes of float64 temporaries per distance cell, per metric (sizing the row blocks)
_CELL_BYTES = {"euclidean": 48, "angular": 48, "hamming": 48, "manhattan": 24, "chebyshev": 24}


@dataclass(frozen=True)
class MetricStats:
    """Aggregates of a metric over all ordered pairs of a finite space (Definition A.2).

    Attributes
    ----------
    avg
        P_d^avg: mean of d over all |W|² ordered pairs (self-pairs included, Eq. 7).
    max
        P_d^max: largest distance between two points (Eq. 6).
    n
        |W|, the number of points.
    metric
        Name of the metric.
    """

    avg: float
    max: float
    n: int
    metric: str

    def aggregate(self, aggregate: str = "avg") -> float:
        """``avg`` or ``max``."""
        _check_aggregate(aggregate)
        return self.avg if aggregate == "avg" else self.max


SpaceLike = Union[MetricStats, MetricSpace, "tuple[Any, MetricLike]", Any]


def _check_aggregate(aggregate: str) -> str:
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be 'avg' or 'max', got {aggregate!r}")
    return aggregate


def metric_stats(points: Any, metric: MetricLike = "euclidean", *, memory_bytes: int = _DEFAULT_MEMORY, progress: Any = False) -> MetricStats:
    """P_d^avg and P_d^max of ``metric`` over the rows of ``points``, exactly and blockwise.

    Parameters
    ----------
    points
        ``(n, d)`` array: float vectors, or packed ``uint64`` codes for ``"hamming"``.
    metric
        A metric name or a callable ``f(A, B) -> (len(A), len(B))`` (assumed symmetric only if built in).
    memory_bytes
        Bound on the distance block and its temporaries (default 128 MiB).
    progress
        ``False`` (default) nothing; ``None`` a bar on a terminal, else a line every 30 s;
        ``True`` the bar; a callable ``(done, total)`` (:mod:`deniable._progress`).
    """
    name = metric_name(metric)
    fn = get_metric(metric)
    X = np.asarray(points)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"points must be a non-empty 2-D array, got shape {X.shape}")
    if name == "hamming":
        X = np.ascontiguousarray(X, dtype=np.uint64)
    elif not np.issubdtype(X.dtype, np.floating) or X.dtype.itemsize < 8:
        X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
    symmetric = isinstance(metric, str) and metric in _SYMMETRIC
    rows = max(1, memory_bytes // (n * _CELL_BYTES.get(name, 48)))
    starts = range(0, n, rows)
    from .._progress import progress_bar

    bar = progress_bar(len(starts), f"pairwise {name}", progress, unit="block")
    partial: list[float] = []
    dmax = 0.0
    if name == "hamming" and isinstance(metric, str):
        fn = _hamming_counts
    for s in starts:
        e = min(n, s + rows)
        if symmetric:
            d = fn(X[s:e], X[s:])
            diag = float(d[:, : e - s].sum(dtype=np.float64))
            rest = float(d[:, e - s :].sum(dtype=np.float64))
            partial.append(diag + 2.0 * rest)
        else:
            d = np.asarray(fn(X[s:e], X))
            partial.append(float(d.sum(dtype=np.float64)))
        if d.size:
            dmax = max(dmax, float(d.max()))
        bar.update(1)
    bar.close()
    return MetricStats(avg=math.fsum(partial) / (float(n) * n), max=dmax, n=n, metric=name)


def _hamming_counts(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Exact Hamming distances between packed codes as uint16, one code word at a time (faster
    than broadcasting over the words and summing a short axis)."""
    out = np.zeros((A.shape[0], B.shape[0]), dtype=np.uint16)
    tmp = np.empty(out.shape, dtype=np.uint64)
    cnt = np.empty(out.shape, dtype=np.uint8)
    cols = np.ascontiguousarray(B.T)
    for k in range(A.shape[1]):
        np.bitwise_xor(A[:, k : k + 1], cols[k][None, :], out=tmp)
        np.bitwise_count(tmp, out=cnt)
        out += cnt
    return out


def _stats_of(space: SpaceLike) -> MetricStats:
    if isinstance(space, MetricStats):
        return space
    if isinstance(space, MetricSpace):
        return metric_stats(space.points, space.metric)
    if isinstance(space, tuple) and len(space) == 2:
        return metric_stats(space[0], space[1])
    from ..mechanisms.base import Mechanism

    if isinstance(space, Mechanism):
        return mechanism_metric_stats(space)
    raise TypeError(
        "a metric space must be a Mechanism, a MetricSpace(points, metric), a (points, metric) tuple or "
        f"precomputed MetricStats, got {type(space).__name__}"
    )


def privacy_measure(space: SpaceLike, aggregate: str = "avg") -> float:
    """P_d (Definition A.2) of a metric space: a Mechanism (its guarantee metric on its
    vocabulary), a :class:`MetricSpace`, a ``(points, metric)`` tuple or :class:`MetricStats`."""
    _check_aggregate(aggregate)
    return _stats_of(space).aggregate(aggregate)


def privacy_ratio(metric_a: SpaceLike, metric_b: SpaceLike, aggregate: str = "avg") -> float:
    """R_{d_A,d_B} = P_{d_A} / P_{d_B} (Definition 5.1)."""
    _check_aggregate(aggregate)
    pa, pb = privacy_measure(metric_a, aggregate), privacy_measure(metric_b, aggregate)
    if not pb > 0:
        raise ValueError(f"P_d^{aggregate} of the second space is {pb:g}: all its points coincide, so no epsilon matches")
    return pa / pb


def equivalent_epsilon(epsilon_a: float, metric_a: SpaceLike, metric_b: SpaceLike, aggregate: str = "avg") -> float:
    """ε_B = R_{d_A,d_B} · ε_A (Definition 5.1, Eq. 3): the ε for mechanism B whose privacy-loss
    estimate ε_B·P_{d_B} equals ε_A·P_{d_A}.

    Parameters
    ----------
    epsilon_a
        ε of mechanism A (> 0).
    metric_a, metric_b
        The two metric spaces: each a Mechanism (its own guarantee metric over its vocabulary, via
        :func:`mechanism_metric_stats`), a :class:`MetricSpace` / ``(points, metric)`` tuple, or
        precomputed :class:`MetricStats`. Both should cover the same words.
    aggregate
        ``"avg"`` (P_d^avg, the paper's choice in §6) or ``"max"`` (P_d^max).

    Example: ``equivalent_epsilon(10, madlib, brr)`` is BRR's ε matching Madlib at ε = 10.
    """
    epsilon_a = check_positive("epsilon_a", epsilon_a)
    return privacy_ratio(metric_a, metric_b, aggregate) * epsilon_a


# -- per-mechanism statistics, cached ----------------------------------------------------------
_BY_INSTANCE: weakref.WeakKeyDictionary[Any, MetricStats] = weakref.WeakKeyDictionary()
_BY_KEY: OrderedDict[tuple[Any, ...], MetricStats] = OrderedDict()
_KEY_CACHE_SIZE = 16
_DISK_VERSION = "metric-stats-v1"


def _space_of(mechanism: Any) -> tuple[tuple[Any, ...] | None, Any, MetricLike | None]:
    """(cache key or None, points, metric) of the mechanism's guarantee metric, from
    :meth:`~deniable.Mechanism.metric_space` (all None when it has no point form)."""
    space = mechanism.metric_space()
    if space is None:
        return None, None, None
    return space.key, space.points, space.metric


def _distance_stats(mechanism: Any, memory_bytes: int) -> MetricStats:
    """Fallback: the mechanism's own ``distance`` on all ordered pairs, blockwise."""
    n = int(mechanism.n_words)
    rows = max(1, memory_bytes // (n * 64))
    ids = np.arange(n, dtype=np.int64)
    parts: list[float] = []
    dmax = 0.0
    for s in range(0, n, rows):
        a = np.repeat(ids[s : s + rows], n)
        b = np.tile(ids, min(rows, n - s))
        d = np.asarray(mechanism.distance(a, b), dtype=np.float64)
        parts.append(float(d.sum()))
        dmax = max(dmax, float(d.max()))
    name = mechanism.guarantee.metric
    return MetricStats(avg=math.fsum(parts) / (float(n) * n), max=dmax, n=n, metric=name)


def _disk_path(key: tuple[Any, ...]) -> Path:
    from ..neighbors.neighborhoods import cache_directory

    digest = hashlib.sha256(json.dumps([_DISK_VERSION, *map(str, key)]).encode()).hexdigest()[:24]
    return cache_directory() / f"metric-stats-{digest}.json"


def _load_disk(key: tuple[Any, ...]) -> MetricStats | None:
    """Stats computed earlier for the same (metric, embedding fingerprint, ...) key, if cached."""
    try:
        rec = json.loads(_disk_path(key).read_text())
        if rec.get("key") != [_DISK_VERSION, *map(str, key)]:
            return None
        return MetricStats(avg=float(rec["avg"]), max=float(rec["max"]), n=int(rec["n"]), metric=str(rec["metric"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_disk(key: tuple[Any, ...], stats: MetricStats) -> None:
    """Best effort: a cache that cannot be written only costs the recomputation next time."""
    try:
        path = _disk_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        rec = {"key": [_DISK_VERSION, *map(str, key)], "avg": repr(stats.avg), "max": repr(stats.max), "n": stats.n, "metric": stats.metric}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rec))
        os.replace(tmp, path)
    except OSError:
        pass


def mechanism_metric_stats(mechanism: Any, *, memory_bytes: int = _DEFAULT_MEMORY, progress: Any = False) -> MetricStats:
    """P_d^avg and P_d^max of ``mechanism``'s own guarantee metric over all ordered pairs of its
    vocabulary (UNK excluded), exactly and blockwise; cached per instance, per embedding
    fingerprint and metric (so mechanisms that differ only in ε share the result), and on disk
    in the cache folder (``$DENIABLE_CACHE_DIR`` or ``~/.cache/deniable``), since the exact pass
    is O(V²·d).

    The points and metric come from :meth:`~deniable.Mechanism.metric_space`: Madlib, Euclidean
    on the embedding vectors; Mahalanobis, Euclidean on the whitened vectors x·Σ_λ^{-1/2} (the
    regularized Mahalanobis distance); BRR, Hamming on the packed codes; a mechanism with a
    ``metric`` (TEM): ``deniable.metrics.get_metric(mechanism.metric)`` on ``embedding.vectors``.
    A mechanism without a point form (``metric_space()`` is None): its ``distance`` method on
    all pairs.
    """
    if not getattr(mechanism, "finite_metric", True):
        raise ValueError(
            f"{getattr(mechanism, 'name', type(mechanism).__name__)}'s guarantee distance is infinite between some words "
            f"({mechanism.guarantee.metric}), so it has no metric scale and the privacy ratio is undefined; "
            "compare mechanisms by a privacy target instead (get_mechanism(..., max_n_w=...), --max-nw)"
        )
    try:
        return _BY_INSTANCE[mechanism]
    except (KeyError, TypeError):
        pass
    key, points, metric = _space_of(mechanism)
    if key is not None and key in _BY_KEY:
        stats = _BY_KEY[key]
        _BY_KEY.move_to_end(key)
    elif key is not None and (cached := _load_disk(key)) is not None:
        stats = cached
    elif points is not None:
        stats = metric_stats(points, metric or "euclidean", memory_bytes=memory_bytes, progress=progress)
        if key is not None:
            _save_disk(key, stats)
    else:
        stats = _distance_stats(mechanism, memory_bytes)
    if key is not None:
        _BY_KEY[key] = stats
        while len(_BY_KEY) > _KEY_CACHE_SIZE:
            _BY_KEY.popitem(last=False)
    try:
        _BY_INSTANCE[mechanism] = stats
    except TypeError:
        pass
    return stats
