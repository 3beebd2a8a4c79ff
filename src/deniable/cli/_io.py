"""File handling shared by CLI commands: atomic outputs, checked text input, progress bars."""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

from tqdm import tqdm

from ..errors import DataError

__all__ = ["atomic_output", "open_input", "decode_line", "progress", "input_size"]


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
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        # mkstemp makes the file private (0600); give it the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": newline}
        with os.fdopen(fd, "wb") as raw:
            if target.suffix == ".gz":
                with gzip.open(raw, mode if "b" in mode else mode.replace("t", "") + "t", **kwargs) as f:
                    yield f
            elif "b" in mode:
                yield raw
            else:
                with open(raw.fileno(), mode, closefd=False, **kwargs) as f:
                    yield f
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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


def progress(total: int | None, *, desc: str, disable: bool | None = None, unit: str = "B") -> tqdm:
    """A progress bar on stderr (hidden when stderr is not a terminal unless forced)."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, unit_divisor=1024, file=sys.stderr, disable=disable, leave=False, dynamic_ncols=True)
