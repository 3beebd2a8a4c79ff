"""Reading per-user text and public text; saving counts; writing releases (TSV or Parquet).

Inputs
* per-user records: JSONL (one object per line) or CSV with a header, each with a user field and a
  text field (names configurable); ``.gz`` files are read transparently.
* public text: plain text (one text per line), or JSONL/CSV with a text field.

Outputs (written atomically with :func:`deniable._files.atomic_output`: a temporary file in the
same folder renamed over the target, with the permissions a plain ``open`` would give)
* counts bundle ``.npz``: the users x n-grams CSR matrix (int32 indices), vocabulary keys, public
  counts α, user ids, n.
* release ``.tsv`` (or ``-``: stdout; ``.tsv.gz``: compressed): ``# deniable-ngrams-release {json
  metadata}`` then ``ngram<TAB>probability``;
  ``.parquet``: columns ngram, probability, the metadata JSON in the schema metadata (pyarrow).
  The metadata is :meth:`Release.metadata`: data-independent values only (ε, δ, mechanism, public
  parameters, vocabulary size, ``formal_dp``, the guarantee line, library version). The
  data-dependent ``Release.diagnostics`` are never written.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._files import atomic_output, decode_line, open_input
from .._optional import import_optional
from ..errors import DataError
from .counting import NgramVocabulary, UserCounts
from .release import Release

__all__ = [
    "detect_format",
    "read_user_texts",
    "read_texts",
    "save_counts",
    "load_counts",
    "write_release",
    "read_release",
    "release_format",
]

_TSV_MAGIC = "# deniable-ngrams-release "


def detect_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """``fmt`` if given, else from the suffix (``.gz`` ignored): jsonl, csv, txt, tsv, parquet, npz."""
    if fmt:
        return fmt.lower()
    name = str(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix, f in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".csv", "csv"), (".tsv", "tsv"), (".parquet", "parquet"), (".npz", "npz"), (".txt", "txt")):
        if name.endswith(suffix):
            return f
    return "txt"


def _name(path: str | os.PathLike[str]) -> str:
    """How error messages name an input (``-`` is stdin)."""
    return "<stdin>" if str(path) == "-" else str(path)


def _lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` of a UTF-8 text file (``.gz`` decompressed, ``-`` = stdin).

    Lines are decoded one at a time, so invalid UTF-8 and binary data (NUL bytes) are reported
    with the exact line (and column) by :func:`deniable._files.decode_line`; a leading UTF-8 BOM
    is dropped.
    """
    with open_input(str(path)) as f:
        name = _name(path)
        for line_no, raw in enumerate(f, start=1):
            text = decode_line(raw, path=name, line=line_no)
            if line_no == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield line_no, text


def _json_record(line: str, *, path: str, line_no: int) -> dict[str, Any]:
    try:
        obj = json.loads(line.rstrip("\r\n"))  # so an error at the end gets this line's column
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON at column {exc.colno}: {exc.msg}", path=path, line=line_no) from None
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object (with fields), got {type(obj).__name__}", path=path, line=line_no)
    return obj


def _field(obj: dict[str, Any], name: str, *, path: str, line_no: int) -> Any:
    if name not in obj:
        has = ", ".join(repr(k) for k in list(obj)[:8]) or "none"
        raise DataError(f"record has no field {name!r} (its fields: {has})", path=path, line=line_no)
    return obj[name]


def _csv_rows(path: str, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` of a CSV file with a header holding the ``required`` fields."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    lines = (text for _, text in _lines(path))
    reader = csv.DictReader(lines)
    try:
        fields = reader.fieldnames
        if fields is None:
            raise DataError("empty file (expected a CSV header line)", path=_name(path))
        missing = [x for x in required if x not in fields]
        if missing:
            raise DataError(f"CSV header lacks field(s) {', '.join(map(repr, missing))} (has {', '.join(map(repr, fields))})", path=_name(path), line=1)
        for row in reader:
            if any(row.get(x) is None for x in required):
                raise DataError(f"row has too few fields (expected {len(fields)})", path=_name(path), line=reader.line_num)
            yield reader.line_num, row
    except csv.Error as exc:
        raise DataError(f"malformed CSV: {exc}", path=_name(path), line=reader.line_num) from None


def read_user_texts(
    path: str | os.PathLike[str],
    *,
    user_field: str = "user",
    text_field: str = "text",
    fmt: str | None = None,
) -> Iterator[tuple[str, str]]:
    """Yield ``(user, text)`` from a JSONL or CSV file (optionally gzipped).

    Raises :class:`DataError` (with path and line) on malformed JSON (with the column), a missing
    field (named), invalid UTF-8, binary data, or a file without any record. User ids are
    returned as strings.
    """
    p = str(path)
    kind = detect_format(p, fmt)
    name = _name(p)
    if kind not in ("jsonl", "csv"):
        raise DataError(f"per-user input must be JSONL or CSV (use a .jsonl/.csv name or --format), got format {kind!r}", path=name)
    n = 0
    if kind == "jsonl":
        for line_no, line in _lines(p):
            if not line.strip():
                continue
            obj = _json_record(line, path=name, line_no=line_no)
            user = _field(obj, user_field, path=name, line_no=line_no)
            text = _field(obj, text_field, path=name, line_no=line_no)
            if not isinstance(text, str):
                raise DataError(f"field {text_field!r} must be a string, got {type(text).__name__}", path=name, line=line_no)
            if user is None or isinstance(user, (dict, list)):
                raise DataError(f"field {user_field!r} must be a string or a number, got {type(user).__name__}", path=name, line=line_no)
            n += 1
            yield str(user), text
    else:
        for _, row in _csv_rows(p, (user_field, text_field)):
            n += 1
            yield row[user_field], row[text_field]
    if n == 0:
        raise DataError(f"no {kind.upper()} records (the file is empty)", path=name)


def read_texts(path: str | os.PathLike[str], *, text_field: str = "text", fmt: str | None = None) -> Iterator[str]:
    """Yield public texts: each line of a plain text file, or the text field of JSONL/CSV rows.

    Raises :class:`DataError` (path, line) on invalid UTF-8, binary data (NUL bytes) or malformed
    records. An empty file yields nothing.
    """
    p = str(path)
    kind = detect_format(p, fmt)
    name = _name(p)
    if kind == "csv":
        for _, row in _csv_rows(p, (text_field,)):
            yield row[text_field] or ""
    elif kind == "jsonl":
        for line_no, line in _lines(p):
            if not line.strip():
                continue
            text = _field(_json_record(line, path=name, line_no=line_no), text_field, path=name, line_no=line_no)
            if not isinstance(text, str):
                raise DataError(f"field {text_field!r} must be a string, got {type(text).__name__}", path=name, line=line_no)
            yield text
    elif kind == "txt":
        for _, line in _lines(p):
            yield line
    else:
        raise DataError(f"public input must be text, JSONL or CSV, got format {kind!r}", path=name)


def save_counts(path: str | os.PathLike[str], counts: UserCounts, vocabulary: NgramVocabulary) -> None:
    """Save per-user counts and the public vocabulary to a ``.npz`` bundle (atomically, with the
    permissions a plain ``open`` would give)."""
    m = sp.csr_matrix(counts.matrix)
    if tuple(counts.keys) != tuple(vocabulary.keys):
        raise ValueError("counts and vocabulary have different keys")
    if str(path) == "-" or str(path).endswith(".gz"):
        raise ValueError(f"a counts bundle must be written to a plain (not .gz) file, got {str(path)!r}")
    with atomic_output(path, mode="wb") as f:
        np.savez_compressed(
            f,
            indptr=m.indptr.astype(np.int64),
            indices=m.indices.astype(np.int32),
            data=m.data,
            shape=np.array(m.shape, dtype=np.int64),
            keys=np.array(vocabulary.keys, dtype=str),
            public_counts=np.asarray(vocabulary.public_counts),
            user_ids=np.array([str(u) for u in counts.user_ids], dtype=str),
            n=np.array(vocabulary.n),
            lowercase=np.array(vocabulary.lowercase),
            dropped=np.array(counts.dropped),
        )


_NOT_COUNTS = "not a counts bundle written by `deniable ngrams count`"
_COUNTS_FIELDS = ("indptr", "indices", "data", "shape", "keys", "public_counts", "user_ids", "n", "lowercase", "dropped")


def load_counts(path: str | os.PathLike[str]) -> tuple[UserCounts, NgramVocabulary]:
    """Load a bundle written by :func:`save_counts`.

    Anything else (another file type, a foreign or damaged ``.npz``) raises one
    :class:`DataError` naming the file; nothing is ever unpickled.
    """
    p = str(path)
    if Path(p).is_dir():
        raise DataError("is a directory, not a counts bundle", path=p)
    with open(p, "rb") as f:  # FileNotFoundError / PermissionError pass through (the CLI reports them)
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise DataError(_NOT_COUNTS + (" (empty file)" if not magic else " (not an .npz file)"), path=p)
    try:
        with np.load(p, allow_pickle=False) as z:
            absent = [k for k in _COUNTS_FIELDS if k not in z.files]
            if absent:
                raise DataError(f"{_NOT_COUNTS} (no {', '.join(absent)})", path=p)
            arrays = {k: z[k] for k in _COUNTS_FIELDS}
    except DataError:
        raise
    except Exception:  # damaged zip, object arrays: one clear line, no numpy text
        raise DataError(_NOT_COUNTS + " (damaged or unreadable contents)", path=p) from None
    m, keys, alpha, user_ids = _check_counts(arrays, p)
    try:
        vocab = NgramVocabulary(keys, alpha, n=int(arrays["n"]), lowercase=bool(arrays["lowercase"]))
        counts = UserCounts(m, keys, user_ids, int(arrays["dropped"]))
    except Exception as exc:  # duplicate keys, bad scalars
        raise DataError(f"{_NOT_COUNTS} ({exc})", path=p) from None
    return counts, vocab


def _check_counts(z: dict[str, np.ndarray], p: str) -> tuple[sp.csr_matrix, tuple[str, ...], np.ndarray, tuple[str, ...]]:
    """Validate the arrays of a counts bundle (a tampered or damaged file gives one clear line)."""

    def bad(what: str) -> DataError:
        return DataError(f"{_NOT_COUNTS}: {what}", path=p)

    shape, indptr, indices, data = z["shape"], z["indptr"], z["indices"], z["data"]
    if shape.ndim != 1 or shape.size != 2 or shape.dtype.kind not in "iu" or np.any(shape < 0):
        raise bad(f"'shape' must be two non-negative integers, got {shape.tolist()!r}"[:200])
    rows, cols = int(shape[0]), int(shape[1])
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise bad(f"'{name}' must be a 1-D integer array, got dtype {arr.dtype} with shape {arr.shape}")
    if data.ndim != 1 or data.dtype.kind not in "iuf":
        raise bad(f"'data' (the counts) must be a 1-D numeric array, got dtype {data.dtype} with shape {data.shape}")
    if indptr.size != rows + 1:
        raise bad(f"'indptr' has {indptr.size} entries for {rows} users (expected {rows + 1})")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.size or indices.size != data.size:
        raise bad(f"inconsistent sparse layout: 'indptr' must rise from 0 to {indices.size} (the number of counts), and 'indices' and 'data' must have the same length ({indices.size} vs {data.size})")
    if indices.size:
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= cols:
            pos = int(np.flatnonzero((indices < 0) | (indices >= cols))[0])
            raise bad(f"n-gram index {int(indices[pos])} at position {pos} is out of range: the vocabulary has {cols} n-grams (0..{cols - 1})")
    if data.size:
        finite = np.isfinite(data) if data.dtype.kind == "f" else np.ones(data.size, dtype=bool)
        if not finite.all():
            pos = int(np.flatnonzero(~finite)[0])
            raise bad(f"count {data[pos].item()!r} at position {pos} is not a finite number (counts must be finite and >= 0)")
        if data.min() < 0:
            pos = int(np.flatnonzero(data < 0)[0])
            raise bad(f"count {data[pos].item()!r} at position {pos} is negative (counts must be finite and >= 0)")
    keys_arr, alpha, uids = z["keys"], z["public_counts"], z["user_ids"]
    if keys_arr.ndim != 1 or keys_arr.size != cols or keys_arr.dtype.kind != "U":
        raise bad(f"'keys' must hold one string per n-gram column ({cols}), got dtype {keys_arr.dtype} with shape {keys_arr.shape}")
    if alpha.ndim != 1 or alpha.size != cols or alpha.dtype.kind not in "iuf":
        raise bad(f"'public_counts' must hold one number per n-gram column ({cols}), got dtype {alpha.dtype} with shape {alpha.shape}")
    if alpha.size and (not np.all(np.isfinite(alpha)) or alpha.min() < 0):
        raise bad("'public_counts' must be finite and >= 0")
    if uids.ndim != 1 or uids.dtype.kind != "U" or (uids.size not in (0, rows)):
        raise bad(f"'user_ids' must hold one string per user ({rows}), got dtype {uids.dtype} with shape {uids.shape}")
    m = sp.csr_matrix((data, indices.astype(np.int32 if cols < 2**31 else np.int64), indptr.astype(np.int64)), shape=(rows, cols))
    return m, tuple(str(k) for k in keys_arr), alpha, tuple(str(u) for u in uids)


def release_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """The release format ("tsv" or "parquet") for writing to ``path`` (``"-"``: stdout, TSV only).

    Raises ValueError when it cannot be told, or when ``fmt`` contradicts the file name's suffix
    (e.g. ``--format tsv`` for ``r.parquet``).
    """
    p = str(path)
    suffix = None if p == "-" else detect_format(p)
    if suffix not in ("tsv", "parquet"):
        suffix = None
    kind = fmt.lower() if fmt else suffix
    if p == "-":
        kind = kind or "tsv"
        if kind != "tsv":
            raise ValueError("only a TSV release can be written to stdout ('-o -'); give a .parquet file name")
        return kind
    if kind is None:
        raise ValueError(f"cannot tell the release format from {p!r}: use a .tsv or .parquet name, or --format tsv|parquet")
    if kind not in ("tsv", "parquet"):
        raise ValueError(f"release format must be 'tsv' or 'parquet', got {kind!r}")
    if suffix is not None and suffix != kind:
        raise ValueError(f"--format {kind} contradicts the file name {p!r} (a .{suffix} file)")
    if kind == "parquet" and p.lower().endswith(".gz"):
        raise ValueError(f"a Parquet release cannot be gzip-compressed, got {p!r}")
    return kind


def write_release(path: str | os.PathLike[str], release: Release, *, fmt: str | None = None) -> None:
    """Write a release as TSV (metadata in a ``#`` header line) or Parquet, atomically.

    ``path`` ``"-"`` writes TSV to stdout; a ``.gz`` TSV name is gzip-compressed. The format comes
    from ``fmt`` or the suffix (see :func:`release_format`: a contradiction is a ValueError).
    Only :meth:`Release.metadata` (data-independent) is written, never ``release.diagnostics``:
    values such as the user count or a local sensitivity are not covered by any guarantee.
    """
    kind = release_format(path, fmt)
    meta = release.metadata()
    if kind == "tsv":
        with atomic_output(path, mode="w", encoding="utf-8", newline="") as f:
            f.write(_TSV_MAGIC + json.dumps(meta, sort_keys=True) + "\n")
            f.write("ngram\tprobability\n")
            probs = release.probabilities
            f.writelines(f"{k}\t{p!r}\n" for k, p in zip(release.keys, probs.tolist()))
    else:
        pa = import_optional("pyarrow", purpose="writing Parquet")
        pq = import_optional("pyarrow.parquet", purpose="writing Parquet")
        table = pa.table({"ngram": pa.array(list(release.keys), type=pa.string()), "probability": pa.array(release.probabilities)})
        table = table.replace_schema_metadata({b"deniable": json.dumps(meta, sort_keys=True).encode()})
        with atomic_output(path, mode="wb") as f:
            pq.write_table(table, f)


_NOT_RELEASE = "not a release written by `deniable ngrams release`"


def read_release(path: str | os.PathLike[str], *, fmt: str | None = None) -> tuple[tuple[str, ...], np.ndarray, dict[str, Any]]:
    """Read ``(keys, probabilities, metadata)`` from a file written by :func:`write_release`.

    Raises :class:`DataError` (path, line where known) for anything else.
    """
    p = str(path)
    kind = detect_format(p, fmt)
    if kind == "parquet":
        pq = import_optional("pyarrow.parquet", purpose="reading Parquet")
        try:
            table = pq.read_table(p)
            raw_meta = (table.schema.metadata or {}).get(b"deniable", b"{}")
            pq_meta = json.loads(raw_meta)
            pq_keys = tuple(str(k) for k in table.column("ngram").to_pylist())
            pq_probs = np.asarray(table.column("probability").to_numpy(), dtype=np.float64)
        except FileNotFoundError:
            raise
        except Exception:
            raise DataError(_NOT_RELEASE + " (not a Parquet file with columns ngram, probability)", path=p) from None
        if not isinstance(pq_meta, dict):
            raise DataError(_NOT_RELEASE + " (bad metadata)", path=p)
        return pq_keys, pq_probs, pq_meta
    if kind != "tsv":
        raise DataError(f"release must be .tsv or .parquet, got format {kind!r}", path=p)
    keys: list[str] = []
    probs: list[float] = []
    meta: dict[str, Any] = {}
    for line_no, line in _lines(p):
        line = line.rstrip("\r\n")
        if line.startswith(_TSV_MAGIC):
            try:
                meta = json.loads(line[len(_TSV_MAGIC) :])
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid metadata JSON at column {exc.colno + len(_TSV_MAGIC)}: {exc.msg}", path=p, line=line_no) from None
            if not isinstance(meta, dict):
                raise DataError("invalid metadata (expected a JSON object)", path=p, line=line_no)
            continue
        if line.startswith("#") or not line or line == "ngram\tprobability":
            continue
        key, sep, val = line.rpartition("\t")
        try:
            prob = float(val)
        except ValueError:
            prob = float("nan")
        if not sep or not (0.0 <= prob <= 1.0):
            raise DataError(f"expected NGRAM<TAB>PROBABILITY (a number in [0, 1]), got {line[:60]!r}", path=p, line=line_no)
        keys.append(key)
        probs.append(prob)
    if not keys:
        raise DataError(_NOT_RELEASE + " (no NGRAM<TAB>PROBABILITY rows)", path=p)
    return tuple(keys), np.array(probs, dtype=np.float64), meta
