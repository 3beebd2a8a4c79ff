"""Ship a mechanism to worker processes once, as files they memory-map, never per task.

A mechanism over the bundled embedding holds about 82 MB (words, vectors and the search index).
Sent by value, Spark tasks, ``datasets.map`` workers and ``multiprocessing`` pools receive that
with every task; sent by reference (an embedding loaded from a file pickles as its path and
fingerprint), a worker on another machine needs the same file and rebuilds the index.
:func:`pack` writes the object once to a folder instead: each embedding as its words (JSON) and
vectors (``.npy``), every other numpy array of at least ``min_array_bytes`` (the search index,
TEM's tables) as its own ``.npy`` file, and a small pickle for the rest. A worker calls
:meth:`Shipment.load`, which unpickles once per process (a module-level cache keyed by the content
digest), memory-maps the arrays copy-on-write (the worker processes of one machine share the
page cache) and checks each embedding against its fingerprint.

What crosses to each task is the :class:`Shipment` itself: a digest and a few file names.
Spark distributes the files once per executor (``SparkContext.addFile``); local worker pools read
them where :func:`pack` wrote them.

The files contain a pickle: load only shipments you made (as with any Spark closure).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import io
import os
import pickle
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Shipment", "pack", "shipment_for"]

_PROTOCOL = 5
_LOADED: OrderedDict[str, Any] = OrderedDict()  # digest -> object, the few most recent
_KEEP = 4
_LOCK = threading.Lock()
_WORKDIR: Path | None = None


@dataclass(frozen=True)
class Shipment:
    """A packed object: ``files`` (the pickle first, then the arrays) under ``directory``.

    Pickling a Shipment costs a few hundred bytes; :meth:`load` gives the object back.
    """

    digest: str
    files: tuple[str, ...]
    directory: str
    nbytes: int

    @property
    def paths(self) -> list[str]:
        """Absolute paths of the files on the machine that packed them."""
        return [os.path.join(self.directory, f) for f in self.files]

    def load(self, resolve: Callable[[str], str] | None = None) -> Any:
        """The shipped object, unpickled once per process.

        ``resolve(file_name) -> local path`` finds the files on a worker (for Spark,
        ``pyspark.SparkFiles.get``); by default they are read from :attr:`directory`.
        """
        with _LOCK:
            obj = _LOADED.get(self.digest)
            if obj is None:
                where = resolve or (lambda name: os.path.join(self.directory, name))
                obj = _unpack([where(f) for f in self.files], self.digest)
            _remember(self.digest, obj)
        return obj


def _remember(digest: str, obj: Any) -> None:
    _LOADED[digest] = obj
    _LOADED.move_to_end(digest)
    while len(_LOADED) > _KEEP:
        _LOADED.popitem(last=False)


def _new_instance(cls: type) -> Any:
    return object.__new__(cls)


class _Pickler(pickle.Pickler):
    """Externalizes embeddings (words as JSON, vectors as ``.npy``) and large arrays; with
    ``by_state``, pickles mechanisms by their attributes (search index, TEM tables included) so
    workers map them instead of rebuilding them."""

    def __init__(self, file: io.BytesIO, min_bytes: int, by_state: bool) -> None:
        super().__init__(file, protocol=_PROTOCOL)
        self.min_bytes = min_bytes
        self.by_state = by_state
        self.arrays: list[np.ndarray] = []
        self.embeddings: list[Any] = []
        self._seen: dict[int, tuple[str, int]] = {}
        self._vectors_of: dict[tuple[Any, ...], int] = {}
        from ..embeddings.embedding import Embedding
        from ..mechanisms.base import Mechanism

        self._embedding_type = Embedding
        self._mechanism_type = Mechanism

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is self._embedding_type:
            ref = self._seen.get(id(obj))
            if ref is None:
                ref = self._seen[id(obj)] = ("deniable-embedding", len(self.embeddings))
                self._vectors_of[_memory_key(obj.vectors)] = len(self.embeddings)
                self.embeddings.append(obj)
            return (*ref, obj.fingerprint)
        if isinstance(obj, np.ndarray) and not obj.dtype.hasobject and obj.nbytes >= self.min_bytes:
            same = self._vectors_of.get(_memory_key(obj))
            if same is not None:  # the vectors of a shipped embedding (e.g. kept by a search index)
                return ("deniable-vectors", same, bool(obj.flags.writeable))
            ref = self._seen.get(id(obj))
            if ref is None:
                ref = self._seen[id(obj)] = ("deniable-array", len(self.arrays))
                self.arrays.append(obj)
            return (*ref, bool(obj.flags.writeable))
        return None

    def reducer_override(self, obj: Any) -> Any:
        if self.by_state and isinstance(obj, self._mechanism_type) and hasattr(obj, "__dict__"):
            return (_new_instance, (type(obj),), dict(obj.__dict__))
        return NotImplemented


def _memory_key(a: np.ndarray) -> tuple[Any, ...]:
    return (a.__array_interface__["data"][0], a.shape, a.dtype.str, a.strides)


def _map(path: str, writeable: bool) -> np.ndarray:
    # copy-on-write map: pages are shared between processes until one writes
    arr = np.load(path, mmap_mode="c", allow_pickle=False).view(np.ndarray)
    if not writeable:
        arr.setflags(write=False)
    return arr


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BufferedReader, paths: dict[str, str], digest: str) -> None:
        super().__init__(file)
        self.paths = paths
        self.digest = digest
        self.cache: dict[tuple[str, int], Any] = {}

    def persistent_load(self, pid: Any) -> Any:
        tag, k, extra = pid
        obj = self.cache.get((tag, k))
        if obj is not None:
            return obj
        if tag == "deniable-array":
            obj = _map(self.paths[f"deniable-{self.digest}-{k}.npy"], extra)
        elif tag == "deniable-vectors":
            obj = _map(self.paths[f"deniable-{self.digest}-e{k}.npy"], extra)
        elif tag == "deniable-embedding":
            import json

            from ..embeddings.embedding import Embedding
            from ..errors import DataError

            with open(self.paths[f"deniable-{self.digest}-e{k}.json"], "rb") as f:
                meta = json.loads(f.read().decode("utf-8", "surrogatepass"))
            obj = Embedding(meta["words"], _map(self.paths[f"deniable-{self.digest}-e{k}.npy"], False), source=meta["source"])
            if obj.fingerprint != extra:
                raise DataError(f"the shipped embedding is damaged (fingerprint {obj.fingerprint}, expected {extra})", path=self.paths[f"deniable-{self.digest}-e{k}.npy"])
        else:
            raise pickle.UnpicklingError(f"unknown persistent id {tag!r}")
        self.cache[(tag, k)] = obj
        return obj


def _unpack(paths: list[str], digest: str) -> Any:
    by_name = {os.path.basename(p): p for p in paths}
    with open(paths[0], "rb") as f:
        return _Unpickler(f, by_name, digest).load()


def _workdir() -> Path:
    global _WORKDIR
    if _WORKDIR is None or not _WORKDIR.is_dir():
        _WORKDIR = Path(tempfile.mkdtemp(prefix="deniable-ship-"))
        atexit.register(shutil.rmtree, _WORKDIR, True)
    return _WORKDIR


def _write_npy(array: np.ndarray, f: Any) -> None:
    np.save(f, array, allow_pickle=False)


def _write_vectors(embedding: Any, f: Any) -> None:
    np.save(f, np.ascontiguousarray(embedding.vectors, dtype="<f4"), allow_pickle=False)


def _write_bytes(data: bytes, f: Any) -> None:
    f.write(data)


def pack(obj: Any, directory: str | os.PathLike[str] | None = None, *, min_array_bytes: int = 1 << 20) -> Shipment:
    """Write ``obj`` to ``directory`` (default: a temporary folder removed at exit) as a small
    pickle plus files for its embeddings (words JSON, vectors ``.npy``) and large arrays; returns
    the :class:`Shipment` to send.

    Mechanisms are pickled by their attributes, so workers memory-map the search index (and
    TEM's tables) instead of rebuilding them; objects that cannot be pickled that way (an index
    holding a native library object) fall back to their own pickling. File names carry the
    content digest, so packing the same object twice reuses the files.
    """
    import json

    for by_state in (True, False):
        buf = io.BytesIO()
        p = _Pickler(buf, min_array_bytes, by_state)
        try:
            p.dump(obj)
            break
        except (TypeError, AttributeError, pickle.PicklingError):
            if not by_state:
                raise
    payload = buf.getvalue()
    h = hashlib.blake2b(digest_size=12)
    h.update(payload)
    for a in p.arrays:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).data)
    for e in p.embeddings:
        h.update(e.fingerprint.encode())
    digest = h.hexdigest()
    folder = Path(directory) if directory is not None else _workdir()
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[tuple[str, Callable[[Any], Any], int]] = []
    for i, a in enumerate(p.arrays):
        parts.append((f"deniable-{digest}-{i}.npy", functools.partial(_write_npy, a), a.nbytes))
    for j, e in enumerate(p.embeddings):
        meta = json.dumps({"words": e.words, "source": e.source}, ensure_ascii=False).encode("utf-8", "surrogatepass")
        parts.append((f"deniable-{digest}-e{j}.json", functools.partial(_write_bytes, meta), len(meta)))
        parts.append((f"deniable-{digest}-e{j}.npy", functools.partial(_write_vectors, e), e.vectors.nbytes))
    parts.insert(0, (f"deniable-{digest}.pkl", functools.partial(_write_bytes, payload), len(payload)))
    for name, write, _ in parts[1:] + parts[:1]:  # the pickle last: its presence means complete
        target = folder / name
        if not target.exists():
            _atomic_write(target, write)
    return Shipment(digest, tuple(name for name, _, _ in parts), str(folder), sum(n for _, _, n in parts))


def _atomic_write(target: Path, write: Callable[[Any], Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_PACKED: weakref.WeakKeyDictionary[Any, Shipment] = weakref.WeakKeyDictionary()


def shipment_for(obj: Any) -> Shipment:
    """:func:`pack` ``obj`` into the process's temporary folder, once per object (cached weakly).

    The caller must not modify ``obj`` afterwards (the shipment would not follow)."""
    try:
        ship = _PACKED.get(obj)
    except TypeError:  # not weak-referenceable
        return pack(obj)
    if ship is None or not all(os.path.exists(p) for p in ship.paths):
        ship = pack(obj)
        _PACKED[obj] = ship
        # the object is already in this process: loading the shipment here must not copy it
        with _LOCK:
            _remember(ship.digest, obj)
    return ship
