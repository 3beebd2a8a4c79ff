"""Every command and Python snippet of the README and the tutorials runs.

What is run, per Markdown document (``DOCUMENTS``), in document order, in one temporary working
directory per document that holds a copy of the repository's ``examples/`` folder:

* a ```` ```python ```` block: the whole block, in a fresh ``python`` subprocess (the test's
  interpreter, so the checkout's ``deniable``);
* a ```` ```console ````, ```` ```bash ````, ```` ```sh ```` or ```` ```shell ```` block, and a
  block with no language: every line that starts with ``$ `` (with its ``\\`` continuation
  lines) is one shell command, run by ``bash -o pipefail`` with the interpreter's ``bin`` folder
  (``deniable``, ``python``) first on ``PATH``; other lines are expected output and are not
  compared. A shell-tagged block without any ``$ `` line is an error (its commands would never
  run); an untagged block without one is plain text (an output listing, a file).

A block that must not run (it needs a cluster, a GPU, the network, or serves forever) is marked
in the Markdown, on the line right before its opening fence (blank lines allowed between)::

    <!-- snippet: skip (needs a Spark cluster) -->

The reason is required. Skips are counted: a document may skip at most ``MAX_SKIPS`` blocks.
Commands exit 0 and Python blocks run without an exception within ``BLOCK_TIMEOUT`` seconds
each; a failure names the document, the line of the block and the command's output. Blocks
slower than ``SLOW_BLOCK`` seconds are listed in the test's report (``-rA`` / on failure).
Statistical or random outputs are not compared: a snippet checks what it must itself
(``assert``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The documents whose snippets run: the README and every tutorial.
DOCUMENTS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "tutorials").glob("*.md"))]
#: Blocks a document may mark ``<!-- snippet: skip (reason) -->``.
MAX_SKIPS = 2
#: Seconds one block may run before it fails.
BLOCK_TIMEOUT = 120.0
#: Seconds above which a block is reported as slow (the whole test should stay near a minute).
SLOW_BLOCK = 10.0

SHELL_LANGS = {"console", "bash", "sh", "shell", ""}
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_SKIP = re.compile(r"^\s*<!--\s*snippet:\s*skip\s*\((?P<reason>[^)]*\S[^)]*)\)\s*-->\s*$")
_MARKER = re.compile(r"<!--\s*snippet:")


@dataclass
class Block:
    """One fenced code block: its language, first line number (1-based, of the fence), body,
    and the skip reason when marked."""

    lang: str
    line: int
    body: str
    skip: str | None = None


def blocks_of(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their skip markers. A malformed
    ``<!-- snippet: ... -->`` marker (no reason, unknown verb) is an error."""
    lines = text.split("\n")
    out: list[Block] = []
    i = 0
    pending: str | None = None
    while i < len(lines):
        line = lines[i]
        if _MARKER.search(line):
            m = _SKIP.match(line)
            if m is None:
                raise ValueError(f"line {i + 1}: malformed snippet marker {line.strip()!r}; write <!-- snippet: skip (reason) -->")
            pending = m.group("reason").strip()
            i += 1
            continue
        m = _FENCE.match(line)
        if m is None:
            if line.strip():
                pending = None  # a marker applies only to the block right after it
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("info").lower()
        j = i + 1
        while j < len(lines) and not re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            j += 1
        out.append(Block(lang, i + 1, "\n".join(lines[i + 1 : j]), pending))
        pending = None
        i = j + 1
    return out


def shell_commands(body: str) -> list[str]:
    """The ``$ `` commands of a console block, continuation lines joined."""
    cmds: list[str] = []
    lines = body.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.rstrip().endswith("\\") and k + 1 < len(lines):
                k += 1
                cmd = cmd.rstrip()[:-1] + "\n" + lines[k]
            cmds.append(cmd)
        k += 1
    return cmds


def runnable(block: Block) -> str | None:
    """"python", "shell" or None (not code to run)."""
    if block.lang in ("python", "py", "python3"):
        return "python"
    if block.lang in SHELL_LANGS:
        if shell_commands(block.body):
            return "shell"
        if block.lang:
            return "error"
    return None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run_block(block: Block, kind: str, cwd: Path, env: dict[str, str]) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """Run one block; returns (what ran, result) per command."""
    if kind == "python":
        script = cwd / f"_snippet_line{block.line}.py"
        script.write_text(block.body + "\n", encoding="utf-8")
        r = subprocess.run([sys.executable, script.name], cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
        return [(block.body, r)]
    results = []
    for cmd in shell_commands(block.body):
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
        results.append((cmd, r))
        if r.returncode != 0:
            break
    return results


def test_the_parser_finds_blocks_markers_and_commands():
    text = "\n".join([
        "intro",
        "```console",
        "$ deniable --help",
        "Usage: ...",
        "$ echo a \\",
        "  b",
        "```",
        "<!-- snippet: skip (needs a Spark cluster) -->",
        "",
        "```python",
        "import pyspark",
        "```",
        "```",
        "plain output",
        "```",
        "```bash",
        "make demo",
        "```",
    ])
    b = blocks_of(text)
    assert [(x.lang, x.line, x.skip) for x in b] == [("console", 2, None), ("python", 10, "needs a Spark cluster"), ("", 13, None), ("bash", 16, None)]
    assert shell_commands(b[0].body) == ["deniable --help", "echo a \n  b"]
    assert [runnable(x) for x in b] == ["shell", "python", None, "error"]
    with pytest.raises(ValueError, match="malformed snippet marker"):
        blocks_of("<!-- snippet: skip -->\n```python\npass\n```")
    # a marker separated from its block by text applies to nothing
    assert blocks_of("<!-- snippet: skip (x) -->\ntext\n```python\npass\n```")[0].skip is None


def test_a_failing_block_is_reported(tmp_path):
    """Control: a Python block that raises and a command that exits non-zero both fail, and a
    shell block stops at its first failing command."""
    env = _env()
    ((_, r),) = run_block(Block("python", 1, "raise SystemExit(3)"), "python", tmp_path, env)
    assert r.returncode == 3
    results = run_block(Block("console", 1, "$ echo ok\n$ false\n$ echo never"), "shell", tmp_path, env)
    assert [(cmd, x.returncode) for cmd, x in results] == [("echo ok", 0), ("false", 1)]
    ((_, r),) = run_block(Block("console", 1, "$ deniable --version"), "shell", tmp_path, env)
    assert r.returncode == 0, r.stderr  # the interpreter's bin folder is on PATH


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_snippets_run(doc, tmp_path, record_property):
    """Every runnable block of ``doc`` runs (see the module docstring)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    blocks = blocks_of(text)
    skipped = [b for b in blocks if b.skip is not None]
    assert len(skipped) <= MAX_SKIPS, f"{doc}: {len(skipped)} blocks skipped (at most {MAX_SKIPS}): " + "; ".join(
        f"line {b.line} ({b.skip})" for b in skipped)
    bad = [b.line for b in blocks if b.skip is None and runnable(b) == "error"]
    assert not bad, f"{doc}: shell blocks without a '$ ' command at lines {bad}: prefix each command with '$ ' or mark the block skipped"
    cwd = tmp_path / "work"
    shutil.copytree(ROOT / "examples", cwd / "examples")
    env = _env()
    failures, timings = [], []
    ran = 0
    for b in blocks:
        kind = runnable(b)
        if kind is None or b.skip is not None:
            continue
        t0 = time.perf_counter()
        try:
            results = run_block(b, kind, cwd, env)
        except subprocess.TimeoutExpired:
            failures.append(f"{doc}:{b.line} ({kind}): no result after {BLOCK_TIMEOUT:.0f} s")
            continue
        finally:
            timings.append((time.perf_counter() - t0, b.line, kind))
        ran += 1
        for what, r in results:
            if r.returncode != 0:
                out = (r.stdout + r.stderr).strip()
                failures.append(f"{doc}:{b.line} ({kind}) exit {r.returncode}: {what.strip()[:300]}\n    " + out[-1500:].replace("\n", "\n    "))
    slow = [f"line {line} ({kind}) {s:.1f} s" for s, line, kind in sorted(timings, reverse=True) if s > SLOW_BLOCK]
    total = sum(s for s, _, _ in timings)
    record_property("snippet_seconds", round(total, 1))
    summary = f"{doc}: {ran} blocks run in {total:.1f} s, {len(skipped)} skipped" + (f"; slow: {', '.join(slow)}" if slow else "")
    print(summary)
    assert not failures, summary + "\n" + "\n".join(failures)
