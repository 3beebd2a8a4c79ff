"""The sections of a :class:`~deniable.reports.PrivacyReport` and the pieces they are computed
from: per-document bounds, N_w of the input's words, the choice of attack, each section's
JSON-ready dict (:func:`~deniable.reports.build_report` assembles them in order)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator

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


def choose_attack_method(mech: Any, method: str) -> tuple[str, str]:
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


def rebuild_at(mech: Any, epsilon: float) -> Any:
    from ..mechanisms.registry import get_mechanism

    return get_mechanism(str(mech.name), mech.vocabulary, epsilon=epsilon, **mech.params)


def json_safe(x: Any) -> Any:
    """JSON-safe: numpy scalars and arrays to Python, non-finite floats to None."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, np.generic):
        return json_safe(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def has_small_vocab(mech: Any) -> bool:
    from ..evaluation.inversion import has_exact_probabilities

    return has_exact_probabilities(mech) and float(mech.n_words) ** 2 <= EXACT_MAX_PAIRS


# -- the sections, in the report's order -----------------------------------------------------------


def mechanism_section(mech: Any) -> dict[str, Any]:
    """Section 1: the mechanism, ε, how ε was chosen and the guarantee in words."""
    eps = float(mech.epsilon)
    g = mech.guarantee
    choice = getattr(mech, "epsilon_choice", None)
    return {
        "name": str(getattr(mech, "name", type(mech).__name__)),
        "repr": repr(mech),
        "params": json_safe({k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in mech.params.items()}),
        "epsilon": eps,
        "epsilon_choice": None if choice is None else json_safe(choice.to_dict()),
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


def run_section(mech: Any, stats: dict[str, int], n_documents: int, oov: str) -> tuple[dict[str, Any], list[str]]:
    """Section 2: the run's counts, and the warnings (output ≈ input or ≈ noise, unknown words,
    an infinite metric)."""
    from ..text.privatize import summarize_privatization

    summary = summarize_privatization(mech, stats, oov=oov)
    n_words = int(stats.get("words", 0))
    n_unknown = int(stats.get("unknown", 0))
    run = {
        "documents": n_documents,
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
    return run, warns


def documents_section(mech: Any, lengths: Sequence[int], oov: str, lines: Sequence[int] | None) -> dict[str, Any]:
    """Section 3: per-document bounds (one implementation, :func:`document_bounds`, as ``--report``)."""
    eps = float(mech.epsilon)
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
    return doc


def _n_w_quantiles(n_w: np.ndarray) -> dict[str, float]:
    return {f"q{q:g}": float(np.quantile(n_w, q)) for q in (0.5, 0.9, 0.99, 1.0)} if n_w.size else {}


def survival_section(mech: Any, counts: np.ndarray, unchanged: np.ndarray, seed: int, *, name_rare: bool) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None]:
    """Section 4: the input words most likely to survive and the rare words that did (named only
    when ``name_rare``). Also returns the input's N_w and the vocabulary's (for the plot)."""
    eps = float(mech.epsilon)
    words = mech.vocabulary.words
    ids = np.flatnonzero(counts)
    n_w, how, cal = n_w_of_words(mech, ids, counts, rng=seed)
    ok = ~np.isnan(n_w)
    order = np.lexsort((ids[ok], -n_w[ok]))[:TOP_WORDS]
    top = [{"word": words[int(ids[ok][i])], "n_w": float(n_w[ok][i]), "count": int(counts[ids[ok][i]]), "unchanged": int(unchanged[ids[ok][i]])} for i in order]
    rare = counts == 1
    rare_unchanged = rare & (unchanged == 1)
    rare_ids = np.flatnonzero(rare)
    survival: dict[str, Any] = {
        "how": how,
        "epsilon": eps,
        "distinct_words": int(ids.size),
        "estimated_words": int(ok.sum()),
        "top": top,
        "input_n_w_quantiles": _n_w_quantiles(n_w[ok]),
        "rare_words": int(rare.sum()),
        "rare_unchanged": int(rare_unchanged.sum()),
        "rare_expected_unchanged": float(np.nansum(n_w[np.isin(ids, rare_ids)])) if rare_ids.size else 0.0,
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
        survival["vocabulary_n_w_quantiles"] = _n_w_quantiles(vocab_n_w)
        survival["vocabulary_n_w_from"] = f"{cal.source} ({int(sample_ids.size)} sampled vocabulary words)"
    if name_rare:
        survival["rare_unchanged_words"] = sorted(words[int(w)] for w in np.flatnonzero(rare_unchanged))[:50]
    return survival, n_w[ok], vocab_n_w


_ATTACK_STATEMENT = (
    "The adversary knows the mechanism and the word frequencies of this sample (smoothed so that every vocabulary word has "
    "some prior mass), sees each released word on its own and guesses its input by argmax_x P(y|x) P(x) (Bayes rule). 'top1' "
    "is how often that guess is the true input word on the released words of this output (the sampled tokens); 'prior_top1' "
    "is what guessing the most frequent word without looking recovers; 'unchanged' is what reading the output as it is "
    "recovers. Context is not used: an adversary with a language model may do better."
)


def attack_section(
    mech: Any, x: np.ndarray, y: np.ndarray, tokens: int, seed: int, gen: np.random.Generator, *, method: str, smoothing: float | str
) -> tuple[dict[str, Any], Any]:
    """Section 5: the Bayes adversary (:func:`deniable.evaluation.inversion_attack`) on the
    sampled (input ``x``, output ``y``) ids of this output, seeded from ``gen``. Returns the
    section and the attack's result (None without in-vocabulary tokens)."""
    from ..evaluation import inversion_attack

    method, why = choose_attack_method(mech, method)
    attack: dict[str, Any] = {"method": method, "method_why": why, "seed": seed, "tokens_privatized": tokens, "sampled_tokens": int(x.size)}
    attack_seed = int(gen.integers(2**63))
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
    attack["statement"] = _ATTACK_STATEMENT
    return attack, result


def curve_section(mech: Any, x: np.ndarray, gen: np.random.Generator, *, method: str, smoothing: float | str) -> dict[str, Any]:
    """The recovery rate at ε × :data:`CURVE_FACTORS` (fresh draws of the mechanism rebuilt at
    each ε, on at most :data:`CURVE_TOKENS` of the sampled tokens ``x``, chosen with ``gen``).
    Never fails the report: a mechanism fitted to a corpus, or one that cannot be rebuilt, gets a
    note instead of points."""
    from ..evaluation import inversion_attack

    if getattr(mech, "fittable", False):
        return {"points": [], "note": f"not measured: {mech.name} is fitted to a corpus, and a rebuild at another epsilon would not be"}
    eps = float(mech.epsilon)
    keep = np.flatnonzero(x >= 0)
    if keep.size > CURVE_TOKENS:
        keep = np.sort(gen.choice(keep, CURVE_TOKENS, replace=False))
    xc = x[keep]
    rows: list[dict[str, Any]] = []
    try:
        for f in CURVE_FACTORS:
            e = eps * f
            m = mech if f == 1.0 else rebuild_at(mech, e)
            cm = method if method == "sample" or has_small_vocab(m) else "sample"
            r = inversion_attack(m, xc, rng=int(gen.integers(2**63)), method=cm, smoothing=smoothing, n_simulations=CURVE_SIMULATIONS if cm == "sample" else None)
            rows.append({"epsilon": e, "top1": r.top1, "top1_ci": list(r.top1_ci), "prior_top1": r.prior_top1, "unchanged": r.unchanged, "method": r.method})
    except Exception as exc:  # a curve never fails the report
        return {"points": [], "note": f"not measured: rebuilding {mech.name} at other epsilons failed ({exc})"}
    note = (
        f"fresh draws of the mechanism at epsilon x {', '.join(f'{f:g}' for f in CURVE_FACTORS)} on {xc.size} of the sampled tokens"
        f"{'' if method == 'exact' else f', {CURVE_SIMULATIONS:,} simulations each'}"
    )
    return {"points": rows, "note": note}
