"""Choosing ε from plausible-deniability targets by bisection (deprecated), erring on the private side.

:func:`select_epsilon` is deprecated in favour of the calibration store:
``get_mechanism(name, max_n_w=...)`` and ``calibration_for(factory).choose(max_n_w)``
(:mod:`deniable.calibration.targets`). It still works as documented here, with a
``DeprecationWarning``.

The Madlib paper (§4.1, Fig. 2) selects ε "by selecting our desired worst case guarantees, then
observing the extreme values of the histograms for N_w and S_w": e.g. no word returned unchanged
more than a fraction ``max_n_w`` of the time, and every word with effective support at least
``min_s_w``. :func:`select_epsilon` automates that: the largest ε whose statistics meet the
targets, found by bracketing and bisection, then checked once more.

Private-side rules (N_w grows and S_w shrinks with ε, Madlib paper §3.1):

* a sampled result meets a target only if its *confidence bound* does: the Wilson upper bound
  of N_w ≤ ``max_n_w`` and the DKW lower bound of S_w ≥ ``min_s_w`` (see
  :mod:`deniable.calibration.plausible`); an uncertain decision therefore counts as a failure
  and moves the answer to a smaller ε;
* the bisection keeps the largest ε that *passed*, never the midpoint or the failing end;
* sampled: the candidate is re-measured with fresh draws at the Bonferroni-adjusted level
  ``1 − (1 − confidence) / (max_rechecks + 1)``; if it fails, ε is lowered step by step until a
  fresh check passes. Over all the (at most ``max_rechecks + 1``) re-checks, the chance that a
  value violating the targets for a measured word is returned is at most ``1 − confidence``;
* exact (``mechanism.probabilities``): the final check runs on *every* vocabulary word; if a
  word outside the measured set fails, the search continues on all words;
* which words: a count ``words = n`` measures a density-stratified sample of ``n`` words *plus*
  the :func:`~deniable.calibration.plausible.extreme_words` (sparsest neighbourhoods, where N_w is
  largest and S_w smallest), always, since the worst case over a random sample can only be
  better than the worst case over the vocabulary. ``EpsilonSelection.coverage`` says which
  words the guarantee covers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int, check_positive, check_unit_interval
from .compute import compute_calibration
from .estimators import _pick_estimator
from .plausible import PlausibleDeniability, extreme_words, plausible_deniability, select_words

__all__ = ["EpsilonSelection", "select_epsilon", "meets_targets", "bonferroni_confidence"]

DEPRECATION = (
    "select_epsilon is deprecated: for an N_w target, get_mechanism(name, max_n_w=...) chooses epsilon from the "
    "calibration store (shipped, cached or computed once), and calibration_for(factory).choose(max_n_w) does the "
    "same for a mechanism factory (deniable.calibration.targets); for S_w or quantile statistics per epsilon, "
    "use sweep_epsilons"
)


def _stat(values: np.ndarray, quantile: float, upper: bool) -> float:
    """Value that a fraction ``quantile`` of words must satisfy: the ``quantile`` quantile
    for an upper target (N_w), the ``1 − quantile`` quantile for a lower target (S_w)."""
    v = np.asarray(values, dtype=np.float64)
    if quantile >= 1.0:
        return float(v.max() if upper else v.min())
    q = quantile if upper else 1.0 - quantile
    return float(np.quantile(v, q, method="higher" if upper else "lower"))


def meets_targets(
    result: PlausibleDeniability,
    *,
    max_n_w: float | None = None,
    min_s_w: float | None = None,
    quantile: float = 1.0,
    conservative: bool = True,
) -> tuple[bool, dict[str, float]]:
    """Whether ``result`` meets the targets; with ``conservative`` the confidence bounds are
    used (Wilson upper bound of N_w, DKW lower bound of S_w). Returns (ok, measured values)."""
    ok = True
    got: dict[str, float] = {}
    if max_n_w is not None:
        col = result.n_w_high if conservative else result.n_w
        got["n_w"] = _stat(col, quantile, upper=True)
        ok &= got["n_w"] <= max_n_w
    if min_s_w is not None:
        col = result.s_w_low if conservative else result.s_w
        got["s_w"] = _stat(col, quantile, upper=False)
        ok &= got["s_w"] >= min_s_w
    return bool(ok), got


def bonferroni_confidence(confidence: float, tests: int) -> float:
    """Per-test level that keeps the chance of *any* false pass among ``tests`` tests at most
    ``1 − confidence`` (Bonferroni: each test gets ``(1 − confidence) / tests``)."""
    tests = check_int("tests", tests, minimum=1)
    return 1.0 - (1.0 - confidence) / tests


@dataclass
class EpsilonSelection:
    """Outcome of :func:`select_epsilon`.

    ``epsilon`` is the selected value (None when even ``eps_min`` fails); ``check`` is the final
    measurement at ``epsilon`` (fresh draws, or exact); ``evaluations`` lists every (ε, stage,
    passed, measured values) in the order tried; ``capped`` is True when ``eps_max`` itself
    passed (the true boundary may be higher).

    ``coverage`` says which words the guarantee is about: ``"all words"`` (every vocabulary
    word: ``words="all"``, or exact probabilities with the all-words final check),
    ``"sample of N + M extreme words"`` (a stratified sample of N words plus M extra
    :func:`~deniable.calibration.plausible.extreme_words`), or ``"N given words"``.
    ``recheck_confidence`` is the Bonferroni-adjusted level of each fresh re-check of a sampled
    selection (None when exact).
    """

    epsilon: float | None
    targets: dict[str, Any]
    check: PlausibleDeniability | None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    capped: bool = False
    coverage: str = "all words"
    recheck_confidence: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "targets": dict(self.targets),
            "capped": self.capped,
            "coverage": self.coverage,
            "recheck_confidence": self.recheck_confidence,
            "evaluations": [dict(e) for e in self.evaluations],
            "check": None if self.check is None else self.check.to_dict(),
        }

    def __repr__(self) -> str:
        eps = "None" if self.epsilon is None else f"{self.epsilon:.6g}"
        tg = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.targets.items() if v is not None)
        lines = [f"EpsilonSelection(epsilon={eps}{' (capped at eps_max)' if self.capped else ''}, coverage={self.coverage!r},",
                 f"  targets: {tg}; {len(self.evaluations)} evaluations"]
        c = self.check
        if c is not None and len(c):
            # the statistics the decision used (confidence bounds when sampled), shown for both targets
            got = meets_targets(c, max_n_w=1.0, min_s_w=1.0, quantile=self.targets.get("quantile", 1.0))[1]
            lines.append(
                f"  check: {c.method}, {len(c)} words{'' if c.draws is None else f', {c.draws} draws'}; "
                f"max N_w {float(np.max(c.n_w)):.4g}, min S_w {float(np.min(c.s_w)):.4g}; "
                f"decision values: N_w {got['n_w']:.4g}, S_w {got['s_w']:.4g}"
            )
        return "\n".join(lines) + ")"


def select_epsilon(
    mechanism_factory: Callable[[float], Any], *, max_n_w: float | None = None, min_s_w: float | None = None,
    quantile: float = 1.0, words: Any = 200, draws: int = 1000, eta: float = 0.01, confidence: float = 0.95,
    eps_start: float = 1.0, eps_min: float = 1e-3, eps_max: float = 1e4, rtol: float = 0.02, recheck_draws: int | None = None,
    max_rechecks: int = 20, extreme: int = 10, k: int = 10, final_all: bool | None = None, method: str = "auto",
    rng: RNGLike = None, progress: Callable[[int], None] | None = None,
) -> EpsilonSelection:
    """The largest ε whose plausible-deniability statistics meet the targets (private side).

    .. deprecated::
        Emits a ``DeprecationWarning``. For an N_w target use
        ``get_mechanism(name, max_n_w=...)`` or ``calibration_for(factory).choose(max_n_w)``
        (:mod:`deniable.calibration.targets`): one calibration per mechanism, parameters and
        vocabulary, shipped or cached, every covered word bounded. For S_w or a quantile, read
        the statistics per ε from :func:`~deniable.calibration.sweep.sweep_epsilons`.

    Guarantee (``quantile = 1``): with exact probabilities and all words (``words="all"``, or
    ``final_all``), every vocabulary word meets the targets at the returned ε. With sampled
    statistics, with probability ≥ ``confidence`` every *measured* word does (Wilson / DKW
    bounds, Bonferroni over the re-checks). With a word count, the measured words are a
    stratified sample plus the extreme words; words outside that set are not covered
    (``coverage`` says which case applies).

    Parameters
    ----------
    mechanism_factory
        ``factory(epsilon) -> Mechanism``.
    max_n_w
        Upper target for N_w = Pr[M(w) = w] (a probability).
    min_s_w
        Lower target for the effective support S_w (a count; η = ``eta``).
    quantile
        Fraction of measured words that must meet the targets: 1.0 (default) is the worst case
        (Madlib paper §4.1); e.g. 0.95 lets 5% of words miss. The extreme words are
        over-represented in the measured set, which makes a quantile < 1 conservative.
    words
        A count ``n`` (default 200): ``n`` words stratified by density
        (:func:`~deniable.calibration.plausible.select_words`) plus the ``extreme`` words,
        resolved once so every ε measures the same words; a list of words or ids (measured as
        given); or ``"all"``/None.
    draws, eta, confidence, method
        As for :func:`~deniable.calibration.plausible.plausible_deniability`.
    eps_start, eps_min, eps_max
        Where bracketing starts (doubling or halving) and its limits.
    rtol
        Bisection stops when the bracket ``hi / lo ≤ 1 + rtol`` (geometric bisection).
    recheck_draws
        Draws of each fresh re-check of a sampled selection (default ``2 * draws``), at level
        ``1 − (1 − confidence) / (max_rechecks + 1)``. When it fails, ε is divided by
        ``1 + rtol`` and re-checked again, up to ``max_rechecks`` times.
    extreme, k
        With a word count: the ``extreme`` words with the largest nearest-neighbour distance and
        the ``extreme`` words with the largest ``k``-NN radius over the whole vocabulary are
        always measured (:func:`~deniable.calibration.plausible.extreme_words`; nothing for
        mechanisms without vector points).
    final_all
        Run the final check on every vocabulary word (default: when the statistics are exact,
        where it costs one ``probabilities`` call per word). If a word fails there, the search
        continues on all words.
    rng
        Seed or Generator; each evaluation gets a fresh child stream.

    Returns
    -------
    EpsilonSelection
        ``epsilon`` never exceeds the largest ε that passed the final (fresh or exact) check.
    """
    warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)
    if max_n_w is None and min_s_w is None:
        raise ValueError("give at least one target: max_n_w and/or min_s_w")
    if max_n_w is not None:
        max_n_w = check_unit_interval("max_n_w", max_n_w, open_low=True)
    if min_s_w is not None:
        min_s_w = check_positive("min_s_w", min_s_w)
    quantile = check_unit_interval("quantile", quantile, open_low=True)
    confidence = check_unit_interval("confidence", confidence, open_low=True, open_high=True)
    eps_start = check_positive("eps_start", eps_start)
    eps_min = check_positive("eps_min", eps_min)
    eps_max = check_positive("eps_max", eps_max)
    if not eps_min <= eps_start <= eps_max:
        raise ValueError(f"need eps_min <= eps_start <= eps_max, got {eps_min!r}, {eps_start!r}, {eps_max!r}")
    rtol = check_positive("rtol", rtol)
    draws = check_int("draws", draws, minimum=1)
    recheck_draws = check_int("recheck_draws", recheck_draws if recheck_draws is not None else 2 * draws, minimum=1)
    max_rechecks = check_int("max_rechecks", max_rechecks, minimum=0)
    extreme = check_int("extreme", extreme, minimum=0)
    k = check_int("k", k, minimum=1)
    if final_all is not None and not isinstance(final_all, bool):
        raise TypeError(f"final_all must be None, True or False, got {final_all!r}")
    gen = as_generator(rng)
    recheck_conf = bonferroni_confidence(confidence, max_rechecks + 1)
    targets = {
        "max_n_w": max_n_w, "min_s_w": min_s_w, "quantile": quantile, "eta": eta, "confidence": confidence,
        "extreme": extreme,
    }

    probe = mechanism_factory(eps_start)
    words, coverage = _resolve_words(probe, words, extreme, k, gen)
    if max_n_w is not None and min_s_w is None and method == "auto":
        fast = _curve_selection(
            mechanism_factory, probe, words, coverage, targets, max_n_w=max_n_w, quantile=quantile, draws=draws,
            recheck_draws=recheck_draws, confidence=confidence, recheck_conf=recheck_conf, eps_min=eps_min, eps_max=eps_max,
            rtol=rtol, max_rechecks=max_rechecks, gen=gen, final_all=final_all,
        )
        if fast is not None:
            return fast
    run = _Bisection(mechanism_factory, words, targets, draws, eta, confidence, method, gen, progress, eps_min, eps_max, rtol)
    lo, hi = run.search(eps_start, run.evaluate(eps_start, "bracket"), "bracket")
    if lo is None:
        return EpsilonSelection(None, targets, None, run.evaluations, coverage=coverage)
    all_ids = np.arange(int(probe.n_words), dtype=np.int64)
    if all(e["draws"] is None for e in run.evaluations):
        return run.finish_exact(lo, hi is None, coverage, all_ids, final_all)
    if final_all:
        run.words, coverage = all_ids, "all words"
    return run.finish_sampled(lo, hi is None, coverage, recheck_draws, recheck_conf, max_rechecks)


def _resolve_words(probe: Any, words: Any, extreme: int, k: int, gen: np.random.Generator) -> tuple[Any, str]:
    """The words every evaluation of :func:`select_epsilon` measures, and the coverage they give."""
    V = int(probe.n_words)
    if isinstance(words, (int, np.integer)) and not isinstance(words, bool):
        sample = select_words(probe, int(words), rng=gen)
        ids = np.union1d(sample, extreme_words(probe, extreme, k=k)).astype(np.int64) if sample.size < V else sample
        coverage = "all words" if ids.size >= V else f"sample of {sample.size} + {ids.size - sample.size} extreme words"
        return ids, coverage
    if words is None or (isinstance(words, str) and words == "all"):
        return np.arange(V, dtype=np.int64), "all words"
    return words, f"{len(words)} given words"


@dataclass
class _Bisection:
    """Bracketing from a start ε (doubling or halving), then geometric bisection, on the statistics
    of :func:`~deniable.calibration.plausible.plausible_deniability` (each evaluation with a
    fresh child stream of ``gen``), then the final check: :func:`select_epsilon`'s search."""

    factory: Callable[[float], Any]
    words: Any
    targets: dict[str, Any]
    draws: int
    eta: float
    confidence: float
    method: str
    gen: np.random.Generator
    progress: Callable[[int], None] | None
    eps_min: float
    eps_max: float
    rtol: float
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    passed: dict[float, PlausibleDeniability] = field(default_factory=dict)

    def evaluate(self, eps: float, stage: str, *, on: Any = None, n_draws: int | None = None, conf: float | None = None) -> bool:
        """Measure at ``eps`` (on ``on`` or the words), record it, and say whether it passed."""
        n_draws = self.draws if n_draws is None else n_draws
        conf = self.confidence if conf is None else conf
        res = plausible_deniability(
            self.factory(eps), self.words if on is None else on, draws=n_draws, eta=self.eta, rng=self.gen.spawn(1)[0],
            method=self.method, confidence=conf, progress=self.progress,
        )
        t = self.targets
        ok, got = meets_targets(res, max_n_w=t["max_n_w"], min_s_w=t["min_s_w"], quantile=t["quantile"])
        sampled = res.method == "sampled"
        self.evaluations.append({
            "epsilon": eps, "stage": stage, "passed": ok, "words": len(res), "draws": n_draws if sampled else None,
            "confidence": conf if sampled else None, **got,
        })
        if ok:
            self.passed[eps] = res
        return ok

    def search(self, eps: float, ok: bool, stage: str) -> tuple[float | None, float | None]:
        """Bracket from ``eps`` (whose outcome is ``ok``), then bisect: (largest pass, smallest
        fail); (None, hi) when eps_min fails, (lo, None) when eps_max passes."""
        if ok:
            lo, hi = eps, None
            while lo < self.eps_max:
                nxt = min(lo * 2.0, self.eps_max)
                if self.evaluate(nxt, stage):
                    lo = nxt
                else:
                    hi = nxt
                    break
        else:
            lo, hi = None, eps
            while hi > self.eps_min:
                nxt = max(hi / 2.0, self.eps_min)
                if self.evaluate(nxt, stage):
                    lo = nxt
                    break
                hi = nxt
            if lo is None:
                return None, hi
        assert lo is not None  # set by the bracketing above
        while hi is not None and hi / lo > 1.0 + self.rtol:
            mid = math.sqrt(lo * hi)
            if self.evaluate(mid, "bisect"):
                lo = mid
            else:
                hi = mid
        return lo, hi

    def finish_exact(self, lo: float, capped: bool, coverage: str, all_ids: np.ndarray, final_all: bool | None) -> EpsilonSelection:
        """Exact statistics: a final check on every word (unless ``final_all`` is False); if a word
        outside the measured set fails, the search continues on all words."""
        if (final_all is None or final_all) and coverage != "all words":
            coverage = "all words"
            if not self.evaluate(lo, "final", on=all_ids):
                self.words = all_ids
                found, _ = self.search(lo, False, "bracket")
                if found is None:
                    return EpsilonSelection(None, self.targets, None, self.evaluations, coverage=coverage)
                lo, capped = found, False
        return EpsilonSelection(lo, self.targets, self.passed[lo], self.evaluations, capped=capped, coverage=coverage)

    def finish_sampled(self, lo: float, capped: bool, coverage: str, recheck_draws: int, recheck_conf: float,
                       max_rechecks: int) -> EpsilonSelection:
        """Sampled statistics: fresh re-checks at the Bonferroni-adjusted level, stepping ε down by
        ``1 + rtol`` while they fail."""
        cand = lo
        for _ in range(max_rechecks + 1):
            self.passed.clear()
            if self.evaluate(cand, "recheck", n_draws=recheck_draws, conf=recheck_conf):
                return EpsilonSelection(
                    cand, self.targets, self.passed[cand], self.evaluations, capped=capped and cand == lo, coverage=coverage,
                    recheck_confidence=recheck_conf,
                )
            cand = cand / (1.0 + self.rtol)
            if cand < self.eps_min:
                break
        return EpsilonSelection(None, self.targets, None, self.evaluations, coverage=coverage, recheck_confidence=recheck_conf)


def _curve_selection(
    factory: Callable[[float], Any], probe: Any, words: Any, coverage: str, targets: dict[str, Any], *, max_n_w: float,
    quantile: float, draws: int, recheck_draws: int, confidence: float, recheck_conf: float, eps_min: float, eps_max: float,
    rtol: float, max_rechecks: int, gen: np.random.Generator, final_all: bool | None,
) -> EpsilonSelection | None:
    """N_w-only selection from whole ε ↦ N_w curves, for mechanisms with a curve estimator
    (TEM: exact kernel; Madlib/Mahalanobis: radial, exact in the noise radius): one measurement
    of the words over an ε grid ``1 + rtol`` apart instead of a bisection of sampled
    evaluations, then a fresh re-check (new directions) at the Bonferroni-adjusted level,
    stepping down by ``1 + rtol`` while it fails. None when the mechanism has no curve estimator.
    """
    est = _pick_estimator(probe)
    if est not in ("kernel", "radial"):
        return None
    ids, coverage = _curve_words(probe, words, coverage, est, final_all)
    n = int(math.ceil(math.log(eps_max / eps_min) / math.log1p(rtol))) + 1
    grid = np.geomspace(eps_min, eps_max, n)
    directions = min(draws, 256)
    cal = compute_calibration(factory, epsilons=grid, words=ids, estimator=est, directions=directions, confidence=confidence,
                              rng=gen.spawn(1)[0], progress=False)
    stat = np.array([_stat(cal.n_w_upper[:, j], quantile, upper=True) for j in range(grid.size)])
    ok = stat <= max_n_w
    evaluations: list[dict[str, Any]] = []
    sampled = est == "radial"

    def record(eps: float, stage: str, passed_: bool, value: float, k: int | None, conf: float) -> None:
        evaluations.append({"epsilon": float(eps), "stage": stage, "passed": bool(passed_), "words": int(ids.size),
                            "draws": k if sampled else None, "confidence": conf if sampled else None, "n_w": float(value)})

    if not ok[0]:
        record(grid[0], "curve", False, stat[0], directions, confidence)
        return EpsilonSelection(None, targets, None, evaluations, coverage=coverage)
    j = grid.size - 1 if ok.all() else int(np.argmin(ok)) - 1
    for i in range(max(0, j - 2), min(grid.size, j + 3)):
        record(grid[i], "curve", ok[i], stat[i], directions, confidence)
    capped = bool(ok.all())
    cand = float(grid[j])

    def check(eps: float, conf: float, k: int) -> PlausibleDeniability:
        return _curve_check(factory, probe, ids, est, eps, conf, k, cal.params, float(targets.get("eta", 0.01)), gen)

    if not sampled:  # exact: the curve is the check
        res = check(cand, confidence, directions)
        return EpsilonSelection(cand, targets, res, evaluations, capped=capped, coverage=coverage)
    k = min(recheck_draws, 512)
    for _ in range(max_rechecks + 1):
        res = check(cand, recheck_conf, k)
        value = _stat(res.n_w_high, quantile, upper=True)
        good = value <= max_n_w
        record(cand, "recheck", good, value, k, recheck_conf)
        if good:
            return EpsilonSelection(cand, targets, res, evaluations, capped=capped and cand == float(grid[j]),
                                    coverage=coverage, recheck_confidence=recheck_conf)
        cand = cand / (1.0 + rtol)
        if cand < eps_min:
            break
    return EpsilonSelection(None, targets, None, evaluations, coverage=coverage, recheck_confidence=recheck_conf)


def _curve_words(probe: Any, words: Any, coverage: str, est: str, final_all: bool | None) -> tuple[np.ndarray, str]:
    """Vocabulary ids (and coverage) the curve selection measures: the given words, or every word
    for the exact and cheap kernel estimator (as the exact path's final check does)."""
    V = int(probe.n_words)
    if est == "kernel" and final_all is not False:
        return np.arange(V, dtype=np.int64), "all words"
    if words is None or (isinstance(words, str) and words == "all"):
        return np.arange(V, dtype=np.int64), coverage
    if isinstance(words, np.ndarray):
        return np.asarray(words, dtype=np.int64), coverage
    return np.array([probe.id_of(w) for w in words], dtype=np.int64), coverage


def _curve_check(factory: Callable[[float], Any], probe: Any, ids: np.ndarray, est: str, eps: float, conf: float, k: int,
                 params: dict[str, Any], eta: float, gen: np.random.Generator) -> PlausibleDeniability:
    """N_w of the words ``ids`` at ``eps`` from a fresh single-ε calibration (``k`` new
    directions for the radial estimator), as a :class:`PlausibleDeniability` (S_w not measured)."""
    sampled = est == "radial"
    c = compute_calibration(factory, epsilons=[eps], words=ids, estimator=est, directions=k, confidence=conf,
                            rng=gen.spawn(1)[0], progress=False)
    nan = np.full(ids.size, np.nan)
    m = probe if math.isclose(float(probe.epsilon), eps) else factory(eps)
    return PlausibleDeniability(
        getattr(m, "name", type(m).__name__), float(eps), dict(params), "exact" if not sampled else "sampled",
        k if sampled else None, eta, conf, np.array(c.words, dtype=object), ids.copy(),
        c.n_w[:, 0], c.n_w[:, 0].copy(), c.n_w_upper[:, 0], nan, nan.copy(), nan.copy(), np.zeros(ids.size, np.int64),
        meta={"estimator": est, "directions": k if sampled else None, "s_w": "not measured (N_w-only selection)"},
    )
