"""The ``radial-vickrey`` estimator: the Vickrey mechanism's N_w over the whole ε grid, exact in
the noise radius (:func:`_vickrey_curves`).

Vickrey releases the nearest or the second-nearest word to the noisy point v = φ(w) + R·u that
Madlib (or Mahalanobis) draws, R ~ Gamma(d, 1/ε) and u a random direction (Σ_λ^{1/2}·x for the
Mahalanobis noise). Along the ray φ(w) + r·u the squared distance to a word v exceeds the one to
w by ℓ_v(r) = a_v − 2·r·b_v (a_v = ‖φ_v − φ_w‖², b_v = (φ_v − φ_w)·u): a line in r. So, with
t₁ ≤ t₂ the two smallest roots a_v / (2 b_v) over b_v > 0 (v₁ the word of the first),

* for r < t₁, w is the nearest word, d₁ = r‖u‖, d₂² = r²‖u‖² + m(r) with m(r) = min_v ℓ_v(r)
  (a concave lower envelope of lines), and w is released with probability p(d₁, d₂);
* for t₁ ≤ r < t₂, w is the second-nearest, d₂ = r‖u‖, d₁² = r²‖u‖² + ℓ_{v₁}(r), released with
  probability 1 − p(d₁, d₂);
* beyond t₂, never;

p = :func:`~deniable.mechanisms.vickrey.vickrey_first_probability` (the mechanism's own rule).
At t₁ both distances are equal, so the released probability jumps from 1 − t to t there and to
0 at t₂. Per direction, N_w(ε) = (1 − t)·F_ε(t₁) + t·(F_ε(t₂) − F_ε(t₁)) + ∫ φ dF_ε, F_ε the
Gamma CDF (exact) and φ the continuous rest, integrated exactly in its piecewise-linear
interpolant on one geometric grid of radii 2 % apart shared by every word, direction and ε
(:func:`_radius_grid`; the cell that holds t₂ is cut there). The envelope m is found by probing the intersection of neighbouring envelope
lines against the whole vocabulary until no other line lies below (at most ``_ROUNDS`` rounds,
``_LINES`` lines); where probing stops early the envelope kept lies above m, which can only
raise N_w. t = 0 gives Madlib's radial estimator (:func:`~deniable.calibration.estimators.
_radial_curves`). Competitors are selected in float32 (a float32 near-tie may pick either of two
almost equal lines) and every selected line is then evaluated in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .record import _upper_bound

_RATIO = 1.02  # radius grid: cells 2 % wide
_TAIL = 1e-13  # Gamma mass left outside the grid at the grid's two ends
_ROUNDS = 3
_LINES = 8


def _radius_grid(dim: int, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(nodes, F, Wn, W0)`` for integrating a function of the noise radius against the
    Gamma(d, 1/ε) law of every grid ε: radii 0 < r₁ < … (geometric, ratio ``_RATIO``) covering
    all but a ``_TAIL`` of each law, ``F[j, e] = P(R_ε ≤ nodes[j])``, and node weights such that
    ``Σ_k φ(nodes[k]) Wn[k]`` is the exact integral of φ's piecewise-linear interpolant (cell
    j's weights: W0 to its left node, W1 = ∫(r − r_j) dF / Δr to its right, from the first
    moment ∫ r dF = (d/ε)·ΔP(d + 1, ε·r))."""
    from scipy.special import gammainc, gammainccinv, gammaincinv

    lo = float(gammaincinv(dim, _TAIL)) / float(epsilons.max())
    hi = float(gammainccinv(dim, _TAIL)) / float(epsilons.min())
    n = max(2, int(math.ceil(math.log(hi / lo) / math.log(_RATIO))) + 1)
    nodes = np.concatenate([[0.0], np.geomspace(lo, hi, n)])
    F = gammainc(dim, epsilons[None, :] * nodes[:, None])
    dF = np.diff(F, axis=0)
    moment = (dim / epsilons)[None, :] * np.diff(gammainc(dim + 1, epsilons[None, :] * nodes[:, None]), axis=0)
    W1 = np.clip((moment - nodes[:-1, None] * dF) / np.diff(nodes)[:, None], 0.0, np.maximum(dF, 0.0))
    W0 = np.vstack([dF - W1, np.zeros((1, epsilons.size))])  # the last node starts no cell
    Wn = W0 + np.vstack([np.zeros((1, epsilons.size)), W1])
    return nodes, F, Wn, W0


def _released(r: np.ndarray, s: np.ndarray, t1: np.ndarray, t2: np.ndarray, env_a: np.ndarray, env_b: np.ndarray,
              a1: np.ndarray, b1: np.ndarray, t: float) -> np.ndarray:
    """φ(r): the probability that w is released at radius ``r`` along each pair's direction,
    less 1 − t (before t₁) or t (from t₁ to t₂), 0 beyond t₂. ``r`` is ``(pairs, k)``; the other
    arrays are per pair (``env_a``, ``env_b``: ``(pairs, lines)`` envelope lines, padded with
    a = inf, b = 0)."""
    from ..mechanisms.vickrey import vickrey_first_probability

    rs = r * s[:, None]
    rs2 = rs * rs
    env = np.full(r.shape, np.inf)
    for k in range(int(np.isfinite(env_a).sum(axis=1).max())):
        np.minimum(env, env_a[:, k, None] - 2.0 * env_b[:, k, None] * r, out=env)
    first = vickrey_first_probability(rs, np.sqrt(rs2 + np.maximum(env, 0.0)), t) - (1.0 - t)
    with np.errstate(invalid="ignore"):  # a1 = inf where t₁ = inf: never read
        d1 = np.sqrt(np.maximum(rs2 + (a1[:, None] - 2.0 * b1[:, None] * r), 0.0))
    second = (1.0 - vickrey_first_probability(d1, rs, t)) - t
    return np.where(r < t1[:, None], first, np.where(r < t2[:, None], second, 0.0))


def _exact_lines(X: np.ndarray, w: np.ndarray, lines: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``(a, b)`` of the lines ``lines`` (vocabulary ids, −1 = none: a = inf, b = 0) for
    words ``w`` and direction rows ``U`` (one per pair; ``lines`` is ``(pairs, k)``)."""
    ok = lines >= 0
    diff = X[np.where(ok, lines, 0)].astype(np.float64) - X[w].astype(np.float64)[:, None, :]
    a = np.where(ok, np.einsum("pkd,pkd->pk", diff, diff), np.inf)
    b = np.where(ok, np.einsum("pkd,pd->pk", diff, U), 0.0)
    return a, b


def _envelope(A: np.ndarray, B: np.ndarray, wi: np.ndarray, ui: np.ndarray, left: np.ndarray, right: np.ndarray,
              rows: int = 256) -> np.ndarray:
    """Member lines ``(pairs, _LINES)`` (−1 padded) of m(r) = min_v A[wi, v] − 2 r B[wi, ui, v] on
    [0, root of ``right``]: ``left`` (the line at r = 0) and ``right`` (the line at the end), and
    every line found below the envelope at the intersection of two neighbouring members. Where a
    probe finds no line below, that stretch of the envelope is exact (m is concave and equals
    both lines at their ends). A and B are float32 blocks (``(words, V)``, ``(words, D, V)``)."""
    n = left.size
    members = np.full((n, _LINES), -1, dtype=np.int64)
    members[:, 0] = left
    members[:, 1] = np.where(right != left, right, -1)
    count = np.where(right != left, 2, 1)
    seg = np.flatnonzero(right != left)
    sl, sr = left[seg], right[seg]
    for _ in range(_ROUNDS):
        if seg.size == 0:
            break
        w_, u_ = wi[seg], ui[seg]
        al, ar = A[w_, sl].astype(np.float64), A[w_, sr].astype(np.float64)
        bl, br = B[w_, u_, sl].astype(np.float64), B[w_, u_, sr].astype(np.float64)
        den = 2.0 * (br - bl)
        with np.errstate(divide="ignore", invalid="ignore"):
            rr = np.where(den > 0, (ar - al) / den, -1.0)
        live = rr > 0
        seg, sl, sr, rr, w_, u_, al, bl = seg[live], sl[live], sr[live], rr[live], w_[live], u_[live], al[live], bl[live]
        best = np.empty(seg.size, dtype=np.int64)
        low = np.empty(seg.size)
        for s in range(0, seg.size, rows):
            c = slice(s, s + rows)
            vals = B[w_[c], u_[c]]  # (rows, V) copy, turned in place into a_v − 2 r b_v
            vals *= (-2.0 * rr[c, None]).astype(np.float32)
            for i in np.unique(w_[c]):
                vals[w_[c] == i] += A[i]
            best[c] = np.argmin(vals, axis=1)
            low[c] = vals[np.arange(best[c].size), best[c]]
        at = al - 2.0 * rr * bl
        new = (low < at - 1e-5 * np.maximum(np.abs(al) + np.abs(2.0 * rr * bl), 1e-30)) & (best != sl) & (best != sr)
        new &= count[seg] < _LINES
        p = seg[new]
        members[p, count[p]] = best[new]
        count[p] += 1
        seg = np.concatenate([p, p])
        sl, sr = np.concatenate([sl[new], best[new]]), np.concatenate([best[new], sr[new]])
    return members


def _block_geometry(X: np.ndarray, sq: np.ndarray, P: np.ndarray, U: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Per pair (word of ``b`` × direction row of ``U``): roots t₁ ≤ t₂, the float64 line of v₁
    and the envelope lines before t₁ (see the module docstring)."""
    m, D = b.size, U.shape[0]
    A = X[b] @ X.T  # (m, V): squared distances; the word itself never competes
    A *= -2.0
    A += sq[None, :]
    A += sq[b][:, None]
    np.maximum(A, 0.0, out=A)
    A[np.arange(m), b] = np.inf
    B = P[None, :, :] - P[:, b].T[:, :, None]  # (m, D, V): b_v = (φ_v − φ_w)·u
    with np.errstate(divide="ignore"):
        Q = B * np.minimum(1.0 / A, np.float32(1e30))[:, None, :]  # b_v / a_v: root 1 / (2 Q)
    v1 = Q.argmax(axis=2)
    q1 = np.take_along_axis(Q, v1[:, :, None], axis=2)[:, :, 0]
    np.put_along_axis(Q, v1[:, :, None], -np.inf, axis=2)
    v2 = Q.argmax(axis=2)
    q2 = np.take_along_axis(Q, v2[:, :, None], axis=2)[:, :, 0]
    wi, ui = np.repeat(np.arange(m), D), np.tile(np.arange(D), m)
    v1, v2, q1, q2 = v1.ravel(), v2.ravel(), q1.ravel(), q2.ravel()
    far = v1.copy()  # the envelope's last line: v₁, or where w's cell is unbounded along u, the flattest line
    for p in np.flatnonzero(q1 <= 0):
        row = B[wi[p], ui[p]].copy()
        row[b[wi[p]]] = -np.inf
        far[p] = int(row.argmax())
    near = np.argmin(A, axis=1)[wi]
    w, Up = b[wi], U[ui].astype(np.float64)
    ab = _exact_lines(X, w, np.stack([np.where(q1 > 0, v1, -1), np.where(q2 > 0, v2, -1)], axis=1), Up)
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = np.where(ab[1] > 0, ab[0] / (2.0 * ab[1]), np.inf)
    t1 = roots[:, 0]
    members = _envelope(A, B, wi, ui, near, far)
    env_a, env_b = _exact_lines(X, w, members, Up)
    t2 = np.maximum(roots[:, 1], t1)
    bounded = np.isfinite(t1)  # else v₁'s line is never read: keep it finite
    a1, b1 = np.where(bounded, ab[0][:, 0], 0.0), np.where(bounded, ab[1][:, 0], 0.0)
    return {"t1": t1, "t2": t2, "a1": a1, "b1": b1, "env_a": env_a, "env_b": env_b, "ui": ui}


def _block_sums(g: dict[str, np.ndarray], s_u: np.ndarray, t: float, dim: int, epsilons: np.ndarray,
                grid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], m: int, D: int, chunk: int = 512) -> np.ndarray:
    """Σ over directions of each word's released probability at every grid ε, ``(m, E)``: the
    exact part (1 − t)·F(t₁) + t·(F(t₂) − F(t₁)) plus ∫ φ dF over the grid's cells below t₂
    (pairs in chunks of similar length) and the part of t₂'s cell below t₂."""
    from scipy.special import gammainc

    nodes, F, Wn, W0 = grid
    t1, t2, s = g["t1"], g["t2"], s_u[g["ui"]]
    F1 = gammainc(dim, np.minimum(epsilons[None, :] * t1[:, None], 1e300))
    F2 = gammainc(dim, np.minimum(epsilons[None, :] * t2[:, None], 1e300))
    total = (1.0 - t) * F1 + t * (F2 - F1)
    J = nodes.size - 1
    j2 = np.minimum(np.searchsorted(nodes, t2, side="right") - 1, J)  # last node ≤ t₂ (J: beyond the grid)
    order = np.argsort(j2, kind="stable")
    for c in range(0, order.size, chunk):
        p = order[c : c + chunk]
        K = int(j2[p].max()) + 1
        phi = _released(np.broadcast_to(nodes[:K], (p.size, K)), s[p], t1[p], t2[p], g["env_a"][p], g["env_b"][p],
                        g["a1"][p], g["b1"][p], t)
        phi[np.arange(K)[None, :] > j2[p][:, None]] = 0.0
        last = phi[np.arange(p.size), j2[p]]
        total[p] += phi @ Wn[:K] - last[:, None] * W0[j2[p]]
    cut = j2 < J
    if cut.any():  # the part of t₂'s cell below t₂
        p = np.flatnonzero(cut)
        r = 0.5 * (nodes[j2[p]] + t2[p])
        part = _released(r[:, None], s[p], t1[p], t2[p], g["env_a"][p], g["env_b"][p], g["a1"][p], g["b1"][p], t)
        total[p] += part * (F2[p] - F[j2[p]])
    return np.clip(total.reshape(m, D, -1).sum(axis=1), 0.0, D)


def _vickrey_curves(mech: Any, ids: np.ndarray, epsilons: np.ndarray, directions: np.ndarray, confidence: float,
                    progress: Callable[[int], None] | None, *, memory_elements: int = 1 << 22) -> tuple[np.ndarray, np.ndarray]:
    """``(n_w, upper)`` of the Vickrey mechanism ``mech`` for the words ``ids`` over ``epsilons``
    from the noise directions ``directions`` (rows, as
    :func:`~deniable.calibration.estimators._radial_directions` gives them); ``upper`` is the
    one-sided Wilson bound at ``confidence`` over the directions (each direction's value is a
    probability)."""
    X = np.asarray(mech.embedding.vectors, dtype=np.float32)
    V, dim = X.shape
    D = directions.shape[0]
    if V == 1:
        ones = np.ones((ids.size, epsilons.size))
        return ones, ones.copy()
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64).astype(np.float32)
    P = np.ascontiguousarray((X @ directions.T.astype(np.float32)).T)  # (D, V)
    s_u = np.linalg.norm(directions, axis=1)
    grid = _radius_grid(dim, epsilons)
    sums = np.empty((ids.size, epsilons.size))
    block = max(1, memory_elements // (V * D))
    for s in range(0, ids.size, block):
        b = ids[s : s + block]
        g = _block_geometry(X, sq, P, directions, b)
        sums[s : s + b.size] = _block_sums(g, s_u, float(mech.t), dim, epsilons, grid, b.size, D)
        if progress is not None:
            progress(b.size)
    return sums / D, _upper_bound(sums, D, confidence)
