"""`deniable privatize --workers N`: each worker runs the whole pipeline (sampling included) on its
batches, batch i of input j drawing from stream (j, i) of the seed, so the output and the reports
are the same for a seed with 1, 2 or 3 workers; errors stop the workers and leave no output."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading

import pytest
from click.testing import CliRunner

from deniable.backends import _text_fork
from deniable.backends import text as parallel
from deniable.cli.main import cli

from .._fork import WORDS, stop_tqdm_monitor, write_corpus


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """An embedding file and a text of about 60,000 characters (several batches and groups)."""
    tmp = tmp_path_factory.mktemp("sampling")
    pool = [*WORDS, "The", "CAT", "Zebra", "don't", "NASA", "w7", "w140"]
    emb, src, _ = write_corpus(tmp, seed=1, extra_words=150, pool=pool, lines=3000, max_words=25)
    return tmp, emb, src


@pytest.fixture
def modes(monkeypatch):
    """Small groups (every worker busy) and what each started pool of workers does. FAISS, which
    other tests of the session may have imported (it rules out forking), is hidden: these
    mechanisms do not use it."""
    monkeypatch.delitem(sys.modules, "faiss", raising=False)
    stop_tqdm_monitor()
    monkeypatch.setattr(parallel, "GROUP_CHARS", 8_000)
    reason = _text_fork.fork_refusal(object())
    assert reason is None, f"{reason}: {[t.name for t in threading.enumerate()]}"
    started: list[str] = []
    real = parallel.ParallelPrivatizer.start

    def start(self, **kw):
        started.append(real(self, **kw))
        return started[-1]

    monkeypatch.setattr(parallel.ParallelPrivatizer, "start", start)
    return started


def privatize(emb, src, out, mechanism, workers, *extra, seed="5"):
    seeded = ("--seed", seed) if seed is not None else ()
    return run("privatize", src, "-o", out, "-m", mechanism, "-e", "3", "--embedding", emb, *seeded, "--workers", workers, "--no-progress", *extra)


@pytest.mark.parametrize("mechanism", ["tem", "custext", "madlib"])
def test_one_two_three_workers_give_the_same_bytes(corpus, modes, mechanism):
    tmp, emb, src = corpus
    outs = []
    for w in (1, 2, 3):
        out = tmp / f"{mechanism}{w}.txt"
        r = privatize(emb, src, out, mechanism, w)
        assert r.exit_code == 0, r.output
        outs.append(out.read_bytes())
    assert modes == ["", "whole", "whole"]  # 1: no workers; 2, 3: the whole pipeline in the workers
    assert outs[0] == outs[1] == outs[2]
    assert not multiprocessing.active_children()
    # failing control: another seed changes the bytes
    assert privatize(emb, src, tmp / "other.txt", mechanism, 2, seed="6").exit_code == 0
    assert (tmp / "other.txt").read_bytes() != outs[0]


def test_reports_count_the_same_with_workers(corpus, modes):
    tmp, emb, src = corpus
    seen = []
    for w in (1, 2):
        report = tmp / f"report{w}.json"
        r = privatize(emb, src, tmp / f"rep{w}.txt", "tem", w, "--report", "--privacy-report", report)
        assert r.exit_code == 0, r.output
        data = json.loads(report.read_text(encoding="utf-8"))
        seen.append((data["run"], data.get("survival"), r.stderr.replace(str(report), "R")))
    assert modes == ["", "whole"]
    assert seen[0] == seen[1] and seen[0][0]


def test_identical_inputs_of_one_run_get_independent_streams(corpus, modes):
    """Input j draws from family j: two copies of a file in one run are privatized independently
    (the same stream would release identical noise twice)."""
    tmp, emb, src = corpus
    a, b, folder = tmp / "a" / "x.txt", tmp / "b" / "y.txt", tmp / "two"
    for p in (a.parent, b.parent, folder):
        p.mkdir(exist_ok=True)
    a.write_bytes(src.read_bytes())
    b.write_bytes(src.read_bytes())
    assert privatize(emb, a, folder, "custext", 2, b).exit_code == 0
    assert (folder / "x.txt").read_bytes() != (folder / "y.txt").read_bytes()
    single = tmp / "single.txt"
    assert privatize(emb, a, single, "custext", 1).exit_code == 0
    assert single.read_bytes() == (folder / "x.txt").read_bytes()  # input 0: the same stream alone or with others


def test_secure_runs_with_workers(corpus, modes):
    pytest.importorskip("randomgen")
    tmp, emb, src = corpus
    outs = []
    for name in ("s1.txt", "s2.txt"):
        r = privatize(emb, src, tmp / name, "custext", 2, "--secure", seed=None)
        assert r.exit_code == 0, r.output
        outs.append((tmp / name).read_text(encoding="utf-8"))
    assert modes == ["whole", "whole"]
    assert outs[0] != outs[1] and outs[0].count("\n") == outs[1].count("\n") == src.read_text(encoding="utf-8").count("\n")


def test_an_error_in_a_worker_exits_1_and_leaves_no_output(corpus, modes, monkeypatch):
    from deniable.errors import DataError

    tmp, emb, src = corpus
    parent, real = os.getpid(), _text_fork.privatize_texts

    def failing(mech, texts, **kw):  # a data error on a later batch, in a worker only
        if os.getpid() != parent and "w140" in texts[-1]:
            raise DataError("bad batch", path="in.txt")
        return real(mech, texts, **kw)

    monkeypatch.setattr(_text_fork, "privatize_texts", failing)
    out = tmp / "failed.txt"
    r = privatize(emb, src, out, "tem", 2)
    assert r.exit_code == 1 and "bad batch" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert modes == ["whole"] and not out.exists() and not multiprocessing.active_children()
    assert not list(tmp.glob("failed*"))  # no temporary file left either
