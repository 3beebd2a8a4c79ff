"""One vocabulary across the commands: readable run summaries, exit 1 for a missing input in
every command, one --param grammar, one epsilon check, --embedding-limit and -o/--output with
their deprecated aliases, and progress lines without a terminal."""

from __future__ import annotations

import json

import click
import numpy as np
import pytest
from click.testing import CliRunner

from deniable.cli._options import parse_param, parse_params
from deniable.cli._output import WIDTH, wrap
from deniable.cli.main import cli


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def emb_path(tmp_path):
    rng = np.random.default_rng(11)
    p = tmp_path / "emb.npz"
    words = [f"w{i}" for i in range(150)]
    np.savez(p, words=np.array(words), vectors=rng.standard_normal((150, 5)).astype(np.float32))
    return str(p)


@pytest.fixture
def text_path(tmp_path):
    rng = np.random.default_rng(2)
    p = tmp_path / "in.txt"
    p.write_text("\n".join(" ".join(f"w{i}" for i in rng.integers(0, 150, 14)) + " zzz qqq" for _ in range(25)) + "\n")
    return str(p)


# -- the run summary and --report -----------------------------------------------------------------


def _tail(stderr: str, mechanism: str) -> list[str]:
    """The lines printed from the summary line on (what a run prints at its end)."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{mechanism} epsilon="))
    return lines[start:]


@pytest.mark.parametrize(
    "extra",
    [
        ["-m", "madlib", "-e", "0.01"],  # almost noise: a warning naming the useful range
        ["-m", "madlib", "-e", "1000"],  # almost the input
        ["-m", "tem", "--max-nw", "0.5"],  # how the target chose epsilon
        ["-m", "tem", "--max-nw", "0.5", "--report"],
        ["-m", "madlib", "-e", "3", "--oov", "keep", "--report"],
        ["-m", "mahalanobis", "-e", "2", "--param", "lam=0.5", "--report", "--oov", "drop"],
    ],
)
def test_every_summary_and_report_line_fits_120_characters(emb_path, text_path, tmp_path, extra):
    res = run("privatize", text_path, "-o", str(tmp_path / "out.txt"), "--embedding", emb_path, "--seed", "0", "--no-progress", *extra)
    assert res.exit_code == 0, res.output
    tail = _tail(res.stderr, extra[1])
    assert len(tail) >= (8 if "--report" in extra else 1)
    too_long = [line for line in tail if len(line) > WIDTH]
    assert not too_long, too_long


def test_a_long_jsonl_note_is_wrapped_too(emb_path, tmp_path):
    src = tmp_path / "in.jsonl"
    others = {f"a_rather_long_field_name_{i}": i for i in range(12)}
    src.write_text(json.dumps({"text": "w1 w2 w3", **others}) + "\n")
    res = run("privatize", str(src), "-o", str(tmp_path / "out.jsonl"), "--embedding", emb_path, "-m", "madlib", "-e", "5", "--no-progress")
    assert res.exit_code == 0, res.output
    assert all(len(line) <= WIDTH for line in res.stderr.splitlines()), res.stderr
    assert "a_rather_long_field_name_11" in res.stderr  # wrapped, nothing cut


def test_the_report_explains_each_figure(emb_path, text_path, tmp_path):
    res = run("privatize", text_path, "-o", str(tmp_path / "out.txt"), "--embedding", emb_path, "-m", "tem", "--max-nw", "0.5",
              "--seed", "0", "--no-progress", "--report")
    assert res.exit_code == 0, res.output
    err = " ".join(res.stderr.split())
    for needle in [
        "input-dependent",
        "per-document bound over the 25 document(s): median",
        "= epsilon*l*P_d^max for a document of l privatized words",
        "an observer's odds between the two documents change by at most a factor e^bound",
        "typical per-document loss: median",
        "an average, not a bound",
        "(the largest)", "(the mean)",
        "out of the vocabulary (--oov unk: each privatized as the UNK point)",
        "N_w, the probability that the output word is the input word",
        "chosen for max_n_w=0.5",  # the full statement of how epsilon was chosen, with its source
    ]:
        assert needle in err, needle
    plain = run("privatize", text_path, "-o", str(tmp_path / "out2.txt"), "--embedding", emb_path, "-m", "tem", "--max-nw", "0.5",
                "--seed", "0", "--no-progress")
    assert "per-document bound" not in plain.stderr and "(how and from which calibration: --report)" in " ".join(plain.stderr.split())


def test_wrap_never_breaks_a_word_and_indents_continuations():
    text = "warning: " + " ".join(["word"] * 60) + "; second part"
    lines = wrap(text, sep="; ")
    assert all(len(x) <= WIDTH for x in lines) and lines[-1] == "  second part"
    assert all(x.startswith("  ") for x in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join(text.replace("; ", " ").split())
    long_path = "/x" * 100
    assert wrap(f"file {long_path}") == ["file", f"  {long_path}"]  # a single long word stays whole


# -- exit 1 for a missing input, in every command -------------------------------------------------


def _missing_cases(tmp_path, emb_path, text_path):
    missing = str(tmp_path / "nofile.dat")
    out = str(tmp_path / "out")
    return [
        ["privatize", missing, "-m", "madlib", "-e", "1"],
        ["privatize", text_path, "-m", "madlib", "-e", "1", "--embedding", missing],
        ["privatize", text_path, "-m", "santext_plus", "-e", "1", "--embedding", emb_path, "--fit", missing],
        ["evaluate", missing, "-m", "madlib", "-e", "1", "-o", out],
        ["evaluate", text_path, "-m", "madlib", "-e", "1", "-o", out, "--embedding", missing],
        ["calibrate", "-m", "madlib", "--embedding", missing],
        ["privacy-ratio", "madlib", "mahalanobis", "-e", "1", "--embedding", missing],
        ["privacy-ratio", "madlib", "brr", "-e", "1", "--binary", missing],
        ["ngrams", "count", missing, "--public", text_path, "-o", out + ".npz"],
        ["ngrams", "count", text_path, "--public", missing, "-o", out + ".npz"],
        ["ngrams", "release", missing, "-e", "1", "-o", out + ".tsv"],
        ["ngrams", "evaluate", missing, "--counts", text_path],
        ["export", "brr", "-o", out + ".brr", "--embedding", missing],
        ["precompute", "tem", "-e", "1", "--embedding", missing],
        ["precompute", "santext", "--embedding", missing],
    ]


def test_a_missing_input_file_is_a_data_error_in_every_command(tmp_path, emb_path, text_path):
    for args in _missing_cases(tmp_path, emb_path, text_path):
        res = run(*args)
        assert res.exit_code == 1, (args, res.output)
        lines = res.stderr.splitlines()
        assert lines == [f"Error: {tmp_path / 'nofile.dat'}: file not found"], (args, res.stderr)
    assert not (tmp_path / "out").exists()


def test_a_directory_for_an_input_file_is_a_data_error_and_usage_errors_stay_2(tmp_path, emb_path, text_path):
    res = run("ngrams", "release", str(tmp_path), "-e", "1", "-o", str(tmp_path / "r.tsv"))
    assert res.exit_code == 1 and res.stderr.strip() == f"Error: {tmp_path}: is a directory; give a file"
    res = run("privatize", text_path, "-m", "madlib", "-e", "1", "--embedding", emb_path, "--no-such-option")  # control
    assert res.exit_code == 2


# -- one epsilon check, one --param grammar ----------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["privatize", "{text}", "-m", "madlib", "-e", "0"],
        ["evaluate", "{text}", "-m", "madlib", "-e", "0", "-o", "{out}"],
        ["calibrate", "-m", "madlib", "-e", "1,0"],
        ["privacy-ratio", "madlib", "mahalanobis", "-e", "-1"],
        ["ngrams", "release", "{text}", "-e", "0", "-o", "{out}.tsv"],
        ["precompute", "tem", "-e", "0"],
        ["precompute", "santext", "-e", "inf"],
    ],
)
def test_every_command_checks_epsilon_the_same_way(tmp_path, emb_path, text_path, args):
    args = [a.format(text=text_path, out=str(tmp_path / "out")) for a in args]
    res = run(*args, "--embedding", emb_path) if args[0] not in ("ngrams",) else run(*args)
    assert res.exit_code == 2, res.output
    assert "epsilon must be a finite number > 0" in res.stderr, res.stderr


def test_one_param_grammar():
    assert parse_param("lam=0.5") == ("lam", 0.5)
    assert parse_param("k=3") == ("k", 3) and isinstance(parse_param("k=3")[1], int)
    assert parse_param("flag=True") == ("flag", True) and parse_param("flag=false") == ("flag", False)
    assert parse_param("x=None") == ("x", None) and parse_param("x=null") == ("x", None)
    assert parse_param("metric=angular") == ("metric", "angular")
    assert parse_param("ids=[1, 2]") == ("ids", [1, 2])
    assert parse_param("max-words=3") == ("max_words", 3)
    assert parse_param(" beta = 1e-3 ") == ("beta", 0.001)
    assert parse_params(["k=3", "k=3", "lam=0.5"]) == {"k": 3, "lam": 0.5}
    for bad in ["lam", "=3", "1x=2"]:
        with pytest.raises(click.BadParameter, match="expected KEY=VALUE"):
            parse_param(bad)
    with pytest.raises(click.BadParameter, match="given twice"):
        parse_params(["k=3", "k=4"])
    from deniable.cli import calibrate

    assert calibrate.parse_param is parse_param  # the one parser, re-exported


def test_calibrate_and_privatize_read_params_alike(emb_path, text_path, tmp_path):
    """A Python-style bool and a dashed key mean the same to both commands."""
    for args in (["privatize", text_path, "-o", str(tmp_path / "o.txt"), "-m", "mahalanobis", "-e", "5", "--seed", "0"],
                 ["calibrate", "-m", "mahalanobis", "-e", "5", "--words", "3", "--draws", "5"]):
        res = run(*args, "--embedding", emb_path, "--no-progress", "--param", "lam=0.25", "--param", "lam=0.25")
        assert res.exit_code == 0, res.output
        res = run(*args, "--embedding", emb_path, "--no-progress", "--param", "lam=0.25", "--param", "lam=0.5")
        assert res.exit_code == 2 and "lam given twice" in res.stderr


# -- --embedding-limit, -o/--output and their deprecated aliases ----------------------------------


@pytest.mark.parametrize("command", [["privatize"], ["calibrate"], ["privacy-ratio"], ["evaluate"], ["export", "brr"],
                                     ["precompute", "tem"], ["precompute", "santext"]])
def test_help_shows_embedding_limit_once_and_hides_limit(command):
    res = run(*command, "--help")
    assert res.exit_code == 0
    assert res.output.count("--embedding-limit N") == 1 and "--limit" not in res.output


def test_limit_still_works_with_a_warning(emb_path, text_path, tmp_path):
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"
    base = ["privatize", text_path, "-m", "madlib", "-e", "5", "--seed", "1", "--embedding", emb_path, "--no-progress"]
    a = run(*base, "-o", str(out_a), "--limit", "40")
    b = run(*base, "-o", str(out_b), "--embedding-limit", "40")
    assert a.exit_code == b.exit_code == 0, a.output
    assert "warning: --limit is deprecated; use --embedding-limit" in a.stderr and "deprecated" not in b.stderr
    assert out_a.read_text() == out_b.read_text()
    full = run(*base, "-o", str(tmp_path / "c.txt"))  # control: the limit changes the vocabulary, hence the output
    assert full.exit_code == 0 and (tmp_path / "c.txt").read_text() != out_a.read_text()
    res = run(*base, "--limit", "40", "--embedding-limit", "50")
    assert res.exit_code == 2 and "give --embedding-limit only" in res.stderr


def test_calibrate_writes_json_with_o_and_json_is_a_deprecated_alias(emb_path, tmp_path):
    base = ["calibrate", "-m", "madlib", "-e", "2", "--words", "3", "--draws", "5", "--seed", "0", "--embedding", emb_path, "--no-progress"]
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    a = run(*base, "-o", str(new))
    b = run(*base, "--json", str(old))
    assert a.exit_code == b.exit_code == 0, b.output
    assert "warning: --json is deprecated; use -o/--output" in b.stderr and "deprecated" not in a.stderr
    assert json.loads(new.read_text())["sweeps"] == json.loads(old.read_text())["sweeps"]


def test_evaluate_output_and_its_deprecated_out(tmp_path, emb_path):
    data = tmp_path / "d.csv"
    data.write_text("text,label\n" + "".join(f"w{i} w{i + 1},{i % 2}\n" for i in range(20)))
    res = run("evaluate", str(data), "-m", "madlib", "-e", "1", "--embedding", emb_path, "--out", str(tmp_path / "o"), "--attacks", "bogus")
    assert "warning: --out is deprecated; use -o/--output" in res.stderr
    assert res.exit_code == 2 and "unknown attack(s) bogus" in res.stderr  # the alias reached the command
    res = run("evaluate", str(data), "-m", "madlib", "-e", "1", "--embedding", emb_path)
    assert res.exit_code == 2 and "Missing option '-o' / '--output'" in res.stderr
    res = run("evaluate", "--help")
    assert "--out " not in res.output and "-o, --output DIR" in res.output


# -- --max-nw through the library, progress without a terminal -----------------------------------


def test_max_nw_builds_through_mechanism_for_target(emb_path, text_path, tmp_path, monkeypatch):
    from deniable.calibration import targets

    calls = []
    real = targets.mechanism_for_target

    def spy(*args, **kwargs):
        calls.append(kwargs.get("max_n_w"))
        return real(*args, **kwargs)

    monkeypatch.setattr(targets, "mechanism_for_target", spy)
    res = run("privatize", text_path, "-o", str(tmp_path / "o.txt"), "-m", "tem", "--max-nw", "0.5", "--embedding", emb_path,
              "--seed", "0", "--no-progress")
    assert res.exit_code == 0, res.output
    assert calls == [0.5]
    res = run("privatize", text_path, "-o", str(tmp_path / "o.txt"), "-m", "tem", "-e", "2", "--embedding", emb_path, "--no-progress")
    assert res.exit_code == 0 and calls == [0.5]  # a direct epsilon does not calibrate


@pytest.mark.parametrize(
    "args, desc",
    [
        (["calibrate", "-m", "madlib", "-e", "1,5", "--words", "5", "--draws", "20"], "calibrate:"),
        (["calibrate", "-m", "tem", "--max-nw", "0.5"], "calibrate tem:"),
        (["privacy-ratio", "madlib", "mahalanobis", "-e", "1"], "pairwise euclidean:"),
    ],
)
def test_calibrate_and_privacy_ratio_print_progress_lines_without_a_terminal(tmp_path, monkeypatch, args, desc):
    """Without a terminal (CliRunner's stderr is not one) the long steps print plain progress
    lines, every LOG_INTERVAL <= 30 s (here 0 s, so every update prints); --no-progress: none."""
    from deniable import _progress

    assert _progress.LOG_INTERVAL <= 30
    rng = np.random.default_rng(len(desc) + len(args))  # a vocabulary of its own: nothing cached
    emb = tmp_path / "fresh.npz"
    np.savez(emb, words=np.array([f"v{i}" for i in range(90)]), vectors=rng.standard_normal((90, 4)).astype(np.float32))
    monkeypatch.setattr(_progress, "LOG_INTERVAL", 0.0)
    res = run(*args, "--embedding", str(emb))
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith(desc)]
    assert lines and "\r" not in res.stderr and lines[-1].endswith("- done"), res.stderr
    emb2 = tmp_path / "fresh2.npz"
    np.savez(emb2, words=np.array([f"u{i}" for i in range(90)]), vectors=rng.standard_normal((90, 4)).astype(np.float32))
    quiet = run(*args, "--embedding", str(emb2), "--no-progress")
    assert quiet.exit_code == 0 and not [x for x in quiet.stderr.splitlines() if x.startswith(desc)], quiet.stderr
