"""Tokenization that keeps the input's layout without leaking word material.

**Separators** are whitespace and Unicode punctuation (general category ``P*``: ``. , ; : ! ?
' " ( ) - _ @ # %`` …). They pass through unchanged, so a privatized text keeps the input's layout.
**Words** are maximal runs of every other character — letters *with their combining marks*,
digits, symbols (``$ + ⓙ 😀``), format characters (ZWJ) — so no part of a word is ever copied to
the output: a word is either looked up in the vocabulary or, if unknown, privatized as UNK.
``"".join(split_words(t)) == t`` always holds.

**Clitics.** English contractions and possessives are split as GloVe's tokenizer splits them: a
clitic (:data:`CLITICS`: ``'s 'm 'd 're 'll 've n't``, with ``'`` or ``’``, any case) right after
a word and at the end of it is a word of its own — ``mother's`` → ``mother`` + ``'s``, ``I'm`` →
``I`` + ``'m``, ``don't`` → ``do`` + ``n't`` — with an empty separator before it. It is looked up
as its lower-case form with a plain apostrophe (``'s``), else, in a vocabulary without clitic
tokens, as its letters (``s``; ``nt`` for ``n't``): :func:`vocabulary_keys`. Its output is the
sampled word written as a clitic when it is one (:func:`clitic_form`), else the sampled word
after a space, so a sampled word is never glued to the stem.

Lookup keys are NFC-normalized (so decomposed ``cafe\\u0301`` finds ``café``) and lower-cased for
uncased vocabularies. :data:`deniable.brr_runtime` carries an identical copy of these rules.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable
from functools import lru_cache

import numpy as np

__all__ = ["CLITICS", "word_pattern", "word_class", "ascii_word_pattern", "clitic_pattern", "vocabulary_keys", "clitic_form", "split_words", "words_of", "keys_of", "token_codes", "lookup_key", "case_pattern", "apply_case"]


#: The English clitics split off a word, as GloVe's tokenizer splits them: ``I'm`` → ``I`` + ``'m``,
#: ``mother's`` → ``mother`` + ``'s``, ``don't`` → ``do`` + ``n't`` (with ``'`` or ``’``, any case).
CLITICS = ("'s", "'m", "'d", "'re", "'ll", "'ve", "n't")
_APOSTROPHES = "'\u2019"
# the clitics, as a regular expression over any apostrophe and any letter case (spelled out:
# the browser runtime mirrors this pattern, and JavaScript has no scoped case-insensitive flag)
_ENCLITIC = "[" + _APOSTROPHES + "](?:[sS]|[mM]|[dD]|[rR][eE]|[lL][lL]|[vV][eE])"
_NEGATION = "[nN][" + _APOSTROPHES + "][tT]"


@lru_cache(maxsize=1)
def word_class() -> str:
    """The regular-expression class of one word character: neither whitespace nor Unicode
    punctuation (general category ``P*``)."""
    ranges: list[list[int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp))[0] == "P":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    punct = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
    return f"[^\\s{punct}]"


def _pattern(w: str) -> str:
    end = f"(?!{w})"  # a word ends at a separator or at the end of the text
    return (
        f"({w}+?(?={_NEGATION}{end})"  # the stem before n't: do|n't, ca|n't
        f"|(?<={w}){_NEGATION}{end}"  # n't after a stem
        f"|(?<={w}){_ENCLITIC}{end}"  # 's 'm 'd 're 'll 've after a stem
        f"|{w}+)"  # any other run of word characters
    )


@lru_cache(maxsize=1)
def word_pattern() -> re.Pattern[str]:
    """The compiled word pattern, one capturing group: a clitic after a stem (:data:`CLITICS`),
    the stem before ``n't``, or a run of word characters (:func:`word_class`)."""
    return re.compile(_pattern(word_class()))


@lru_cache(maxsize=1)
def ascii_word_pattern() -> re.Pattern[str]:
    """:func:`word_pattern` restricted to ASCII text: the same matches on any ASCII string, with a
    small character class (about twice as fast to split with)."""
    punct = "".join(re.escape(chr(cp)) for cp in range(128) if unicodedata.category(chr(cp))[0] == "P")
    return re.compile(_pattern(f"[^\\s{punct}]"))


@lru_cache(maxsize=1)
def clitic_pattern() -> re.Pattern[str]:
    """A whole token that is a clitic (``'s``, ``’S``, ``n't``, ...)."""
    return re.compile(f"(?:{_ENCLITIC}|{_NEGATION})")


_CLITIC_LETTERS = {c.replace("'", ""): c for c in CLITICS}  # "s" -> "'s", "nt" -> "n't"


def vocabulary_keys(tokens: list[str], *, lower: bool) -> list[tuple[str, ...]]:
    """The vocabulary keys of each token, in order of preference: ``(lookup_key(token),)`` for a
    word; for a clitic its lower-case form with a plain apostrophe, then its letters
    (``’S`` → ``("'s", "s")``, ``n't`` → ``("n't", "nt")``), for vocabularies without clitic
    tokens."""
    is_clitic = clitic_pattern().fullmatch
    out: list[tuple[str, ...]] = []
    for t in tokens:
        if is_clitic(t) is not None:
            k = t.lower().replace("\u2019", "'")
            out.append((k, k.replace("'", "")))
        else:
            out.append((lookup_key(t, lower=lower),))
    return out


def clitic_form(word: str, apostrophe: str = "'") -> str | None:
    """``word`` written as a clitic with ``apostrophe`` when it is one (``'s``, ``’s``) or is a
    clitic's letters (``s`` → ``'s``, ``nt`` → ``n't``); None otherwise."""
    if clitic_pattern().fullmatch(word) is not None:
        return word.replace("'", apostrophe).replace("\u2019", apostrophe)
    form = _CLITIC_LETTERS.get(word.lower())
    if form is None:
        return None
    letters = iter(word)  # keep the word's letter case: "S" -> "'S"
    return "".join(apostrophe if ch == "'" else next(letters) for ch in form)


_ASCII_PUNCT = "".join(chr(cp) for cp in range(128) if unicodedata.category(chr(cp))[0] == "P")
_ASCII_WORD_CHARS = frozenset(chr(cp) for cp in range(128) if not chr(cp).isspace() and chr(cp) not in _ASCII_PUNCT)
# every ASCII punctuation character -> a space: then str.split() (which splits at exactly the
# characters \s matches) gives the words of an ASCII text without apostrophes
_ASCII_PUNCT_TO_SPACE = str.maketrans(_ASCII_PUNCT, " " * len(_ASCII_PUNCT))
# an apostrophe and the letters of a clitic: the candidates :func:`_clitic_spans` checks
_CLITIC_TAIL = re.compile("[" + _APOSTROPHES + "](?:[sS]|[mM]|[dD]|[rR][eE]|[lL][lL]|[vV][eE]|[tT])")


@lru_cache(maxsize=256)
def _runs(extra: str) -> Callable[[str], list[str]]:
    """``split`` by runs of word characters, for texts whose only non-ASCII punctuation
    characters are ``extra``: on such a text the small class ``[^\\s<ASCII punctuation><extra>]``
    is :func:`word_class` (whitespace is ``\\s`` in both), and several times faster."""
    return re.compile(f"([^\\s{re.escape(_ASCII_PUNCT + extra)}]+)").split


def _is_word_char(ch: str) -> bool:
    """Whether the character ``ch`` is in :func:`word_class`."""
    if ch.isascii():
        return ch in _ASCII_WORD_CHARS
    return not ch.isspace() and unicodedata.category(ch)[0] != "P"


def _clitic_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every clitic :func:`word_pattern` splits off in ``text``: an enclitic
    (``'s 'm 'd 're 'll 've``) right after a word character, or ``n't`` after a stem of at least
    one word character, followed by a separator or the end of the text."""
    spans = []
    n = len(text)
    for m in _CLITIC_TAIL.finditer(text):
        a, b = m.span()
        if b < n and _is_word_char(text[b]):
            continue
        if text[b - 1] in "tT":  # n't: an "n" and a stem character before the apostrophe
            if a >= 2 and text[a - 1] in "nN" and _is_word_char(text[a - 2]):
                spans.append((a - 1, b))
        elif a >= 1 and _is_word_char(text[a - 1]):
            spans.append((a, b))
    return spans


def split_words(text: str) -> list[str]:
    """Split into ``[sep, word, sep, word, ..., sep]``: words at odd indices, separators at even
    ones (possibly empty). Joining the list gives back ``text``.

    The same list as ``word_pattern().split(text)``, computed faster: runs of word characters
    with the smallest character class the text allows, each clitic cut out where the word
    pattern cuts it."""
    if text.isascii():
        runs = _runs("")
    else:
        runs = _runs("".join(sorted(c for c in set(text) if not c.isascii() and unicodedata.category(c)[0] == "P")))
    if "'" not in text and "\u2019" not in text:
        return runs(text)
    spans = _clitic_spans(text)
    if not spans:
        return runs(text)
    out: list[str] = []
    prev = 0
    for a, b in spans:
        # the piece before a clitic ends with a word character (or is empty), so its split ends
        # with the empty separator between the stem and the clitic
        out += runs(text[prev:a])
        out.append(text[a:b])
        prev = b
    out += runs(text[prev:])
    return out


def words_of(text: str) -> list[str]:
    """The words of ``text``, in order (the odd items of :func:`split_words`)."""
    if text.isascii() and "'" not in text:
        return text.translate(_ASCII_PUNCT_TO_SPACE).split()
    return split_words(text)[1::2]


def keys_of(text: str, *, lower: bool) -> list[str]:
    """The lookup keys (:func:`lookup_key`) of the words of ``text``, in order."""
    if text.isascii() and "'" not in text:
        # no clitic, NFC is the identity and lower-casing changes no separator: the whole text
        # at once instead of a call per word
        return (text.lower() if lower else text).translate(_ASCII_PUNCT_TO_SPACE).split()
    return [lookup_key(w, lower=lower) for w in split_words(text)[1::2]]


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
