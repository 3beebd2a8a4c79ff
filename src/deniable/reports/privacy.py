"""A sign-off report for one privatization run: one page a privacy engineer approves or rejects.

:class:`RunRecorder` watches a mechanism during a run (it wraps that instance's ``sample_ids``;
the output is unchanged, its own sampling uses its own generator) and counts, per vocabulary
word, how often the word was privatized and how often it came back unchanged, and keeps a uniform
random sample of (input, output) word pairs for the attack. :meth:`RunRecorder.report` turns that
record, the per-text word counts and the run's counts into a :class:`PrivacyReport` with:

* the mechanism, ε and how ε was chosen (a raw ε or a privacy target), the guarantee in words;
* per-document bounds ε·ℓ·P_d^max (quantiles and a histogram over the documents), from
  :func:`deniable.calibration.document.document_guarantee` exactly as ``--report`` computes them;
* the input words most likely to survive (N_w = Pr[M(w) = w] from a shipped or cached
  calibration, else exact probabilities, else sampled) and how many words seen once in the
  input came through unchanged in this output;
* the recovery rate of the Bayes adversary (:func:`deniable.evaluation.inversion_attack`) on a
  sample of this input's released words, with its interval, against guessing from the prior
  alone and reading the output as is; and the same rate at a few ε around the chosen one;
* warnings (output ≈ input, output ≈ noise, unknown words), opt-in before/after examples, and
  plots (matplotlib, ``deniable[plot]``; the report says so when it is missing).

The report is computed from the input and names input words: it stays with the text's owner.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from ..text.privatize import ObservedSampler
from ._render import plot_curve, plot_n_w, render_html

# the sections' constants and pieces stay importable from here
from ._sections import (
    ATTACK_SIMULATIONS,  # noqa: F401
    CURVE_FACTORS,  # noqa: F401
    CURVE_SIMULATIONS,  # noqa: F401
    CURVE_TOKENS,  # noqa: F401
    EXACT_MAX_PAIRS,  # noqa: F401
    FORMAT,
    MAX_ATTACK_TOKENS,
    OOV_WARNING_SHARE,  # noqa: F401
    QUANTILES,  # noqa: F401
    TOP_WORDS,  # noqa: F401
    attack_section,
    curve_section,
    document_bounds,
    documents_section,
    has_small_vocab,  # noqa: F401
    json_safe,
    mechanism_section,
    n_w_of_words,
    run_section,
    survival_section,
)

__all__ = ["PrivacyReport", "RunRecorder", "build_report", "document_bounds", "n_w_of_words", "privatize_with_report", "read_examples", "FORMAT"]


# -- the recorder --------------------------------------------------------------------------------


class RunRecorder:
    """Records what ``mechanism`` privatizes in a run: privatize with :attr:`sampler` in place of
    the mechanism (``privatize_texts(recorder.sampler, texts, ...)``; nothing is written on the
    mechanism, which threads may share).

    Per vocabulary word: tokens privatized (``counts``) and tokens returned unchanged
    (``unchanged``); the tokens privatized as UNK (``n_unk``); and a uniform random sample,
    without replacement, of at most ``max_pairs`` (input id, output id) pairs (reservoir
    sampling with random keys from ``rng``, independent of the run's own randomness: recording
    does not change the output). Nothing but ids and counts is kept.
    """

    def __init__(self, mechanism: Any, *, max_pairs: int = MAX_ATTACK_TOKENS, rng: RNGLike = 0) -> None:
        self.mechanism = mechanism
        self.max_pairs = check_int("max_pairs", max_pairs, minimum=1)
        self._gen = as_generator(rng)
        V = int(mechanism.n_words)
        self.counts = np.zeros(V, dtype=np.int64)
        self.unchanged = np.zeros(V, dtype=np.int64)
        self.n_unk = 0
        self._keys = np.zeros(0)
        self._pos = np.zeros(0, dtype=np.int64)
        self._x = np.zeros(0, dtype=np.int64)
        self._y = np.zeros(0, dtype=np.int64)
        self._seen = 0

    @property
    def sampler(self) -> ObservedSampler:
        """The mechanism, sampling as itself, with this recorder observing every batch."""
        return ObservedSampler(self.mechanism, self.observe)

    def observe(self, ids: Any, out: Any) -> None:
        """Record one batch: the input ids (UNK as -1 or out of range) and their output ids."""
        self._record(ids, out)

    def _record(self, ids: Any, out: Any) -> None:
        x = np.asarray(ids)
        if not x.size or not np.issubdtype(x.dtype, np.integer):
            return
        x = x.ravel().astype(np.int64)
        y = np.asarray(out).ravel().astype(np.int64)
        V = self.counts.size
        known = (x >= 0) & (x < V)
        self.n_unk += int((~known).sum())
        self.counts += np.bincount(x[known], minlength=V)
        same = known & (y == x)
        self.unchanged += np.bincount(x[same], minlength=V)
        keys = self._gen.random(x.size)
        pos = self._seen + np.arange(x.size, dtype=np.int64)
        self._seen += x.size
        allk = np.concatenate([self._keys, keys])
        if allk.size > self.max_pairs:
            keep = np.argpartition(allk, self.max_pairs - 1)[: self.max_pairs]
        else:
            keep = np.arange(allk.size)
        self._keys = allk[keep]
        self._pos = np.concatenate([self._pos, pos])[keep]
        self._x = np.concatenate([self._x, x])[keep]
        self._y = np.concatenate([self._y, y])[keep]

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The sampled (input ids, output ids), in the order the tokens were privatized."""
        order = np.argsort(self._pos, kind="stable")
        return self._x[order], self._y[order]

    @property
    def tokens(self) -> int:
        """Tokens privatized so far (UNK included)."""
        return self._seen

    def report(self, *, stats: dict[str, int], lengths: Sequence[int], oov: str = "unk", **kwargs: Any) -> PrivacyReport:
        """Build the :class:`PrivacyReport` of what was recorded (see :func:`build_report` for ``kwargs``).

        ``stats``: the counts of :func:`deniable.text.privatize.privatize_texts` (``stats=``);
        ``lengths``: its ``privatized_per_text`` (one count per document)."""
        return build_report(self, stats=stats, lengths=lengths, oov=oov, **kwargs)

# -- the report ----------------------------------------------------------------------------------


@dataclass
class PrivacyReport:
    """The sign-off record of one run (``data``: JSON-ready, the numbers of every section) and
    its plots (PNG bytes, not in the JSON). Write it with :meth:`write` (``.html`` or ``.json``).

    Input-dependent: it names words of the input (and, with ``examples``, quotes it). Keep it with
    the text's owner; never release it with the output."""

    data: dict[str, Any]
    plots: dict[str, bytes] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1, allow_nan=False, ensure_ascii=False)

    def to_html(self) -> str:
        return render_html(self.data, self.plots, self.to_json())

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: JSON when ``path`` ends in ``.json``, else the HTML page."""
        from .._files import atomic_output

        text = self.to_json() if str(path).lower().endswith(".json") else self.to_html()
        with atomic_output(path) as f:
            f.write(text)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

def build_report(
    recorder: RunRecorder,
    *,
    stats: dict[str, int],
    lengths: Sequence[int],
    oov: str = "unk",
    lines: Sequence[int] | None = None,
    examples: Sequence[tuple[str, str]] = (),
    examples_note: str | None = None,
    seed: int | None = None,
    attack_method: str = "auto",
    smoothing: float | str = "auto",
    curve: bool = True,
    plots: bool = True,
    inputs: Sequence[str] = (),
) -> PrivacyReport:
    """The :class:`PrivacyReport` of a recorded run (usually through :meth:`RunRecorder.report`).

    ``lines``: the line of each document (for naming the longest); ``examples``: (before, after)
    pairs, included only when given (they contain data); ``seed``: the attack's seed (None: a
    fresh one, recorded); ``attack_method``: ``"auto"`` (exact where the mechanism has
    closed-form probabilities and the vocabulary is small enough, else simulated), ``"exact"`` or
    ``"sample"``; ``smoothing``: the adversary's prior pseudo-count (``inversion_attack``);
    ``curve``: also measure recovery at a few ε around the chosen one; ``plots``: draw the plots
    when matplotlib is installed."""
    from .._version import __version__
    from ..calibration.plots import matplotlib_available

    t0 = time.perf_counter()
    mech = recorder.mechanism
    if seed is None:
        seed = int(as_generator(None).integers(2**63))
    seed = check_int("seed", seed, minimum=0)
    eps = float(mech.epsilon)
    data: dict[str, Any] = {
        "format": FORMAT,
        "deniable_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "notice": "Computed from the input text; names input words. Keep it with the text's owner: never release it with the output.",
        "inputs": list(inputs),
        "mechanism": mechanism_section(mech),
    }
    data["run"], warns = run_section(mech, stats, len(lengths), oov)
    data["documents"] = documents_section(mech, lengths, oov, lines)
    data["survival"], input_n_w, vocab_n_w = survival_section(mech, recorder.counts, recorder.unchanged, seed, name_rare=bool(examples))
    x, y = recorder.pairs
    gen_attack, gen_curve = as_generator(seed).spawn(2)
    data["attack"], result = attack_section(mech, x, y, recorder.tokens, seed, gen_attack, method=attack_method, smoothing=smoothing)
    data["curve"] = {"points": [], "note": None}
    if curve and result is not None:
        data["curve"] = curve_section(mech, x, gen_curve, method=data["attack"]["method"], smoothing=smoothing)
    data["warnings"] = warns
    data["examples"] = [{"before": a, "after": b} for a, b in examples]  # opt-in only
    data["examples_note"] = examples_note or ("included on request" if examples else "not included (they contain data; deniable privatize --report-examples N adds them)")
    pngs: dict[str, bytes] = {}
    if plots and matplotlib_available():
        pngs["n_w"] = plot_n_w(input_n_w, vocab_n_w, eps)
        if data["curve"]["points"]:
            pngs["curve"] = plot_curve(data["curve"]["points"], eps, result)
        data["plots"] = "included"
    else:
        data["plots"] = "not drawn: " + ("matplotlib is not installed (pip install \"deniable[plot]\")" if plots else "plots=False")
    data["seconds"] = round(time.perf_counter() - t0, 3)
    return PrivacyReport(json_safe(data), pngs)


def privatize_with_report(
    mechanism: Any, texts: Sequence[str], *, rng: RNGLike = None, oov: str = "unk", case: str = "preserve", examples: int = 0,
    seed: int | None = None, **kwargs: Any,
) -> tuple[list[str], PrivacyReport]:
    """Privatize ``texts`` (as :func:`deniable.text.privatize.privatize_texts`, same output for the
    same ``rng``) and return the outputs with the :class:`PrivacyReport` of that run.

    ``examples``: how many (before, after) pairs to include (default none: they contain data);
    ``seed``: the attack's seed; other keywords go to :func:`build_report`."""
    from ..text.privatize import privatize_texts

    examples = check_int("examples", examples, minimum=0)
    texts = list(texts)
    stats: dict[str, int] = {}
    lengths: list[int] = []
    rec = RunRecorder(mechanism, rng=seed if seed is not None else 0)
    out = privatize_texts(rec.sampler, texts, rng=rng, oov=oov, case=case, stats=stats, privatized_per_text=lengths)
    pairs = list(zip(texts, out))[:examples]
    return out, rec.report(stats=stats, lengths=lengths, oov=oov, examples=pairs, seed=seed, **kwargs)


def read_examples(inputs: Sequence[str], outputs: Sequence[str], n: int, *, fmt: str | None = None, column: str = "text", limit: int = 400) -> tuple[list[tuple[str, str]], str | None]:
    """The first ``n`` (before, after) record pairs of files privatized record by record (a CLI
    run), each cut to ``limit`` characters; stdin or stdout cannot be read again (a note says so)."""
    from ..text.io import detect_format, read_records

    pairs: list[tuple[str, str]] = []
    for src, dst in zip(inputs, outputs):
        if src == "-" or dst == "-":
            return pairs, "examples need input files and -o FILE (stdin and stdout cannot be read again)"
        kind = fmt or detect_format(src)
        a, b = read_records(src, format=kind, column=column), read_records(dst, format=kind, column=column)
        for ra, rb in zip(a, b):
            if len(pairs) >= n:
                return pairs, None
            pairs.append((ra.text[:limit], rb.text[:limit]))
    return pairs, None
