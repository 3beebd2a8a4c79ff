"""One local Spark session (local[2], two attempts per task) for the whole test run.

Spark needs Java 17+ and PySpark (the ``test`` extra installs PySpark; Java comes from the
system). Where either is missing the Spark tests skip with the reason, except in CI (``CI`` set),
where they fail with it: CI must run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Spark tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _missing('PySpark is not installed (pip install -e ".[test]")')
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin") if os.environ.get("JAVA_HOME") else None)
    if java is None:
        _missing("Java is not installed (Spark needs Java 17: apt-get install openjdk-17-jre-headless)")
    probe = subprocess.run([java, "-version"], capture_output=True, text=True)
    if probe.returncode != 0:
        _missing(f"`java -version` failed: {probe.stderr.strip()[:200]}")
    from pyspark.sql import SparkSession

    old = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers use this venv, not the system python
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,2]")  # 2 cores; 2 attempts per task (for the retry test)
        .appName("deniable-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
