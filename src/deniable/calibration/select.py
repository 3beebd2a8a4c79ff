"""Choosing ε from plausible-deniability targets, erring on the private side.

The Madlib paper (§4.1, Fig. 2) selects ε "by selecting our desired worst case guarantees, then
observing the extreme values of the histograms for N_w and S_w": e.g. no word returned unchanged
more than a fraction ``max_n_w`` of the time, and every word with effective support at least
``min_s_w``. :func:`select_epsilon` automates that: the largest ε whose statistics meet the
targets, found by bracketing and bisection, then re-checked with fresh draws.

Private-side rules (N_w grows and S_w shrinks with ε, Madlib paper §3.1):

* a sampled result meets a target only if its *confidence bound* does: the Wilson upper bound
  of N_w ≤ ``max_n_w`` and the DKW lower bound of S_w ≥ ``min_s_w`` (see
  :mod:`deniable.calibration.plausible`); an uncertain decision therefore counts as a failure
  and moves the answer to a smaller ε;
* the bisection keeps the largest ε that *passed*, never the midpoint or the failing end;
* the final candidate is re-measured with fresh draws; if it fails, ε is lowered step by step
  until a fresh check passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._random import RNGLike, as_generator
from .._validation import check_int, check_positive, check_unit_interval
from .plausible import PlausibleDeniability, plausible_deniability, select_words

__all__ = ["EpsilonSelection", "select_epsilon", "meets_targets"]


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


@dataclass
class EpsilonSelection:
    """Outcome of :func:`select_epsilon`.

    ``epsilon`` is the selected value (None when even ``eps_min`` fails); ``check`` is the fresh
    re-measurement at ``epsilon``; ``evaluations`` lists every (ε, passed, measured values)
    in the order tried; ``capped`` is True when ``eps_max`` itself passed (the true boundary may
    be higher).
    """

    epsilon: float | None
    targets: dict[str, Any]
    check: PlausibleDeniability | None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    capped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "targets": dict(self.targets),
            "capped": self.capped,
            "evaluations": [dict(e) for e in self.evaluations],
            "check": None if self.check is None else self.check.to_dict(),
        }


def select_epsilon(
    mechanism_factory: Callable[[float], Any],
    *,
    max_n_w: float | None = None,
    min_s_w: float | None = None,
    quantile: float = 1.0,
    words: Any = 200,
    draws: int = 1000,
    eta: float = 0.01,
    confidence: float = 0.95,
    eps_start: float = 1.0,
    eps_min: float = 1e-3,
    eps_max: float = 1e4,
    rtol: float = 0.02,
    recheck_draws: int | None = None,
    max_rechecks: int = 20,
    method: str = "auto",
    rng: RNGLike = None,
    progress: Callable[[int], None] | None = None,
) -> EpsilonSelection:
    """The largest ε whose plausible-deniability statistics meet the targets (private side).

    Parameters
    ----------
    mechanism_factory
        ``factory(epsilon) -> Mechanism``.
    max_n_w
        Upper target for N_w = Pr[M(w) = w] (a probability).
    min_s_w
        Lower target for the effective support S_w (a count; η = ``eta``).
    quantile
        Fraction of words that must meet the targets: 1.0 (default) is the worst case over
        words (Madlib paper §4.1); e.g. 0.95 lets 5% of words miss.
    words, draws, eta, confidence, method
        As for :func:`~deniable.calibration.plausible.plausible_deniability`; a count is
        resolved once (stratified by density), so every ε measures the same words.
    eps_start, eps_min, eps_max
        Where bracketing starts (doubling or halving) and its limits.
    rtol
        Bisection stops when the bracket ``hi / lo ≤ 1 + rtol`` (geometric bisection).
    recheck_draws
        Draws of the final fresh re-check (default ``2 * draws``). When it fails, ε is divided
        by ``1 + rtol`` and re-checked again, up to ``max_rechecks`` times.
    rng
        Seed or Generator; each evaluation gets a fresh child stream.

    Returns
    -------
    EpsilonSelection
        ``epsilon`` never exceeds the largest ε that passed a fresh check.
    """
    if max_n_w is None and min_s_w is None:
        raise ValueError("give at least one target: max_n_w and/or min_s_w")
    if max_n_w is not None:
        max_n_w = check_unit_interval("max_n_w", max_n_w, open_low=True)
    if min_s_w is not None:
        min_s_w = check_positive("min_s_w", min_s_w)
    quantile = check_unit_interval("quantile", quantile, open_low=True)
    eps_start = check_positive("eps_start", eps_start)
    eps_min = check_positive("eps_min", eps_min)
    eps_max = check_positive("eps_max", eps_max)
    if not eps_min <= eps_start <= eps_max:
        raise ValueError(f"need eps_min <= eps_start <= eps_max, got {eps_min!r}, {eps_start!r}, {eps_max!r}")
    rtol = check_positive("rtol", rtol)
    draws = check_int("draws", draws, minimum=1)
    recheck_draws = check_int("recheck_draws", recheck_draws if recheck_draws is not None else 2 * draws, minimum=1)
    max_rechecks = check_int("max_rechecks", max_rechecks, minimum=0)
    gen = as_generator(rng)
    targets = {"max_n_w": max_n_w, "min_s_w": min_s_w, "quantile": quantile, "eta": eta, "confidence": confidence}

    if isinstance(words, (int, np.integer)) and not isinstance(words, bool):
        words = select_words(mechanism_factory(eps_start), int(words), rng=gen)
    evaluations: list[dict[str, Any]] = []

    def evaluate(eps: float, n_draws: int, stage: str) -> tuple[bool, PlausibleDeniability]:
        res = plausible_deniability(
            mechanism_factory(eps), words, draws=n_draws, eta=eta, rng=gen.spawn(1)[0], method=method,
            confidence=confidence, progress=progress,
        )
        ok, got = meets_targets(res, max_n_w=max_n_w, min_s_w=min_s_w, quantile=quantile)
        evaluations.append({"epsilon": eps, "stage": stage, "passed": ok, "draws": n_draws if res.method == "sampled" else None, **got})
        return ok, res

    # bracket: lo passes, hi fails
    eps = eps_start
    ok, _ = evaluate(eps, draws, "bracket")
    if ok:
        lo, hi = eps, None
        while hi is None:
            if lo >= eps_max:
                break
            nxt = min(lo * 2.0, eps_max)
            ok, _ = evaluate(nxt, draws, "bracket")
            if ok:
                lo = nxt
            else:
                hi = nxt
    else:
        lo, hi = None, eps
        while lo is None:
            if hi <= eps_min:
                return EpsilonSelection(None, targets, None, evaluations)
            nxt = max(hi / 2.0, eps_min)
            ok, _ = evaluate(nxt, draws, "bracket")
            if ok:
                lo = nxt
            else:
                hi = nxt
    capped = hi is None
    # geometric bisection, keeping the largest passing value
    while hi is not None and hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        ok, _ = evaluate(mid, draws, "bisect")
        if ok:
            lo = mid
        else:
            hi = mid
    # fresh re-check; step down while it fails
    cand = lo
    for _ in range(max_rechecks + 1):
        ok, res = evaluate(cand, recheck_draws, "recheck")
        if ok:
            return EpsilonSelection(cand, targets, res, evaluations, capped=capped)
        cand = cand / (1.0 + rtol)
        if cand < eps_min:
            break
    return EpsilonSelection(None, targets, None, evaluations)
