"""Hamming nearest-neighbour search over packed binary codes (BRR paper Algorithm 3, step 3).

The exact engine computes distances as ``popcount(q XOR c)`` summed over the ``uint64`` words of
the codes (``np.bitwise_count``), one vocabulary-wide row block at a time, so memory stays within
``memory_bytes`` whatever the batch size.

**Tie-breaking.** Hamming distances are small integers, so several codes are often equally near.
Every engine here breaks ties the same way: query i comes with a uniform number ``u_i`` in
[0, 1) and returns the tied id of rank ``floor(u_i * C_i)`` in ascending id order, where ``C_i`` is
the number of codes at the minimal distance; with ``u_i`` uniform, each tied code is equally
likely. Because the rule depends only on the set of tied ids, exact engines (numpy or FAISS
flat) return identical ids for identical ``u``. The privacy guarantee does not depend on the rule
(the search is post-processing of the randomized code).

FAISS (optional, ``pip install "deniable[faiss]"``): ``"faiss-flat"`` is exact;
``"faiss-mih"`` (multi-index hashing, Norouzi et al. 2012, BRR paper ref. [15]) is approximate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from .._optional import import_optional
from .._rng import RNGLike, as_generator
from .._threads import even_cuts, run_parallel
from .._validation import check_int

__all__ = ["HammingSearch", "HammingIndex", "FaissBinaryIndex", "make_hamming_index", "HAMMING_INDEX_NAMES", "pick_ties"]

HAMMING_INDEX_NAMES = ("auto", "exact", "faiss-flat", "faiss-mih")
_BYTES_PER_CELL = 11  # uint64 xor + uint8 count + uint16 accumulator (or one float32 score)
_GEMM_MAX_BYTES = 256 << 20
#: Queries per helper thread from which :class:`FaissBinaryIndex` cuts a batch between threads.
PARALLEL_MIN_QUERIES = 1024


@runtime_checkable
class HammingSearch(Protocol):
    """Anything that maps packed query codes (and tie-breaking uniforms) to vocabulary ids."""

    def search(self, queries: np.ndarray, ties: np.ndarray | None = None, rng: RNGLike = None) -> np.ndarray: ...


def _ties_for(n: int, ties: np.ndarray | None, rng: RNGLike) -> np.ndarray:
    if ties is None:
        return as_generator(rng).random(n)
    ties = np.asarray(ties, dtype=np.float64).reshape(-1)
    if ties.shape[0] != n:
        raise ValueError(f"ties must have one uniform per query ({n}), got {ties.shape[0]}")
    return ties


def pick_ties(mask_rows: np.ndarray, mask_ids: np.ndarray, n: int, ties: np.ndarray) -> np.ndarray:
    """Given the (row, id) pairs of tied minima sorted by row then id, pick per row the tied id of
    rank ``floor(u * C)``."""
    count = np.bincount(mask_rows, minlength=n)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    rank = np.minimum((ties * count).astype(np.int64), count - 1)
    return mask_ids[start + rank]


def _plus_minus(codes: np.ndarray, block_rows: int = 1 << 14) -> np.ndarray:
    """Bits of packed codes as a float32 ±1 matrix ``(n, 64·words)`` (bit 1 → +1), filled in
    blocks so the only full-size array is the result (no unpacked uint8 or float32 temporaries)."""
    n = codes.shape[0]
    out = np.empty((n, 64 * codes.shape[1]), dtype=np.float32)
    for s in range(0, n, block_rows):
        raw = np.ascontiguousarray(codes[s : s + block_rows], dtype="<u8").view(np.uint8).reshape(-1, 8 * codes.shape[1])
        blk = out[s : s + block_rows]
        np.copyto(blk, np.unpackbits(raw, axis=1, bitorder="little"))
        blk *= 2.0
        blk -= 1.0
    return out


class HammingIndex:
    """Exact Hamming 1-NN (uniform tie-breaking) and k-NN over packed ``uint64`` codes.

    Parameters
    ----------
    codes
        ``(V, words_per_code)`` packed ``uint64`` codes.
    memory_bytes
        Bound on the working buffers per call (default 64 MiB).
    """

    exact = True

    def __init__(self, codes: np.ndarray, *, memory_bytes: int = 64 << 20) -> None:
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[0] == 0 or codes.dtype != np.uint64:
            raise ValueError(f"codes must be a non-empty 2-D uint64 array, got shape {codes.shape} dtype {codes.dtype}")
        self.memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
        self.codes = np.ascontiguousarray(codes)
        self._cols = np.ascontiguousarray(codes.T)  # (wpc, V): one contiguous row per code word
        self.size, self.words_per_code = (int(s) for s in codes.shape)
        cells = max(1, self.memory_bytes // _BYTES_PER_CELL)
        self._vb = int(min(self.size, max(1, cells // 16)))
        # Hamming distance through BLAS: with bits mapped to ±1, H(q, c) = (n − q·c) / 2, exact in
        # float32 (integer sums of at most 2^24 terms). About 2x the popcount loop on two cores;
        # used while the ±1 matrix stays small (it takes 32x the packed codes' memory).
        n_bits = 64 * self.words_per_code
        self._pm: np.ndarray | None = None
        if self.size * n_bits * 4 <= _GEMM_MAX_BYTES:
            self._pm = _plus_minus(self.codes)

    def _check(self, queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries)
        if q.ndim != 2 or q.shape[1] != self.words_per_code or q.dtype != np.uint64:
            raise ValueError(f"queries must be a uint64 array of shape (n, {self.words_per_code}), got {q.shape} {q.dtype}")
        return q

    def _dist(self, q: np.ndarray, v0: int, w: int, bufs: tuple[np.ndarray, ...]) -> np.ndarray:
        """Distances ``(len(q), w)`` to codes ``v0 .. v0+w`` (exact small integers)."""
        m = q.shape[0]
        if self._pm is not None:
            qpm = _plus_minus(q)
            d = bufs[3][: m * w].reshape(m, w)
            np.matmul(qpm, self._pm[v0 : v0 + w].T, out=d)
            d *= -0.5
            d += 32.0 * self.words_per_code
            return d
        x, c, d = (b[: m * w].reshape(m, w) for b in bufs[:3])
        for k in range(self.words_per_code):
            np.bitwise_xor(q[:, k : k + 1], self._cols[k, None, v0 : v0 + w], out=x)
            np.bitwise_count(x, out=c)
            if k == 0:
                np.copyto(d, c)
            else:
                np.add(d, c, out=d)
        return d

    def _buffers(self, m: int, w: int) -> tuple[np.ndarray, ...]:
        if self._pm is not None:
            e = np.empty(0, np.uint8)
            return e, e, e, np.empty(m * w, np.float32)
        return np.empty(m * w, np.uint64), np.empty(m * w, np.uint8), np.empty(m * w, np.uint16)

    def distances(self, queries: np.ndarray) -> np.ndarray:
        """All Hamming distances ``(n, V)`` (int64; for small problems and tests)."""
        q = self._check(queries)
        return self._dist(q, 0, self.size, self._buffers(q.shape[0], self.size)).astype(np.int64)

    def search(self, queries: np.ndarray, ties: np.ndarray | None = None, rng: RNGLike = None) -> np.ndarray:
        """Nearest code's id for each packed query; ``ties`` (uniforms in [0, 1), one per
        query) break ties as in the module docs, drawn from ``rng`` when omitted."""
        q = self._check(queries)
        n = q.shape[0]
        u = _ties_for(n, ties, rng)
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        V, vb = self.size, self._vb
        cells = max(1, self.memory_bytes // _BYTES_PER_CELL)
        step = max(1, min(n, cells // vb))
        bufs = self._buffers(step, vb)
        for s in range(0, n, step):
            qq, uu = q[s : s + step], u[s : s + step]
            m = qq.shape[0]
            if vb == V:
                d = self._dist(qq, 0, V, bufs)
                rows, ids = np.nonzero(d == d.min(axis=1)[:, None])
                out[s : s + m] = pick_ties(rows, ids, m, uu)
            else:
                out[s : s + m] = self._search_blocked(qq, uu, bufs)
        return out

    def _search_blocked(self, q: np.ndarray, u: np.ndarray, bufs: tuple[np.ndarray, ...]) -> np.ndarray:
        # Phase 1: per vocabulary block, the minimum and how many codes attain it.
        m, V, vb = q.shape[0], self.size, self._vb
        starts = list(range(0, V, vb))
        bmin = np.empty((len(starts), m), dtype=np.int64)
        bcnt = np.empty((len(starts), m), dtype=np.int64)
        for b, v0 in enumerate(starts):
            d = self._dist(q, v0, min(vb, V - v0), bufs)
            mn = d.min(axis=1)
            bmin[b] = mn
            bcnt[b] = (d == mn[:, None]).sum(axis=1)
        best = bmin.min(axis=0)
        cnt = np.where(bmin == best, bcnt, 0)
        total = cnt.sum(axis=0)
        rank = np.minimum((u * total).astype(np.int64), total - 1)
        cum = np.cumsum(cnt, axis=0)
        blk = (cum <= rank).sum(axis=0)  # first block whose cumulative count exceeds the rank
        within = rank - (cum[blk, np.arange(m)] - cnt[blk, np.arange(m)])
        # Phase 2: recompute only the block that holds each query's chosen tie.
        out = np.empty(m, dtype=np.int64)
        for b in np.unique(blk):
            rows = np.flatnonzero(blk == b)
            v0 = starts[b]
            d = self._dist(q[rows], v0, min(vb, V - v0), bufs)
            r, ids = np.nonzero(d == best[rows][:, None])
            count = np.bincount(r, minlength=rows.size)
            first = np.concatenate(([0], np.cumsum(count)[:-1]))
            out[rows] = ids[first + within[rows]] + v0
        return out

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids and their distances, ordered by (distance, id)."""
        q = self._check(queries)
        k = min(check_int("k", k, minimum=1), self.size)
        n, V = q.shape[0], self.size
        ids = np.empty((n, k), dtype=np.int64)
        dists = np.empty((n, k), dtype=np.int64)
        cells = max(1, self.memory_bytes // (_BYTES_PER_CELL + 16))
        step = max(1, min(max(n, 1), cells // V))
        bufs = self._buffers(step, V)
        for s in range(0, n, step):
            qq = q[s : s + step]
            d = self._dist(qq, 0, V, bufs).astype(np.int64)
            # (distance, id) order as one integer key: exact, and ties go to the lowest id.
            key = d * V + np.arange(V)
            part = np.argpartition(key, k - 1, axis=1)[:, :k] if k < V else np.broadcast_to(np.arange(V), key.shape).copy()
            order = np.argsort(np.take_along_axis(key, part, axis=1), axis=1)
            top = np.take_along_axis(part, order, axis=1)
            ids[s : s + qq.shape[0]] = top
            dists[s : s + qq.shape[0]] = np.take_along_axis(d, top, axis=1)
        return ids, dists


class FaissBinaryIndex:
    """Hamming 1-NN with FAISS binary indexes, same tie rule as :class:`HammingIndex`.

    Parameters
    ----------
    codes
        Packed ``uint64`` codes ``(V, words_per_code)``.
    kind
        ``"flat"`` (exact brute force with hardware popcount) or ``"mih"`` (multi-index hashing,
        approximate: it may miss the nearest code; misses that return nothing fall back to exact).
    k
        Candidates fetched per query to see ties; a query whose ``k`` candidates are all tied is
        re-solved exactly, so ties are always broken over the complete tied set for ``"flat"``.
    nhash, nflip
        MIH: number of hash tables and bits flipped when probing.
    threads
        OpenMP threads per search call (default 1; restored afterwards). FAISS's spinning OpenMP
        threads slow down badly on a loaded machine: on 2 shared cores, 1 thread searched
        ~24,000 queries/s against ~1,400 with 2. ``None`` keeps FAISS's global setting. With
        one OpenMP thread, a batch of at least :data:`PARALLEL_MIN_QUERIES` queries is cut
        between :func:`deniable._threads.threads` threads instead (FAISS releases the GIL; 1.9x
        on 2 cores, same ids), which do not spin.
    """

    def __init__(
        self,
        codes: np.ndarray,
        *,
        kind: str = "flat",
        k: int = 8,
        nhash: int | None = None,
        nflip: int = 2,
        threads: int | None = 1,
    ) -> None:
        if kind not in ("flat", "mih"):
            raise ValueError(f"kind must be 'flat' or 'mih', got {kind!r}")
        faiss = import_optional("faiss", purpose="the FAISS binary Hamming index")
        self._faiss = faiss
        self.threads = None if threads is None else check_int("threads", threads, minimum=1)
        self._exact = HammingIndex(codes)
        self.codes = self._exact.codes
        self.size, self.words_per_code = self._exact.size, self._exact.words_per_code
        self.kind = kind
        self.exact = kind == "flat"
        self.k = min(check_int("k", k, minimum=1), self.size)
        d = 64 * self.words_per_code
        x = self.codes.astype("<u8").view(np.uint8).reshape(self.size, 8 * self.words_per_code)
        if kind == "flat":
            index = faiss.IndexBinaryFlat(d)
        else:
            nhash = nhash if nhash is not None else max(1, d // 32)
            nhash = check_int("nhash", nhash, minimum=1)
            index = faiss.IndexBinaryMultiHash(d, nhash, d // nhash)
            index.nflip = check_int("nflip", nflip, minimum=0)
        index.add(np.ascontiguousarray(x))
        self._index = index

    def _search_k(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """FAISS's k nearest (distances, ids) as int64, on ``threads`` OpenMP threads, or with
        one, a large batch in parts on this process's helper threads."""
        xq = np.ascontiguousarray(q.astype("<u8").view(np.uint8).reshape(q.shape[0], -1))
        cuts = even_cuts(q.shape[0], PARALLEL_MIN_QUERIES) if self.threads == 1 else [0, q.shape[0]]
        if len(cuts) > 2:
            D = np.empty((q.shape[0], k), dtype=np.int64)
            I = np.empty((q.shape[0], k), dtype=np.int64)

            def part(a: int, b: int) -> Callable[[], None]:
                def run() -> None:
                    D[a:b], I[a:b] = self._search_faiss(xq[a:b], k)
                return run

            run_parallel([part(a, b) for a, b in itertools.pairwise(cuts)])
            return D, I
        return self._search_faiss(xq, k)

    def _search_faiss(self, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self.threads is None:
            D, I = self._index.search(xq, k)
        else:
            before = self._faiss.omp_get_max_threads()
            self._faiss.omp_set_num_threads(self.threads)
            try:
                D, I = self._index.search(xq, k)
            finally:
                self._faiss.omp_set_num_threads(before)
        return D.astype(np.int64), I.astype(np.int64)

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids and their distances, nearest first (exact for ``"flat"``; equal
        distances in FAISS's order, unlike :meth:`HammingIndex.knn`'s ascending ids)."""
        q = self._exact._check(queries)
        D, I = self._search_k(q, min(check_int("k", k, minimum=1), self.size))
        return I, D

    def search(self, queries: np.ndarray, ties: np.ndarray | None = None, rng: RNGLike = None) -> np.ndarray:
        q = self._exact._check(queries)
        n = q.shape[0]
        u = _ties_for(n, ties, rng)
        if n == 0:
            return np.empty(0, dtype=np.int64)
        D, I = self._search_k(q, self.k)
        found = I >= 0
        tied = found & (D[:, :1] == D)
        redo = ~found[:, 0] | ((tied.sum(axis=1) == self.k) & (self.k < self.size))
        keyed = np.where(tied, I, np.iinfo(np.int64).max)
        keyed.sort(axis=1)
        count = np.maximum(tied.sum(axis=1), 1)
        rank = np.minimum((u * count).astype(np.int64), count - 1)
        out = keyed[np.arange(n), rank]
        if redo.any():
            out[redo] = self._exact.search(q[redo], ties=u[redo])
        return out


def make_hamming_index(index: str | HammingSearch, codes: np.ndarray) -> HammingSearch:
    """Build a Hamming search engine from a name in :data:`HAMMING_INDEX_NAMES` (``"auto"``:
    FAISS flat when FAISS is installed, else the numpy engine; both exact and identical) or
    return an object that has ``search(queries, ties=None, rng=None)``."""
    if isinstance(index, str):
        if index == "auto":
            try:
                return FaissBinaryIndex(codes, kind="flat")
            except ImportError:
                return HammingIndex(codes)
        if index == "exact":
            return HammingIndex(codes)
        if index in ("faiss-flat", "faiss-mih"):
            return FaissBinaryIndex(codes, kind=index.split("-", 1)[1])
        raise ValueError(f"unknown Hamming index {index!r}; choose one of {', '.join(HAMMING_INDEX_NAMES)}")
    if not hasattr(index, "search"):
        raise TypeError(f"index must be a name or an object with search(queries, ties=None, rng=None), got {type(index).__name__}")
    return index
