"""Gaussian and Laplace noise calibration.

* ``analytic_sigma`` — the analytic Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8): the
  smallest σ such that the exact privacy profile of N(0, σ²) noise on a query of L2 sensitivity Δ,

      δ(ε, σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε · Φ(−Δ/(2σ) − εσ/Δ),

  is at most δ. Valid for every ε > 0. Found by bracketing + Brent's method on log σ, then moved
  to the safe side until δ(ε, σ) ≤ δ holds in floating point.
* ``classic_sigma`` — Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Theorem A.1; the paper's
  Definition 4). Proven only for ε < 1; for ε ≥ 1 it is *not* a valid guarantee and a
  :class:`~deniable.errors.PrivacyWarning` is raised. Kept to reproduce the paper.

The analytic σ is never larger than the classic σ where the classic one is valid (ε < 1), because
the classic σ also satisfies δ(ε, σ) ≤ δ and δ(ε, ·) is decreasing.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from .._rng import RNGLike, as_generator
from .._validation import check_positive, check_unit_interval
from ..errors import PrivacyWarning

__all__ = [
    "CALIBRATIONS",
    "gaussian_delta",
    "analytic_sigma",
    "classic_sigma",
    "calibrate_sigma",
    "laplace_scale",
    "sample_gaussian",
    "sample_laplace",
]

CALIBRATIONS = ("analytic", "classic")


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """Exact δ of the Gaussian mechanism at ``epsilon`` (Balle & Wang 2018, Theorem 8).

    The smallest δ such that adding N(0, σ²) noise to a query of L2 sensitivity ``sensitivity``
    is (ε, δ)-DP. Computed in log space so large ε does not overflow.
    """
    if sensitivity == 0:
        return 0.0
    if sigma <= 0:
        return 1.0
    r = sensitivity / sigma
    a = 0.5 * r - epsilon / r
    b = -0.5 * r - epsilon / r
    d = float(ndtr(a)) - math.exp(epsilon + float(log_ndtr(b)))
    return max(d, 0.0)


def analytic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest σ with ``gaussian_delta(epsilon, σ, sensitivity) <= delta`` (analytic
    Gaussian mechanism, Balle & Wang 2018, Algorithm 1 done by root finding).

    The returned σ is re-checked: ``gaussian_delta(epsilon, σ, sensitivity) <= delta`` holds in
    floating point (the search errs on the private, larger-σ side).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    sensitivity = float(sensitivity)
    if not math.isfinite(sensitivity) or sensitivity < 0:
        raise ValueError(f"sensitivity must be a finite number >= 0, got {sensitivity!r}")
    if sensitivity == 0:
        return 0.0

    # δ depends on σ/Δ only: solve for s = σ/Δ in log space.
    def f(log_s: float) -> float:
        return gaussian_delta(epsilon, math.exp(log_s), 1.0) - delta

    lo, hi = -1.0, 1.0
    while f(lo) <= 0:  # δ(lo) already small enough: move lo down until δ > target
        lo -= 2.0
        if lo < -60:
            break
    while f(hi) > 0:
        hi += 2.0
        if hi > 60:
            raise ValueError(f"cannot calibrate the Gaussian mechanism for epsilon={epsilon}, delta={delta}")
    if f(lo) <= 0:
        log_s = lo
    else:
        log_s = brentq(f, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    sigma = math.exp(log_s) * sensitivity
    # safe side: the root's float rounding may land on the wrong side; step up until δ ≤ target
    for _ in range(200):
        if gaussian_delta(epsilon, sigma, sensitivity) <= delta:
            return sigma
        sigma = max(np.nextafter(sigma, math.inf), sigma * (1 + 1e-12))
    raise RuntimeError("analytic Gaussian calibration did not converge on the safe side")  # pragma: no cover


def classic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0, *, warn: bool = True) -> float:
    """σ = Δ·√(2 ln(1.25/δ))/ε (the paper's Definition 4; Dwork & Roth 2014, Theorem A.1).

    Proven (ε, δ)-DP only for ε < 1. For ε ≥ 1 a :class:`PrivacyWarning` says the stated
    guarantee is not proven (use ``analytic_sigma``).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_unit_interval("delta", delta, open_low=True, open_high=True)
    if warn and epsilon >= 1:
        warnings.warn(
            f"classic Gaussian calibration is only proven for epsilon < 1 (got epsilon={epsilon}); "
            "the release may not be (epsilon, delta)-DP. Use calibration='analytic'.",
            PrivacyWarning,
            stacklevel=2,
        )
    return float(sensitivity) * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def calibrate_sigma(epsilon: float, delta: float, sensitivity: float, calibration: str = "analytic") -> float:
    """σ for L2 ``sensitivity`` at (ε, δ) by ``calibration`` ("analytic" or "classic")."""
    if calibration == "analytic":
        return analytic_sigma(epsilon, delta, sensitivity)
    if calibration == "classic":
        return classic_sigma(epsilon, delta, sensitivity)
    raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")


def laplace_scale(epsilon: float, sensitivity: float) -> float:
    """Scale b = Δ₁/ε of the Laplace mechanism (ε-DP for a query of L1 sensitivity Δ₁)."""
    epsilon = check_positive("epsilon", epsilon)
    return float(sensitivity) / epsilon


def sample_gaussian(shape: int | tuple[int, ...], sigma: float, rng: RNGLike = None) -> np.ndarray:
    """N(0, σ²) noise of ``shape`` (float64)."""
    gen = as_generator(rng)
    if sigma == 0:
        return np.zeros(shape)
    return gen.normal(0.0, sigma, size=shape)


def sample_laplace(shape: int | tuple[int, ...], scale: float, rng: RNGLike = None) -> np.ndarray:
    """Laplace(0, b) noise of ``shape`` (float64)."""
    gen = as_generator(rng)
    if scale == 0:
        return np.zeros(shape)
    return gen.laplace(0.0, scale, size=shape)
