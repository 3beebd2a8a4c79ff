"""Exact, vectorized sampling from (truncated) exponential-mechanism distributions over words.

The library's one exact exponential sampler (TEM, SanText, SanText+ and KnnTEM use it), for
output distributions of the form

    P[y | r] ∝ exp(−a·min(d(q_r, x_y), γ_r))      over target words y = 0..V−1,

with query points (rows) and targets that may differ (SanText+ samples only sensitive words).
A k-nearest table (exact distances, and a bound b_r below which no unlisted target lies) gives
the envelope (u_y − g)⁺·[y listed] + g with g = exp(−a·min(b_r, γ_r)) (:class:`SamplingTables`);
a round draws a listed target by inverse CDF, or a uniform target accepted with probability
min(1, u_y/g) (one distance); rejected rounds restart. The output is exactly P[y | r] (proof:
:class:`deniable.mechanisms.tem.TEM`, "How it samples"). Only the rejection rounds loop, over
the tokens still pending (:class:`ExponentialSampler`).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..errors import DeniableWarning
from ..neighbors.neighborhoods import Neighborhoods, cache_directory, knn_neighborhoods, row_distances, store_neighborhoods

__all__ = [
    "ExponentialSampler",
    "SamplingTables",
    "PointsWithUnk",
    "RowSubset",
    "log_probability_rows_by_block",
    "self_probabilities_by_block",
    "self_probability_curves",
    "subset_knn",
]


def self_probability_curves(scores: np.ndarray, own: np.ndarray, epsilons: np.ndarray) -> np.ndarray:
    """``exp(−(ε/2)·own_r) / Σ_y exp(−(ε/2)·scores[r, y])`` for every row r and every ε: the
    chance that an exponential mechanism with ε-independent scores (distances, truncated or
    not) returns the input, ``(R, E)`` float64. ``own`` is each row's own score (``nan``: the
    input is not a possible output, probability 0). One pass over the scores per ε, stable
    (scores are shifted by each row's minimum)."""
    s = np.asarray(scores, dtype=np.float64)
    own = np.asarray(own, dtype=np.float64)
    eps = np.asarray(epsilons, dtype=np.float64)
    lo = s.min(axis=1, keepdims=True)
    s = s - lo
    gap = np.where(np.isnan(own), 0.0, own - lo[:, 0])
    out = np.empty((s.shape[0], eps.size))
    buf = np.empty_like(s)
    for j, e in enumerate(eps.tolist()):
        np.multiply(s, -e / 2.0, out=buf)
        np.exp(buf, out=buf)
        out[:, j] = np.exp(-(e / 2.0) * gap) / buf.sum(axis=1)
    out[np.isnan(own)] = 0.0
    return out


def self_probabilities_by_block(
    mechanism: Any, ids: Any, epsilons: Any, scores_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], block: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, P[M(w) = w] per id and ε)`` for ``self_probabilities`` methods: validates the
    vocabulary ids (UNK is refused: it is never an output of itself) and runs
    :func:`self_probability_curves` on ``scores_of(block_ids) -> (scores, own)``, ``block`` words
    at a time so the score matrix stays small."""
    ids = mechanism._as_ids(np.asarray(ids)).ravel()
    if (ids < 0).any():
        raise ValueError("self_probabilities takes vocabulary ids (UNK is never an output of itself)")
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    out = np.empty((ids.size, eps.size))
    for s in range(0, ids.size, block):
        b = ids[s : s + block]
        out[s : s + b.size] = self_probability_curves(*scores_of(b), eps)
    return ids, out


def log_probability_rows_by_block(
    mechanism: Any, ids: Any, width: int, scores_of: Callable[[np.ndarray], np.ndarray], block: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, log P[y | x])`` for ``log_probability_rows`` methods of exponential mechanisms with
    ε-scaled scores: validates ``ids`` (UNK_ID allowed: query row V) and ``block``, and returns
    the log-softmax of ``−(ε/2)·scores_of(rows)`` (``(len(rows), width)`` distances, truncated or
    not) for ``block`` query rows at a time, ``(len(ids), width)`` float64."""
    block = check_int("block", block, minimum=1)
    ids = mechanism._as_ids(np.asarray(ids)).ravel()
    rows = np.where(ids == UNK_ID, mechanism.n_words, ids)
    out = np.empty((ids.size, width))
    for s in range(0, rows.size, block):
        r = rows[s : s + block]
        logits = -(mechanism.epsilon / 2.0) * np.asarray(scores_of(r), dtype=np.float64)
        m = logits.max(axis=1, keepdims=True)
        out[s : s + r.size] = logits - (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))
    return ids, out


class PointsWithUnk:
    """Row ``i < V``: ``vectors[i]``; row ``V``: the UNK point (vocabulary mean). No copy."""

    def __init__(self, vectors: np.ndarray, unk: np.ndarray) -> None:
        self.vectors = vectors
        self.unk = unk
        self.V = vectors.shape[0]

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        out = self.vectors[np.minimum(idx, self.V - 1)]
        is_unk = idx == self.V
        if is_unk.any():
            out[is_unk] = self.unk
        return out


class RowSubset:
    """Row ``i`` of ``points[rows]`` without copying: ``RowSubset(points, rows)[idx]`` is
    ``points[rows[idx]]`` (the query points of a table built for some rows only)."""

    def __init__(self, points: Any, rows: np.ndarray) -> None:
        self.points = points
        self.rows = np.asarray(rows, dtype=np.int64)

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        return np.asarray(self.points[self.rows[np.asarray(idx, dtype=np.int64)]])


def _excess(shift: np.ndarray, d: np.ndarray, env: np.ndarray, a: float) -> np.ndarray:
    """Listed excess weight (u_y − g)⁺ relative to the row's largest weight e^(−shift):
    u_y·(1 − e^(−a(env − d)))⁺ (zero for a listed target beyond a loose bound: the uniform part
    then gives it exactly u_y)."""
    return np.exp(shift - a * d) * -np.expm1(-a * np.maximum(env - d, 0.0))


@dataclass(frozen=True)
class SamplingTables:
    """The envelope of :class:`ExponentialSampler` for every query row r (see the module docs):
    the listed targets with d ≤ γ_r and their cumulative excess weights, the listed mass S_r and
    the uniform mass V·g_r (both relative to the row's largest weight e^(−shift_r)), whether the
    bound reaches γ_r (uniform proposals then need no distance), and env_r = min(b_r, γ_r).

    Built from a CSR neighbourhood table (:meth:`from_neighborhoods`) or from dense rows of
    recomputed distances (:meth:`from_rows`); the torch backend takes these arrays to the device.
    """

    start: np.ndarray  # (R,) int64: first entry of row r in ids/cum
    count: np.ndarray  # (R,) int64: entries of row r (listed targets with d <= γ_r)
    ids: np.ndarray  # (nnz,) target indices
    cum: np.ndarray  # (nnz,) float64: cumulative excess weights within each row
    list_mass: np.ndarray  # (R,) S_r
    unif_mass: np.ndarray  # (R,) V * g_r (relative to the row's largest weight)
    complete: np.ndarray  # (R,) bool: bound >= γ_r, uniform proposals are always accepted
    env: np.ndarray  # (R,) min(bound, γ_r)
    shift: np.ndarray  # (R,) a * (smallest listed distance, capped at env or γ)
    max_count: int

    @property
    def n_rows(self) -> int:
        return int(self.start.shape[0])

    @property
    def halvings(self) -> int:
        """Steps of the binary search that inverts a row's cumulative weights."""
        return max(1, int(self.max_count).bit_length())

    @classmethod
    def from_neighborhoods(cls, nb: Neighborhoods, a: float, gamma: float | np.ndarray, n_targets: int) -> SamplingTables:
        """Tables of P[y | r] ∝ exp(−a·min(d(q_r, x_y), γ_r)) over ``n_targets`` targets from a
        neighbourhood table (rows sorted by distance, exact distances, a valid bound per row)."""
        R = nb.n_rows
        g = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (R,))
        sizes = np.diff(nb.indptr)
        row_of = np.repeat(np.arange(R), sizes)
        env = np.minimum(nb.bound, g)
        complete = nb.bound >= g
        # rows are sorted by distance, so the entries with d <= γ are a prefix of each row; for
        # an incomplete row (bound < γ) that prefix is the whole row
        keep = np.flatnonzero(nb.distances <= g[row_of])
        count = np.bincount(row_of[keep], minlength=R).astype(np.int64)
        ids = nb.indices[keep].astype(np.int32, copy=False)
        d = nb.distances[keep]
        r = row_of[keep]
        first = g.copy()
        has = count > 0
        first[has] = nb.distances[nb.indptr[:-1][has]]
        shift = a * np.minimum(first, g)  # weights are relative to the row's largest weight
        w = _excess(shift[r], d, env[r], a)
        start = np.zeros(R, dtype=np.int64)
        np.cumsum(count[:-1], out=start[1:])
        cum = np.empty_like(w)
        max_count = int(count.max()) if R else 0
        if max_count:  # cumulative sums within each row, a block of padded rows at a time
            rows_per_block = max(1, (8 << 20) // (8 * max_count))
            for r0 in range(0, R, rows_per_block):
                cc = count[r0 : r0 + rows_per_block]
                L = int(cc.max())
                if L == 0:
                    continue
                s0 = int(start[r0])
                s1 = s0 + int(cc.sum())
                mask = np.arange(L) < cc[:, None]
                pad = np.zeros(mask.shape)
                pad[mask] = w[s0:s1]
                np.cumsum(pad, axis=1, out=pad)
                cum[s0:s1] = pad[mask]
        list_mass = np.zeros(R)
        list_mass[has] = cum[start[has] + count[has] - 1]
        unif_mass = n_targets * np.exp(shift - a * env)
        return cls(start, count, ids, cum, list_mass, unif_mass, complete, env, shift, max_count)

    @classmethod
    def from_rows(cls, ids: np.ndarray, d: np.ndarray, bound: np.ndarray, a: float, gamma: float | np.ndarray, n_targets: int) -> SamplingTables:
        """Tables from dense rows: ``ids`` ``(R, K)`` listed targets of each row with their exact
        distances ``d`` (any order) and ``bound`` ``(R,)``, a lower bound on the distance of
        every unlisted target. Every row keeps its K entries; those beyond γ_r get zero excess
        weight, so a draw below S_r never returns them."""
        R, K = ids.shape
        g = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (R,))
        env = np.minimum(bound, g)
        complete = bound >= g
        listed = d <= g[:, None]
        shift = a * np.minimum(np.where(listed, d, np.inf).min(axis=1), env)  # weights relative to the row's largest
        w = np.where(listed, _excess(shift[:, None], d, env[:, None], a), 0.0)
        cum = np.cumsum(w, axis=1)
        return cls(
            np.arange(R, dtype=np.int64) * K, np.full(R, K, dtype=np.int64), ids.reshape(-1), cum.reshape(-1),
            cum[:, -1].copy(), n_targets * np.exp(shift - a * env), complete, env, shift, K,
        )


class ExponentialSampler:
    """Exact sampler of P[y | r] ∝ exp(−a·min(d(q_r, x_y), γ_r)): the rejection rounds of the
    module docs over :class:`SamplingTables`. The one numpy implementation (the torch backend's
    TEM runs the same rounds on the device, on the same tables).

    Parameters
    ----------
    points
        Query points, indexable by integer arrays (rows 0..R−1).
    targets
        ``(V, dim)`` target vectors.
    nb
        k-nearest (or radius) table: row r lists targets near ``points[r]`` with exact distances,
        and a valid lower bound on the distance to every unlisted target.
    a
        The exponent's scale (ε/2 for the exponential mechanism with sensitivity d).
    gamma
        Truncation γ (``inf``: none), a number or one value per row.
    metric
        The metric of ``nb`` (name or callable), for the distances of uniform proposals.
    """

    def __init__(self, points: Any, targets: np.ndarray, nb: Neighborhoods, a: float, gamma: float | np.ndarray, metric: str | Callable[..., np.ndarray]) -> None:
        self._setup(points, targets, SamplingTables.from_neighborhoods(nb, float(a), gamma, int(targets.shape[0])), a, gamma, metric)

    @classmethod
    def from_tables(
        cls, points: Any, targets: np.ndarray, tables: SamplingTables, a: float, gamma: float | np.ndarray, metric: str | Callable[..., np.ndarray]
    ) -> ExponentialSampler:
        """A sampler over ready ``tables`` (built with the same ``a``, ``gamma`` and targets)."""
        self = cls.__new__(cls)
        self._setup(points, targets, tables, a, gamma, metric)
        return self

    def _setup(self, points: Any, targets: np.ndarray, tables: SamplingTables, a: float, gamma: float | np.ndarray, metric: str | Callable[..., np.ndarray]) -> None:
        self.points = points
        self.targets = targets
        self.a = float(a)
        self.gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (tables.n_rows,))
        self.metric = metric
        self.V = int(targets.shape[0])
        self.tables = tables

    def sample(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Target indices, one exact draw per entry of ``rows`` (int64)."""
        T = self.tables
        a, g, V = self.a, self.gamma, self.V
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(rows.shape[0], dtype=np.int64)
        pending = np.arange(rows.shape[0])
        n_halvings = T.halvings
        while pending.size:
            r = rows[pending]
            S = T.list_mass[r]
            x = rng.random(r.size) * (S + T.unif_mass[r])
            from_list = x < S
            # listed part: inverse CDF by a vectorized binary search within each row
            if from_list.any():
                rl, xl = r[from_list], x[from_list]
                base = T.start[rl]
                lo = np.zeros(rl.size, dtype=np.int64)
                hi = T.count[rl] - 1
                for _ in range(n_halvings):
                    mid = (lo + hi) >> 1
                    right = T.cum[base + mid] <= xl
                    lo = np.where(right, mid + 1, lo)
                    hi = np.where(right, hi, mid)
                out[pending[from_list]] = T.ids[base + lo]
            # uniform part: y uniform on the targets, accepted with probability min(1, u_y / g)
            rest = ~from_list
            if not rest.any():
                break
            tok = pending[rest]
            ru = r[rest]
            y = rng.integers(0, V, size=ru.size)
            accept = T.complete[ru]  # a copy (fancy indexing)
            check = np.flatnonzero(~accept)
            if check.size:
                rc = ru[check]
                d = row_distances(self.points, self.targets, rc, y[check], self.metric)
                log_ratio = np.minimum(-a * (np.minimum(d, g[rc]) - T.env[rc]), 0.0)
                accept[check] = rng.random(check.size) < np.exp(log_ratio)
            out[tok[accept]] = y[accept]
            pending = tok[~accept]
        return out


def subset_knn(
    embedding: Any,
    target_ids: np.ndarray,
    k: int,
    metric: str | Callable[..., np.ndarray],
    *,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    memory_bytes: int = 64 << 20,
    progress: bool | None = False,
    tag: str = "subset",
) -> tuple[Neighborhoods, Path | None]:
    """k-nearest table from every vocabulary word and UNK (rows 0..V, row V = the mean vector)
    to the targets ``embedding.vectors[target_ids]`` (indices into ``target_ids``), cached on
    disk per (embedding fingerprint, target set, metric, k) like TEM's tables (callable metrics
    are never cached)."""
    target_ids = np.ascontiguousarray(target_ids, dtype=np.int64)
    fp = embedding.fingerprint
    path: Path | None = None
    if cache_dir is not False and not callable(metric):
        key = hashlib.sha256(target_ids.tobytes()).hexdigest()[:16]
        folder = cache_directory(None if cache_dir in (None, True) else cache_dir)  # type: ignore[arg-type]
        path = folder / f"{tag}-knn-{fp}-{key}-{metric}-k{int(k)}.npz"
        if path.exists():
            try:
                nb = Neighborhoods.load(path)
                if (nb.n_rows, nb.n_vocab, nb.fingerprint, nb.metric, nb.param) == (len(embedding) + 1, target_ids.size, fp, metric, float(k)):
                    return nb, path
            except (OSError, ValueError, KeyError) as exc:
                warnings.warn(f"{path}: unreadable cache file ({exc}); rebuilding it", DeniableWarning, stacklevel=2)
    queries = np.vstack([embedding.vectors, embedding.mean[None, :]])
    nb = knn_neighborhoods(queries, embedding.vectors[target_ids], k, metric, memory_bytes=memory_bytes, progress=progress, fingerprint=fp)
    return nb, store_neighborhoods(nb, path)
