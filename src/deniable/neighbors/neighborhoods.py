"""Per-word neighbourhoods for TEM: K-nearest lists and γ-radius sets, as CSR, cached on disk.

TEM (truncated exponential mechanism; paper ``tem_truncated_exponential_mechanism.txt``,
Algorithm 3 / Appendix B) pre-processes, for every input word w, the words near it. Two kinds
of neighbourhood are built here, both as a :class:`Neighborhoods` CSR table (row i: ids and exact
float64 distances, sorted by distance then id):

``"knn"``     the ``k`` nearest words of each row (independent of ε and γ);
``"radius"``  the set L_w = {y : d(w, y) ≤ γ} of Algorithm 3 (one table per γ).

Each row also stores ``bound[i]``: every word *not* in row i is at distance ≥ ``bound[i]`` from
the row's point (``+inf`` when the row holds the whole vocabulary). For a knn row this is its
k-th distance; for a radius row it is γ. TEM's sampler needs nothing else.

Rows are computed blockwise: a block of query rows against the whole vocabulary with
:func:`deniable.metrics.pairwise_distances` (exact float64), so the working set stays within
``memory_bytes`` whatever the vocabulary size. Any built-in metric or a callable
``f(A, B) -> (len(A), len(B))`` works.

On-disk cache: one ``.npz`` per (embedding fingerprint, metric, k or γ, format version) in
:func:`cache_directory` (``cache_dir`` argument, else ``$DENIABLE_CACHE_DIR``, else
``~/.cache/deniable``). Files are written atomically (temp file + ``os.replace``); a file whose
stored key does not match is ignored and rebuilt. Callable metrics are never cached on disk
(two different callables may share a name).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._files import cache_directory
from .._validation import check_int
from ..errors import DeniableWarning
from ..metrics import METRICS, get_metric, metric_name, paired_distances
from .builders import _StackedRows, knn_neighborhoods, radius_neighborhoods
from .knn_ids import KNN_IDS_VERSION, KnnIds, build_knn_ids
from .table import _DEFAULT_MEMORY, _KINDS, FORMAT_VERSION, Neighborhoods, row_distances

__all__ = [
    "FORMAT_VERSION",
    "Neighborhoods",
    "KnnIds",
    "knn_neighborhoods",
    "build_knn_ids",
    "radius_neighborhoods",
    "embedding_neighborhoods",
    "row_distances",
    "paired_distances",
    "store_neighborhoods",
    "cache_directory",
    "cache_path",
]


# -- cache -----------------------------------------------------------------------------------


def _announce_build(
    kind: str, param: float, n_words: int, metric: Any, path: Path | None, cache_dir: Any, progress: bool | None, resumable: bool = False
) -> None:
    """Say that a one-time table is being built and where it goes: one line on stderr unless
    ``progress`` is False (the library default), and always to the ``deniable`` logger."""
    what = f"{int(param)}-nearest" if kind == "knn" else f"radius {param:.4g}"
    where = f"cached at {path}; later runs load it" if path is not None else ("not cached: cache_dir=False" if cache_dir is False else "not cached: callable metric")
    msg = f"building TEM's {what} neighbourhood table for {n_words} words ({metric_name(metric)}), once: {where}"
    if resumable and path is not None:
        msg += " (an interrupted build resumes where it stopped)"
    logging.getLogger("deniable").info(msg)
    if progress is not False:
        print(f"note: {msg}", file=sys.stderr, flush=True)



def _param_key(kind: str, param: float) -> str:
    if kind == "knn":
        return f"k{int(param)}"
    return "g" + float(param).hex().replace("+", "")


def cache_path(
    kind: str, fingerprint: str, metric: str, param: float, cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Path of the cached table for (embedding fingerprint, metric, k or γ, format version)."""
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}, got {kind!r}")
    return cache_directory(cache_dir) / f"tem-{kind}-{fingerprint}-{metric}-{_param_key(kind, param)}-v{FORMAT_VERSION}.npz"


def embedding_neighborhoods(
    embedding: Any,
    *,
    kind: str = "knn",
    k: int | None = None,
    gamma: float | None = None,
    metric: str | Callable[..., np.ndarray] = "euclidean",
    cache_dir: str | os.PathLike[str] | bool | None = None,
    memory_bytes: int = _DEFAULT_MEMORY,
    max_entries: int = 50_000_000,
    progress: bool | None = False,
    rebuild: bool = False,
    compact: bool = False,
) -> tuple[Any, Path | None]:
    """Neighbourhoods of every vocabulary word and of UNK (the last row: the vocabulary mean),
    loaded from the disk cache or built (and then cached).

    With ``compact=True`` (``kind="knn"`` only) the table is a :class:`KnnIds` — ids and bounds
    only, memory-mapped from a cache folder, built resumably (see :func:`build_knn_ids`) — for
    vocabularies whose full table would not fit in memory.

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`.
    kind
        ``"knn"`` (needs ``k``) or ``"radius"`` (needs ``gamma``).
    metric
        A built-in metric name or a callable ``f(A, B)`` (callables are not cached on disk).
    cache_dir
        Folder of the cache (see :func:`cache_directory`); ``False`` disables the disk cache.
    rebuild
        Recompute even when a cached file exists (and overwrite it).

    Returns
    -------
    (table, path)
        ``path`` is the cache file used or written (``None`` when not cached).
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}, got {kind!r}")
    if kind == "knn":
        if k is None:
            raise TypeError("kind='knn' needs k")
        param = float(check_int("k", k, minimum=1))
    else:
        if gamma is None:
            raise TypeError("kind='radius' needs gamma")
        param = float(gamma)
    if isinstance(metric, str) and metric not in METRICS:
        get_metric(metric)  # raises ValueError naming the metric
    fp = embedding.fingerprint
    path: Path | None = None
    if compact:
        if kind != "knn":
            raise ValueError("compact=True needs kind='knn' (radius tables are stored in full)")
        return _compact_knn(embedding, int(param), metric, cache_dir, memory_bytes, progress, rebuild), _compact_path(
            embedding, int(param), metric, cache_dir
        )
    if cache_dir is not False and not callable(metric):
        path = cache_path(kind, fp, metric, param, None if cache_dir in (None, True) else cache_dir)  # type: ignore[arg-type]
        if path.exists() and not rebuild:
            try:
                nb = Neighborhoods.load(path)
                if (nb.kind, nb.param, nb.metric, nb.n_vocab, nb.fingerprint, nb.n_rows) == (
                    kind,
                    param,
                    metric,
                    len(embedding),
                    fp,
                    len(embedding) + 1,
                ):
                    return nb, path
                warnings.warn(f"{path}: cache key does not match its content; rebuilding it", DeniableWarning, stacklevel=2)
            except (OSError, ValueError, KeyError) as exc:
                warnings.warn(f"{path}: unreadable cache file ({exc}); rebuilding it", DeniableWarning, stacklevel=2)
    _announce_build(kind, param, len(embedding), metric, path, cache_dir, progress)
    vectors = embedding.vectors
    queries: Any = _StackedRows(vectors, embedding.mean[None, :])  # sliced like an array, never stacked
    if kind == "knn":
        nb = knn_neighborhoods(queries, vectors, int(param), metric, memory_bytes=memory_bytes, progress=progress, fingerprint=fp)
    else:
        nb = radius_neighborhoods(
            queries, vectors, param, metric, memory_bytes=memory_bytes, max_entries=max_entries, progress=progress, fingerprint=fp
        )
    return nb, store_neighborhoods(nb, path)



def store_neighborhoods(nb: Neighborhoods, path: Path | None) -> Path | None:
    """Write ``nb`` to the cache file ``path`` (``None``: not cached); returns the path, or
    ``None`` with a warning when it cannot be written (the table is still used)."""
    if path is None:
        return None
    try:
        return nb.save(path)
    except OSError as exc:
        warnings.warn(f"could not write the neighbourhood cache {path} ({exc}); continuing without it", DeniableWarning, stacklevel=3)
        return None


def _compact_path(embedding: Any, k: int, metric: Any, cache_dir: Any) -> Path | None:
    if cache_dir is False or callable(metric):
        return None
    folder = cache_directory(None if cache_dir in (None, True) else cache_dir)
    return folder / f"tem-knnids-{embedding.fingerprint}-{metric}-k{k}-v{KNN_IDS_VERSION}"


def _compact_knn(embedding: Any, k: int, metric: Any, cache_dir: Any, memory_bytes: int, progress: bool | None, rebuild: bool) -> KnnIds:
    path = _compact_path(embedding, k, metric, cache_dir)
    V = len(embedding)
    if path is not None and path.is_dir() and not rebuild:
        try:
            t = KnnIds.load(path)
            if (t.param, t.metric, t.n_vocab, t.fingerprint, t.n_rows) == (float(k), metric, V, embedding.fingerprint, V + 1):
                return t
            warnings.warn(f"{path}: cache key does not match its content; rebuilding it", DeniableWarning, stacklevel=3)
        except (OSError, ValueError, KeyError) as exc:
            warnings.warn(f"{path}: unreadable cache folder ({exc}); rebuilding it", DeniableWarning, stacklevel=3)
        rebuild = True
    _announce_build("knn", float(k), V, metric, path, cache_dir, progress, resumable=True)
    queries: Any = _StackedRows(embedding.vectors, embedding.mean[None, :])
    return build_knn_ids(
        queries,
        embedding.vectors,
        k,
        metric,
        directory=path,
        memory_bytes=memory_bytes,
        progress=progress,
        fingerprint=embedding.fingerprint,
        rebuild=rebuild,
    )
