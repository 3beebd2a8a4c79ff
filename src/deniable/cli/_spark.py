"""Spark runs of CLI commands (``--spark``, ``--master``): usage checks, the session of one run,
and Spark's failures as one-line data errors. Imports PySpark only when a Spark run starts."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import tempfile
from typing import Any

import click

from ..errors import DataError

__all__ = ["check_master", "check_pyspark", "SparkRun"]


def check_master(master: str | None) -> None:
    """``--master ""`` is a usage error (a missing value is click's own)."""
    if master is not None and not master.strip():
        raise click.BadParameter("needs a Spark master URL such as local[4] or spark://host:7077", param_hint="--master")


def check_pyspark() -> None:
    """Usage error (exit 2) naming the extra when PySpark is not installed."""
    if importlib.util.find_spec("pyspark") is None:
        raise click.UsageError('--spark needs PySpark, which is not installed; install it with: pip install "deniable[spark]"')


class SparkRun:
    """The Spark session of one CLI run: reuses an active session (never stopping it), else
    starts one on ``master`` (default ``local[*]``) and stops it at the end.

    A session started here writes the JVM's and the Python workers' output (Spark's logs, stack
    traces of failed tasks) to a temporary log file instead of the terminal, so that a run
    prints only deniable's lines; the file is removed afterwards unless an error message names
    it (``DENIABLE_DEBUG=1`` leaves Spark's output on stderr)."""

    def __init__(self, master: str | None) -> None:
        self.master = master
        self.session: Any = None
        self.own = False
        self.log: str | None = None
        self.keep_log = False

    def __enter__(self) -> SparkRun:
        from pyspark.sql import SparkSession

        from ..spark.files import spark_error_line, spark_session

        self.session = SparkSession.getActiveSession()
        if self.session is not None:
            return self
        quiet = os.environ.get("DENIABLE_DEBUG") != "1"
        saved = None
        if quiet:
            fd, self.log = tempfile.mkstemp(prefix="deniable-spark-", suffix=".log")
            sys.stderr.flush()
            saved = os.dup(2)
            os.dup2(fd, 2)  # the JVM (and the Python workers it starts) inherit this stderr
            os.close(fd)
        try:
            self.session = spark_session(self.master or "local[*]")
        except Exception as exc:
            line = _log_cause(self.log) or spark_error_line(exc) or str(exc)
            if "master" in line.lower():
                self._drop_log()
                raise click.BadParameter(f"Spark rejected it: {line}", param_hint="--master") from None
            raise click.ClickException(f"Spark could not start: {line}; Spark needs Java 17 (java on PATH or JAVA_HOME){self.where()}") from None
        finally:
            if saved is not None:
                os.dup2(saved, 2)
                os.close(saved)
        self.own = True
        self.session.sparkContext.setLogLevel("ERROR")
        return self

    def where(self) -> str:
        """`` (Spark's log: PATH)`` when a log file is kept, else empty."""
        self.keep_log = bool(self.log)
        return f" (Spark's log: {self.log})" if self.log else ""

    def job(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a Spark job; a failed job (bad input, a row the job rejects) is a data error, one line."""
        from ..spark.files import spark_error_line

        try:
            return fn(*args, **kwargs)
        except DataError:
            raise
        except Exception as exc:
            line = spark_error_line(exc)
            if line is None:
                raise
            raise DataError(f"the Spark job failed: {line}{self.where()}") from None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if self.own:
            self.session.stop()
        if not self.keep_log:
            self._drop_log()

    def _drop_log(self) -> None:
        if self.log:
            with contextlib.suppress(OSError):
                os.remove(self.log)
            self.log = None


def _log_cause(log: str | None) -> str | None:
    """The last exception message in Spark's log (why the JVM did not start)."""
    if not log:
        return None
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    found = re.findall(r"^(?:Exception in thread \S+ )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error): (.+)$", text, flags=re.M)
    return found[-1].strip() if found else None


