"""Keyed randomness: a row's privatized output depends only on (seed, stream, row key).

Distributed and parallel runs (Spark partitions, ``datasets.map`` workers, retried tasks) see the
rows in batches that change from run to run. To give the same output for the same seed whatever
the batching, every row draws from its own generator, derived from

* ``seed`` — an integer; with ``seed=None`` a fresh 128-bit secret is drawn from the OS once per
  call (:func:`secret_seed`) and never returned, so the output is unpredictable yet a retried task
  still reproduces what the first attempt drew (no second, independent sample of the same text);
* ``stream`` — a label that separates independent uses of one seed (the column name by default in
  the adapters): two columns privatized with the same seed and row keys must not share noise,
  which would reveal differences between their words;
* the row ``key`` — an integer, string or bytes (for instance an id column); when no key is given
  the adapters key on the text itself, so identical texts get identical outputs.

The generator is numpy's counter-based Philox-4x64 keyed by BLAKE2b-128(seed, stream, key)
(:func:`philox_key`), counter at 0: distinct triples give distinct keys and so independent
streams, the same triple the same stream. The words of one row then go through the mechanism exactly as
:func:`deniable.text.privatize_texts` sends one text, so the output of a row equals
``privatize_texts(mechanism, [text], rng=row_generator(seed, stream, key))`` — the single-process
reference :func:`privatize_keyed` computes, with the nearest-neighbour searches of all rows of a
batch done in one call.

Privacy: each row is privatized by the mechanism with fresh randomness, so the mechanism's
guarantee holds per row as long as the seed is secret. Rows with equal keys share their
randomness (by design: that is what makes retries safe); with content keys, repeated texts
therefore give repeated outputs, which shows that the inputs were equal, and a seed known to an
observer makes every output a deterministic function of the input: seeds are for experiments.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..text.privatize import check_oov, privatize_texts

__all__ = [
    "secret_seed",
    "check_seed",
    "key_bytes",
    "philox_key",
    "row_generator",
    "privatize_keyed",
    "is_null",
    "NGRAM_STREAM",
    "bound_user_row",
    "keyed_bound_contributions",
]

_TAG_INT, _TAG_STR, _TAG_BYTES = b"i", b"s", b"b"
_DOMAIN = b"deniable.row-key.v1"


def secret_seed() -> int:
    """A fresh 128-bit seed from :mod:`secrets` (used when the caller gives ``seed=None``)."""
    return secrets.randbits(128)


def check_seed(seed: Any) -> int | None:
    """Validate ``seed``: ``None`` or a non-negative integer (returned as ``int``)."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be None or a non-negative integer, got {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return int(seed)


def key_bytes(key: Any) -> bytes:
    """The canonical bytes of a row key: a type tag, then the value.

    Integers (any width, numpy or Python; not bool) are their 128-bit two's complement, so an
    int32 and an int64 column with the same values give the same keys; strings their UTF-8;
    bytes themselves. Anything else raises ``TypeError``.
    """
    if isinstance(key, (bool, np.bool_)):
        raise TypeError(f"row keys must be integers, strings or bytes, got the bool {key!r}")
    if isinstance(key, (int, np.integer)):
        v = int(key)
        if not -(1 << 127) <= v < (1 << 127):
            raise ValueError(f"integer row keys must fit in 128 bits, got {v}")
        return _TAG_INT + v.to_bytes(16, "little", signed=True)
    if isinstance(key, str):
        return _TAG_STR + key.encode("utf-8", "surrogatepass")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return _TAG_BYTES + bytes(key)
    raise TypeError(
        f"row keys must be integers, strings or bytes, got {type(key).__name__} ({key!r}); "
        "cast the key column to a string or an integer"
    )


def _prefix(seed: int, stream: str) -> bytes:
    if not isinstance(stream, str):
        raise TypeError(f"stream must be a string, got {type(stream).__name__}")
    sb = seed.to_bytes(max(16, (seed.bit_length() + 7) // 8), "little")
    st = stream.encode("utf-8", "surrogatepass")
    return _DOMAIN + len(sb).to_bytes(4, "little") + sb + len(st).to_bytes(4, "little") + st


def philox_key(seed: int, stream: str, key: Any, *, _prefix_bytes: bytes | None = None) -> np.ndarray:
    """The 128-bit Philox key of a row: BLAKE2b-128 of (seed, stream, canonical key), as two
    uint64 words."""
    pre = _prefix(seed, stream) if _prefix_bytes is None else _prefix_bytes
    digest = hashlib.blake2b(pre + key_bytes(key), digest_size=16).digest()
    return np.frombuffer(digest, dtype="<u8").astype(np.uint64)


def row_generator(seed: int, stream: str, key: Any) -> np.random.Generator:
    """The generator of one row: Philox-4x64 (counter-based), keyed by :func:`philox_key`,
    counter starting at 0. Distinct (seed, stream, key) give distinct keys (up to a 2^-128
    hash collision), hence independent streams; the same triple gives the same stream."""
    return np.random.Generator(np.random.Philox(key=philox_key(seed, stream, key)))


class _Rekeyable:
    """One Philox generator re-keyed per row: the same draws as a fresh :func:`row_generator`
    for that row, without building a generator per row."""

    def __init__(self) -> None:
        self.bit_generator = np.random.Philox(key=0)
        self.generator = np.random.Generator(self.bit_generator)
        self._zero = np.zeros(4, dtype=np.uint64)

    def at(self, key: np.ndarray) -> np.random.Generator:
        self.bit_generator.state = {
            "bit_generator": "Philox",
            "state": {"counter": self._zero, "key": key},
            "buffer": self._zero,
            "buffer_pos": 4,
            "has_uint32": 0,
            "uinteger": 0,
        }
        return self.generator


def is_null(value: Any) -> bool:
    """True for ``None`` and float NaN (pandas' missing markers ``pd.NA`` / ``NaT`` included)."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return type(value).__name__ in ("NAType", "NaTType")


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
    seed: int | None,
    stream: str = "",
    oov: str = "unk",
    case: str = "preserve",
    stats: dict[str, int] | None = None,
) -> list[str | None]:
    """Privatize each text with its own generator ``row_generator(seed, stream, key)``.

    The single-process reference of the distributed paths: for the same ``seed``, ``stream`` and
    keys, :func:`deniable.spark.privatize_column`, :func:`deniable.integrations.pandas.privatize_series`
    (with ``key=``) and the ``datasets`` helper give exactly these outputs, whatever the batching.

    Guarantee: the mechanism's own (``mechanism.guarantee``) for each text, with the layout and
    case patterns released as in :func:`deniable.text.privatize_texts`; rows with equal keys share
    their randomness (see the module docstring).

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`.
    texts
        Strings; ``None`` / NaN entries stay ``None`` and draw nothing.
    keys
        One row key per text (integers, strings or bytes); ``None`` keys each row on its text.
    seed
        Non-negative integer; ``None`` draws a fresh secret seed (not reproducible).
    stream
        Separates independent uses of one seed (the adapters pass the column name).
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    stats
        Updated in place with ``words`` and ``unknown`` counts.

    Returns
    -------
    list
        The privatized texts, ``None`` where the input was missing.
    """
    check_oov(oov)
    seed = check_seed(seed)
    if seed is None:
        seed = secret_seed()
    texts = list(texts)
    if keys is None:
        key_list: list[Any] = texts
    else:
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
    try:
        pre = _prefix(seed, stream)
        keys = [philox_key(seed, stream, key_list[i], _prefix_bytes=pre) for i in rows]
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
        sampler = _KeyedSampler(mechanism, counts[start:stop], keys[start:stop])
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


def keyed_bound_contributions(counts: Any, *, max_ngrams_per_user: int | None = None, C: float | None = None, seed: int | None = None) -> Any:
    """Per-user contribution bounds on a :class:`~deniable.ngrams.UserCounts`, keyed by user.

    The bounds of :func:`deniable.ngrams.bound_contributions` (at most ``max_ngrams_per_user``
    distinct n-grams per user, a uniformly random subset; every count clamped to ``C``; None
    leaves a bound off), with each user's subset drawn from its own generator
    ``row_generator(seed, NGRAM_STREAM, user_id)`` instead of one generator in row order. This is
    the single-machine reference of the bounds :func:`deniable.spark.count_ngrams` applies on the
    executors: the same seed gives the same bounded counts whatever the partitioning or the user
    order. The bounds are data independent; a release enforces its own again (a no-op for users
    already within them).
    """
    import scipy.sparse as sp

    from ..ngrams import UserCounts

    k, c = check_bounds(max_ngrams_per_user, C)
    seed = check_seed(seed)
    if seed is None:
        seed = secret_seed()
    m = sp.csr_matrix(counts.matrix)
    indptr = [0]
    cols_out, data_out = [], []
    for u in range(m.shape[0]):
        lo, hi = m.indptr[u], m.indptr[u + 1]
        user = counts.user_ids[u] if counts.user_ids else u
        cols, vals = bound_user_row(
            m.indices[lo:hi], m.data[lo:hi], max_ngrams_per_user=k, C=c, generator=lambda user=user: row_generator(seed, NGRAM_STREAM, user)
        )
        cols_out.append(cols)
        data_out.append(vals)
        indptr.append(indptr[-1] + cols.shape[0])
    dtype = np.float64 if c is not None and not float(c).is_integer() else m.data.dtype
    data = np.concatenate(data_out).astype(dtype) if data_out else np.zeros(0, dtype=dtype)
    indices = np.concatenate(cols_out).astype(np.int32) if cols_out else np.zeros(0, dtype=np.int32)
    bounded = sp.csr_matrix((data, indices, np.asarray(indptr, dtype=np.int64)), shape=m.shape)
    return UserCounts(bounded, counts.keys, counts.user_ids, counts.dropped)
