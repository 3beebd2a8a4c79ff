"""Sweeps of the plausible-deniability statistics over ε, summarized as in the papers' tables.

Madlib paper §4.1 / Fig. 2 (histograms of N_w and S_w per ε) and Mahalanobis paper §5.1,
Tables 1–4 (mean ± sd) and Fig. 2–5 (5th/50th/95th percentiles against ε).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator, spawn
from .._validation import check_positive
from .plausible import SUMMARY_KEYS, PlausibleDeniability, plausible_deniability, select_words, summarize

__all__ = ["summarize", "Sweep", "sweep_epsilons", "SUMMARY_KEYS"]


@dataclass
class Sweep:
    """Results of one mechanism family at several ε, on the same words."""

    mechanism: str
    params: dict[str, Any]
    epsilons: list[float]
    results: list[PlausibleDeniability]
    meta: dict[str, Any] = field(default_factory=dict)

    def summaries(self) -> list[dict[str, float]]:
        return [summarize(r) for r in self.results]

    def to_dict(self, *, per_word: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "epsilons": list(self.epsilons),
            "summaries": [dict(epsilon=e, **s) for e, s in zip(self.epsilons, self.summaries())],
            "meta": dict(self.meta),
        }
        if per_word:
            out["results"] = [r.to_dict() for r in self.results]
        return out

    def table(self, stat: str = "n_w", *, scale: float = 1.0) -> list[tuple[float, float, float]]:
        """(ε, mean, sd) rows of ``stat`` (``n_w``, ``s_w`` or ``n_distinct``) times ``scale``."""
        rows = []
        for e, r in zip(self.epsilons, self.results):
            v = np.asarray(getattr(r, stat), dtype=np.float64) * scale
            rows.append((e, float(v.mean()), float(v.std(ddof=1 if v.size > 1 else 0))))
        return rows


def sweep_epsilons(factory: Callable[[float], Any], epsilons: Sequence[float], words: Any = None, *, draws: int = 1000,
                   eta: float = 0.01, rng: RNGLike = None, method: str = "auto", confidence: float = 0.95,
                   progress: Callable[[int], None] | None = None) -> Sweep:
    """Plausible-deniability statistics at each ε, on one fixed set of words.

    Parameters
    ----------
    factory, epsilons
        ``factory(epsilon) -> Mechanism`` and the ε values to measure (each > 0, kept in the
        given order).
    words
        As for :func:`~deniable.calibration.plausible.plausible_deniability`; a count is resolved
        once (stratified, on the first ε's mechanism) so every ε measures the same words.
    rng
        None, int seed, SeedSequence or Generator (:func:`deniable._rng.as_generator`). Each ε
        gets its own independent child stream (:func:`deniable._rng.spawn`), so results do not
        depend on the order of ε.
    """
    eps = [check_positive("epsilon", e) for e in epsilons]
    if not eps:
        raise ValueError("epsilons is empty")
    gen = as_generator(rng)
    first = factory(eps[0])
    if isinstance(words, (int, np.integer)) and not isinstance(words, bool):
        words = select_words(first, int(words), rng=gen)
    children = spawn(gen, len(eps))
    results = []
    for i, (e, child) in enumerate(zip(eps, children)):
        mech = first if i == 0 else factory(e)
        results.append(
            plausible_deniability(
                mech, words, draws=draws, eta=eta, rng=child, method=method,
                confidence=confidence, progress=progress,
            )
        )
    return Sweep(results[0].mechanism, dict(results[0].params), eps, results)
