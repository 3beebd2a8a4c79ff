"""The numpy engine ``"exact"``: exact Euclidean k-nearest neighbours with bounded memory.

For a block of queries q the score of each vocabulary vector e is s = ‖e‖² − 2q·e (‖q‖² does not
change the order). We keep only the vectors (no copy when they are C-contiguous float32, so a
memory-mapped vocabulary stays mapped) and their squared norms ``‖e‖²`` (float32, computed in
float64 blocks); one float32 matrix product of ``−2q`` (exact: a power-of-two scaling) with a
tile of the vectors, plus the norms, gives the scores of the tile, and each query row keeps its
c lowest scores: c = k + 1 for k ≤ 2 (argmin passes: Madlib's 1-NN, Vickrey's two nearest),
else, and for ``knn_bounded``, k + 16 (every vector scoring at most a threshold taken from a
fixed 1-in-16 sample of the vocabulary, or a partition of every tile). Tiles are sized so the score buffer stays within
``memory_bytes`` (default 64 MiB) whatever the batch size.

**Certified exact.** With δ the bound of :func:`~deniable.neighbors.base.score_error_bound`
for the row (float32 product and norms), s_k the k-th lowest computed score and s_c the c-th
(every other vector scores at least s_c), a row is certain when s_c > s_k + 2δ: no other
vector can be among the exact k nearest, nor level with the k-th in float64. Its c candidates
are re-measured in float64 and ordered by (distance, id). Any other row (near ties at the cut,
duplicated vectors, huge norms) is scanned again for every vector scoring at most s_k + 2δ, and
all of those are re-measured. So the answer is the float64 brute force of
:mod:`deniable.neighbors.base` (ties to the lowest id) whatever float32 rounding does.

``knn_bounded`` also returns, per row, a lower bound on the distance of every vector not
returned: min(d_k, √(‖q‖² + s_c − δ)) — what TEM's neighbourhood tables store.
"""

from __future__ import annotations

import threading

import numpy as np

from .._validation import check_int
from .base import SearchIndex, VectorIndex, nearest_first, rank_certain, remeasure, score_error_bound

__all__ = ["SearchIndex", "ExactEuclideanIndex"]

_MARGIN = 16  # extra candidates per row for k > 2: the certificate then almost never fails
_SAMPLE_STRIDE = 16
_TILE_BYTES = 16 << 20  # float32 scores of one (query block x vocabulary tile): about L3-sized
_THRESHOLD_ROWS = 256  # query rows per block on the sampled-threshold path
_F32_SAFE = 1e37  # score magnitudes beyond this could overflow float32: such rows are re-measured


class ExactEuclideanIndex(VectorIndex):
    """Exact Euclidean 1-NN and k-NN over the rows of ``vectors`` (float64-exact, ties to the
    lowest id; see the module docs and :mod:`deniable.neighbors.base`).

    Parameters
    ----------
    vectors
        ``(V, d)`` vocabulary vectors (finite; rounded to float32, as every engine here).
    memory_bytes
        Upper bound on the score buffer (and so the working set) per call, default 64 MiB.
    """

    exact = True

    def __init__(self, vectors: np.ndarray, *, memory_bytes: int = 64 << 20) -> None:
        self.memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
        sq = self._set_vectors(vectors)
        self._sqn = sq.astype(np.float32)
        self._max_norm = float(np.sqrt(sq.max()))
        self._sample: tuple[np.ndarray, np.ndarray] | None = None  # the 1-in-16 threshold sample
        self._local = threading.local()  # per-thread score and mask buffers of the sampled path
        #: Counters: queries searched, rows whose certificate failed and were scanned again.
        self.stats = {"queries": 0, "rescanned": 0}

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_local"]  # buffers are per thread (and not picklable)
        del state["stats"]  # counters of this process's searches: a copy starts at zero, so equal indexes pickle equal
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()
        self.stats = {"queries": 0, "rescanned": 0}

    def score_error_bound(self, qnorm: np.ndarray) -> np.ndarray:
        """Bound on the rounding error of a float32 score for queries of norm ``qnorm`` against
        any vocabulary vector, with the float64 re-measurement's slack
        (:func:`~deniable.neighbors.base.score_error_bound`)."""
        return score_error_bound(qnorm, self._max_norm, self.dim)

    # -- public API ------------------------------------------------------------------------------
    def search(self, queries: np.ndarray) -> np.ndarray:
        """Id of the nearest vocabulary vector for each query row (int64, shape ``(n,)``)."""
        return self._knn(queries, 1, bound=False)[0][:, 0]

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids (int64) and their float64 Euclidean distances, nearest first,
        ties to the lowest id (``k`` is clipped to the vocabulary size)."""
        ids, dist, _ = self._knn(queries, k, bound=False)
        return ids, dist

    def knn_bounded(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`knn` and, per row, a lower bound on the distance of every vector not returned
        (``inf`` when all are returned)."""
        return self._knn(queries, k, bound=True)

    # -- blocks and scores -----------------------------------------------------------------------
    def _blocks(self, n_queries: int) -> tuple[int, int]:
        V = self.size
        cells = max(1, self.memory_bytes // 4)
        # at least 256 queries per product (fewer re-read the whole vocabulary per handful of
        # queries: ~0.7 of the matmul bound at 83 rows vs ~0.85 at 256, V = 200K); the
        # vocabulary is then tiled to keep the score buffer within memory_bytes
        qb = int(np.clip(cells // V, 256, 1024))
        qb = max(1, min(qb, n_queries))
        vb = int(min(V, max(1, cells // qb)))
        return qb, vb

    def _tile(self, c: int) -> int:
        """Vocabulary tile of the sampled-threshold and partition paths (``_THRESHOLD_ROWS`` rows)."""
        return int(min(self.size, max(c, min(_TILE_BYTES, self.memory_bytes // 2) // (4 * _THRESHOLD_ROWS))))

    def _scores(self, qm: np.ndarray, v0: int, w: int, out: np.ndarray | None = None) -> np.ndarray:
        """``‖e‖² − 2q·e`` for the vectors ``v0 .. v0+w`` (``qm`` = −2q), ``(len(qm), w)`` float32."""
        out = np.matmul(qm, self._vectors[v0 : v0 + w].T, out=out)
        out += self._sqn[v0 : v0 + w]
        return out

    # -- the certified search --------------------------------------------------------------------
    def _knn(self, queries: np.ndarray, k: int, *, bound: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = self._queries(queries)
        V = self.size
        k = min(check_int("k", k, minimum=1), V)
        n = q.shape[0]
        ids = np.empty((n, k), dtype=np.int64)
        dist = np.empty((n, k), dtype=np.float64)
        low = np.empty(n if bound else 0, dtype=np.float64)
        c = min(V, k + 1 if k <= 2 and not bound else k + _MARGIN)
        step = self._blocks(n)[0] if c <= 3 else _THRESHOLD_ROWS
        for s in range(0, n, step):
            e = min(n, s + step)
            ids[s:e], dist[s:e], b = self._knn_block(q[s:e], k, c)
            if bound:
                low[s:e] = b
        self.stats["queries"] += n
        return ids, dist, low

    def _knn_block(self, qb: np.ndarray, k: int, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, distances, lower bound of the rest) of the ``k`` nearest for query rows ``qb``
        (float32), from the ``c`` lowest computed scores of each row and the certificate."""
        V, M = self.size, self._max_norm
        m = qb.shape[0]
        q64 = qb.astype(np.float64)
        qq = np.einsum("ij,ij->i", q64, q64)
        if c >= V:  # every vector is a candidate: the float64 brute force itself
            cand = np.broadcast_to(np.arange(V), (m, V))
            out_ids, out_d = nearest_first(cand, remeasure(qb, self._vectors, cand), k)
            return out_ids, out_d, (np.full(m, np.inf) if k >= V else out_d[:, -1].copy())
        qm = np.multiply(qb, np.float32(-2.0), dtype=np.float32)  # exact scaling of q
        cand, sc, cut = self._lowest(qm, k, c)  # every vector outside `cand` scores >= cut
        qn = np.sqrt(qq)
        tol = self.score_error_bound(qn)
        sc64 = sc.astype(np.float64)
        s_k = np.partition(sc64, k - 1, axis=1)[:, k - 1] if k < sc64.shape[1] else sc64.max(axis=1)
        thr = s_k + 2.0 * tol
        thr[2.0 * qn * M + M * M > _F32_SAFE] = np.inf  # float32 may have overflowed: measure all
        out_ids, out_d, u = rank_certain(qb, self._vectors, cand, cut > thr, k)
        if u.size:
            out_ids[u], out_d[u], cut[u] = self._rescan(qb[u], qm[u], thr[u], k)
            self.stats["rescanned"] += int(u.size)
        low = np.minimum(out_d[:, -1], np.sqrt(np.maximum(qq + cut - tol, 0.0)))
        return out_ids, out_d, low

    def _rescan(self, qb: np.ndarray, qm: np.ndarray, thr: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows whose certificate failed: every vector scoring at most ``thr`` (NaN or overflowed
        scores included) is re-measured in float64; returns the k nearest, their distances and
        the new cut (``thr``, or ``inf`` where every vector was a candidate)."""
        m, V = qb.shape[0], self.size
        vb = max(1, min(V, (self.memory_bytes // 4) // max(1, m)))
        rows_l, cols_l = [], []
        for v0 in range(0, V, vb):
            w = min(vb, V - v0)
            S = self._scores(qm, v0, w)
            r, cc = np.nonzero(~(thr[:, None] < S))  # row-major, grouped by row; NaN scores kept
            rows_l.append(r)
            cols_l.append(cc + v0)
        rows, cols = np.concatenate(rows_l), np.concatenate(cols_l)
        counts = np.bincount(rows, minlength=m)
        few = np.flatnonzero(counts < k)
        if few.size:  # not with a valid bound (the k lowest scores are <= s_k <= thr); measure all
            keep = ~np.isin(rows, few)
            rows = np.concatenate([rows[keep], np.repeat(few, V)])
            cols = np.concatenate([cols[keep], np.tile(np.arange(V), few.size)])
            counts = np.bincount(rows, minlength=m)
            thr = np.where(counts == V, np.inf, thr)
        d = remeasure(qb[rows], self._vectors, cols[:, None])[:, 0]
        order = np.lexsort((cols, d, rows))  # by row, distance, then id
        start = np.zeros(m, dtype=np.int64)
        np.cumsum(counts[:-1], out=start[1:])
        pick = order[start[:, None] + np.arange(k)]
        cut = np.where(counts == V, np.inf, thr)
        return cols[pick], d[pick], cut

    # -- candidates: the c lowest computed scores of each row --------------------------------------
    def _lowest(self, qm: np.ndarray, k: int, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, scores, cut): candidates of each row with their computed scores — at least the
        ``k`` lowest (ties: any) — and ``cut``, a score that every other vector reaches."""
        if c == k + 1 and c <= 3:
            return self._lowest_passes(qm, k)
        ids, sc = self._lowest_thresholded(qm, c) if 64 * c <= self.size else self._lowest_full(qm, c)
        return ids, sc, sc.max(axis=1).astype(np.float64)

    def _lowest_passes(self, qm: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Small ``k``: argmin passes per tile (each masks its winner), merged across tiles; the
        k lowest, and the (k+1)-th lowest score as the cut (a min pass: its id is never needed,
        since a certain row's k nearest are its k lowest)."""
        m, V = qm.shape[0], self.size
        c = k + 1
        vb = max(self._blocks(m)[1], c)
        buf = np.empty(m * min(vb, V), dtype=np.float32)
        rows = np.arange(m)
        best_i: np.ndarray | None = None
        best_s: np.ndarray | None = None
        for v0 in range(0, V, vb):
            w = min(vb, V - v0)
            S = self._scores(qm, v0, w, buf[: m * w].reshape(m, w))
            cc = min(c, w)
            last = cc == c and vb >= V  # one tile: the c-th score's id is not needed
            ti = np.zeros((m, cc), dtype=np.int64)
            ts = np.empty((m, cc), dtype=np.float32)
            for j in range(cc):
                if last and j == cc - 1:
                    ts[:, j] = S.min(axis=1)
                    break
                a = S.argmin(axis=1)
                ti[:, j] = a + v0
                ts[:, j] = S[rows, a]
                if j + 1 < cc:
                    S[rows, a] = np.inf
            if best_i is None or best_s is None:
                best_i, best_s = ti, ts
            else:
                ci, cs = np.concatenate([best_i, ti], axis=1), np.concatenate([best_s, ts], axis=1)
                o = np.argsort(cs, axis=1, kind="stable")[:, :c]
                best_i, best_s = np.take_along_axis(ci, o, axis=1), np.take_along_axis(cs, o, axis=1)
        assert best_i is not None and best_s is not None
        return best_i[:, :k], best_s[:, :k], best_s[:, k].astype(np.float64)

    def _lowest_full(self, qm: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Any ``c``: a partition of every tile, then of the tiles' candidates."""
        V = self.size
        width = self._tile(c)
        ids_l, sc_l = [], []
        for v0 in range(0, V, width):
            w = min(width, V - v0)
            S = self._scores(qm, v0, w)
            pt = np.argpartition(S, c - 1, axis=1)[:, :c] if c < w else np.broadcast_to(np.arange(w), S.shape)
            ids_l.append(pt + v0)
            sc_l.append(np.take_along_axis(S, pt, axis=1))
        ci, cs = np.concatenate(ids_l, axis=1), np.concatenate(sc_l, axis=1)
        sel = np.argpartition(cs, c - 1, axis=1)[:, :c] if cs.shape[1] > c else np.argsort(cs, axis=1, kind="stable")
        return np.take_along_axis(ci, sel, axis=1), np.take_along_axis(cs, sel, axis=1)

    def _lowest_thresholded(self, qm: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Large ``c`` (64·c ≤ V): a per-row threshold t, the j-th lowest score on a fixed 1-in-16
        sample of the vocabulary (j ≈ 2c/16 + 4), makes every vector scoring ≤ t a candidate —
        about 2.5·c per row, one comparison per cell and no sort of the tile; the c lowest of
        them are kept. A row with fewer than c (an unrepresentative sample) is redone with
        :meth:`_lowest_full`."""
        m, V = qm.shape[0], self.size
        if self._sample is None:
            self._sample = (np.ascontiguousarray(self._vectors[::_SAMPLE_STRIDE]), self._sqn[::_SAMPLE_STRIDE].copy())
        Xs, sqs = self._sample
        j = min(Xs.shape[0] - 1, -(-2 * c // _SAMPLE_STRIDE) + 4)
        Ss = qm @ Xs.T
        Ss += sqs
        thr = np.partition(Ss, j, axis=1)[:, j : j + 1]
        del Ss
        width = self._tile(c)
        # one scores buffer and one mask buffer for all tiles and blocks: fresh large arrays would
        # be new zero pages from the kernel each time (page faults on a third of the cells' traffic)
        bufs = getattr(self._local, "bufs", None)
        if bufs is None or bufs[0].size < m * width:
            cells = max(m, _THRESHOLD_ROWS) * width
            bufs = self._local.bufs = (np.empty(cells, dtype=np.float32), np.empty(cells, dtype=bool))
        s_buf, m_buf = bufs
        rows_l, cols_l, vals_l = [], [], []
        for v0 in range(0, V, width):
            w = min(width, V - v0)
            S = self._scores(qm, v0, w, s_buf[: m * w].reshape(m, w))
            mask = m_buf[: m * w].reshape(m, w)
            np.greater_equal(thr, S, out=mask)
            flat = np.flatnonzero(m_buf[: m * w])  # 1-D: numpy's fast path (2-D nonzero is ~10x slower)
            r, cc = np.divmod(flat, w)
            rows_l.append(r)
            cols_l.append(cc + v0)
            vals_l.append(s_buf[flat])
        r = np.concatenate(rows_l)
        cols = np.concatenate(cols_l)
        v = np.concatenate(vals_l)
        counts = np.bincount(r, minlength=m)
        ids = np.empty((m, c), dtype=np.int64)
        sc = np.empty((m, c), dtype=np.float32)
        ok = counts >= c
        if ok.any():
            # group by row (a stable integer sort) into a padded (m, max count) array, then one
            # partition per row picks its c lowest (ties at the cut: any; the certificate decides)
            order = np.argsort(r, kind="stable")
            starts = np.zeros(m, dtype=np.int64)
            np.cumsum(counts[:-1], out=starts[1:])
            rs = r[order]
            pos = np.arange(rs.size) - starts[rs]
            dense_v = np.full((m, int(counts.max())), np.inf, dtype=np.float32)
            dense_c = np.zeros(dense_v.shape, dtype=np.int64)
            dense_v[rs, pos] = v[order]
            dense_c[rs, pos] = cols[order]
            sel = np.argpartition(dense_v[ok], c - 1, axis=1)[:, :c]
            ids[ok] = np.take_along_axis(dense_c[ok], sel, axis=1)
            sc[ok] = np.take_along_axis(dense_v[ok], sel, axis=1)
        if not ok.all():
            few = np.flatnonzero(~ok)
            ids[few], sc[few] = self._lowest_full(qm[few], c)
        return ids, sc
