"""N_w against ε for the explorer's plot: the median word and the worst measured word.

N_w = Pr[M(w) = w], the probability that a word is released unchanged (Madlib paper §3.2). The
curve comes from the calibration data shipped with deniable where this installation has it
(``deniable.calibration`` exposing ``nw_curve``), else from a quick estimate computed once per
(mechanism, parameters) and cached: :func:`deniable.calibration.plausible_deniability` on a small
density-stratified sample of words (exact probabilities where the mechanism has them, else a few
dozen draws per word), so the "worst" is the worst *measured* word, not a vocabulary-wide bound.
The response says which (``source``).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["EPSILON_GRIDS", "CurveCache", "estimate_curve"]

#: ε values of the plot (and the explorer's suggested ε, the middle one), per mechanism where they
#: were tuned: where each goes from "almost every word replaced" to "almost every word kept" on
#: the bundled 300-d embedding, from the quick estimate below (BRR's ε is per bit of 256;
#: Vickrey's median N_w rises slowly: about 0.3 at ε = 30, 0.5 at 200). These are hints for the
#: plot, not the list of mechanisms served: any other mechanism gets DEFAULT_GRID.
EPSILON_GRIDS: dict[str, tuple[float, ...]] = {
    "madlib": (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0),
    "mahalanobis": (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0),
    "tem": (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0),
    "brr": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0),
    "knn_tem": (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0),
    "santext": (0.5, 1.0, 1.5, 2.0, 2.25, 2.5, 3.0, 4.0),
    "santext_plus": (0.5, 1.0, 1.5, 2.0, 2.25, 2.5, 3.0, 4.0),
    "custext": (1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 20.0),
    "diffractor": (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0),
    "vickrey": (5.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0, 200.0),
}
DEFAULT_GRID = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)


def _shipped(pool: Any, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The curve of the calibration shipped with deniable for this mechanism, these parameters
    and this vocabulary (``MechanismPool.shipped_calibration``), or None."""
    cal = pool.shipped_calibration(name, params)
    if cal is None:
        return None
    try:
        eps = np.asarray(cal.epsilons, dtype=np.float64)
        median = np.asarray(cal.quantile(0.5), dtype=np.float64)
        n_w = np.asarray(cal.n_w, dtype=np.float64)
        worst_i = np.argmax(n_w, axis=0)
        worst = n_w[worst_i, np.arange(eps.size)]
        # the interesting stretch: from where the worst word starts being kept to where the median is
        lo = max(0, int(np.searchsorted(worst, 0.005)) - 2)
        hi = min(eps.size, int(np.searchsorted(median, 0.995)) + 3)
        if hi - lo < 4:
            lo, hi = 0, eps.size
        words = list(cal.words) if cal.words else [str(int(i)) for i in cal.word_ids]
        return {
            "mechanism": name,
            "params": dict(params),
            "epsilons": eps[lo:hi].tolist(),
            "median": median[lo:hi].tolist(),
            "worst": worst[lo:hi].tolist(),
            "worst_word": [words[int(i)] for i in worst_i[lo:hi]],
            "source": f"{cal.source}: {cal.estimator} estimator, {cal.coverage}",
        }
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return None  # another calibration API: fall back to the quick estimate


def estimate_curve(pool: Any, name: str, params: dict[str, Any], *, words: int = 12, draws: int = 48, rng: int = 0) -> dict[str, Any]:
    """Quick N_w-vs-ε estimate on ``words`` stratified words (``draws`` samples each where the
    mechanism has no exact probabilities); deterministic for a given ``rng``."""
    from ..calibration import plausible_deniability, select_words

    grid = EPSILON_GRIDS.get(name, DEFAULT_GRID)
    first = pool.get(name, params, epsilon=grid[0])
    ids = select_words(first, min(words, first.n_words), rng=rng)
    median, worst, worst_word, exact = [], [], [], True
    for i, eps in enumerate(grid):
        mech = pool.get(name, params, epsilon=eps)
        res = plausible_deniability(mech, ids, draws=draws, rng=rng + i)
        n = np.asarray(res.n_w, dtype=np.float64)
        median.append(float(np.median(n)))
        j = int(np.argmax(n))
        worst.append(float(n[j]))
        worst_word.append(str(res.word[j]))
        exact = exact and res.method == "exact"
    how = "exact probabilities" if exact else f"{draws} draws per word"
    return {
        "mechanism": name,
        "params": dict(params),
        "epsilons": list(grid),
        "median": median,
        "worst": worst,
        "worst_word": worst_word,
        "words": len(ids),
        "exact": exact,
        "source": f"quick estimate: {len(ids)} density-stratified words, {how}; worst = worst measured word",
    }


class CurveCache:
    """One curve per (mechanism, parameters), computed once (thread-safe)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._curves: dict[tuple, dict[str, Any]] = {}
        self._locks: dict[tuple, threading.Lock] = {}

    def get(self, name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = self.pool.check(name, dict(params or {}))
        key = (name, tuple(sorted((k, repr(v)) for k, v in params.items())))
        with self._lock:
            if key in self._curves:
                return self._curves[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._curves:
                    return self._curves[key]
            curve = _shipped(self.pool, name, params) or estimate_curve(self.pool, name, params)
            with self._lock:
                self._curves[key] = curve
            return curve
