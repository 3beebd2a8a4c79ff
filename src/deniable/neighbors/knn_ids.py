"""Compact, resumable k-nearest tables (:class:`KnnIds`: ids and bounds only, memory-mapped)
and their builder :func:`build_knn_ids`; see :mod:`deniable.neighbors.neighborhoods`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_binary
from .._progress import progress_bar
from ..metrics import metric_name
from .builders import _knn_setup
from .table import _DEFAULT_MEMORY

__all__ = ["KNN_IDS_VERSION", "KnnIds", "build_knn_ids"]


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
        return len(self.ids)

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


def _open_partial(partial: Path, meta: dict[str, Any], *, rebuild: bool, progress: bool | None) -> tuple[np.ndarray, np.ndarray, int]:
    """The memory-mapped ``(ids, bound)`` of the build in ``partial`` and its count of finished
    rows: the earlier build's, when it was made from the same inputs (``meta``), else new empty
    files (the folder is started over)."""
    n, kk = int(meta["n_rows"]), int(meta["k"])
    old = _read_meta(partial) if partial.is_dir() and not rebuild else None
    if old is not None and all(old.get(key) == meta[key] for key in ("n_rows", "k", "n_vocab", "metric", "fingerprint")):
        try:
            done = int((partial / "done").read_text(encoding="ascii"))
            ids = np.load(partial / "ids.npy", mmap_mode="r+", allow_pickle=False)
            bound = np.load(partial / "bound.npy", mmap_mode="r+", allow_pickle=False)
            if ids.shape != (n, kk) or bound.shape != (n,) or not 0 <= done <= n:
                raise ValueError("shape")
        except (OSError, ValueError):
            pass
        else:
            if done:
                logging.getLogger("deniable").info("resuming the k-nearest table in %s at row %d of %d", partial, done, n)
                if progress is not False:
                    print(f"note: resuming the k-nearest table in {partial} at row {done} of {n}", file=sys.stderr, flush=True)
            return ids, bound, done
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    ids = np.lib.format.open_memmap(partial / "ids.npy", mode="w+", dtype=np.int32, shape=(n, kk))
    bound = np.lib.format.open_memmap(partial / "bound.npy", mode="w+", dtype=np.float64, shape=(n,))
    _write_json(partial / "meta.json", meta)
    (partial / "done").write_text("0", encoding="ascii")
    return ids, bound, 0


def build_knn_ids(
    queries: Any, vectors: np.ndarray, k: int, metric: str | Callable[..., np.ndarray] = "euclidean", *,
    directory: str | os.PathLike[str] | None = None, memory_bytes: int = _DEFAULT_MEMORY, progress: bool | None = False,
    fingerprint: str = "", rebuild: bool = False, checkpoint_seconds: float = 2.0,
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
        ids, bound, done = _open_partial(partial, meta, rebuild=rebuild, progress=progress)

    def checkpoint(rows: int, arrays: tuple[Any, ...]) -> None:
        assert partial is not None
        for a in arrays:  # the rows are on disk before the count that says so
            a.flush()
        with atomic_binary(partial / "done") as f:
            f.write(str(rows).encode("ascii"))

    bar = progress_bar(n, f"{kk}-nearest neighbours ({metric_name(metric)})", progress)
    if done:
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
            bar.update(e - s)
    finally:
        bar.close()
    if directory is None:
        return KnnIds(ids=ids, bound=bound, param=float(k), metric=metric_name(metric), n_vocab=V, fingerprint=fingerprint)
    assert partial is not None
    _write_json(partial / "meta.json", {**meta, "complete": True})
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(partial, directory)
    return KnnIds.load(directory)
