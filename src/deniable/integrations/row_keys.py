"""Row keys and the randomness rule of :mod:`deniable.integrations.keyed`: the secret seed, the
Philox key of each row (BLAKE2b-128 of seed, stream, release and key), :class:`RowRandomness` and
:func:`resolve_randomness`, the one place where an adapter's randomness is decided. See
:mod:`deniable.integrations.keyed` for the rule and its privacy argument."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import PrivacyWarning

__all__ = [
    "secret_seed",
    "check_seed",
    "key_bytes",
    "philox_key",
    "row_generator",
    "RowRandomness",
    "resolve_randomness",
    "master_seed",
    "rng_or_seed",
    "check_release_id",
    "CONTENT_KEYS_WARNING",
    "is_null",
]

_TAG_INT, _TAG_STR, _TAG_BYTES = b"i", b"s", b"b"
_DOMAIN = b"deniable.row-key.v1"


def secret_seed() -> int:
    """A fresh 128-bit seed from :mod:`secrets` (used when the caller gives ``seed=None``)."""
    return secrets.randbits(128)


def check_seed(seed: Any) -> int | None:
    """Validate ``seed``: ``None`` or a non-negative integer (returned as ``int``)."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be None or a non-negative integer, got {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return int(seed)


def key_bytes(key: Any) -> bytes:
    """The canonical bytes of a row key: a type tag, then the value.

    Integers (any width, numpy or Python; not bool) are their 128-bit two's complement, so an
    int32 and an int64 column with the same values give the same keys; strings their UTF-8;
    bytes themselves. Anything else raises ``TypeError``.
    """
    if isinstance(key, (bool, np.bool_)):
        raise TypeError(f"row keys must be integers, strings or bytes, got the bool {key!r}")
    if isinstance(key, (int, np.integer)):
        v = int(key)
        if not -(1 << 127) <= v < (1 << 127):
            raise ValueError(f"integer row keys must fit in 128 bits, got {v}")
        return _TAG_INT + v.to_bytes(16, "little", signed=True)
    if isinstance(key, str):
        return _TAG_STR + key.encode("utf-8", "surrogatepass")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return _TAG_BYTES + bytes(key)
    raise TypeError(
        f"row keys must be integers, strings or bytes, got {type(key).__name__} ({key!r}); "
        "cast the key column to a string or an integer"
    )


def check_release_id(release: Any) -> tuple[str, ...]:
    """The release identity as a tuple of non-empty strings (``None`` / ``()``: none)."""
    if release is None:
        return ()
    parts = (release,) if isinstance(release, str) else release
    if not isinstance(parts, tuple) or not all(isinstance(p, str) for p in parts):
        raise TypeError(f"release_id must be a string (or None), got {type(release).__name__} {release!r}")
    if any(not p for p in parts):
        raise ValueError("release_id must be a non-empty string (or None)")
    return parts


def _prefix(seed: int, stream: str, release: tuple[str, ...] = ()) -> bytes:
    if not isinstance(stream, str):
        raise TypeError(f"stream must be a string, got {type(stream).__name__}")
    sb = seed.to_bytes(max(16, (seed.bit_length() + 7) // 8), "little")
    st = stream.encode("utf-8", "surrogatepass")
    out = _DOMAIN + len(sb).to_bytes(4, "little") + sb + len(st).to_bytes(4, "little") + st
    if release:
        # 0xff is no key tag, so a prefix with a release never equals one without; the parts are
        # counted and length-prefixed, so distinct identities give distinct bytes
        out += b"\xff" + len(release).to_bytes(4, "little")
        for part in release:
            pb = part.encode("utf-8", "surrogatepass")
            out += len(pb).to_bytes(4, "little") + pb
    return out


def philox_key(seed: int, stream: str, key: Any, *, release: Any = None, _prefix_bytes: bytes | None = None) -> np.ndarray:
    """The 128-bit Philox key of a row: BLAKE2b-128 of (seed, stream, release identity, canonical
    key), as two uint64 words. ``release`` is ``None`` (none), a string or a tuple of strings."""
    pre = _prefix(seed, stream, check_release_id(release)) if _prefix_bytes is None else _prefix_bytes
    digest = hashlib.blake2b(pre + key_bytes(key), digest_size=16).digest()
    return np.frombuffer(digest, dtype="<u8").astype(np.uint64)


def row_generator(seed: int, stream: str, key: Any, *, release: Any = None) -> np.random.Generator:
    """The generator of one row: Philox-4x64 (counter-based), keyed by :func:`philox_key`,
    counter starting at 0. Distinct (seed, stream, release, key) give distinct keys (up to a
    2^-128 hash collision), hence independent streams; the same tuple gives the same stream."""
    return np.random.Generator(np.random.Philox(key=philox_key(seed, stream, key, release=release)))


# -- the rule: which randomness the rows of a release draw from --------------------------------

#: Keying modes of :class:`RowRandomness`.
EXPLICIT, CONTENT, POSITION = "explicit", "content", "position"

#: The :class:`~deniable.errors.PrivacyWarning` text of ``content_keys=True``.
CONTENT_KEYS_WARNING = (
    "content_keys=True keys each row by its text: identical texts always get identical outputs and "
    "different outputs prove different inputs, so an observer learns which rows were equal. Each text "
    "keeps the mechanism's guarantee, the table as a whole does not (its privacy loss is unbounded); "
    "leave content_keys off for independent randomness per row"
)


@dataclass(frozen=True)
class RowRandomness:
    """The randomness of one release, as :func:`resolve_randomness` decides it: row *r* draws from
    ``row_generator(seed, stream, key_r, release=release)``.

    ``keying`` says where the row keys come from: ``"explicit"`` (the caller's keys),
    ``"content"`` (each row's text) or ``"position"`` (each row's position in the release).
    ``fresh`` is True when the seed is a secret drawn from the OS here rather than the caller's;
    the seed is never shown by ``repr``. :meth:`redrawn` gives the same settings with a new
    secret (what an adapter does for each release when the caller gave no seed).
    """

    seed: int = field(repr=False)
    stream: str
    release: tuple[str, ...]
    keying: str
    fresh: bool

    @property
    def reproducible(self) -> bool:
        """True when the seed came from the caller (an int, or drawn from the caller's Generator),
        so the same calls give the same outputs."""
        return not self.fresh

    def redrawn(self) -> RowRandomness:
        """The same settings with a new secret seed when the seed is fresh; ``self`` otherwise."""
        return dataclasses.replace(self, seed=secret_seed()) if self.fresh else self

    def row_keys(self, texts: Sequence[Any], keys: Sequence[Any] | None = None, positions: Sequence[Any] | None = None) -> list[Any]:
        """The key of each row: ``keys`` (explicit), the texts (content) or ``positions``
        (default ``0, 1, ...``; they must be unique within the release)."""
        if self.keying == EXPLICIT:
            if keys is None:
                raise TypeError("these rows are keyed explicitly: pass their keys")
            out = list(keys)
            if len(out) != len(texts):
                raise ValueError(f"keys has {len(out)} entries but there are {len(texts)} texts")
            return out
        if keys is not None:
            raise TypeError(f"explicit keys were given, but these rows are keyed by their {self.keying}")
        if self.keying == CONTENT:
            return list(texts)
        out = list(range(len(texts)) if positions is None else positions)
        if len(out) != len(texts):
            raise ValueError(f"positions has {len(out)} entries but there are {len(texts)} texts")
        return out

    def prefix(self) -> bytes:
        """The bytes every row key of this release is hashed after."""
        return _prefix(self.seed, self.stream, self.release)


def _seed_from_generator(gen: np.random.Generator) -> int:
    hi, lo = gen.integers(0, np.iinfo(np.uint64).max, size=2, dtype=np.uint64, endpoint=True)
    return (int(hi) << 64) | int(lo)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside the deniable package, seen from the function
    that calls this one (so a warning names the user's line, whichever adapter raised it)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame = sys._getframe(2)
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def master_seed(rng: Any) -> tuple[int, bool]:
    """The integer master seed of ``rng`` and whether it is a fresh secret.

    ``None``: a fresh 128-bit secret from the OS (:func:`secret_seed`), ``fresh`` True; a
    non-negative integer: itself; a ``numpy.random.Generator``: 128 bits drawn from it (so
    successive calls differ and a seeded Generator reproduces a sequence of calls).
    """
    if isinstance(rng, np.random.Generator):
        return _seed_from_generator(rng), False
    checked = check_seed(rng)
    return (secret_seed(), True) if checked is None else (checked, False)


def rng_or_seed(rng: Any, seed: Any, *, where: str) -> Any:
    """The ``rng`` of an adapter that still accepts ``seed=`` as a deprecated alias.

    ``seed`` given (not ``None``): a ``DeprecationWarning`` naming ``rng=`` and ``seed`` is
    returned (same values, same outputs); both given: ``TypeError``. ``where`` names the
    function in the messages.
    """
    if seed is None:
        return rng
    if rng is not None:
        raise TypeError(f"{where}: got both rng= and seed=; seed= is the deprecated name of rng=, give rng= only")
    warnings.warn(f"{where}(seed=...) is deprecated; use rng=... (same values, same outputs)", DeprecationWarning, stacklevel=_caller_level())
    return seed


def resolve_randomness(
    seed: Any = None,
    *,
    keyed: bool,
    content_keys: bool = False,
    release_id: Any = None,
    stream: str = "",
    key_hint: str = "keys=[one per text]",
) -> RowRandomness:
    """Decide the randomness of one release (the rule of this module, for every adapter).

    * ``seed=None``: a fresh 128-bit secret (:func:`secret_seed`) for this release; a
      ``numpy.random.Generator`` is drawn from (128 bits) instead, so successive releases differ
      and a seeded Generator reproduces a sequence of calls.
    * ``keyed`` (the caller gave row keys): rows are keyed by them; with an integer ``seed`` the
      release is reproducible.
    * ``content_keys=True`` (not with ``keyed``): rows are keyed by their text; warns with
      :class:`~deniable.errors.PrivacyWarning` (:data:`CONTENT_KEYS_WARNING`).
    * otherwise rows are keyed by their position in the release; an integer ``seed`` is then a
      ``ValueError`` (a seed reused for two releases would give their rows at the same position
      the same randomness).

    Parameters
    ----------
    seed
        ``None``, a non-negative integer or a ``numpy.random.Generator``.
    keyed
        Whether the caller gave explicit row keys.
    content_keys
        Key each row by its text (opt-in; see the warning).
    release_id
        The release identity (a non-empty string or ``None``; adapters may pass a tuple of
        strings, such as ``(release_id, split)``), hashed into every row's key.
    stream
        Separates the columns of one release (the column name in the adapters).
    key_hint
        How the adapter's caller gives keys (named in the error message).
    """
    if not isinstance(content_keys, (bool, np.bool_)):
        raise TypeError(f"content_keys must be True or False, got {content_keys!r}")
    if content_keys and keyed:
        raise ValueError(f"content_keys=True keys each row by its text; it cannot be combined with explicit keys ({key_hint}): choose one")
    release = check_release_id(release_id)
    if not isinstance(stream, str):
        raise TypeError(f"stream must be a string, got {type(stream).__name__}")
    if not isinstance(seed, np.random.Generator):
        checked = check_seed(seed)
        if checked is not None and not keyed and not content_keys:
            raise ValueError(
                f"seed={checked} without row keys: keyed by position, row i of every release made with this seed would share "
                f"its randomness (equal texts, equal outputs). Give each row a unique key ({key_hint}) to make the release "
                "reproducible (and each release its own release_id), or leave the seed out for fresh randomness per release "
                "(content_keys=True keys rows by their text instead: identical texts, identical outputs)"
            )
    value, fresh = master_seed(seed)
    if content_keys:
        warnings.warn(CONTENT_KEYS_WARNING, PrivacyWarning, stacklevel=_caller_level())
    keying = EXPLICIT if keyed else (CONTENT if content_keys else POSITION)
    return RowRandomness(value, stream, release, keying, fresh)


class _Rekeyable:
    """One Philox generator re-keyed per row: the same draws as a fresh :func:`row_generator`
    for that row, without building a generator per row."""

    def __init__(self) -> None:
        self.bit_generator = np.random.Philox(key=0)
        self.generator = np.random.Generator(self.bit_generator)
        self._zero = np.zeros(4, dtype=np.uint64)

    def at(self, key: np.ndarray) -> np.random.Generator:
        self.bit_generator.state = {
            "bit_generator": "Philox",
            "state": {"counter": self._zero, "key": key},
            "buffer": self._zero,
            "buffer_pos": 4,
            "has_uint32": 0,
            "uinteger": 0,
        }
        return self.generator


def is_null(value: Any) -> bool:
    """True for ``None`` and float NaN (pandas' missing markers ``pd.NA`` / ``NaT`` included)."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return type(value).__name__ in ("NAType", "NaTType")
