"""Plausible-deniability statistics N_w and S_w of a word-level mechanism.

For an input word w (Madlib paper §3.2; Mahalanobis paper §5.1):

* ``N_w = Pr[M(w) = w]``, the probability that w is released unchanged. ``log 1/N_w`` is the proxy
  for the Rényi min-entropy H_∞(M(w)) (exact when w is the most likely output).
* ``S_w``, the *effective support*: the size of the smallest set of outputs holding at least
  ``1 − η`` of the probability of M(w) (Madlib paper §3.2, the definition used here).
  ``log S_w`` is the proxy for the Rényi entropy H_0(M(w)).

Both papers *estimate* S_w from a finite sample as the number of distinct outputs among the
draws (Madlib §4.1: 1,000 draws; Mahalanobis §5.1: 100 draws, where S_w is stated as the number
of outputs of probability ≥ η). The table therefore has both columns: ``s_w`` (the η-effective
support: exact, or the plug-in estimate from the empirical distribution of the draws) and
``n_distinct`` (distinct outputs among the draws, the papers' estimator; for exact results the
number of outputs of positive probability).

Statistics are computed exactly from ``mechanism.log_probabilities(word)`` (log space, so the
number of outputs of positive probability counts outputs too unlikely for a float64 probability)
where the mechanism has exact probabilities (TEM, SanText, SanText+, CusText, KnnTEM,
Diffractor; BRR for tiny codes), otherwise estimated from ``draws`` samples per word,
drawn in one vectorized :meth:`~deniable.mechanisms.base.Mechanism.sample_ids` call per chunk of
words. Sampled N_w gets a Wilson score interval. Sampled S_w (the plug-in: the smallest set of
observed outputs holding ≥ (1 − η)·draws of the draws) gets a distribution-free interval from the
DKW inequality (Massart's constant), δ = sqrt(ln(2/α) / (2·draws)):

* lower end = plug-in S_w at η + δ. This is a valid lower confidence bound: the true top-k sets
  T*_1 ⊂ T*_2 ⊂ … are nested and do not depend on the sample, so with probability ≥ 1 − α/2,
  Pr[M(w) ∈ T*_k] ≤ P̂(T*_k) + δ ≤ (empirical top-k mass) + δ for every k at once, hence
  S_w ≥ min{k : empirical top-k mass ≥ 1 − η − δ}.
* upper end = plug-in S_w at η − δ when δ < η (approximate: the empirical top-k sets depend on
  the sample), and ``inf`` otherwise: with fewer than about ln(2/α)/(2η²) draws (18,444 for
  η = 0.01, α = 0.05) no finite upper bound is possible, since unseen outputs may hold mass.

A sampled S_w can never exceed ``draws`` and is biased low when the true support is large, which
errs on the private side when S_w is a lower target. Bootstrapping the plug-in is *not* used: it
collapses duplicates and lands far below the estimate.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int, check_unit_interval
from ._word_selection import _knn_dists, extreme_words, select_words  # noqa: F401  (_knn_dists: re-exported for scripts)

__all__ = [
    "PlausibleDeniability",
    "plausible_deniability",
    "select_words",
    "extreme_words",
    "wilson_interval",
    "effective_support",
    "dkw_halfwidth",
    "mechanism_params",
    "summarize",
    "SUMMARY_KEYS",
]

_COLUMNS = (
    "word",
    "word_id",
    "n_w",
    "n_w_low",
    "n_w_high",
    "s_w",
    "s_w_low",
    "s_w_high",
    "n_distinct",
    "h0",
    "h_inf",
)


def wilson_interval(successes: np.ndarray, trials: int, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for binomial proportions ``successes / trials`` (vectorized)."""
    k = np.asarray(successes, dtype=np.float64)
    n = float(trials)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = np.where(k <= 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    hi = np.where(k >= n, 1.0, np.clip(centre + half, 0.0, 1.0))
    return lo, hi


def effective_support(probs: np.ndarray, eta: float) -> np.ndarray:
    """S_w of each row of ``probs`` (rows are output distributions): the size of the smallest
    set of outputs with total probability ≥ 1 − η (Madlib paper §3.2)."""
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    srt = -np.sort(-p, axis=1)
    excl = np.cumsum(srt, axis=1) - srt  # mass of the strictly larger outputs
    total = p.sum(axis=1, keepdims=True)
    return (excl < (1.0 - eta) * total - 1e-12).sum(axis=1).astype(np.int64)


def _sample_support(samples: np.ndarray, etas: Sequence[float], n_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """Plug-in S_w for each η in ``etas`` and the number of distinct values, for each row of an
    int matrix of draws: returns ``(s, n_distinct)`` with ``s`` of shape ``(len(etas), rows)``.

    Vectorized over rows: one sort of ``row * (n_outputs + 1) + value`` keys, run lengths, then
    a per-row descending cumulative count. S_w is at least 1.
    """
    rows, draws = samples.shape
    if rows == 0:
        return np.zeros((len(etas), 0), np.int64), np.zeros(0, np.int64)
    base = np.int64(n_outputs + 1)
    keys = np.sort((np.arange(rows, dtype=np.int64)[:, None] * base + (samples.astype(np.int64) + 1)).ravel())
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    counts = np.diff(np.r_[starts, keys.size])
    row = keys[starts] // base
    n_distinct = np.bincount(row, minlength=rows).astype(np.int64)
    order = np.lexsort((-counts, row))  # by row, then count descending
    c = counts[order]
    r = row[order]
    cum = np.cumsum(c)
    row_start = np.r_[0, np.cumsum(n_distinct)[:-1]]
    before_row = (cum - c)[row_start]  # cumulative count before each row
    excl = cum - c - before_row[r]  # draws landing on strictly more frequent outputs of the row
    out = np.empty((len(etas), rows), dtype=np.int64)
    for j, eta in enumerate(etas):
        target = (1.0 - eta) * draws - 1e-9 * draws
        out[j] = np.bincount(r, weights=(excl < target), minlength=rows)
    return np.maximum(out, 1), n_distinct


def dkw_halfwidth(draws: int, alpha: float) -> float:
    """Massart's DKW half-width sqrt(ln(1/α) / (2·draws)): with probability ≥ 1 − α, an
    empirical CDF along a fixed order is everywhere within it of the true one (one side)."""
    return math.sqrt(math.log(1.0 / alpha) / (2.0 * draws))


@dataclass
class PlausibleDeniability:
    """Per-word plausible-deniability statistics (a small column table).

    Columns (numpy arrays of equal length): ``word``, ``word_id``, ``n_w`` (probability),
    ``n_w_low``/``n_w_high`` (Wilson interval; equal to ``n_w`` when exact), ``s_w`` (count),
    ``s_w_low``/``s_w_high`` (DKW interval, floats; ``s_w_high`` is inf when the
    draws cannot bound S_w above; both equal ``s_w`` when exact), ``n_distinct``, ``h0 = log S_w``, ``h_inf = log 1/N_w`` (inf when N_w = 0).
    """

    mechanism: str
    epsilon: float
    params: dict[str, Any]
    method: str  # "exact" or "sampled"
    draws: int | None
    eta: float
    confidence: float
    word: np.ndarray
    word_id: np.ndarray
    n_w: np.ndarray
    n_w_low: np.ndarray
    n_w_high: np.ndarray
    s_w: np.ndarray
    s_w_low: np.ndarray
    s_w_high: np.ndarray
    n_distinct: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    columns = _COLUMNS

    @property
    def h0(self) -> np.ndarray:
        """log S_w, the proxy for the Rényi entropy H_0 (Madlib paper §3.2)."""
        return np.log(self.s_w.astype(np.float64))

    @property
    def h_inf(self) -> np.ndarray:
        """log 1/N_w, the proxy for the Rényi min-entropy H_∞ (Madlib paper §3.2)."""
        with np.errstate(divide="ignore"):
            return -np.log(self.n_w)

    def __len__(self) -> int:
        return int(self.word_id.shape[0])

    def __repr__(self) -> str:
        head = (
            f"PlausibleDeniability(mechanism={self.mechanism!r}, epsilon={self.epsilon:g}, method={self.method!r}, "
            f"draws={self.draws}, eta={self.eta:g}, words={len(self)}"
        )
        if len(self) == 0:
            return head + ")"
        n = np.asarray(self.n_w, dtype=np.float64)
        s = np.asarray(self.s_w, dtype=np.float64)
        i, j = int(np.argmax(n)), int(np.argmin(s))
        return (
            f"{head},\n  N_w: mean {n.mean():.4g}, median {np.median(n):.4g}, max {n[i]:.4g} ({self.word[i]!r}),\n"
            f"  S_w: mean {s.mean():.4g}, median {np.median(s):.4g}, min {s[j]:.4g} ({self.word[j]!r}))"
        )

    def column(self, name: str) -> np.ndarray:
        if name not in _COLUMNS:
            raise KeyError(f"unknown column {name!r}; columns: {', '.join(_COLUMNS)}")
        return getattr(self, name)

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per word (Python scalars)."""
        cols = {c: self.column(c).tolist() for c in _COLUMNS}
        return [{c: cols[c][i] for c in _COLUMNS} for i in range(len(self))]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: metadata and columns (non-finite floats become None)."""

        def clean(v: list[Any]) -> list[Any]:
            return [None if isinstance(x, float) and not math.isfinite(x) else x for x in v]

        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "params": dict(self.params),
            "method": self.method,
            "draws": self.draws,
            "eta": self.eta,
            "confidence": self.confidence,
            "meta": dict(self.meta),
            "columns": {c: clean(self.column(c).tolist()) for c in _COLUMNS},
        }

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        """Write the table as CSV (header row = column names)."""
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(_COLUMNS)
            cols = [self.column(c).tolist() for c in _COLUMNS]
            w.writerows(zip(*cols))

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame (needs pandas)."""
        from .._optional import import_optional

        pd = import_optional("pandas", purpose="PlausibleDeniability.to_pandas")
        return pd.DataFrame({c: self.column(c) for c in _COLUMNS})

    def summary(self) -> dict[str, float]:
        """Mean, sd, 5/50/95th percentiles and worst case of N_w and S_w (see :func:`summarize`)."""
        return summarize(self)


SUMMARY_KEYS = (
    "n_words",
    "n_w_mean",
    "n_w_sd",
    "n_w_p5",
    "n_w_p50",
    "n_w_p95",
    "n_w_max",
    "s_w_mean",
    "s_w_sd",
    "s_w_p5",
    "s_w_p50",
    "s_w_p95",
    "s_w_min",
    "n_distinct_mean",
    "n_distinct_sd",
    "n_distinct_min",
)


def summarize(result: PlausibleDeniability) -> dict[str, float]:
    """Across-word summary of one result: mean, sd (ddof=1), 5/50/95th percentiles and the
    worst case (max N_w, min S_w) of N_w (probability) and S_w (count), plus the distinct-output
    count (the papers' estimator of S_w). Worst cases are the Madlib paper's calibration targets."""
    n = result.n_w.astype(np.float64)
    d = result.n_distinct.astype(np.float64)
    ddof = 1 if n.size > 1 else 0
    out = {"n_words": float(n.size)}
    for stat, worst, at in (("n_w", "max", np.max), ("s_w", "min", np.min)):
        v = getattr(result, stat).astype(np.float64)
        p5, p50, p95 = np.percentile(v, [5, 50, 95])
        out.update({f"{stat}_mean": float(v.mean()), f"{stat}_sd": float(v.std(ddof=ddof)), f"{stat}_p5": float(p5),
                    f"{stat}_p50": float(p50), f"{stat}_p95": float(p95), f"{stat}_{worst}": float(at(v))})
    out.update({"n_distinct_mean": float(d.mean()), "n_distinct_sd": float(d.std(ddof=ddof)), "n_distinct_min": float(d.min())})
    return out


def mechanism_params(mechanism: Any) -> dict[str, Any]:
    """The mechanism's :attr:`~deniable.Mechanism.params` (constructor parameters besides ε),
    JSON-friendly: values other than numbers, strings, booleans and None as their ``repr``."""
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in mechanism.params.items()}


def _has_exact(mechanism: Any) -> bool:
    return bool(mechanism.has_exact_probabilities)


def _resolve_words(mechanism: Any, words: Any, gen: np.random.Generator) -> np.ndarray:
    if words is None or (isinstance(words, str) and words == "all"):
        return np.arange(mechanism.n_words, dtype=np.int64)
    if isinstance(words, (int, np.integer)) and not isinstance(words, bool):
        return select_words(mechanism, int(words), rng=gen)
    if isinstance(words, str):
        raise TypeError("words must be a list of words/ids, a count, 'all' or None; got a single string (wrap it in a list)")
    if isinstance(words, np.ndarray) and np.issubdtype(words.dtype, np.integer):
        return mechanism._as_ids(words).ravel()
    ids = []
    for w in words:
        try:
            ids.append(mechanism.id_of(w))
        except KeyError:
            raise KeyError(f"word {w!r} is not in the mechanism's vocabulary") from None
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size and arr.min() < 0:
        raise ValueError("words must be vocabulary words or ids >= 0 (the UNK point -1 is not a word)")
    return arr


def plausible_deniability(
    mechanism: Any,
    words: Sequence[str | int] | int | str | np.ndarray | None = None,
    *,
    draws: int = 1000,
    eta: float = 0.01,
    rng: RNGLike = None,
    method: str = "auto",
    confidence: float = 0.95,
    chunk_samples: int = 400_000,
    progress: Callable[[int], None] | None = None,
) -> PlausibleDeniability:
    """Per-word plausible-deniability statistics N_w and S_w (Madlib paper §3.2, §4.1).

    Parameters
    ----------
    mechanism
        Any :class:`~deniable.mechanisms.base.Mechanism`.
    words
        A list of words (or ids), a count ``n`` (``n`` words stratified by neighbourhood density,
        see :func:`select_words`), or ``None``/``"all"`` for the whole vocabulary.
    draws
        Samples per word when sampling (the papers use 1,000 and 100).
    eta
        η of the effective support S_w: the smallest set of outputs holding ≥ 1 − η.
    rng
        Seed or Generator (word selection and draws).
    method
        ``"auto"`` (exact where ``mechanism.has_exact_probabilities``, else sampled), ``"exact"`` or
        ``"sample"``.
    confidence
        Level of the two-sided intervals of sampled results: Wilson score for N_w, DKW for S_w
        (see the module docstring).
    chunk_samples
        Samples drawn per ``sample_ids`` call (memory bound).
    progress
        Optional callback receiving the number of words finished since the last call.

    Returns
    -------
    PlausibleDeniability
        The table, with ``method`` saying ``"exact"`` or ``"sampled"``.
    """
    draws = check_int("draws", draws, minimum=1)
    eta = check_unit_interval("eta", eta, open_low=True, open_high=True)
    confidence = check_unit_interval("confidence", confidence, open_low=True, open_high=True)
    if method not in ("auto", "exact", "sample"):
        raise ValueError(f"method must be 'auto', 'exact' or 'sample', got {method!r}")
    gen = as_generator(rng)
    ids = _resolve_words(mechanism, words, gen)
    if ids.size == 0:
        raise ValueError("words is empty: nothing to measure")
    V = int(mechanism.n_words)
    exact = method == "exact" or (method == "auto" and _has_exact(mechanism))
    if method == "exact" and not _has_exact(mechanism):
        raise ValueError(f"{type(mechanism).__name__} has no exact probabilities; use method='sample'")
    name = mechanism.name
    vocab_words = mechanism.vocabulary.words
    word_col = np.array([vocab_words[i] for i in ids.tolist()], dtype=object)
    W = ids.shape[0]

    if exact:
        from ..mechanisms.base import log_probability_rows_of

        n_w = np.empty(W)
        s_w = np.empty(W, dtype=np.int64)
        n_distinct = np.empty(W, dtype=np.int64)
        for i, wid in enumerate(ids.tolist()):
            # log space: an output too unlikely for a float64 probability is still in the support
            logp = log_probability_rows_of(mechanism, np.array([wid]))[0]
            p = np.exp(logp)
            n_w[i] = p[wid]
            s_w[i] = effective_support(p, eta)[0]
            n_distinct[i] = int(np.count_nonzero(logp > -np.inf))
            if progress is not None:
                progress(1)
        return PlausibleDeniability(
            name, float(mechanism.epsilon), mechanism_params(mechanism), "exact", None, eta, confidence,
            word_col, ids, n_w, n_w.copy(), n_w.copy(), s_w, s_w.astype(np.float64), s_w.astype(np.float64), n_distinct,
        )

    hits = np.empty(W, dtype=np.int64)
    s_w = np.empty(W, dtype=np.int64)
    s_lo = np.empty(W, dtype=np.float64)
    s_hi = np.empty(W, dtype=np.float64)
    n_distinct = np.empty(W, dtype=np.int64)
    per_chunk = max(1, chunk_samples // draws)
    # each side of the two-sided interval at level `confidence` gets alpha/2
    delta = dkw_halfwidth(draws, (1.0 - confidence) / 2.0)
    etas = [eta, min(eta + delta, 1.0)] + ([eta - delta] if eta > delta else [])
    for s in range(0, W, per_chunk):
        chunk = ids[s : s + per_chunk]
        out = mechanism.sample_ids(np.repeat(chunk, draws), rng=gen).reshape(chunk.shape[0], draws)
        e = s + chunk.shape[0]
        hits[s:e] = (out == chunk[:, None]).sum(axis=1)
        sup, n_distinct[s:e] = _sample_support(out, etas, V)
        s_w[s:e], s_lo[s:e] = sup[0], sup[1]
        s_hi[s:e] = sup[2] if len(etas) == 3 else np.inf
        if progress is not None:
            progress(chunk.shape[0])
    n_w = hits / draws
    lo, hi = wilson_interval(hits, draws, confidence)
    return PlausibleDeniability(
        name, float(mechanism.epsilon), mechanism_params(mechanism), "sampled", draws, eta, confidence,
        word_col, ids, n_w, lo, hi, s_w, s_lo, s_hi, n_distinct,
        meta={"s_w_interval": "DKW (Massart)", "dkw_halfwidth": delta},
    )
