"""The compiled loops' switches: how many threads, when they load, and that neither changes an
output (the loops themselves are checked against the per-token path in test_bulk_path.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import deniable
from deniable import _threads
from deniable.text import _bulk, _kernels


def _fresh_python(code: str) -> list[str]:
    """What ``code`` prints, run in a new interpreter (numba not loaded yet; DENIABLE_COMPILED
    unset), split on whitespace."""
    env = {k: v for k, v in os.environ.items() if k != "DENIABLE_COMPILED"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()


needs_numba = pytest.mark.skipif(_kernels.compiled() is None, reason="numba is not installed (or DENIABLE_COMPILED=0)")


@needs_numba
def test_outputs_do_not_depend_on_threads_or_loops(monkeypatch):
    """One large batch, privatized with 1, 2 and 3 threads and with the numpy loops: the same
    texts for the same seed."""
    mech = deniable.get_mechanism("custext", deniable.load_embedding(limit=5000), epsilon=3.0)
    rng = np.random.default_rng(5)
    words = list(mech.vocabulary.words[:400]) + ["Paris", "DON'T", "caf\u00e9", "x" * 70]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 60)))) + "." for _ in range(2000)]
    monkeypatch.setattr(_bulk, "PARALLEL_MIN_TOKENS", 1000)
    outputs = []
    for n in (1, 2, 3):
        monkeypatch.setattr(_threads, "_THREADS", [n])
        outputs.append(mech.privatize(texts, rng=9))
    monkeypatch.setenv("DENIABLE_COMPILED", "0")
    outputs.append(mech.privatize(texts, rng=9))
    assert all(o == outputs[0] for o in outputs[1:])


@needs_numba
def test_one_long_text_is_cut_between_threads_after_whitespace(monkeypatch):
    """A batch of one long text (the command line's batches of plain text): the scan loop cuts it
    between threads within the text, only after whitespace, so a clitic after an apostrophe
    (straight or curly) is found as in one pass wherever the even cut falls; the same output with
    1 to 4 threads and with the numpy loops, and the work really was cut."""
    mech = deniable.get_mechanism("custext", deniable.load_embedding(limit=5000), epsilon=3.0)
    rng = np.random.default_rng(11)
    words = ["don't", "DON'T", "it's", "we\u2019re", "isn\u2019t", "rock'n'roll", "O'Neil", "caf\u00e9", *mech.vocabulary.words[:20]]
    seps = [" ", " ", " ", "  ", "\n", ", ", "\t"]
    monkeypatch.setattr(_bulk, "PARALLEL_MIN_TOKENS", 200)
    tasks: list[int] = []
    real = _bulk.run_parallel
    monkeypatch.setattr(_bulk, "run_parallel", lambda parts: tasks.append(len(parts)) or real(parts))
    for n_words in range(1000, 1012):  # the even cuts fall on every kind of run
        text = "".join(f"{w}{sep}" for w, sep in zip(rng.choice(words, n_words).tolist(), rng.choice(seps, n_words).tolist()))
        outputs = []
        for n in (1, 2, 3, 4):
            monkeypatch.setattr(_threads, "_THREADS", [n])
            outputs.append(mech.privatize([text], rng=4))
        monkeypatch.setenv("DENIABLE_COMPILED", "0")
        outputs.append(mech.privatize([text], rng=4))
        monkeypatch.delenv("DENIABLE_COMPILED")
        assert all(o == outputs[0] for o in outputs[1:]), n_words
    assert max(tasks) == 4  # the scan cut one text into four parts


@needs_numba
def test_a_small_job_does_not_load_the_compiled_loops():
    """Loading numba costs about half a second: batches below COMPILED_MIN_CHARS characters leave
    it unloaded, a larger one loads it."""
    code = (
        "import sys, deniable\n"
        "from deniable.text import _kernels\n"
        "m = deniable.get_mechanism('tem', deniable.load_embedding(limit=2000), epsilon=3.0)\n"
        "m.privatize(['the cat sat on the mat ' * 1000], rng=0)\n"
        "print('numba' in sys.modules)\n"
        "m.privatize(['the cat sat on the mat ' * (_kernels.COMPILED_MIN_CHARS // 23 + 1)], rng=0)\n"
        "print('numba' in sys.modules)\n"
    )
    assert _fresh_python(code) == ["False", "True"]


@needs_numba
def test_no_writable_cache_folder_compiles_in_each_process(monkeypatch):
    """Where numba finds no folder to cache compiled code in, it refuses ``cache=True`` at once;
    the loops are then compiled without a cache instead of failing."""
    calls = []

    def jit_all(numba, *, cache):
        calls.append(cache)
        if cache:
            raise RuntimeError("cannot cache function '_scan': no locator available for file '_kernels.py'")
        return {"scan": "scan", "write": "write"}

    monkeypatch.setattr(_kernels, "_jit_all", jit_all)
    monkeypatch.setattr(_kernels, "_COMPILED", {})
    monkeypatch.delenv("DENIABLE_COMPILED", raising=False)
    assert _kernels.compiled(load=False) is None and calls == []
    assert _kernels.compiled() == {"scan": "scan", "write": "write"} and calls == [True, False]
    assert _kernels.compiled(load=False) == {"scan": "scan", "write": "write"}


def test_a_large_input_loads_the_compiled_loops_up_front(tmp_path, monkeypatch):
    """``deniable privatize`` on an input of COMPILED_MIN_INPUT characters or more loads the
    compiled loops before its first batch (its batches are smaller than COMPILED_MIN_CHARS, so
    they would not load them); a smaller input leaves that to its batches (the loops' outputs
    are the numpy loops', above)."""
    from click.testing import CliRunner

    from deniable.cli.main import cli

    src = tmp_path / "in.txt"
    src.write_text("The cat sat on the mat.\nIt rained in Paris!\n" * 100, encoding="utf-8")
    real = _kernels.compiled
    asked: dict[int, list[bool]] = {}
    for least in (src.stat().st_size, src.stat().st_size + 1):
        calls = asked.setdefault(least, [])
        monkeypatch.setattr(_kernels, "compiled", lambda *, load=True, calls=calls: calls.append(load) or real(load=load))
        monkeypatch.setattr(_kernels, "COMPILED_MIN_INPUT", least)
        out = tmp_path / f"out_{least}.txt"
        result = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(out), "-m", "custext", "-e", "3", "--seed", "1", "--workers", "1"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    assert True in asked[src.stat().st_size]  # loaded for the first run (its input is exactly the threshold)
    assert True not in asked[src.stat().st_size + 1]  # not asked for the second


@needs_numba
def test_the_compiled_loops_load_in_the_background_ready_to_run():
    """``load_compiled_loops(n, wait=False)`` returns at once and loads the loops in a thread,
    running them once on a stand-in vocabulary; ``wait=True`` then waits for that thread (no other
    thread is left, so worker processes may fork), and privatizing with a real mechanism, with
    and without rendered words, uses the signatures the stand-in ran: numba compiles nothing
    more."""
    code = (
        "import sys, threading, deniable\n"
        "from deniable.text import _kernels, load_compiled_loops\n"
        "big = _kernels.COMPILED_MIN_INPUT\n"
        "print(load_compiled_loops(big, wait=False), 'numba' in sys.modules or any(t.name == 'deniable-compiled-loops' for t in threading.enumerate()))\n"
        "m = deniable.get_mechanism('custext', deniable.load_embedding(limit=3000), epsilon=3.0)\n"
        "print(load_compiled_loops(big), threading.active_count())\n"
        "k = _kernels.compiled(load=False)\n"
        "before = {n: len(f.signatures) for n, f in k.items()}\n"
        "m.privatize([\"The cat's hat, DON'T, caf\u00e9 \" * 3000], rng=0)\n"
        "m.privatize(['the cat sat on the mat ' * 3000], rng=0, oov='drop', case='lower')\n"
        "print(before == {n: len(f.signatures) for n, f in k.items()} == {'scan': 1, 'write': 1})\n"
    )
    assert _fresh_python(code) == ["True", "True", "True", "1", "True"]
