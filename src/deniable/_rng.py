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

__all__ = ["RNGLike", "SECURE_KEY_BITS", "as_generator", "spawn", "secure_generator", "secure_key"]


#: Width of the ChaCha20 key of ``rng="secure"``, in bits.
SECURE_KEY_BITS = 256


def secure_key() -> int:
    """A fresh 256-bit key from :mod:`secrets` (the OS's cryptographic source)."""
    return secrets.randbits(SECURE_KEY_BITS)


def secure_generator() -> np.random.Generator:
    """A Generator driven by ChaCha20 (20 rounds) keyed directly with 256 bits from :mod:`secrets`
    (needs ``randomgen``).

    The key is set as the cipher's key (``ChaCha(key=...)``), not passed as a seed: a seed would
    go through numpy's ``SeedSequence``, whose entropy pool holds 128 bits."""
    from ._optional import import_optional

    randomgen = import_optional("randomgen", purpose="rng='secure' (the ChaCha20 generator)")
    return np.random.Generator(randomgen.ChaCha(key=secure_key(), counter=0, rounds=20))


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
    """Return ``n`` independent child generators (one per worker or batch), never correlated.

    ``"secure"`` gives ``n`` ChaCha20 generators, each with its own 256-bit key."""
    if isinstance(rng, str) and rng == "secure":
        return [secure_generator() for _ in range(n)]
    return list(as_generator(rng).spawn(n))
