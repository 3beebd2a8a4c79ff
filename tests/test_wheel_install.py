"""The README's documented commands run as written from a fresh install of the wheel.

Builds the wheel (``pip wheel --no-deps --no-build-isolation``: no network, the build backend of
this environment), installs it with ``--no-deps`` into a new virtual environment that sees this
environment's dependencies through a ``.pth`` line (numpy, scipy, click, tqdm; not the editable
deniable), and runs, in a folder holding a copy of ``examples/``, every ``$`` command of the
README and its Python quick start: the installed package, not the checkout, must do what the
README says (tests/test_docs_snippets.py runs the same blocks against the checkout).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str = "") -> list[str]:
    """The contents of the README's fenced code blocks of language ``lang`` ("" = plain)."""
    blocks, current, kind = [], None, None
    for line in README.splitlines():
        if line.startswith("```"):
            if current is None:
                current, kind = [], line[3:].strip()
            else:
                if kind == lang:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _commands() -> list[str]:
    """Every ``$ command`` line of the README's console and plain code blocks."""
    blocks = _blocks("console") + _blocks()
    return [line[2:].split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.startswith("$ ")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src-copy"  # build from a clean copy: no build/ or egg-info left in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(dist), str(src)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = dist.glob("deniable-*.whl")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    # this environment's packages, appended after the new one's (a plain path line: the editable
    # deniable's own .pth hook there is not run)
    Path(site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True, capture_output=True, text=True)
    work = base / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}", DENIABLE_CACHE_DIR=str(base / "cache"), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(["python", "-c", "import deniable; print(deniable.__file__, deniable.__version__)"], cwd=work, env=env, check=True, capture_output=True, text=True)
    assert r.stdout.startswith(str(env_dir)), r.stdout  # the wheel, not the checkout
    return work, env


def _sh(cmd: str, work: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], cwd=work, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_readme_commands_from_the_installed_wheel(installed):
    work, env = installed
    shutil.copytree(ROOT / "examples", work / "examples", dirs_exist_ok=True)
    commands = _commands()
    assert len(commands) >= 3 and any("--max-nw" in c for c in commands), commands
    for cmd in commands:
        r = _sh(cmd, work, env)
        assert r.returncode == 0, (cmd, r.stderr)
        assert "Traceback" not in r.stderr and "RuntimeWarning" not in r.stderr, (cmd, r.stderr)
        if "privatize" in cmd:
            assert "epsilon=" in r.stderr, (cmd, r.stderr)  # the summary line of every run
    for out in ("sample.private.txt", "reviews.private.csv"):
        assert (work / out).stat().st_size > 0, out
    assert len((work / "sample.private.txt").read_text().splitlines()) == len((work / "examples" / "sample.txt").read_text().splitlines())


@pytest.mark.slow
def test_readme_python_quick_start_from_the_installed_wheel(installed):
    work, env = installed
    code = _blocks("python")[0]
    assert "deniable.get_mechanism" in code
    r = subprocess.run(["python", "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    # the quick start picks epsilon from a privacy target and says so in the guarantee
    assert r.returncode == 0 and "metric DP with epsilon=" in r.stdout and "chosen for max_n_w=0.5" in r.stdout, r.stderr
