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

import base64
import datetime as _dt
import html
import io
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int

__all__ = ["PrivacyReport", "RunRecorder", "build_report", "document_bounds", "n_w_of_words", "privatize_with_report", "read_examples", "FORMAT"]

FORMAT = "deniable-privacy-report/1"
#: Quantiles of the per-document bounds in the report.
QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
#: The attack is run on a uniform sample of at most this many privatized tokens.
MAX_ATTACK_TOKENS = 5000
#: The recovery-vs-ε curve uses at most this many of those tokens and these multiples of ε.
CURVE_TOKENS = 1000
CURVE_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: ``attack_method="auto"`` computes the exact Bayes adversary when the smoothed prior's
#: |V|² (input, output) pairs are at most this many; above it, the simulated one (a lower bound).
EXACT_MAX_PAIRS = 3.0e7
#: Simulated draws of the adversary for ``method="sample"``: the main rate, and each curve point.
ATTACK_SIMULATIONS = 20_000
CURVE_SIMULATIONS = 5_000
#: Unknown-word share above which the report warns.
OOV_WARNING_SHARE = 0.05
TOP_WORDS = 15


# -- the recorder --------------------------------------------------------------------------------


class RunRecorder:
    """Records what ``mechanism`` privatizes while attached (a context manager, or
    :meth:`attach` / :meth:`detach`).

    Per vocabulary word: tokens privatized (``counts``) and tokens returned unchanged
    (``unchanged``); the tokens privatized as UNK (``n_unk``); and a uniform random sample,
    without replacement, of at most ``max_pairs`` (input id, output id) pairs (reservoir
    sampling with random keys from ``rng``, independent of the run's own randomness: attaching a
    recorder does not change the output). Nothing but ids and counts is kept.
    """

    def __init__(self, mechanism: Any, *, max_pairs: int = MAX_ATTACK_TOKENS, rng: RNGLike = 0, attach: bool = True) -> None:
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
        self._previous: Any = None
        self._had_attribute = False
        self._wrapper: Any = None
        if attach:
            self.attach()

    def attach(self) -> RunRecorder:
        if self._wrapper is not None:
            return self
        mech = self.mechanism
        self._had_attribute = "sample_ids" in vars(mech)
        self._previous = mech.sample_ids
        previous = self._previous

        def recording(ids: Any, rng: Any = None) -> np.ndarray:
            out = previous(ids, rng=rng)
            self._record(ids, out)
            return out

        self._wrapper = recording
        mech.sample_ids = recording
        return self

    def detach(self) -> None:
        """Stop recording: the mechanism's ``sample_ids`` is what it was before."""
        if self._wrapper is None:
            return
        mech = self.mechanism
        if vars(mech).get("sample_ids") is self._wrapper:
            if self._had_attribute:
                mech.sample_ids = self._previous
            else:
                del mech.sample_ids
        self._wrapper = None

    def __enter__(self) -> RunRecorder:
        return self.attach()

    def __exit__(self, *exc: Any) -> None:
        self.detach()

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
        """Tokens privatized while attached (UNK included)."""
        return self._seen

    def report(self, *, stats: dict[str, int], lengths: Sequence[int], oov: str = "unk", **kwargs: Any) -> PrivacyReport:
        """Detach and build the :class:`PrivacyReport` (see :func:`build_report` for ``kwargs``).

        ``stats``: the counts of :func:`deniable.text.privatize.privatize_texts` (``stats=``);
        ``lengths``: its ``privatized_per_text`` (one count per document)."""
        self.detach()
        return build_report(self, stats=stats, lengths=lengths, oov=oov, **kwargs)


# -- the pieces ----------------------------------------------------------------------------------


def document_bounds(mechanism: Any, lengths: Sequence[int] | np.ndarray, *, oov: str = "unk") -> dict[str, Any]:
    """Per-document bounds of a run, as ``deniable privatize --report`` computes them.

    For a document of ℓ privatized words, ``worst`` = ε·ℓ·P_d^max bounds the log-likelihood
    ratio of any output between it and any other document of the same length and layout;
    ``typical`` = ε·ℓ·P_d^avg is the typical loss against a random alternative (not a bound).
    P_d^max and P_d^avg come from :func:`deniable.calibration.document.document_guarantee`;
    with ``oov="unk"`` the other document may contain unknown words, so P_d^max covers UNK."""
    from ..calibration.document import document_guarantee

    n = np.asarray(lengths, dtype=np.int64).ravel()
    g = document_guarantee(mechanism, [-1] if oov == "unk" else [0])
    eps = float(mechanism.epsilon)
    return {"lengths": n, "p_max": g.p_max, "p_avg": g.p_avg, "metric": g.metric, "worst": eps * n * g.p_max, "typical": eps * n * g.p_avg}


def n_w_of_words(mech: Any, ids: np.ndarray, counts: np.ndarray, *, draws: int = 200, max_estimated: int = 300, rng: RNGLike = 0) -> tuple[np.ndarray, str, Any]:
    """N_w at the mechanism's ε for ``ids``: a shipped or cached calibration where one matches,
    else exact probabilities, else ``draws`` samples per word (the ``max_estimated`` most
    frequent words; NaN for the rest). Returns (N_w, how, calibration or None)."""
    from ..calibration.targets import known_calibration

    eps = float(mech.epsilon)
    n_w = np.full(ids.size, np.nan)
    how: list[str] = []
    cal = known_calibration(mech)
    if cal is not None and ids.size:
        n_w = cal.n_w_of(ids, eps)
        how.append(f"{cal.estimator} estimate from the {cal.source}")
    missing = np.flatnonzero(np.isnan(n_w))
    if missing.size:
        todo = missing[np.argsort(-counts[ids[missing]], kind="stable")][:max_estimated]
        words = ids[todo]
        if bool(mech.has_exact_probabilities):
            n_w[todo] = [float(np.asarray(mech.probabilities(int(w)))[int(w)]) for w in words.tolist()]
            how.append("exact probabilities")
        else:
            cls_sample = type(mech).sample_ids  # the class's method: never a recorder's wrapper
            out = cls_sample(mech, np.repeat(words, draws), rng=as_generator(rng)).reshape(words.size, draws)
            n_w[todo] = (out == words[:, None]).mean(axis=1)
            how.append(f"{draws} draws per word")
        if missing.size > todo.size:
            how.append(f"{missing.size - todo.size} rarer words not estimated")
    return n_w, "; ".join(how), cal


def _attack_method(mech: Any, method: str) -> tuple[str, str]:
    from ..evaluation.inversion import has_exact_probabilities

    if method not in ("auto", "exact", "sample"):
        raise ValueError(f"attack_method must be 'auto', 'exact' or 'sample', got {method!r}")
    exact = has_exact_probabilities(mech)
    if method == "exact" and not exact:
        raise ValueError(f"{type(mech).__name__} has no closed-form probabilities; use attack_method='sample' or 'auto'")
    if method != "auto":
        return method, "as requested"
    pairs = float(mech.n_words) ** 2
    if exact and pairs <= EXACT_MAX_PAIRS:
        return "exact", "the mechanism has closed-form probabilities"
    if exact:
        return "sample", (
            f"the exact adversary would score |V|² = {pairs:.3g} word pairs (above {EXACT_MAX_PAIRS:.3g}); "
            "simulated instead, a lower bound on the Bayes-optimal rate (PrivacyReport with attack_method='exact' computes it)"
        )
    return "sample", "the mechanism has no closed-form probabilities: simulated, a lower bound on the Bayes-optimal rate"


def _rebuild(mech: Any, epsilon: float) -> Any:
    from ..mechanisms.registry import get_mechanism

    return get_mechanism(str(mech.name), mech.vocabulary, epsilon=epsilon, **mech.params)


def _clean(x: Any) -> Any:
    """JSON-safe: numpy scalars and arrays to Python, non-finite floats to None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return _clean(x.tolist())
    if isinstance(x, np.generic):
        return _clean(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


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
        return _render_html(self)

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
    from ..evaluation import inversion_attack
    from ..text.privatize import summarize_privatization

    t0 = time.perf_counter()
    mech = recorder.mechanism
    recorder.detach()
    if seed is None:
        seed = int(as_generator(None).integers(2**63))
    seed = check_int("seed", seed, minimum=0)
    eps = float(mech.epsilon)
    g = mech.guarantee
    choice = getattr(mech, "epsilon_choice", None)
    words = mech.vocabulary.words
    data: dict[str, Any] = {
        "format": FORMAT,
        "deniable_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "notice": "Computed from the input text; names input words. Keep it with the text's owner: never release it with the output.",
        "inputs": list(inputs),
    }
    # -- mechanism, epsilon, guarantee
    data["mechanism"] = {
        "name": str(getattr(mech, "name", type(mech).__name__)),
        "repr": repr(mech),
        "params": _clean({k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in mech.params.items()}),
        "epsilon": eps,
        "epsilon_choice": None if choice is None else _clean(choice.to_dict()),
        "epsilon_how": f"chosen from a privacy target: {choice}" if choice is not None else "given directly (a raw epsilon, not derived from a target)",
        "vocabulary_size": int(mech.n_words),
        "guarantee": {"epsilon": float(g.epsilon), "metric": str(g.metric), "domain": str(g.domain), "text": str(g)},
        "guarantee_words": (
            f"For any two words x and x' in {g.domain} and any output word y: Pr[M(x) = y] <= exp({eps:g} * d(x, x')) * Pr[M(x') = y], "
            f"where d is {g.metric}. Words are privatized independently, so for two documents of the same length and layout the "
            f"factor is exp({eps:g} * sum_i d(x_i, x'_i)). The layout (separators, number of words) and, with case='preserve', "
            "each word's case pattern are released as they are, outside the guarantee."
        ),
        "finite_metric": bool(mech.finite_metric),
    }
    # -- run counts and warnings
    summary = summarize_privatization(mech, stats, oov=oov)
    n_words = int(stats.get("words", 0))
    n_unknown = int(stats.get("unknown", 0))
    data["run"] = {
        "documents": len(lengths),
        "words": n_words,
        "in_vocabulary": summary.in_vocabulary,
        "changed": summary.changed,
        "fraction_changed": summary.fraction_changed,
        "unknown": n_unknown,
        "fraction_unknown": summary.fraction_unknown,
        "oov": oov,
        "summary": summary.line(),
    }
    warns = list(summary.warnings())
    if n_words and n_unknown / n_words > OOV_WARNING_SHARE:
        if oov == "keep":
            warns.append(f"{n_unknown} unknown word(s) ({n_unknown / n_words:.1%}) were copied verbatim (oov=keep): no guarantee covers them")
        else:
            warns.append(
                f"{n_unknown / n_words:.1%} of the words are out of the vocabulary ({'privatized as UNK' if oov == 'unk' else 'dropped; their positions are released'}): "
                "the output carries little of them; check that the vocabulary fits this text"
            )
    elif oov == "keep" and n_unknown:
        warns.append(f"{n_unknown} unknown word(s) were copied verbatim (oov=keep): no guarantee covers them")
    if not bool(mech.finite_metric):
        warns.append("the metric is infinite between some words: an output reveals which part of the vocabulary its input came from")
    # -- per-document bounds (one implementation: document_bounds, as --report)
    bounds = document_bounds(mech, lengths, oov=oov)
    worst, typical, n = bounds["worst"], bounds["typical"], bounds["lengths"]
    doc: dict[str, Any] = {
        "p_max": bounds["p_max"],
        "p_avg": bounds["p_avg"],
        "metric": bounds["metric"],
        "per_word_max": eps * bounds["p_max"],
        "statement": (
            f"For a document of l privatized words, B = epsilon * l * P_d^max (P_d^max = {bounds['p_max']:.4g}, the largest distance d "
            f"between two words of the vocabulary{' or UNK' if oov == 'unk' else ''}): for ANY other document of the same length and layout "
            "and any output y, Pr[M(doc) = y] <= e^B * Pr[M(other) = y]. Two documents of this length that differ in one word, at "
            f"distance d, are e^(epsilon*d)-indistinguishable (at most e^{eps * bounds['p_max']:.4g}); differing in k words, "
            "e^(epsilon * the sum of their distances). 'typical' = epsilon * l * P_d^avg uses the mean distance between two "
            "vocabulary words: the typical loss against a random alternative, not a bound."
        ),
    }
    if n.size:
        doc["quantiles"] = {f"q{q:g}": float(np.quantile(worst, q)) for q in QUANTILES}
        doc["typical_quantiles"] = {f"q{q:g}": float(np.quantile(typical, q)) for q in QUANTILES}
        doc["length_quantiles"] = {f"q{q:g}": float(np.quantile(n, q)) for q in QUANTILES}
        counts_h, edges = np.histogram(worst, bins=min(20, max(1, int(np.unique(worst).size))))
        doc["histogram"] = {"counts": counts_h.tolist(), "edges": edges.tolist()}
        k = int(np.argmax(n))
        doc["longest"] = {"words": int(n[k]), "bound": float(worst[k]), "document": k, "line": None if lines is None else int(lines[k])}
    data["documents"] = doc
    # -- words most likely to survive, rare words unchanged
    counts = recorder.counts
    ids = np.flatnonzero(counts)
    n_w, how, cal = n_w_of_words(mech, ids, counts, rng=seed)
    ok = ~np.isnan(n_w)
    order = np.lexsort((ids[ok], -n_w[ok]))[:TOP_WORDS]
    top = [{"word": words[int(ids[ok][i])], "n_w": float(n_w[ok][i]), "count": int(counts[ids[ok][i]]), "unchanged": int(recorder.unchanged[ids[ok][i]])} for i in order]
    rare = counts == 1
    rare_unchanged = rare & (recorder.unchanged == 1)
    rare_ids = np.flatnonzero(rare)
    expected_rare = float(np.nansum(n_w[np.isin(ids, rare_ids)])) if rare_ids.size else 0.0
    survival: dict[str, Any] = {
        "how": how,
        "epsilon": eps,
        "distinct_words": int(ids.size),
        "estimated_words": int(ok.sum()),
        "top": top,
        "input_n_w_quantiles": {f"q{q:g}": float(np.quantile(n_w[ok], q)) for q in (0.5, 0.9, 0.99, 1.0)} if ok.any() else {},
        "rare_words": int(rare.sum()),
        "rare_unchanged": int(rare_unchanged.sum()),
        "rare_expected_unchanged": expected_rare,
        "rare_statement": (
            "Words seen exactly once among the privatized words of the input (rare words carry the most identifying information: "
            "names, places); 'unchanged' counts those whose output word is the input word in this output; 'expected' is the sum of "
            "their N_w."
        ),
    }
    vocab_n_w = None
    if cal is not None:
        sample_ids = cal.word_ids[cal.sample]
        vocab_n_w = cal.n_w_of(sample_ids, eps)
        vocab_n_w = vocab_n_w[~np.isnan(vocab_n_w)]
        survival["vocabulary_n_w_quantiles"] = {f"q{q:g}": float(np.quantile(vocab_n_w, q)) for q in (0.5, 0.9, 0.99, 1.0)} if vocab_n_w.size else {}
        survival["vocabulary_n_w_from"] = f"{cal.source} ({int(sample_ids.size)} sampled vocabulary words)"
    if examples:
        survival["rare_unchanged_words"] = sorted(words[int(w)] for w in np.flatnonzero(rare_unchanged))[:50]
    data["survival"] = survival
    # -- the Bayes adversary on a sample of this output
    x, y = recorder.pairs
    method, why = _attack_method(mech, attack_method)
    attack: dict[str, Any] = {"method": method, "method_why": why, "seed": seed, "tokens_privatized": recorder.tokens, "sampled_tokens": int(x.size)}
    gen_attack, gen_curve = as_generator(seed).spawn(2)
    attack_seed = int(gen_attack.integers(2**63))
    attack["attack_seed"] = attack_seed
    result = None
    if np.any(x >= 0):
        n_sim = ATTACK_SIMULATIONS if method == "sample" else None
        result = inversion_attack(mech, x, outputs=y, rng=attack_seed, method=method, smoothing=smoothing, n_simulations=n_sim)
        attack.update({
            "top1": result.top1, "top1_ci": list(result.top1_ci), "topk": result.topk, "topk_ci": list(result.topk_ci), "k": result.k,
            "rare_top1": result.rare_top1, "rare_top1_ci": list(result.rare_top1_ci), "n_rare": result.n_rare,
            "prior_top1": result.prior_top1, "unchanged": result.unchanged, "n_tokens": result.n_tokens, "n_oov": result.n_oov,
            "n_simulations": result.n_simulations, "smoothing": result.smoothing, "confidence": result.confidence,
            "expected_top1": result.expected_top1,
        })
    attack["statement"] = (
        "The adversary knows the mechanism and the word frequencies of this sample (smoothed so that every vocabulary word has "
        "some prior mass), sees each released word on its own and guesses its input by argmax_x P(y|x) P(x) (Bayes rule). 'top1' "
        "is how often that guess is the true input word on the released words of this output (the sampled tokens); 'prior_top1' "
        "is what guessing the most frequent word without looking recovers; 'unchanged' is what reading the output as it is "
        "recovers. Context is not used: an adversary with a language model may do better."
    )
    data["attack"] = attack
    # -- recovery against epsilon
    curve_rows: list[dict[str, Any]] = []
    curve_note = None
    if curve and result is not None and getattr(mech, "fittable", False):
        curve_note = f"not measured: {mech.name} is fitted to a corpus, and a rebuild at another epsilon would not be"
    elif curve and result is not None:
        keep = np.flatnonzero(x >= 0)
        if keep.size > CURVE_TOKENS:
            keep = np.sort(gen_curve.choice(keep, CURVE_TOKENS, replace=False))
        xc = x[keep]
        try:
            for f in CURVE_FACTORS:
                e = eps * f
                m = mech if f == 1.0 else _rebuild(mech, e)
                cm = method if method == "sample" or has_small_vocab(m) else "sample"
                r = inversion_attack(m, xc, rng=int(gen_curve.integers(2**63)), method=cm, smoothing=smoothing,
                                     n_simulations=CURVE_SIMULATIONS if cm == "sample" else None)
                curve_rows.append({"epsilon": e, "top1": r.top1, "top1_ci": list(r.top1_ci), "prior_top1": r.prior_top1, "unchanged": r.unchanged, "method": r.method})
        except Exception as exc:  # a curve never fails the report
            curve_rows, curve_note = [], f"not measured: rebuilding {mech.name} at other epsilons failed ({exc})"
        if curve_rows:
            curve_note = (
                f"fresh draws of the mechanism at epsilon x {', '.join(f'{f:g}' for f in CURVE_FACTORS)} on {xc.size} of the sampled tokens"
                f"{'' if method == 'exact' else f', {CURVE_SIMULATIONS:,} simulations each'}"
            )
    data["curve"] = {"points": curve_rows, "note": curve_note}
    data["warnings"] = warns
    # -- examples (opt-in only)
    data["examples"] = [{"before": a, "after": b} for a, b in examples]
    data["examples_note"] = examples_note or ("included on request" if examples else "not included (they contain data; deniable privatize --report-examples N adds them)")
    # -- plots
    pngs: dict[str, bytes] = {}
    if plots and matplotlib_available():
        pngs["n_w"] = _plot_n_w(n_w[ok], vocab_n_w, eps)
        if curve_rows:
            pngs["curve"] = _plot_curve(curve_rows, eps, result)
        data["plots"] = "included"
    else:
        data["plots"] = "not drawn: " + ("matplotlib is not installed (pip install \"deniable[plot]\")" if plots else "plots=False")
    data["seconds"] = round(time.perf_counter() - t0, 3)
    return PrivacyReport(_clean(data), pngs)


def has_small_vocab(mech: Any) -> bool:
    from ..evaluation.inversion import has_exact_probabilities

    return has_exact_probabilities(mech) and float(mech.n_words) ** 2 <= EXACT_MAX_PAIRS


def privatize_with_report(
    mechanism: Any,
    texts: Sequence[str],
    *,
    rng: RNGLike = None,
    oov: str = "unk",
    case: str = "preserve",
    examples: int = 0,
    seed: int | None = None,
    **kwargs: Any,
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
    with RunRecorder(mechanism, rng=seed if seed is not None else 0) as rec:
        out = privatize_texts(mechanism, texts, rng=rng, oov=oov, case=case, stats=stats, privatized_per_text=lengths)
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


# -- plots ---------------------------------------------------------------------------------------


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _plot_n_w(input_n_w: np.ndarray, vocab_n_w: np.ndarray | None, eps: float) -> bytes:
    fig = _figure(7.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    bins = np.linspace(0.0, 1.0, 26)
    if vocab_n_w is not None and vocab_n_w.size:
        ax.hist(vocab_n_w, bins=bins, density=True, alpha=0.45, color="#888888", label=f"vocabulary ({vocab_n_w.size} words)")
    if input_n_w.size:
        ax.hist(input_n_w, bins=bins, density=True, histtype="step", linewidth=2.0, color="#c0392b", label=f"this input ({input_n_w.size} distinct words)")
    ax.set_xlabel("N_w = Pr[M(w) = w]  (small is private)")
    ax.set_ylabel("density")
    ax.set_title(f"Chance a word comes back unchanged, epsilon = {eps:.4g}")
    ax.legend(loc="upper center")
    return _png(fig)


def _plot_curve(rows: list[dict[str, Any]], eps: float, result: Any) -> bytes:
    fig = _figure(7.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    e = np.array([r["epsilon"] for r in rows])
    t = np.array([r["top1"] for r in rows])
    lo = np.array([r["top1_ci"][0] for r in rows])
    hi = np.array([r["top1_ci"][1] for r in rows])
    ax.fill_between(e, lo, hi, color="#2e86c1", alpha=0.2)
    ax.plot(e, t, "o-", color="#2e86c1", label="Bayes adversary top-1")
    ax.plot(e, [r["unchanged"] for r in rows], "s--", color="#7f8c8d", label="output read as is (unchanged)")
    ax.plot(e, [r["prior_top1"] for r in rows], ":", color="#27ae60", label="prior only")
    ax.axvline(eps, color="#c0392b", linewidth=1.5, label=f"this run: epsilon = {eps:.4g}")
    if result is not None:
        ax.errorbar([eps], [result.top1], yerr=[[result.top1 - result.top1_ci[0]], [result.top1_ci[1] - result.top1]], fmt="D", color="#c0392b", label="this output")
    ax.set_xscale("log")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("epsilon")
    ax.set_ylabel("recovered input words")
    ax.legend(fontsize="small", loc="best")
    return _png(fig)


# -- HTML ----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}th{background:#f3f3f3}
td.l,th.l{text-align:left}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.owner{background:#fdecea;border:2px solid #c0392b;padding:.7em 1em;font-weight:600}
.note{background:#fff8e1;border:1px solid #f0d98c;padding:.6em 1em}.warn{color:#a04000}
.stmt{background:#f4f8fb;border-left:4px solid #2e86c1;padding:.5em 1em}code{background:#f5f5f5;padding:0 .2em}
details pre{background:#f8f8f8;padding:1em;overflow:auto;font-size:.8em}
"""


def _num(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return html.escape(str(x))


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100.0 * float(x):.1f}%"


def _ci(c: Any) -> str:
    return "—" if not c or c[0] is None else f"[{_pct(c[0])}, {_pct(c[1])}]"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = ()) -> str:
    h = "".join(f"<th{' class=l' if i in left else ''}>{html.escape(c)}</th>" for i, c in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i in left else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _render_html(report: PrivacyReport) -> str:
    d = report.data
    m, run, doc, sv, at, cv = d["mechanism"], d["run"], d["documents"], d["survival"], d["attack"], d["curve"]
    e = html.escape
    title = f"Privacy report: {m['name']} at epsilon = {m['epsilon']:.4g}"
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title><style>{_CSS}</style></head><body>"]
    out.append(f"<h1>{e(title)}</h1>")
    out.append(f"<p class=owner>{e(d['notice'])} The report is input-dependent: it is not covered by the mechanism's guarantee.</p>")
    out.append(f"<p>deniable {e(str(d['deniable_version']))}, created {e(str(d['created']))}" + (f"; input: {e(', '.join(d['inputs']))}" if d.get("inputs") else "") + ".</p>")
    # 1 mechanism
    out.append("<h2>1. Mechanism, epsilon and guarantee</h2>")
    rows = [
        ["mechanism", f"<code>{e(m['repr'])}</code>"],
        ["epsilon", _num(m["epsilon"])],
        ["how epsilon was chosen", e(m["epsilon_how"])],
        ["metric d", e(m["guarantee"]["metric"])],
        ["domain", e(m["guarantee"]["domain"])],
        ["vocabulary", f"{m['vocabulary_size']:,} words"],
    ]
    out.append(_table(["", ""], rows, left=(0, 1)))
    out.append(f"<p class=stmt><b>Guarantee.</b> {e(m['guarantee_words'])}</p>")
    # warnings
    out.append("<h2>2. Run and warnings</h2>")
    out.append(f"<p>{e(run['summary'])}; {run['documents']:,} documents.</p>")
    if d["warnings"]:
        out.append("<ul>" + "".join(f"<li class=warn>warning: {e(w)}</li>" for w in d["warnings"]) + "</ul>")
    else:
        out.append("<p>No warnings: the share of words changed is between 5% and 95% and unknown words are few.</p>")
    # 3 per-document
    out.append("<h2>3. Per-document bounds</h2>")
    out.append(f"<p class=stmt><b>What the number means.</b> {e(doc['statement'])}</p>")
    if "quantiles" in doc:
        qs = list(doc["quantiles"])
        names = {"q0": "min", "q1": "max"}
        head = ["", *[names.get(q, f"{float(q[1:]) * 100:g}%") for q in qs]]
        out.append(_table(head, [
            ["B = ε·ℓ·P_d^max", *[_num(doc["quantiles"][q]) for q in qs]],
            ["typical ε·ℓ·P_d^avg", *[_num(doc["typical_quantiles"][q]) for q in qs]],
            ["words ℓ", *[_num(doc["length_quantiles"][q]) for q in qs]],
        ], left=(0,)))
        h = doc["histogram"]
        hist_rows = [[f"{_num(h['edges'][i])} – {_num(h['edges'][i + 1])}", str(c)] for i, c in enumerate(h["counts"])]
        out.append("<details><summary>Histogram of B over the documents</summary>" + _table(["B", "documents"], hist_rows) + "</details>")
        lg = doc["longest"]
        where = f"line {lg['line']}" if lg.get("line") is not None else f"document {lg['document']}"
        out.append(f"<p>Largest: {where}, {lg['words']} words, B = {_num(lg['bound'])}. One word at the largest distance: ε·P_d^max = {_num(doc['per_word_max'])}.</p>")
    else:
        out.append("<p>No documents.</p>")
    # 4 survival
    out.append("<h2>4. Words of this input most likely to survive</h2>")
    out.append(f"<p>N_w = Pr[M(w) = w] at epsilon = {_num(sv['epsilon'])} ({e(sv['how'] or 'no estimate')}); {sv['distinct_words']:,} distinct input words.</p>")
    if sv["top"]:
        out.append(_table(["word", "N_w", "tokens in input", "unchanged in this output"],
                          [[e(t["word"]), _num(t["n_w"], 3), str(t["count"]), str(t["unchanged"])] for t in sv["top"]], left=(0,)))
    out.append(
        f"<p><b>Rare words</b> (seen once in the input): {sv['rare_words']:,}, of which <b>{sv['rare_unchanged']:,}</b> came through "
        f"unchanged in this output (expected from N_w: {_num(sv['rare_expected_unchanged'], 3)}). {e(sv['rare_statement'])}</p>"
    )
    if sv.get("rare_unchanged_words"):
        out.append(f"<p>Rare words unchanged (shown because examples were requested): {e(', '.join(sv['rare_unchanged_words']))}</p>")
    if sv.get("vocabulary_n_w_quantiles"):
        vq, iq = sv["vocabulary_n_w_quantiles"], sv["input_n_w_quantiles"]
        out.append(_table(["N_w", "median", "90%", "99%", "max"], [
            ["this input's words", *[_num(iq.get(k), 3) for k in ("q0.5", "q0.9", "q0.99", "q1")]],
            [f"vocabulary ({e(sv['vocabulary_n_w_from'])})", *[_num(vq.get(k), 3) for k in ("q0.5", "q0.9", "q0.99", "q1")]],
        ], left=(0,)))
    if "n_w" in report.plots:
        out.append(_img(report.plots["n_w"], "N_w of this input's words against the vocabulary's"))
    # 5 attack
    out.append("<h2>5. What an adversary recovers</h2>")
    if "top1" in at:
        out.append(_table(["", "rate", f"{at['confidence']:.0%} interval"], [
            ["Bayes adversary, top-1", _pct(at["top1"]), _ci(at["top1_ci"])],
            [f"Bayes adversary, top-{at['k']}", _pct(at["topk"]), _ci(at["topk_ci"])],
            [f"rare words (≤ 5 occurrences, {at['n_rare']} tokens), top-1", _pct(at["rare_top1"]), _ci(at["rare_top1_ci"])],
            ["prior only (most frequent word)", _pct(at["prior_top1"]), ""],
            ["identity (output read as is)", _pct(at["unchanged"]), ""],
        ], left=(0,)))
        sims = f", {at['n_simulations']:,} simulations" if at.get("n_simulations") else ""
        out.append(f"<p>{at['n_tokens']:,} in-vocabulary tokens sampled uniformly from the {at['tokens_privatized']:,} privatized; method {e(at['method'])} ({e(at['method_why'])}{sims}); seed {at['seed']}.</p>")
    else:
        out.append("<p>No in-vocabulary tokens: nothing to attack.</p>")
    out.append(f"<p class=stmt>{e(at['statement'])}</p>")
    if cv["points"]:
        out.append("<h3>Recovery against epsilon</h3>")
        out.append(f"<p>{e(cv['note'])}.</p>")
        out.append(_table(["epsilon", "top-1", "interval", "unchanged", "prior only"], [
            [("<b>" if abs(r["epsilon"] - m["epsilon"]) < 1e-12 * m["epsilon"] else "") + _num(r["epsilon"]), _pct(r["top1"]), _ci(r["top1_ci"]), _pct(r["unchanged"]), _pct(r["prior_top1"])]
            for r in cv["points"]
        ]))
        if "curve" in report.plots:
            out.append(_img(report.plots["curve"], "recovery rate against epsilon, this run's epsilon marked"))
    elif cv.get("note"):
        out.append(f"<p>Recovery against epsilon: {e(cv['note'])}.</p>")
    if not report.plots:
        out.append(f"<p class=note>Plots {e(d['plots'])}. The tables hold every number.</p>")
    # 6 examples
    out.append("<h2>6. Examples</h2>")
    if d["examples"]:
        out.append(_table(["before", "after"], [[e(x["before"]), e(x["after"])] for x in d["examples"]], left=(0, 1)))
    out.append(f"<p>Examples {e(d['examples_note'])}.</p>")
    out.append("<details><summary>Full record (JSON)</summary><pre>")
    out.append(e(report.to_json()))
    out.append(f"</pre></details><p>Report computed in {d['seconds']:.2f} s.</p></body></html>")
    return "\n".join(out)
