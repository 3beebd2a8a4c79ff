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

import json
import logging
import math
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_binary, cache_directory
from .._validation import check_int
from ..errors import DeniableWarning
from ..metrics import METRICS, _paired_builtin, get_metric, metric_name, paired_distances, pairwise_distances
from .exact import ExactEuclideanIndex

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

#: Bumped whenever the layout or the meaning of a cached file changes.
FORMAT_VERSION = 1
_DEFAULT_MEMORY = 64 << 20
_KINDS = ("knn", "radius")
_EUCLIDEAN_MARGIN = 16  # below k + 16 words the float64 pairwise path is as fast


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


# -- builders --------------------------------------------------------------------------------


def _rows_per_block(n_vocab: int, memory_bytes: int) -> int:
    # the float64 distance block plus argpartition / mask temporaries: ~3 arrays of block x V
    return max(1, memory_bytes // max(1, 3 * 8 * n_vocab))


def _progress(total: int, progress: bool | None, desc: str) -> Any:
    """A bar on stderr: ``False`` none, ``True`` always (forced), ``None`` only when stderr is a
    terminal (tqdm's ``disable=None``), so redirected logs stay free of bar redraws."""
    if progress is False:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="word", file=sys.stderr, dynamic_ncols=True, disable=None if progress is None else False)


def knn_neighborhoods(
    queries: np.ndarray,
    vectors: np.ndarray,
    k: int,
    metric: str | Callable[..., np.ndarray] = "euclidean",
    *,
    memory_bytes: int = _DEFAULT_MEMORY,
    progress: bool | None = False,
    fingerprint: str = "",
) -> Neighborhoods:
    """The ``k`` nearest rows of ``vectors`` for every row of ``queries`` (exact, blockwise).

    Row i holds ``min(k, len(vectors))`` ids sorted by (distance, id); ``bound[i]`` is the largest
    of them (every other word is at least that far), or ``inf`` when k ≥ ``len(vectors)``.
    Ties at the k-th distance are cut arbitrarily (the bound stays valid).
    """
    queries, n, V, kk, kernel = _knn_setup(queries, vectors, k, metric, memory_bytes)
    ids = np.empty((n, kk), dtype=np.int32)
    dists = np.empty((n, kk), dtype=np.float64)
    bound = np.empty(n, dtype=np.float64)
    bar = _progress(n, progress, f"{kk}-nearest neighbours ({metric_name(metric)})")
    try:
        for s in range(0, n, kernel.step):
            ids[s : s + kernel.step], dists[s : s + kernel.step], bound[s : s + kernel.step] = kernel.block(queries[s : s + kernel.step])
            if bar is not None:
                bar.update(min(kernel.step, n - s))
    finally:
        if bar is not None:
            bar.close()
    return Neighborhoods(
        indptr=np.arange(n + 1, dtype=np.int64) * kk,
        indices=ids.reshape(-1),
        distances=dists.reshape(-1),
        bound=bound,
        kind="knn",
        param=float(k),
        metric=metric_name(metric),
        n_vocab=V,
        fingerprint=fingerprint,
    )


class _StackedRows:
    """Rows of ``head`` followed by the rows of ``tail``, sliced without stacking them (the
    vocabulary plus its UNK row would otherwise be a full copy of the vectors)."""

    def __init__(self, head: np.ndarray, tail: np.ndarray) -> None:
        self.head, self.tail = head, np.atleast_2d(tail).astype(head.dtype)
        self.shape = (head.shape[0] + self.tail.shape[0], head.shape[1])
        self.dtype = head.dtype
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, sl: slice) -> np.ndarray:
        start, stop, step = sl.indices(self.shape[0])
        if step != 1:
            raise IndexError("_StackedRows supports contiguous slices only")
        n0 = self.head.shape[0]
        if stop <= n0:
            return self.head[start:stop]
        if start >= n0:
            return self.tail[start - n0 : stop - n0]
        return np.concatenate([self.head[start:], self.tail[: stop - n0]])


class _KnnEuclidean:
    """Exact Euclidean k-nearest lists of float32 data, one block of query rows at a time: the
    certified float32 search of :class:`~deniable.neighbors.exact.ExactEuclideanIndex` (its
    ``knn_bounded``), which also gives each row's bound: every word outside the list is at
    distance ≥ min(k-th distance, √(‖q‖² + s_c − δ)), s_c the lowest score of a word left out
    and δ the error bound of :func:`~deniable.neighbors.base.score_error_bound`."""

    step = 256  # query rows per block (progress and resumable checkpoints)

    def __init__(self, vectors: np.ndarray, k: int, memory_bytes: int) -> None:
        self.index = ExactEuclideanIndex(vectors, memory_bytes=memory_bytes)
        self.k = k

    def block(self, qb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids (m, k) int32, exact distances (m, k) float64, bound (m,)) for query rows ``qb``."""
        ids, d, bound = self.index.knn_bounded(qb, self.k)
        return ids.astype(np.int32), d, bound


class _KnnGeneric:
    """k-nearest lists for any metric, one block of query rows at a time: exact float64 distances
    to the whole vocabulary (``pairwise_distances``) and a partition."""

    def __init__(self, vectors: np.ndarray, k: int, metric: Any, memory_bytes: int) -> None:
        self.vectors, self.k, self.metric = vectors, k, metric
        self.V = vectors.shape[0]
        self.step = _rows_per_block(self.V, memory_bytes)

    def block(self, qb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k, V = self.k, self.V
        D = pairwise_distances(qb, self.vectors, self.metric)
        m = D.shape[0]
        part = np.argpartition(D, k - 1, axis=1)[:, :k] if k < V else np.broadcast_to(np.arange(V), (m, V))
        d = np.take_along_axis(D, part, axis=1)
        order = np.lexsort((part, d), axis=1)
        ids = np.take_along_axis(part, order, axis=1).astype(np.int32)
        dk = np.take_along_axis(d, order, axis=1)
        bound = dk[:, -1].copy() if k < V else np.full(m, np.inf)
        return ids, dk, bound


def _knn_setup(queries: Any, vectors: np.ndarray, k: int, metric: Any, memory_bytes: int) -> tuple[Any, int, int, int, _KnnEuclidean | _KnnGeneric]:
    """Validated (queries, n rows, V, min(k, V), block kernel) for the k-nearest builders."""
    k = check_int("k", k, minimum=1)
    memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
    if not isinstance(queries, _StackedRows):
        queries = np.atleast_2d(queries)
    n, V = queries.shape[0], vectors.shape[0]
    kk = min(k, V)
    return queries, n, V, kk, _knn_kernel(queries, vectors, kk, metric, memory_bytes)


def _knn_kernel(queries: Any, vectors: np.ndarray, k: int, metric: Any, memory_bytes: int) -> _KnnEuclidean | _KnnGeneric:
    kk = min(k, vectors.shape[0])
    if (
        isinstance(metric, str)
        and metric == "euclidean"
        and kk + _EUCLIDEAN_MARGIN < vectors.shape[0]
        and all(np.issubdtype(x.dtype, np.floating) and x.dtype.itemsize <= 4 for x in (queries, vectors))
    ):
        return _KnnEuclidean(vectors, kk, memory_bytes)
    return _KnnGeneric(vectors, kk, metric, memory_bytes)


def radius_neighborhoods(
    queries: np.ndarray,
    vectors: np.ndarray,
    gamma: float,
    metric: str | Callable[..., np.ndarray] = "euclidean",
    *,
    memory_bytes: int = _DEFAULT_MEMORY,
    max_entries: int = 50_000_000,
    progress: bool | None = False,
    fingerprint: str = "",
) -> Neighborhoods:
    """L(w) = {y : d(w, y) ≤ γ} for every row of ``queries`` (Algorithm 3, pre-processing).

    Rows are sorted by (distance, id); ``bound[i] = γ`` (every other word is farther than γ),
    ``inf`` for a row that holds the whole vocabulary. Raises ``ValueError`` once the table
    would exceed ``max_entries`` entries (at small ε, L(w) approaches the whole vocabulary:
    use ``knn_neighborhoods`` then).
    """
    gamma = float(gamma)
    if math.isnan(gamma) or gamma < 0:
        raise ValueError(f"gamma must be a number >= 0, got {gamma!r}")
    memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
    max_entries = check_int("max_entries", max_entries, minimum=0)
    if not isinstance(queries, _StackedRows):
        queries = np.atleast_2d(queries)
    n, V = queries.shape[0], vectors.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    id_parts: list[np.ndarray] = []
    d_parts: list[np.ndarray] = []
    total = 0
    step = _rows_per_block(V, memory_bytes)
    bar = _progress(n, progress, f"radius {gamma:.4g} neighbourhoods ({metric_name(metric)})")
    try:
        for s in range(0, n, step):
            D = pairwise_distances(queries[s : s + step], vectors, metric)
            r, c = np.divmod(np.flatnonzero(gamma >= D), D.shape[1])  # row-major: grouped by row
            total += r.size
            if total > max_entries:
                raise ValueError(
                    f"the radius-{gamma:g} neighbourhoods exceed max_entries={max_entries} entries "
                    f"(already {total} after {s + D.shape[0]} of {n} rows); use k-nearest lists instead"
                )
            d = D[r, c]
            order = np.lexsort((c, d, r))
            counts[s : s + D.shape[0]] = np.bincount(r, minlength=D.shape[0])
            id_parts.append(c[order].astype(np.int32))
            d_parts.append(d[order])
            if bar is not None:
                bar.update(D.shape[0])
    finally:
        if bar is not None:
            bar.close()
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    bound = np.where(counts == V, np.inf, gamma)
    return Neighborhoods(
        indptr=indptr,
        indices=np.concatenate(id_parts) if id_parts else np.empty(0, np.int32),
        distances=np.concatenate(d_parts) if d_parts else np.empty(0, np.float64),
        bound=bound.astype(np.float64),
        kind="radius",
        param=gamma,
        metric=metric_name(metric),
        n_vocab=V,
        fingerprint=fingerprint,
    )


# -- compact, resumable k-nearest lists ------------------------------------------------------

#: Version of the compact k-nearest directory layout (``KnnIds``).
KNN_IDS_VERSION = 1


@dataclass(frozen=True)
class KnnIds:
    """Compact k-nearest table: row ``i`` is ``ids[i]`` (int32, the ``k`` nearest words sorted by
    exact distance, then id) and ``bound[i]`` (every word not in the row is at distance
    ≥ ``bound[i]``; ``inf``: none left). No distances are stored — a sampler recomputes the exact
    float64 distances of the rows it uses — so the table is 4 bytes per entry instead of 12, and
    loaded from disk it is memory-mapped (pages read on use, shared between processes).

    Built by :func:`build_knn_ids`, which is resumable: a killed build continues from its last
    completed block of rows.
    """

    ids: np.ndarray
    bound: np.ndarray
    param: float
    metric: str
    n_vocab: int
    fingerprint: str = ""

    kind = "knn"

    @property
    def n_rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def k(self) -> int:
        return int(self.ids.shape[1])

    @property
    def nnz(self) -> int:
        return int(self.ids.size)

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.bound.nbytes)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> KnnIds:
        """Open a table written by :func:`build_knn_ids` (``ids`` memory-mapped read-only);
        ``ValueError`` when the folder is incomplete or inconsistent."""
        directory = Path(directory)
        meta = _read_meta(directory)
        if meta is None or not meta.get("complete"):
            raise ValueError(f"{directory}: not a complete deniable k-nearest table of version {KNN_IDS_VERSION}")
        ids = np.load(directory / "ids.npy", mmap_mode="r", allow_pickle=False)
        bound = np.load(directory / "bound.npy", allow_pickle=False)
        n, k, V = int(meta["n_rows"]), int(meta["k"]), int(meta["n_vocab"])
        if ids.shape != (n, k) or ids.dtype != np.int32 or bound.shape != (n,) or bound.dtype != np.float64:
            raise ValueError(f"{directory}: arrays do not match the table's metadata (corrupt cache?)")
        step = 1 << 20
        for s in range(0, n, max(1, step // max(1, k))):  # ids in range, a chunk at a time
            blk = ids[s : s + max(1, step // max(1, k))]
            if blk.size and (int(blk.min()) < 0 or int(blk.max()) >= V):
                raise ValueError(f"{directory}: word ids out of range (corrupt cache?)")
        return cls(ids=ids, bound=bound, param=float(meta["param"]), metric=str(meta["metric"]), n_vocab=V, fingerprint=str(meta["fingerprint"]))


def _read_meta(directory: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != "deniable-knn-ids" or meta.get("version") != KNN_IDS_VERSION:
        return None
    return meta


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    with atomic_binary(path) as f:
        f.write(json.dumps(obj, sort_keys=True).encode("utf-8"))


def build_knn_ids(
    queries: Any,
    vectors: np.ndarray,
    k: int,
    metric: str | Callable[..., np.ndarray] = "euclidean",
    *,
    directory: str | os.PathLike[str] | None = None,
    memory_bytes: int = _DEFAULT_MEMORY,
    progress: bool | None = False,
    fingerprint: str = "",
    rebuild: bool = False,
    checkpoint_seconds: float = 2.0,
) -> KnnIds:
    """The ``k`` nearest rows of ``vectors`` for every row of ``queries``, as a compact
    :class:`KnnIds` (ids and bounds; the same rows and bounds as :func:`knn_neighborhoods`).

    With ``directory`` the table is written there, resumably: rows go into memory-mapped
    ``.npy`` files in ``<directory>.partial/``, and after a block of rows is flushed to disk
    (at most every ``checkpoint_seconds``) the count of finished rows is recorded atomically. A
    build that is killed — any signal, power loss after the flush — continues from that count
    when called again with the same inputs (same row count, k, vocabulary size, metric and
    ``fingerprint``; anything else starts over). The finished folder is renamed to
    ``directory`` in one step, so ``directory`` only ever holds a complete table.
    ``rebuild=True`` discards a partial build and an existing table.
    """
    queries, n, V, kk, kernel = _knn_setup(queries, vectors, k, metric, memory_bytes)
    meta = {
        "format": "deniable-knn-ids",
        "version": KNN_IDS_VERSION,
        "n_rows": n,
        "k": kk,
        "param": float(k),
        "n_vocab": V,
        "metric": metric_name(metric),
        "fingerprint": fingerprint,
    }
    done = 0
    partial: Path | None = None
    if directory is None:
        ids = np.empty((n, kk), dtype=np.int32)
        bound = np.empty(n, dtype=np.float64)
    else:
        directory = Path(directory)
        partial = directory.with_name(directory.name + ".partial")
        old = _read_meta(partial) if partial.is_dir() and not rebuild else None
        same = old is not None and all(old.get(key) == meta[key] for key in ("n_rows", "k", "n_vocab", "metric", "fingerprint"))
        opened: tuple[np.ndarray, np.ndarray] | None = None
        if same:
            try:
                done = int((partial / "done").read_text(encoding="ascii"))
                opened = (
                    np.load(partial / "ids.npy", mmap_mode="r+", allow_pickle=False),
                    np.load(partial / "bound.npy", mmap_mode="r+", allow_pickle=False),
                )
                if opened[0].shape != (n, kk) or opened[1].shape != (n,) or not 0 <= done <= n:
                    raise ValueError("shape")
            except (OSError, ValueError):
                done, opened = 0, None
        if opened is None:
            if partial.exists():
                shutil.rmtree(partial)
            partial.mkdir(parents=True)
            ids = np.lib.format.open_memmap(partial / "ids.npy", mode="w+", dtype=np.int32, shape=(n, kk))
            bound = np.lib.format.open_memmap(partial / "bound.npy", mode="w+", dtype=np.float64, shape=(n,))
            _write_json(partial / "meta.json", meta)
            (partial / "done").write_text("0", encoding="ascii")
        else:
            ids, bound = opened
            if done:
                logging.getLogger("deniable").info("resuming the k-nearest table in %s at row %d of %d", partial, done, n)
                if progress is not False:
                    print(f"note: resuming the k-nearest table in {partial} at row {done} of {n}", file=sys.stderr, flush=True)

    def checkpoint(rows: int, arrays: tuple[Any, ...]) -> None:
        assert partial is not None
        for a in arrays:  # the rows are on disk before the count that says so
            a.flush()
        with atomic_binary(partial / "done") as f:
            f.write(str(rows).encode("ascii"))

    bar = _progress(n, progress, f"{kk}-nearest neighbours ({metric_name(metric)})")
    if bar is not None and done:
        bar.update(done)
    last = time.monotonic()
    try:
        for s in range(done, n, kernel.step):
            e = min(n, s + kernel.step)
            bi, _, bb = kernel.block(queries[s:e])
            ids[s:e] = bi
            bound[s:e] = bb
            if partial is not None and (e == n or time.monotonic() - last >= checkpoint_seconds):
                checkpoint(e, (ids, bound))
                last = time.monotonic()
            if bar is not None:
                bar.update(e - s)
    finally:
        if bar is not None:
            bar.close()
    if directory is None:
        return KnnIds(ids=ids, bound=bound, param=float(k), metric=metric_name(metric), n_vocab=V, fingerprint=fingerprint)
    assert partial is not None
    _write_json(partial / "meta.json", {**meta, "complete": True})
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(partial, directory)
    return KnnIds.load(directory)


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
