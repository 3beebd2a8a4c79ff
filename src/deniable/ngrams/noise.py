"""Noise for the formal n-gram releases: OpenDP's samplers (default when installed) or numpy's.

Every formal release perturbs exactly one vector — the bounded counts (or, for Laplace + public,
their normalised difference from the prior) — through :func:`gaussian_mechanism` or
:func:`laplace_mechanism`, given the GLOBAL sensitivity derived in :mod:`.bounding`.

Samplers (``sampler=``):

* ``"opendp"`` — the OpenDP library (``pip install "deniable[opendp]"``), whose samplers are exact
  and safe against floating-point attacks (Mironov 2012): integer counts get the discrete
  Gaussian / discrete Laplace; float vectors are rounded to the grid 2^``OPENDP_FLOAT_K`` and get
  grid-valued noise, and OpenDP's privacy map accounts for the rounding. The noise scale is the
  smallest one whose privacy OpenDP itself certifies: ε ≤ ``epsilon`` for Laplace (pure DP), and
  for Gaussian ρ-zCDP converted to (ε, δ) by OpenDP (``make_zCDP_to_approxDP``), about 6-9 % more
  noise than the analytic Gaussian calibration. OpenDP draws from the operating system's
  cryptographic generator: ``rng`` does not make its noise reproducible.
* ``"numpy"`` — the continuous Gaussian N(0, σ²) calibrated by the analytic Gaussian mechanism
  (Balle & Wang 2018) and Laplace(Δ₁/ε), drawn from ``rng`` (reproducible with a seed; the
  textbook floating-point samplers, not hardened against floating-point attacks).
* ``"auto"`` (default) — ``"opendp"`` when it is installed, else ``"numpy"``. Releases record the
  sampler actually used.

Speed (``benchmarks/bench_ngrams_noise.py``, 2 busy cores): OpenDP's discrete Gaussian draws
8,000-17,000 values per second (50,000 entries in ~10 s, 5·10⁶ in 5-10 min), its Laplace about
twice as many; numpy draws millions per second.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_positive, check_unit_interval
from .gaussian import analytic_sigma

__all__ = ["SAMPLERS", "OPENDP_FLOAT_K", "resolve_sampler", "gaussian_sigma", "laplace_noise_scale", "gaussian_mechanism", "laplace_mechanism"]

SAMPLERS = ("auto", "opendp", "numpy")

#: Noise granularity 2^k of OpenDP's float samplers (the rounding adds at most 2^k per entry to the
#: sensitivity, which OpenDP's privacy map includes).
OPENDP_FLOAT_K = -40

_CHUNK = 1 << 16  # entries per OpenDP call (calls run in threads: the Rust sampler releases the GIL)


def resolve_sampler(sampler: str) -> str:
    """``"opendp"`` or ``"numpy"`` for a ``sampler`` argument (``"auto"``: OpenDP if installed)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "auto":
        return "opendp" if importlib.util.find_spec("opendp") is not None else "numpy"
    if sampler == "opendp":
        _opendp()
    return sampler


def _opendp():
    from .._optional import import_optional

    dp = import_optional("opendp.prelude", purpose="sampler='opendp' (OpenDP noise)")
    dp.enable_features("contrib")
    return dp


def _space(dp, integer: bool, size: int, norm: str):
    metric = dp.l2_distance(T=float) if norm == "l2" else dp.l1_distance(T=float)
    if integer:
        return dp.vector_domain(dp.atom_domain(T="i64")), metric
    return dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size), metric


def _opendp_gaussian(dp, integer: bool, size: int, scale: float):
    kw = {} if integer else {"k": OPENDP_FLOAT_K}
    return dp.m.make_gaussian(*_space(dp, integer, size, "l2"), scale=scale, **kw)


def _opendp_laplace(dp, integer: bool, size: int, scale: float):
    kw = {} if integer else {"k": OPENDP_FLOAT_K}
    return dp.m.make_laplace(*_space(dp, integer, size, "l1"), scale=scale, **kw)


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float, sampler: str, *, integer: bool = False, size: int = 1) -> float:
    """σ of the Gaussian noise that makes a query of L2 ``sensitivity`` (ε, δ)-DP with ``sampler``.

    numpy: the analytic Gaussian mechanism. opendp: the smallest σ (bisection in log σ, relative
    precision 1e-6, on the safe side) whose OpenDP measurement, converted from zCDP to (ε, δ) by
    OpenDP, has ε(δ) ≤ ``epsilon``.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    if sensitivity == 0:
        return 0.0
    if sampler == "numpy":
        return analytic_sigma(epsilon, delta, sensitivity)
    # the integer (discrete Gaussian) measure does not depend on the vector's size
    return _opendp_gaussian_sigma(float(sensitivity), epsilon, delta, integer, 0 if integer else int(size))


@functools.lru_cache(maxsize=256)
def _opendp_gaussian_sigma(sensitivity: float, epsilon: float, delta: float, integer: bool, size: int) -> float:
    dp = _opendp()

    def ok(scale: float) -> bool:
        meas = dp.c.make_zCDP_to_approxDP(_opendp_gaussian(dp, integer, max(size, 1), scale))
        return meas.map(float(sensitivity)).epsilon(delta) <= epsilon

    lo = analytic_sigma(epsilon, delta, sensitivity)  # OpenDP's zCDP route never needs less
    hi = lo * 2.0
    while not ok(hi):
        lo, hi = hi, hi * 2.0
    for _ in range(50):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-6:
            break
    return hi


def laplace_noise_scale(sensitivity: float, epsilon: float, sampler: str, *, integer: bool = False, size: int = 1) -> float:
    """Scale b of the Laplace noise making a query of L1 ``sensitivity`` ε-DP with ``sampler``."""
    epsilon = check_positive("epsilon", epsilon)
    if sensitivity == 0:
        return 0.0
    b = float(sensitivity) / epsilon
    if sampler == "numpy":
        return b
    dp = _opendp()
    for _ in range(200):  # float rounding slack: step up until OpenDP certifies epsilon
        if _opendp_laplace(dp, integer, size, b).map(float(sensitivity)) <= epsilon:
            return b
        b *= 1.0 + 1e-6 if integer else 1.0 + 1e-4
    raise RuntimeError("could not calibrate OpenDP's Laplace mechanism")  # pragma: no cover


def _run_opendp(meas_for_size, x: np.ndarray, integer: bool) -> np.ndarray:
    chunks = [x[i : i + _CHUNK] for i in range(0, x.size, _CHUNK)] or [x]
    measures = {c.size: meas_for_size(c.size) for c in chunks}

    def one(c: np.ndarray) -> np.ndarray:
        data = c.astype(np.int64) if integer else c.astype(np.float64).tolist()
        return np.asarray(measures[c.size](data), dtype=np.float64)

    workers = min(len(chunks), os.cpu_count() or 1)
    if workers <= 1:
        return np.concatenate([one(c) for c in chunks])
    with ThreadPoolExecutor(workers) as ex:
        return np.concatenate(list(ex.map(one, chunks)))


def _mechanism(
    x: np.ndarray,
    sampler: str,
    scale_for: Callable[[str, bool, int], float],
    numpy_draw: str,
    opendp_measure: Callable[[Any, bool, int, float], Any],
    rng: RNGLike,
) -> tuple[np.ndarray, float, str]:
    """x + noise of the scale ``scale_for(sampler name, integer, size)`` gives: numpy's
    ``Generator.<numpy_draw>`` or the OpenDP measurement ``opendp_measure(dp, integer, size, scale)``."""
    name = resolve_sampler(sampler)
    x = np.asarray(x)
    integer = x.dtype.kind in "iu"
    scale = scale_for(name, integer, x.size)
    if scale == 0:
        return x.astype(np.float64), 0.0, name
    if name == "numpy":
        draw = getattr(as_generator(rng), numpy_draw)
        return x.astype(np.float64) + draw(0.0, scale, size=x.shape), scale, name
    dp = _opendp()
    return _run_opendp(lambda n: opendp_measure(dp, integer, n, scale), x.ravel(), integer).reshape(x.shape), scale, name


def gaussian_mechanism(x: np.ndarray, sensitivity: float, epsilon: float, delta: float, *, sampler: str = "auto", rng: RNGLike = None) -> tuple[np.ndarray, float, str]:
    """x + Gaussian noise making it (ε, δ)-DP for a query of L2 ``sensitivity``.

    Integer ``x`` (dtype) gets OpenDP's discrete Gaussian; float ``x`` the grid-rounded one; with
    numpy the continuous Gaussian. Returns ``(noisy float64 vector, σ, sampler used)``.
    """

    def sigma(name: str, integer: bool, size: int) -> float:
        return gaussian_sigma(sensitivity, epsilon, delta, name, integer=integer, size=size)

    return _mechanism(x, sampler, sigma, "normal", _opendp_gaussian, rng)


def laplace_mechanism(x: np.ndarray, sensitivity: float, epsilon: float, *, sampler: str = "auto", rng: RNGLike = None) -> tuple[np.ndarray, float, str]:
    """x + Laplace noise making it ε-DP for a query of L1 ``sensitivity``.

    Returns ``(noisy float64 vector, scale b, sampler used)``.
    """

    def scale(name: str, integer: bool, size: int) -> float:
        return laplace_noise_scale(sensitivity, epsilon, name, integer=integer, size=size)

    return _mechanism(x, sampler, scale, "laplace", _opendp_laplace, rng)
