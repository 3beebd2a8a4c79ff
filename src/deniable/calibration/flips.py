"""The ``flips`` estimator: BRR's N_w over the whole ε grid from random bit orders, with exact
Hamming k-NN (see :func:`_flips_curves`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .record import _upper_bound


def _flips_usable(mech: Any) -> bool:
    from ..binary.hamming import FaissBinaryIndex, HammingIndex
    from ..mechanisms.brr import BRR

    if type(mech) is not BRR:
        return False
    idx = mech.index
    return isinstance(idx, HammingIndex) or (isinstance(idx, FaissBinaryIndex) and idx.exact)


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
    be = mech.binary_embedding
    L, V = int(be.n_bits), len(be)
    k = min(8, V)
    nearest = _hamming_sorted(mech, k)
    F = _binomial_cdfs(epsilons, L)  # F[e, K + 1] = P[Binomial(L, p_e) <= K] for K = -1..L
    sums = np.zeros((ids.size, epsilons.size))
    per_block = max(1, queries // max(draws, 1))
    for s in range(0, ids.size, per_block):
        w = ids[s : s + per_block]
        n = w.size * draws
        rank = gen.random((n, L)).argsort(axis=1).argsort(axis=1).astype(np.int16 if L < 32768 else np.int32)  # bit i flips once K > rank[i]
        T, S, ties = _flip_thresholds(nearest, be.codes, be.codes[np.repeat(w, draws)], rank, k)
        FT = F[:, np.minimum(T, L + 1)]  # F(T - 1): column K + 1 = T
        FS = F[:, np.minimum(S, L + 1)]
        f = FT + (FS - FT) / (1.0 + ties)[None, :]  # (E, n)
        sums[s : s + w.size] = f.reshape(epsilons.size, w.size, draws).sum(axis=2).T
        if progress is not None:
            progress(w.size)
    n_w = sums / draws
    return n_w, _upper_bound(sums, draws, confidence), {"draws": draws}


def _binomial_cdfs(epsilons: np.ndarray, L: int) -> np.ndarray:
    """``F[e, K + 1] = P[Binomial(L, p_e) <= K]`` for K = −1..L, p_e = 1/(1 + e^ε) the flip
    probability at grid ε number e (column L + 1 is 1: "never")."""
    from scipy.stats import binom

    p = np.array([1.0 / (1.0 + math.exp(e)) for e in epsilons])
    Ks = np.arange(L + 1)
    F = np.zeros((epsilons.size, L + 2))
    F[:, 1:] = binom.cdf(Ks[None, :], L, p[:, None])
    F[:, -1] = 1.0
    return F


def _flip_thresholds(nearest: Callable[[np.ndarray], np.ndarray], codes: np.ndarray, base: np.ndarray, rank: np.ndarray,
                     k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per draw (row of ``rank``, bit i flipped once K > rank[i], from the code ``base``): T, the
    first K at which another code is as near as w; S, the first K at which one is strictly
    nearer (L + 1: never); and the number of codes tied with w at T (0 where one is strictly
    nearer there). ``nearest(queries)`` gives the ``k`` smallest Hamming distances, ascending."""
    from ..binary.codes import pack_bits

    n, L, V = rank.shape[0], rank.shape[1], codes.shape[0]

    def dists(K: np.ndarray, rows: np.ndarray) -> np.ndarray:
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
            c[full] = _count_within(codes, base, rank, at[full], T)
        ties[at] = np.where(strict, 0, c)
        tie_rows = at[~strict]
        if tie_rows.size:
            lo = np.full(n, L + 1, dtype=np.int64)
            lo[tie_rows] = T[tie_rows]
            S_t = first(lambda d, K: d[:, 0] < K, lo)
            S[tie_rows] = S_t[tie_rows]
    return T, S, ties


def _count_within(codes: np.ndarray, base: np.ndarray, rank: np.ndarray, rows: np.ndarray, T: np.ndarray) -> np.ndarray:
    """For each of ``rows``: how many codes other than w lie within Hamming distance T of the
    noisy code (its first T bits of the order flipped), by the exact numpy scan (rare: more
    ties than the k-NN query shows)."""
    from ..binary.codes import pack_bits
    from ..binary.hamming import HammingIndex

    index = HammingIndex(codes)
    out = np.empty(rows.size, dtype=np.int64)
    for r0 in range(0, rows.size, 256):  # (rows, V) distance blocks: bounded memory
        rr = rows[r0 : r0 + 256]
        q = base[rr] ^ pack_bits(rank[rr] < T[rr][:, None])
        out[r0 : r0 + 256] = (index.distances(q) <= T[rr][:, None]).sum(axis=1) - 1
    return out
