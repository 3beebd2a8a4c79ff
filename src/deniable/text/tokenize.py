"""Tokenization that keeps the input's layout without leaking word material.

**Separators** are whitespace and Unicode punctuation (general category ``P*``: ``. , ; : ! ?
' " ( ) - _ @ # %`` …). They pass through unchanged, so a privatized text keeps the input's layout.
**Words** are maximal runs of every other character — letters *with their combining marks*,
digits, symbols (``$ + ⓙ 😀``), format characters (ZWJ) — so no part of a word is ever copied to
the output: a word is either looked up in the vocabulary or, if unknown, privatized as UNK.
``"".join(split_words(t)) == t`` always holds.

Lookup keys are NFC-normalized (so decomposed ``cafe\\u0301`` finds ``café``) and lower-cased for
uncased vocabularies. :data:`deniable.brr_runtime` carries an identical copy of these rules.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

import numpy as np

__all__ = ["word_pattern", "ascii_word_pattern", "split_words", "words_of", "token_codes", "lookup_key", "case_pattern", "apply_case"]


@lru_cache(maxsize=1)
def word_pattern() -> re.Pattern[str]:
    """The compiled word pattern: a capturing group of runs of non-separator characters."""
    ranges: list[list[int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp))[0] == "P":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    punct = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
    return re.compile(f"([^\\s{punct}]+)")


@lru_cache(maxsize=1)
def ascii_word_pattern() -> re.Pattern[str]:
    """:func:`word_pattern` restricted to ASCII text: the same matches on any ASCII string, with a
    small character class (about twice as fast to split with)."""
    punct = "".join(re.escape(chr(cp)) for cp in range(128) if unicodedata.category(chr(cp))[0] == "P")
    return re.compile(f"([^\\s{punct}]+)")


def split_words(text: str) -> list[str]:
    """Split into ``[sep, word, sep, word, ..., sep]``: words at odd indices, separators at even
    ones (possibly empty). Joining the list gives back ``text``."""
    return (ascii_word_pattern() if text.isascii() else word_pattern()).split(text)


def words_of(text: str) -> list[str]:
    """The words of ``text``, in order."""
    return word_pattern().findall(text)


def token_codes(tokens: list[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, distinct)``: the distinct tokens in order of first occurrence and the index
    into them of every token (``distinct[codes[i]] == tokens[i]``), without a Python frame per
    token, so per-token work can be done once per distinct token."""
    distinct = list(dict.fromkeys(tokens))
    index = dict(zip(distinct, range(len(distinct))))
    return np.fromiter(map(index.__getitem__, tokens), dtype=np.int64, count=len(tokens)), distinct


def lookup_key(word: str, *, lower: bool) -> str:
    """The vocabulary key of a word: NFC-normalized, lower-cased when ``lower``."""
    if not word.isascii():
        word = unicodedata.normalize("NFC", word)
    return word.lower() if lower else word


def case_pattern(token: str) -> str:
    """``"upper"`` (``NASA``), ``"title"`` (``Paris``, ``I``), or ``"lower"`` (anything else)."""
    if token[:1].isupper():
        if len(token) > 1 and token.isupper():
            return "upper"
        return "title"
    return "lower"


def apply_case(word: str, pattern: str) -> str:
    """Give ``word`` the case ``pattern`` of :func:`case_pattern`."""
    if pattern == "upper":
        return word.upper()
    if pattern == "title":
        return word[:1].upper() + word[1:]
    return word
