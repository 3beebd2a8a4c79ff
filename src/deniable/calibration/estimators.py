"""Estimators of N_w = Pr[M(w) = w] over an ε grid and the screening that picks which words get
the full measurement (the methods: :mod:`deniable.calibration.targets`).

Each ``_*_curves`` function returns ``(words, epsilons)`` arrays for the given vocabulary ids:
``kernel`` (TEM, exact and rounded up), ``radial`` (Madlib, Mahalanobis: exact in the noise
radius, averaged over directions), ``exact`` (``probabilities`` or ``self_probabilities``) and
``sampled`` (draws at grid points); ``flips`` (BRR) is in :mod:`deniable.calibration.flips`,
``radial-vickrey`` (Vickrey) in :mod:`deniable.calibration.two_nearest`. Which one a mechanism
uses is its own ``calibration_estimator()``.
:func:`_screened` and :func:`refine_worst` screen every word coarsely and refine the riskiest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .flips import _exact_knn
from .record import _upper_bound

_PER_EPS = 3


def _bar(total: int, progress: Any, desc: str) -> Any:
    from .._progress import progress_bar

    return progress_bar(total, desc, progress)


def _radial_directions(mech: Any, n: int, gen: np.random.Generator) -> np.ndarray | None:
    """Noise directions u (rows) such that the mechanism's noise is R·u with R ~ Gamma(dim, 1/ε):
    uniform on the sphere, times Σ_λ^{1/2} for the Mahalanobis noise (Madlib, Mahalanobis and
    Vickrey); None for other mechanisms. Whether the ``radial`` estimators apply to an instance
    (an exact search over every word) is its :meth:`~deniable.mechanisms.base.Mechanism.
    calibration_estimator`."""
    from ..mechanisms.madlib import Madlib
    from ..mechanisms.mahalanobis import Mahalanobis

    if not isinstance(mech, Madlib):
        return None
    d = mech.embedding.dim
    u = gen.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    if isinstance(mech, Mahalanobis) and mech.lam > 0:
        u = u @ mech._sqrt
    return u


def radial_edges(vectors: np.ndarray, ids: np.ndarray, directions: np.ndarray, *,
                 progress: Callable[[int], None] | None = None, backend: str = "numpy", memory_elements: int = 1 << 22) -> np.ndarray:
    """t_w(u) for each word of ``ids`` and each direction row u: the largest t with
    φ(w) + t·u still in w's (Euclidean) Voronoi cell, i.e. min over v with (φ_v − φ_w)·u > 0 of
    ‖φ_v − φ_w‖² / (2 (φ_v − φ_w)·u) (inf when w's cell is unbounded along u). Exact over the
    whole vocabulary; ``(len(ids), len(directions))`` float64. Works on blocks of words of about
    ``memory_elements`` (words × vocabulary × directions) float32 values."""
    if backend == "torch":
        return _radial_edges_torch(vectors, ids, directions, progress=progress)
    # min_v ‖Δ_v‖² / (2 Δ_v·u) over Δ_v·u > 0 is 1 / (2 max_v Δ_v·u / ‖Δ_v‖²) when that max is
    # > 0: three passes over the (words, directions, vocabulary) block and no masking (4× faster
    # than dividing and masking). Arithmetic is float32; t is rounded up by _T_MARGIN (relative),
    # far above float32 error, so rounding never under-states N_w = Pr[R ≤ t].
    X = np.asarray(vectors, dtype=np.float32)
    V = X.shape[0]
    D = directions.shape[0]
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64).astype(np.float32)
    P = np.ascontiguousarray((X @ directions.T.astype(np.float32)).T)  # (D, V)
    out = np.empty((ids.size, D))
    block = max(1, memory_elements // (V * D))
    buf = np.empty((min(block, max(ids.size, 1)), D, V), dtype=np.float32)
    for s in range(0, ids.size, block):
        b = ids[s : s + block]
        m = b.size
        inv = X[b] @ X.T  # (b, V) -> squared distances -> their inverses
        inv *= -2.0
        inv += sq[None, :]
        inv += sq[b][:, None]
        np.maximum(inv, 0.0, out=inv)
        with np.errstate(divide="ignore"):
            np.divide(1.0, inv, out=inv)
        np.minimum(inv, np.float32(1e30), out=inv)  # a duplicate vector: huge but finite weight
        inv[np.arange(m), b] = 0.0  # the word itself never competes
        t = buf[:m]
        np.subtract(P[None, :, :], P[:, b].T[:, :, None], out=t)  # (b, D, V): Δ_v·u
        t *= inv[:, None, :]
        mx = t.max(axis=2).astype(np.float64)
        with np.errstate(divide="ignore"):
            out[s : s + m] = np.where(mx > 0, (0.5 * (1.0 + _T_MARGIN)) / np.where(mx > 0, mx, 1.0), np.inf)
        if progress is not None:
            progress(m)
    return out


_T_MARGIN = 1e-4


def _radial_edges_torch(vectors: np.ndarray, ids: np.ndarray, directions: np.ndarray, *, progress: Any = None) -> np.ndarray:
    from .._optional import import_optional

    torch = import_optional("torch", purpose="the torch backend of the radial calibration")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    X = torch.as_tensor(np.asarray(vectors, dtype=np.float32), device=dev)
    sq = (X.double() ** 2).sum(1)
    P = X @ torch.as_tensor(directions.T.astype(np.float32), device=dev)
    out = np.empty((ids.size, directions.shape[0]))
    block = 64
    for s in range(0, ids.size, block):
        b = torch.as_tensor(ids[s : s + block], device=dev)
        num = torch.clamp(sq[b, None] + sq[None, :] - 2.0 * (X[b] @ X.T).double(), min=0).float()  # (b, V)
        den = 2.0 * (P[None, :, :] - P[b][:, None, :])  # (b, V, D)
        r = torch.where(den > 0, num[:, :, None] / den, torch.full_like(den, float("inf")))
        r[torch.arange(b.numel(), device=dev), b] = float("inf")
        out[s : s + b.numel()] = r.min(dim=1).values.double().cpu().numpy()
        if progress is not None:
            progress(int(b.numel()))
    return out


def _radial_curves(mech: Any, ids: np.ndarray, epsilons: np.ndarray, directions: np.ndarray, confidence: float,
                   progress: Callable[[int], None] | None, backend: str) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import gammainc

    d = mech.embedding.dim
    t = radial_edges(mech.embedding.vectors, ids, directions, progress=progress, backend=backend)
    n_w = np.empty((ids.size, epsilons.size))
    sums = np.empty_like(n_w)
    D = directions.shape[0]
    for j, e in enumerate(epsilons):
        f = gammainc(d, np.minimum(e * t, 1e300))  # Pr[Gamma(d, 1/ε) <= t] = P(d, ε t)
        sums[:, j] = f.sum(axis=1)
        n_w[:, j] = sums[:, j] / D
    return n_w, _upper_bound(sums, D, confidence)


def _kernel_curves(factory: Callable[[float], Any], probe: Any, ids: np.ndarray, epsilons: np.ndarray, *, bins: int = 4096,
                   progress: Callable[[int], None] | None, block: int = 256) -> tuple[np.ndarray, dict[str, Any]]:
    """TEM: N_w = 1 / Σ_y exp(−(ε/2)·min(d(w, y), γ)) from per-word histograms of the distances,
    every distance rounded *up* to its bin's upper edge (plus a float32 margin), so N_w is never
    under-estimated; the over-estimate factor is at most exp((ε/2)·(bin width + margin))."""
    X = np.asarray(probe.embedding.vectors, dtype=np.float32)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    norms = np.sqrt(sq)
    dmax = 2.0 * float(norms.max()) + 1e-6
    width = dmax / bins
    margin = 1e-3 * math.sqrt(float(sq.max()))  # float32 Gram rounding in d, generously
    hi = (np.arange(bins) + 1) * width + margin
    gammas = np.array([factory(float(e)).gamma for e in epsilons])
    W = np.exp(-(epsilons[None, :] / 2.0) * np.minimum(hi[:, None], gammas[None, :]))  # (bins, E)
    n_w = np.empty((ids.size, epsilons.size))
    sq32 = sq.astype(np.float32)
    inv = np.float32(1.0 / width)
    for s in range(0, ids.size, block):
        b = ids[s : s + block]
        d = X[b] @ X.T  # float32 (b, V), turned in place into bin indices
        d *= -2.0
        d += sq32[None, :]
        d += sq32[b][:, None]
        np.maximum(d, 0.0, out=d)
        np.sqrt(d, out=d)
        d *= inv
        k = d.astype(np.int32)
        np.minimum(k, bins - 1, out=k)
        self_bin = k[np.arange(b.size), b].copy()
        k += (np.arange(b.size, dtype=np.int32) * bins)[:, None]
        hist = np.bincount(k.ravel(), minlength=b.size * bins).reshape(b.size, bins).astype(np.float64)
        hist[np.arange(b.size), self_bin] -= 1.0  # the word itself: weight exp(0) = 1, added exactly
        n_w[s : s + b.size] = 1.0 / (1.0 + hist @ W)
        if progress is not None:
            progress(b.size)
    err = float(np.exp((epsilons.max() / 2.0) * (width + margin)))
    return n_w, {"bins": bins, "bin_width": width, "margin": margin, "max_overestimate_factor": err}


def _exact_curves(factory: Callable[[float], Any], ids: np.ndarray, epsilons: np.ndarray,
                  progress: Callable[[int], None] | None, block: int = 64) -> np.ndarray:
    """N_w = P[M_ε(w) = w] from ``probabilities``, or, for mechanisms whose
    ``self_probabilities(ids, epsilons)`` gives an array (the whole grid from one pass over each word's
    distances, e.g. SanText: ~100× fewer distance computations), from that — used only after it
    agrees with ``factory(ε).probabilities`` on three words at the grid's two ends and middle
    (a factory may change more than ε)."""
    n_w = np.empty((ids.size, epsilons.size))
    mechs = [factory(float(e)) for e in epsilons]
    fast = mechs[0].self_probabilities
    ws = ids[sorted({0, ids.size // 2, ids.size - 1})] if ids.size else ids
    js = sorted({0, epsilons.size // 2, epsilons.size - 1})
    got = fast(ws, epsilons[js]) if ids.size else None
    if got is not None:
        want = np.array([[float(np.asarray(mechs[j].probabilities(int(w)))[w]) for j in js] for w in ws])
        if np.allclose(got, want, rtol=1e-6, atol=1e-12):
            for s in range(0, ids.size, block):
                b = ids[s : s + block]
                n_w[s : s + b.size] = fast(b, epsilons)
                if progress is not None:
                    progress(b.size)
            return n_w
    for i, w in enumerate(ids.tolist()):
        for j, m in enumerate(mechs):
            n_w[i, j] = float(np.asarray(m.probabilities(int(w)))[w])
        if progress is not None:
            progress(1)
    return n_w


def _sampled_curves(factory: Callable[[float], Any], ids: np.ndarray, epsilons: np.ndarray, draws: int, confidence: float,
                    gen: np.random.Generator, progress: Callable[[float], None] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wilson bounds from ``draws`` samples per word at a thinned, bracketed part of the grid;
    returns (n_w, upper, measured-epsilon mask). Unmeasured grid points copy the nearest
    measured one above (below the bracket) or below (above it, where every word was ≥ 0.995)."""
    E = epsilons.size
    step = max(1, int(round(E / (math.log10(epsilons[-1] / epsilons[0]) * 12)))) if E > 1 and epsilons[-1] > epsilons[0] else 1
    grid = list(range(0, E, step))
    if grid[-1] != E - 1:
        grid.append(E - 1)
    def hits_at(j: int, n: int) -> np.ndarray:
        out = factory(float(epsilons[j])).sample_ids(np.repeat(ids, n), rng=gen).reshape(ids.size, n)
        return (out == ids[:, None]).sum(axis=1)

    # bracket: probe decade-spaced grid points with few draws for the first with any hit
    coarse = grid[::12]
    start = 0
    for j in coarse:
        if hits_at(j, max(4, draws // 10)).any():
            break
        start = j
    todo = [j for j in grid if j >= start]
    hits = np.full((ids.size, E), np.nan)
    measured = np.zeros(E, dtype=bool)
    done = 0
    for j in todo:
        hits[:, j] = hits_at(j, draws)
        measured[j] = True
        done += 1
        if progress is not None:
            progress(ids.size / len(todo))
        if (hits[:, j] >= 0.995 * draws).all():
            break
    if progress is not None and done < len(todo):
        progress(ids.size * (len(todo) - done) / len(todo))
    idx = np.flatnonzero(measured)
    # below the first measured point: its values (N_w grows with ε); above the last: its values
    # for the point estimate and the upper bound 1 (never under-states)
    pos = np.clip(np.searchsorted(idx, np.arange(E)), 0, idx.size - 1)
    filled = hits[:, idx[pos]]
    n_w = filled / draws
    up = _upper_bound(filled, draws, confidence)
    up[:, np.arange(E) > idx[-1]] = 1.0
    return n_w, up, measured


def _isolated_words(probe: Any, m: int) -> np.ndarray:
    """Most isolated vocabulary words: :func:`~deniable.calibration.plausible.extreme_words`
    (Euclidean) for embedding mechanisms, Hamming nearest-neighbour distances for binary codes."""
    from .plausible import extreme_words

    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    ext = extreme_words(probe, m, k=10)
    be = getattr(probe, "binary_embedding", None)
    if ext.size == 0 and be is not None:
        V = len(be)
        _, d = _exact_knn(probe).knn(be.codes[:V], min(11, V))
        ids = np.arange(V)
        first = np.lexsort((ids, -d[:, 1] if d.shape[1] > 1 else -d[:, 0]))[:m]
        kth = np.lexsort((ids, -d[:, -1]))[:m]
        ext = np.union1d(first, kth).astype(np.int64)
    return ext


def _measured_words(probe: Any, isolated: int, sample: int, extra: Any,
                    gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(most isolated, random, given)`` vocabulary ids to measure: the ``isolated`` most isolated
    words (:func:`_isolated_words`), ``sample`` words drawn without replacement from ``gen``
    (sorted), and the ``extra`` ids."""
    iso = _isolated_words(probe, isolated)
    rand = np.sort(gen.choice(int(probe.n_words), size=min(sample, int(probe.n_words)), replace=False))
    more = np.zeros(0, np.int64) if extra is None else np.asarray(extra, dtype=np.int64)
    return iso, rand, more


def _pick_estimator(probe: Any) -> str:
    """The estimator ``estimator="auto"`` uses: the mechanism's own
    :meth:`~deniable.mechanisms.base.Mechanism.calibration_estimator` (the only source)."""
    return str(probe.calibration_estimator())


def _screened(probe: Any, eps: np.ndarray, V: int, full: int, screen: int, refine: int, isolated: int, sample: int,
              extra: Any, confidence: float, gen: np.random.Generator, progress: bool | None, name: str,
              curves: Callable[[np.ndarray, int, Callable[[int], None] | None], tuple[np.ndarray, np.ndarray]],
              unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, dict[str, Any]]:
    """Screen every word with ``screen`` directions / draws, refine the riskiest with ``full``
    (see compute_calibration). ``curves(ids, n, update) -> (n_w, upper)`` measures words."""
    all_ids = np.arange(V, dtype=np.int64)
    bar = _bar(V, progress, f"calibrate {name} (screen)")
    try:
        n_s, _ = curves(all_ids, screen, bar.update)
    finally:
        bar.close()
    area = n_s.mean(axis=1)
    top = np.lexsort((all_ids, -area))[: min(refine, V)]
    iso, rand, more = _measured_words(probe, isolated, sample, extra, gen)
    ref = np.union1d(np.union1d(top, iso), np.union1d(rand, more)).astype(np.int64)
    bar = _bar(ref.size, progress, f"calibrate {name} (refine)")
    try:
        n_r, up_r = curves(ref, full, bar.update)
    finally:
        bar.close()
    n_w = n_s.copy()
    up = n_s.copy()
    n_w[ref] = n_r
    up[ref] = up_r
    ref = refine_worst(probe, eps, n_w, up, ref, None, confidence, progress=progress, name=name,
                       curves=lambda ids, update: curves(ids, full, update))
    coverage = (
        f"all {V} words ({ref.size} refined with {full} {unit} and {confidence:.0%} upper bounds: the {top.size} "
        f"highest after screening, the {iso.size} most isolated, {rand.size} random{f', {more.size} given' if more.size else ''}, "
        f"and the top {_PER_EPS} at every grid epsilon; the other words by their {screen}-{unit[:-1]} screening estimate)"
    )
    key = "directions" if unit == "directions" else "draws"
    meta = {key: full, f"screen_{key}": screen, "refined": int(ref.size), "refined_top": int(top.size),
            "refined_ids": ref.tolist()}
    # medians and quantiles come from the random refined words (the screening estimates of a
    # few directions are too coarse for them); the words-changed mean uses every word
    sample_mask = np.isin(all_ids, rand) if rand.size else np.ones(V, bool)
    return n_w, up, sample_mask, coverage, meta


def refine_worst(mech: Any, eps: np.ndarray, n_w: np.ndarray, up: np.ndarray, refined: np.ndarray, directions: np.ndarray | None,
                 confidence: float, *, rounds: int = 6, per_eps: int = _PER_EPS, backend: str = "numpy",
                 progress: bool | None = False, name: str = "",
                 curves: Callable[[np.ndarray, Callable[[int], None] | None], tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
    """Refine (in place: radial with ``directions``, or ``curves(ids, update) -> (n_w, upper)``)
    every screened-only word that is among the ``per_eps`` highest upper bounds at some grid ε,
    until the top words at every ε are refined (at most ``rounds`` rounds). So the worst word at
    each ε, which decides a target, always has a proper upper bound rather than a coarse
    screening estimate. Returns the refined ids."""
    if curves is None:
        if directions is None:
            raise ValueError("give directions (radial) or curves")

        def curves(ids: np.ndarray, update: Callable[[int], None] | None) -> tuple[np.ndarray, np.ndarray]:
            return _radial_curves(mech, ids, eps, directions, confidence, update, backend)

    refined = np.unique(np.asarray(refined, dtype=np.int64))
    k = min(per_eps, up.shape[0])
    for _ in range(rounds):
        top = np.unique(np.argpartition(-up, k - 1, axis=0)[:k].ravel())
        todo = np.setdiff1d(top, refined)
        if todo.size == 0:
            break
        bar = _bar(todo.size, progress, f"calibrate {name} (worst words)")
        try:
            a, b = curves(todo, bar.update)
        finally:
            bar.close()
        n_w[todo], up[todo] = a, b
        refined = np.union1d(refined, todo)
    return refined
