"""The calibration store: where a calibration comes from — shipped with the package, cached on
disk, or computed now and cached — keyed by mechanism, parameters, vocabulary fingerprint and
every option that changes the result (:func:`calibration_options`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import RNGLike
from .compute import compute_calibration
from .record import FORMAT_VERSION, Calibration, calibration_key

__all__ = ["calibration_for", "calibration_options", "known_calibration", "shipped_calibration"]

_DATA = Path(__file__).with_name("data")


def _key_hash(name: str, params: dict[str, Any], fingerprint: str, options: dict[str, Any] | None = None) -> str:
    blob = json.dumps({"m": name, "p": params, "f": fingerprint, "v": FORMAT_VERSION, "o": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def shipped_calibration(name: str, params: dict[str, Any], fingerprint: str) -> Calibration | None:
    """The calibration shipped with the package for this key, or None."""
    path = _DATA / f"{name}.npz"
    if not path.is_file():
        return None
    cal = Calibration.load(path, source="shipped calibration")
    if cal.fingerprint != fingerprint or cal.params != params:
        return None
    return cal


def _cache_file(name: str, params: dict[str, Any], fingerprint: str, cache_dir: Any, options: dict[str, Any] | None = None) -> Path:
    from ..neighbors.neighborhoods import cache_directory

    digest = _key_hash(name, params, fingerprint, options)
    return cache_directory(cache_dir) / "calibration" / f"{name}-{fingerprint}-{digest}-v{FORMAT_VERSION}.npz"


def calibration_options(options: dict[str, Any], rng: RNGLike = 0) -> dict[str, Any] | None:
    """Every option of :func:`compute_calibration` that can change its result, defaults filled in,
    as a JSON-able dict (the cache key's option part), or None when the result is not
    reproducible from the options (``rng`` not an int seed, or a ``sampler`` callable): such a
    calibration is computed afresh and never cached.

    ``progress`` is left out (it changes no number); arrays (``words``, ``extra``, ``epsilons``)
    enter as lists of values."""
    import inspect

    known = inspect.signature(compute_calibration).parameters
    unknown = sorted(set(options) - set(known) - {"factory"})
    if unknown:
        raise TypeError(f"calibration_for() got unknown option(s) {', '.join(unknown)}; valid: "
                        f"{', '.join(n for n in known if n not in ('factory', 'progress', 'rng'))}")
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
        return None
    if options.get("sampler") is not None:
        return None
    key: dict[str, Any] = {"rng": int(rng)}
    for name, param in known.items():
        if name in ("factory", "progress", "rng", "sampler"):
            continue
        value = options.get(name, param.default)
        if isinstance(value, np.ndarray) or (isinstance(value, Sequence) and not isinstance(value, str)):
            value = np.asarray(value).tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        key[name] = value
    return key


_DEFAULT_OPTIONS: dict[str, Any] | None = None


def _default_options() -> dict[str, Any]:
    global _DEFAULT_OPTIONS
    if _DEFAULT_OPTIONS is None:
        _DEFAULT_OPTIONS = calibration_options({})
    assert _DEFAULT_OPTIONS is not None
    return _DEFAULT_OPTIONS


def calibration_for(
    factory: Callable[[float], Any],
    *,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    progress: bool | None = None,
    rng: RNGLike = 0,
    **options: Any,
) -> Calibration:
    """The calibration of ``factory(ε)``: shipped, cached, or computed now (and cached).

    The key of a calibration is the mechanism's name and ε-independent parameters, the
    vocabulary fingerprint, and every option of :func:`compute_calibration` that changes the
    result (``confidence``, ``epsilons``, ``estimator``, ``draws``, ``directions``, ``words``,
    ``rng``, ...: :func:`calibration_options`), so a request is never answered with a
    calibration made under other options (a 0.99-confidence request after a cached 0.95 one
    computes or loads a 0.99 calibration). The shipped calibrations were made with the default
    options and serve only requests with those. ``cache_dir=False`` neither reads nor writes
    the disk cache; an ``rng`` that is not an int seed (or a ``sampler``) computes afresh without
    the cache."""
    name, params, fp = calibration_key(factory)
    opts = calibration_options(options, rng)
    if opts is not None and opts == _default_options():
        cal = shipped_calibration(name, params, fp)
        if cal is not None:
            return cal
    path = None if cache_dir is False or opts is None else _cache_file(name, params, fp, cache_dir, opts)
    if path is not None and path.is_file():
        try:
            cal = Calibration.load(path, source=f"cached calibration {path}")
            if cal.fingerprint == fp and cal.params == params and cal.meta.get("options") == opts:
                return cal
        except (OSError, ValueError, KeyError):
            pass  # unreadable or stale: rebuild
    cal = compute_calibration(factory, progress=progress, rng=rng, **options)
    if opts is not None:
        cal.meta["options"] = opts
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cal.save(path)
        cal.source = f"computed and cached in {path}"
    return cal


_KNOWN: dict[tuple[str, str], list[Calibration]] = {}


def known_calibration(mechanism: Any, *, cache_dir: str | os.PathLike[str] | None = None) -> Calibration | None:
    """A shipped or cached calibration matching this mechanism instance (name, vocabulary
    fingerprint, and every parameter the calibration was keyed by), or None; computes nothing."""
    from .plausible import mechanism_params

    name = str(getattr(mechanism, "name", type(mechanism).__name__))
    fp = str(getattr(getattr(mechanism, "vocabulary", None), "fingerprint", "?"))
    key = (name, fp)
    if key not in _KNOWN:
        found: list[Calibration] = []
        path = _DATA / f"{name}.npz"
        if path.is_file():
            cal = Calibration.load(path, source="shipped calibration")
            if cal.fingerprint == fp:
                found.append(cal)
        folder = _cache_file(name, {}, fp, cache_dir).parent
        if folder.is_dir():
            for p in sorted(folder.glob(f"{name}-{fp}-*-v{FORMAT_VERSION}.npz")):
                try:
                    found.append(Calibration.load(p, source=f"cached calibration {p}"))
                except (OSError, ValueError, KeyError):
                    continue
        _KNOWN[key] = found
    params = mechanism_params(mechanism)
    for cal in _KNOWN[key]:
        if all(params.get(k) == v for k, v in cal.params.items()):
            return cal
    return None
