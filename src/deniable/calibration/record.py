"""The calibration record: per-word N_w = Pr[M(w) = w] of one mechanism on one vocabulary over a
grid of ε, how a privacy target picks an ε from it, and its ``.npz`` file format.

:class:`Calibration` holds point estimates and one-sided upper confidence bounds
(:func:`_upper_bound`, Wilson's score bound at level ``confidence``) for the measured words;
:meth:`Calibration.choose` turns a target ``max_n_w`` into an :class:`EpsilonChoice`, erring on the
private side (the guarantee is stated in :mod:`deniable.calibration.targets`).
:func:`calibration_key` names what a calibration is of: mechanism, ε-independent parameters and
vocabulary fingerprint.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = ["Calibration", "EpsilonChoice", "calibration_key", "check_target", "FORMAT_VERSION"]

FORMAT_VERSION = 1


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


def calibration_key(factory: Callable[[float], Any]) -> tuple[str, dict[str, Any], str]:
    """(mechanism name, parameters that do not depend on ε, vocabulary fingerprint) of a factory.

    Parameters derived from ε (TEM's γ from β) differ between two probes and are left out, so a
    calibration is keyed by what the user chose, not by a value ε sets."""
    from .plausible import mechanism_params

    a = factory(1.0)
    pa = mechanism_params(a)
    dependent = a.epsilon_dependent_params()  # the Mechanism contract
    if dependent is None:  # not declared: leave out what differs between two builds
        pb = mechanism_params(factory(2.0))
        dependent = {k for k, v in pa.items() if pb.get(k) != v}
    params = {k: v for k, v in pa.items() if k not in dependent}
    return str(getattr(a, "name", type(a).__name__)), params, str(getattr(a.vocabulary, "fingerprint", "?"))


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
                f"even there); reachable targets: max_n_w >= {float(self.worst_upper.min()):.3g}; raise the target"
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
