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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int

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
]

FORMAT_VERSION = 1
ESTIMATORS = ("kernel", "radial", "flips", "exact", "sampled")
_DATA = Path(__file__).with_name("data")


def default_epsilons(lo: float = 0.01, hi: float = 100.0, per_decade: int = 24) -> np.ndarray:
    """Geometric ε grid from ``lo`` to ``hi`` with ``per_decade`` points per factor 10 (ratio
    10^(1/24) ≈ 1.10 by default: the chosen ε is within 10 % of the boundary)."""
    n = int(round(math.log10(hi / lo) * per_decade)) + 1
    return np.geomspace(lo, hi, n)


def check_target(name: str, value: Any) -> float:
    """A probability target strictly between 0 and 1 (``max_n_w``); errors say what is allowed."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    v = float(value)
    if not (0.0 < v < 1.0):
        raise ValueError(
            f"{name} must be strictly between 0 and 1 (the largest allowed chance that a word comes back unchanged), got {value!r}"
        )
    return v


def _upper_bound(sums: np.ndarray, n: int, confidence: float) -> np.ndarray:
    """One-sided Wilson upper bound for means of ``n`` values in [0, 1] with the given sums."""
    z = NormalDist().inv_cdf(confidence)
    p = np.clip(np.asarray(sums, dtype=np.float64) / n, 0.0, 1.0)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre + half, p, 1.0)


# -- the calibration record ----------------------------------------------------------------------


@dataclass
class EpsilonChoice:
    """How an ε was chosen from a target (``mechanism.epsilon_choice``; also in its guarantee)."""

    epsilon: float
    max_n_w: float
    confidence: float
    coverage: str
    estimator: str
    source: str
    worst_n_w: float  # upper confidence bound of the worst covered word at epsilon
    worst_word: str
    median_n_w: float
    changed: float  # expected fraction of (vocabulary) words changed: 1 - mean N_w
    useful_range: tuple[float, float]  # ε where the median word's N_w goes from 0.05 to 0.95

    def __str__(self) -> str:
        bound = "exact, rounded up" if self.estimator in ("kernel", "exact") else f"{self.confidence:.0%} upper bound"
        return (
            f"chosen for max_n_w={self.max_n_w:g}: the largest epsilon on the grid at which every word ({self.coverage}) has "
            f"N_w <= {self.max_n_w:g} (worst: {self.worst_word!r}, {bound} {self.worst_n_w:.3g}; "
            f"median word {self.median_n_w:.3g}; {self.estimator} estimator, {self.source})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class Calibration:
    """Per-word N_w of one mechanism (name + parameters) on one vocabulary over a grid of ε.

    ``n_w`` and ``n_w_upper`` are ``(words, epsilons)`` arrays for the words ``word_ids``:
    point estimates and one-sided upper bounds at level ``confidence`` (equal when exact).
    ``sample`` marks the words that form a random sample of the vocabulary (used for medians and
    words-changed fractions); with ``coverage == "all words"`` every word is measured.
    """

    mechanism: str
    params: dict[str, Any]
    fingerprint: str
    n_vocab: int
    estimator: str
    confidence: float
    coverage: str
    epsilons: np.ndarray
    word_ids: np.ndarray
    n_w: np.ndarray
    n_w_upper: np.ndarray
    sample: np.ndarray
    words: list[str] = field(default_factory=list)  # words of word_ids (for reports)
    s_w: dict[str, Any] | None = None  # optional S_w quantiles from a sweep: {"epsilons", "p5", "p50", "min", "n_words", "eta"}
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "computed"
    # exact worst-case columns kept when per-word values were stored rounded (compact files)
    exact_worst: tuple[np.ndarray, np.ndarray] | None = None
    # per-ε summary columns over the sampled words ("q0.5", "q0.99", "mean"), stored in files
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    # -- summaries -------------------------------------------------------------------------
    @property
    def worst_upper(self) -> np.ndarray:
        """Largest upper bound over the covered words at each grid ε."""
        if self.exact_worst is not None:
            return self.exact_worst[0]
        return self.n_w_upper.max(axis=0)

    @property
    def worst_index(self) -> np.ndarray:
        if self.exact_worst is not None:
            return self.exact_worst[1]
        return np.argmax(self.n_w_upper, axis=0)

    def quantile(self, q: float) -> np.ndarray:
        """The q-quantile over the sampled words of the N_w point estimates, at each grid ε."""
        key = f"q{q:g}"
        if key not in self.columns:
            self.columns[key] = np.quantile(self.n_w[self.sample], q, axis=0)
        return self.columns[key]

    @property
    def changed(self) -> np.ndarray:
        """Expected fraction of vocabulary words changed (1 − mean N_w over the sampled words)."""
        if "mean" not in self.columns:
            self.columns["mean"] = self.n_w[self.sample].mean(axis=0)
        return 1.0 - self.columns["mean"]

    def _interp(self, y: np.ndarray, epsilon: float) -> np.ndarray:
        """Value at ``epsilon`` from grid columns of ``y``: linear in log ε between grid points,
        using the upper neighbour's value when ε is off the grid (N_w grows with ε, so this errs high)."""
        e = self.epsilons
        if epsilon <= e[0]:
            return y[..., 0]
        if epsilon >= e[-1]:
            return y[..., -1]
        j = int(np.searchsorted(e, epsilon))
        if math.isclose(e[j], epsilon, rel_tol=1e-9):
            return y[..., j]
        if math.isclose(e[j - 1], epsilon, rel_tol=1e-9):
            return y[..., j - 1]
        return y[..., j]

    def summary_at(self, epsilon: float) -> dict[str, Any]:
        """Median and worst N_w, worst word and words-changed fraction at ``epsilon`` (off-grid:
        the next larger grid ε, the private side)."""
        up = self._interp(self.n_w_upper, epsilon)
        i = int(np.argmax(up))
        pt = self._interp(self.n_w, epsilon)
        worst_up = float(up[i])
        if self.exact_worst is not None:
            i = int(self._interp(self.exact_worst[1], epsilon))
            worst_up = float(self._interp(self.exact_worst[0], epsilon))
        return {
            "epsilon": float(epsilon),
            "median_n_w": float(self._interp(self.quantile(0.5), epsilon)),
            "p99_n_w": float(self._interp(self.quantile(0.99), epsilon)),
            "worst_n_w": float(pt[i]),
            "worst_n_w_upper": worst_up,
            "worst_word": self.words[i] if self.words else str(int(self.word_ids[i])),
            "changed": float(self._interp(self.changed, epsilon)),
        }

    def useful_range(self) -> tuple[float, float]:
        """ε where the median word's N_w crosses 0.05 and 0.95 (outside: output ≈ noise / ≈ input)."""
        med = self.quantile(0.5)
        lo = self.epsilons[int(np.searchsorted(med, 0.05))] if med[-1] >= 0.05 else self.epsilons[-1]
        hi = self.epsilons[min(int(np.searchsorted(med, 0.95)), len(med) - 1)]
        return float(lo), float(hi)

    def choose(self, max_n_w: float) -> EpsilonChoice:
        """The largest grid ε such that at it and every smaller grid ε the worst covered word's
        upper bound is ≤ ``max_n_w`` (see the module docstring for the guarantee)."""
        tau = check_target("max_n_w", max_n_w)
        ok = self.worst_upper <= tau
        if not ok[0]:
            raise ValueError(
                f"no epsilon >= {self.epsilons[0]:g} meets max_n_w={tau:g} for {self.mechanism} on this vocabulary "
                f"(worst word {self.words[int(self.worst_index[0])] if self.words else '?'!r} has N_w up to {self.worst_upper[0]:.3g} "
                f"even there); raise the target"
            )
        j = int(np.argmin(ok)) - 1 if not ok.all() else len(ok) - 1
        eps = float(self.epsilons[j])
        s = self.summary_at(eps)
        return EpsilonChoice(
            epsilon=eps, max_n_w=tau, confidence=self.confidence, coverage=self.coverage, estimator=self.estimator,
            source=self.source, worst_n_w=s["worst_n_w_upper"], worst_word=s["worst_word"], median_n_w=s["median_n_w"],
            changed=s["changed"], useful_range=self.useful_range(),
        )

    def table(self, targets: Sequence[float] = (0.9, 0.5, 0.1)) -> list[dict[str, Any]]:
        """For each target: the chosen ε and the median / worst N_w and words changed there."""
        rows = []
        for t in targets:
            try:
                c = self.choose(t)
            except ValueError:
                rows.append({"max_n_w": t, "epsilon": None})
                continue
            rows.append({"max_n_w": t, **self.summary_at(c.epsilon)})
        return rows

    def n_w_of(self, ids: Sequence[int] | np.ndarray, epsilon: float) -> np.ndarray:
        """Point estimates of N_w at ``epsilon`` for vocabulary ids (NaN for unmeasured words)."""
        ids = np.asarray(ids, dtype=np.int64)
        col = self._interp(self.n_w, epsilon)
        pos = np.full(self.n_vocab, -1, dtype=np.int64)
        pos[self.word_ids] = np.arange(self.word_ids.size)
        out = np.full(ids.shape, np.nan)
        ok = (ids >= 0) & (ids < self.n_vocab)
        p = np.where(ok, pos[np.clip(ids, 0, self.n_vocab - 1)], -1)
        out[p >= 0] = col[p[p >= 0]]
        return out

    def __repr__(self) -> str:
        e = self.epsilons
        return (
            f"Calibration({self.mechanism}, params={self.params}, vocabulary={self.n_vocab} words [{self.fingerprint}], "
            f"{self.estimator} estimator, coverage={self.coverage!r}, epsilon grid {e[0]:g}..{e[-1]:g} ({e.size} points), "
            f"source={self.source})"
        )

    # -- storage -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], *, compact: bool = False) -> Path:
        """Write an ``.npz`` (atomically). ``compact`` stores per-word values as uint8 rounded *up*
        (1/255 steps, so stored N_w never under-states) and keeps exact float worst-case columns."""
        from .._files import atomic_binary

        header = {
            "format": FORMAT_VERSION, "mechanism": self.mechanism, "params": self.params, "fingerprint": self.fingerprint,
            "n_vocab": self.n_vocab, "estimator": self.estimator, "confidence": self.confidence, "coverage": self.coverage,
            "s_w": self.s_w, "meta": self.meta, "compact": compact,
        }
        arrays: dict[str, np.ndarray] = {
            "epsilons": self.epsilons, "word_ids": self.word_ids.astype(np.int32), "sample": self.sample,
            "worst_upper": self.worst_upper, "worst_index": self.worst_index.astype(np.int32),
            "words": np.frombuffer("\n".join(self.words).encode("utf-8"), dtype=np.uint8),
            "col_median": self.quantile(0.5), "col_p99": self.quantile(0.99), "col_mean": 1.0 - self.changed,
        }
        if compact:
            arrays["n_w_q"] = np.ceil(np.clip(self.n_w, 0, 1) * 255 - 1e-9).astype(np.uint8)
            arrays["n_w_upper_q"] = np.ceil(np.clip(self.n_w_upper, 0, 1) * 255 - 1e-9).astype(np.uint8)
        else:
            arrays["n_w"] = self.n_w
            arrays["n_w_upper"] = self.n_w_upper
        arrays["header"] = np.array(json.dumps(header))
        path = Path(path)
        with atomic_binary(path) as f:
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle as a kwarg
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, source: str | None = None) -> Calibration:
        with np.load(path, allow_pickle=False) as z:
            h = json.loads(str(z["header"]))
            if h.get("format") != FORMAT_VERSION:
                raise ValueError(f"{path}: calibration format {h.get('format')} is not {FORMAT_VERSION}; rebuild it")
            if h.get("compact"):
                n_w = z["n_w_q"].astype(np.float64) / 255.0
                up = z["n_w_upper_q"].astype(np.float64) / 255.0
                # the exact worst-case column decides targets; keep it exact
                exact_worst = (z["worst_upper"].astype(np.float64), z["worst_index"].astype(np.int64))
            else:
                n_w, up = z["n_w"], z["n_w_upper"]
                exact_worst = None
            return cls(
                mechanism=h["mechanism"], params=h["params"], fingerprint=h["fingerprint"], n_vocab=int(h["n_vocab"]),
                estimator=h["estimator"], confidence=float(h["confidence"]), coverage=h["coverage"],
                epsilons=z["epsilons"].astype(np.float64), word_ids=z["word_ids"].astype(np.int64), n_w=n_w, n_w_upper=up,
                sample=z["sample"].astype(bool), words=_words_from(z["words"]), s_w=h.get("s_w"), meta=h.get("meta", {}),
                source=source or f"loaded from {path}", exact_worst=exact_worst,
                columns={k: z[f"col_{c}"] for k, c in (("q0.5", "median"), ("q0.99", "p99"), ("mean", "mean")) if f"col_{c}" in z},
            )


def _words_from(arr: np.ndarray) -> list[str]:
    if arr.dtype == np.uint8:  # UTF-8 bytes, one word per line (compact and fast to load)
        return arr.tobytes().decode("utf-8").split("\n") if arr.size else []
    return [str(w) for w in arr]


# -- keys, shipped data and the cache -----------------------------------------------------------


def calibration_key(factory: Callable[[float], Any]) -> tuple[str, dict[str, Any], str]:
    """(mechanism name, parameters that do not depend on ε, vocabulary fingerprint) of a factory.

    Parameters derived from ε (TEM's γ from β) differ between two probes and are left out, so a
    calibration is keyed by what the user chose, not by a value ε sets."""
    from ..mechanisms.brr import BRR
    from ..mechanisms.madlib import Madlib
    from ..mechanisms.mahalanobis import Mahalanobis
    from ..mechanisms.tem import TEM
    from .plausible import mechanism_params

    a = factory(1.0)
    pa = mechanism_params(a)
    if type(a) in (Madlib, Mahalanobis, BRR):  # no parameter depends on ε: skip a second build
        params = pa
    elif type(a) is TEM:
        params = {k: v for k, v in pa.items() if k != "gamma" or a._gamma_given}
    else:
        pb = mechanism_params(factory(2.0))
        params = {k: v for k, v in pa.items() if pb.get(k) == v}
    return str(getattr(a, "name", type(a).__name__)), params, str(getattr(a.vocabulary, "fingerprint", "?"))


def _key_hash(name: str, params: dict[str, Any], fingerprint: str, options: dict[str, Any] | None = None) -> str:
    blob = json.dumps({"m": name, "p": params, "f": fingerprint, "v": FORMAT_VERSION, "o": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def shipped_calibration(name: str, params: dict[str, Any], fingerprint: str) -> Calibration | None:
    """The calibration shipped with the package for this key, or None."""
    path = _DATA / f"{name}.npz"
    if not path.is_file():
        return None
    cal = Calibration.load(path, source="shipped calibration")
    if cal.fingerprint != fingerprint or cal.params != params:
        return None
    return cal


def _cache_file(name: str, params: dict[str, Any], fingerprint: str, cache_dir: Any, options: dict[str, Any] | None = None) -> Path:
    from ..neighbors.neighborhoods import cache_directory

    digest = _key_hash(name, params, fingerprint, options)
    return cache_directory(cache_dir) / "calibration" / f"{name}-{fingerprint}-{digest}-v{FORMAT_VERSION}.npz"


def calibration_options(options: dict[str, Any], rng: RNGLike = 0) -> dict[str, Any] | None:
    """Every option of :func:`compute_calibration` that can change its result, defaults filled in,
    as a JSON-able dict (the cache key's option part), or None when the result is not
    reproducible from the options (``rng`` not an int seed, or a ``sampler`` callable): such a
    calibration is computed afresh and never cached.

    ``progress`` is left out (it changes no number); arrays (``words``, ``extra``, ``epsilons``)
    enter as lists of values."""
    import inspect

    known = inspect.signature(compute_calibration).parameters
    unknown = sorted(set(options) - set(known) - {"factory"})
    if unknown:
        raise TypeError(f"calibration_for() got unknown option(s) {', '.join(unknown)}; valid: "
                        f"{', '.join(n for n in known if n not in ('factory', 'progress', 'rng'))}")
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
        return None
    if options.get("sampler") is not None:
        return None
    key: dict[str, Any] = {"rng": int(rng)}
    for name, param in known.items():
        if name in ("factory", "progress", "rng", "sampler"):
            continue
        value = options.get(name, param.default)
        if isinstance(value, np.ndarray) or (isinstance(value, Sequence) and not isinstance(value, str)):
            value = np.asarray(value).tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        key[name] = value
    return key


_DEFAULT_OPTIONS: dict[str, Any] | None = None


def _default_options() -> dict[str, Any]:
    global _DEFAULT_OPTIONS
    if _DEFAULT_OPTIONS is None:
        _DEFAULT_OPTIONS = calibration_options({})
    assert _DEFAULT_OPTIONS is not None
    return _DEFAULT_OPTIONS


def calibration_for(
    factory: Callable[[float], Any],
    *,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    progress: bool | None = None,
    rng: RNGLike = 0,
    **options: Any,
) -> Calibration:
    """The calibration of ``factory(ε)``: shipped, cached, or computed now (and cached).

    The key of a calibration is the mechanism's name and ε-independent parameters, the
    vocabulary fingerprint, and every option of :func:`compute_calibration` that changes the
    result (``confidence``, ``epsilons``, ``estimator``, ``draws``, ``directions``, ``words``,
    ``rng``, ...: :func:`calibration_options`), so a request is never answered with a
    calibration made under other options (a 0.99-confidence request after a cached 0.95 one
    computes or loads a 0.99 calibration). The shipped calibrations were made with the default
    options and serve only requests with those. ``cache_dir=False`` neither reads nor writes
    the disk cache; an ``rng`` that is not an int seed (or a ``sampler``) computes afresh without
    the cache."""
    name, params, fp = calibration_key(factory)
    opts = calibration_options(options, rng)
    if opts is not None and opts == _default_options():
        cal = shipped_calibration(name, params, fp)
        if cal is not None:
            return cal
    path = None if cache_dir is False or opts is None else _cache_file(name, params, fp, cache_dir, opts)
    if path is not None and path.is_file():
        try:
            cal = Calibration.load(path, source=f"cached calibration {path}")
            if cal.fingerprint == fp and cal.params == params and cal.meta.get("options") == opts:
                return cal
        except (OSError, ValueError, KeyError):
            pass  # unreadable or stale: rebuild
    cal = compute_calibration(factory, progress=progress, rng=rng, **options)
    if opts is not None:
        cal.meta["options"] = opts
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cal.save(path)
        cal.source = f"computed and cached in {path}"
    return cal


def choose_epsilon(factory: Callable[[float], Any], max_n_w: float, **kwargs: Any) -> tuple[EpsilonChoice, Calibration]:
    """Resolve a target: ``(choice, calibration)`` for ``factory(ε)`` (see :func:`calibration_for`)."""
    tau = check_target("max_n_w", max_n_w)
    cal = calibration_for(factory, **kwargs)
    return cal.choose(tau), cal


# -- estimators ------------------------------------------------------------------------------------


def _bar(total: int, progress: Any, desc: str) -> Any:
    from .._progress import progress_bar

    return progress_bar(total, desc, progress)


def _radial_directions(mech: Any, n: int, gen: np.random.Generator) -> np.ndarray | None:
    """Noise directions u (rows) such that the mechanism's noise is R·u with R ~ Gamma(dim, 1/ε),
    or None when the mechanism is not of that form (then another estimator is used)."""
    from ..mechanisms.madlib import Madlib
    from ..mechanisms.mahalanobis import Mahalanobis

    if type(mech) not in (Madlib, Mahalanobis) or getattr(mech, "_index_spec", None) not in ("exact", "faiss-flat"):
        return None  # an approximate search changes which word is returned
    d = mech.embedding.dim
    u = gen.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    if isinstance(mech, Mahalanobis) and mech.lam > 0:
        u = u @ mech._sqrt
    return u


def radial_edges(vectors: np.ndarray, ids: np.ndarray, directions: np.ndarray, *,
                 progress: Callable[[int], None] | None = None, backend: str = "numpy", memory_elements: int = 1 << 22) -> np.ndarray:
    """t_w(u) for each word of ``ids`` and each direction row u: the largest t with
    φ(w) + t·u still in w's (Euclidean) Voronoi cell, i.e. min over v with (φ_v − φ_w)·u > 0 of
    ‖φ_v − φ_w‖² / (2 (φ_v − φ_w)·u) (inf when w's cell is unbounded along u). Exact over the
    whole vocabulary; ``(len(ids), len(directions))`` float64. Works on blocks of words of about
    ``memory_elements`` (words × vocabulary × directions) float32 values."""
    if backend == "torch":
        return _radial_edges_torch(vectors, ids, directions, progress=progress)
    # min_v ‖Δ_v‖² / (2 Δ_v·u) over Δ_v·u > 0 is 1 / (2 max_v Δ_v·u / ‖Δ_v‖²) when that max is
    # > 0: three passes over the (words, directions, vocabulary) block and no masking (4× faster
    # than dividing and masking). Arithmetic is float32; t is rounded up by _T_MARGIN (relative),
    # far above float32 error, so rounding never under-states N_w = Pr[R ≤ t].
    X = np.asarray(vectors, dtype=np.float32)
    V = X.shape[0]
    D = directions.shape[0]
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64).astype(np.float32)
    P = np.ascontiguousarray((X @ directions.T.astype(np.float32)).T)  # (D, V)
    out = np.empty((ids.size, D))
    block = max(1, memory_elements // (V * D))
    buf = np.empty((min(block, max(ids.size, 1)), D, V), dtype=np.float32)
    for s in range(0, ids.size, block):
        b = ids[s : s + block]
        m = b.size
        inv = X[b] @ X.T  # (b, V) -> squared distances -> their inverses
        inv *= -2.0
        inv += sq[None, :]
        inv += sq[b][:, None]
        np.maximum(inv, 0.0, out=inv)
        with np.errstate(divide="ignore"):
            np.divide(1.0, inv, out=inv)
        np.minimum(inv, np.float32(1e30), out=inv)  # a duplicate vector: huge but finite weight
        inv[np.arange(m), b] = 0.0  # the word itself never competes
        t = buf[:m]
        np.subtract(P[None, :, :], P[:, b].T[:, :, None], out=t)  # (b, D, V): Δ_v·u
        t *= inv[:, None, :]
        mx = t.max(axis=2).astype(np.float64)
        with np.errstate(divide="ignore"):
            out[s : s + m] = np.where(mx > 0, (0.5 * (1.0 + _T_MARGIN)) / np.where(mx > 0, mx, 1.0), np.inf)
        if progress is not None:
            progress(m)
    return out


_T_MARGIN = 1e-4


def _radial_edges_torch(vectors: np.ndarray, ids: np.ndarray, directions: np.ndarray, *, progress: Any = None) -> np.ndarray:
    from .._optional import import_optional

    torch = import_optional("torch", purpose="the torch backend of the radial calibration")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    X = torch.as_tensor(np.asarray(vectors, dtype=np.float32), device=dev)
    sq = (X.double() ** 2).sum(1)
    P = X @ torch.as_tensor(directions.T.astype(np.float32), device=dev)
    out = np.empty((ids.size, directions.shape[0]))
    block = 64
    for s in range(0, ids.size, block):
        b = torch.as_tensor(ids[s : s + block], device=dev)
        num = torch.clamp(sq[b, None] + sq[None, :] - 2.0 * (X[b] @ X.T).double(), min=0).float()  # (b, V)
        den = 2.0 * (P[None, :, :] - P[b][:, None, :])  # (b, V, D)
        r = torch.where(den > 0, num[:, :, None] / den, torch.full_like(den, float("inf")))
        r[torch.arange(b.numel(), device=dev), b] = float("inf")
        out[s : s + b.numel()] = r.min(dim=1).values.double().cpu().numpy()
        if progress is not None:
            progress(int(b.numel()))
    return out


def _radial_curves(mech: Any, ids: np.ndarray, epsilons: np.ndarray, directions: np.ndarray, confidence: float,
                   progress: Callable[[int], None] | None, backend: str) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import gammainc

    d = mech.embedding.dim
    t = radial_edges(mech.embedding.vectors, ids, directions, progress=progress, backend=backend)
    n_w = np.empty((ids.size, epsilons.size))
    sums = np.empty_like(n_w)
    D = directions.shape[0]
    for j, e in enumerate(epsilons):
        f = gammainc(d, np.minimum(e * t, 1e300))  # Pr[Gamma(d, 1/ε) <= t] = P(d, ε t)
        sums[:, j] = f.sum(axis=1)
        n_w[:, j] = sums[:, j] / D
    return n_w, _upper_bound(sums, D, confidence)


def _flips_usable(mech: Any) -> bool:
    from ..binary.hamming import FaissBinaryIndex, HammingIndex
    from ..mechanisms.brr import BRR

    if type(mech) is not BRR:
        return False
    idx = mech.index
    return isinstance(idx, HammingIndex) or (isinstance(idx, FaissBinaryIndex) and idx.exact)


def _faiss_flat(mech: Any) -> bool:
    from ..binary.hamming import FaissBinaryIndex

    return isinstance(mech.index, FaissBinaryIndex) and mech.index.exact


def _exact_knn(mech: Any) -> Any:
    """The mechanism's exact k-nearest-neighbour engine over its binary codes, with the k-NN API
    of :class:`deniable.neighbors.NearestNeighbors` (``knn(queries, k) -> (ids, distances)``,
    nearest first): its own index when that is exact (FAISS flat or the numpy scan), else the
    numpy scan."""
    from ..binary.hamming import HammingIndex

    idx = getattr(mech, "index", None)
    if getattr(idx, "exact", False) and callable(getattr(idx, "knn", None)):
        return idx
    return HammingIndex(mech.binary_embedding.codes)


def _hamming_sorted(mech: Any, k: int) -> Callable[[np.ndarray], np.ndarray]:
    """``f(queries) -> (n, k)`` smallest Hamming distances to the vocabulary's codes, ascending."""
    engine = _exact_knn(mech)
    return lambda q: engine.knn(q, k)[1]


def _flips_curves(mech: Any, ids: np.ndarray, epsilons: np.ndarray, draws: int, confidence: float, gen: np.random.Generator,
                  progress: Callable[[int], None] | None, *, queries: int = 1 << 14) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """BRR: N_w over the whole ε grid from ``draws`` random bit orders per word (``flips`` estimator).

    Randomized response flips each of the L bits with probability p(ε) = 1/(1+e^ε). Couple all ε
    through one uniform per bit (bit i flips iff u_i < p): the flipped set is then the first K
    bits of the random order of u, with K ~ Binomial(L, p(ε)), and grows with ε ↓. Along that
    order, let g_v(K) = d(noisy, φ_v) − d(noisy, φ_w) = D_v − 2·A_v(K) (A_v: flipped bits where
    φ_v differs from φ_w); it only decreases. So, per draw, w is the unique nearest code for
    K < T, shares the minimum from T on, and loses for K ≥ S (T ≤ S found by binary search with
    exact Hamming k-NN queries). The output is w with probability 1 for K < T, at most 1/(1+c)
    for T ≤ K < S (c = codes tied with w at K = T; more ties only lower it, so this errs high)
    and 0 from S on; hence per draw f(ε) = F_ε(T−1) + (F_ε(S−1) − F_ε(T−1))/(1+c), F_ε the
    Binomial(L, p(ε)) CDF — every ε at once, exact in K. N_w(ε) = mean over draws of f(ε) ∈
    [0, 1], so Wilson bounds apply as for the radial estimator."""
    from scipy.stats import binom

    from ..binary.codes import pack_bits

    be = mech.binary_embedding
    L, V = int(be.n_bits), len(be)
    k = min(8, V)
    nearest = _hamming_sorted(mech, k)
    count_le = None  # exact tie counts beyond k, from the numpy scan (rare)
    p = np.array([1.0 / (1.0 + math.exp(e)) for e in epsilons])
    Ks = np.arange(L + 1)
    # F[e, K + 1] = P[Binomial(L, p_e) <= K] for K = -1..L
    F = np.zeros((epsilons.size, L + 2))
    F[:, 1:] = binom.cdf(Ks[None, :], L, p[:, None])
    F[:, -1] = 1.0
    sums = np.zeros((ids.size, epsilons.size))
    per_block = max(1, queries // max(draws, 1))
    for s in range(0, ids.size, per_block):
        w = ids[s : s + per_block]
        n = w.size * draws
        rank = gen.random((n, L)).argsort(axis=1).argsort(axis=1).astype(np.int16 if L < 32768 else np.int32)  # bit i flips once K > rank[i]
        base = be.codes[np.repeat(w, draws)]

        def dists(K: np.ndarray, rows: np.ndarray, base: np.ndarray = base, rank: np.ndarray = rank) -> np.ndarray:
            return nearest(base[rows] ^ pack_bits(rank[rows] < K[:, None]))

        def first(pred: Callable[[np.ndarray, np.ndarray], np.ndarray], lo: np.ndarray) -> np.ndarray:
            """Smallest K in (lo, L] with pred true (L + 1: never); pred(lo) is false."""
            hi = np.full(lo.size, L + 1, dtype=np.int64)
            lo = lo.copy()
            while True:
                act = np.flatnonzero(hi - lo > 1)
                if act.size == 0:
                    return hi
                mid = (lo[act] + hi[act]) // 2
                ok = pred(dists(mid, act), mid)
                hi[act[ok]] = mid[ok]
                lo[act[~ok]] = mid[~ok]

        # T: another code at distance <= K (the second smallest; w itself is at exactly K)
        T = first(lambda d, K: d[:, 1] <= K, np.full(n, -1, dtype=np.int64)) if k > 1 else np.full(n, L + 1)
        S = T.copy()
        ties = np.zeros(n, dtype=np.int64)
        at = np.flatnonzero(T <= L)
        if at.size:
            d = dists(T[at], at)
            strict = d[:, 0] < T[at]
            c = (d <= T[at][:, None]).sum(axis=1) - 1
            full = ~strict & (c >= k - 1) & (k < V)
            if full.any():  # more ties than k shows: count them exactly
                from ..binary.hamming import HammingIndex

                count_le = count_le or HammingIndex(be.codes)
                rows = at[full]
                exact_c = np.empty(rows.size, dtype=np.int64)
                for r0 in range(0, rows.size, 256):  # (rows, V) distance blocks: bounded memory
                    rr = rows[r0 : r0 + 256]
                    q = base[rr] ^ pack_bits(rank[rr] < T[rr][:, None])
                    exact_c[r0 : r0 + 256] = (count_le.distances(q) <= T[rr][:, None]).sum(axis=1) - 1
                c[full] = exact_c
            ties[at] = np.where(strict, 0, c)
            tie_rows = at[~strict]
            if tie_rows.size:
                lo = np.full(n, L + 1, dtype=np.int64)
                lo[tie_rows] = T[tie_rows]
                S_t = first(lambda d, K: d[:, 0] < K, lo)
                S[tie_rows] = S_t[tie_rows]
        FT = F[:, np.minimum(T, L + 1)]  # F(T - 1): column K + 1 = T
        FS = F[:, np.minimum(S, L + 1)]
        f = FT + (FS - FT) / (1.0 + ties)[None, :]  # (E, n)
        sums[s : s + w.size] = f.reshape(epsilons.size, w.size, draws).sum(axis=2).T
        if progress is not None:
            progress(w.size)
    n_w = sums / draws
    return n_w, _upper_bound(sums, draws, confidence), {"draws": draws}


def _tem_usable(mech: Any) -> bool:
    from ..mechanisms.tem import TEM

    return type(mech) is TEM and mech.metric == "euclidean"


def _kernel_curves(factory: Callable[[float], Any], probe: Any, ids: np.ndarray, epsilons: np.ndarray, *, bins: int = 4096,
                   progress: Callable[[int], None] | None, block: int = 256) -> tuple[np.ndarray, dict[str, Any]]:
    """TEM: N_w = 1 / Σ_y exp(−(ε/2)·min(d(w, y), γ)) from per-word histograms of the distances,
    every distance rounded *up* to its bin's upper edge (plus a float32 margin), so N_w is never
    under-estimated; the over-estimate factor is at most exp((ε/2)·(bin width + margin))."""
    X = np.asarray(probe.embedding.vectors, dtype=np.float32)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    norms = np.sqrt(sq)
    dmax = 2.0 * float(norms.max()) + 1e-6
    width = dmax / bins
    margin = 1e-3 * math.sqrt(float(sq.max()))  # float32 Gram rounding in d, generously
    hi = (np.arange(bins) + 1) * width + margin
    gammas = np.array([factory(float(e)).gamma for e in epsilons])
    W = np.exp(-(epsilons[None, :] / 2.0) * np.minimum(hi[:, None], gammas[None, :]))  # (bins, E)
    n_w = np.empty((ids.size, epsilons.size))
    sq32 = sq.astype(np.float32)
    inv = np.float32(1.0 / width)
    for s in range(0, ids.size, block):
        b = ids[s : s + block]
        d = X[b] @ X.T  # float32 (b, V), turned in place into bin indices
        d *= -2.0
        d += sq32[None, :]
        d += sq32[b][:, None]
        np.maximum(d, 0.0, out=d)
        np.sqrt(d, out=d)
        d *= inv
        k = d.astype(np.int32)
        np.minimum(k, bins - 1, out=k)
        self_bin = k[np.arange(b.size), b].copy()
        k += (np.arange(b.size, dtype=np.int32) * bins)[:, None]
        hist = np.bincount(k.ravel(), minlength=b.size * bins).reshape(b.size, bins).astype(np.float64)
        hist[np.arange(b.size), self_bin] -= 1.0  # the word itself: weight exp(0) = 1, added exactly
        n_w[s : s + b.size] = 1.0 / (1.0 + hist @ W)
        if progress is not None:
            progress(b.size)
    err = float(np.exp((epsilons.max() / 2.0) * (width + margin)))
    return n_w, {"bins": bins, "bin_width": width, "margin": margin, "max_overestimate_factor": err}


def _exact_curves(factory: Callable[[float], Any], ids: np.ndarray, epsilons: np.ndarray,
                  progress: Callable[[int], None] | None, block: int = 64) -> np.ndarray:
    """N_w = P[M_ε(w) = w] from ``probabilities``, or, for mechanisms with a
    ``self_probabilities(ids, epsilons)`` (the whole grid from one pass over each word's
    distances, e.g. SanText: ~100× fewer distance computations), from that — used only after it
    agrees with ``factory(ε).probabilities`` on three words at the grid's two ends and middle
    (a factory may change more than ε)."""
    n_w = np.empty((ids.size, epsilons.size))
    mechs = [factory(float(e)) for e in epsilons]
    fast = getattr(mechs[0], "self_probabilities", None)
    if callable(fast) and ids.size:
        ws = ids[sorted({0, ids.size // 2, ids.size - 1})]
        js = sorted({0, epsilons.size // 2, epsilons.size - 1})
        got = fast(ws, epsilons[js])
        want = np.array([[float(np.asarray(mechs[j].probabilities(int(w)))[w]) for j in js] for w in ws])
        if np.allclose(got, want, rtol=1e-6, atol=1e-12):
            for s in range(0, ids.size, block):
                b = ids[s : s + block]
                n_w[s : s + b.size] = fast(b, epsilons)
                if progress is not None:
                    progress(b.size)
            return n_w
    for i, w in enumerate(ids.tolist()):
        for j, m in enumerate(mechs):
            n_w[i, j] = float(np.asarray(m.probabilities(int(w)))[w])
        if progress is not None:
            progress(1)
    return n_w


def _sampled_curves(factory: Callable[[float], Any], ids: np.ndarray, epsilons: np.ndarray, draws: int, confidence: float,
                    gen: np.random.Generator, progress: Callable[[float], None] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wilson bounds from ``draws`` samples per word at a thinned, bracketed part of the grid;
    returns (n_w, upper, measured-epsilon mask). Unmeasured grid points copy the nearest
    measured one above (below the bracket) or below (above it, where every word was ≥ 0.995)."""
    E = epsilons.size
    step = max(1, int(round(E / (math.log10(epsilons[-1] / epsilons[0]) * 12)))) if E > 1 and epsilons[-1] > epsilons[0] else 1
    grid = list(range(0, E, step))
    if grid[-1] != E - 1:
        grid.append(E - 1)
    def hits_at(j: int, n: int) -> np.ndarray:
        out = factory(float(epsilons[j])).sample_ids(np.repeat(ids, n), rng=gen).reshape(ids.size, n)
        return (out == ids[:, None]).sum(axis=1)

    # bracket: probe decade-spaced grid points with few draws for the first with any hit
    coarse = grid[::12]
    start = 0
    for j in coarse:
        if hits_at(j, max(4, draws // 10)).any():
            break
        start = j
    todo = [j for j in grid if j >= start]
    hits = np.full((ids.size, E), np.nan)
    measured = np.zeros(E, dtype=bool)
    done = 0
    for j in todo:
        hits[:, j] = hits_at(j, draws)
        measured[j] = True
        done += 1
        if progress is not None:
            progress(ids.size / len(todo))
        if (hits[:, j] >= 0.995 * draws).all():
            break
    if progress is not None and done < len(todo):
        progress(ids.size * (len(todo) - done) / len(todo))
    idx = np.flatnonzero(measured)
    # below the first measured point: its values (N_w grows with ε); above the last: its values
    # for the point estimate and the upper bound 1 (never under-states)
    pos = np.clip(np.searchsorted(idx, np.arange(E)), 0, idx.size - 1)
    filled = hits[:, idx[pos]]
    n_w = filled / draws
    up = _upper_bound(filled, draws, confidence)
    up[:, np.arange(E) > idx[-1]] = 1.0
    return n_w, up, measured


def _isolated_words(probe: Any, m: int) -> np.ndarray:
    """Most isolated vocabulary words: :func:`~deniable.calibration.plausible.extreme_words`
    (Euclidean) for embedding mechanisms, Hamming nearest-neighbour distances for binary codes."""
    from .plausible import extreme_words

    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    ext = extreme_words(probe, m, k=10)
    be = getattr(probe, "binary_embedding", None)
    if ext.size == 0 and be is not None:
        V = len(be)
        _, d = _exact_knn(probe).knn(be.codes[:V], min(11, V))
        ids = np.arange(V)
        first = np.lexsort((ids, -d[:, 1] if d.shape[1] > 1 else -d[:, 0]))[:m]
        kth = np.lexsort((ids, -d[:, -1]))[:m]
        ext = np.union1d(first, kth).astype(np.int64)
    return ext


def _pick_estimator(probe: Any) -> str:
    if _tem_usable(probe):
        return "kernel"
    if _radial_directions(probe, 1, np.random.default_rng(0)) is not None:
        return "radial"
    if _flips_usable(probe) and not probe.has_exact_probabilities and _faiss_flat(probe):
        return "flips"  # with the numpy scan, per-ε sampling is about as fast
    if probe.has_exact_probabilities:  # the Mechanism contract
        return "exact"
    return "sampled"


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
    eps = np.asarray(default_epsilons() if epsilons is None else epsilons, dtype=np.float64)
    if eps.ndim != 1 or eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps <= 0) or np.any(np.diff(eps) <= 0):
        raise ValueError("epsilons must be a non-empty increasing list of finite numbers > 0")
    probe = factory(float(eps[0]))
    name, params, fp = calibration_key(factory)
    V = int(probe.n_words)
    est = _pick_estimator(probe) if estimator == "auto" else estimator
    if est not in ESTIMATORS:
        raise ValueError(f"estimator must be 'auto' or one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    t0 = time.perf_counter()
    all_ids = np.arange(V, dtype=np.int64)
    screened = False  # screening every word: only when the words are chosen here ("auto")
    n_screen = (8 if est == "radial" else 0) if screen is None else check_int("screen", screen, minimum=0)
    if isinstance(words, str) and words == "all":
        ids, is_sample, coverage = all_ids, np.ones(V, bool), "all words"
    elif isinstance(words, (list, tuple, np.ndarray)):
        ids = np.asarray(words, dtype=np.int64).ravel()
        if ids.size == 0 or ids.min() < 0 or ids.max() >= V:
            raise ValueError(f"words must be vocabulary ids in [0, {V - 1}]")
        is_sample = np.ones(ids.size, bool)
        coverage = "all words" if np.unique(ids).size >= V else f"{ids.size} given words"
    elif (isinstance(words, str) and words == "auto" and (est == "kernel" or 2 * isolated + sample >= V)):
        ids, is_sample, coverage = all_ids, np.ones(V, bool), "all words"
    elif isinstance(words, str) and words == "auto" and est in ("radial", "flips") and n_screen:
        ids, is_sample, coverage = all_ids, np.ones(V, bool), "all words"  # set by _screened
        screened = True
    else:
        n_sample = sample if isinstance(words, str) else check_int("words", words, minimum=1)
        ext = _isolated_words(probe, isolated)
        rand = np.sort(gen.choice(V, size=min(n_sample, V), replace=False))
        more = np.zeros(0, np.int64) if extra is None else np.asarray(extra, dtype=np.int64)
        ids = np.union1d(np.union1d(ext, rand), more).astype(np.int64)
        is_sample = np.isin(ids, rand)
        coverage = "all words" if ids.size >= V else (
            f"{ids.size} measured words ({ext.size} most isolated + {rand.size} random"
            + (f" + {more.size} given" if more.size else "") + "; other words are ranked by isolation, not measured)"
        )
    meta: dict[str, Any] = {}
    bar = _bar(ids.size, progress, f"calibrate {name}")
    try:
        upd = bar.update
        if est == "kernel":
            n_w, meta = _kernel_curves(factory, probe, ids, eps, progress=upd)
            up = n_w.copy()
        elif screened:
            bar.close()
            if est == "radial":
                def curves(ids_: np.ndarray, n: int, update: Any) -> tuple[np.ndarray, np.ndarray]:
                    U = _radial_directions(probe, n, gen)
                    assert U is not None  # the radial estimator was picked for this mechanism
                    return _radial_curves(probe, ids_, eps, U, confidence, update, backend)
                full, unit = directions, "directions"
            else:
                def curves(ids_: np.ndarray, n: int, update: Any) -> tuple[np.ndarray, np.ndarray]:
                    return _flips_curves(probe, ids_, eps, n, confidence, gen, update)[:2]
                full, unit = draws, "draws"
            n_w, up, is_sample, coverage, meta = _screened(
                probe, eps, V, full, n_screen, refine, isolated, sample, extra, confidence, gen, progress, name, curves, unit)
            ids = np.arange(V, dtype=np.int64)
        elif est == "radial":
            U = _radial_directions(probe, directions, gen)
            if U is None:
                raise ValueError(f"the radial estimator does not apply to {type(probe).__name__}")
            n_w, up = _radial_curves(probe, ids, eps, U, confidence, upd, backend)
            meta = {"directions": directions}
        elif est == "flips":
            if not _flips_usable(probe):
                raise ValueError(f"the flips estimator applies to BRR with an exact Hamming index, not {type(probe).__name__}")
            n_w, up, meta = _flips_curves(probe, ids, eps, draws, confidence, gen, upd)
        elif est == "exact":
            n_w = _exact_curves(factory, ids, eps, upd)
            up = n_w.copy()
        else:
            n_w, up, measured = _sampled_curves(sampler or factory, ids, eps, draws, confidence, gen, upd)
            meta = {"draws": draws, "measured_epsilons": eps[measured].round(6).tolist()}
    finally:
        bar.close()
    meta["seconds"] = round(time.perf_counter() - t0, 2)
    vocab_words = probe.vocabulary.words
    return Calibration(
        mechanism=name, params=params, fingerprint=fp, n_vocab=V, estimator=est, confidence=confidence, coverage=coverage,
        epsilons=eps, word_ids=ids, n_w=n_w, n_w_upper=np.maximum(up, n_w), sample=is_sample,
        words=[vocab_words[i] for i in ids.tolist()], meta=meta,
    )


# -- get_mechanism(..., max_n_w=...) ---------------------------------------------------------------


def mechanism_for_target(
    name: str,
    embedding: Any = None,
    *,
    epsilon: float | None = None,
    max_n_w: float | None = None,
    backend: str = "numpy",
    device: str | None = None,
    progress: bool | None = None,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    **params: Any,
) -> Any:
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
    mech = get_mechanism(name, embedding, epsilon=choice.epsilon, backend=backend, device=device, **params)
    mech.epsilon_choice = choice
    return mech


def _screened(probe: Any, eps: np.ndarray, V: int, full: int, screen: int, refine: int, isolated: int, sample: int,
              extra: Any, confidence: float, gen: np.random.Generator, progress: bool | None, name: str,
              curves: Callable[[np.ndarray, int, Callable[[int], None] | None], tuple[np.ndarray, np.ndarray]],
              unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, dict[str, Any]]:
    """Screen every word with ``screen`` directions / draws, refine the riskiest with ``full``
    (see compute_calibration). ``curves(ids, n, update) -> (n_w, upper)`` measures words."""
    all_ids = np.arange(V, dtype=np.int64)
    bar = _bar(V, progress, f"calibrate {name} (screen)")
    try:
        n_s, _ = curves(all_ids, screen, bar.update)
    finally:
        bar.close()
    area = n_s.mean(axis=1)
    top = np.lexsort((all_ids, -area))[: min(refine, V)]
    iso = _isolated_words(probe, isolated)
    rand = np.sort(gen.choice(V, size=min(sample, V), replace=False))
    more = np.zeros(0, np.int64) if extra is None else np.asarray(extra, dtype=np.int64)
    ref = np.union1d(np.union1d(top, iso), np.union1d(rand, more)).astype(np.int64)
    bar = _bar(ref.size, progress, f"calibrate {name} (refine)")
    try:
        n_r, up_r = curves(ref, full, bar.update)
    finally:
        bar.close()
    n_w = n_s.copy()
    up = n_s.copy()
    n_w[ref] = n_r
    up[ref] = up_r
    ref = refine_worst(probe, eps, n_w, up, ref, None, confidence, progress=progress, name=name,
                       curves=lambda ids, update: curves(ids, full, update))
    coverage = (
        f"all {V} words ({ref.size} refined with {full} {unit} and {confidence:.0%} upper bounds: the {top.size} "
        f"highest after screening, the {iso.size} most isolated, {rand.size} random{f', {more.size} given' if more.size else ''}, "
        f"and the top {_PER_EPS} at every grid epsilon; the other words by their {screen}-{unit[:-1]} screening estimate)"
    )
    key = "directions" if unit == "directions" else "draws"
    meta = {key: full, f"screen_{key}": screen, "refined": int(ref.size), "refined_top": int(top.size),
            "refined_ids": ref.tolist()}
    # medians and quantiles come from the random refined words (the screening estimates of a
    # few directions are too coarse for them); the words-changed mean uses every word
    sample_mask = np.isin(all_ids, rand) if rand.size else np.ones(V, bool)
    return n_w, up, sample_mask, coverage, meta


_KNOWN: dict[tuple[str, str], list[Calibration]] = {}


def known_calibration(mechanism: Any, *, cache_dir: str | os.PathLike[str] | None = None) -> Calibration | None:
    """A shipped or cached calibration matching this mechanism instance (name, vocabulary
    fingerprint, and every parameter the calibration was keyed by), or None; computes nothing."""
    from .plausible import mechanism_params

    name = str(getattr(mechanism, "name", type(mechanism).__name__))
    fp = str(getattr(getattr(mechanism, "vocabulary", None), "fingerprint", "?"))
    key = (name, fp)
    if key not in _KNOWN:
        found: list[Calibration] = []
        path = _DATA / f"{name}.npz"
        if path.is_file():
            cal = Calibration.load(path, source="shipped calibration")
            if cal.fingerprint == fp:
                found.append(cal)
        folder = _cache_file(name, {}, fp, cache_dir).parent
        if folder.is_dir():
            for p in sorted(folder.glob(f"{name}-{fp}-*-v{FORMAT_VERSION}.npz")):
                try:
                    found.append(Calibration.load(p, source=f"cached calibration {p}"))
                except (OSError, ValueError, KeyError):
                    continue
        _KNOWN[key] = found
    params = mechanism_params(mechanism)
    for cal in _KNOWN[key]:
        if all(params.get(k) == v for k, v in cal.params.items()):
            return cal
    return None


_PER_EPS = 3


def refine_worst(mech: Any, eps: np.ndarray, n_w: np.ndarray, up: np.ndarray, refined: np.ndarray, directions: np.ndarray | None,
                 confidence: float, *, rounds: int = 6, per_eps: int = _PER_EPS, backend: str = "numpy",
                 progress: bool | None = False, name: str = "",
                 curves: Callable[[np.ndarray, Callable[[int], None] | None], tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
    """Refine (in place: radial with ``directions``, or ``curves(ids, update) -> (n_w, upper)``)
    every screened-only word that is among the ``per_eps`` highest upper bounds at some grid ε,
    until the top words at every ε are refined (at most ``rounds`` rounds). So the worst word at
    each ε, which decides a target, always has a proper upper bound rather than a coarse
    screening estimate. Returns the refined ids."""
    if curves is None:
        if directions is None:
            raise ValueError("give directions (radial) or curves")

        def curves(ids: np.ndarray, update: Callable[[int], None] | None) -> tuple[np.ndarray, np.ndarray]:
            return _radial_curves(mech, ids, eps, directions, confidence, update, backend)

    refined = np.unique(np.asarray(refined, dtype=np.int64))
    k = min(per_eps, up.shape[0])
    for _ in range(rounds):
        top = np.unique(np.argpartition(-up, k - 1, axis=0)[:k].ravel())
        todo = np.setdiff1d(top, refined)
        if todo.size == 0:
            break
        bar = _bar(todo.size, progress, f"calibrate {name} (worst words)")
        try:
            a, b = curves(todo, bar.update)
        finally:
            bar.close()
        n_w[todo], up[todo] = a, b
        refined = np.union1d(refined, todo)
    return refined
