"""Streaming readers and writers for text records: plain text, JSON Lines and CSV, gzipped or not.

The ``deniable privatize`` command line is built on these; Python users can call them too::

    from deniable.text.io import read_records, RecordWriter

    reader = read_records("tickets.jsonl.gz", column="body")
    with open("out.jsonl", "w", encoding="utf-8", newline="") as out:
        writer = RecordWriter(out, reader)
        for record in reader:
            writer.write(record, mech.privatize(record.text, rng=gen))
        writer.close()

**Formats.** ``txt``: every line is a record, its text the whole line (line ending included), so
writing the texts back reproduces the layout. ``jsonl``: one JSON object per line; the string
field ``column`` is the text; blank lines are kept. ``csv``: a header row, then rows; the column
``column`` is the text. A UTF-8 byte-order mark at the start is dropped. ``.gz`` files are
decompressed. Input must be UTF-8; errors name the file and line (:class:`~deniable.errors.DataError`).

**Copied fields are copied exactly.** For JSON Lines the writer replaces only the characters of
the ``column`` value in the input line: every other field keeps its exact text (numbers such as
``1e400`` or 30-digit integers, escapes such as ``\\udfff``, key order, spacing). ``NaN`` and
``Infinity``, which Python's :mod:`json` accepts but JSON does not, are rejected with the file and
line, as is a duplicated ``column`` key (one copy would otherwise pass through unprivatized).

**Bounded memory.** With ``max_chars``, a record longer than that is yielded in pieces cut right
after a separator (whitespace or punctuation, see :mod:`deniable.text.tokenize`), so no word is
ever cut: privatizing the pieces in order and writing them gives the same text as privatizing the
record whole. Plain-text lines are then read in pieces too, so memory stays bounded whatever the
line lengths; a JSON Lines or CSV record is parsed whole (about twice its size in memory) and its
text then processed in pieces. :func:`batch_records` groups records and pieces into batches whose
boundaries depend only on the text stream, not on how it was read, so a seeded run gives the same
output however the input is split into lines and pieces.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from .._files import decode_line, open_input
from ..errors import DataError
from ._jsonl import _json_string_body, _scan_object
from .tokenize import _APOSTROPHES, _is_word_char, word_class

__all__ = ["FORMATS", "Record", "RecordReader", "RecordWriter", "read_records", "detect_format", "batch_records", "BATCH_SIZES"]

#: Record formats: plain text lines, JSON Lines, CSV with a header row.
FORMATS = ("txt", "jsonl", "csv")
#: Target batch sizes in characters for :func:`batch_records`: small first batches so progress
#: shows at once, then up to 128 Ki characters (bounded memory; a progress update every few seconds
#: for the slowest mechanism).
BATCH_SIZES = (4 << 10, 16 << 10, 64 << 10, 128 << 10)
_BOM = b"\xef\xbb\xbf"
_BLOCK = 1 << 20  # bytes of a plain-text file read at a time


@dataclass(slots=True)
class Record:
    """One record of text, or one piece of a long record.

    Attributes
    ----------
    line
        Line number (1-based) where the record is in the input (for CSV, where its row ends).
    text
        The text to privatize: the whole record, or a piece of it when ``first`` or ``last`` is
        False (pieces end right after a separator, so no word is cut).
    first, last
        Whether this is the first / the last piece of its record (both True for a whole record).
    frame
        What the writer needs to put the text back (format-specific; treat as opaque).

    Treat a record as read-only (it is not frozen, which makes it cheaper to create).
    """

    line: int
    text: str
    first: bool = True
    last: bool = True
    frame: Any = None

    def split(self, at: int) -> tuple[Record, Record]:
        """The pieces ``text[:at]`` and ``text[at:]`` (cut there only after a separator)."""
        return replace(self, text=self.text[:at], last=False), replace(self, text=self.text[at:], first=False)


def detect_format(path: str | os.PathLike[str]) -> str:
    """``"jsonl"`` for ``.jsonl``/``.ndjson``, ``"csv"`` for ``.csv`` (``.gz`` ignored), else ``"txt"``."""
    p = Path(path)
    suffix = (Path(p.stem).suffix if p.suffix == ".gz" else p.suffix).lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "txt"


@lru_cache(maxsize=1)
def _separator() -> re.Pattern[str]:
    """One separator character where a text may be cut: whitespace or Unicode punctuation other
    than an apostrophe (a cut at an apostrophe could separate a clitic from its stem)."""
    inner = word_class()[2:-1]  # the class [^...]: what is inside
    return re.compile(f"(?![{_APOSTROPHES}])[{inner}]")


@lru_cache(maxsize=1)
def _word_run() -> re.Pattern[str]:
    """A (possibly empty) run of characters that are not cut points, matched at the start of a string."""
    return re.compile(f"(?:{word_class()}|[{_APOSTROPHES}])*")


def last_cut(text: str) -> int:
    """Index just after the last separator of ``text`` (0 if it has none)."""
    m = _word_run().match(text[::-1])  # a ``*`` pattern: always matches
    return len(text) - (m.end() if m else 0)


def first_cut(text: str, at: int) -> int:
    """The smallest ``p >= at`` such that ``text[p-1]`` is a separator, else ``len(text)``."""
    if at >= len(text):
        return len(text)
    start = max(at - 1, 0)
    for p, ch in enumerate(text[start : start + 64], start):  # most words end within a few characters
        if ch not in _APOSTROPHES and not _is_word_char(ch):
            return p + 1
    m = _separator().search(text, start + 64)  # (compiled on first use: it takes a scan of Unicode)
    return len(text) if m is None else m.end()


class RecordReader:
    """Iterates over the :class:`Record` objects of one input (see :func:`read_records`).

    Attributes (updated while iterating): ``bytes_read`` (bytes consumed, after decompression),
    ``records`` (complete records read), ``header`` (the CSV header row, else None) and
    ``other_fields`` (names of the fields or columns copied unchanged).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, format: str | None = None, column: str = "text", max_chars: int | None = None, joined: bool = False,
    ) -> None:
        self.path = str(path)
        self.name = "<stdin>" if self.path == "-" else self.path
        if format is None:
            format = "txt" if self.path == "-" else detect_format(self.path)
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1):
            raise ValueError(f"max_chars must be an integer >= 1 or None, got {max_chars!r}")
        if joined and format != "txt":
            raise ValueError(f"joined applies to plain text only, not {format}")
        self.format = format
        self.column = column
        self.max_chars = max_chars
        self.joined = joined
        self.bytes_read = 0
        self.records = 0
        self.header: list[str] | None = None
        self.other_fields: set[str] = set()

    @property
    def file_position(self) -> int:
        """Bytes consumed from the file as stored (compressed for ``.gz``), for progress bars."""
        raw = getattr(self._file, "fileobj", None)  # gzip.GzipFile: the compressed stream
        if raw is not None:
            try:
                return raw.tell()
            except (OSError, ValueError):
                pass
        return self.bytes_read

    def __iter__(self) -> Iterator[Record]:
        with open_input(self.path) as f:
            self._file = f
            if self.format == "txt":
                yield from self._txt(f)
            elif self.format == "jsonl":
                yield from self._jsonl(f)
            else:
                yield from self._csv(f)

    # -- plain text: lines, long ones in pieces ---------------------------------------------
    def _txt(self, f: Any) -> Iterator[Record]:
        """Lines, read a block at a time (each block's complete lines checked and decoded at
        once; a block is what the stream has, up to :data:`_BLOCK` bytes, so a pipe's lines are
        not held back); a line longer than the pieces (``max_chars``) that has not ended within
        the blocks read is read on as a stream, in pieces (bounded memory)."""
        limit = -1 if self.max_chars is None else max(self.max_chars, 1024)
        read = getattr(f, "read1", f.read)
        n = 0
        head = f.read(len(_BOM))
        self.bytes_read += len(head)
        tail = bytearray() if head == _BOM else bytearray(head)
        while True:
            block = read(_BLOCK)
            if not block:
                break
            self.bytes_read += len(block)
            tail += block
            end = tail.rfind(b"\n") + 1
            if end:
                data = bytes(tail[:end])
                del tail[:end]
                before = self.records
                yield from self._txt_lines(data, n)
                n += self.records - before  # its lines (data ends with a line break)
            if 0 < limit < len(tail):  # a long line: the rest of it as a stream
                yield from self._txt_stream(f, bytes(tail), n + 1, limit)
                n += 1
                tail.clear()
        if tail:  # the last line, without a line break
            yield from self._txt_lines(bytes(tail), n)

    def _txt_lines(self, data: bytes, n: int) -> Iterator[Record]:
        """The records of ``data``, whole lines (the last may lack its line break) after line
        ``n``."""
        try:
            if b"\0" in data:
                raise ValueError
            text = data.decode("utf-8")
        except (ValueError, UnicodeDecodeError):  # name the first bad line
            raws = data.split(b"\n")
            for k, raw in enumerate(raws, start=n + 1):
                if k == n + len(raws) and not data.endswith(b"\n") and b"\0" not in raw:  # the file's last bytes
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        if exc.end == len(raw) and exc.reason == "unexpected end of data":
                            raise DataError("invalid UTF-8 (the file ends inside a multi-byte character); convert the file to UTF-8", path=self.name, line=k) from None
                decode_line(raw, path=self.name, line=k)
            raise AssertionError("unreachable: a bad block has a bad line") from None
        if self.joined:  # the complete lines as one record, never split into lines (what it saves)
            end = text.rfind("\n") + 1
            breaks = text.count("\n")
            whole: Iterable[Record] = (Record(n + 1, text[:end]),) if end else ()
            last = text[end:]
        else:
            lines = text.split("\n")
            last = lines.pop()
            breaks = len(lines)
            whole = (Record(k, line + "\n") for k, line in enumerate(lines, start=n + 1))
        size = self.max_chars
        for record in whole:
            yield from self._pieces(record) if size is not None and len(record.text) > size else (record,)
        self.records += breaks
        if last:
            record = Record(n + breaks + 1, last)
            yield from self._pieces(record) if size is not None and len(last) > size else (record,)
            self.records += 1

    def _txt_stream(self, f: Any, raw: bytes, n: int, limit: int) -> Iterator[Record]:
        """Line ``n``, whose first ``raw`` bytes were read, read on ``limit`` bytes at a time and
        given in pieces of about ``max_chars`` characters, each ending after a separator."""
        first = True
        pending = ""
        offset = 0  # bytes of the line before ``raw``
        decoder = codecs.getincrementaldecoder("utf-8")()
        while raw:
            if b"\0" in raw:
                raise DataError("binary data (NUL byte); expected UTF-8 text", path=self.name, line=n)
            complete = raw.endswith(b"\n")
            try:
                text = decoder.decode(raw, final=complete)
            except UnicodeDecodeError as exc:
                col = offset - (len(exc.object) - len(raw)) + exc.start + 1
                raise DataError(
                    f"invalid UTF-8 (byte 0x{exc.object[exc.start]:02x} at column {col}); convert the file to UTF-8", path=self.name, line=n
                ) from None
            offset += len(raw)
            pending += text
            if complete:
                break
            if self.max_chars is not None and len(pending) >= self.max_chars:
                cut = last_cut(pending)
                if cut:
                    yield Record(n, pending[:cut], first=first, last=False)
                    pending, first = pending[cut:], False
            raw = f.readline(limit)
            self.bytes_read += len(raw)
        try:
            pending += decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise DataError("invalid UTF-8 (the file ends inside a multi-byte character); convert the file to UTF-8", path=self.name, line=n) from None
        yield Record(n, pending, first=first, last=True)
        self.records += 1

    def _lines(self, f: Any) -> Iterator[tuple[int, str]]:
        for n, raw in enumerate(f, start=1):
            self.bytes_read += len(raw)
            if n == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            yield n, decode_line(raw, path=self.name, line=n)

    def _pieces(self, record: Record) -> Iterator[Record]:
        """A record, in pieces of about ``max_chars`` when it is longer."""
        size = self.max_chars
        if size is None or len(record.text) <= size:
            yield record
            return
        while len(record.text) > size:
            cut = first_cut(record.text, size)
            if cut >= len(record.text):
                break
            head, record = record.split(cut)
            yield head
        yield record

    # -- JSON Lines: the column's value replaced in the raw line -----------------------------
    def _jsonl(self, f: Any) -> Iterator[Record]:
        for n, line in self._lines(f):
            if not line.strip():
                yield Record(n, "", frame=(None, line))
            else:
                prefix, value, suffix = _scan_object(line, self.column, self.name, n, self.other_fields)
                del line
                yield from self._pieces(Record(n, value, frame=(prefix, suffix)))
            self.records += 1

    # -- CSV ---------------------------------------------------------------------------------
    def _csv(self, f: Any) -> Iterator[Record]:
        csv.field_size_limit(sys.maxsize)
        reader = csv.reader((line for _, line in self._lines(f)), strict=True)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(f"invalid CSV header ({exc})", path=self.name, line=1) from None
        if self.column not in header:
            raise DataError(
                f"no column {self.column!r} in the CSV header (columns: {', '.join(header)}); choose one with --column", path=self.name, line=1
            )
        col = header.index(self.column)
        self.header = header
        self.other_fields.update(h for h in header if h != self.column)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataError(f"invalid CSV ({exc})", path=self.name, line=reader.line_num) from None
            if len(row) != len(header):
                raise DataError(f"{len(row)} fields, the header has {len(header)}", path=self.name, line=reader.line_num)
            text = row[col]
            row[col] = ""
            yield from self._pieces(Record(reader.line_num, text, frame=(row, col)))
            self.records += 1


def read_records(
    path: str | os.PathLike[str], *, format: str | None = None, column: str = "text", max_chars: int | None = None, joined: bool = False,
) -> RecordReader:
    """Stream the records of a text file (``"-"``: stdin).

    Parameters
    ----------
    path
        Input file; ``.gz`` is decompressed; ``"-"`` reads stdin.
    format
        ``"txt"``, ``"jsonl"`` or ``"csv"``; default from the file name (:func:`detect_format`).
    column
        The JSON field or CSV column that holds the text (``jsonl``/``csv``).
    max_chars
        Yield records longer than this in pieces cut after a separator (see the module docs);
        None yields whole records.
    joined
        Plain text only: yield the complete lines read at once (up to a block of the file) as one
        record, their line breaks kept, instead of a record per line, for a caller that needs
        neither line numbers nor a record per line. :func:`batch_records` makes the same batches
        of the same text from them, with far less work per line for short lines.

    Returns
    -------
    RecordReader
        An iterable of :class:`Record`; reading starts when it is iterated and raises
        :class:`~deniable.errors.DataError` naming the file and line on malformed input.
    """
    return RecordReader(path, format=format, column=column, max_chars=max_chars, joined=joined)


class RecordWriter:
    """Writes records back in their reader's format, with new texts (see the module docs).

    Parameters
    ----------
    out
        A text file opened with ``newline=""`` (UTF-8).
    reader
        The :class:`RecordReader` the records come from (format, CSV header).

    Call :meth:`write` once per record or piece, in order, then :meth:`close` (writes the CSV
    header of an input that has no rows). Pieces of one record must be written consecutively.
    """

    def __init__(self, out: IO[str], reader: RecordReader) -> None:
        self.out = out
        self.reader = reader
        self.format = reader.format
        self._csv = csv.writer(out, lineterminator="\n") if self.format == "csv" else None
        self._header_written = False

    def _header(self) -> None:
        if self._csv is not None and not self._header_written and self.reader.header is not None:
            self._csv.writerow(self.reader.header)
        self._header_written = True

    def write(self, record: Record, text: str) -> None:
        """Write ``record`` with its text replaced by ``text``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        if self.format == "txt":
            self.out.write(text)
        elif self.format == "jsonl":
            prefix, suffix = record.frame
            if prefix is None:  # a blank line, kept as it is
                self.out.write(suffix)
                return
            if record.first:
                self.out.write(prefix)
                self.out.write('"')
            self.out.write(_json_string_body(text))
            if record.last:
                self.out.write('"')
                self.out.write(suffix)
        else:
            self._header()
            row, col = record.frame
            if record.first and record.last:
                row = list(row)
                row[col] = text
                self._csv.writerow(row)  # type: ignore[union-attr]
                return
            # a long field written in pieces: always quoted (the same value as minimal quoting)
            if record.first:
                self.out.write(_csv_join(row[:col]) + ("," if col else "") + '"')
            self.out.write(text.replace('"', '""'))
            if record.last:
                rest = row[col + 1 :]
                self.out.write('"' + ("," + _csv_join(rest) if rest else "") + "\n")

    def write_batch(self, records: Sequence[Record], texts: Sequence[str]) -> None:
        """:meth:`write` each record with its text, in order (plain text: all at once)."""
        if self.format != "txt":
            for record, text in zip(records, texts):
                self.write(record, text)
            return
        try:
            self.out.write("".join(texts))
        except TypeError:
            bad = next(t for t in texts if not isinstance(t, str))
            raise TypeError(f"text must be a string, got {type(bad).__name__}") from None

    def close(self) -> None:
        """Finish the output (the CSV header of an input without rows)."""
        self._header()


def batch_records(records: Iterator[Record], sizes: tuple[int, ...] = BATCH_SIZES) -> Iterator[list[Record]]:
    """Group records into batches of about ``sizes[k]`` characters (the last size repeats).

    A batch ends at the first record end or separator at or after its target size: a record
    crossing the target is split there (:meth:`Record.split`). Where batches end therefore depends
    only on the texts, not on how a reader cut them into pieces; one mechanism call per batch
    then gives the same output, for the same seed, however the input was read.
    """
    batch: list[Record] = []
    chars = 0
    k = 0
    target = sizes[0]
    for rec in records:
        while chars + len(rec.text) >= target:
            cut = first_cut(rec.text, target - chars)
            if cut < len(rec.text):
                head, rec = rec.split(cut)
                batch.append(head)
            else:
                batch.append(rec)
                rec = None  # type: ignore[assignment]
            yield batch
            batch, chars = [], 0
            k += 1
            target = sizes[min(k, len(sizes) - 1)]
            if rec is None:
                break
        if rec is not None:
            batch.append(rec)
            chars += len(rec.text)
    if batch:
        yield batch


def _csv_join(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()
