"""Parameter validation shared by constructors (never ``assert``: it vanishes under ``-O``)."""

from __future__ import annotations

import math
import numbers

__all__ = ["check_positive", "check_unit_interval", "check_int"]


def check_positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as float if it is a real number > 0 (finite unless ``allow_inf``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number > 0, got {value!r} ({type(value).__name__})")
    v = float(value)
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_unit_interval(name: str, value: object, *, open_low: bool = False, open_high: bool = False) -> float:
    """Return ``value`` as float if it lies in [0, 1] (ends optionally excluded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {value!r} ({type(value).__name__})")
    v = float(value)
    lo_ok = v > 0 if open_low else v >= 0
    hi_ok = v < 1 if open_high else v <= 1
    if math.isnan(v) or not (lo_ok and hi_ok):
        lo = "(0" if open_low else "[0"
        hi = "1)" if open_high else "1]"
        raise ValueError(f"{name} must be in {lo}, {hi}, got {value!r}")
    return v


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return ``value`` as int if it is an integer (not bool) and at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return v
