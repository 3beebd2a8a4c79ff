"""The :class:`BinaryEmbedding` type: a vocabulary and its packed binary codes (BRR paper §4).

Bit layout: bit ``j`` of a code lives in ``uint64`` word ``j // 64`` at bit position ``j % 64``
(least significant first); as little-endian bytes, that is byte ``j // 8``, bit ``j % 8``
(``np.packbits(..., bitorder="little")``). Padding bits past ``n_bits`` are always zero.

Files use the versioned BRR bundle layout of ``docs/bundle_format.md`` (parsed by the
numpy-only :mod:`deniable.brr_runtime`, written here).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .. import brr_runtime
from .._files import atomic_binary
from .._validation import check_int
from ..embeddings.embedding import UNK_ID, Vocabulary
from ..errors import DataError

__all__ = ["BinaryEmbedding", "pack_bits", "unpack_bits", "majority_code", "UNK_METHODS"]

#: How the UNK code was chosen: the binarizer applied to the embedding's mean vector, the
#: bitwise majority of the vocabulary's codes (ties -> 0), or given explicitly.
UNK_METHODS = ("encoded-mean", "majority", "given")


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Pack a boolean ``(n, n_bits)`` array into ``uint64`` ``(n, ceil(n_bits/64))`` codes."""
    bits = np.asarray(bits)
    if bits.ndim != 2:
        raise ValueError(f"bits must be a 2-D (words x bits) array, got shape {bits.shape}")
    n, nb = bits.shape
    wpc = (nb + 63) // 64
    packed = np.zeros((n, 8 * wpc), dtype=np.uint8)
    if nb:
        packed[:, : (nb + 7) // 8] = np.packbits(bits.astype(bool, copy=False), axis=1, bitorder="little")
    return packed.view("<u8").astype(np.uint64)


def unpack_bits(codes: np.ndarray, n_bits: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: a boolean ``(n, n_bits)`` array."""
    codes = np.ascontiguousarray(np.atleast_2d(codes), dtype="<u8")
    raw = codes.view(np.uint8).reshape(codes.shape[0], -1)
    return np.unpackbits(raw, axis=1, count=n_bits, bitorder="little").astype(bool)


def majority_code(bits: np.ndarray) -> np.ndarray:
    """Bitwise majority of boolean rows (ties give 0), as a boolean ``(n_bits,)`` vector."""
    bits = np.asarray(bits, dtype=bool)
    return 2 * bits.sum(axis=0, dtype=np.int64) > bits.shape[0]


class BinaryEmbedding(Vocabulary):
    """A binary word embedding: ``words[i]`` has the ``n_bits``-bit code ``codes[i]`` (packed).

    Parameters
    ----------
    words
        The vocabulary (unique, non-empty strings without a newline).
    codes
        Packed ``uint64`` array ``(len(words), ceil(n_bits/64))``; see the module docs for the
        bit layout. Use :meth:`from_bits` to start from a boolean array.
    n_bits
        Code length in bits (1..65535).
    unk_code
        Packed code of UNK, the single point for every out-of-vocabulary word; default the
        bitwise majority of the vocabulary's codes.
    unk_method
        One of :data:`UNK_METHODS` (recorded in files and reports).
    metadata
        JSON-serializable provenance (binarizer, source embedding fingerprint, ...).
    source
        Where it came from, for messages.
    """

    def __init__(
        self,
        words: Sequence[str],
        codes: np.ndarray,
        *,
        n_bits: int,
        unk_code: np.ndarray | None = None,
        unk_method: str | None = None,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
    ) -> None:
        n_bits = check_int("n_bits", n_bits, minimum=1)
        if n_bits > brr_runtime.MAX_BITS:
            raise ValueError(f"n_bits must be at most {brr_runtime.MAX_BITS}, got {n_bits}")
        words = list(words)
        wpc = (n_bits + 63) // 64
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape != (len(words), wpc):
            raise DataError(f"codes must have shape ({len(words)}, {wpc}) for {len(words)} words of {n_bits} bits, got {codes.shape}", path=source)
        if not (np.issubdtype(codes.dtype, np.unsignedinteger) and codes.dtype.itemsize == 8):
            raise TypeError(f"codes must be a uint64 array, got dtype {codes.dtype}")
        if not words:
            raise DataError("the binary embedding is empty (no words)", path=source)
        for w in words:
            if not isinstance(w, str) or not w or "\n" in w:
                raise DataError(f"every word must be a non-empty string without a newline, got {w!r}", path=source)
        index = {w: i for i, w in enumerate(words)}
        if len(index) != len(words):
            dup = next(w for i, w in enumerate(words) if index[w] != i)
            raise DataError(f"duplicate word {dup!r} in the binary embedding", path=source)
        codes = np.ascontiguousarray(codes, dtype=np.uint64)
        pad = self._pad_mask(n_bits)
        if pad and (codes[:, -1] & np.uint64(pad)).any():
            raise DataError(f"codes have bits set beyond n_bits={n_bits} (padding must be zero)", path=source)
        if unk_code is None:
            unk_code = pack_bits(majority_code(unpack_bits(codes, n_bits))[None, :])[0]
            unk_method = unk_method or "majority"
        unk_code = np.ascontiguousarray(np.asarray(unk_code), dtype=np.uint64).reshape(-1)
        if unk_code.shape != (wpc,):
            raise ValueError(f"unk_code must be a packed code of {wpc} uint64 word(s), got shape {unk_code.shape}")
        if pad and unk_code[-1] & np.uint64(pad):
            raise ValueError(f"unk_code has bits set beyond n_bits={n_bits}")
        unk_method = unk_method or "given"
        if unk_method not in UNK_METHODS:
            raise ValueError(f"unk_method must be one of {', '.join(UNK_METHODS)}, got {unk_method!r}")
        codes.setflags(write=False)
        unk_code.setflags(write=False)
        self._words, self._index, self._codes = words, index, codes
        self.n_bits, self.unk_code, self.unk_method = n_bits, unk_code, unk_method
        self.metadata = dict(metadata or {})
        json.dumps(self.metadata)  # fail early on non-serializable metadata
        self.source = source

    @staticmethod
    def _pad_mask(n_bits: int) -> int:
        r = n_bits % 64
        return 0 if r == 0 else (~((1 << r) - 1)) & 0xFFFFFFFFFFFFFFFF

    @classmethod
    def from_bits(cls, words: Sequence[str], bits: np.ndarray, *, unk_bits: np.ndarray | None = None, **kwargs: Any) -> BinaryEmbedding:
        """Build from a boolean ``(len(words), n_bits)`` array. ``unk_bits`` (boolean
        ``(n_bits,)``) sets the UNK code; default the bitwise majority code."""
        bits = np.asarray(bits)
        if bits.ndim != 2:
            raise ValueError(f"bits must be a 2-D (words x bits) boolean array, got shape {bits.shape}")
        if bits.dtype != bool:
            if not np.isin(bits, (0, 1)).all():
                raise ValueError("bits must be boolean (or 0/1)")
            bits = bits.astype(bool)
        unk = None
        if unk_bits is not None:
            ub = np.asarray(unk_bits, dtype=bool).reshape(1, -1)
            if ub.shape[1] != bits.shape[1]:
                raise ValueError(f"unk_bits must have {bits.shape[1]} bits, got {ub.shape[1]}")
            unk = pack_bits(ub)[0]
            kwargs.setdefault("unk_method", "given")
        return cls(words, pack_bits(bits), n_bits=bits.shape[1], unk_code=unk, **kwargs)

    # -- vocabulary interface (what deniable.text and Mechanism use) ------------------------
    @property
    def codes(self) -> np.ndarray:
        """Read-only packed ``uint64`` codes ``(len(self), words_per_code)``."""
        return self._codes

    @cached_property
    def fingerprint(self) -> str:
        """Stable hash of words, n_bits, codes and the UNK code (16 hex chars)."""
        return self._digest(f"brr:{len(self)}x{self.n_bits}\n", np.ascontiguousarray(self._codes, dtype="<u8"), np.ascontiguousarray(self.unk_code, dtype="<u8"))

    def code_of(self, ids: np.ndarray) -> np.ndarray:
        """Packed codes of ``ids`` (the UNK code for :data:`UNK_ID`)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = self._codes[np.maximum(ids, 0)]
        unk = ids == UNK_ID
        if unk.any():
            out[unk] = self.unk_code
        return out

    @property
    def words_per_code(self) -> int:
        """64-bit words per packed code: ⌈n_bits / 64⌉."""
        return int(self._codes.shape[1])

    def bits(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Unpacked boolean codes of ``ids`` (default: all words)."""
        codes = self._codes if ids is None else self.code_of(ids)
        return unpack_bits(codes, self.n_bits)

    def restrict(self, *, top_n: int) -> BinaryEmbedding:
        """The first ``top_n`` words (all of them when there are fewer), with the same UNK code,
        bit length and metadata."""
        n = check_int("top_n", top_n, minimum=1)
        if n >= len(self):
            return self
        return BinaryEmbedding(
            self.words[:n], self.codes[:n], n_bits=self.n_bits, unk_code=self.unk_code, unk_method=self.unk_method,
            metadata=self.metadata, source=self.source,
        )

    def __repr__(self) -> str:
        src = f", source={self.source!r}" if self.source else ""
        return f"BinaryEmbedding({len(self)} words x {self.n_bits} bits, fingerprint={self.fingerprint}, unk={self.unk_method}{src})"

    # -- files -----------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The bundle bytes (layout: ``docs/bundle_format.md``, version 1)."""
        from .._version import __version__

        vocab = "\n".join(self._words).encode("utf-8")
        header = {
            "format": "deniable-brr",
            "n_words": len(self),
            "n_bits": self.n_bits,
            "words_per_code": self.words_per_code,
            "vocab_bytes": len(vocab),
            "uncased": bool(self.uncased),
            "unk": self.unk_method,
            "fingerprint": self.fingerprint,
            "created_by": f"deniable {__version__}",
            "metadata": self.metadata,
        }
        hb = json.dumps(header, sort_keys=True, ensure_ascii=True).encode("utf-8")
        hb += b" " * (-len(hb) % 8)  # keep the codes 8-byte aligned
        body = b"".join(
            [
                struct.pack("<8sII", brr_runtime.MAGIC, brr_runtime.VERSION, len(hb)),
                hb,
                np.ascontiguousarray(self._codes, dtype="<u8").tobytes(),
                np.ascontiguousarray(self.unk_code, dtype="<u8").tobytes(),
                vocab,
            ]
        )
        return body + hashlib.sha256(body).digest()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the bundle file atomically (temp file in the same folder, then rename)."""
        path = Path(path)
        data = self.to_bytes()
        with atomic_binary(path) as f:
            f.write(data)
        return path

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str | None = None) -> BinaryEmbedding:
        """Decode bundle bytes; :class:`~deniable.errors.DataError` if they are not a valid bundle."""
        try:
            parsed = brr_runtime.parse_bundle(data, name=source or "bundle")
        except brr_runtime.BundleError as exc:
            msg = str(exc)
            if source and msg.startswith(source + ": "):
                msg = msg[len(source) + 2 :]
            raise DataError(msg, path=source) from None
        h = parsed["header"]
        emb = cls(
            parsed["words"],
            parsed["codes"],
            n_bits=int(h["n_bits"]),
            unk_code=parsed["unk_code"],
            unk_method=h.get("unk") if h.get("unk") in UNK_METHODS else "given",
            metadata=h.get("metadata") or {},
            source=source,
        )
        fp = h.get("fingerprint")
        if fp is not None and fp != emb.fingerprint:
            raise DataError(f"fingerprint mismatch: header says {fp}, content hashes to {emb.fingerprint}", path=source)
        return emb

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BinaryEmbedding:
        """Read a bundle file written by :meth:`save` or ``deniable export brr``."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"binary embedding file not found: {path}")
        if path.is_dir():
            raise DataError("is a directory, not a BRR bundle", path=path)
        return cls.from_bytes(path.read_bytes(), source=str(path))
