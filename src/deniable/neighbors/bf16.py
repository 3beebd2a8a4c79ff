"""Exact Euclidean nearest-neighbour search through a certified bfloat16 matrix product.

Same answer as a float64 search, several times faster on CPUs with bfloat16 matrix units (Intel
AMX, AVX512-BF16), where torch's bfloat16 matrix product runs at ~1 TFLOP/s per core against
~0.1 TFLOP/s for numpy's float32 one (``benchmarks/bench_bf16_search.py`` measures both on the
machine at hand; on a CPU without such units the bfloat16 product is emulated and slower).

**How the answer stays exact.** The nearest vocabulary vector e of a query q maximizes
``T(e) = 2 q·e − ‖e‖²``. One bfloat16 product of ``[2q, −1]`` with ``[e, ‖e‖²]`` computes every
T approximately, with a rigorous error bound (:meth:`Bf16EuclideanIndex.error_bound`): operands
rounded to bfloat16 (relative error ≤ 2⁻⁸, round-to-nearest, checked by a test), products exact
and summed in float32 in any order, the result rounded to bfloat16 (≤ 2⁻⁷ relative: covers
truncation too); the bound is :func:`deniable.neighbors.base.score_error_bound`, shared by every
exact engine. From a lower bound of the k-th largest
computed value (the k-th largest of the maxima of groups of 64 adjacent columns) and that
bound, every id that can be among the exact k nearest is a *candidate* (found by screening the
groups by their maxima, then a second sieve with each candidate's own norm and value); the
candidates (≈ 2–5 per query for Madlib's noise on the default 300-d GloVe subset) are
re-measured as ‖q − e‖² in float64 and ordered by (distance, id). So the result is the float64
nearest neighbour (ties: lowest id) whatever the rounding of the fast product; only the
candidate count, i.e. speed, depends on it.

Requires torch (``pip install "deniable[torch]"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optional import import_optional
from .._validation import check_int
from .base import VectorIndex, score_error_bound, squared_norms

__all__ = ["Bf16EuclideanIndex"]

_U_IN = 2.0**-8  # bfloat16 round-to-nearest of an operand (we convert; torch rounds to nearest even)
_U_OUT = 2.0**-7  # bfloat16 rounding of the product's output (conservative: truncation)
_C_OUT = _U_OUT / (1.0 - _U_OUT)  # |output − accumulated| ≤ _C_OUT · |output|
_I16_MIN = np.int16(-32768)
_GROUP = 64  # adjacent columns per group of the candidate screen
_MAX_NORM = 1e18  # vector norms (and query norm × vector norm ≤ its square) far from float32 overflow


def _check_torch(torch: Any) -> None:
    """The error bound assumes round-to-nearest operands and float32 accumulation: check both
    on this torch build (older CPU builds summed bfloat16 products in bfloat16)."""
    one = torch.ones(1, 1024, dtype=torch.bfloat16)
    acc = float((one @ one.T).float())
    x = torch.tensor([1.0 + 2.0**-8 + 2.0**-20, 1.0 + 2.0**-9], dtype=torch.float32).to(torch.bfloat16).float().tolist()
    if acc != 1024.0 or x != [1.0 + 2.0**-7, 1.0]:
        raise RuntimeError(f"this torch build's bfloat16 arithmetic breaks the exact-bf16 error bound (sum of 1024 ones = {acc}, "
                           f"rounding {x}); use index='exact' or a newer torch")


def _f32_to_bf16_bits_down(x: np.ndarray) -> np.ndarray:
    """Bit patterns (int16) of the largest bfloat16 values ≤ ``x`` (x ≥ 0, float64)."""
    f = x.astype(np.float32)
    f = np.where(f.astype(np.float64) > x, np.nextafter(f, np.float32(-np.inf)), f)  # round down
    return (f.view(np.int32) >> 16).astype(np.int16)  # truncation rounds a positive value down


def _bits_to_f64(bits: np.ndarray) -> np.ndarray:
    """Values of bfloat16 bit patterns (int16) as float64."""
    return (bits.astype(np.int32) << 16).view(np.float32).astype(np.float64)


def _nonzero(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D mask, row-major (rows ascending, then columns): one flat scan,
    ~15× faster than the 2-D ``np.nonzero``."""
    r, c = np.divmod(np.flatnonzero(mask), mask.shape[1])
    return r, c


def _largest(a: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the int16 array ``a``: its largest and its k-th largest entry (k ≤ columns),
    by masking the largest k−1 times (k is small: Vickrey's two nearest). ``a`` is restored."""
    top = a.max(axis=1)
    if k == 1:
        return top, top.copy()
    rows = np.arange(a.shape[0])
    saved = []
    for _ in range(k - 1):
        j = a.argmax(axis=1)
        saved.append((j, a[rows, j].copy()))
        a[rows, j] = _I16_MIN
    kth = a.max(axis=1)
    for j, val in reversed(saved):
        a[rows, j] = val
    return top, kth


def _ordered(bits: np.ndarray) -> np.ndarray:
    """Map bfloat16 bit patterns (int16) to int16 keys ordered as the values (−0 < +0)."""
    return bits ^ ((bits >> 15) & np.int16(0x7FFF))


class Bf16EuclideanIndex(VectorIndex):
    """Exact Euclidean 1-NN and k-NN (float64 distances, ties to the lowest id) over the rows of
    ``vectors``, scored by a certified bfloat16 matrix product (see the module docs).

    Parameters
    ----------
    vectors
        ``(V, d)`` vocabulary vectors (rounded to float32, as every index here).
    block_queries
        Queries per matrix product (default 256: the output block then stays in cache).
    """

    exact = True

    def __init__(self, vectors: np.ndarray, *, block_queries: int = 256) -> None:
        torch = import_optional("torch", purpose='index="exact-bf16"')
        e2 = self._set_vectors(vectors)  # float64 squared norms
        v = self._vectors
        _check_torch(torch)
        self.block_queries = check_int("block_queries", block_queries, minimum=1)
        self._norm = np.sqrt(e2)
        self._max_norm = float(self._norm.max())
        if self._max_norm > _MAX_NORM:
            raise ValueError(f"a vector has norm {self._max_norm:.3g} > {_MAX_NORM:g}: its squared norm would overflow float32; use index='exact'")
        aug = np.concatenate([v, e2.astype(np.float32)[:, None]], axis=1)
        # padded to a multiple of _GROUP columns with T = −1e38, below every real T (≥ −3e36 within
        # the norm limits), so each row of scores splits into groups of _GROUP adjacent columns
        # whose maxima screen the row in one pass; padding columns are never candidates
        self._groups = -(-aug.shape[0] // _GROUP)
        pad = np.zeros((self._groups * _GROUP - aug.shape[0], aug.shape[1]), dtype=np.float32)
        pad[:, -1] = 1e38
        aug = np.concatenate([aug, pad])
        # (d+1, V) contiguous: the layout the CPU kernels read fastest
        self._aug_t = torch.from_numpy(np.ascontiguousarray(aug.T)).to(torch.bfloat16).contiguous()
        #: Counters: queries searched, float64 candidates re-measured, rows on the slow path
        #: (threshold not positive), rows whose bound was redone through order-preserving keys.
        self.stats = {"queries": 0, "candidates": 0, "slow_rows": 0, "reordered_rows": 0}

    def _check(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The queries as float32 and their norms (float64), validated."""
        q = self._queries(queries)
        qn = np.sqrt(squared_norms(q))
        if qn.size and float(qn.max()) * max(self._max_norm, 1.0) > _MAX_NORM**2:
            raise ValueError(f"a query has norm {float(qn.max()):.3g}: 2q·e could overflow float32 against vectors of norm up to {self._max_norm:.3g}; use index='exact'")
        return q, qn

    def error_bound(self, qnorm: np.ndarray, enorm: np.ndarray | float, value: np.ndarray | float) -> np.ndarray:
        """Bound on |computed T − exact T| for queries of norm ``qnorm``, vectors of norm ``enorm``
        and computed (bfloat16) value ``value``, T = 2q·e − ‖e‖² (arrays broadcast), plus the
        float64 re-measurement's slack: :func:`~deniable.neighbors.base.score_error_bound` with
        operands (2q, e and the float32 ‖e‖²) rounded to bfloat16 (≤ 2⁻⁸ relative), products
        exact and summed in float32, and the output rounded to bfloat16 (≤ 2⁻⁷/(1−2⁻⁷)·|value|)."""
        q = np.asarray(qnorm, dtype=np.float64)
        return score_error_bound(q, np.asarray(enorm, dtype=np.float64), self.dim, operand=_U_IN, output=_U_OUT, value=np.asarray(value, dtype=np.float64))

    def _products(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Computed T of each query row against every vector, as bfloat16 bit patterns (int16,
        ``(m, V')``), and the largest pattern of each group of ``_GROUP`` adjacent columns
        (``(m, V'/_GROUP)``)."""
        torch = import_optional("torch", purpose='index="exact-bf16"')
        qa = np.empty((q.shape[0], self.dim + 1), dtype=np.float32)
        np.multiply(q, np.float32(2.0), out=qa[:, :-1])
        qa[:, -1] = -1.0
        out = (torch.from_numpy(qa).to(torch.bfloat16) @ self._aug_t).view(torch.int16)
        # torch reduces int16 over adjacent columns as fast as numpy does over strided ones, and
        # adjacent groups make the members' gather below contiguous (≈ 30× cheaper: each group is
        # two cache lines, not 64)
        group_max = out.view(q.shape[0], self._groups, _GROUP).amax(dim=2)
        return out.numpy(), group_max.numpy()

    def _candidates(self, q: np.ndarray, qn: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(row, id) pairs that include every exact k nearest of each query row (``qn``: the
        rows' norms)."""
        bits, group_max = self._products(q)  # group_max (m, G): max of each _GROUP adjacent columns
        m = q.shape[0]
        rows_ix = np.arange(m)
        # raw int16 patterns order like the values only among non-negative values: where fewer
        # than k groups have a non-negative maximum, redo the row through order-preserving keys
        G = self._groups
        if k == 1:
            top = group_max.max(axis=1)
            kth = top.copy()
        elif k <= G:
            # the k-th largest group maximum: k distinct ids reach it, so it is at most the row's
            # k-th largest value (a lower bound is all the threshold below needs; when it is ≥ 0
            # the int16 order of the maxima is their value order)
            top, kth = _largest(group_max, k)
        else:
            top, kth = _largest(bits, k)
        bad = np.flatnonzero(kth < 0)
        if bad.size:
            self.stats["reordered_rows"] += int(bad.size)
            top_k, kth_k = _largest(_ordered(bits[bad]), k)
            top[bad], kth[bad] = _ordered(top_k), _ordered(kth_k)
        t_top, t_kth = _bits_to_f64(top), _bits_to_f64(kth)
        # the k ids that reach top … kth (distinct ids) have exact T ≥ t_kth − their bound, and
        # their |value| ≤ max(|t_top|, |t_kth|): so the k-th largest exact T is at least L
        M = self._max_norm
        # (the bound includes the float64 re-measurement's slack, so ids it could rank level with
        # the k-th stay candidates)
        coarse = self.error_bound(qn, M, 0.0)
        L = t_kth - coarse - _C_OUT * np.maximum(np.abs(t_top), np.abs(t_kth))
        # an exact top-k id j has t_j + E_j ≥ T_j ≥ L with E_j ≤ coarse + C·|t_j|
        lo = L - coarse
        thr = np.where(lo >= 0, lo / (1 + _C_OUT), lo / (1 - _C_OUT))
        fast = (thr > 0) & (top >= 0)  # positive bfloat16 patterns order as int16
        r_list, c_list = [], []
        f = np.flatnonzero(fast)
        if f.size:
            # screen the groups by their maxima, then compare only the members of groups that pass
            key = _f32_to_bf16_bits_down(thr[f])
            gr, gj = _nonzero(group_max[f] >= key[:, None])
            members = bits.reshape(m, G, _GROUP)[f[gr], gj]  # (passing groups, _GROUP), contiguous
            hit_r, hit_c = np.nonzero(members >= key[gr][:, None])
            r_list.append(f[gr[hit_r]])
            c_list.append(gj[hit_r] * _GROUP + hit_c)
        if f.size < m:
            s = np.flatnonzero(~fast)
            self.stats["slow_rows"] += int(s.size)
            keys = _ordered(bits[s])
            thr_s = np.asarray(thr[s], dtype=np.float64)
            # smallest bfloat16 key whose value is ≥ thr (any sign): round down, then to a key
            f32 = thr_s.astype(np.float32)
            f32 = np.where(f32.astype(np.float64) > thr_s, np.nextafter(f32, np.float32(-np.inf)), f32)
            b = (f32.view(np.int32) >> 16).astype(np.int16)  # truncation: down for ≥ 0, up for < 0
            b = np.where((f32 < 0) & ((f32.view(np.int32) & 0xFFFF) != 0), b + np.int16(1), b).astype(np.int16)
            # one key lower: −0 and +0 have different keys but equal values
            r, c = _nonzero(keys >= (_ordered(b).astype(np.int32) - 1)[:, None])
            r_list.append(s[r])
            c_list.append(c)
        rows, cols = np.concatenate(r_list), np.concatenate(c_list)
        real = cols < self.size  # never a padding column
        rows, cols = rows[real], cols[real]
        if rows.size:
            # second sieve with each candidate's own norm and value: the k-th largest lower bound
            # t − E of a row's candidates is a lower bound of its k-th largest exact T (k distinct
            # ids reach it), and every exact top-k id has t + E ≥ T ≥ that (E includes the
            # float64 slack)
            t = _bits_to_f64(bits[rows, cols])
            e = self.error_bound(qn[rows], self._norm[cols], t)
            lower = t - e
            if k == 1:
                kth_lower = np.full(m, -np.inf)
                np.maximum.at(kth_lower, rows, lower)
            else:
                order = np.lexsort((-lower, rows))
                kth_lower = lower[order][np.searchsorted(rows[order], rows_ix) + k - 1]
            keep = t + e >= kth_lower[rows]
            rows, cols = rows[keep], cols[keep]
        if (np.bincount(rows, minlength=m) < k).any():  # cannot happen if the bound holds
            raise RuntimeError("exact-bf16 search kept fewer than k candidates for a query; please report this (use index='exact')")
        return rows, cols

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids (int64) and their float64 Euclidean distances, nearest first,
        ties to the lowest id; ``k`` is meant to be small (the k-th value costs k passes over the
        groups' maxima)."""
        q, qn = self._check(queries)
        k = min(check_int("k", k, minimum=1), self.size)
        n = q.shape[0]
        ids = np.empty((n, k), dtype=np.int64)
        dist = np.empty((n, k), dtype=np.float64)
        for s in range(0, n, self.block_queries):
            qb = q[s : s + self.block_queries]
            rows, cols = self._candidates(qb, qn[s : s + self.block_queries], k)
            diff = qb[rows].astype(np.float64) - self._vectors[cols].astype(np.float64)
            d2 = np.einsum("ij,ij->i", diff, diff)
            order = np.lexsort((cols, d2, rows))  # by row, distance, then id: ties to the lowest id
            rows, cols, d2 = rows[order], cols[order], d2[order]
            start = np.searchsorted(rows, np.arange(qb.shape[0]))
            pick = start[:, None] + np.arange(k)
            ids[s : s + qb.shape[0]] = cols[pick]
            dist[s : s + qb.shape[0]] = np.sqrt(d2[pick])
            self.stats["candidates"] += int(rows.size)
        self.stats["queries"] += n
        return ids, dist

    def search(self, queries: np.ndarray) -> np.ndarray:
        """Id of the nearest vocabulary vector for each query row (int64, shape ``(n,)``)."""
        return self.knn(queries, 1)[0][:, 0]
