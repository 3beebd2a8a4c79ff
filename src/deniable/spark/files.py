"""File-level Spark jobs: read Parquet / CSV / JSONL / text (files or directories), privatize a
column or count n-grams, write the result. What a ``--spark`` command line needs, as functions.

Formats: ``"parquet"``, ``"csv"`` (with a header row), ``"jsonl"`` (one JSON object per line; a
directory of part files as Spark writes them) and ``"txt"`` (one text per line, column ``text``).
Outputs are Spark's directories of part files, written to a temporary sibling and renamed into
place when complete, so a failed job leaves no partial output under the requested name.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..integrations._common import require

__all__ = ["TABLE_FORMATS", "spark_session", "spark_error_line", "detect_table_format", "read_table", "write_table", "privatize_files", "count_ngrams_files"]

TABLE_FORMATS = ("parquet", "csv", "jsonl", "txt")
_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".txt": "txt"}


def spark_session(master: str | None = "local[*]", *, app_name: str = "deniable") -> Any:
    """A SparkSession (``getOrCreate``). For a ``local`` master the Python workers use this
    interpreter (``PYSPARK_PYTHON``), so they see the same installed deniable."""
    require("pyspark", purpose="deniable.spark")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master:
        if master.startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master)
    return builder.getOrCreate()


def spark_error_line(exc: BaseException) -> str | None:
    """One readable line for an error raised by Spark (a failed job, an unreadable input, a
    session that cannot start), or ``None`` when ``exc`` is not Spark's.

    A Python error on an executor is reported by its last line (``ValueError: ...``), a JVM
    error by its message, without stack traces or ``SQLSTATE`` codes."""
    kinds: list[type] = []
    try:
        from pyspark.errors import PySparkException

        kinds.append(PySparkException)
    except ImportError:
        pass
    try:
        from py4j.protocol import Py4JError

        kinds.append(Py4JError)
    except ImportError:
        pass
    if not kinds or not isinstance(exc, tuple(kinds)):
        return None
    text = str(exc).split("JVM stacktrace:")[0]
    lines = [ln.rstrip() for ln in text.splitlines()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        start = max(i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)"))
        tail = [ln for ln in lines[start + 1 :] if ln and not ln[0].isspace()]
        if tail:
            return tail[-1].strip()
    candidates = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("at ")]
    # py4j: "An error occurred while calling o42.save." then ": org.apache...Exception: message"
    for ln in candidates:
        if ln.startswith(": "):
            ln = ln[2:]
            head, sep, rest = ln.partition(": ")
            return (rest if sep and "." in head and " " not in head else ln).strip()
    line = candidates[0] if candidates else type(exc).__name__
    return line.split(" SQLSTATE:")[0].strip()


def _suffix_format(name: str) -> str | None:
    p = Path(name)
    suffix = (Path(p.stem).suffix if p.suffix in (".gz", ".bz2", ".snappy", ".zst", ".lz4") else p.suffix).lower()
    return _SUFFIXES.get(suffix)


def detect_table_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """``fmt`` if given, else from the file name, or for a directory from its data files."""
    if fmt is not None:
        if fmt not in TABLE_FORMATS:
            raise ValueError(f"format must be one of {', '.join(TABLE_FORMATS)}, got {fmt!r}")
        return fmt
    p = Path(path)
    found = _suffix_format(p.name)
    if found is not None:
        return found
    if p.is_dir():
        kinds = {k for f in p.rglob("*") if f.is_file() and not f.name.startswith(("_", ".")) and (k := _suffix_format(f.name)) is not None}
        if len(kinds) == 1:
            return kinds.pop()
        raise DataError(
            f"cannot tell the format of this directory ({'mixed ' + ', '.join(sorted(kinds)) if kinds else 'no .parquet/.csv/.jsonl/.txt files'}); give it explicitly",
            path=str(path),
        )
    return "txt"


def read_table(spark: Any, path: str | os.PathLike[str], *, fmt: str | None = None) -> Any:
    """Read a file or a directory of part files as a DataFrame (``txt``: one column ``text``)."""
    kind = detect_table_format(path, fmt)
    p = str(path)
    if kind == "parquet":
        return spark.read.parquet(p)
    if kind == "csv":
        return spark.read.option("header", True).option("multiLine", True).option("escape", '"').csv(p)
    if kind == "jsonl":
        return spark.read.json(p)
    return spark.read.text(p).withColumnRenamed("value", "text")


def write_table(df: Any, path: str | os.PathLike[str], *, fmt: str) -> None:
    """Write ``df`` as a directory of part files at ``path`` (atomic: a temporary sibling
    renamed into place when Spark reports success). An existing ``path`` is an error."""
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"format must be one of {', '.join(TABLE_FORMATS)}, got {fmt!r}")
    target = Path(path)
    if target.exists():
        raise FileExistsError(f"{target} already exists; remove it or choose another output")
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        w = df.write
        if fmt == "parquet":
            w.parquet(str(tmp))
        elif fmt == "csv":
            w.option("header", True).option("escape", '"').csv(str(tmp))
        elif fmt == "jsonl":
            w.json(str(tmp))
        else:
            if len(df.columns) != 1:
                raise ValueError(f"txt output holds one text column, the DataFrame has {len(df.columns)}: {', '.join(df.columns)}")
            w.text(str(tmp))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def privatize_files(
    inputs: str | os.PathLike[str],
    output: str | os.PathLike[str],
    mechanism: Any,
    *,
    column: str = "text",
    fmt: str | None = None,
    output_format: str | None = None,
    master: str | None = "local[*]",
    spark: Any = None,
    **options: Any,
) -> dict[str, Any]:
    """Privatize ``column`` of a table (file or directory) with Spark and write it to ``output``.

    ``options`` go to :func:`deniable.spark.privatize_column` (``epsilon``, ``key``, ``rng``,
    ``release_id``, ``content_keys``, ``oov``, ``case``, ``user_col``, ``max_words_per_user``,
    ``ledger``, ``dataset``, mechanism parameters, ...). Other columns are copied unchanged. The
    output format defaults to the input's. With a ``ledger`` the release is recorded (output: the
    absolute path of ``output``) before the output is written: a release over the ledger's budget
    raises :class:`~deniable.ledger.BudgetExceeded` and nothing is written; a write that fails
    after it leaves a recorded release without output (over-counted, never under-counted).
    Returns a small summary (rows, format, output).
    """
    from . import privatize_column

    session = spark if spark is not None else spark_session(master)
    kind = detect_table_format(inputs, fmt)
    df = read_table(session, inputs, fmt=kind)
    if column not in df.columns:
        raise DataError(f"no column {column!r} (columns: {', '.join(df.columns)}); choose one with --column", path=str(inputs))
    user_col = options.get("user_col")
    if user_col is not None and user_col not in df.columns:
        raise DataError(f"no column {user_col!r} for the user keys (columns: {', '.join(df.columns)}); choose one with --user-column", path=str(inputs))
    if user_col is not None and user_col == column:
        raise DataError(f"the user column {user_col!r} is the text column; the ledger never stores text", path=str(inputs))
    if Path(output).exists():  # before anything is recorded
        raise FileExistsError(f"{output} already exists; remove it or choose another output")
    where = str(Path(output).resolve()) if options.get("ledger") is not None else None
    private = privatize_column(df, column, mechanism, output=where, **options)
    out_kind = output_format or kind
    write_table(private, output, fmt=out_kind)
    return {"input": str(inputs), "output": str(output), "format": out_kind, "columns": private.columns}


def count_ngrams_files(
    private: str | os.PathLike[str],
    vocabulary: Any,
    output: str | os.PathLike[str],
    *,
    user_field: str = "user",
    text_field: str = "text",
    fmt: str | None = None,
    master: str | None = "local[*]",
    spark: Any = None,
    **options: Any,
) -> Any:
    """Count per-user n-grams of a table with Spark and save the counts bundle that
    ``deniable ngrams release`` reads (:func:`deniable.ngrams.io.save_counts`, on the driver).

    ``options`` go to :func:`deniable.spark.count_ngrams` (``max_ngrams_per_user``, ``C``,
    ``rng``). Returns the :class:`~deniable.ngrams.UserCounts`. A table without rows is a
    :class:`~deniable.errors.DataError` (nothing is written).
    """
    from ..ngrams.io import save_counts
    from . import count_ngrams

    session = spark if spark is not None else spark_session(master)
    df = read_table(session, private, fmt=fmt)
    missing = [c for c in (user_field, text_field) if c not in df.columns]
    if missing:
        raise DataError(f"no column {', '.join(map(repr, missing))} (columns: {', '.join(df.columns)})", path=str(private))
    counts = count_ngrams(df, user_field, text_field, vocabulary, **options)
    if counts.n_users == 0:
        raise DataError("no user records; nothing to count", path=str(private))
    save_counts(output, counts, vocabulary)
    return counts
