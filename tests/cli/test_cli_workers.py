"""`deniable privatize --workers`: the same output, summary and reports for a seed whatever the
number of worker processes; workers stopped after the run; errors exit 1 with one line."""

from __future__ import annotations

import json
import multiprocessing
import re

import pytest
from click.testing import CliRunner

from deniable import Ledger
from deniable.backends import text as parallel
from deniable.cli.main import cli

from .._fork import WORDS, write_corpus


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """An embedding file and a text of about 130,000 characters: many batches, several groups."""
    tmp = tmp_path_factory.mktemp("workers")
    pool = [*WORDS, "The", "CAT", "Zebra", "don't", "it's", "NASA", "w7", "w150"]
    emb, src, lines = write_corpus(tmp, seed=0, extra_words=200, pool=pool, lines=6000, max_words=30)
    jsonl = tmp / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"user": f"u{i % 7}", "body": t}) + "\n" for i, t in enumerate(lines[:3000])), encoding="utf-8")
    return tmp, emb, src, jsonl


class Started(list):
    """The worker processes started, and the mode of each start."""

    def __init__(self) -> None:
        super().__init__()
        self.modes: list[str] = []


@pytest.fixture
def spy(monkeypatch):
    """Small groups (so both workers are busy at once) and every worker process started."""
    monkeypatch.setattr(parallel, "GROUP_CHARS", 20_000)
    started = Started()
    real = parallel.ParallelPrivatizer._start

    def start(self):
        real(self)
        started.extend(p for p in self._procs if p not in started)
        started.modes.append(self._started)

    monkeypatch.setattr(parallel.ParallelPrivatizer, "_start", start)
    return started


def summary(stderr: str) -> str:
    """stderr without the one-time notes of a table built and cached by the first run."""
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("note: building"))


def privatize(emb, src, out, mechanism, workers, *extra, input=None):
    return run("privatize", src, "-o", out, "-m", mechanism, "-e", "3", "--embedding", emb, "--seed", "11", "--workers", workers, *extra, input=input)


@pytest.mark.filterwarnings("ignore:BRR. binarizing")
@pytest.mark.parametrize("mechanism", ["madlib", "tem", "santext", "custext", "brr"])
def test_output_and_summary_do_not_depend_on_the_workers(corpus, spy, mechanism):
    tmp, emb, src, _ = corpus
    extra = ("--param", "n_bits=16", "--param", "method=random-projection") if mechanism == "brr" else ()
    outs, errs = [], []
    for w in (1, 2):
        out = tmp / f"{mechanism}_{w}.txt"
        r = privatize(emb, src, out, mechanism, w, *extra)
        assert r.exit_code == 0, r.output
        outs.append(out.read_bytes())
        errs.append(summary(r.stderr))
    # workers started (one forked beside this process; two text-only workers where FAISS is loaded), and stopped
    assert len(spy) == (1 if set(spy.modes) == {"whole"} else 2) and set(spy.modes) in ({"whole"}, {"text"}) and not any(p.is_alive() for p in spy)
    assert outs[0] == outs[1] and errs[0] == errs[1] and "words" in errs[0]
    # a failing control: another seed changes the output
    r = run("privatize", src, "-o", tmp / "other.txt", "-m", mechanism, "-e", "3", "--embedding", emb, "--seed", "12", "--workers", "2", *extra)
    assert r.exit_code == 0 and (tmp / "other.txt").read_bytes() != outs[0]


def test_reports_and_ledger_see_every_batch(corpus, spy):
    tmp, emb, src, jsonl = corpus
    results = []
    for w in (1, 2):
        book = tmp / f"ledger{w}.db"
        out, report = tmp / f"r{w}.jsonl", tmp / f"r{w}.json"
        r = privatize(emb, jsonl, out, "tem", w, "--column", "body", "--report", "--privacy-report", report, "--ledger", book,
                      "--dataset", "d", "--user-column", "user")
        assert r.exit_code == 0, r.output
        data = json.loads(report.read_text(encoding="utf-8"))
        rel = Ledger(book).releases()[0]
        stderr = re.sub(r"release \w+ recorded", "release ID recorded", summary(r.stderr).replace(str(report), "REPORT").replace(str(out), "OUT").replace(str(book), "BOOK"))
        results.append((out.read_bytes(), stderr, data["run"], data.get("survival"), (rel.records, rel.words, rel.max_words, rel.users)))
    assert spy and not any(p.is_alive() for p in spy)
    assert results[0] == results[1]
    assert results[0][4][0] == 3000 and "privacy report" in results[0][1]


def test_stdin_and_several_inputs(corpus, spy):
    tmp, emb, src, _ = corpus
    text = src.read_text(encoding="utf-8")
    outs = [privatize(emb, "-", "-", "custext", w, input=text).stdout for w in (1, 2)]
    assert outs[0] == outs[1] and outs[0].count("\n") == text.count("\n")
    folder = [tmp / "f1", tmp / "f2"]
    for d in folder:
        d.mkdir()
    second = tmp / "second.txt"
    second.write_text(text[:40_000], encoding="utf-8")
    for w, d in zip((1, 2), folder):
        assert privatize(emb, src, d, "tem", w, second).exit_code == 0
    assert all((folder[0] / n).read_bytes() == (folder[1] / n).read_bytes() for n in ("in.txt", "second.txt"))


def test_a_data_error_mid_input_exits_1_with_one_line(corpus, spy):
    tmp, emb, _, jsonl = corpus
    bad = tmp / "bad.jsonl"
    bad.write_text(jsonl.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    out = tmp / "bad_out.jsonl"
    r = CliRunner().invoke(cli, ["privatize", str(bad), "-o", str(out), "-m", "tem", "-e", "3", "--embedding", str(emb), "--column", "body", "--workers", "2"])
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1 and "3001" in r.output, r.output
    assert spy and not any(p.is_alive() for p in spy) and not multiprocessing.active_children()
    assert not out.exists()


def test_auto_starts_workers_only_for_large_inputs(corpus, spy, monkeypatch):
    tmp, emb, src, _ = corpus
    monkeypatch.setattr(parallel, "_cores", lambda: 4)  # 3 workers
    assert privatize(emb, src, tmp / "auto.txt", "tem", "auto").exit_code == 0
    assert not spy  # 130 kB: below AUTO_MIN_CHARS
    monkeypatch.setattr(parallel, "AUTO_MIN_CHARS", 50_000)
    monkeypatch.setattr(parallel, "AUTO_MIN_CHARS_WHOLE", 50_000)  # workers that sample (forked), or the text work only
    assert privatize(emb, src, tmp / "auto2.txt", "tem", "auto").exit_code == 0
    assert len(spy) == 3 and (tmp / "auto.txt").read_bytes() == (tmp / "auto2.txt").read_bytes()
    text = src.read_text(encoding="utf-8")  # stdin: the first 50,000 characters in this process, then the workers
    assert privatize(emb, "-", tmp / "auto3.txt", "tem", "auto", input=text).exit_code == 0
    assert len(spy) == 6 and (tmp / "auto3.txt").read_bytes() == (tmp / "auto.txt").read_bytes()
    monkeypatch.setattr(parallel, "_cores", lambda: 3)
    assert privatize(emb, src, tmp / "auto4.txt", "tem", "auto").exit_code == 0 and len(spy) == 6


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_bad_worker_counts_are_usage_errors(corpus, value):
    tmp, emb, src, _ = corpus
    r = CliRunner().invoke(cli, ["privatize", str(src), "-m", "tem", "-e", "1", "--embedding", str(emb), "--workers", value])
    assert r.exit_code == 2 and "--workers" in r.output


def test_plain_text_output_does_not_depend_on_counting_records(corpus, tmp_path, monkeypatch):
    """Without --report, --privacy-report or --ledger a plain-text input is read a block of lines
    at a time as one record; with them, a record per line: the same output bytes."""
    from deniable.cli import privatize as cli_privatize

    _, emb, src, _ = corpus
    modes: list[bool] = []
    real = cli_privatize.read_records
    monkeypatch.setattr(cli_privatize, "read_records", lambda *a, **k: (modes.append(k["joined"]), real(*a, **k))[1])
    text = src.read_text(encoding="utf-8")
    odd = tmp_path / "odd.txt"  # long lines, non-ASCII words, blank and CRLF lines, no final line break
    odd.write_text(text[:20_000] + "\r\n\n" + " ".join(text.split()[:9000]) + "\nCafé ÉTÉ don't\n" + text[20_000:40_000].rstrip("\n"), encoding="utf-8")
    for path in (src, odd):
        outs = []
        for extra in ((), ("--report",)):
            out = tmp_path / f"out{len(outs)}.txt"
            r = privatize(emb, path, out, "tem", "1", *extra)
            assert r.exit_code == 0, r.output
            outs.append(out.read_bytes())
        assert outs[0] == outs[1] and outs[0].count(b"\n") == path.read_bytes().count(b"\n")
    assert modes == [True, False, True, False]
