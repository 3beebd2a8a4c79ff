"""Text in, text out: privatize every word of a batch of texts with one mechanism call."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._rng import RNGLike, as_generator
from ..errors import PrivacyWarning
from .tokenize import apply_case, case_pattern, lookup_key, word_pattern

if TYPE_CHECKING:
    from ..mechanisms.base import Mechanism

__all__ = ["OOV_POLICIES", "CASE_POLICIES", "privatize_texts", "check_oov"]

#: What happens to out-of-vocabulary words:
#: ``"unk"`` (default) privatizes each as the single UNK point — the guarantee covers
#: vocabulary ∪ {UNK}; ``"drop"`` removes them; ``"keep"`` emits them verbatim (unsafe opt-out,
#: warns with :class:`~deniable.errors.PrivacyWarning`).
OOV_POLICIES = ("unk", "drop", "keep")
#: Case of output words for uncased vocabularies: ``"preserve"`` (default) gives each output word
#: the input word's case pattern (lower / Title / UPPER) — that pattern is released as is, outside
#: the mechanism's guarantee; ``"lower"`` emits vocabulary words as they are (lower case).
CASE_POLICIES = ("preserve", "lower")


def check_oov(oov: str) -> str:
    if oov not in OOV_POLICIES:
        raise ValueError(f"oov must be one of {', '.join(map(repr, OOV_POLICIES))}, got {oov!r}")
    return oov


def privatize_texts(
    mechanism: Mechanism,
    texts: Sequence[str],
    *,
    rng: RNGLike = None,
    oov: str = "unk",
    case: str = "preserve",
    stats: dict[str, int] | None = None,
    privatized_per_text: list[int] | None = None,
) -> list[str]:
    """Privatize each word of each text; separators pass through unchanged.

    All words of the batch go through a single ``mechanism.sample_ids`` call. With an uncased
    vocabulary, lookups lower-case the word and the output word takes the input's case pattern
    (lower / Title / UPPER). The output never contains an input word the mechanism did not
    sample, unless ``oov="keep"`` (which warns).

    What is released besides the sampled words: the layout (separators and the number of words;
    with ``oov="drop"`` also where unknown words were) and, with ``case="preserve"``, each word's
    case pattern. The mechanism's metric-DP guarantee covers the choice of words, so it compares
    documents with the same layout and case patterns.

    ``stats``, when given, is updated in place with the counts ``words`` and ``unknown``;
    ``privatized_per_text``, when given, is extended with the number of words the mechanism
    privatized in each text (UNK included; dropped or kept unknown words excluded).
    """
    check_oov(oov)
    if case not in CASE_POLICIES:
        raise ValueError(f"case must be one of {', '.join(map(repr, CASE_POLICIES))}, got {case!r}")
    gen = as_generator(rng)
    vocab = mechanism.vocabulary
    split = word_pattern().split
    parts_list: list[list[str]] = []
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must be strings, got {type(t).__name__}")
        parts_list.append(split(t))
    words = [w for parts in parts_list for w in parts[1::2]]
    if stats is not None:
        stats["words"] = stats.get("words", 0) + len(words)
    if not words:
        if privatized_per_text is not None:
            privatized_per_text.extend([0] * len(parts_list))
        return list(texts)
    uncased = vocab.uncased
    keys = [lookup_key(w, lower=uncased) for w in words]
    ids = vocab.ids_of(keys)
    unknown = ids < 0
    n_unknown = int(unknown.sum())
    if stats is not None:
        stats["unknown"] = stats.get("unknown", 0) + n_unknown
    if oov == "keep" and n_unknown:
        warnings.warn(
            f"oov='keep': {n_unknown} out-of-vocabulary word(s) were emitted verbatim, without privacy",
            PrivacyWarning,
            stacklevel=3,
        )
    sample = ~unknown if oov != "unk" else np.ones(len(ids), dtype=bool)
    if privatized_per_text is not None:
        per_text = np.fromiter((len(p) // 2 for p in parts_list), dtype=np.int64, count=len(parts_list))
        owner = np.repeat(np.arange(len(parts_list)), per_text)
        privatized_per_text.extend(np.bincount(owner[sample], minlength=len(parts_list)).tolist())
    out: list[str | None] = list(words) if oov == "keep" else [None] * len(words)
    if sample.any():
        chosen = mechanism.sample_ids(ids[sample], rng=gen)
        new = [vocab.words[i] for i in chosen.tolist()]
        positions = np.flatnonzero(sample).tolist()
        if uncased and case == "preserve":
            for p, w in zip(positions, new):
                out[p] = apply_case(w, case_pattern(words[p]))
        else:
            for p, w in zip(positions, new):
                out[p] = w
    result = []
    k = 0
    for parts in parts_list:
        n = len(parts) // 2
        if n:
            parts[1::2] = [w if w is not None else "" for w in out[k : k + n]]
            k += n
        result.append("".join(parts))
    return result
