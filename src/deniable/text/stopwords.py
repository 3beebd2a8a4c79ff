"""The English stop-word list shipped with the package (no download).

CusText+ (Chen et al. 2023) and 1-Diffractor (Meisenbacher et al. 2024) can release stop words
verbatim; both use the English list of NLTK's stopwords corpus. The same 179 words are shipped as
``deniable/text/data/stopwords_en.txt``, so the option works offline.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from .tokenize import lookup_key

__all__ = ["english_stop_words", "stop_word_ids"]


@lru_cache(maxsize=1)
def english_stop_words() -> tuple[str, ...]:
    """The shipped English stop words (lower case, in the list's order)."""
    text = resources.files("deniable.text").joinpath("data/stopwords_en.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def stop_word_ids(vocabulary: Any, words: Iterable[str] | None = None) -> np.ndarray:
    """Sorted vocabulary ids of the stop words ``words`` (default: :func:`english_stop_words`).

    Each word is looked up as the text path looks words up (NFC, lower-cased for an uncased
    vocabulary); in a cased vocabulary its Title and UPPER forms count too (``"The"``, ``"I"``).
    Stop words that are not in the vocabulary are skipped."""
    if isinstance(words, (str, bytes)):
        raise TypeError("stop_words must be a list of words, not a single string")
    source = english_stop_words() if words is None else tuple(words)
    uncased = bool(vocabulary.uncased)
    keys: set[str] = set()
    for w in source:
        if not isinstance(w, str):
            raise TypeError(f"stop words must be strings, got {type(w).__name__}")
        key = lookup_key(w, lower=uncased)
        keys.add(key)
        if not uncased:
            keys.update((key[:1].upper() + key[1:], key.upper()))
    ids = vocabulary.ids_of(sorted(keys))
    return np.unique(ids[ids >= 0]).astype(np.int64)
