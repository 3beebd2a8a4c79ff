"""Computing a calibration: the ε grid, which words to measure, and the estimator that measures
them (:func:`compute_calibration`; the estimators are in :mod:`deniable.calibration.estimators`
and :mod:`deniable.calibration.flips`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from .estimators import (
    _bar,
    _exact_curves,
    _kernel_curves,
    _measured_words,
    _pick_estimator,
    _radial_curves,
    _radial_directions,
    _sampled_curves,
    _screened,
)
from .flips import _flips_curves, _flips_usable
from .record import Calibration, calibration_key
from .two_nearest import _vickrey_curves

__all__ = ["compute_calibration", "default_epsilons", "ESTIMATORS"]

ESTIMATORS = ("kernel", "radial", "radial-vickrey", "flips", "exact", "sampled")
_RADIAL = ("radial", "radial-vickrey")  # directions, every word screened by default


def default_epsilons(lo: float = 0.01, hi: float = 100.0, per_decade: int = 24) -> np.ndarray:
    """Geometric ε grid from ``lo`` to ``hi`` with ``per_decade`` points per factor 10 (ratio
    10^(1/24) ≈ 1.10 by default: the chosen ε is within 10 % of the boundary)."""
    n = int(round(math.log10(hi / lo) * per_decade)) + 1
    return np.geomspace(lo, hi, n)


def compute_calibration(
    factory: Callable[[float], Any],
    *,
    epsilons: Sequence[float] | np.ndarray | None = None,
    words: Any = "auto",
    estimator: str = "auto",
    directions: int = 128,
    draws: int = 100,
    isolated: int = 200,
    sample: int = 300,
    confidence: float = 0.95,
    rng: RNGLike = 0,
    progress: bool | None = None,
    backend: str = "numpy",
    extra: Sequence[int] | np.ndarray | None = None,
    sampler: Callable[[float], Any] | None = None,
    screen: int | None = None,
    refine: int = 300,
) -> Calibration:
    """Measure N_w over an ε grid for ``factory(ε)`` (see the module docstring for estimators).

    Parameters
    ----------
    factory
        ``factory(epsilon) -> Mechanism``.
    epsilons
        The grid (default :func:`default_epsilons`: 0.01 … 100, 24 points per decade).
    words
        ``"all"`` (every vocabulary word), ``"auto"`` (all words for the ``kernel`` estimator and
        for vocabularies of at most ``2 * isolated + sample`` words; otherwise the ``isolated``
        words with the largest nearest-neighbour distance and ``isolated`` with the largest 10-NN
        radius over the whole vocabulary — Euclidean, or Hamming for binary codes — plus ``sample``
        random words), a count ``n`` (that recipe with ``sample = n``), or an array of ids.
    estimator
        ``"auto"`` or one of :data:`ESTIMATORS`.
    directions, draws
        Directions per word (radial); random bit orders per word (flips, all ε at once);
        samples per word and grid ε (sampled: the grid is thinned
        to 12 points per decade, starts one grid decade below the first ε where a measured word
        is ever returned unchanged, and stops once every measured word keeps itself ≥ 99.5 % of the
        time; N_w is taken to grow with ε outside the measured range).
    confidence
        Level of the one-sided upper bounds.
    backend
        ``"numpy"`` or ``"torch"`` (GPU when available) for the radial estimator.
    extra
        Vocabulary ids always measured as well (not part of the random sample).
    screen, refine
        Radial or flips with ``words="auto"``: every word is screened with ``screen`` directions
        (draws); the ``refine`` words with the highest screened N_w (area under the curve over
        the grid), the ``isolated`` most isolated words and ``sample`` random words are then
        measured with ``directions`` directions (``draws`` draws) and get upper confidence
        bounds; the other words keep their screened point estimates. ``screen=0`` measures only
        the refined words. Default: 8 for radial, 0 for flips (screening every word of a 34K
        vocabulary costs minutes there; the shipped BRR calibration does it).
    sampler
        ``sampler(epsilon)`` that draws for the ``sampled`` estimator (e.g. the torch backend of
        the same mechanism); default ``factory``.
    """
    gen = as_generator(rng)
    eps = _check_grid(epsilons)
    probe = factory(float(eps[0]))
    name, params, fp = calibration_key(factory)
    V = int(probe.n_words)
    est = _pick_estimator(probe) if estimator == "auto" else _check_estimator(estimator, probe)
    t0 = time.perf_counter()
    n_screen = (8 if est in _RADIAL else 0) if screen is None else check_int("screen", screen, minimum=0)
    ids, is_sample, coverage, screened = _choose_words(probe, words, est, n_screen, isolated, sample, extra, gen)
    bar = _bar(ids.size, progress, f"calibrate {name}")
    try:
        if screened:
            bar.close()
            full, unit = (directions, "directions") if est in _RADIAL else (draws, "draws")
            curves = _curves_of(est, probe, eps, confidence, gen, backend)
            n_w, up, is_sample, coverage, meta = _screened(
                probe, eps, V, full, n_screen, refine, isolated, sample, extra, confidence, gen, progress, name, curves, unit)
        else:
            n_w, up, meta = _measure(est, factory, probe, ids, eps, directions=directions, draws=draws,
                                     confidence=confidence, gen=gen, backend=backend, sampler=sampler, update=bar.update)
    finally:
        bar.close()
    meta["seconds"] = round(time.perf_counter() - t0, 2)
    vocab_words = probe.vocabulary.words
    return Calibration(
        mechanism=name, params=params, fingerprint=fp, n_vocab=V, estimator=est, confidence=confidence, coverage=coverage,
        epsilons=eps, word_ids=ids, n_w=n_w, n_w_upper=np.maximum(up, n_w), sample=is_sample,
        words=[vocab_words[i] for i in ids.tolist()], meta=meta,
    )


def _check_estimator(estimator: str, probe: Any) -> str:
    """A requested estimator, if it applies to ``probe``: ``exact`` and ``sampled`` always,
    ``flips`` to BRR with an exact Hamming search, the others only where the mechanism's
    ``calibration_estimator()`` names them (they model its sampling)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be 'auto' or one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    if estimator == "flips" and not _flips_usable(probe):
        raise ValueError(f"the flips estimator applies to BRR with an exact Hamming index, not {type(probe).__name__}")
    if estimator in ("kernel", *_RADIAL) and estimator != (own := probe.calibration_estimator()):
        raise ValueError(f"the {estimator} estimator does not apply to this {type(probe).__name__} (its own is {own!r}); "
                         "use estimator='auto'")
    return estimator


def _check_grid(epsilons: Sequence[float] | np.ndarray | None) -> np.ndarray:
    """The ε grid as float64 (default :func:`default_epsilons`); it must be increasing, finite, > 0."""
    eps = np.asarray(default_epsilons() if epsilons is None else epsilons, dtype=np.float64)
    if eps.ndim != 1 or eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps <= 0) or np.any(np.diff(eps) <= 0):
        raise ValueError("epsilons must be a non-empty increasing list of finite numbers > 0")
    return eps


def _choose_words(probe: Any, words: Any, est: str, n_screen: int, isolated: int, sample: int, extra: Any,
                  gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str, bool]:
    """``(ids, is_sample, coverage, screened)`` for :func:`compute_calibration`'s ``words``;
    ``screened``: every word is screened and the riskiest refined (radial or flips with
    ``words="auto"`` and ``screen > 0``; ids, sample and coverage are then set by the screening)."""
    V = int(probe.n_words)
    all_ids = np.arange(V, dtype=np.int64)
    auto = isinstance(words, str) and words == "auto"
    if (isinstance(words, str) and words == "all") or (auto and (est == "kernel" or 2 * isolated + sample >= V)):
        return all_ids, np.ones(V, bool), "all words", False
    if isinstance(words, (list, tuple, np.ndarray)):
        ids = np.asarray(words, dtype=np.int64).ravel()
        if ids.size == 0 or ids.min() < 0 or ids.max() >= V:
            raise ValueError(f"words must be vocabulary ids in [0, {V - 1}]")
        coverage = "all words" if np.unique(ids).size >= V else f"{ids.size} given words"
        return ids, np.ones(ids.size, bool), coverage, False
    if auto and est in (*_RADIAL, "flips") and n_screen:
        return all_ids, np.ones(V, bool), "all words", True
    n_sample = sample if isinstance(words, str) else check_int("words", words, minimum=1)
    ext, rand, more = _measured_words(probe, isolated, n_sample, extra, gen)
    ids = np.union1d(np.union1d(ext, rand), more).astype(np.int64)
    coverage = "all words" if ids.size >= V else (
        f"{ids.size} measured words ({ext.size} most isolated + {rand.size} random"
        + (f" + {more.size} given" if more.size else "") + "; other words are ranked by isolation, not measured)"
    )
    return ids, np.isin(ids, rand), coverage, False


def _curves_of(est: str, probe: Any, eps: np.ndarray, confidence: float, gen: np.random.Generator,
               backend: str) -> Callable[[np.ndarray, int, Callable[[int], None] | None], tuple[np.ndarray, np.ndarray]]:
    """``curves(ids, n, update) -> (n_w, upper)`` of the radial estimators (``n`` directions) or
    flips (``n`` draws), for screening and refining."""
    if est in _RADIAL:
        def curves(ids_: np.ndarray, n: int, update: Any) -> tuple[np.ndarray, np.ndarray]:
            return _radial_measure(est, probe, ids_, eps, n, confidence, gen, update, backend)
    else:
        def curves(ids_: np.ndarray, n: int, update: Any) -> tuple[np.ndarray, np.ndarray]:
            return _flips_curves(probe, ids_, eps, n, confidence, gen, update)[:2]
    return curves


def _measure(est: str, factory: Callable[[float], Any], probe: Any, ids: np.ndarray, eps: np.ndarray, *, directions: int,
             draws: int, confidence: float, gen: np.random.Generator, backend: str, sampler: Callable[[float], Any] | None,
             update: Callable[[float], None]) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``(n_w, upper, meta)`` of the words ``ids`` by the estimator ``est``."""
    if est == "kernel":
        n_w, meta = _kernel_curves(factory, probe, ids, eps, progress=update)
        return n_w, n_w.copy(), meta
    if est in _RADIAL:
        n_w, up = _radial_measure(est, probe, ids, eps, directions, confidence, gen, update, backend)
        return n_w, up, {"directions": directions}
    if est == "flips":
        return _flips_curves(probe, ids, eps, draws, confidence, gen, update)
    if est == "exact":
        n_w = _exact_curves(factory, ids, eps, update)
        return n_w, n_w.copy(), {}
    n_w, up, measured = _sampled_curves(sampler or factory, ids, eps, draws, confidence, gen, update)
    return n_w, up, {"draws": draws, "measured_epsilons": eps[measured].round(6).tolist()}


def _radial_measure(est: str, probe: Any, ids: np.ndarray, eps: np.ndarray, n: int, confidence: float, gen: np.random.Generator,
                    update: Any, backend: str) -> tuple[np.ndarray, np.ndarray]:
    """``(n_w, upper)`` by ``radial`` (Madlib, Mahalanobis) or ``radial-vickrey`` (Vickrey) from
    ``n`` fresh noise directions."""
    U = _radial_directions(probe, n, gen)
    assert U is not None  # _check_estimator / the mechanism's contract chose a radial estimator
    if est == "radial-vickrey":
        return _vickrey_curves(probe, ids, eps, U, confidence, update)
    return _radial_curves(probe, ids, eps, U, confidence, update, backend)
