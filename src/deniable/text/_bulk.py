"""The bulk text path: tokenization, vocabulary look-up, case patterns and reassembly of a whole
batch of texts on one UTF-8 byte array, with numpy.

Every result equals the per-token path's: the word runs and clitics of
:func:`~deniable.text.tokenize.split_words` (the class of each non-ASCII character is decided
once per distinct character in the batch), the keys of
:func:`~deniable.text.tokenize.vocabulary_keys` (an ASCII token is looked up as packed 64-bit
words in the hash tables of :mod:`deniable.text._vocab_table`; a token with a non-ASCII
character, a NUL byte or more than :data:`~deniable.text._vocab_table.MAX_WIDTH` bytes one by
one, with :func:`~deniable.text.tokenize.lookup_key`), the case pattern of
:func:`~deniable.text.tokenize.case_pattern` and the rendering of
:func:`deniable.text.privatize.render`. :func:`deniable.text.privatize_texts` uses it for
batches of :data:`~deniable.text.privatize.BULK_MIN_CHARS` characters or more; nothing here
samples.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._threads import even_cuts, run_parallel
from ._kernels import COMPILED_MIN_CHARS, PARALLEL_MIN_TOKENS, compiled
from ._kernels import has_lowercase as _has_lowercase
from ._kernels import lower_packed as _lower_packed
from ._vocab_table import _HOT_SHIFT, MAX_WIDTH, VocabTable, vocab_table
from .tokenize import _ASCII_WORD_CHARS, CLITICS, _is_word_char, case_pattern, lookup_key

__all__ = ["Batch", "VocabTable", "vocab_table", "tokenize", "scan", "lookup", "case_codes", "assemble", "segment_index"]

#: Byte between texts (and before the first, after the last) in a batch's buffer: a separator,
#: so no word runs across texts.
_JOIN = b" "
_PAD = 8  # bytes after the last text: every unaligned 8-byte read stays inside the buffer
#: zeros after the rendered outputs: their 8-byte reads stay inside, and the view of them has at
#: least two elements, so it is never contiguous and the compiled write loop has one signature
_TAIL = np.zeros(16, dtype=np.uint8)

#: 1 for a word byte: an ASCII word character, or any byte of a non-ASCII character (corrected
#: per character by :func:`_wide_classes`)
_WORD_BYTES = bytes(1 if c >= 128 or chr(c) in _ASCII_WORD_CHARS else 0 for c in range(256))
_LOWER = np.array([ord(chr(c).lower()) if c < 128 else c for c in range(256)], dtype=np.uint8)
_UPPER = np.array([ord(chr(c).upper()) if c < 128 else c for c in range(256)], dtype=np.uint8)
_LOW_BYTE, _CAPITAL_A, _LETTERS_26 = np.uint64(255), np.uint64(65), np.uint64(26)
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # the first n bytes
_CURLY = "\u2019".encode()  # the other apostrophe of the clitics, 3 bytes
#: the letters after the apostrophe of each clitic (CLITICS order; ``n't``: ``t``)
_LETTERS = tuple(c[1:] if c.startswith("'") else c[c.index("'") + 1 :] for c in CLITICS)
_NEGATION = CLITICS.index("n't")


def _clitic_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per first letter after an apostrophe (either case): the clitic of that one letter, the
    clitic of two letters starting with it (indices into CLITICS, -1: none), and that clitic's
    second letter (0: none)."""
    one, two, second = np.full(256, -1, dtype=np.int64), np.full(256, -1, dtype=np.int64), np.zeros(256, dtype=np.uint8)
    for index, letters in enumerate(_LETTERS):
        for first in (ord(letters[0]), ord(letters[0].upper())):
            if len(letters) == 1:
                one[first] = index
            else:
                two[first], second[first] = index, ord(letters[1])
    return one, two, second


_KIND_1, _KIND_2, _SECOND = _clitic_tables()


def _u64(buf: np.ndarray) -> np.ndarray:
    """The little-endian 8-byte integer starting at every byte of ``buf`` (a strided view)."""
    return np.ndarray(shape=(buf.size - 7,), dtype="<u8", buffer=buf, strides=(1,))


def _packed(v64: np.ndarray, starts: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """``(m, k)`` integers holding each token's bytes zero-padded to ``8 k`` bytes (tokens of at
    most ``8 k`` bytes); as ``S{8k}`` they are the tokens themselves."""
    steps = 8 * np.arange(k)
    words = v64[np.minimum(starts[:, None] + steps, v64.size - 1)]
    return words & _MASKS[np.minimum(np.maximum(lengths[:, None] - steps, 0), 8)]


def segment_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices ``starts[0] .. starts[0]+lengths[0]-1, starts[1] ..``: the gather that
    concatenates the segments."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


@dataclass
class Batch:
    """The tokens of texts joined into one UTF-8 buffer: ``buf`` is ``_JOIN`` + the texts joined
    by ``_JOIN`` + ``_JOIN`` + padding; token ``j`` is ``buf[starts[j]:ends[j]]``; ``clitic[j]``
    is 0 for a word, 1 for a clitic with ``'``, 2 with ``’``, and ``kind[j]`` its index in
    :data:`~deniable.text.tokenize.CLITICS` (-1 for a word); text ``i`` is
    ``buf[text_starts[i]:text_ends[i]]`` and holds ``counts[i]`` tokens; ``wide`` lists the
    tokens with a non-ASCII byte and ``wide_tokens`` those tokens as strings."""

    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    clitic: np.ndarray
    kind: np.ndarray
    text_starts: np.ndarray
    text_ends: np.ndarray
    counts: np.ndarray
    wide: np.ndarray
    wide_tokens: list[str]

    @cached_property
    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    @cached_property
    def head(self) -> np.ndarray:
        """The first 8 bytes of each token as a little-endian integer, zero-padded."""
        # (take copies the unaligned view once, then reads faster than indexing it in place,
        # for many tokens)
        return np.take(_u64(self.buf), self.starts) & _MASKS[np.minimum(self.lengths, 8)]


def tokenize(texts: Sequence[str]) -> Batch:
    """Word runs (:func:`~deniable.text.tokenize.word_class`) of ``texts`` (in UTF-8; a lone
    surrogate as its 3-byte form), with each clitic cut where
    :func:`~deniable.text.tokenize.split_words` cuts it."""
    raw, buf, isword, high, text_starts, lens = _buffer(texts)
    edges = np.flatnonzero(isword[1:] != isword[:-1]) + 1
    starts, ends = edges[0::2].copy(), edges[1::2].copy()
    clitic = np.zeros(starts.size, dtype=np.int8)
    kind = np.full(starts.size, -1, dtype=np.int8)
    apostrophes = np.flatnonzero(buf == 39)
    if high.size:
        curly = high[(buf[high] == _CURLY[0]) & (buf[high + 1] == _CURLY[1]) & (buf[high + 2] == _CURLY[2])]
        apostrophes = np.concatenate((apostrophes, curly))
    if apostrophes.size:
        width = np.where(buf[apostrophes] == 39, 1, len(_CURLY))
        _cut_clitics(buf, isword, apostrophes, width, starts, ends, clitic, kind)
    wide = np.zeros(0, dtype=np.int64)
    if high.size:
        owner = np.searchsorted(starts, high, side="right") - 1
        wide = np.unique(owner[(owner >= 0) & (high < ends[owner])])
    return _batch(raw, buf, starts, ends, clitic, kind, text_starts, lens, wide)


def _buffer(texts: Sequence[str]) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The batch's buffer (as bytes and as an array), whether each byte belongs to a word
    character, the positions of the bytes from 128, and each text's start and length."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    text_starts = np.cumsum(lens + 1) - lens
    raw = _JOIN + _JOIN.join(encoded) + _JOIN * (1 + _PAD)
    buf = np.frombuffer(raw, dtype=np.uint8)
    isword = np.frombuffer(raw.translate(_WORD_BYTES), dtype=bool)
    high = np.zeros(0, dtype=np.int64)
    if not raw.isascii():
        high = np.flatnonzero(buf >= 0x80)
        isword = isword.copy()
        isword[high] = _wide_classes(buf, high)
        isword.flags.writeable = False  # read-only as for ASCII text: one signature of the compiled scan loop
    return raw, buf, isword, high, text_starts, lens


def _batch(raw: bytes, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, clitic: np.ndarray, kind: np.ndarray, text_starts: np.ndarray, lens: np.ndarray, wide: np.ndarray) -> Batch:
    wide_tokens = [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts[wide].tolist(), ends[wide].tolist())]
    first = np.searchsorted(starts, np.append(text_starts, buf.size))
    return Batch(buf, starts, ends, clitic, kind, text_starts, text_starts + lens, np.diff(first), wide, wide_tokens)


def scan(table: VocabTable, texts: Sequence[str], *, lower: bool, cased: bool = True) -> tuple[Batch, np.ndarray, np.ndarray]:
    """:func:`tokenize`, :func:`lookup` and :func:`case_codes` of ``texts`` in one call. With the
    compiled loops (:mod:`deniable.text._kernels`; loaded for a batch of
    :data:`~deniable.text._kernels.COMPILED_MIN_CHARS` characters or more), one pass over the
    word runs, cut between threads at text boundaries, decides every token but those with a
    non-ASCII or NUL byte, more than :data:`~deniable.text._vocab_table.MAX_WIDTH` bytes or a
    hash shared by keys: those are looked up one by one (and cased by ``case_pattern``), as the
    per-token path does; without them, the numpy functions. ``cased=False``: every case code 0
    (lower case)."""
    kernels = compiled(load=sum(map(len, texts)) >= COMPILED_MIN_CHARS)
    if kernels is None:
        batch = tokenize(texts)
        return batch, lookup(table, batch, lower=lower), case_codes(batch) if cased else np.zeros(batch.starts.size, dtype=np.int64)
    raw, buf, isword, _, text_starts, lens = _buffer(texts)
    edges = np.flatnonzero(isword[1:] != isword[:-1]) + 1
    runs = edges.size // 2
    starts, ends, ids = np.empty(runs, dtype=np.int64), np.empty(runs, dtype=np.int64), np.empty(runs, dtype=np.int64)
    clitic, kind, cases = np.empty(runs, dtype=np.int8), np.empty(runs, dtype=np.int8), np.empty(runs, dtype=np.int64)
    is_wide = np.empty(runs, dtype=bool)
    short, long_, v64, hot = table.short, table.long, _u64(buf), table.hot_pairs.view(np.uint64)
    short_pairs, long_pairs = short.pairs.view(np.uint64), long_.pairs.view(np.uint64)

    def part(a: int, b: int) -> Callable[[], None]:  # runs a..b-1, after whitespace: no clitic crosses
        return lambda: kernels["scan"](
            buf, v64, edges[2 * a : 2 * b], _MASKS, lower, hot, _HOT_SHIFT, short_pairs, short.shift, short.mask, isword,
            table.width, long_pairs, long_.shift, long_.mask, table.long_rows, table.long_ids, table.shared_hashes,
            _KIND_1, _KIND_2, _SECOND, _LOWER, _NEGATION, table.clitic_ids, MAX_WIDTH, starts[a:b], ends[a:b], clitic[a:b], kind[a:b], ids[a:b], cases[a:b], is_wide[a:b])

    run_parallel([part(a, b) for a, b in itertools.pairwise(_run_cuts(buf, edges, runs))])
    batch = _batch(raw, buf, starts, ends, clitic, kind, text_starts, lens, np.flatnonzero(is_wide))
    rest = np.flatnonzero(ids == -2)  # a non-ASCII or NUL byte, more than MAX_WIDTH bytes, a shared hash
    if rest.size:
        ids[rest] = _one_by_one(table, [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts[rest].tolist(), ends[rest].tolist())], lower)
    if not cased:
        cases[:] = 0
        return batch, ids, cases
    rest = np.flatnonzero(cases < 0)  # non-ASCII, or more than MAX_WIDTH bytes
    if rest.size:
        cases[rest] = [_CASE_INDEX[case_pattern(raw[a:b].decode("utf-8", "surrogatepass"))] for a, b in zip(starts[rest].tolist(), ends[rest].tolist())]
    return batch, ids, cases


def _wide_classes(buf: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Whether each byte at ``high`` (every byte from 128 of UTF-8, in order) belongs to a
    word character (:func:`~deniable.text.tokenize._is_word_char`), decided once per distinct
    code point."""
    lead = buf[high] >= 0xC0
    at = high[lead]
    b0 = buf[at].astype(np.int32)
    c1, c2, c3 = ((buf[at + k] & 0x3F).astype(np.int32) for k in (1, 2, 3))
    cp = np.where(
        b0 < 0xE0, ((b0 & 0x1F) << 6) | c1, np.where(b0 < 0xF0, ((b0 & 0x0F) << 12) | (c1 << 6) | c2, ((b0 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3)
    )
    distinct, inverse = np.unique(cp, return_inverse=True)
    word = np.array([_is_word_char(chr(c)) for c in distinct.tolist()], dtype=bool)[inverse.reshape(-1)]
    return word[np.cumsum(lead) - 1]  # each byte takes its character's lead byte's class


def _cut_clitics(
    buf: np.ndarray,
    isword: np.ndarray,
    p: np.ndarray,
    width: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    clitic: np.ndarray,
    kind: np.ndarray,
) -> None:
    """Move the run boundaries at the clitics after the apostrophes at ``p`` (``width`` bytes
    each: ``'`` or ``’``), in place: an enclitic (``'s 'm 'd 're 'll 've``, any case) right after
    a word character, or ``n't`` after a stem of at least one character, each followed by a
    separator (or the end of the text: the buffer has a separator byte there)."""
    a = p + width  # the first letter
    n1, n2 = buf[a], buf[a + 1]
    two = (_SECOND[n1] == _LOWER[n2]) & (_SECOND[n1] != 0)
    which = np.where(two, _KIND_2[n1], _KIND_1[n1])
    length = np.where(two, 2, 1)
    ok = (which >= 0) & ~isword[a + length]
    negation = ok & (which == _NEGATION) & (_LOWER[buf[p - 1]] == ord("n")) & isword[p - 2]  # p >= 1; p - 2 = -1 is padding
    enclitic = ok & (which != _NEGATION) & isword[p - 1]
    i_enclitic = np.searchsorted(starts, a[enclitic])
    i_after = np.searchsorted(starts, a[negation])
    i_stem = np.searchsorted(ends, p[negation])
    starts[i_enclitic] = p[enclitic]
    starts[i_after] = p[negation] - 1
    ends[i_stem] = p[negation] - 1
    clitic[i_enclitic] = np.where(width[enclitic] == 1, 1, 2)
    clitic[i_after] = np.where(width[negation] == 1, 1, 2)
    kind[i_enclitic] = which[enclitic]
    kind[i_after] = _NEGATION


def lookup(table: VocabTable, batch: Batch, *, lower: bool) -> np.ndarray:
    """Vocabulary ids of the tokens (-1: unknown), as ``vocabulary.ids_of`` gives them for
    their keys (:func:`~deniable.text.tokenize.vocabulary_keys`): the token, lower-cased when
    ``lower``; a clitic's lower-case form, else its letters."""
    buf, starts, lengths = batch.buf, batch.starts, batch.lengths
    v64 = _u64(buf)
    short = lengths <= 8
    head = _lower_packed(batch.head) if lower else batch.head
    ids = table.find_short(head)
    long_ = np.flatnonzero(~short)
    ids[long_] = -1
    long_ = long_[lengths[long_] <= table.width]
    one_by_one = np.zeros(starts.size, dtype=bool)
    if long_.size and (table.long_ids.size or table.shared_hashes.size):
        s, n = starts[long_], lengths[long_]
        columns = [head[long_]]
        for offset in range(8, table.width, 8):  # each further 8 bytes (zero past the token's end)
            column = np.zeros(long_.size, dtype=np.uint64)
            part = np.flatnonzero(n > offset)
            column[part] = v64[s[part] + offset] & _MASKS[np.minimum(n[part] - offset, 8)]
            columns.append(_lower_packed(column) if lower else column)
        ids[long_], one_by_one[long_] = table.find_long(columns)
    if table.one_by_one:
        one_by_one |= lengths > MAX_WIDTH
    nul = np.flatnonzero(buf == 0)
    if nul.size:  # a NUL byte is a word character, but padding in a packed key
        j = np.searchsorted(starts, nul, side="right") - 1
        one_by_one[j[(j >= 0) & (nul < batch.ends[j])]] = True
    one_by_one[batch.wide] = False
    todo = np.flatnonzero(one_by_one).tolist()
    tokens = batch.wide_tokens + [buf[starts[j] : starts[j] + lengths[j]].tobytes().decode("ascii") for j in todo]
    if tokens:
        ids[np.concatenate((batch.wide, np.array(todo, dtype=np.int64)))] = _one_by_one(table, tokens, lower)
    cl = np.flatnonzero(batch.kind >= 0)
    ids[cl] = table.clitic_ids[batch.kind[cl]]
    return ids


def _one_by_one(table: VocabTable, tokens: list[str], lower: bool) -> list[int]:
    """The ids of ``tokens`` as the per-token path finds them: the vocabulary's ids of their
    :func:`~deniable.text.tokenize.lookup_key`, once per distinct token."""
    keys = {t: lookup_key(t, lower=lower) for t in tokens}
    found = dict(zip(keys.values(), np.asarray(table.ids_of(list(keys.values())), dtype=np.int64).reshape(-1).tolist()))
    return [found[keys[t]] for t in tokens]


def case_codes(batch: Batch) -> np.ndarray:
    """:func:`~deniable.text.tokenize.case_pattern` of every token as 0 (lower), 1 (title) or 2
    (upper): for an ASCII token, title when the first byte is ``A``..``Z`` and the token has a
    lower-case letter or one byte, upper when it has neither, lower otherwise; for the others,
    ``case_pattern`` itself."""
    buf, starts, lengths = batch.buf, batch.starts, batch.lengths
    codes = np.zeros(starts.size, dtype=np.int64)
    cap = np.flatnonzero((batch.head & _LOW_BYTE) - _CAPITAL_A < _LETTERS_26)  # the first byte in A..Z
    if cap.size:
        s, n = starts[cap], lengths[cap]
        has_lower = _has_lowercase(batch.head[cap])  # in the first 8 bytes
        mid = np.flatnonzero(~has_lower & (n > 8) & (n <= MAX_WIDTH))
        if mid.size:
            has_lower[mid] = _has_lowercase(_packed(_u64(buf), s[mid], n[mid], MAX_WIDTH // 8)).any(axis=1)
        codes[cap] = np.where(has_lower | (n == 1), 1, 2)
        for j in np.flatnonzero(n > MAX_WIDTH).tolist():
            codes[cap[j]] = _CASE_INDEX[case_pattern(buf[s[j] : s[j] + n[j]].tobytes().decode("utf-8", "surrogatepass"))]
    if batch.wide.size:
        codes[batch.wide] = [_CASE_INDEX[case_pattern(t)] for t in batch.wide_tokens]
    return codes


_CASE_INDEX = {"lower": 0, "title": 1, "upper": 2}


def assemble(
    table: VocabTable,
    batch: Batch,
    chosen: np.ndarray,
    sampled: np.ndarray,
    cases: np.ndarray,
    *,
    keep: bool,
    words: Sequence[str],
    render: Callable[[str, int], str],
    n_cases: int,
) -> list[str]:
    """The output texts: separators copied, each sampled token (``sampled``) replaced by the
    output of vocabulary id ``chosen`` for its case pattern (``cases``) and clitic kind
    (``batch.clitic``): the word's bytes (after a space in a clitic's place, unless the word is
    a clitic), upper-cased in place for an ASCII word in title or upper case, else ``render``
    once per distinct (id, code) (code: case + ``n_cases`` × clitic kind); each other token
    kept (``keep``) or removed."""
    buf, starts, lengths = batch.buf, batch.starts, batch.lengths
    everything = bool(sampled.all())
    # rendered: a non-ASCII word in title or upper case, a word written as a clitic in a
    # clitic's place; every other sampled token is a word's bytes (after a space for a clitic)
    cand = np.flatnonzero(batch.clitic) if table.all_ascii else np.flatnonzero((cases != 0) | (batch.clitic != 0))
    c = chosen[cand]
    plain = np.ones(cand.size, dtype=bool) if table.all_ascii else (cases[cand] == 0) | table.word_ascii[c]
    special = cand[sampled[cand] & (~plain | ((batch.clitic[cand] != 0) & table.word_clitic[c]))]
    rendered = _rendered(batch, chosen, cases, special, words, render, n_cases)
    kernels = compiled(load=False)  # (loaded by scan for a large batch)
    if kernels is not None and table.word_span is not None:
        return _write_compiled(kernels["write"], table, batch, chosen, sampled, cases, special, keep=keep, rendered=rendered)
    direct = sampled.copy()
    direct[special] = False
    cl = np.flatnonzero(batch.clitic)
    spaced = cl[direct[cl]]  # " " + word
    vbytes, src, out_len = _word_sources(table, buf, chosen, direct)
    src[spaced] -= 1
    out_len[spaced] += 1
    if not everything:  # a token not sampled: kept (``keep``) or removed
        src = np.where(sampled, src, starts)
        out_len = np.where(sampled, out_len, lengths if keep else 0)
    extra, offsets, rlen = rendered
    src[special] = buf.size + vbytes.size + offsets
    out_len[special] = rlen
    shift = np.concatenate(([0], np.cumsum(out_len - lengths)))
    dst = starts - 1 + shift[:-1]  # where each token's output starts
    total = int(batch.text_ends[-1]) - 1 + int(shift[-1]) if batch.text_ends.size else 0
    out = np.concatenate((buf, vbytes, extra))[_gather_index(starts, batch.ends, src, out_len, dst, total)]
    dst[spaced] += 1  # where each direct output's word starts
    out_len[spaced] -= 1
    up = np.flatnonzero(direct & (cases != 0) & (out_len > 0))  # an ASCII word in title or upper case
    if up.size:
        title = up[cases[up] == 1]
        out[dst[title]] = _UPPER[out[dst[title]]]
        upper = up[cases[up] == 2]
        if upper.size:
            pos = segment_index(dst[upper], out_len[upper])
            out[pos] = _UPPER[out[pos]]
    return _split(out, batch, shift)


def _rendered(batch: Batch, chosen: np.ndarray, cases: np.ndarray, special: np.ndarray, words: Sequence[str], render: Callable[[str, int], str], n_cases: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The outputs of the ``special`` tokens, rendered once per distinct (id, code): their bytes
    one after the other, and each token's offset and length in them."""
    if not special.size:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    c, k = chosen[special], cases[special] + n_cases * batch.clitic[special]
    pairs, inverse = np.unique(c * (4 * n_cases) + k, return_inverse=True)
    rendered = [render(words[i], code).encode("utf-8") for i, code in zip((pairs // (4 * n_cases)).tolist(), (pairs % (4 * n_cases)).tolist())]
    rlen = np.fromiter(map(len, rendered), dtype=np.int64, count=len(rendered))
    inverse = inverse.reshape(-1)
    return np.frombuffer(b"".join(rendered), dtype=np.uint8), (np.cumsum(rlen) - rlen)[inverse], rlen[inverse]


def _write_compiled(
    write: Callable[..., None], table: VocabTable, batch: Batch, chosen: np.ndarray, sampled: np.ndarray, cases: np.ndarray, special: np.ndarray,
    *, keep: bool, rendered: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> list[str]:
    """:func:`assemble`'s output written by the compiled loop (:mod:`deniable.text._kernels`), in
    parts on :func:`~deniable._threads.threads` threads at most (each part's texts into their own
    output), cut at even token counts: a text with a cut in it is written as two pieces, the one
    ending and the other starting where its cut token starts, then joined."""
    extra, offsets, rlen = rendered
    is_special = np.zeros(chosen.size, dtype=bool)
    is_special[special] = True
    size = batch.buf.size + max(table.longest_word + 1, int(rlen.max(initial=0)), int(batch.lengths.max(initial=0))) * chosen.size
    if size > 1 << 26:  # a closer bound, where this one is large
        size = batch.buf.size + int(table.word_len[chosen].sum()) + chosen.size + int(rlen.sum()) + int(batch.lengths.sum())
    first = np.concatenate(([0], np.cumsum(batch.counts)))
    b64, w64, e64 = _u64(batch.buf), _u64(table.word_bytes), _u64(np.concatenate((extra, _TAIL)))
    cut = np.asarray(_parts(chosen.size), dtype=np.int64)  # the first token of each part but the first
    within = np.searchsorted(first, cut, side="right") - 1  # the text each cut token is in
    inside = cut > first[within]  # not a text's first token: that text is written in two pieces
    at, split = within[inside] + 1, cut[inside]  # where the second pieces go; their first tokens
    text_starts, text_ends = np.insert(batch.text_starts, at, batch.starts[split]), np.insert(batch.text_ends, at - 1, batch.starts[split])
    first = np.insert(first, at, split)
    texts_at = [0, *np.searchsorted(first, cut).tolist(), text_starts.size]
    outs = [np.empty(size + 8, dtype=np.uint8) for _ in texts_at[1:]]  # (pages never written cost nothing)
    bounds = [np.empty(2 * (j - i), dtype=np.int64) for i, j in itertools.pairwise(texts_at)]
    specials_before = np.searchsorted(special, first[texts_at[:-1]])  # each part's first rendered token

    def part(k: int) -> Callable[[], None]:
        i, j = texts_at[k], texts_at[k + 1]
        return lambda: write(b64, batch.starts, batch.ends, batch.clitic, text_starts[i:j], text_ends[i:j], first[i : j + 1], sampled, keep,
                             is_special, int(specials_before[k]), chosen, cases, table.word_span, w64, offsets, rlen, e64, _UPPER, outs[k], _u64(outs[k]), bounds[k])

    run_parallel([part(k) for k in range(len(outs))])
    texts = [t for o, b in zip(outs, bounds) for t in _texts_of(o, b)]
    for piece in (at + np.arange(at.size))[::-1].tolist():  # the second pieces, from the last
        texts[piece - 1] += texts.pop(piece)
    return texts


def _texts_of(out: np.ndarray, bounds: np.ndarray) -> list[str]:
    """The texts at ``bounds`` (start, end, start, ...) of UTF-8 bytes ``out``."""
    data = out[: int(bounds[-1]) if bounds.size else 0].tobytes()
    a, b = bounds[0::2].tolist(), bounds[1::2].tolist()
    if data.isascii():
        text = data.decode("ascii")
        return [text[i:j] for i, j in zip(a, b)]
    return [data[i:j].decode("utf-8", "surrogatepass") for i, j in zip(a, b)]


def _parts(n: int) -> list[int]:
    """The inner cuts of :func:`~deniable._threads.even_cuts` of ``n`` tokens (parts of at least
    :data:`~deniable.text._kernels.PARALLEL_MIN_TOKENS`)."""
    return even_cuts(n, PARALLEL_MIN_TOKENS)[1:-1]


#: ASCII whitespace bytes: a run of word bytes followed by one takes no clitic from the next run
_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\x0b\x0c")] = True
_CUT_WINDOW = 64  # runs searched after an even cut for one that follows whitespace


def _run_cuts(buf: np.ndarray, edges: np.ndarray, runs: int) -> list[int]:
    """Where the compiled scan cuts the word runs ``edges`` of ``buf`` between threads: at about
    even points (:func:`_parts`), each moved on to the first run after a whitespace byte (a clitic
    joins a run only to the one right after it, across an apostrophe: each part is then scanned as
    in one pass, within a text too), every part at least
    :data:`~deniable.text._kernels.PARALLEL_MIN_TOKENS` runs."""
    cuts = [0]
    for r in _parts(runs):
        r = max(r, cuts[-1] + PARALLEL_MIN_TOKENS)
        if r >= runs:
            break
        after_space = np.flatnonzero(_SPACE[buf[edges[2 * r - 1 : 2 * (r + _CUT_WINDOW) - 1 : 2]]])
        if after_space.size and runs - (r + int(after_space[0])) >= PARALLEL_MIN_TOKENS:
            cuts.append(r + int(after_space[0]))
    cuts.append(runs)
    return cuts


def _word_sources(table: VocabTable, buf: np.ndarray, chosen: np.ndarray, direct: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The vocabulary bytes to copy from (placed after ``buf``), and where each token's word
    starts in the concatenation and its length: all of the vocabulary's bytes, or, when they
    are many more than the batch's, those of the words used by ``direct`` tokens (each after a
    space)."""
    if table.word_span is not None:
        span = table.word_span[chosen]
        vbytes, vstart, vlen = table.word_bytes, span >> 24, span & 0xFFFFFF
    else:
        vbytes, vstart, vlen = table.word_bytes, table.word_start[chosen], table.word_len[chosen]
    if table.word_bytes.size > 4 * buf.size:
        used, inverse = np.unique(chosen[direct], return_inverse=True)
        with_space = table.word_len[used] + 1
        vbytes = table.word_bytes[segment_index(table.word_start[used] - 1, with_space)]
        vstart = np.zeros(chosen.size, dtype=np.int64)
        vstart[direct] = (np.cumsum(with_space) - with_space + 1)[inverse.reshape(-1)]
    return vbytes, vstart + buf.size, vlen


def _gather_index(starts: np.ndarray, ends: np.ndarray, src: np.ndarray, out_len: np.ndarray, dst: np.ndarray, total: int) -> np.ndarray:
    """Source position of each of the ``total`` output bytes: output byte ``q`` is buffer byte
    ``q + 1`` plus an offset that changes only where a token's output starts (by ``src - starts``)
    or ends (by ``ends - (src + out_len)``); the changes at one position add up (empty
    separators and outputs), and one cumulative sum gives every index."""
    index = np.ones(total + 1, dtype=np.int64)  # (a change at the end of the output is no byte's)
    np.add.at(index, dst, src - starts)
    np.add.at(index, dst + out_len, ends - (src + out_len))
    return np.cumsum(index[:total], out=index[:total])


def _split(out: np.ndarray, batch: Batch, shift: np.ndarray) -> list[str]:
    """The texts of output bytes ``out``: a buffer position ``q`` before the tokens ``t..`` is
    output position ``q - 1 + shift[t]``. ASCII output is decoded at once, other output text by
    text (a text with a wide character is then the only one stored wide)."""
    first = np.concatenate(([0], np.cumsum(batch.counts)))
    a = (batch.text_starts - 1 + shift[first[:-1]]).tolist()
    b = (batch.text_ends - 1 + shift[first[1:]]).tolist()
    data = out.tobytes()
    if data.isascii():
        text = data.decode("ascii")
        return [text[i:j] for i, j in zip(a, b)]
    return [data[i:j].decode("utf-8", "surrogatepass") for i, j in zip(a, b)]
