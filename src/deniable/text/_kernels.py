"""Compiled loops of the bulk text path, used when numba is installed (``pip install
deniable[fast]``); without it :mod:`deniable.text._bulk` does the same work with numpy.

Two loops replace the numpy passes over the tokens of a batch:

* :func:`_scan` walks the word runs of a batch's UTF-8 buffer (the runs of
  :func:`~deniable.text.tokenize.split_words`, each clitic's boundary moved where it moves it)
  and gives every token its vocabulary id and case code where its bytes decide them: an ASCII
  token without a NUL byte, looked up in :class:`~deniable.text._vocab_table.VocabTable`'s hash
  tables as :meth:`~deniable.text._vocab_table.VocabTable.find_short` and
  :meth:`~deniable.text._vocab_table.VocabTable.find_long` do (the same tables, the same hash
  functions, compiled), and every clitic. The others are marked and looked up one by one.
* :func:`_write` copies the output: separators from the input, each token's output from the
  input (kept), the vocabulary's bytes (upper-cased in place for a title or upper-case ASCII
  word) or rendered strings.

A large batch is cut between threads at text boundaries (:func:`deniable._threads.run_parallel`;
the loops release the GIL). Nothing here samples. ``DENIABLE_COMPILED=0`` in the environment
turns the loops off, ``=1`` loads them for any batch; ``DENIABLE_THREADS`` sets the threads.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ._vocab_table import GOLDEN, hash_finish, hash_step

__all__ = ["compiled", "has_lowercase", "lower_packed", "COMPILED_MIN_CHARS", "COMPILED_MIN_INPUT", "PARALLEL_MIN_TOKENS"]


_ONES = 0x0101010101010101
_LOW7 = np.uint64(_ONES * 127)
_HIGH = np.uint64(_ONES * 128)


def has_lowercase(x: Any) -> Any:
    """Whether a packed word (8 bytes below 128 each) holds a byte in ``a``..``z``: per byte,
    ``b & 127`` lies strictly between 96 and 123 exactly when both sums below keep bit 7 set.
    Arrays, or a scalar in the compiled loops (this function is compiled for them)."""
    low = x & _LOW7
    return ((np.uint64(_ONES * (127 + 123)) - low) & ~x & (low + np.uint64(_ONES * (127 - 96))) & _HIGH) != 0


def lower_packed(x: Any) -> Any:
    """Packed words with every byte ``A``..``Z`` made lower case (bit 5 set), bytes from 128 left
    as they are: per byte, ``b & 127`` lies strictly between 64 and 91 exactly when both sums
    below keep bit 7 set. Arrays or scalars, as :func:`has_lowercase`."""
    low = x & _LOW7
    upper = (np.uint64(_ONES * (127 + 91)) - low) & ~x & (low + np.uint64(_ONES * (127 - 64))) & _HIGH
    return x | (upper >> np.uint64(2))


# what the compiled loops call: compiled by _jit_all (numba compiles a call to a global at the
# global's value then)
_has_lower, _lower, _hash_step, _hash_finish = has_lowercase, lower_packed, hash_step, hash_finish


def _probe_table(pairs: np.ndarray, key: np.uint64, slot: np.uint64, mask: np.uint64) -> int:  # pragma: no cover - compiled
    """The value of ``key`` in a :class:`~deniable.text._vocab_table.HashTable` (``pairs``: its
    slots' keys and values, interleaved), probing from its home ``slot`` on; -1: not a key."""
    two = np.uint64(2)
    while pairs[two * slot] != 0:
        if pairs[two * slot] == key:
            return np.int64(pairs[two * slot + np.uint64(1)])
        slot = (slot + np.uint64(1)) & mask
    return -1


def _find_long_key(
    buf: np.ndarray, v64: np.ndarray, masks: np.ndarray, s: int, m: int, head: np.uint64, lower: bool, width: int, pairs: np.ndarray,
    shift: np.uint64, mask: np.uint64, rows: np.ndarray, ids: np.ndarray, shared: np.ndarray, words: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """The id of an ASCII token of 9 to ``MAX_WIDTH`` bytes without a NUL byte (``head``: its
    first 8 bytes, lower-cased when ``lower``), as
    :meth:`~deniable.text._vocab_table.VocabTable.find_long` gives it: -1 when longer than every
    key, -2 when its hash is shared by keys (looked up one by one)."""
    if m > width:
        return -1
    words[0] = head
    h = head
    for w in range(1, width // 8):  # as row_hash: every word, zero past the token's end
        x = np.uint64(0)
        if 8 * w < m:
            x = v64[s + 8 * w] & masks[min(m - 8 * w, 8)]
            if lower:
                x = _lower(x)
        words[w] = x
        h = _hash_step(h, x)
    h = _hash_finish(h)
    if shared.size and shared[min(np.searchsorted(shared, h), shared.size - 1)] == h:
        return -2
    if ids.size == 0:
        return -1
    row = _probe(pairs, h, (h * GOLDEN) >> shift, mask)
    if row < 0:
        return -1
    for w in range(width // 8):
        if rows[row, w] != words[w]:
            return -1
    return ids[row]


_probe, _find_long = _probe_table, _find_long_key  # (compiled by _jit_all, as above)


def _scan(
    buf: np.ndarray, v64: np.ndarray, edges: np.ndarray, masks: np.ndarray, lower: bool, hot_pairs: np.ndarray, hot_shift: np.uint64,
    pairs: np.ndarray, shift: np.uint64, mask: np.uint64, isword: np.ndarray,
    long_width: int, long_pairs: np.ndarray, long_shift: np.uint64, long_mask: np.uint64, long_rows: np.ndarray,
    long_ids: np.ndarray, shared: np.ndarray,
    kind1: np.ndarray, kind2: np.ndarray, second: np.ndarray, lower_table: np.ndarray, negation: int, clitic_ids: np.ndarray, max_width: int,
    starts: np.ndarray, ends: np.ndarray, clitic: np.ndarray, kind: np.ndarray, ids: np.ndarray, cases: np.ndarray, wide: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Token ``t`` of the word runs ``[edges[2t], edges[2t+1])`` of ``buf`` (``v64``: the 8-byte
    integer at each byte), with each clitic's boundary moved, into the output arrays. ``ids``: -2
    for a token to look up one by one (a non-ASCII or NUL byte, more than ``max_width`` bytes, a
    hash shared by keys); ``cases``: -1 for one left to ``case_pattern`` (non-ASCII, or more than
    ``max_width`` bytes)."""
    ones, high = np.uint64(_ONES), _HIGH
    next_start = -1  # where the next run starts instead, when a clitic moves its boundary
    next_kind = -1
    next_clitic = 0
    scratch = np.empty(max(long_width // 8, 1), dtype=np.uint64)  # a long token's packed words
    for t in range(edges.size // 2):
        s = edges[2 * t]
        e = edges[2 * t + 1]
        k = -1
        c = 0
        if next_start >= 0:
            s, k, c = next_start, next_kind, next_clitic
            next_start = -1
        # a clitic after this run: an apostrophe at e, its letters, then a separator
        width = 0
        if buf[e] == 39:
            width = 1
        elif buf[e] == 0xE2 and buf[e + 1] == 0x80 and buf[e + 2] == 0x99:
            width = 3
        if width:
            a = e + width
            n1 = buf[a]
            two = second[n1] != 0 and second[n1] == lower_table[buf[a + 1]]
            which = kind2[n1] if two else kind1[n1]
            if which >= 0 and not isword[a + (2 if two else 1)]:
                if which != negation:
                    next_start, next_kind, next_clitic = e, which, 1 if width == 1 else 2
                elif lower_table[buf[e - 1]] == 110 and isword[e - 2]:  # "n" after a stem
                    next_start, next_kind, next_clitic = e - 1, negation, 1 if width == 1 else 2
                    e -= 1
        starts[t], ends[t], clitic[t], kind[t] = s, e, c, k
        m = e - s
        x = v64[s] & masks[min(m, 8)]
        has_lower = _has_lower(x)
        is_wide = (x & high) != 0
        y = x | ~masks[min(m, 8)]  # the bytes past the token as 255: a zero byte is a NUL
        has_nul = ((y - ones) & ~y & high) != 0
        if m > 8:
            for j in range(s + 8, e):
                b = buf[j]
                is_wide |= b >= 128
                has_nul |= b == 0
                has_lower |= 97 <= b <= 122
        wide[t] = is_wide
        first = x & np.uint64(255)
        if is_wide or m > max_width:
            cases[t] = -1
        elif 65 <= first <= 90:
            cases[t] = 1 if has_lower or m == 1 else 2
        else:
            cases[t] = 0
        if k >= 0:
            ids[t] = clitic_ids[k]
            continue
        if is_wide or has_nul or m > max_width:
            ids[t] = -2
            continue
        if lower:
            x = _lower(x)
        if m > 8:
            ids[t] = _find_long(buf, v64, masks, s, m, x, lower, long_width, long_pairs, long_shift, long_mask, long_rows, long_ids, shared, scratch)
            continue
        h = x * GOLDEN
        slot = (h >> hot_shift) * np.uint64(2)
        if hot_pairs[slot] == x:
            ids[t] = np.int64(hot_pairs[slot + np.uint64(1)])
            continue
        ids[t] = _probe(pairs, x, h >> shift, mask)


def _copy_bytes(dst: np.ndarray, q: int, src: np.ndarray, a: int, n: int) -> int:  # pragma: no cover - compiled
    """Copy ``n`` bytes at ``a`` to ``q``, 8 at a time (``dst`` and ``src``: the 8-byte integers
    at each byte of padded buffers; up to 7 bytes past ``q + n`` are overwritten). Returns
    ``q + n``."""
    for j in range(0, n, 8):
        dst[q + j] = src[a + j]
    return q + n


_copy = _copy_bytes  # (compiled by _jit_all, as above)


def _write(
    b64: np.ndarray, starts: np.ndarray, ends: np.ndarray, clitic: np.ndarray, text_starts: np.ndarray, text_ends: np.ndarray, first: np.ndarray,
    sampled: np.ndarray, keep: bool, special: np.ndarray, k: int, chosen: np.ndarray, cases: np.ndarray, word_span: np.ndarray,
    w64: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, e64: np.ndarray, upper_table: np.ndarray, out: np.ndarray, o64: np.ndarray, bounds: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The output texts, one after the other, into ``out`` (``o64``: its 8-byte integers), and
    each text's start and end in it into ``bounds``: separators copied from the input (``b64``);
    token ``t`` (tokens ``first[i]`` to ``first[i+1]`` of text ``i``): a ``special`` token's
    rendered string (the ``k``-th of ``offsets``, ``lengths`` in ``e64``, counting on), a token
    not ``sampled`` its input if ``keep`` else nothing, any other the bytes of vocabulary word
    ``chosen[t]`` (``w64`` from ``word_span[w] >> 24``, ``word_span[w] & 0xFFFFFF`` bytes; after a space in a clitic's place),
    in title (``cases[t]`` 1) or upper case (2) when asked (an ASCII word: it is not special)."""
    q = 0
    for i in range(text_starts.size):
        bounds[2 * i] = q
        p = text_starts[i]
        for t in range(first[i], first[i + 1]):
            s = starts[t]
            q = _copy(o64, q, b64, p, s - p)
            p = ends[t]
            if special[t]:
                q = _copy(o64, q, e64, offsets[k], lengths[k])
                k += 1
            elif not sampled[t]:
                if keep:
                    q = _copy(o64, q, b64, s, p - s)
            else:
                if clitic[t]:
                    out[q] = 32
                    q += 1
                w = chosen[t]
                at = q
                span = word_span[w]  # start << 24 | length: one memory read
                q = _copy(o64, q, w64, span >> 24, span & 0xFFFFFF)
                cs = cases[t]
                if cs == 1 and q > at:
                    out[at] = upper_table[out[at]]
                elif cs == 2:
                    for b in range(at, q):
                        out[b] = upper_table[out[b]]
        q = _copy(o64, q, b64, p, text_ends[i] - p)
        bounds[2 * i + 1] = q


_COMPILED: dict[str, Any] = {}
_LOAD_LOCK = threading.Lock()


#: Characters of text in a batch from which the compiled loops are loaded (importing numba and
#: loading them from its cache takes about half a second, once per process, so a small job does
#: not load them); once loaded, every batch of the bulk path uses them.
COMPILED_MIN_CHARS = 1 << 18


#: Characters of a whole input (a stream of batches) from which a caller that knows its size
#: loads the compiled loops up front, whatever its batches' size (``deniable privatize``): below
#: it, loading them costs about what they save (measured on 65 MB of text: no gain; on 196 MB:
#: 10 % less time).
COMPILED_MIN_INPUT = 1 << 27


def compiled(*, load: bool = True) -> dict[str, Callable[..., Any]] | None:
    """The compiled ``scan`` and ``write`` (compiled on first use, cached on disk by numba where
    it finds a writable folder), or None without numba, with ``DENIABLE_COMPILED=0``, or when
    they are not loaded yet and ``load`` is false. ``DENIABLE_COMPILED=1`` loads them whatever
    ``load`` says."""
    setting = os.environ.get("DENIABLE_COMPILED", "")
    if setting == "0":
        return None
    if not _COMPILED:
        if not load and setting != "1":
            return None
        with _LOAD_LOCK:
            if not _COMPILED:
                _COMPILED.update(_load())
    return _COMPILED["kernels"]


def numba_installed() -> bool:
    """Whether numba can be imported (without importing it)."""
    return importlib.util.find_spec("numba") is not None


def _load() -> dict[str, Any]:
    try:
        import numba
    except ImportError:
        return {"kernels": None}
    try:
        return {"kernels": _jit_all(numba, cache=True)}
    except RuntimeError:  # numba finds no writable cache folder ("no locator available"): compile in each process
        return {"kernels": _jit_all(numba, cache=False)}


def _jit_all(numba: Any, *, cache: bool) -> dict[str, Callable[..., Any]]:
    """Compile the loops and the helpers they call (numba compiles a call to a global at the
    global's value then, and inlines only what it is told to)."""
    jit = numba.njit(cache=cache, nogil=True, boundscheck=False)
    inline = numba.njit(cache=cache, nogil=True, boundscheck=False, inline="always")
    global _has_lower, _lower, _hash_step, _hash_finish, _copy, _probe, _find_long
    _has_lower, _lower, _hash_step, _hash_finish = inline(has_lowercase), inline(lower_packed), inline(hash_step), inline(hash_finish)
    _copy, _probe, _find_long = inline(_copy_bytes), inline(_probe_table), jit(_find_long_key)
    return {"scan": jit(_scan), "write": jit(_write)}


#: Tokens each thread gets at least when the compiled loops split a batch between threads (a
#: batch of fewer than twice this many runs on one).
PARALLEL_MIN_TOKENS = 10_000


