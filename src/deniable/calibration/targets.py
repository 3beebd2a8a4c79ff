"""Privacy targets instead of raw ε: ε ↦ N_w curves for a whole vocabulary, shipped or cached.

A target ``max_n_w = τ`` asks for the largest ε at which *every* vocabulary word w satisfies
N_w = Pr[M(w) = w] ≤ τ (Madlib paper §3.2 and §4.1: choose ε from the plausible-deniability
statistics, worst words included). :func:`calibration_for` returns a :class:`Calibration` —
per-word N_w over a geometric grid of ε with upper confidence bounds — and
:meth:`Calibration.choose` turns a target into an ε, erring on the private side.

Where a calibration comes from (fastest first):

1. **shipped**: package data for the bundled embedding and each mechanism's default parameters
   (``deniable/calibration/data/*.npz``, built by ``scripts/build_calibration.py``), covering
   every vocabulary word;
2. **cached**: a calibration computed earlier for the same vocabulary fingerprint, mechanism and
   parameters (``$DENIABLE_CACHE_DIR/calibration/``);
3. **computed** now, with a progress bar, by the best estimator the mechanism supports:

   * ``kernel`` (TEM, Euclidean): exact closed form from each word's distance histogram; bins
     are rounded up, so N_w is over-estimated by at most a stated factor.
   * ``radial`` (Madlib, Mahalanobis): noise = R·u with R ~ Gamma(d, 1/ε); for each sampled
     direction u the output is w iff R ≤ t_w(u), the distance to the edge of w's Voronoi cell
     along u; N_w(ε) = mean_u Pr[R ≤ t_w(u)], exact in R, for every ε.
   * ``flips`` (BRR with an exact Hamming index): randomized response couples all ε through one
     uniform per bit, so the flipped bits are the first K ~ Binomial(L, p(ε)) of a random bit
     order; along that order w stays nearest up to a K found by binary search with exact
     Hamming k-NN; N_w(ε) = mean over orders of a Binomial-CDF combination, every ε at once,
     ties rounded up.
   * ``exact`` (any mechanism with probabilities): ``mechanism.probabilities(w)`` per word and ε,
     or, where the mechanism has ``self_probabilities(ids, epsilons)`` (SanText, SanText+,
     TruncatedGumbel: ε only scales fixed scores), the whole grid from one pass over each word's
     distances (SanText on the bundled embedding: 36 s measured, against ≈ 4,500 s estimated
     from 80 ms per ``probabilities`` call × 577 words × 97 grid points).
   * ``sampled`` (any): ``sample_ids`` at grid ε (12 per decade), Wilson bounds; words chosen
     by isolation (Hamming for BRR) plus a random sample.

Confidence. ``n_w_upper`` is a one-sided upper bound at level ``confidence``: Wilson's score
bound on the sum of the per-direction (per-draw, per-order) values, each in [0, 1] (a Bernoulli
variable is the most spread [0, 1] variable with a given mean). :meth:`Calibration.choose` takes
the largest grid ε such that, at that ε *and every smaller grid ε*, the largest upper bound over
the covered words is ≤ τ; if some word's true N_w exceeds τ at the chosen ε, then the word with
the largest true N_w at the smallest failing grid ε had its bound below its value, which happens
with probability ≤ 1 − confidence. So: with probability ≥ ``confidence``, every covered word
meets the target. ``coverage`` says which words are covered.

Modules. This module keeps the target API (:func:`check_target`, :func:`choose_epsilon`,
:func:`mechanism_for_target`) and re-exports the rest: the record and its file format
(:mod:`~deniable.calibration.record`), the store — shipped, cached or computed, and the cache key
(:mod:`~deniable.calibration.store`) — the computation (:mod:`~deniable.calibration.compute`) and
the estimators (:mod:`~deniable.calibration.estimators`, :mod:`~deniable.calibration.flips`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .compute import ESTIMATORS, compute_calibration, default_epsilons
from .estimators import _pick_estimator as _pick_estimator
from .estimators import radial_edges as radial_edges
from .estimators import refine_worst as refine_worst
from .record import FORMAT_VERSION as FORMAT_VERSION
from .record import Calibration, EpsilonChoice, calibration_key, check_target
from .store import _DATA as _DATA
from .store import calibration_for, calibration_options, known_calibration, shipped_calibration

__all__ = [
    "Calibration",
    "EpsilonChoice",
    "calibration_for",
    "calibration_options",
    "compute_calibration",
    "choose_epsilon",
    "check_target",
    "shipped_calibration",
    "calibration_key",
    "default_epsilons",
    "ESTIMATORS",
    "known_calibration",
    "mechanism_for_target",
]


def choose_epsilon(factory: Callable[[float], Any], max_n_w: float, **kwargs: Any) -> tuple[EpsilonChoice, Calibration]:
    """Resolve a target: ``(choice, calibration)`` for ``factory(ε)`` (see :func:`calibration_for`)."""
    tau = check_target("max_n_w", max_n_w)
    cal = calibration_for(factory, **kwargs)
    return cal.choose(tau), cal


def mechanism_for_target(name: str, embedding: Any = None, *, max_n_w: float | None = None, epsilon: float | None = None,
                         progress: bool | None = None, cache_dir: str | os.PathLike[str] | bool | None = None,
                         backend: str = "numpy", device: str | None = None, **params: Any) -> Any:
    """``get_mechanism`` with a privacy target: exactly one of ``epsilon`` and ``max_n_w``.

    The calibration is of the numpy mechanism (``backend="torch"`` samples the same
    distribution, so the chosen ε carries over). ``progress`` shows a bar if a calibration must
    be computed (default: when stderr is a terminal); ``cache_dir`` as for
    :func:`calibration_for`."""
    from ..mechanisms.registry import get_mechanism

    if epsilon is not None and max_n_w is not None:
        raise TypeError("give either epsilon or max_n_w, not both (max_n_w chooses epsilon for you)")
    if epsilon is None and max_n_w is None:
        raise TypeError("give epsilon=... (privacy parameter > 0) or max_n_w=... (largest allowed chance, in (0, 1), that a word comes back unchanged)")
    if epsilon is not None:
        return get_mechanism(name, embedding, epsilon=epsilon, backend=backend, device=device, **params)
    tau = check_target("max_n_w", max_n_w)
    if embedding is None and name != "brr":
        from ..embeddings import load_embedding

        embedding = load_embedding()

    def factory(e: float) -> Any:
        return get_mechanism(name, embedding, epsilon=e, **params)

    choice, _ = choose_epsilon(factory, tau, progress=progress, cache_dir=cache_dir)
    return get_mechanism(name, embedding, epsilon=choice.epsilon, backend=backend, device=device, **params).with_epsilon_choice(choice)
