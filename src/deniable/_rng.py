"""Explicit randomness: every random function in deniable takes ``rng``.

``rng`` may be ``None`` (fresh OS entropy), an ``int`` seed, a :class:`numpy.random.SeedSequence`,
a :class:`numpy.random.Generator`, or ``"secure"``. Seeds are for reproducible experiments only: a
seeded run is as predictable as its seed. numpy's global random state is never used.

``None`` seeds numpy's default PCG64 from OS entropy: unpredictable to an observer who does not
see the generator's state, but PCG64 is not a cryptographic generator. ``"secure"`` uses the
ChaCha20 stream cipher (``randomgen``, ``pip install "deniable[secure]"``) keyed with 256 bits
from :mod:`secrets`, for production deployments whose threat model includes an adversary who
might reconstruct a statistical generator's state from released outputs. It is about 4x slower
at generating noise, a few percent of a Madlib run.
"""

from __future__ import annotations

import secrets
from typing import Literal

import numpy as np

RNGLike = None | int | np.integer | np.random.SeedSequence | np.random.Generator | Literal["secure"]

__all__ = ["RNGLike", "as_generator", "spawn", "secure_generator"]


def secure_generator() -> np.random.Generator:
    """A Generator driven by ChaCha20 (20 rounds) keyed from :mod:`secrets` (needs ``randomgen``)."""
    from ._optional import import_optional

    randomgen = import_optional("randomgen", purpose="rng='secure' (the ChaCha20 generator)")
    return np.random.Generator(randomgen.ChaCha(seed=secrets.randbits(256), rounds=20))


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng`` (a Generator is returned as is)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, str):
        if rng == "secure":
            return secure_generator()
        raise ValueError(f"rng must be None, an int seed, a SeedSequence, a Generator or 'secure', got {rng!r}")
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
