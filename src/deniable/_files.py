"""Atomic file writes shared by the library and the CLI."""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from .errors import DataError

__all__ = ["atomic_binary", "atomic_output", "open_input", "decode_line", "input_size", "cache_directory"]


@contextlib.contextmanager
def atomic_binary(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Write ``path`` atomically: yield a temporary file in the same folder (binary mode); on
    success it is flushed, fsynced and renamed over ``path``, on error removed, so ``path`` is
    either the old file or the complete new one. The file gets the permissions a plain ``open``
    would give (0666 & ~umask), not mkstemp's private 0600."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, mode: str = "w", encoding: str | None = "utf-8", newline: str | None = "") -> Iterator[IO]:
    """Write ``path`` atomically: into a temporary file in the same folder, renamed over
    ``path`` only when the block finishes without error; a ``.gz`` name is gzip-compressed.
    ``"-"`` writes to stdout."""
    if str(path) == "-":
        if "b" in mode:
            yield sys.stdout.buffer
        else:
            yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise DataError("output folder does not exist", path=folder)
    with atomic_binary(target) as raw:
        kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": encoding, "newline": newline}
        if target.suffix == ".gz":
            with gzip.open(raw, mode if "b" in mode else mode.replace("t", "") + "t", **kwargs) as f:
                yield f  # type: ignore[misc]  # GzipFile is a binary IO
        elif "b" in mode:
            yield raw
        else:
            with open(raw.fileno(), mode, closefd=False, **kwargs) as f:
                yield f


def input_size(path: str) -> int | None:
    """Size in bytes of a regular file, else None (stdin, pipes)."""
    if path == "-":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if os.path.isfile(path) else None


@contextlib.contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    """Open an input file (or stdin for ``"-"``) in binary mode; ``.gz`` files are decompressed."""
    if path == "-":
        yield sys.stdin.buffer
        return
    p = Path(path)
    if p.is_dir():
        raise DataError("is a directory, not a file", path=path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rb") as f:
            yield f  # type: ignore[misc]
    except (gzip.BadGzipFile, EOFError) as exc:
        raise DataError(f"not a valid gzip file ({exc})", path=path) from None


def decode_line(raw: bytes, *, path: str, line: int) -> str:
    """Decode one line as UTF-8, rejecting binary data with a one-line error naming file and line."""
    if b"\0" in raw:
        raise DataError("binary data (NUL byte); expected UTF-8 text", path=path, line=line)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); convert the file to UTF-8", path=path, line=line) from None


def cache_directory(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``cache_dir`` if given, else ``$DENIABLE_CACHE_DIR``, else
    ``~/.cache/deniable``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("DENIABLE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "deniable"
