"""Reading per-user text and public text; saving counts; writing releases (TSV or Parquet).

Inputs
* per-user records: JSONL (one object per line) or CSV with a header, each with a user field and a
  text field (names configurable); ``.gz`` files are read transparently.
* public text: plain text (one text per line), or JSONL/CSV with a text field.

Outputs (written atomically: a temporary file in the same folder renamed over the target)
* counts bundle ``.npz``: the users x n-grams CSR matrix (int32 indices), vocabulary keys, public
  counts α, user ids, n.
* release ``.tsv``: ``# deniable-ngrams-release {json metadata}`` then ``ngram<TAB>probability``;
  ``.parquet``: columns ngram, probability, the metadata JSON in the schema metadata (pyarrow).
  The metadata is :meth:`Release.metadata`: data-independent values only (ε, δ, mechanism, public
  parameters, vocabulary size, ``formal_dp``, the guarantee line, library version). The
  data-dependent ``Release.diagnostics`` are never written.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import scipy.sparse as sp

from .._optional import import_optional
from ..errors import DataError
from .counting import UserCounts, Vocabulary
from .release import Release

__all__ = [
    "detect_format",
    "read_user_texts",
    "read_texts",
    "save_counts",
    "load_counts",
    "write_release",
    "read_release",
    "atomic_path",
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


def _open_text(path: str | os.PathLike[str]) -> IO[str]:
    p = str(path)
    if p == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="")
    if Path(p).is_dir():
        raise DataError("is a directory, not a file", path=p)
    if p.endswith(".gz"):
        return gzip.open(p, "rt", encoding="utf-8", newline="")
    return open(p, encoding="utf-8", newline="")


def read_user_texts(
    path: str | os.PathLike[str],
    *,
    user_field: str = "user",
    text_field: str = "text",
    fmt: str | None = None,
) -> Iterator[tuple[str, str]]:
    """Yield ``(user, text)`` from a JSONL or CSV file (optionally gzipped).

    Raises :class:`DataError` (with path and line) on malformed JSON, a missing field, or invalid
    UTF-8. User ids are returned as strings.
    """
    kind = detect_format(path, fmt)
    if kind not in ("jsonl", "csv"):
        raise DataError(f"per-user input must be JSONL or CSV, got format {kind!r}", path=str(path))
    f = _open_text(path)
    try:
        if kind == "jsonl":
            line_no = 0
            try:
                for line_no, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataError(f"invalid JSON: {exc.msg}", path=str(path), line=line_no) from None
                    if not isinstance(obj, dict) or user_field not in obj or text_field not in obj:
                        raise DataError(f"expected an object with fields {user_field!r} and {text_field!r}", path=str(path), line=line_no)
                    text = obj[text_field]
                    if not isinstance(text, str):
                        raise DataError(f"field {text_field!r} must be a string", path=str(path), line=line_no)
                    yield str(obj[user_field]), text
            except UnicodeDecodeError:
                raise DataError("invalid UTF-8; convert the file to UTF-8", path=str(path), line=line_no + 1) from None
        else:
            csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
            reader = csv.DictReader(f)
            try:
                fields = reader.fieldnames or []
                missing = [x for x in (user_field, text_field) if x not in fields]
                if missing:
                    raise DataError(f"CSV header lacks field(s) {missing} (has {fields})", path=str(path), line=1)
                for row in reader:
                    if row.get(user_field) is None or row.get(text_field) is None:
                        raise DataError("row has too few fields", path=str(path), line=reader.line_num)
                    yield row[user_field], row[text_field]
            except csv.Error as exc:
                raise DataError(f"malformed CSV: {exc}", path=str(path), line=reader.line_num) from None
            except UnicodeDecodeError:
                raise DataError("invalid UTF-8; convert the file to UTF-8", path=str(path), line=reader.line_num + 1) from None
    finally:
        f.close()


def read_texts(path: str | os.PathLike[str], *, text_field: str = "text", fmt: str | None = None) -> Iterator[str]:
    """Yield public texts: each line of a plain text file, or the text field of JSONL/CSV rows."""
    kind = detect_format(path, fmt)
    if kind in ("jsonl", "csv"):
        f = _open_text(path)
        try:
            if kind == "csv":
                csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
                reader = csv.DictReader(f)
                if text_field not in (reader.fieldnames or []):
                    raise DataError(f"CSV header lacks field {text_field!r}", path=str(path), line=1)
                for row in reader:
                    yield row[text_field] or ""
            else:
                for line_no, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataError(f"invalid JSON: {exc.msg}", path=str(path), line=line_no) from None
                    if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
                        raise DataError(f"expected an object with a string field {text_field!r}", path=str(path), line=line_no)
                    yield obj[text_field]
        finally:
            f.close()
        return
    if kind != "txt":
        raise DataError(f"public input must be text, JSONL or CSV, got format {kind!r}", path=str(path))
    f = _open_text(path)
    line_no = 0
    try:
        for line_no, line in enumerate(f, start=1):
            yield line
    except UnicodeDecodeError:
        raise DataError("invalid UTF-8; convert the file to UTF-8", path=str(path), line=line_no + 1) from None
    finally:
        f.close()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder; renamed over ``path`` if the block succeeds."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise DataError("output folder does not exist", path=str(folder))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def save_counts(path: str | os.PathLike[str], counts: UserCounts, vocabulary: Vocabulary) -> None:
    """Save per-user counts and the public vocabulary to a ``.npz`` bundle (atomically)."""
    m = sp.csr_matrix(counts.matrix)
    if tuple(counts.keys) != tuple(vocabulary.keys):
        raise ValueError("counts and vocabulary have different keys")
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
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


def load_counts(path: str | os.PathLike[str]) -> tuple[UserCounts, Vocabulary]:
    """Load a bundle written by :func:`save_counts`."""
    try:
        z = np.load(path, allow_pickle=False)
        m = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(int(x) for x in z["shape"]))
        keys = tuple(str(k) for k in z["keys"])
        vocab = Vocabulary(keys, z["public_counts"], n=int(z["n"]), lowercase=bool(z["lowercase"]))
        counts = UserCounts(m, keys, tuple(str(u) for u in z["user_ids"]), int(z["dropped"]))
    except (OSError, KeyError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise DataError(f"not a deniable n-gram counts bundle ({exc})", path=str(path)) from None
    return counts, vocab


def write_release(path: str | os.PathLike[str], release: Release, *, fmt: str | None = None) -> None:
    """Write a release as TSV (metadata in a ``#`` header line) or Parquet, atomically.

    Only :meth:`Release.metadata` (data-independent) is written, never ``release.diagnostics``:
    values such as the user count or a local sensitivity are not covered by any guarantee.
    """
    kind = detect_format(path, fmt)
    meta = release.metadata()
    if kind == "tsv":
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(_TSV_MAGIC + json.dumps(meta, sort_keys=True) + "\n")
            f.write("ngram\tprobability\n")
            probs = release.probabilities
            f.writelines(f"{k}\t{p!r}\n" for k, p in zip(release.keys, probs.tolist()))
    elif kind == "parquet":
        pa = import_optional("pyarrow", purpose="writing Parquet")
        pq = import_optional("pyarrow.parquet", purpose="writing Parquet")
        table = pa.table({"ngram": pa.array(list(release.keys), type=pa.string()), "probability": pa.array(release.probabilities)})
        table = table.replace_schema_metadata({b"deniable": json.dumps(meta, sort_keys=True).encode()})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
    else:
        raise ValueError(f"release format must be 'tsv' or 'parquet', got {kind!r}")


def read_release(path: str | os.PathLike[str], *, fmt: str | None = None) -> tuple[tuple[str, ...], np.ndarray, dict[str, Any]]:
    """Read ``(keys, probabilities, metadata)`` from a file written by :func:`write_release`."""
    kind = detect_format(path, fmt)
    if kind == "parquet":
        pq = import_optional("pyarrow.parquet", purpose="reading Parquet")
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {}).get(b"deniable", b"{}"))
        return tuple(table.column("ngram").to_pylist()), np.asarray(table.column("probability").to_numpy(), dtype=np.float64), meta
    if kind != "tsv":
        raise DataError(f"release must be .tsv or .parquet, got format {kind!r}", path=str(path))
    keys: list[str] = []
    probs: list[float] = []
    meta: dict[str, Any] = {}
    with _open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if line.startswith(_TSV_MAGIC):
                meta = json.loads(line[len(_TSV_MAGIC) :])
                continue
            if line.startswith("#") or not line or line == "ngram\tprobability":
                continue
            key, sep, val = line.rpartition("\t")
            try:
                probs.append(float(val))
            except ValueError:
                raise DataError(f"expected NGRAM<TAB>PROBABILITY, got {line[:60]!r}", path=str(path), line=line_no) from None
            if not sep:
                raise DataError(f"expected NGRAM<TAB>PROBABILITY, got {line[:60]!r}", path=str(path), line=line_no)
            keys.append(key)
    return tuple(keys), np.array(probs, dtype=np.float64), meta
