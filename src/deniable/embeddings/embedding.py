"""The :class:`Embedding` type: a vocabulary and its float32 vectors."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Sequence
from functools import cached_property

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

    @cached_property
    def uncased(self) -> bool:
        """True when every word equals its lower-case form (lookups then lower-case the input)."""
        return all(w == w.lower() for w in self._words)


class Embedding(Vocabulary):
    """A word embedding: ``words[i]`` has vector ``vectors[i]``.

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
        finite = np.isfinite(vectors).all(axis=1)
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
        h = hashlib.sha256()
        h.update(f"{len(self)}x{self.dim}\n".encode())
        h.update("\n".join(self._words).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
        h.update(np.ascontiguousarray(self._vectors, dtype="<f4").tobytes())
        return h.hexdigest()[:16]

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
            return Embedding(self._words[:n], self._vectors[:n], source=self.source)
        ids = [self.id_of(w) for w in words]  # type: ignore[union-attr]
        if not ids:
            raise ValueError("restrict(words=...) got no words")
        return Embedding([self._words[i] for i in ids], self._vectors[ids], source=self.source)
