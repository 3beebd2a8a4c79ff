"""Tokenization that keeps the input's layout.

A *word* is a maximal run of word characters (``\\w+``: letters, digits, underscore, in any
script). Everything between words — whitespace, punctuation, symbols, apostrophes — is a
separator and passes through unchanged, so ``"".join(split_words(t)) == t`` always holds and a
privatized text has exactly the input's layout.
"""

from __future__ import annotations

import re

__all__ = ["WORD_RE", "split_words", "words_of", "case_pattern", "apply_case"]

WORD_RE = re.compile(r"(\w+)")


def split_words(text: str) -> list[str]:
    """Split into ``[sep, word, sep, word, ..., sep]``: words at odd indices, separators at even
    ones (possibly empty). Joining the list gives back ``text``."""
    return WORD_RE.split(text)


def words_of(text: str) -> list[str]:
    """The words of ``text``, in order."""
    return WORD_RE.findall(text)


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
