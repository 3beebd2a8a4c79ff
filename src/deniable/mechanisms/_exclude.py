"""Excluded outputs: words removed from a mechanism's output set (``exclude_outputs=``).

A mechanism built with ``exclude_outputs`` never outputs the listed words; every input is still
accepted (an excluded word given as input is privatized like any other). The list is fixed
before any data is seen, so each mechanism keeps its guarantee over the smaller output set; the
per-mechanism derivations are in docs/explanation/excluded_outputs.md.

How a list is read (:func:`resolve_exclusion`):

* ``None`` or an empty list: nothing is excluded (the mechanism is unchanged, same samples);
* a name of a shipped list (:data:`deniable.text.wordlists.WORD_LISTS`, e.g. ``"profanity"``);
* a path (``str`` or ``os.PathLike``) to a UTF-8 file, one word per line, ``#`` comments;
* an iterable of words.

Words are matched as the text path looks words up, ignoring case: a listed word excludes every
vocabulary entry equal to it after NFC normalization and lower-casing (``"Damn"`` and ``"DAMN"``
too, in a cased vocabulary), because outputs take the input's case pattern. Listed words that are
not in the vocabulary are ignored: for a user's list a :class:`~deniable.errors.DeniableWarning`
gives their count (a shipped list is written for any vocabulary, so its misses are silent).
Excluding every vocabulary word is an error.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DeniableWarning
from ..text.tokenize import lookup_key
from ..text.wordlists import WORD_LISTS, word_list

__all__ = ["Exclusion", "read_exclusion_words", "resolve_exclusion"]


@dataclass(frozen=True)
class Exclusion:
    """The output words a mechanism may not return: ``excluded`` and ``allowed`` (sorted
    vocabulary ids, disjoint, together the whole vocabulary), ``mask`` (``(V,)`` bool, True for an
    allowed output), ``spec`` (what rebuilds the same exclusion: a shipped list's name or the
    sorted excluded words), ``n_listed`` and ``n_unknown`` (listed words not in the vocabulary)."""

    excluded: np.ndarray
    allowed: np.ndarray
    mask: np.ndarray
    spec: Any
    n_listed: int
    n_unknown: int

    @property
    def digest(self) -> str:
        """12 hex digits identifying the excluded set (cache keys, ``repr``)."""
        return hashlib.sha256(self.excluded.astype(np.int64).tobytes()).hexdigest()[:12]

    def describe(self) -> str:
        """What ``params`` and the guarantee say about the exclusion."""
        name = f"{self.spec!r} list" if isinstance(self.spec, str) else "given list"
        return f"{self.excluded.size} words excluded from the outputs ({name}) [{self.digest}]"


def read_exclusion_words(spec: Any) -> tuple[tuple[str, ...], str | None]:
    """``(words, name)`` of an ``exclude_outputs`` value: a shipped list by name (``name`` set), a
    file (one word per line, ``#`` comments), or an iterable of words (``name`` None).
    Raises ``ValueError`` / ``TypeError`` naming the accepted forms."""
    if isinstance(spec, str) and spec in WORD_LISTS:
        return word_list(spec), spec
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        if not path.is_file():
            raise ValueError(
                f"exclude_outputs={str(spec)!r} is neither a shipped list ({', '.join(sorted(WORD_LISTS))}) nor a file; "
                "pass a list name, a path to a file with one word per line, or a list of words (e.g. ['word'])"
            )
        text = path.read_text(encoding="utf-8")
        return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), None
    if isinstance(spec, (bytes, bytearray)) or not isinstance(spec, Iterable):
        raise TypeError(f"exclude_outputs must be None, a list name, a path or a list of words, got {type(spec).__name__}")
    words = tuple(spec)
    for w in words:
        if not isinstance(w, str):
            raise TypeError(f"exclude_outputs words must be strings, got {type(w).__name__}")
    return words, None


def resolve_exclusion(vocabulary: Any, spec: Any, *, stacklevel: int = 3) -> Exclusion | None:
    """The :class:`Exclusion` of ``spec`` (see the module docs) on ``vocabulary``; None when
    nothing is excluded (``spec`` None, empty, or no listed word in the vocabulary)."""
    if spec is None:
        return None
    words, name = read_exclusion_words(spec)
    keys = {lookup_key(w.strip(), lower=True) for w in words if w.strip()}
    vocab_words = vocabulary.words
    hit = np.fromiter((lookup_key(w, lower=True) in keys for w in vocab_words), dtype=bool, count=len(vocab_words))
    found = {lookup_key(w, lower=True) for w, h in zip(vocab_words, hit) if h}
    n_unknown = len(keys - found)
    if n_unknown and name is None:
        missing = sorted(keys - found)
        warnings.warn(
            f"exclude_outputs: {n_unknown} of the {len(keys)} listed words are not in the vocabulary and are ignored "
            f"(first: {', '.join(repr(w) for w in missing[:3])}); they can never be an output anyway",
            DeniableWarning,
            stacklevel=stacklevel,
        )
    if not hit.any():
        return None
    if hit.all():
        raise ValueError(
            f"exclude_outputs removes all {hit.size} vocabulary words, so the mechanism would have no output; exclude fewer words"
        )
    excluded = np.flatnonzero(hit).astype(np.int64)
    allowed = np.flatnonzero(~hit).astype(np.int64)
    for a in (excluded, allowed, hit):
        a.flags.writeable = False
    spec_out: Any = name if name is not None else tuple(sorted({vocab_words[i] for i in excluded}))
    return Exclusion(excluded, allowed, ~hit, spec_out, len(keys), n_unknown)


class TargetSubset:
    """The vectors of the allowed words without copying: ``TargetSubset(vectors, allowed)[i]`` is
    ``vectors[allowed[i]]``; ``shape`` is ``(len(allowed), dim)`` (the targets of an exponential
    sampler restricted to the allowed outputs)."""

    def __init__(self, vectors: np.ndarray, allowed: np.ndarray) -> None:
        self.vectors = vectors
        self.allowed = np.asarray(allowed, dtype=np.int64)
        self.shape = (int(self.allowed.size), int(vectors.shape[1]))

    def __getitem__(self, idx: Any) -> np.ndarray:
        return np.asarray(self.vectors[self.allowed[np.asarray(idx, dtype=np.int64)]])


def restrict_neighborhoods(nb: Any, ex: Exclusion) -> Any:
    """A neighbourhood table over the allowed words only: ``nb``'s rows (the same query points)
    without the excluded targets, each target renumbered by its position in ``ex.allowed``.

    Each row stays sorted by (distance, id) (positions keep the ids' order) and its bound stays
    valid: every allowed word not in the row was already absent from ``nb``'s row, so it lies at
    distance ≥ the bound."""
    from ..neighbors.neighborhoods import Neighborhoods

    pos = np.full(ex.mask.size, -1, dtype=np.int64)
    pos[ex.allowed] = np.arange(ex.allowed.size)
    new = pos[nb.indices]
    keep = new >= 0
    sizes = np.diff(nb.indptr)
    row_of = np.repeat(np.arange(nb.n_rows), sizes)
    indptr = np.zeros(nb.n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of[keep], minlength=nb.n_rows), out=indptr[1:])
    return Neighborhoods(
        indptr=indptr, indices=new[keep].astype(np.int32), distances=nb.distances[keep], bound=nb.bound,
        kind=nb.kind, param=nb.param, metric=nb.metric, n_vocab=int(ex.allowed.size), fingerprint=nb.fingerprint,
    )


def restrict_rows(ids: np.ndarray, d: np.ndarray, ex: Exclusion) -> tuple[np.ndarray, np.ndarray]:
    """Dense k-nearest rows (``ids`` ``(R, K)`` vocabulary ids, ``d`` their distances) over the
    allowed words: ids renumbered by position in ``ex.allowed``; an excluded entry becomes
    position 0 at distance ``inf`` (zero weight in
    :meth:`~deniable.mechanisms._exponential.SamplingTables.from_rows`, never drawn)."""
    pos = np.full(ex.mask.size, -1, dtype=np.int64)
    pos[ex.allowed] = np.arange(ex.allowed.size)
    new = pos[ids]
    return np.maximum(new, 0), np.where(new >= 0, d, np.inf)


def allowed_embedding(embedding: Any, ex: Exclusion) -> Any:
    """The embedding of the allowed words only (same order, vectors copied): what CusText's output
    sets and 1-Diffractor's word lists are built over when outputs are excluded. Its id i is the
    vocabulary id ``ex.allowed[i]``; its fingerprint differs, so caches keyed by it stay apart."""
    from ..embeddings.embedding import Embedding

    words = embedding.words
    return Embedding([words[i] for i in ex.allowed], np.asarray(embedding.vectors[ex.allowed]), source=getattr(embedding, "source", None))


def nearest_allowed(vectors: np.ndarray, queries: np.ndarray, ex: Exclusion, metric: Any) -> np.ndarray:
    """Vocabulary id of the allowed word nearest each row of ``queries`` (ties to the lowest id),
    with the metric ``metric`` on ``vectors``: where an excluded input (like UNK) is placed."""
    from ..metrics import pairwise_distances

    d = pairwise_distances(np.atleast_2d(queries), vectors[ex.allowed], metric)
    return ex.allowed[np.argmin(d, axis=1)]
