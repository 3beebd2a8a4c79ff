"""Per-user word caps: privatize at most N words per user key in one release.

A ledger budget per user key (:class:`deniable.Ledger`) bounds the sum of ε over the releases
that touched the key; what one release costs a user also grows with the number of the user's
words it privatized (``epsilon_words`` = Σ ε·n). A cap bounds n: in one release, the first
``max_words_per_user`` words of each user key that the mechanism would privatize are
privatized; every later word of that user key is replaced by :data:`CAPPED_WORD`
(``over_cap="unk"``) or dropped (``over_cap="drop"``; its separators stay).

**Which words are kept** (deterministic): rows in the order given (pandas: the series order;
Spark: the key column's order, or the rows' position in the input when there is no key), and
within a row the words from left to right. The first ``max_words_per_user`` words that the
mechanism privatizes (every word with ``oov="unk"``; in-vocabulary words otherwise) are
privatized; from the word after them on, every word of that user in this release is capped —
including out-of-vocabulary words that ``oov="keep"`` would have copied.

**Guarantee.** A capped word is replaced by a constant (or removed): the output there does not
depend on the word, so it costs no ε; only its presence (the layout: number of words and
separators) is released, as it always is. Each user key's privatized words in the release are
at most ``max_words_per_user``, and the ledger's per-user ``words`` (hence ``epsilon_words``)
counts exactly the words privatized.
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ..text.tokenize import split_words, vocabulary_keys

__all__ = ["CAPPED_WORD", "OVER_CAP_POLICIES", "check_cap", "check_over_cap", "privatized_mask", "privatized_counts", "allowances", "split_capped"]

#: What replaces a word over the cap with ``over_cap="unk"``: a constant, the same for every word.
CAPPED_WORD = "[UNK]"
#: ``"unk"``: a word over the cap becomes :data:`CAPPED_WORD`; ``"drop"``: it is removed (the
#: separators around it stay).
OVER_CAP_POLICIES = ("unk", "drop")


def check_cap(max_words_per_user: Any) -> int | None:
    """``max_words_per_user`` as an int >= 1 (or None: no cap); ValueError otherwise."""
    if max_words_per_user is None:
        return None
    if isinstance(max_words_per_user, bool) or not isinstance(max_words_per_user, numbers.Integral) or max_words_per_user < 1:
        raise ValueError(f"max_words_per_user must be an integer >= 1 (words privatized per user key in one release), or None, got {max_words_per_user!r}")
    return int(max_words_per_user)


def check_over_cap(over_cap: str) -> str:
    if over_cap not in OVER_CAP_POLICIES:
        raise ValueError(f"over_cap must be one of {', '.join(map(repr, OVER_CAP_POLICIES))} (replace words over the cap by {CAPPED_WORD!r}, or drop them), got {over_cap!r}")
    return over_cap


def privatized_mask(vocabulary: Any, words: Sequence[str], oov: str) -> np.ndarray:
    """Which of ``words`` (tokens of :func:`~deniable.text.tokenize.split_words`) the mechanism
    privatizes in :func:`deniable.text.privatize_texts`: all of them with ``oov="unk"`` (unknown
    words as UNK), else those found in ``vocabulary`` (clitics also by their letters)."""
    if oov == "unk" or not words:
        return np.ones(len(words), dtype=bool)
    keys = vocabulary_keys(list(words), lower=bool(vocabulary.uncased))
    ids = np.asarray(vocabulary.ids_of([k[0] for k in keys]), dtype=np.int64)
    for j in np.flatnonzero(ids < 0).tolist():
        if len(keys[j]) > 1:
            ids[j] = int(np.asarray(vocabulary.ids_of([keys[j][1]]))[0])
    return ids >= 0


def privatized_counts(vocabulary: Any, texts: Sequence[str | None], oov: str) -> list[int]:
    """The number of words :func:`deniable.text.privatize_texts` privatizes in each text (0 for
    a missing text): what the ledger records per record."""
    return [0 if t is None else int(privatized_mask(vocabulary, split_words(t)[1::2], oov).sum()) for t in texts]


def allowances(users: Sequence[Hashable], counts: Sequence[int], cap: int) -> list[int]:
    """Words each row may privatize under a cap of ``cap`` per user key, rows taken in order:
    ``min(count, cap - words already allowed to the user)``, at least 0."""
    used: dict[Hashable, int] = {}
    out = []
    for u, n in zip(users, counts):
        before = used.get(u, 0)
        allowed = max(0, min(int(n), cap - before))
        used[u] = before + allowed
        out.append(allowed)
    return out


def split_capped(text: str, allowed: int, vocabulary: Any, oov: str, over_cap: str) -> tuple[str, str] | None:
    """``(prefix, rest)`` of a text of which only ``allowed`` privatized words may be
    privatized: privatize ``prefix`` (the text up to its ``allowed``-th privatized word) and
    append ``rest`` (the remaining separators, its words replaced by :data:`CAPPED_WORD` or
    removed). None when the text is within its allowance (privatize it whole).

    The prefix is tokenized on its own: its last word can differ from the text's only where a
    clitic's context was cut (``tx’sn't`` → ``tx`` ``’`` ``s`` ``n't``, but the prefix ``tx’s``
    → ``tx`` ``’s``); the word count is the same, and should a vocabulary lookup make the prefix
    privatize more than ``allowed`` words (``oov`` other than ``"unk"``), the cut moves one word
    earlier, so a text never privatizes more than its allowance."""
    parts = split_words(text)
    words = parts[1::2]
    mask = privatized_mask(vocabulary, words, oov)
    if int(mask.sum()) <= allowed:
        return None
    cut = int(np.flatnonzero(mask)[allowed])  # the first word over the cap
    while cut > 0 and int(privatized_mask(vocabulary, split_words("".join(parts[: 2 * cut]))[1::2], oov).sum()) > allowed:
        cut -= 1
    token = CAPPED_WORD if over_cap == "unk" else ""
    rest = parts[2 * cut] + "".join(token + parts[2 * k + 2] for k in range(cut, len(words)))
    return "".join(parts[: 2 * cut]), rest


def privatize_capped(
    mechanism: Any, texts: Sequence[str | None], keys: Sequence[Any], randomness: Any, allowed: Sequence[int], *, oov: str, case: str, over_cap: str
) -> list[str | None]:
    """:func:`deniable.integrations.keyed.privatize_rows` with row ``r`` privatizing at most
    ``allowed[r]`` words (:func:`split_capped`; the rest capped). Rows keep their keys, so
    their randomness is the one they draw uncapped."""
    from .keyed import privatize_rows

    heads: list[str | None] = []
    tails: list[str] = []
    for t, a in zip(texts, allowed):
        split = None if t is None else split_capped(t, a, mechanism.vocabulary, oov, over_cap)
        heads.append(t if split is None else split[0])
        tails.append("" if split is None else split[1])
    out = privatize_rows(mechanism, heads, keys, randomness, oov=oov, case=case)
    return [None if o is None else o + tail for o, tail in zip(out, tails)]


def open_ledger(ledger: Any, dataset: Any) -> Any:
    """``ledger`` as a :class:`deniable.Ledger` (a path opens one, without a budget), checking
    that a ``dataset`` name comes with it."""
    from ..ledger import Ledger

    if ledger is None:
        if dataset is not None:
            raise ValueError("dataset= names the release in a ledger; give ledger=deniable.Ledger(path) too")
        return None
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError(f"a release recorded in a ledger needs dataset='<name>' (the dataset's identity in the ledger), got {dataset!r}")
    return ledger if isinstance(ledger, Ledger) else Ledger(ledger)


def user_key_of(value: Any, where: str) -> str | int:
    """A row's user key (a non-empty string or an integer), or ValueError naming ``where``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ValueError(f"{where}: the user key must be a non-empty string or an integer, got {value!r}")
    return value
