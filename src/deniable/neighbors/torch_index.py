"""The torch engine ``"torch"``: exact Euclidean nearest neighbours on a torch device (GPU or CPU).

Scores ``‖e‖² − 2 q·e`` come from one matrix product per block (fp32 by default; ``"tf32"`` or
``"bf16"`` opt-in), and each query keeps its best computed scores. The rounding error of a score
is bounded by :func:`~deniable.neighbors.base.score_error_bound` (the one bound of every exact
engine, here with the operand and output rounding of the chosen precision): a 1-NN query whose
two best scores lie within twice that bound, or a k-NN query whose k-th and (k+1)-th do, is
re-ranked in float64 (float64 scores with their own bound, then the exact ‖q − e‖ of the
remaining candidates; ties to the lowest id). So the answer is the float64 brute force of
:mod:`deniable.neighbors.base` in every precision: the precision only changes how many queries
need the float64 re-rank, i.e. speed. ``exact=False`` skips the check and returns the raw
low-precision ranking (approximate). On CUDA, bfloat16 products are summed in float32 during the
search (torch's reduced-precision bfloat16 reduction is switched off for the call), as the bound
assumes.

Requires torch (``pip install "deniable[torch]"``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._optional import import_optional
from .._validation import check_int
from .base import U64, score_error_bound

__all__ = ["PRECISIONS", "TorchEuclideanIndex", "resolve_device", "matmul_precision"]

#: Matrix-product precisions of the Euclidean search (``"fp32"`` default).
PRECISIONS = ("fp32", "tf32", "bf16")
# Relative error of an operand converted for the matrix product (conservative: truncation) and
# of the product's output format.
_INPUT_ERR = {"fp32": 0.0, "tf32": 2.0**-10, "bf16": 2.0**-7}
_OUTPUT_ERR = {"fp32": 0.0, "tf32": 0.0, "bf16": 2.0**-7}
_DEFAULT_MEMORY = 1 << 30


def _torch() -> Any:
    return import_optional("torch", purpose="the torch nearest-neighbour engine")


def resolve_device(device: Any) -> Any:
    """A ``torch.device``; raises with the fix when CUDA is asked for but unavailable."""
    torch = _torch()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'cuda', 'cuda:N' or 'cpu', got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device={device!r} but CUDA is not available to torch {torch.__version__} "
            f"(built for CUDA {torch.version.cuda}); run on a machine with an NVIDIA GPU and a CUDA build of torch, or use device='cpu'"
        )
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda', 'cuda:N' or 'cpu', got {device!r}")
    return dev


@contextlib.contextmanager
def matmul_precision(level: str) -> Iterator[None]:
    """Temporarily set torch's float32 matrix-product precision (``"highest"``: true fp32) and
    make CUDA sum bfloat16 products in float32 (no reduced-precision reduction), as the error
    bound assumes."""
    torch = _torch()
    old = torch.get_float32_matmul_precision()
    cuda_mm: Any = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
    old_bf16 = getattr(cuda_mm, "allow_bf16_reduced_precision_reduction", None)
    if old != level:
        torch.set_float32_matmul_precision(level)
    if old_bf16:
        cuda_mm.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        if old != level:
            torch.set_float32_matmul_precision(old)
        if old_bf16:
            cuda_mm.allow_bf16_reduced_precision_reduction = old_bf16


class TorchEuclideanIndex:
    """Exact Euclidean 1-NN and k-NN on a torch device (float64-exact, ties to the lowest id; see
    the module docs and :mod:`deniable.neighbors.base`).

    Parameters
    ----------
    vectors
        ``(V, d)`` vocabulary vectors.
    device
        ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
    precision
        ``"fp32"`` (default), ``"tf32"`` or ``"bf16"``: the format of the scoring matrix product.
    exact
        Re-rank uncertain queries in float64 (default), so the result is exact in every precision.
    memory_bytes
        Bound on the score buffer of one block (default 1 GiB).
    """

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        device: Any = "cuda",
        precision: str = "fp32",
        exact: bool = True,
        memory_bytes: int = _DEFAULT_MEMORY,
    ) -> None:
        torch = _torch()
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        v = np.array(vectors, dtype=np.float32, order="C", copy=True)  # torch needs a writable array
        if v.ndim != 2 or v.shape[0] == 0:
            raise ValueError(f"vectors must be a non-empty 2-D array, got shape {v.shape}")
        self.device = resolve_device(device)
        self.precision = precision
        self.exact = bool(exact)
        self.memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
        self.size, self.dim = (int(s) for s in v.shape)
        e2 = np.einsum("ij,ij->i", v.astype(np.float64), v.astype(np.float64))
        self._max_norm = float(np.sqrt(e2.max()))
        self.vectors = torch.from_numpy(v).to(self.device)
        self._e2 = torch.from_numpy(e2.astype(np.float32)).to(self.device)
        self._low: Any = self.vectors.to(torch.bfloat16) if precision == "bf16" else None
        #: Counters: queries searched and queries re-ranked in float64.
        self.stats = {"queries": 0, "reranked": 0}

    def _blocks(self, n: int) -> tuple[int, int]:
        cells = max(1, self.memory_bytes // 8)  # fp32 scores plus top-k temporaries
        qb = int(min(max(cells // self.size, 64), 16384))
        qb = max(1, min(qb, n))
        vb = int(min(self.size, max(2, cells // qb)))
        return qb, vb

    def _query_blocks(self, q: Any) -> Iterator[tuple[int, Any, Any, int]]:
        """``(start, queries, their bf16 copy or None, vocabulary block)`` per block of ``q``, with
        torch's float32 matrix-product precision set for this index during the iteration."""
        torch = _torch()
        n = int(q.shape[0])
        qb, vb = self._blocks(n)
        with matmul_precision("highest" if self.precision == "fp32" else "high"):
            for s in range(0, n, qb):
                qq = q[s : s + qb]
                yield s, qq, (qq.to(torch.bfloat16) if self._low is not None else None), vb

    def _scores(self, q: Any, q_low: Any, v0: int, w: int) -> Any:
        torch = _torch()
        if q_low is not None:
            dot = (q_low @ self._low[v0 : v0 + w].T).float()
            return torch.add(self._e2[v0 : v0 + w], dot, alpha=-2.0)
        return torch.addmm(self._e2[v0 : v0 + w], q, self.vectors[v0 : v0 + w].T, beta=1.0, alpha=-2.0)

    def score_error_bound(self, qnorm: Any) -> Any:
        """Bound on |computed score − exact score| (plus the float64 re-measurement's slack) for
        queries of norm ``qnorm`` (float64 tensor) against any vocabulary vector:
        :func:`~deniable.neighbors.base.score_error_bound` with this precision's operand
        conversion and output rounding and a float32 accumulation."""
        return score_error_bound(qnorm.double(), self._max_norm, self.dim, operand=_INPUT_ERR[self.precision], output=_OUTPUT_ERR[self.precision])

    def _query_norms(self, q: Any) -> Any:
        torch = _torch()
        return torch.linalg.vector_norm(q.double(), dim=1)

    def search(self, queries: np.ndarray) -> np.ndarray:
        """Nearest vocabulary id for each query row (numpy in, numpy out)."""
        torch = _torch()
        q = np.asarray(queries)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {q.shape}")
        t = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32)).to(self.device)
        return self.search_tensor(t).cpu().numpy()

    def search_tensor(self, q: Any) -> Any:
        """Nearest vocabulary id for each row of the float32 device tensor ``q`` (int64 tensor)."""
        torch = _torch()
        n = int(q.shape[0])
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        if n == 0:
            return out
        V = self.size
        for s, qq, q_low, vb in self._query_blocks(q):
            top_v: Any = None
            top_i: Any = None
            for v0 in range(0, V, vb):
                w = min(vb, V - v0)
                sc = self._scores(qq, q_low, v0, w)
                val, idx = sc.min(dim=1, keepdim=True)
                if self.exact and w > 1:
                    # the runner-up score: mask the winner, one more pass (cheaper than topk)
                    sc.scatter_(1, idx, math.inf)
                    val = torch.cat([val, sc.amin(dim=1, keepdim=True)], 1)
                    idx = torch.cat([idx, idx], 1)  # the runner-up's id is never used
                idx = idx + v0
                if top_v is None:
                    top_v, top_i = val, idx
                else:
                    cv, ci = torch.cat([top_v, val], 1), torch.cat([top_i, idx], 1)
                    k = 2 if self.exact else 1
                    top_v, pos = torch.topk(cv, min(k, cv.shape[1]), dim=1, largest=False, sorted=True)
                    top_i = torch.gather(ci, 1, pos)
            best = top_i[:, 0].clone()
            if self.exact and top_v.shape[1] > 1:
                tol = self.score_error_bound(self._query_norms(qq))
                unsure = (top_v[:, 1] - top_v[:, 0]).double() <= 2 * tol
                rows = torch.nonzero(unsure).flatten()
                if rows.numel():
                    if vb == V:  # the block's scores are at hand: re-rank only the candidates
                        thr = (top_v[rows, 0].double() + 2 * tol[rows]).float()
                        thr = torch.nextafter(thr, torch.full_like(thr, math.inf))
                        best[rows] = self._rerank_candidates(qq[rows], sc[rows], thr, best[rows])
                    else:
                        best[rows] = self._rerank(qq[rows])
                    self.stats["reranked"] += int(rows.numel())
            out[s : s + qq.shape[0]] = best
        self.stats["queries"] += n
        return out

    def knn(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids (int64) and their float64 Euclidean distances, nearest first, ties
        to the lowest id (numpy in, numpy out; ``k`` is clipped to the vocabulary size)."""
        torch = _torch()
        q = np.asarray(queries)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {q.shape}")
        t = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32)).to(self.device)
        ids, dist = self.knn_tensor(t, check_int("k", k, minimum=1))
        return ids.cpu().numpy(), dist.cpu().numpy()

    def knn_tensor(self, q: Any, k: int) -> tuple[Any, Any]:
        """The ``k`` nearest vocabulary ids of each row of the float32 device tensor ``q`` and
        their float64 Euclidean distances, nearest first (ties: lowest id), as ``(n, k)`` tensors.

        Per block the k + 1 best computed scores are kept. The computed top k are the exact k
        nearest when the (k+1)-th score exceeds the k-th by more than twice the error bound (every
        other id is then strictly farther, also in float64); other queries are re-ranked in
        float64 (:meth:`_rerank_k`)."""
        torch = _torch()
        n, V = int(q.shape[0]), self.size
        k = min(int(k), V)
        ids = torch.empty((n, k), dtype=torch.int64, device=self.device)
        dist = torch.empty((n, k), dtype=torch.float64, device=self.device)
        if n == 0:
            return ids, dist
        kk = min(k + 1, V)
        for s, qq, q_low, vb in self._query_blocks(q):
            top_v: Any = None
            top_i: Any = None
            for v0 in range(0, V, vb):
                w = min(vb, V - v0)
                val, idx = torch.topk(self._scores(qq, q_low, v0, w), min(kk, w), dim=1, largest=False, sorted=True)
                idx = idx + v0
                if top_v is not None:
                    val, pos = torch.topk(torch.cat([top_v, val], 1), min(kk, top_v.shape[1] + val.shape[1]), dim=1, largest=False, sorted=True)
                    idx = torch.gather(torch.cat([top_i, idx], 1), 1, pos)
                top_v, top_i = val, idx
            cand = top_i[:, :k].clone()
            diff = qq[:, None, :].double() - self.vectors[cand].double()
            d = torch.sqrt((diff * diff).sum(2))
            if self.exact and kk > k:
                tol = self.score_error_bound(self._query_norms(qq))
                rows = torch.nonzero((top_v[:, k] - top_v[:, k - 1]).double() <= 2 * tol).flatten()
                if rows.numel():
                    cand[rows], d[rows] = self._rerank_k(qq[rows], k)
                    self.stats["reranked"] += int(rows.numel())
            # order each row by (distance, id): stable sorts, least significant key first
            o = torch.argsort(cand, dim=1, stable=True)
            cand, d = torch.gather(cand, 1, o), torch.gather(d, 1, o)
            o = torch.argsort(d, dim=1, stable=True)
            ids[s : s + qq.shape[0]] = torch.gather(cand, 1, o)
            dist[s : s + qq.shape[0]] = torch.gather(d, 1, o)
        self.stats["queries"] += n
        return ids, dist

    def two_nearest_tensor(self, q: Any) -> tuple[Any, Any]:
        """:meth:`knn_tensor` with k = 2 (Vickrey's two nearest words); needs at least two
        vocabulary vectors."""
        if self.size < 2:
            raise ValueError("the two nearest words need a vocabulary of at least two vectors")
        return self.knn_tensor(q, 2)

    def _f64_tol(self, qn: Any) -> Any:
        """Bound on the rounding error of a float64 score ``‖e‖² − 2q·e`` (float64 products and
        sums, ‖e‖² summed in float64) for queries of norm ``qn``, with the re-measurement's slack."""
        return score_error_bound(qn, self._max_norm, self.dim, accumulate=U64, norm=(self.dim + 2) * U64)

    def _f64_scores(self, q64: Any, v0: int, w: int) -> Any:
        """Float64 ``‖e‖² − 2q·e`` of the vectors ``v0 .. v0+w`` (``‖e‖²`` in float64 from the float32 vectors)."""
        torch = _torch()
        blk = self.vectors[v0 : v0 + w].double()
        return torch.addmm((blk * blk).sum(1), q64, blk.T, beta=1.0, alpha=-2.0)

    def _rerank_k(self, q: Any, k: int) -> tuple[Any, Any]:
        """Float64 ``k`` nearest of each row of ``q`` (``k`` ≤ V), nearest first, ties to the lowest
        id: ids and distances, ``(f, k)``. Pass 1 finds each row's k-th best float64 score s_k;
        every id that can be among the exact k nearest scores at most s_k + 2·tol (k ids have
        exact scores ≤ s_k + tol), so pass 2 collects those candidates and re-measures them as
        ‖q − e‖²."""
        torch = _torch()
        f, V = int(q.shape[0]), self.size
        q64 = q.double()
        tol = self._f64_tol(self._query_norms(q64))
        vb = int(min(V, max(k, (self.memory_bytes // 16) // max(f, 1))))
        top: Any = None
        for v0 in range(0, V, vb):
            w = min(vb, V - v0)
            val = torch.topk(self._f64_scores(q64, v0, w), min(k, w), dim=1, largest=False).values
            top = val if top is None else torch.topk(torch.cat([top, val], 1), min(k, top.shape[1] + w), dim=1, largest=False).values
        thr = (top.max(dim=1).values + 2 * tol)[:, None]
        rows_l, ids_l = [], []
        for v0 in range(0, V, vb):
            r, c = torch.nonzero(self._f64_scores(q64, v0, min(vb, V - v0)) <= thr, as_tuple=True)
            rows_l.append(r)
            ids_l.append(c + v0)
        rows, ids = torch.cat(rows_l), torch.cat(ids_l)
        diff = q64[rows] - self.vectors[ids].double()
        d = torch.sqrt((diff * diff).sum(1))
        # order candidates by (row, distance, id): stable sorts, least significant key first
        for key in range(3):
            o = torch.argsort((ids, d, rows)[key], stable=True)
            rows, ids, d = rows[o], ids[o], d[o]
        counts = torch.bincount(rows, minlength=f)
        pick = (torch.cumsum(counts, 0) - counts)[:, None] + torch.arange(k, device=self.device)
        return ids[pick], d[pick]

    def _rerank_candidates(self, q: Any, sc: Any, thr: Any, winner: Any) -> Any:
        """Float64 nearest neighbour of each row of ``q`` among the ids whose computed score is
        at most ``thr`` (the winner's column of ``sc`` was masked, so ``winner`` is added).
        Every id that can be the exact nearest is a candidate: its computed score is at most
        its exact score + E <= the winner's exact score + E <= the winner's computed score + 2E."""
        torch = _torch()
        f = int(q.shape[0])
        r, c = torch.nonzero(sc <= thr[:, None], as_tuple=True)
        rows = torch.cat([torch.arange(f, device=self.device), r])
        ids = torch.cat([winner, c])
        d2 = torch.empty(rows.shape[0], dtype=torch.float64, device=self.device)
        step = max(1, (self.memory_bytes // 4) // (8 * self.dim))
        for a in range(0, rows.shape[0], step):
            diff = q[rows[a : a + step]].double() - self.vectors[ids[a : a + step]].double()
            d2[a : a + step] = (diff * diff).sum(1)
        return _lowest_id_of_min(f, rows, ids, torch.sqrt(d2), self.size, self.device)

    def _rerank(self, q: Any) -> Any:
        """Float64 nearest neighbour of each row of ``q`` (ties: lowest id)."""
        return self._rerank_k(q, 1)[0][:, 0]


def _lowest_id_of_min(f: int, rows: Any, ids: Any, d: Any, V: int, device: Any) -> Any:
    """Per row (0..f-1) of the (rows, ids, distance) candidate triples: the lowest id of least distance."""
    torch = _torch()
    rmin = torch.full((f,), math.inf, dtype=torch.float64, device=device).scatter_reduce(0, rows, d, "amin")
    is_best = d == rmin[rows]
    pick = torch.full((f,), V, dtype=torch.int64, device=device)
    return pick.scatter_reduce(0, rows[is_best], ids[is_best], "amin")
