"""L2 sensitivity of the weighted log-count vector r = w ⊙ x̂ (paper §3, Corollary 1, Claim 1).

Notation (paper Equations 2 and 5; Algorithm 1): for clamped per-user counts Δcⁿ (rows of a
users × |V| matrix), c = Σₙ Δcⁿ, N_i = #users with Δcⁿ_i > 0,

    ℓ = log(c + 1),   x̂ = ℓ − mean(ℓ),   w = min(1, S·N/C),   r = w ⊙ x̂.

The released mean is μ_ps = ρ·r + (1−ρ)·μ_p, so ‖Δμ_ps‖₂ = ρ·‖Δr‖₂ (the public μ_p is fixed).
This module computes ``γ = max_n ‖r(D) − r(D₋ₙ)‖₂`` over the users n of D:

* :func:`exact_sensitivity` — the paper's brute-force maximum (Algorithm 1, "brute-force method")
  in O(nnz) total. Removing user n with support Jₙ changes ℓ_j only for j ∈ Jₙ (by
  δ_j = ℓ_j − log(c_j − Δcⁿ_j + 1)), and the centring term by the same m = Σ_{j∈Jₙ} δ_j / |V| for
  every coordinate, so for j ∉ Jₙ the difference is −w_j·m and

      ‖Δr‖² = Σ_{j∈Jₙ} (w_j x̂_j − w₋ₙ_j (x̂_j − δ_j + m))² + m² (Σ_all w² − Σ_{j∈Jₙ} w_j²),

  with w₋ₙ_j = min(1, S(N_j − 1)/C). All users are done at once with CSR array operations,
  in chunks of rows (bounded memory), without a Python loop over users.
* :func:`claim1_bound` — Claim 1's worst-case bound, O(|V|), never below the exact value. It is
  used with the two corrections documented there.
* :func:`brute_force_sensitivity` — the literal remove-each-user-and-recompute reference,
  O(users·|V|): for tests only.

**What the sensitivity covers.** γ is a maximum over *removing one user of the given dataset D*
(the paper's adjacency, §2.1: D vs D₋ₙ). It is computed from D itself, so it is a *local*
sensitivity: it does not bound what adding an arbitrary new user would change, and σ derived from
it depends on D. Pass a data-independent bound (a number) where a worst-case guarantee over all
add/remove neighbours is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_positive
from .counting import _as_csr

__all__ = [
    "LogCountStats",
    "log_count_stats",
    "decay_weights",
    "exact_sensitivity",
    "per_user_sensitivity",
    "claim1_bound",
    "brute_force_sensitivity",
]

_CHUNK_NNZ = 1 << 22  # non-zeros per vectorized chunk (~4M: about 200 MB of float64 temporaries)


@dataclass(frozen=True)
class LogCountStats:
    """Column statistics of clamped user counts: totals ``c``, users per n-gram ``N``,
    ``ell = log(c + 1)`` and the centred ``xhat`` (Equation 2)."""

    c: np.ndarray
    N: np.ndarray
    ell: np.ndarray
    xhat: np.ndarray

    @property
    def size(self) -> int:
        return self.c.size


def log_count_stats(matrix: object) -> LogCountStats:
    """Column totals, users per n-gram and x̂ (Equation 2) of a users × |V| count matrix."""
    m = _as_csr(matrix)
    V = m.shape[1]
    c = np.bincount(m.indices, weights=m.data, minlength=V).astype(np.float64)
    N = np.bincount(m.indices, minlength=V).astype(np.int64)
    ell = np.log1p(c)
    xhat = ell - ell.mean()
    return LogCountStats(c, N, ell, xhat)


def decay_weights(N: np.ndarray, S: float, C: float) -> np.ndarray:
    """w = min(1, S·N/C) (Equation 5, the word-wise adaptive clipping of §3.1)."""
    S = check_positive("S", S)
    C = check_positive("C", C)
    return np.minimum(1.0, (S / C) * np.asarray(N, dtype=np.float64))


def _row_chunks(indptr: np.ndarray, chunk_nnz: int):
    """Row ranges [r0, r1) whose non-zeros total at most ``chunk_nnz`` (at least one row)."""
    n_rows = indptr.size - 1
    r0 = 0
    while r0 < n_rows:
        target = indptr[r0] + chunk_nnz
        r1 = int(np.searchsorted(indptr, target, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n_rows)
        yield r0, r1
        r0 = r1


def support_terms(m, st: LogCountStats, S: float, C: float, chunk_nnz: int = _CHUNK_NNZ):
    """Per-chunk pieces of r(D) − r(D₋ₙ) for the users (rows) of the clamped matrix ``m``.

    Yields ``(r0, r1, rows, cols, delta, mshift, w_minus, diff)``: rows ``r0:r1``; for each
    non-zero (local row, column), the drop δ of log(c+1), the new weight w₋ₙ and the on-support
    difference ``diff`` of r; ``mshift`` (per local row) is the change m of the centring mean, so
    the off-support difference is −w_j·m. O(nnz) in total, vectorized per chunk.
    """
    V = m.shape[1]
    w = decay_weights(st.N, S, C)
    wx = w * st.xhat
    indptr = m.indptr
    for r0, r1 in _row_chunks(indptr, chunk_nnz):
        a, b = int(indptr[r0]), int(indptr[r1])
        cols = m.indices[a:b]
        d = m.data[a:b].astype(np.float64, copy=False)
        rows = np.repeat(np.arange(r1 - r0), np.diff(indptr[r0 : r1 + 1]))
        delta = st.ell[cols] - np.log1p(st.c[cols] - d)  # change of log(c+1) on the support
        mshift = np.bincount(rows, weights=delta, minlength=r1 - r0) / V  # change of the mean
        w_minus = np.minimum(1.0, np.maximum(0.0, (S / C) * (st.N[cols] - 1.0)))
        diff = wx[cols] - w_minus * (st.xhat[cols] - delta + mshift[rows])
        yield r0, r1, rows, cols, delta, mshift, w_minus, diff


def per_user_sensitivity(matrix: object, S: float, C: float, *, stats: LogCountStats | None = None, chunk_nnz: int = _CHUNK_NNZ) -> np.ndarray:
    """‖r(D) − r(D₋ₙ)‖₂ for every user n (row) of the clamped count ``matrix``, in O(nnz).

    ``stats`` may pass precomputed :func:`log_count_stats` of the same matrix.
    """
    m = _as_csr(matrix)
    st = stats if stats is not None else log_count_stats(m)
    w = decay_weights(st.N, S, C)
    w_sq_total = float(np.dot(w, w))
    out = np.zeros(m.shape[0], dtype=np.float64)
    for r0, r1, rows, cols, _delta, mshift, _w_minus, diff in support_terms(m, st, S, C, chunk_nnz):
        w_j = w[cols]
        on_support = np.bincount(rows, weights=diff * diff, minlength=r1 - r0)
        w_sq_support = np.bincount(rows, weights=w_j * w_j, minlength=r1 - r0)
        off_support = mshift * mshift * np.maximum(w_sq_total - w_sq_support, 0.0)
        out[r0:r1] = np.sqrt(on_support + off_support)
    return out


def exact_sensitivity(matrix: object, S: float, C: float, *, stats: LogCountStats | None = None, chunk_nnz: int = _CHUNK_NNZ) -> float:
    """γ = maxₙ ‖w⊙x̂ − w₋ₙ⊙x̂₋ₙ‖₂ over the users of ``matrix`` (Corollary 1, brute force done
    exactly in O(nnz)). A local (remove-one-user-of-D) sensitivity; see the module docstring."""
    per_user = per_user_sensitivity(matrix, S, C, stats=stats, chunk_nnz=chunk_nnz)
    return float(per_user.max()) if per_user.size else 0.0


def claim1_bound(matrix_or_stats: object, S: float, C: float) -> float:
    """Claim 1's worst-case bound on γ (Appendix B), in O(|V|); never below :func:`exact_sensitivity`.

    ‖ w ⊙ L·C + (w − w⁻) ⊙ |x̂| ‖₂,  L_i = (1 − 1/|V|)/N_i + Σ_{j≠i, N_j>0} 1/(|V| N_j),

    with two corrections to the printed claim, both on the safe side or exact:
    (1) the paper's step term (S/C)·1(N ≤ C/S) is replaced by the exact step of the decay weight
    w − w⁻, w⁻ = min(1, max(0, S(N−1)/C)) (the printed indicator misses C/S < N < C/S + 1 when
    C/S is not an integer, where the step is positive); (2) n-grams no private user has (N = 0)
    are left out of L's sum (their count cannot change; the printed 1/N_j would be infinite) and
    get w = 0. Requires every non-zero count to be >= 1 (integer-like counts): the lemma uses
    c_j − Δcⁿ_j ≥ N_j − 1.
    """
    if isinstance(matrix_or_stats, LogCountStats):
        st = matrix_or_stats
    else:
        m = _as_csr(matrix_or_stats)
        if m.nnz and m.data.min() < 1:
            raise ValueError("claim1_bound needs every non-zero count >= 1 (Lemma 1); use the exact sensitivity")
        st = log_count_stats(m)
    C = check_positive("C", C)
    V = st.size
    N = st.N.astype(np.float64)
    has = N > 0
    inv = np.zeros(V)
    inv[has] = 1.0 / N[has]
    tinv = float(inv.sum())
    L = (1.0 - 1.0 / V) * inv + (tinv - inv) / V
    w = decay_weights(st.N, S, C)
    w_minus = np.minimum(1.0, np.maximum(0.0, (S / C) * (N - 1.0)))
    b = np.where(has, w * L * C + (w - w_minus) * np.abs(st.xhat), 0.0)
    return float(np.linalg.norm(b))


def brute_force_sensitivity(matrix: object, S: float, C: float) -> tuple[float, np.ndarray]:
    """Reference: remove each user, recompute c, N, x̂, w and r from scratch; O(users·|V|).

    Returns ``(max, per_user)``. For testing :func:`exact_sensitivity` on small data.
    """
    m = _as_csr(matrix)
    dense = np.asarray(m.toarray(), dtype=np.float64)

    def r_of(x: np.ndarray) -> np.ndarray:
        c = x.sum(axis=0)
        N = (x > 0).sum(axis=0)
        ell = np.log(c + 1.0)
        xhat = ell - ell.sum() / x.shape[1]
        return np.minimum(1.0, S * N / C) * xhat

    r = r_of(dense)
    per = np.array([np.linalg.norm(r - r_of(np.delete(dense, n, axis=0))) for n in range(dense.shape[0])])
    return (float(per.max()) if per.size else 0.0), per

