"""Keyed randomness: every row of a release draws from its own generator.

Distributed and parallel runs (Spark partitions, ``datasets.map`` workers, retried tasks) see the
rows in batches that change from run to run. So that a row's draw does not depend on the batching,
every row draws from its own generator, derived from

* ``seed`` — the release's secret: a fresh 128-bit secret from the OS (:func:`secret_seed`), drawn
  for each release and never returned, unless the caller gives ``rng`` as an integer seed (or a
  ``numpy.random.Generator``, drawn from);
* ``stream`` — separates the columns of one release (the column name by default in the adapters);
* ``release`` — the release identity: an explicit ``release_id=`` and, for Hugging Face datasets,
  the split name; it separates releases made with one seed;
* the row ``key`` — an integer, string or bytes.

The generator is numpy's counter-based Philox-4x64 keyed by BLAKE2b-128(seed, stream, release,
key) (:func:`philox_key`), counter at 0: distinct tuples give distinct keys and so independent
streams, the same tuple the same stream. The words of one row then go through the mechanism exactly
as :func:`deniable.text.privatize_texts` sends one text, so the output of a row equals
``privatize_texts(mechanism, [text], rng=row_generator(seed, stream, key, release=release))``.

**The rule every adapter follows** (:func:`resolve_randomness`, the one place it is decided):

* By default (no seed, no key) each release draws a fresh secret seed and each row is keyed by its
  position in the release, so every row of every release has independent randomness: identical
  texts give independent outputs, and two releases share nothing.
* An explicit row key (an id column, an index, a list of keys) makes a release reproducible when an
  integer seed is given: the output then depends only on (seed, stream, release, key), whatever the
  partitioning, batching or task retries. Two releases share a generator only if they are given
  the same seed, stream, release identity and key — give each release its own ``release_id``.
* An integer seed without a key is an error: keying the rows by their position under a seed the
  caller reuses would give row *i* of two releases the same randomness (equal texts, equal
  outputs). Pass a key, or no seed.
* ``content_keys=True`` keys each row by its text, with a :class:`~deniable.errors.PrivacyWarning`:
  identical texts then always give identical outputs and different outputs prove different
  inputs. Each text keeps the mechanism's guarantee, but a table does not: of two neighbouring
  tables (a, a) and (a, b), only the first gives two equal outputs with probability 1, so the
  privacy loss of the table is unbounded. It is opt-in for data sets whose repeated texts must
  not be re-sampled (a text repeated k times with independent keys composes to k·ε·d).

Privacy: each row is privatized by the mechanism with its own randomness, so the mechanism's
guarantee holds per row and rows compose (a table of rows that differ from a neighbouring table's
in words x_i → x'_i is exp(ε·Σd(x_i, x'_i))-indistinguishable), as long as no two rows share a
key under one secret. A seed known to an observer makes every output a deterministic function of
the input: seeds are for experiments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..text.privatize import check_oov, privatize_texts
from .row_keys import CONTENT as CONTENT
from .row_keys import (
    CONTENT_KEYS_WARNING,
    RowRandomness,
    _Rekeyable,
    check_release_id,
    check_seed,
    is_null,
    key_bytes,
    master_seed,
    philox_key,
    resolve_randomness,
    rng_or_seed,
    row_generator,
    secret_seed,
)
from .row_keys import EXPLICIT as EXPLICIT
from .row_keys import POSITION as POSITION

__all__ = [
    # row keys and the randomness rule (defined in deniable.integrations.row_keys)
    "secret_seed", "check_seed", "key_bytes", "philox_key", "row_generator", "RowRandomness", "resolve_randomness", "check_release_id",
    "CONTENT_KEYS_WARNING", "is_null",
    # privatization of keyed rows
    "privatize_keyed", "privatize_rows",
    # per-user contribution bounds of n-gram counts
    "NGRAM_STREAM", "bound_user_row", "keyed_bound_contributions",
]


# -- batched search behind per-row sampling ------------------------------------------------------


class _Tickets:
    """Stands in for a mechanism's search index: records each query batch and answers with
    ticket numbers, so that the real searches of all rows run as one batched call afterwards."""

    def __init__(self, index: Any) -> None:
        self._index = index
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.issued = 0

    def search(self, queries: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        n = int(np.shape(queries)[0])
        self.calls.append(((queries, *args), kwargs))
        out = np.arange(self.issued, self.issued + n, dtype=np.int64)
        self.issued += n
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


def _ticketed_copy(mechanism: Any) -> tuple[Any, _Tickets] | None:
    """A shallow copy of ``mechanism`` whose ``index`` records searches, or None when the
    mechanism has no ``index`` with a ``search`` method (it is then sampled row by row)."""
    index = getattr(mechanism, "index", None)
    if index is None or not callable(getattr(index, "search", None)) or not hasattr(mechanism, "__dict__"):
        return None
    twin = object.__new__(type(mechanism))
    twin.__dict__.update(mechanism.__dict__)
    tickets = _Tickets(index)
    twin.__dict__["index"] = tickets
    return twin, tickets


def _resolve_tickets(index: Any, tickets: _Tickets, chunk: int = 16384) -> np.ndarray:
    """Run every recorded search as batched calls of at most ``chunk`` queries; the result of
    ticket ``t`` is at position ``t``."""
    calls = tickets.calls
    if not calls:
        return np.empty(0, dtype=np.int64)
    n_args = len(calls[0][0])
    names = sorted(calls[0][1])
    if any(len(a) != n_args or sorted(k) != names for a, k in calls):
        raise _Fallback
    args = [np.concatenate([np.asarray(a[i]) for a, _ in calls]) for i in range(n_args)]
    kwargs = {k: np.concatenate([np.asarray(kw[k]) for _, kw in calls]) for k in names}
    total = args[0].shape[0]
    if any(x.shape[:1] != (total,) for x in [*args, *kwargs.values()]):
        raise _Fallback
    out = np.empty(total, dtype=np.int64)
    for s in range(0, total, chunk):
        sl = slice(s, s + chunk)
        out[sl] = index.search(*[a[sl] for a in args], **{k: v[sl] for k, v in kwargs.items()})
    return out


class _Fallback(Exception):
    pass


class _KeyedSampler:
    """What :func:`privatize_texts` sees as the mechanism: its ``sample_ids`` receives the ids of
    all rows of the batch, concatenated in row order, and samples each row's slice with that
    row's own generator."""

    def __init__(self, mechanism: Any, counts: list[int], keys: list[np.ndarray]) -> None:
        self.mechanism = mechanism
        self.vocabulary = mechanism.vocabulary
        self.counts = counts
        self.keys = keys
        self.rekeyable = _Rekeyable()

    def __getattr__(self, name: str) -> Any:  # name, epsilon, guarantee, ...: the mechanism's
        return getattr(self.mechanism, name)

    def sample_ids(self, ids: Any, rng: Any = None) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.shape[0] != sum(self.counts):
            raise RuntimeError(
                f"internal error: the batch has {ids.shape[0]} words to sample but the rows count {sum(self.counts)}; "
                "please report this with the deniable version"
            )
        try:
            return self._batched(ids)
        except _Fallback:
            return self._row_by_row(ids)

    def _segments(self):
        start = 0
        for count, key in zip(self.counts, self.keys):
            if count:
                yield start, count, self.rekeyable.at(key)
            start += count

    def _row_by_row(self, ids: np.ndarray) -> np.ndarray:
        out = np.empty_like(ids)
        for start, count, gen in self._segments():
            out[start : start + count] = self.mechanism.sample_ids(ids[start : start + count], rng=gen)
        return out

    def _batched(self, ids: np.ndarray) -> np.ndarray:
        made = _ticketed_copy(self.mechanism)
        if made is None:
            raise _Fallback
        twin, tickets = made
        out = np.empty_like(ids)
        spans: list[tuple[int, int, int]] = []  # (start, count, first ticket)
        for start, count, gen in self._segments():
            first = tickets.issued
            out[start : start + count] = twin.sample_ids(ids[start : start + count], rng=gen)
            if tickets.issued - first != count or not np.array_equal(out[start : start + count], np.arange(first, first + count)):
                # the mechanism does more than return its search results: sample row by row
                raise _Fallback
            spans.append((start, count, first))
        found = _resolve_tickets(tickets._index, tickets)
        for start, count, first in spans:
            out[start : start + count] = found[first : first + count]
        return out


def _sampled_counts(vocabulary: Any, texts: Sequence[str], oov: str) -> list[int]:
    """Words of each text that :func:`privatize_texts` sends to the mechanism (every word with
    ``oov="unk"``, the vocabulary words otherwise)."""
    from ..text.tokenize import lookup_key, word_pattern

    findall = word_pattern().findall
    if oov == "unk":
        return [len(findall(t)) for t in texts]
    uncased = vocabulary.uncased
    counts = []
    for t in texts:
        words = findall(t)
        counts.append(int((vocabulary.ids_of(lookup_key(w, lower=uncased) for w in words) >= 0).sum()) if words else 0)
    return counts


_GROUP_WORDS = 16384
_UNUSED_RNG = np.random.Generator(np.random.PCG64(0))  # handed to privatize_texts, never drawn from


def privatize_keyed(
    mechanism: Any,
    texts: Sequence[Any],
    keys: Sequence[Any] | None = None,
    *,
    rng: Any = None,
    stream: str = "",
    release_id: str | None = None,
    content_keys: bool = False,
    oov: str = "unk",
    case: str = "preserve",
    stats: dict[str, int] | None = None,
    seed: Any = None,
) -> list[str | None]:
    """Privatize each text with its own generator, one call being one release.

    The single-process reference of the distributed paths: for the same ``rng``, ``stream``,
    ``release_id`` and keys, :func:`deniable.spark.privatize_column`,
    :func:`deniable.integrations.pandas.privatize_series` and the ``datasets`` helper (all with
    a key) give exactly these outputs, whatever the batching.

    Randomness (:func:`resolve_randomness`): without ``keys`` and ``rng`` (the default) each call
    draws a fresh secret and keys the rows by position, so every row is independent of every
    other row of this and any other call. With ``keys`` and an integer ``rng`` the output is
    reproducible: row *r* draws from ``row_generator(rng, stream, keys[r], release=release_id)``.
    An integer ``rng`` without keys raises ``ValueError``; ``content_keys=True`` keys rows by their text
    (identical texts, identical outputs; warns).

    Guarantee: the mechanism's own (``mechanism.guarantee``) for each text, with the layout and
    case patterns released as in :func:`deniable.text.privatize_texts`; rows with distinct keys
    under one secret have independent randomness, so the guarantees of rows compose.

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`.
    texts
        Strings; ``None`` / NaN entries stay ``None`` and draw nothing.
    keys
        One row key per text (integers, strings or bytes), unique per row for independent draws;
        ``None``: keyed by position (or by text with ``content_keys=True``).
    rng
        ``None`` (a fresh secret per call), a non-negative integer seed (reproducible; needs
        ``keys`` or ``content_keys``) or a ``numpy.random.Generator`` (128 bits drawn from it).
    stream
        Separates the columns of one release (the adapters pass the column name).
    release_id
        The release identity: separates releases made with one ``rng`` seed (e.g. ``"train"``,
        ``"test"``).
    content_keys
        Key each row by its text. Opt-in: identical texts then give identical outputs, which
        shows that they were equal (a :class:`~deniable.errors.PrivacyWarning` says so).
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    stats
        Updated in place with ``words`` and ``unknown`` counts.
    seed
        Deprecated alias of ``rng`` (same values, same outputs; warns with a
        ``DeprecationWarning``); giving both raises ``TypeError``.

    Returns
    -------
    list
        The privatized texts, ``None`` where the input was missing.
    """
    check_oov(oov)
    rng = rng_or_seed(rng, seed, where="privatize_keyed")
    randomness = resolve_randomness(rng, keyed=keys is not None, content_keys=content_keys, release_id=release_id, stream=stream)
    texts = list(texts)
    return privatize_rows(mechanism, texts, randomness.row_keys(texts, keys), randomness, oov=oov, case=case, stats=stats)


def privatize_rows(
    mechanism: Any,
    texts: Sequence[Any],
    keys: Sequence[Any],
    randomness: RowRandomness,
    *,
    oov: str = "unk",
    case: str = "preserve",
    stats: dict[str, int] | None = None,
) -> list[str | None]:
    """Privatize ``texts[r]`` with ``row_generator(seed, stream, keys[r], release=release)`` of
    ``randomness`` (resolved by :func:`resolve_randomness`), the nearest-neighbour searches of all
    rows batched. What :func:`privatize_keyed` and the adapters run once the keys are known;
    ``keys`` has one key per text (ignored where the text is missing)."""
    check_oov(oov)
    if not isinstance(randomness, RowRandomness):
        raise TypeError(f"randomness must be a RowRandomness (from resolve_randomness), got {type(randomness).__name__}")
    texts = list(texts)
    key_list = list(keys)
    if len(key_list) != len(texts):
        raise ValueError(f"keys has {len(key_list)} entries but there are {len(texts)} texts")
    rows = []
    for i, t in enumerate(texts):
        if is_null(t):
            continue
        if not isinstance(t, str):
            raise TypeError(f"row {i}: texts must be strings (or None for missing), got {type(t).__name__} {t!r}")
        k = key_list[i]
        if is_null(k):
            raise ValueError(f"row {i}: the row key is missing; every non-missing text needs a key")
        rows.append(i)
    out: list[str | None] = [None] * len(texts)
    if not rows:
        return out
    batch = [texts[i] for i in rows]
    pre = randomness.prefix()
    try:
        philox = [philox_key(randomness.seed, randomness.stream, key_list[i], _prefix_bytes=pre) for i in rows]
    except (TypeError, ValueError) as exc:
        bad = next(i for i in rows if not _valid_key(key_list[i]))
        raise type(exc)(f"row {bad}: {exc}") from None
    counts = _sampled_counts(mechanism.vocabulary, batch, oov)
    # groups of rows with at most _GROUP_WORDS words to sample bound the memory of the queued
    # searches (a row longer than that is a group of its own)
    start = 0
    while start < len(batch):
        stop, words = start, 0
        while stop < len(batch) and (stop == start or words + counts[stop] <= _GROUP_WORDS):
            words += counts[stop]
            stop += 1
        sampler = _KeyedSampler(mechanism, counts[start:stop], philox[start:stop])
        new = privatize_texts(sampler, batch[start:stop], rng=_UNUSED_RNG, oov=oov, case=case, stats=stats)
        for i, t in zip(rows[start:stop], new):
            out[i] = t
        start = stop
    return out


def _valid_key(key: Any) -> bool:
    try:
        key_bytes(key)
        return True
    except (TypeError, ValueError):
        return False


# -- per-user contribution bounds for n-gram counts ---------------------------------------------

#: Stream of the per-user n-gram subset draws (separate from any text column's stream).
NGRAM_STREAM = "deniable.ngrams.user-bounds"


def bound_user_row(
    cols: np.ndarray, counts: np.ndarray, *, max_ngrams_per_user: int | None, C: float | None, generator: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Bound one user's counts with :func:`deniable.ngrams.bound_contributions` (at most
    ``max_ngrams_per_user`` distinct n-grams, a uniformly random subset, then counts clamped to
    ``C``), drawing from this user's own generator. The columns are sorted first, so the subset
    depends only on the generator and the user's data, never on the order rows arrived in.

    ``generator`` is a zero-argument callable returning the user's Generator (called only when
    the user has more than ``max_ngrams_per_user`` n-grams). Returns sorted columns and counts.
    """
    import scipy.sparse as sp

    from ..ngrams import bound_contributions as _bound
    from ..ngrams import clamp_counts

    order = np.argsort(cols, kind="stable")
    cols, counts = np.asarray(cols)[order], np.asarray(counts)[order]
    if cols.shape[0] == 0:
        return cols, counts
    row = sp.csr_matrix((counts, cols.astype(np.int32), np.array([0, cols.shape[0]])), shape=(1, int(cols.max()) + 1))
    if max_ngrams_per_user is not None and cols.shape[0] > max_ngrams_per_user:
        limit = C if C is not None else float(counts.max())  # None: no clamp (a no-op bound)
        row = _bound(row, max_ngrams_per_user, limit, rng=generator())
    elif C is not None:
        row = clamp_counts(row, C)
    row = sp.csr_matrix(row)
    row.sort_indices()
    return row.indices.astype(cols.dtype, copy=False), row.data


def check_bounds(max_ngrams_per_user: Any, C: Any) -> tuple[int | None, float | None]:
    """Validate the per-user bounds (``None`` leaves a bound off)."""
    from .._validation import check_int, check_positive

    k = None if max_ngrams_per_user is None else check_int("max_ngrams_per_user", max_ngrams_per_user, minimum=1)
    c = None if C is None else check_positive("C", C)
    return k, c


def keyed_bound_contributions(
    counts: Any, *, max_ngrams_per_user: int | None = None, C: float | None = None, rng: Any = None, seed: Any = None
) -> Any:
    """Per-user contribution bounds on a :class:`~deniable.ngrams.UserCounts`, keyed by user.

    The bounds of :func:`deniable.ngrams.bound_contributions` (at most ``max_ngrams_per_user``
    distinct n-grams per user, a uniformly random subset; every count clamped to ``C``; None
    leaves a bound off), with each user's subset drawn from its own generator
    ``row_generator(master, NGRAM_STREAM, user_id)`` (``master`` the integer seed of ``rng``)
    instead of one generator in row order. This is the single-machine reference of the bounds
    :func:`deniable.spark.count_ngrams` applies on the executors: the same ``rng`` seed gives the
    same bounded counts whatever the partitioning or the user order. The bounds are data
    independent; a release enforces its own again (a no-op for users already within them).

    ``rng``: ``None`` (a fresh secret seed), a non-negative integer seed (reproducible) or a
    ``numpy.random.Generator`` (128 bits drawn from it), as
    :func:`~deniable.integrations.row_keys.master_seed` reads it. ``seed``: deprecated alias of
    ``rng`` (same values, same outputs; warns with a ``DeprecationWarning``); giving both raises
    ``TypeError``.
    """
    import scipy.sparse as sp

    from ..ngrams import UserCounts

    k, c = check_bounds(max_ngrams_per_user, C)
    master, _ = master_seed(rng_or_seed(rng, seed, where="keyed_bound_contributions"))
    m = sp.csr_matrix(counts.matrix)
    indptr = [0]
    cols_out, data_out = [], []
    for u in range(m.shape[0]):
        lo, hi = m.indptr[u], m.indptr[u + 1]
        user = counts.user_ids[u] if counts.user_ids else u
        cols, vals = bound_user_row(
            m.indices[lo:hi], m.data[lo:hi], max_ngrams_per_user=k, C=c, generator=lambda user=user: row_generator(master, NGRAM_STREAM, user)
        )
        cols_out.append(cols)
        data_out.append(vals)
        indptr.append(indptr[-1] + cols.shape[0])
    dtype = np.float64 if c is not None and not float(c).is_integer() else m.data.dtype
    data = np.concatenate(data_out).astype(dtype) if data_out else np.zeros(0, dtype=dtype)
    indices = np.concatenate(cols_out).astype(np.int32) if cols_out else np.zeros(0, dtype=np.int32)
    bounded = sp.csr_matrix((data, indices, np.asarray(indptr, dtype=np.int64)), shape=m.shape)
    return UserCounts(bounded, counts.keys, counts.user_ids, counts.dropped)
