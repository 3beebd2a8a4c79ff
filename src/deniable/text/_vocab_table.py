"""A vocabulary's ASCII keys in open-addressing hash tables, for the bulk text path's look-ups.

Keys of at most 8 bytes are stored as themselves, packed into one little-endian 64-bit integer
(zero-padded); keys of 9 to :data:`MAX_WIDTH` bytes as the 64-bit hash of their packed words,
with the key's row kept beside it: a query is looked up by hash, then its packed words are
compared with the row found, so a hash collision never maps a token to another word's id (two
keys with the same hash are left to one-by-one look-ups, as are keys longer than
:data:`MAX_WIDTH` and keys with a NUL byte). Nothing here samples.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .tokenize import CLITICS, clitic_form

#: Keys (and tokens) longer than this many bytes are looked up one by one (none are, in common
#: vocabularies).
MAX_WIDTH = 64
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying spreads the bits of a packed key upwards
_ONE = np.uint64(1)
_WINDOW = 16  # slots probed at once past a key's home slot
_HOT_KEYS = 4096
_HOT_BITS = 13
_HOT_SHIFT = np.uint64(64 - _HOT_BITS)


def hash_step(h: Any, word: Any) -> Any:
    """The hash of a key so far (``h``) and its next packed word: arrays, or scalars in the
    compiled look-up (:mod:`deniable.text._kernels` compiles this function)."""
    return (h * GOLDEN) ^ word


def hash_finish(h: Any) -> Any:
    """The final, non-zero hash (arrays or scalars, as :func:`hash_step`)."""
    return (h ^ (h >> np.uint64(29))) | _ONE


def row_hash(columns: Sequence[np.ndarray]) -> np.ndarray:
    """A non-zero 64-bit hash of each key given as its packed words, one array per word."""
    h = columns[0]
    for column in columns[1:]:
        h = hash_step(h, column)
    return hash_finish(h)


def pack_keys(keys: Sequence[bytes], width: int) -> np.ndarray:
    """``(len(keys), width // 8)`` packed words of byte strings of at most ``width`` bytes."""
    data = b"".join(k.ljust(width, b"\0") for k in keys)
    return np.frombuffer(data, dtype="<u8").reshape(len(keys), width // 8)


class HashTable:
    """Non-zero 64-bit keys → non-negative values: open addressing, linear probing, at most one
    quarter full. Each key is stored once (the first value given for it)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        keys, first = np.unique(keys, return_index=True)
        values = values[first]
        bits = max(4, int(keys.size * 4 - 1).bit_length())
        self.slots = np.zeros(1 << bits, dtype=np.uint64)  # 0: empty
        self.values = np.full(1 << bits, -1, dtype=np.int64)
        self.shift = np.uint64(64 - bits)
        self.mask = np.uint64((1 << bits) - 1)
        home = (keys * GOLDEN) >> self.shift
        todo = np.arange(keys.size)
        while todo.size:  # each round, the first key aiming at each free slot takes it
            free = self.slots[home] == 0
            _, winner = np.unique(home[free], return_index=True)
            take = todo[free][winner]
            self.slots[home[free][winner]], self.values[home[free][winner]] = keys[take], values[take]
            left = np.ones(todo.size, dtype=bool)
            left[np.flatnonzero(free)[winner]] = False
            todo, home = todo[left], (home[left] + _ONE) & self.mask
        # each slot's key and value side by side, read as one 16-byte item: one memory access
        self.pairs = np.stack((self.slots, self.values.view(np.uint64)), axis=1).view(np.complex128).reshape(-1)

    def find(self, queries: np.ndarray) -> np.ndarray:
        """The value of each query (-1: not a key), all queries at once: the home slot first,
        then, for the few queries that meet another key there, the next :data:`_WINDOW` slots
        at once, until each meets its key or an empty slot."""
        slot = (queries * GOLDEN) >> self.shift
        pair = self.pairs[slot].view(np.uint64).reshape(-1, 2)
        found = pair[:, 0]
        out = np.where(found == queries, pair[:, 1].view(np.int64), -1)
        todo = np.flatnonzero((found != queries) & (found != 0))
        step = 1
        while todo.size:
            window = (slot[todo, None] + np.arange(step, step + _WINDOW, dtype=np.uint64)) & self.mask
            found = self.slots[window]
            stop = (found == queries[todo, None]) | (found == 0)
            first = stop.argmax(axis=1)
            rows = np.arange(todo.size)
            at = window[rows, first]
            hit = found[rows, first] == queries[todo]
            out[todo[hit]] = self.values[at[hit]]
            todo = todo[~stop[rows, first]]
            step += _WINDOW
        return out


class VocabTable:
    """A vocabulary's ASCII keys for vectorized look-ups (:meth:`find_short`, :meth:`find_long`),
    the ids of the clitics (:data:`~deniable.text.tokenize.CLITICS` order: the clitic, else its
    letters, as :func:`~deniable.text.tokenize.vocabulary_keys` looks them up), and every word's
    UTF-8 bytes for the output."""

    def __init__(self, vocab: Any) -> None:
        words: Sequence[str] = vocab.words
        encoded = [w.encode("utf-8") for w in words]  # a lone surrogate raises: no bulk path
        self.word_len = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        # every word after a space: " " + word is the output in a clitic's place (render)
        self.word_start = np.cumsum(self.word_len + 1) - self.word_len
        # (8 bytes after the last word: every 8-byte read of a word stays inside)
        self.word_bytes = np.frombuffer(b" " + b" ".join(encoded) + b"\0" * 8, dtype=np.uint8)
        self.longest_word = int(self.word_len.max(initial=0))
        #: each word's start and length in one integer (start << 24 | length), one read per word
        self.word_span = self.word_start << 24 | self.word_len if self.longest_word < 1 << 24 and self.word_bytes.size < 1 << 38 else None
        self.word_ascii = self.word_len == np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self.all_ascii = bool(self.word_ascii.all())
        #: words written as a clitic in a clitic's place (:func:`~deniable.text.tokenize.clitic_form`)
        self.word_clitic = np.zeros(len(words), dtype=bool)
        self.word_clitic[[j for j, w in enumerate(words) if len(w) <= 4 and clitic_form(w) is not None]] = True
        keys = list(dict.fromkeys(b for w, b in zip(words, encoded) if 0 < len(b) == len(w) and "\0" not in w))
        ids = np.asarray(vocab.ids_of([k.decode("ascii") for k in keys]), dtype=np.int64).reshape(-1)
        keys = [k for k, i in zip(keys, ids.tolist()) if i >= 0]  # the id ids_of gives the key
        ids = ids[ids >= 0]
        lens = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
        short = np.flatnonzero(lens <= 8)
        packed = pack_keys([keys[j] for j in short.tolist()], 8).reshape(-1)
        self.short = HashTable(packed, ids[short])
        # the first keys (the most frequent words, in a vocabulary sorted by frequency) again in a
        # direct-mapped table small enough to stay in the processor's cache: most tokens are
        # found there, the others in ``short``
        home = (packed[:_HOT_KEYS] * GOLDEN) >> _HOT_SHIFT
        _, first = np.unique(home, return_index=True)  # one key per slot, the earliest
        self.hot_keys = np.zeros(1 << _HOT_BITS, dtype=np.uint64)
        self.hot_ids = np.full(1 << _HOT_BITS, -1, dtype=np.int64)
        self.hot_keys[home[first]], self.hot_ids[home[first]] = packed[first], ids[short][first]
        self.hot_pairs = np.stack((self.hot_keys, self.hot_ids.view(np.uint64)), axis=1).view(np.complex128).reshape(-1)
        long_ = np.flatnonzero((lens > 8) & (lens <= MAX_WIDTH))
        self.width = int(8 * -(-lens[long_].max() // 8)) if long_.size else 8
        rows = pack_keys([keys[j] for j in long_.tolist()], self.width)
        hashes = row_hash(rows.T) if long_.size else np.zeros(0, dtype=np.uint64)
        distinct, counts = np.unique(hashes, return_counts=True)
        #: hashes of two or more keys: their tokens are looked up one by one
        self.shared_hashes = distinct[counts > 1]
        own = ~np.isin(hashes, self.shared_hashes)
        #: the packed words of each key (a row each), and each word of all keys (an array each)
        self.long_rows = np.ascontiguousarray(rows[own])
        self.long_columns = [np.ascontiguousarray(c) for c in self.long_rows.T]
        self.long_ids = ids[long_][own]
        self.long = HashTable(hashes[own], np.arange(int(own.sum())))
        self.one_by_one = bool(self.shared_hashes.size) or bool((lens > MAX_WIDTH).any())
        clitic_ids = []
        for c in CLITICS:
            i = int(np.asarray(vocab.ids_of([c])).reshape(-1)[0])
            clitic_ids.append(i if i >= 0 else int(np.asarray(vocab.ids_of([c.replace("'", "")])).reshape(-1)[0]))
        self.clitic_ids = np.array(clitic_ids, dtype=np.int64)
        self.ids_of = vocab.ids_of

    def find_short(self, packed: np.ndarray) -> np.ndarray:
        """Ids of keys of 1 to 8 bytes, packed (-1: not a key; a query 0, which no key packs to,
        may give -1 too)."""
        pair = self.hot_pairs[(packed * GOLDEN) >> _HOT_SHIFT].view(np.uint64).reshape(-1, 2)
        ids = np.ascontiguousarray(pair[:, 1]).view(np.int64)
        miss = np.flatnonzero(pair[:, 0] != packed)
        ids[miss] = self.short.find(packed[miss])  # (a miss's hot id is another key's)
        return ids

    def find_long(self, columns: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of keys of 9 to :attr:`width` bytes, given as their ``width // 8`` packed words
        (one array per word; -1: not a key), and the mask of the keys to look up one by one
        (their hash is shared by keys of the vocabulary)."""
        h = row_hash(columns)
        row = self.long.find(h) if self.long_ids.size else np.full(h.size, -1, dtype=np.int64)
        ok = np.flatnonzero(row >= 0)
        same = np.ones(ok.size, dtype=bool)
        for stored, column in zip(self.long_columns, columns):  # the same bytes
            same &= stored[row[ok]] == column[ok]
        ids = np.full(h.size, -1, dtype=np.int64)
        ids[ok[same]] = self.long_ids[row[ok[same]]]
        shared = np.isin(h, self.shared_hashes) if self.shared_hashes.size else np.zeros(h.size, dtype=bool)
        return ids, shared


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
