"""The bulk text path for ASCII texts: tokenization, vocabulary look-up, case patterns and
reassembly of a whole batch on one byte array, with numpy.

Every result equals the per-token path's: the word runs and clitics of
:func:`~deniable.text.tokenize.split_words`, the keys of
:func:`~deniable.text.tokenize.vocabulary_keys` (looked up as packed integers and fixed-width
byte strings against a sorted copy of the vocabulary's keys), the case pattern of
:func:`~deniable.text.tokenize.case_pattern` and the rendering of
:func:`deniable.text.privatize.render`. :func:`deniable.text.privatize_texts` uses it for the
ASCII texts of a batch; nothing here samples.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .tokenize import _ASCII_WORD_CHARS, CLITICS, case_pattern

#: Byte between texts (and before the first, after the last) in a batch's buffer: a separator,
#: so no word runs across texts.
_JOIN = b" "
_PAD = 8  # bytes after the last text: every unaligned 8-byte read stays inside the buffer
#: Keys (and tokens) longer than this are looked up one by one (none are, in common vocabularies).
_MAX_WIDTH = 64

_WORD = np.array([chr(c) in _ASCII_WORD_CHARS for c in range(256)], dtype=bool)
_LOWER = np.array([ord(chr(c).lower()) if c < 128 else c for c in range(256)], dtype=np.uint8)
_UPPER = np.array([ord(chr(c).upper()) if c < 128 else c for c in range(256)], dtype=np.uint8)
_IS_UPPER = np.array([65 <= c <= 90 for c in range(256)], dtype=bool)
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # the first n bytes
_ONES = 0x0101010101010101
_LOW7 = np.uint64(_ONES * 127)
_HIGH = np.uint64(_ONES * 128)


def _has_lowercase(x: np.ndarray) -> np.ndarray:
    """Whether a packed word (8 bytes below 128 each) holds a byte in ``a``..``z``: per byte,
    ``b & 127`` lies strictly between 96 and 123 exactly when both sums below keep bit 7 set."""
    low = x & _LOW7
    return ((np.uint64(_ONES * (127 + 123)) - low) & ~x & (low + np.uint64(_ONES * (127 - 96))) & _HIGH) != 0


def _u64(buf: np.ndarray) -> np.ndarray:
    """The little-endian 8-byte integer starting at every byte of ``buf`` (a strided view)."""
    return np.ndarray(shape=(buf.size - 7,), dtype="<u8", buffer=buf, strides=(1,))


def _packed(v64: np.ndarray, starts: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """``(m, k)`` integers holding each token's bytes zero-padded to ``8 k`` bytes (tokens of at
    most ``8 k`` bytes); as ``S{8k}`` they are the tokens themselves."""
    steps = 8 * np.arange(k)
    words = v64[np.minimum(starts[:, None] + steps, v64.size - 1)]
    return words & _MASKS[np.clip(lengths[:, None] - steps, 0, 8)]


def segment_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices ``starts[0] .. starts[0]+lengths[0]-1, starts[1] ..``: the gather that
    concatenates the segments."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


class VocabTable:
    """A vocabulary's keys as sorted packed integers (at most 8 bytes) and sorted fixed-width
    byte strings (longer ASCII keys), the ids :meth:`ids_of` gives them, the clitics' ids, and
    every word's UTF-8 bytes for the output."""

    def __init__(self, vocab: Any) -> None:
        words: Sequence[str] = vocab.words
        encoded = [w.encode("utf-8") for w in words]  # a lone surrogate raises: no bulk path
        self.word_len = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        self.word_start = np.cumsum(self.word_len) - self.word_len
        self.word_bytes = np.frombuffer(b"".join(encoded) + b"\0", dtype=np.uint8)
        self.word_ascii = self.word_len == np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        keys = [w for w, b in zip(words, encoded) if 0 < len(b) == len(w) and "\0" not in w]
        ids = np.asarray(vocab.ids_of(keys), dtype=np.int64).reshape(-1)
        keys = [k for k, i in zip(keys, ids.tolist()) if i >= 0]
        ids = ids[ids >= 0]
        lens = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
        short = np.flatnonzero(lens <= 8)
        packed = np.frombuffer(b"".join(keys[j].encode().ljust(8, b"\0") for j in short.tolist()), dtype="<u8")
        self.slots, self.slot_ids, self.shift = _hash_table(packed, ids[short])
        long_ = np.flatnonzero((lens > 8) & (lens <= _MAX_WIDTH))
        self.width = int(8 * -(-lens[long_].max() // 8)) if long_.size else 8
        strings = np.array([keys[j].encode() for j in long_.tolist()], dtype=f"S{self.width}")
        order = np.argsort(strings, kind="stable")
        self.long_keys, self.long_ids = strings[order], ids[long_][order]
        self.longest = dict(zip((keys[j] for j in np.flatnonzero(lens > _MAX_WIDTH).tolist()), ids[lens > _MAX_WIDTH].tolist()))
        clitic_ids = []
        for c in CLITICS:  # its lower-case form, else its letters (vocabulary_keys)
            i = int(np.asarray(vocab.ids_of([c])).reshape(-1)[0])
            clitic_ids.append(i if i >= 0 else int(np.asarray(vocab.ids_of([c.replace("'", "")])).reshape(-1)[0]))
        packed_clitics = np.frombuffer(b"".join(c.encode().ljust(8, b"\0") for c in CLITICS), dtype="<u8")
        order = np.argsort(packed_clitics)
        self.clitic_keys, self.clitic_ids = packed_clitics[order], np.array(clitic_ids, dtype=np.int64)[order]
        self.ids_of = vocab.ids_of

    def find_short(self, queries: np.ndarray) -> np.ndarray:
        """Ids of packed keys of at most 8 bytes (-1: not a key): open addressing with linear
        probing, all queries at once, one round per probe."""
        slot = (queries * _GOLDEN) >> self.shift
        ids = np.full(queries.size, -1, dtype=np.int64)
        todo = np.arange(queries.size)
        while todo.size:
            found = self.slots[slot]
            hit = found == queries
            ids[todo[hit]] = self.slot_ids[slot[hit]]
            more = ~hit & (found != 0)
            todo, queries, slot = todo[more], queries[more], (slot[more] + np.uint64(1)) & np.uint64(self.slots.size - 1)
        return ids

    @staticmethod
    def _find(sorted_keys: np.ndarray, sorted_ids: np.ndarray, queries: np.ndarray) -> np.ndarray:
        if not sorted_keys.size:
            return np.full(queries.size, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(sorted_keys, queries), sorted_keys.size - 1)
        return np.where(sorted_keys[pos] == queries, sorted_ids[pos], -1)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying spreads the bits of a packed key upwards


def _hash_table(keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.uint64]:
    """Slots (0: empty; no key packs to 0) of a table at most one quarter full, the id of each
    slot's key, and the shift that makes a key's home slot; a key sits at its home slot or
    after it, past occupied slots only (linear probing), each key once."""
    keys, first = np.unique(keys, return_index=True)
    ids = ids[first]
    bits = max(4, int(keys.size * 4 - 1).bit_length())
    slots = np.zeros(1 << bits, dtype=np.uint64)
    slot_ids = np.full(1 << bits, -1, dtype=np.int64)
    shift = np.uint64(64 - bits)
    home = (keys * _GOLDEN) >> shift
    todo = np.arange(keys.size)
    while todo.size:  # each round, the first key aiming at each free slot takes it
        free = slots[home] == 0
        _, winner = np.unique(home[free], return_index=True)
        take = todo[free][winner]
        slots[home[free][winner]], slot_ids[home[free][winner]] = keys[take], ids[take]
        left = np.ones(todo.size, dtype=bool)
        left[np.flatnonzero(free)[winner]] = False
        todo, home = todo[left], (home[left] + np.uint64(1)) & np.uint64(slots.size - 1)
    return slots, slot_ids, shift


_TABLES: weakref.WeakKeyDictionary[Any, VocabTable | None] = weakref.WeakKeyDictionary()


def vocab_table(vocab: Any) -> VocabTable | None:
    """The :class:`VocabTable` of ``vocab``, built on first use and kept while ``vocab`` lives;
    None when the bulk path cannot serve it (a word that is not valid UTF-8, or a vocabulary
    that cannot be weakly referenced)."""
    try:
        return _TABLES[vocab]
    except KeyError:
        pass
    except TypeError:
        return None
    try:
        table: VocabTable | None = VocabTable(vocab)
    except (UnicodeEncodeError, AttributeError, TypeError):
        table = None
    try:
        _TABLES[vocab] = table
    except TypeError:
        return None
    return table


@dataclass
class Batch:
    """The tokens of ASCII texts joined into one buffer: ``buf`` is ``_JOIN`` + the texts joined
    by ``_JOIN`` + ``_JOIN`` + padding; token ``j`` is ``buf[starts[j]:ends[j]]`` and
    ``clitic[j]`` says it is a clitic; text ``i`` is ``buf[text_starts[i]:text_ends[i]]`` and
    holds ``counts[i]`` tokens."""

    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    clitic: np.ndarray
    text_starts: np.ndarray
    text_ends: np.ndarray
    counts: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return self.ends - self.starts


def tokenize(texts: list[str]) -> Batch:
    """Word runs (:func:`~deniable.text.tokenize.word_class` restricted to ASCII) of the ASCII
    ``texts``, with each clitic cut where :func:`~deniable.text.tokenize.split_words` cuts it."""
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    text_starts = np.cumsum(lens + 1) - lens
    buf = np.frombuffer(_JOIN + _JOIN.join(t.encode("ascii") for t in texts) + _JOIN * (1 + _PAD), dtype=np.uint8)
    isword = _WORD[buf]
    edges = np.flatnonzero(isword[1:] != isword[:-1]) + 1
    starts, ends = edges[0::2].copy(), edges[1::2].copy()
    clitic = np.zeros(starts.size, dtype=bool)
    apostrophes = np.flatnonzero(buf == 39)
    if apostrophes.size:
        _cut_clitics(buf, isword, apostrophes, starts, ends, clitic)
    text_ends = text_starts + lens
    first = np.searchsorted(starts, np.append(text_starts, buf.size))
    return Batch(buf, starts, ends, clitic, text_starts, text_ends, np.diff(first))


def _cut_clitics(buf: np.ndarray, isword: np.ndarray, p: np.ndarray, starts: np.ndarray, ends: np.ndarray, clitic: np.ndarray) -> None:
    """Move the run boundaries at the clitics after the apostrophes at ``p``, in place: an
    enclitic (``'s 'm 'd 're 'll 've``, any case) right after a word character, or ``n't`` after a
    stem of at least one character, each followed by a separator (or the end of the text: the
    buffer has a separator byte there)."""
    n1, n2 = _LOWER[buf[p + 1]], _LOWER[buf[p + 2]]
    o = ord
    two = (n1 == o("s")) | (n1 == o("m")) | (n1 == o("d")) | (n1 == o("t"))
    three = ((n1 == o("r")) & (n2 == o("e"))) | ((n1 == o("l")) & (n2 == o("l"))) | ((n1 == o("v")) & (n2 == o("e")))
    length = np.where(two, 2, np.where(three, 3, 0))
    ok = (length > 0) & ~isword[p + length]
    is_t = n1 == o("t")
    negation = p[ok & is_t & (_LOWER[buf[p - 1]] == o("n")) & isword[p - 2]]  # p >= 1; p - 2 = -1 is padding
    enclitic = p[ok & ~is_t & isword[p - 1]]
    i_enclitic = np.searchsorted(starts, enclitic + 1)
    i_after = np.searchsorted(starts, negation + 1)
    i_stem = np.searchsorted(ends, negation)
    starts[i_enclitic] = enclitic
    starts[i_after] = negation - 1
    ends[i_stem] = negation - 1
    clitic[i_enclitic] = True
    clitic[i_after] = True


def lookup(table: VocabTable, batch: Batch, *, lower: bool) -> np.ndarray:
    """Vocabulary ids of the tokens (-1: unknown), as ``vocabulary.ids_of`` gives them for
    their keys (:func:`~deniable.text.tokenize.vocabulary_keys`): the token, lower-cased when
    ``lower``; a clitic's lower-case form, else its letters."""
    buf, starts, lengths = batch.buf, batch.starts, batch.lengths
    src = _LOWER[buf] if lower else buf
    v64 = _u64(src)
    ids = np.full(starts.size, -1, dtype=np.int64)
    short = np.flatnonzero(lengths <= 8)
    ids[short] = table.find_short(v64[starts[short]] & _MASKS[lengths[short]])
    long_ = np.flatnonzero((lengths > 8) & (lengths <= table.width))
    if long_.size and table.long_keys.size:
        strings = _packed(v64, starts[long_], lengths[long_], table.width // 8).view(f"S{table.width}").reshape(-1)
        ids[long_] = table._find(table.long_keys, table.long_ids, strings)
    odd = lengths > _MAX_WIDTH if table.longest else np.zeros(starts.size, dtype=bool)
    nul = np.flatnonzero(buf == 0)
    if nul.size:  # a NUL byte is a word character, but padding in a packed key: one by one
        j = np.searchsorted(starts, nul, side="right") - 1
        odd[j] = True
    for j in np.flatnonzero(odd).tolist():
        key = src[starts[j] : starts[j] + lengths[j]].tobytes().decode("ascii")
        ids[j] = int(np.asarray(table.ids_of([key])).reshape(-1)[0])
    cl = np.flatnonzero(batch.clitic)
    if cl.size:
        letters = _LOWER[buf[starts[cl, None] + np.arange(3)]].astype(np.uint64) << np.arange(0, 24, 8, dtype=np.uint64)
        key = letters.sum(axis=1, dtype=np.uint64) & _MASKS[lengths[cl]]
        ids[cl] = table._find(table.clitic_keys, table.clitic_ids, key)
    return ids


def case_codes(batch: Batch) -> np.ndarray:
    """:func:`~deniable.text.tokenize.case_pattern` of every token as 0 (lower), 1 (title) or 2
    (upper): title when the first byte is ``A``..``Z`` and the token has a lower-case letter or
    one byte, upper when it has neither, lower otherwise."""
    buf, starts, lengths = batch.buf, batch.starts, batch.lengths
    codes = np.zeros(starts.size, dtype=np.int64)
    cap = np.flatnonzero(_IS_UPPER[buf[starts]])
    if not cap.size:
        return codes
    s, n = starts[cap], lengths[cap]
    has_lower = np.zeros(cap.size, dtype=bool)
    v64 = _u64(buf)
    short = n <= 8
    has_lower[short] = _has_lowercase(v64[s[short]] & _MASKS[n[short]])
    mid = np.flatnonzero(~short & (n <= _MAX_WIDTH))
    if mid.size:
        has_lower[mid] = _has_lowercase(_packed(v64, s[mid], n[mid], _MAX_WIDTH // 8)).any(axis=1)
    codes[cap] = np.where(has_lower | (n == 1), 1, 2)
    for j in np.flatnonzero(n > _MAX_WIDTH).tolist():
        codes[cap[j]] = ("lower", "title", "upper").index(case_pattern(buf[s[j] : s[j] + n[j]].tobytes().decode("ascii")))
    return codes


def assemble(
    table: VocabTable,
    batch: Batch,
    chosen: np.ndarray,
    sampled: np.ndarray,
    codes: np.ndarray,
    *,
    keep: bool,
    words: Sequence[str],
    render: Callable[[str, int], str],
    n_cases: int,
) -> list[str]:
    """The output texts: separators copied, each sampled token (``sampled``) replaced by the
    output of vocabulary id ``chosen`` for its code (case pattern + ``n_cases`` × clitic kind:
    the word's bytes, upper-cased in place for an ASCII word in title or upper case, else
    ``render`` once per distinct (id, code)), each other token kept (``keep``) or removed."""
    buf, starts, lengths = batch.buf, batch.starts, batch.lengths
    n = starts.size
    src = starts.copy() if keep else np.zeros(n, dtype=np.int64)
    out_len = lengths.copy() if keep else np.zeros(n, dtype=np.int64)
    idx = np.flatnonzero(sampled)
    c, k = chosen[idx], codes[idx]
    plain = (k < n_cases) & ((k == 0) | table.word_ascii[c])
    vocab_tok, vocab_ids = idx[plain], c[plain]
    vbytes, vstart = table.word_bytes, table.word_start[vocab_ids]
    if table.word_bytes.size > 4 * buf.size:  # a large vocabulary: only the words used
        used, inverse = np.unique(vocab_ids, return_inverse=True)
        vbytes = table.word_bytes[segment_index(table.word_start[used], table.word_len[used])]
        vstart = (np.cumsum(table.word_len[used]) - table.word_len[used])[inverse.reshape(-1)]
    src[vocab_tok] = buf.size + vstart
    out_len[vocab_tok] = table.word_len[vocab_ids]
    extra = np.zeros(0, dtype=np.uint8)
    if not plain.all():
        pairs, inverse = np.unique(c[~plain] * (4 * n_cases) + k[~plain], return_inverse=True)
        rendered = [render(words[i], code).encode("utf-8") for i, code in zip((pairs // (4 * n_cases)).tolist(), (pairs % (4 * n_cases)).tolist())]
        rlen = np.fromiter(map(len, rendered), dtype=np.int64, count=len(rendered))
        extra = np.frombuffer(b"".join(rendered), dtype=np.uint8)
        src[idx[~plain]] = buf.size + vbytes.size + (np.cumsum(rlen) - rlen)[inverse.reshape(-1)]
        out_len[idx[~plain]] = rlen[inverse.reshape(-1)]
    end = int(batch.text_ends[-1]) if batch.text_ends.size else 1
    seg_start = np.empty(2 * n + 1, dtype=np.int64)
    seg_len = np.empty(2 * n + 1, dtype=np.int64)
    seg_start[0::2] = np.append(1, batch.ends)
    seg_len[0::2] = np.append(starts, end) - seg_start[0::2]
    seg_start[1::2], seg_len[1::2] = src, out_len
    out = np.concatenate((buf, vbytes, extra))[segment_index(seg_start, seg_len)]
    dst = (np.cumsum(seg_len) - seg_len)[1::2]
    title = vocab_tok[(k[plain] == 1) & (out_len[vocab_tok] > 0)]
    out[dst[title]] = _UPPER[out[dst[title]]]
    upper = vocab_tok[k[plain] == 2]
    if upper.size:
        pos = segment_index(dst[upper], out_len[upper])
        out[pos] = _UPPER[out[pos]]
    return _split(out, batch, np.concatenate(([0], np.cumsum(out_len - lengths))))


def _split(out: np.ndarray, batch: Batch, shift: np.ndarray) -> list[str]:
    """The texts of output bytes ``out``: a buffer position ``q`` before the tokens ``t..`` is
    output position ``q - 1 + shift[t]``."""
    first = np.concatenate(([0], np.cumsum(batch.counts)))
    a = (batch.text_starts - 1 + shift[first[:-1]]).tolist()
    b = (batch.text_ends - 1 + shift[first[1:]]).tolist()
    data = out.tobytes()
    text = data.decode("utf-8")
    if len(text) == len(data):
        return [text[i:j] for i, j in zip(a, b)]
    return [data[i:j].decode("utf-8") for i, j in zip(a, b)]
