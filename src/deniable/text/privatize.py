"""Text in, text out: privatize every word of a batch of texts with one mechanism call."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter
from typing import Any, Protocol

import numpy as np

from .._rng import RNGLike, as_generator
from ..errors import PrivacyWarning
from . import _bulk, _kernels
from .tokenize import apply_case, case_pattern, clitic_form, clitic_pattern, lookup_key, split_words, vocabulary_keys

__all__ = [
    "WordSampler", "ObservedSampler", "OOV_POLICIES", "CASE_POLICIES", "privatize_texts", "check_oov", "check_case", "PrivatizationSummary",
    "summarize_privatization", "load_compiled_loops",
]

class WordSampler(Protocol):
    """What :func:`privatize_texts` needs of a mechanism: a ``vocabulary`` (with ``uncased``,
    ``words`` and ``ids_of``) and ``sample_ids``. Every :class:`~deniable.Mechanism` is one; so are
    stand-ins that forward the ids elsewhere (worker processes, recorders)."""

    vocabulary: Any

    def sample_ids(self, ids: Any, rng: RNGLike = None) -> np.ndarray: ...


class ObservedSampler:
    """A :class:`WordSampler` that samples with ``mechanism`` and hands every batch of (input ids,
    output ids) to each of ``observers`` (callables ``f(ids, outputs)``), for reports that count
    what a run privatized. Nothing is written on ``mechanism`` (which threads may share); other
    attributes (``backend``, ``epsilon``, ...) are read from it. Observers see ids only."""

    def __init__(self, mechanism: Any, *observers: Callable[[np.ndarray, np.ndarray], None]) -> None:
        self.mechanism = mechanism
        self.observers = observers
        self.vocabulary = mechanism.vocabulary

    def __getattr__(self, name: str) -> Any:
        if name in ("mechanism", "observers", "vocabulary"):  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.mechanism, name)

    def sample_ids(self, ids: Any, rng: RNGLike = None) -> np.ndarray:
        out = self.mechanism.sample_ids(ids, rng=rng)
        for observe in self.observers:
            observe(np.asarray(ids), np.asarray(out))
        return out


#: What happens to out-of-vocabulary words:
#: ``"unk"`` (default) privatizes each as the single UNK point — the guarantee covers
#: vocabulary ∪ {UNK}; ``"drop"`` removes them; ``"keep"`` emits them verbatim (unsafe opt-out,
#: warns with :class:`~deniable.errors.PrivacyWarning`).
OOV_POLICIES = ("unk", "drop", "keep")
#: Case of output words for uncased vocabularies: ``"preserve"`` (default) gives each output word
#: the input word's case pattern (lower / Title / UPPER) — that pattern is released as is, outside
#: the mechanism's guarantee; ``"lower"`` emits vocabulary words as they are (lower case).
CASE_POLICIES = ("preserve", "lower")


#: Below this share of in-vocabulary words changed the output is "almost the input"; above
#: 1 − this share it is "almost noise" (warnings in :meth:`PrivatizationSummary.warnings`).
EXTREME_FRACTION = 0.05
#: Warnings need at least this many in-vocabulary words (fewer say little about the mechanism).
MIN_WORDS_FOR_WARNINGS = 20

# Extension point filled by the calibration layer above this one (docs/architecture.md): the
# package root connects a function giving a mechanism's useful ε range from a shipped or cached
# calibration (None when there is none; nothing is computed).
_USEFUL_RANGE: Callable[[Any], tuple[float, float] | None] | None = None


def _connect(*, useful_range: Callable[[Any], tuple[float, float] | None]) -> None:
    """Connect the calibration layer (called once, by ``deniable/__init__.py``; a second call
    raises, so nothing after the composition root can change it)."""
    global _USEFUL_RANGE
    if _USEFUL_RANGE is not None:
        raise RuntimeError("the text layer is already connected (only deniable/__init__.py connects it, once)")
    _USEFUL_RANGE = useful_range


@dataclass(frozen=True)
class PrivatizationSummary:
    """What a privatization run did: counts, the ε used and how it was chosen.

    ``changed`` counts in-vocabulary words whose output word differs from the input word;
    ``unknown`` counts out-of-vocabulary words (privatized as UNK, dropped or kept per ``oov``).
    ``mechanism.privatize(..., return_summary=True)`` returns the summary of that call beside
    the texts (nothing is stored on the mechanism, which threads may share); the CLI prints
    :meth:`line` on stderr. Every count depends on the input: a summary stays with the texts'
    owner, it is not covered by the mechanism's guarantee.
    """

    mechanism: str
    epsilon: float
    words: int
    in_vocabulary: int
    changed: int
    unknown: int
    oov: str = "unk"
    max_n_w: float | None = None
    useful_range: tuple[float, float] | None = None

    @property
    def fraction_changed(self) -> float:
        """Share of in-vocabulary words that came out different (NaN when there were none)."""
        return self.changed / self.in_vocabulary if self.in_vocabulary else float("nan")

    @property
    def fraction_unknown(self) -> float:
        return self.unknown / self.words if self.words else float("nan")

    def line(self) -> str:
        """One line: mechanism, ε (and its target), words changed and unknown."""
        eps = f"epsilon={self.epsilon:.4g}" + (f" (chosen for max N_w {self.max_n_w:g})" if self.max_n_w is not None else "")
        ch = "n/a" if not self.in_vocabulary else f"{self.fraction_changed:.1%}"
        un = "n/a" if not self.words else f"{self.fraction_unknown:.1%}"
        return (
            f"{self.mechanism} {eps}: {self.words} words, {ch} of in-vocabulary words changed, "
            f"{un} unknown (oov={self.oov})"
        )

    def warnings(self) -> list[str]:
        """Warnings when the output is almost the input or almost noise, naming the useful range."""
        if self.in_vocabulary < MIN_WORDS_FOR_WARNINGS:
            return []
        f = self.fraction_changed
        rng = ""
        if self.useful_range is not None:
            lo, hi = self.useful_range
            rng = f"; {self.mechanism}'s useful range on this vocabulary is about epsilon {lo:.3g} to {hi:.3g} (median word changed 95% to 5% of the time)"
        if f < EXTREME_FRACTION:
            return [f"only {f:.1%} of in-vocabulary words changed: the output is almost the input (epsilon {self.epsilon:.4g} is large for {self.mechanism}){rng}"]
        if f > 1.0 - EXTREME_FRACTION:
            return [f"{f:.1%} of in-vocabulary words changed: the output is almost noise (epsilon {self.epsilon:.4g} is small for {self.mechanism}){rng}"]
        return []

    def __str__(self) -> str:
        return self.line()


def summarize_privatization(mechanism: Any, stats: dict[str, int], *, oov: str = "unk") -> PrivatizationSummary:
    """A :class:`PrivatizationSummary` from the ``stats`` counts of :func:`privatize_texts` calls
    (accumulated over batches). The useful range comes from the mechanism's ε choice, else from a
    shipped or cached calibration when one exists (nothing is computed)."""
    choice = getattr(mechanism, "epsilon_choice", None)
    useful = getattr(choice, "useful_range", None)
    n_in = int(stats.get("in_vocabulary", stats.get("words", 0) - stats.get("unknown", 0)))
    frac = stats.get("changed", 0) / n_in if n_in else 0.5
    extreme = n_in >= MIN_WORDS_FOR_WARNINGS and not (EXTREME_FRACTION <= frac <= 1.0 - EXTREME_FRACTION)
    if useful is None and extreme and _USEFUL_RANGE is not None:  # only looked up when a warning will name it
        try:
            useful = _USEFUL_RANGE(mechanism)
        except Exception:  # a summary never fails a run
            useful = None
    return PrivatizationSummary(
        mechanism=str(getattr(mechanism, "name", type(mechanism).__name__)),
        epsilon=float(getattr(mechanism, "epsilon", float("nan"))),
        words=int(stats.get("words", 0)),
        in_vocabulary=n_in,
        changed=int(stats.get("changed", 0)),
        unknown=int(stats.get("unknown", 0)),
        oov=oov,
        max_n_w=getattr(choice, "max_n_w", None),
        useful_range=tuple(useful) if useful is not None else None,
    )


def check_oov(oov: str) -> str:
    if oov not in OOV_POLICIES:
        raise ValueError(f"oov must be one of {', '.join(map(repr, OOV_POLICIES))}, got {oov!r}")
    return oov


def check_case(case: str) -> str:
    if case not in CASE_POLICIES:
        raise ValueError(f"case must be one of {', '.join(map(repr, CASE_POLICIES))}, got {case!r}")
    return case


def privatize_texts(
    mechanism: WordSampler,
    texts: Sequence[str],
    *,
    rng: RNGLike = None,
    oov: str = "unk",
    case: str = "preserve",
    stats: dict[str, int] | None = None,
    privatized_per_text: list[int] | None = None,
    token_outputs: list[tuple[list[str], list[str]]] | None = None,
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

    ``stats``, when given, is updated in place with the counts ``words``, ``unknown``,
    ``in_vocabulary`` and ``changed`` (in-vocabulary words whose output differs from the input);
    nothing is written on ``mechanism`` (:func:`summarize_privatization` turns ``stats`` into a
    :class:`PrivatizationSummary`);
    ``privatized_per_text``, when given, is extended with the number of words the mechanism
    privatized in each text (UNK included; dropped or kept unknown words excluded).
    ``token_outputs``, when given, is extended with one ``(input words, output strings)`` pair per
    text, position by position (``""`` for a dropped word; a clitic's output may start with a
    space), for callers that show which words changed.

    A batch of at least :data:`BULK_MIN_CHARS` characters is tokenized, looked up, cased and
    joined with numpy on its UTF-8 bytes, with the same result as the per-token path (used for
    smaller batches, and whenever ``token_outputs`` is given).
    """
    check_oov(oov)
    check_case(case)
    texts = texts if isinstance(texts, list) else list(texts)
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must be strings, got {type(t).__name__}")
    table = _bulk.vocab_table(mechanism.vocabulary) if token_outputs is None and texts else None
    if table is not None and sum(map(len, texts)) >= BULK_MIN_CHARS:
        return _privatize_bulk(mechanism, texts, table, rng=rng, oov=oov, case=case, stats=stats, privatized_per_text=privatized_per_text)
    return _per_token(mechanism, texts, as_generator(rng), oov, case, (stats, privatized_per_text, token_outputs), stacklevel=4)


def load_compiled_loops(input_chars: int | None, *, wait: bool = True) -> bool:
    """Load the text path's compiled loops (numba, the ``fast`` extra) now when an input of
    ``input_chars`` characters is large enough to repay their start, about half a second
    (:data:`~deniable.text._kernels.COMPILED_MIN_INPUT`), so that all its batches use them, small
    ones included (by themselves they load for a batch of
    :data:`~deniable.text._kernels.COMPILED_MIN_CHARS` characters). Outputs do not depend on it.

    ``wait=False``: load them (and make them ready to run) in a background thread and return at
    once, so that the start overlaps the caller's own (loading an embedding, building a
    mechanism); a later call with ``wait=True`` waits for that thread. Call it with
    ``wait=True`` before forking worker processes, which then share the loops. Returns whether
    the loops are loaded (``wait=False``: being loaded or loaded)."""
    global _PRELOAD
    if input_chars is None or input_chars < _kernels.COMPILED_MIN_INPUT:
        if wait and _PRELOAD is not None:
            _PRELOAD.join()
        return _kernels.compiled(load=False) is not None
    if not wait:
        if _PRELOAD is None and _kernels.compiled(load=False) is None and _kernels.numba_installed():
            _PRELOAD = threading.Thread(target=_preload, name="deniable-compiled-loops", daemon=True)
            _PRELOAD.start()
        return (_PRELOAD is not None and _PRELOAD.is_alive()) or _kernels.compiled(load=False) is not None
    if _PRELOAD is not None:
        _PRELOAD.join()
    return _kernels.compiled(load=True) is not None


_PRELOAD: threading.Thread | None = None


def _preload() -> None:
    """Load the compiled loops and run them once on a constant text with a stand-in sampler (no
    input, no caller's stream): numba then has their machine code ready for the first batch."""
    with contextlib.suppress(Exception):  # only a head start: the caller's own load raises what it raises
        if _kernels.compiled(load=True) is not None:
            privatize_texts(_Constant(), ["The cat's " * 512], rng=0)


class _Constant:
    """A stand-in :class:`WordSampler` over a two-word vocabulary that returns its input."""

    def __init__(self) -> None:
        from ..embeddings import Embedding

        self.vocabulary = Embedding(["the", "cat"], np.eye(2, dtype=np.float32))

    def sample_ids(self, ids: Any, rng: RNGLike = None) -> np.ndarray:
        return np.maximum(np.asarray(ids, dtype=np.int64), 0)


#: Total characters of a batch's texts from which they take the bulk path (below it the
#: per-token path is as fast).
BULK_MIN_CHARS = 4000


def _privatize_reference(mechanism: WordSampler, texts: Sequence[str], *, rng: RNGLike = None, oov: str = "unk", case: str = "preserve", **sinks: Any) -> list[str]:
    """:func:`privatize_texts` by the per-token path whatever the batch's size (the oracle of the
    bulk path's tests); ``sinks``: its ``stats``, ``privatized_per_text``, ``token_outputs``."""
    check_oov(oov)
    check_case(case)
    if set(sinks) - {"stats", "privatized_per_text", "token_outputs"}:
        raise TypeError(f"unexpected keyword arguments: {sorted(set(sinks) - {'stats', 'privatized_per_text', 'token_outputs'})}")
    outputs = (sinks.get("stats"), sinks.get("privatized_per_text"), sinks.get("token_outputs"))
    return _per_token(mechanism, list(texts), as_generator(rng), oov, case, outputs, stacklevel=4)


def _per_token(mechanism: WordSampler, texts: list[str], gen: np.random.Generator, oov: str, case: str, outputs: tuple[Any, Any, Any], *, stacklevel: int) -> list[str]:
    """Privatize ``texts`` token by token (one Python string per token); ``outputs`` holds
    :func:`privatize_texts`'s ``stats``, ``privatized_per_text`` and ``token_outputs`` (each may
    be None), validated by the caller."""
    stats, privatized_per_text, token_outputs = outputs
    vocab = mechanism.vocabulary
    parts_list = [split_words(t) for t in texts]
    words = [w for parts in parts_list for w in parts[1::2]]
    if not words:
        _sample_batch(mechanism, np.zeros(0, dtype=np.int64), np.zeros(len(parts_list), dtype=np.int64), gen=gen, oov=oov, stats=stats,
                      privatized_per_text=privatized_per_text, stacklevel=stacklevel)
        if token_outputs is not None:
            token_outputs.extend(([], []) for _ in parts_list)
        return list(texts)
    # Per-token work is done once per *distinct* word (lookup key, case pattern, clitic kind);
    # each token only carries one integer, (id + 1) * _N_CODES + code, read from a dict in C
    distinct = list(dict.fromkeys(words))
    distinct_ids, distinct_codes = _ids_and_codes(vocab, distinct, preserve_case=vocab.uncased and case == "preserve")
    packed_of = dict(zip(distinct, ((distinct_ids + 1) * _N_CODES + distinct_codes).tolist()))
    packed = np.fromiter(itemgetter(*words)(packed_of) if len(words) > 1 else (packed_of[words[0]],), dtype=np.int64, count=len(words))
    per_text = np.fromiter((len(p) // 2 for p in parts_list), dtype=np.int64, count=len(parts_list))
    chosen, sample, own = _sample_batch(mechanism, packed // _N_CODES - 1, per_text, gen=gen, oov=oov, stats=stats,
                                        privatized_per_text=privatized_per_text, stacklevel=stacklevel)
    out = np.array(words, dtype=object) if oov == "keep" else np.full(len(words), "", dtype=object)
    if sample.any():
        out[sample] = _output_strings(vocab.words, chosen[sample], packed[sample] % _N_CODES)
    out_words = out.tolist()
    result = []
    k = 0
    for parts in parts_list:
        n = len(parts) // 2
        if token_outputs is not None:
            token_outputs.append((parts[1::2], out_words[k : k + n]))
        if n:
            parts[1::2] = out_words[k : k + n]
            k += n
        result.append("".join(parts))
    _record(own, stats)
    return result


def _privatize_bulk(
    mechanism: WordSampler,
    texts: list[str],
    table: _bulk.VocabTable,
    *,
    rng: RNGLike,
    oov: str,
    case: str,
    stats: dict[str, int] | None,
    privatized_per_text: list[int] | None,
) -> list[str]:
    """:func:`privatize_texts` on the bulk path (:mod:`deniable.text._bulk`): one ``sample_ids``
    call on the ids of all words in text order, as :func:`_privatize_reference` makes it."""
    gen = as_generator(rng)
    vocab = mechanism.vocabulary
    preserve = bool(vocab.uncased) and case == "preserve"
    batch, ids, cases = _bulk.scan(table, texts, lower=bool(vocab.uncased), cased=preserve)
    chosen, sample, own = _sample_batch(mechanism, ids, batch.counts, gen=gen, oov=oov, stats=stats, privatized_per_text=privatized_per_text, stacklevel=4)
    if not len(ids):
        return list(texts)
    result = _bulk.assemble(table, batch, chosen, sample, cases, keep=oov == "keep", words=vocab.words, render=render, n_cases=len(_CASES))
    _record(own, stats)
    return result


_CASES = ("lower", "title", "upper")
_CASE_CODES = {name: code for code, name in enumerate(_CASES)}
_APOSTROPHE_CODES = ("", "'", "\u2019")  # not a clitic; a clitic written with ' or ’
_N_CODES = len(_CASES) * len(_APOSTROPHE_CODES)


def _ids_and_codes(vocab: Any, distinct: list[str], *, preserve_case: bool) -> tuple[np.ndarray, np.ndarray]:
    """Vocabulary ids (-1: unknown) and codes of distinct tokens. A token's code is its case
    pattern (when ``preserve_case``) and its clitic kind (none, with ``'``, with ``’``) as one
    small integer. The keys are :func:`~deniable.text.tokenize.vocabulary_keys`, computed in bulk
    for ASCII words."""
    uncased = vocab.uncased
    joined = "".join(distinct)
    keys = list(map(str.lower, distinct)) if uncased else list(distinct)
    # lookup_key of an ASCII word is its lower-case form (NFC is the identity): only the
    # other words need a call each
    non_ascii = [] if joined.isascii() else [j for j, w in enumerate(distinct) if not w.isascii()]
    for j in non_ascii:
        keys[j] = lookup_key(distinct[j], lower=uncased)
    # a clitic is the only token with an apostrophe (apostrophes are separators otherwise)
    clitics: list[int] = []
    if "'" in joined or "\u2019" in joined:
        is_clitic = clitic_pattern().fullmatch
        clitics = [j for j, w in enumerate(distinct) if ("'" in w or "\u2019" in w) and is_clitic(w) is not None]
        for j in clitics:
            keys[j] = vocabulary_keys([distinct[j]], lower=uncased)[0][0]
    ids = np.array(vocab.ids_of(keys), dtype=np.int64)
    for j in clitics:
        if ids[j] < 0:  # a clitic missing from the vocabulary: its letters (``'s`` -> ``s``)
            ids[j] = int(np.asarray(vocab.ids_of([vocabulary_keys([distinct[j]], lower=uncased)[0][1]]))[0])
    codes = np.zeros(len(distinct), dtype=np.int64)
    if preserve_case:  # (only for uncased vocabularies, whose keys are lower-case)
        # an ASCII word equal to its key is "lower" (code 0): the others are checked one by one
        todo = sorted({*compress(range(len(distinct)), map(str.__ne__, distinct, keys)), *non_ascii})
        codes[todo] = [_CASE_CODES[case_pattern(distinct[j])] for j in todo]
    for j in clitics:
        codes[j] += len(_CASES) * (2 if "\u2019" in distinct[j] else 1)
    return ids, codes


def _output_strings(vocab_words: Sequence[str], chosen: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The output strings (object array) of sampled ids ``chosen`` for tokens of ``codes``: the
    vocabulary word itself for code 0 (a lower-case or case-less non-clitic token), else
    :func:`render` once per distinct (word, code) pair."""
    if chosen.size * 4 >= len(vocab_words):
        out = np.array(vocab_words, dtype=object)[chosen]
    else:
        out = np.array([vocab_words[i] for i in chosen.tolist()], dtype=object)
    special = np.flatnonzero(codes)
    if special.size:
        pairs, inverse = np.unique(chosen[special] * _N_CODES + codes[special], return_inverse=True)
        strings = [render(vocab_words[i], c) for i, c in zip((pairs // _N_CODES).tolist(), (pairs % _N_CODES).tolist())]
        out[special] = np.array(strings, dtype=object)[inverse.reshape(-1)]
    return out


def render(word: str, code: int) -> str:
    """The output string of a sampled vocabulary ``word`` for an input token of ``code``
    (:func:`_ids_and_codes`): the word in the token's case pattern; in a clitic's place, the word as
    a clitic (:func:`~deniable.text.tokenize.clitic_form`, with the token's apostrophe) when it
    is one, else the word after a space, so a sampled word is never glued to the stem."""
    case, kind = _CASES[code % len(_CASES)], code // len(_CASES)
    if kind:
        form = clitic_form(word, _APOSTROPHE_CODES[kind])
        return apply_case(form, case) if form is not None else " " + apply_case(word, case)
    return apply_case(word, case)


def _sample_batch(
    mechanism: WordSampler, ids: np.ndarray, per_text: np.ndarray, *, gen: np.random.Generator, oov: str,
    stats: dict[str, int] | None, privatized_per_text: list[int] | None, stacklevel: int,
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """The one sampling step of a batch, shared by both text paths: ``ids`` of every token in text
    order (−1: out of vocabulary), ``per_text`` tokens per text. Counts words and unknown words
    (into ``stats`` now; ``in_vocabulary`` and ``changed`` by :func:`_record` at the end), warns
    for ``oov="keep"``, and makes the single ``mechanism.sample_ids`` call on the tokens it
    privatizes (all of them for ``"unk"``, else the known ones). Returns (chosen ids, 0 where not
    sampled; the mask of sampled tokens; this batch's counts)."""
    n = len(ids)
    unknown = ids < 0
    n_unknown = int(np.count_nonzero(unknown))
    own: dict[str, int] = {"words": n, "unknown": n_unknown, "in_vocabulary": n - n_unknown, "changed": 0}
    if stats is not None:
        stats["words"] = stats.get("words", 0) + n
        stats["unknown"] = stats.get("unknown", 0) + n_unknown
    if oov == "keep" and n_unknown:
        warnings.warn(f"oov='keep': {n_unknown} out-of-vocabulary word(s) were emitted verbatim, without privacy", PrivacyWarning, stacklevel=stacklevel + 1)
    sample = ~unknown if oov != "unk" else np.ones(n, dtype=bool)
    n_sampled = n - n_unknown if oov != "unk" else n
    if privatized_per_text is not None:
        owner = np.repeat(np.arange(per_text.size), per_text)
        privatized_per_text.extend(np.bincount(owner[sample], minlength=per_text.size).tolist())
    chosen = np.zeros(n, dtype=np.int64)
    if n and n_sampled == n:  # every token (oov="unk", or no unknown word): no copy
        chosen = sampled = np.asarray(mechanism.sample_ids(ids, rng=gen), dtype=np.int64)
        own["changed"] = int(np.count_nonzero((sampled != ids) & ~unknown))
    elif n_sampled:
        src = ids[sample]
        chosen[sample] = sampled = np.asarray(mechanism.sample_ids(src, rng=gen), dtype=np.int64)
        own["changed"] = int(np.count_nonzero((sampled != src) & (src >= 0)))
    if not n:
        _record(own, stats)
    return chosen, sample, own


def _record(own: dict[str, int], stats: dict[str, int] | None) -> None:
    if stats is not None:
        for key in ("in_vocabulary", "changed"):
            stats[key] = stats.get(key, 0) + own[key]
