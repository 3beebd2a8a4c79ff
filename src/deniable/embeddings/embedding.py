"""The :class:`Embedding` type: a vocabulary and its float32 vectors."""

from __future__ import annotations

import hashlib
import json
import warnings
import weakref
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, DeniableWarning

__all__ = ["Embedding", "Vocabulary", "UNK_ID"]

#: Id that stands for "out of vocabulary" in id arrays handed to mechanisms.
UNK_ID = -1


class Vocabulary:
    """Word <-> id lookup shared by :class:`Embedding` and
    :class:`~deniable.binary.BinaryEmbedding` (what :mod:`deniable.text` and mechanisms use).
    Subclasses set ``_words`` (list) and ``_index`` (word -> first id)."""

    _words: list[str]
    _index: dict[str, int]

    @property
    def words(self) -> list[str]:
        """The vocabulary (do not modify)."""
        return self._words

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def id_of(self, word: str) -> int:
        """Id of ``word``; raises ``KeyError`` if it is not in the vocabulary."""
        try:
            return self._index[word]
        except KeyError:
            raise KeyError(f"{word!r} is not in the vocabulary ({len(self)} words)") from None

    def ids_of(self, words: Iterable[str]) -> np.ndarray:
        """Ids of ``words`` as an int64 array, :data:`UNK_ID` (-1) for unknown words."""
        get = self._index.get
        return np.fromiter((get(w, UNK_ID) for w in words), dtype=np.int64)

    def _digest(self, header: str, *arrays: np.ndarray) -> str:
        """16 hex chars of SHA-256 over ``header``, the words (newline-separated, then a NUL) and
        the bytes of ``arrays`` (C-contiguous, in their own dtype): the fingerprint recipe."""
        h = hashlib.sha256()
        h.update(header.encode())
        h.update("\n".join(self._words).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
        for a in arrays:
            h.update(a.data)  # the buffer itself: no copy of the matrix
        return h.hexdigest()[:16]

    @cached_property
    def uncased(self) -> bool:
        """True when every word equals its lower-case form (lookups then lower-case the input)."""
        return all(w == w.lower() for w in self._words)


class Embedding(Vocabulary):
    """A word embedding: ``words[i]`` has vector ``vectors[i]``.

    **Pickling.** An embedding loaded by :func:`~deniable.load_embedding` (the bundled default or
    a file, with or without ``limit``) pickles *by reference*: its fingerprint and where it came
    from, a few hundred bytes instead of the vectors, so mechanisms can be sent to
    ``multiprocessing`` or ``datasets.map`` workers cheaply. Pickling also writes, once, a float32
    copy of the vectors to the cache folder (``$DENIABLE_CACHE_DIR`` or ``~/.cache/deniable``,
    ``embeddings/``) which unpickling memory-maps, so workers on one machine share one copy in
    the page cache; without it (another machine) the source is loaded again. Either way the
    result is checked against the fingerprint (a changed file raises
    :class:`~deniable.errors.DataError`). Embeddings built from arrays pickle by value.

    Parameters
    ----------
    words
        The vocabulary, in the embedding's order (usually by frequency). Duplicates keep their
        first occurrence and raise a :class:`~deniable.errors.DeniableWarning`.
    vectors
        Array of shape ``(len(words), dim)``; stored as C-contiguous float32. Every value must
        be finite.
    source
        Where it came from (a path or a description), for messages and reports.
    """

    def __init__(self, words: Sequence[str], vectors: np.ndarray, *, source: str | None = None) -> None:
        words = [w if isinstance(w, str) else str(w) for w in words]
        vectors = np.asarray(vectors)
        if vectors.ndim != 2:
            raise DataError(f"vectors must be a 2-D array (words x dimensions), got shape {vectors.shape}", path=source)
        if len(words) != vectors.shape[0]:
            raise DataError(f"{len(words)} words but {vectors.shape[0]} vectors", path=source)
        if len(words) == 0:
            raise DataError("the embedding is empty (no words)", path=source)
        if vectors.shape[1] == 0:
            raise DataError("the embedding has zero dimensions", path=source)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        finite = np.ones(vectors.shape[0], dtype=bool)
        step = max(1, (32 << 20) // max(1, vectors.shape[1]))  # bounded temporaries at any vocabulary size
        for s in range(0, vectors.shape[0], step):
            finite[s : s + step] = np.isfinite(vectors[s : s + step]).all(axis=1)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise DataError(
                f"{bad.size} vector(s) contain NaN or infinite values, first for word {words[bad[0]]!r} "
                f"(row {bad[0] + 1}); remove those rows or fix the file",
                path=source,
            )
        index: dict[str, int] = {}
        for i, w in enumerate(words):
            index.setdefault(w, i)
        if len(index) != len(words):
            keep = np.fromiter(sorted(index.values()), dtype=np.int64, count=len(index))
            dup = len(words) - len(index)
            first_dup = next(w for i, w in enumerate(words) if index[w] != i)
            warnings.warn(
                f"{source or 'embedding'}: {dup} duplicate word(s) (first: {first_dup!r}); kept the first occurrence of each",
                DeniableWarning,
                stacklevel=2,
            )
            words = [words[i] for i in keep]
            vectors = np.ascontiguousarray(vectors[keep])
            index = {w: i for i, w in enumerate(words)}
        self._words = words
        self._vectors = vectors
        self._vectors.setflags(write=False)
        self._index = index
        self.source = source

    #: Where :func:`~deniable.load_embedding` read it: ``(reload, path, format, limit)``, where
    #: ``reload(path, format, limit)`` (a module-level function of the loaders, pickled by name)
    #: reads it again and ``path`` is None for the bundled default; None for embeddings built
    #: from arrays.
    _origin: tuple[Any, ...] | None = None

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self._origin is None:
            return super().__reduce_ex__(protocol)
        fp = self.fingerprint
        _LOADED[fp] = self
        return (_from_reference, (self._origin, fp, _write_mmap_copy(self), self.source))

    # -- basic access --------------------------------------------------------------------
    @property
    def vectors(self) -> np.ndarray:
        """Read-only float32 array of shape ``(len(self), dim)``."""
        return self._vectors

    @property
    def dim(self) -> int:
        """Number of dimensions."""
        return int(self._vectors.shape[1])

    def __repr__(self) -> str:
        src = f", source={self.source!r}" if self.source else ""
        return f"Embedding({len(self)} words x {self.dim} dims, fingerprint={self.fingerprint}{src})"

    def vector(self, word: str) -> np.ndarray:
        """The vector of ``word`` (read-only view)."""
        return self._vectors[self.id_of(word)]

    @cached_property
    def mean(self) -> np.ndarray:
        """Mean vector of the vocabulary: the single point that stands for every unknown word."""
        m = self._vectors.mean(axis=0, dtype=np.float64).astype(np.float32)
        m.setflags(write=False)
        return m

    @cached_property
    def fingerprint(self) -> str:
        """Stable hash of words and vectors (hex, 16 chars), for cache keys and reports."""
        return self._digest(f"{len(self)}x{self.dim}\n", np.ascontiguousarray(self._vectors, dtype="<f4"))

    # -- derived embeddings ----------------------------------------------------------------
    def restrict(self, words: Iterable[str] | None = None, *, top_n: int | None = None) -> Embedding:
        """A smaller embedding: the given ``words`` (in that order; unknown ones raise
        ``KeyError``), or the first ``top_n`` words (the most frequent, in GloVe/word2vec files)."""
        if (words is None) == (top_n is None):
            raise TypeError("restrict() takes exactly one of words=... or top_n=...")
        if top_n is not None:
            if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 1:
                raise ValueError(f"top_n must be an integer >= 1, got {top_n!r}")
            n = min(int(top_n), len(self))
            out = Embedding(self._words[:n], self._vectors[:n], source=self.source)
            if self._origin is not None:
                limit = self._origin[-1]
                out._origin = (*self._origin[:-1], n if limit is None else min(limit, n))
            return out
        ids = [self.id_of(w) for w in words]  # type: ignore[union-attr]
        if not ids:
            raise ValueError("restrict(words=...) got no words")
        return Embedding([self._words[i] for i in ids], self._vectors[ids], source=self.source)


# -- pickling by reference -----------------------------------------------------------------------

#: Embeddings pickled or unpickled in this process, by fingerprint (forked workers inherit it).
_LOADED: weakref.WeakValueDictionary[str, Embedding] = weakref.WeakValueDictionary()


def _mmap_paths(fingerprint: str) -> tuple[Path, Path]:
    from .._files import cache_directory

    folder = cache_directory() / "embeddings"
    return folder / f"{fingerprint}.f32.npy", folder / f"{fingerprint}.words.json"


def _write_mmap_copy(emb: Embedding) -> str | None:
    """Write (once) the float32 vectors as ``.npy`` and the words as JSON to the cache folder;
    returns the ``.npy`` path, or None when the folder is not writable."""
    from .._files import atomic_binary

    npy, words = _mmap_paths(emb.fingerprint)
    try:
        if not (npy.is_file() and words.is_file()):
            npy.parent.mkdir(parents=True, exist_ok=True)
            with atomic_binary(words) as f:
                f.write(json.dumps(emb.words, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            with atomic_binary(npy) as f:
                np.save(f, np.ascontiguousarray(emb.vectors, dtype="<f4"), allow_pickle=False)
    except OSError:
        return None
    return str(npy)


def _from_reference(origin: tuple[Any, ...], fingerprint: str, npy: str | None, source: str | None) -> Embedding:
    """Unpickle an embedding pickled by reference (see :class:`Embedding`)."""
    emb = _LOADED.get(fingerprint)
    if emb is not None:
        return emb
    emb = None
    if npy is not None:
        path, words_path = Path(npy), Path(npy).with_name(f"{fingerprint}.words.json")
        try:
            words = json.loads(words_path.read_bytes().decode("utf-8", "surrogatepass"))
            vectors = np.load(path, mmap_mode="r", allow_pickle=False)
            emb = Embedding(words, vectors, source=source)
            if emb.fingerprint != fingerprint:
                emb = None  # a stale or damaged copy: load the source instead
        except (OSError, ValueError, DataError):
            emb = None
    if emb is None:
        reload, file, fmt, limit = origin
        emb = reload(file, fmt, limit)
        if emb.fingerprint != fingerprint:
            raise DataError(
                f"the embedding changed since it was pickled (fingerprint {emb.fingerprint}, expected {fingerprint}); "
                "pickle it again or restore the file",
                path=file,
            )
    emb.source = source
    emb._origin = origin
    _LOADED[fingerprint] = emb
    return emb
