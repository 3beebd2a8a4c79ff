"""From texts to n-gram counts: a public vocabulary and a sparse users x n-grams matrix.

Privacy rule (paper §3 and §4.1): the n-gram *vocabulary* is built from PUBLIC data only. Private
n-grams that are not in the public vocabulary are dropped while counting, so a release over this
vocabulary can never contain (and so never leaks the existence of) a private-only n-gram.

Tokenization: a text is split into sentences at ``. ! ?`` and line breaks, each sentence into
``\\w+`` words (lower-cased unless ``lowercase=False``); n-grams never cross a sentence boundary.
An n-gram key is its words joined by single spaces.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import check_int, check_positive

__all__ = [
    "sentences_words",
    "ngrams_of",
    "count_public",
    "NgramVocabulary",
    "build_vocabulary",
    "UserCounts",
    "count_users",
    "clamp_counts",
    "cap_user_totals",
    "users_per_ngram",
]

_SENT_RE = re.compile(r"[.!?\n]+")
_WORD_RE = re.compile(r"\w+")


def sentences_words(text: str, *, lowercase: bool = True) -> list[list[str]]:
    """Split ``text`` into sentences of ``\\w+`` words (empty sentences dropped)."""
    if lowercase:
        text = text.lower()
    out = []
    for sent in _SENT_RE.split(text):
        words = _WORD_RE.findall(sent)
        if words:
            out.append(words)
    return out


def ngrams_of(text: str, n: int, *, lowercase: bool = True) -> list[str]:
    """The n-gram keys of ``text`` (words joined by one space), in order, within sentences."""
    n = check_int("n", n, minimum=1)
    out: list[str] = []
    for words in sentences_words(text, lowercase=lowercase):
        out.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    return out


def count_public(texts: Iterable[str], n: int, *, lowercase: bool = True) -> Counter:
    """Counts of the n-grams of public ``texts`` (a :class:`collections.Counter`)."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(ngrams_of(text, n, lowercase=lowercase))
    return counts


@dataclass(frozen=True)
class NgramVocabulary:
    """A fixed n-gram vocabulary taken from public data, with the public counts ``alpha``.

    (Not :class:`deniable.embeddings.Vocabulary`, the word lookup of embeddings. ``Vocabulary`` is
    the deprecated old name of this class in :mod:`deniable.ngrams`: importing it warns.)

    ``keys[i]`` is the n-gram of column ``i``; ``public_counts[i]`` its public count (the prior
    ``alpha`` of Equation 1).
    """

    keys: tuple[str, ...]
    public_counts: np.ndarray
    n: int
    lowercase: bool = True
    _index: dict = field(default_factory=dict, repr=False, compare=False)  # built in __post_init__

    def __post_init__(self) -> None:
        alpha = np.asarray(self.public_counts, dtype=np.float64)
        if alpha.shape != (len(self.keys),):
            raise ValueError(f"public_counts must have shape ({len(self.keys)},), got {alpha.shape}")
        if not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
            raise ValueError("public_counts must be finite and >= 0")
        alpha.setflags(write=False)
        object.__setattr__(self, "public_counts", alpha)
        index = {k: i for i, k in enumerate(self.keys)}
        if len(index) != len(self.keys):
            raise ValueError("vocabulary keys must be unique")
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, key: str) -> int:
        """Column of ``key`` (KeyError if absent)."""
        return self._index[key]

    def get(self, key: str, default: int = -1) -> int:
        return self._index.get(key, default)


def build_vocabulary(
    public_counts: Mapping[str, float],
    *,
    n: int,
    max_size: int | None = None,
    min_count: float = 1,
    lowercase: bool = True,
) -> NgramVocabulary:
    """The vocabulary of the ``max_size`` most frequent PUBLIC n-grams with count >= ``min_count``.

    Ties are broken by key so the result is deterministic. Only public data enters here.
    """
    n = check_int("n", n, minimum=1)
    if max_size is not None:
        max_size = check_int("max_size", max_size, minimum=1)
    items = [(k, float(v)) for k, v in public_counts.items() if v >= min_count and len(k.split(" ")) == n]
    items.sort(key=lambda kv: (-kv[1], kv[0]))
    if max_size is not None:
        items = items[:max_size]
    if not items:
        raise ValueError("the public vocabulary is empty (no public n-gram passes min_count)")
    keys = tuple(k for k, _ in items)
    return NgramVocabulary(keys, np.array([v for _, v in items]), n=n, lowercase=lowercase)


@dataclass(frozen=True)
class UserCounts:
    """Per-user n-gram counts over a public vocabulary.

    ``matrix`` is a ``scipy.sparse.csr_array``-like CSR matrix of shape (users, |V|) with int32
    indices; row ``u`` holds the counts of user ``user_ids[u]``; column ``i`` is ``keys[i]``.
    ``dropped`` is the number of private n-gram occurrences that were not in the public vocabulary
    (they are discarded, never released).
    """

    matrix: sp.csr_matrix
    keys: tuple[str, ...]
    user_ids: tuple = ()
    dropped: int = 0

    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    def __len__(self) -> int:
        return self.matrix.shape[0]

    def subset(self, rows: np.ndarray) -> UserCounts:
        """The users at ``rows`` (an index array)."""
        rows = np.asarray(rows, dtype=np.int64)
        ids = tuple(self.user_ids[i] for i in rows) if self.user_ids else ()
        return UserCounts(self.matrix[rows], self.keys, ids, 0)


def count_users(
    records: Iterable[tuple[object, str]],
    vocabulary: NgramVocabulary,
    *,
    progress: object | None = None,
) -> UserCounts:
    """Count each user's n-grams over the PUBLIC ``vocabulary``.

    ``records`` yields ``(user_id, text)``; a user may appear in many records (posts). N-grams
    outside the vocabulary are dropped (counted in ``UserCounts.dropped``) so private-only n-grams
    never reach a release. ``progress`` is an optional tqdm-like object updated per record.
    """
    n = vocabulary.n
    user_row: dict[object, int] = {}
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    dropped = 0
    get = vocabulary._index.get
    for user, text in records:
        r = user_row.setdefault(user, len(user_row))
        ids = [get(g, -1) for g in ngrams_of(text, n, lowercase=vocabulary.lowercase)]
        if ids:
            a = np.fromiter(ids, dtype=np.int32, count=len(ids))
            keep = a >= 0
            dropped += int(a.size - keep.sum())
            a = a[keep]
            if a.size:
                cols.append(a)
                rows.append(np.full(a.size, r, dtype=np.int32))
        if progress is not None:
            progress.update(1)  # type: ignore[attr-defined]
    n_users = len(user_row)
    if cols:
        r_all = np.concatenate(rows)
        c_all = np.concatenate(cols)
    else:
        r_all = c_all = np.zeros(0, dtype=np.int32)
    data = np.ones(r_all.size, dtype=np.int32)
    m = sp.csr_matrix((data, (r_all, c_all)), shape=(n_users, len(vocabulary)), dtype=np.int32)
    m.sum_duplicates()
    m.indices = m.indices.astype(np.int32, copy=False)
    return UserCounts(m, vocabulary.keys, tuple(user_row), dropped)


def _as_csr(matrix: object) -> sp.csr_matrix:
    """A canonical CSR matrix of non-negative finite counts (no copy when already one)."""
    if isinstance(matrix, UserCounts):
        matrix = matrix.matrix
    if not sp.issparse(matrix):
        matrix = sp.csr_matrix(np.asarray(matrix))
    m = matrix if isinstance(matrix, sp.csr_matrix) else sp.csr_matrix(matrix)
    if m.ndim != 2:
        raise ValueError(f"user counts must be a 2-D (users x n-grams) matrix, got shape {m.shape}")
    if m.nnz and (m.data.min() < 0 or not np.all(np.isfinite(m.data))):
        raise ValueError("user counts must be finite and >= 0")
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()
    if m.nnz and not m.data.all():
        m = m.copy()
        m.eliminate_zeros()
    return m


def clamp_counts(matrix: object, C: float) -> sp.csr_matrix:
    """Per-user clamping (Algorithm 1, first loop; §3.1): every count becomes ``min(C, count)``.

    After clamping, removing one user changes each n-gram count by at most ``C``.
    """
    C = check_positive("C", C)
    m = _as_csr(matrix).copy()
    if m.data.dtype.kind == "f":
        np.minimum(m.data, C, out=m.data)
    elif float(C).is_integer():
        np.minimum(m.data, min(int(C), int(np.iinfo(m.data.dtype).max)), out=m.data)
    else:
        m = m.astype(np.float64)
        np.minimum(m.data, C, out=m.data)
    return m


def cap_user_totals(matrix: object, W: float) -> sp.csr_matrix:
    """Per-user total cap for the Laplace baselines (§4.2): each user's row is scaled by
    ``min(1, W / row_total)`` so every user's counts sum to at most ``W`` (the L1 sensitivity of
    the summed counts under adding/removing one user). Returns float64 counts.

    Proportional scaling keeps each user's own distribution; it is deterministic (no sampling).
    """
    W = check_positive("W", W)
    m = _as_csr(matrix).astype(np.float64)
    totals = np.asarray(m.sum(axis=1)).ravel()
    scale = np.ones_like(totals)
    big = totals > W
    scale[big] = W / totals[big]
    m.data *= np.repeat(scale, np.diff(m.indptr))
    return m


def users_per_ngram(matrix: object) -> np.ndarray:
    """``N``: the number of users with a non-zero count of each n-gram (Algorithm 1)."""
    m = _as_csr(matrix)
    return np.bincount(m.indices, minlength=m.shape[1]).astype(np.int64)


def keys_of(obj: object, keys: Sequence[str] | None, n_cols: int) -> tuple[str, ...]:
    """Keys for a release: explicit ``keys``, else ``obj.keys`` (UserCounts), else ``"0".."V-1"``."""
    if keys is None and isinstance(obj, UserCounts):
        keys = obj.keys
    if keys is None:
        return tuple(str(i) for i in range(n_cols))
    keys = tuple(keys)
    if len(keys) != n_cols:
        raise ValueError(f"keys has {len(keys)} entries but the counts have {n_cols} columns")
    return keys


def __getattr__(name: str) -> Any:
    if name == "Vocabulary":
        return _deprecated_vocabulary()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _deprecated_vocabulary() -> type[NgramVocabulary]:
    """:class:`NgramVocabulary`, with the :class:`DeprecationWarning` of its old name ``Vocabulary``."""
    warnings.warn(
        "deniable.ngrams.Vocabulary is deprecated; use deniable.ngrams.NgramVocabulary (the same class; "
        "deniable.embeddings.Vocabulary is the word lookup of embeddings)",
        DeprecationWarning,
        stacklevel=3,
    )
    return NgramVocabulary
