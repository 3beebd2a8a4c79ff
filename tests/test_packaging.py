"""The sdist and the wheel are complete.

Both are built from a copy of the checkout with the PEP 517 hooks of setuptools (no network, no
build isolation). The sdist must carry what a packager or a user of the source needs to build,
test and read (LICENSE, CHANGELOG, README, docs, examples, tests with their conftest, benchmarks,
scripts); the wheel every module of ``src/deniable``, the bundled data, ``py.typed`` and the
license, and neither may carry caches.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "Makefile")
COPIED_DIRS = ("src", "docs", "examples", "benchmarks", "scripts", "tests")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache", ".hypothesis", ".venvs")

SDIST_REQUIRED = [
    "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "PKG-INFO",
    "docs/architecture.md", "docs/cli.md", "docs/mechanisms/*.md", "docs/results/*.md",
    "docs/api/conf.py", "docs/api/api.rst", "examples/sample.txt", "tests/conftest.py", "tests/test_architecture.py", "tests/mechanisms/test_*.py",
    "benchmarks/bench_*.py", "scripts/*.py",
    "src/deniable/__init__.py", "src/deniable/py.typed", "src/deniable/embeddings/data/*.npz",
    "src/deniable/binary/data/*.brr", "src/deniable/calibration/data/*.npz",
]
WHEEL_REQUIRED = [
    "deniable/py.typed", "deniable/embeddings/data/*.npz", "deniable/embeddings/data/*.json",
    "deniable/binary/data/*.brr", "deniable/calibration/data/*.npz", "deniable/web/static/*",
    "deniable-*.dist-info/METADATA", "deniable-*.dist-info/entry_points.txt", "deniable-*.dist-info/*LICENSE*",
]
NEVER = ["*__pycache__*", "*.pyc", "*.pytest_cache/*", "*.hypothesis/*", "*.mypy_cache/*", "*.ruff_cache/*"]


def missing(names: list[str], required: list[str]) -> list[str]:
    """The patterns of ``required`` that no name of ``names`` matches."""
    return [pat for pat in required if not any(fnmatch.fnmatch(n, pat) for n in names)]


def unwanted(names: list[str]) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatch(n, pat) for pat in NEVER)]


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> tuple[list[str], list[str], zipfile.ZipFile]:
    base = tmp_path_factory.mktemp("packaging")
    src = base / "checkout"
    src.mkdir()
    for name in COPIED:
        shutil.copy2(ROOT / name, src / name)
    for name in COPIED_DIRS:
        shutil.copytree(ROOT / name, src / name, ignore=JUNK)
    dist = base / "dist"
    dist.mkdir()
    for hook in ("build_sdist", "build_wheel"):  # one process each, as a build frontend does
        code = f"import sys, setuptools.build_meta as b; b.{hook}(sys.argv[1])"
        r = subprocess.run([sys.executable, "-c", code, str(dist)], cwd=src, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
    (sdist,) = dist.glob("deniable-*.tar.gz")
    (wheel,) = dist.glob("deniable-*.whl")
    with tarfile.open(sdist) as tar:
        top = sdist.name[: -len(".tar.gz")]
        sdist_names = [m.name.removeprefix(top + "/") for m in tar.getmembers() if m.isfile()]
    whl = zipfile.ZipFile(wheel)
    return sdist_names, whl.namelist(), whl


@pytest.mark.slow
def test_the_sdist_is_complete(archives):
    sdist, _, _ = archives
    assert not missing(sdist, SDIST_REQUIRED), missing(sdist, SDIST_REQUIRED)
    assert not unwanted(sdist), unwanted(sdist)
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src" / "deniable").rglob("*.py"))
    assert not sorted(set(modules) - set(sdist)), "modules missing from the sdist"


@pytest.mark.slow
def test_the_wheel_is_complete(archives):
    _, wheel, whl = archives
    assert not missing(wheel, WHEEL_REQUIRED), missing(wheel, WHEEL_REQUIRED)
    assert not unwanted(wheel), unwanted(wheel)
    modules = sorted(str(p.relative_to(ROOT / "src")) for p in (ROOT / "src" / "deniable").rglob("*.py"))
    assert not sorted(set(modules) - set(wheel)), "modules missing from the wheel"
    assert not [n for n in wheel if n.startswith(("tests/", "docs/", "benchmarks/"))]
    (meta_name,) = [n for n in wheel if n.endswith(".dist-info/METADATA")]
    meta = whl.read(meta_name).decode()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
    assert f"\nVersion: {version}\n" in meta
    assert "License-Expression: MIT" in meta or "License: MIT" in meta
    assert "deniable = deniable.cli.main:main" in whl.read(meta_name.replace("METADATA", "entry_points.txt")).decode()


def test_the_checks_can_fail():
    """Control: a missing file and a cache file are reported."""
    names = ["LICENSE", "src/deniable/__init__.py", "src/deniable/__pycache__/x.cpython-311.pyc"]
    assert missing(names, ["LICENSE", "CHANGELOG.md", "src/deniable/*.py"]) == ["CHANGELOG.md"]
    assert unwanted(names) == ["src/deniable/__pycache__/x.cpython-311.pyc"]


def test_make_demo_installs_the_core_only():
    """`make demo` on a fresh machine installs the package without extras (no test-only
    package such as torch, pyspark or playwright); `make test` installs the test extra."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[1]

    def dry_run(target: str) -> str:
        return subprocess.run(["make", "-n", target, "VENV=/nonexistent-venv"], cwd=root, capture_output=True, text=True, check=True).stdout

    demo = dry_run("demo")
    assert "pip install -q -e ." in demo and "[test]" not in demo and "[" not in demo.split("pip install -q -e .")[1].split("\n")[0]
    assert '-e ".[test]"' in dry_run("test")
