"""Explicit randomness: every random function in deniable takes ``rng``.

``rng`` may be ``None`` (fresh OS entropy), an ``int`` seed, a :class:`numpy.random.SeedSequence`
or a :class:`numpy.random.Generator`. Seeds are for reproducible experiments only: a seeded
run is as predictable as its seed. numpy's global random state is never used.
"""

from __future__ import annotations

from typing import Union

import numpy as np

RNGLike = Union[None, int, np.integer, np.random.SeedSequence, np.random.Generator]

__all__ = ["RNGLike", "as_generator", "spawn"]


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng`` (a Generator is returned as is)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"rng must be None, an int seed, a SeedSequence or a Generator, got {rng!r}")
    if isinstance(rng, (int, np.integer)):
        if rng < 0:
            raise ValueError(f"rng seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, np.random.RandomState):
        raise TypeError(
            "rng must be a numpy.random.Generator, not the legacy RandomState; "
            "use numpy.random.default_rng(seed)"
        )
    raise TypeError(f"rng must be None, an int seed, a SeedSequence or a Generator, got {type(rng).__name__}")


def spawn(rng: RNGLike, n: int) -> list[np.random.Generator]:
    """Return ``n`` independent child generators (one per worker or batch), never correlated."""
    return list(as_generator(rng).spawn(n))
