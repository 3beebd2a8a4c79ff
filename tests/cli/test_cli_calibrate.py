"""Tests of `deniable calibrate`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from deniable.cli.calibrate import parse_param
from deniable.cli.main import cli


@pytest.fixture
def emb_path(tmp_path):
    rng = np.random.default_rng(0)
    p = tmp_path / "emb.npz"
    np.savez(p, words=np.array([f"w{i}" for i in range(60)]), vectors=rng.standard_normal((60, 5)).astype(np.float32))
    return str(p)


def _args_from_record(rec: dict, emb: str, out: str) -> list[str]:
    p = rec["parameters"]
    args = ["calibrate", "-m", p["mechanism"], "--epsilons", ",".join(repr(e) for e in p["epsilons"]), "--embedding", emb,
            "--draws", str(p["draws"]), "--eta", repr(p["eta"]), "--confidence", repr(p["confidence"]), "--method", p["method"],
            "--seed", str(p["seed"]), "--examples", ",".join(p["examples"]), "-o", out, "--no-progress"]
    for k, v in p["params"].items():
        args += ["--param", f"{k}={v}"]
    if isinstance(p["words"], int):
        args += ["--words", str(p["words"])]
    else:
        for w in p["words"]:
            args += ["--word", w]
    return args


def test_calibrate_writes_report_and_json_that_reproduces(tmp_path, emb_path):
    runner = CliRunner()
    out, rep = tmp_path / "a.json", tmp_path / "r.html"
    res = runner.invoke(cli, ["calibrate", "-m", "mahalanobis", "--param", "lam=0.5", "--embedding", emb_path, "--epsilons", "1,4,15",
                              "--words", "10", "--draws", "60", "--seed", "9", "--html-report", str(rep), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "N_w mean" in res.output and "seed=9" in res.output
    rec = json.loads(out.read_text())
    assert rec["parameters"]["params"] == {"lam": 0.5} and rec["parameters"]["seed"] == 9
    assert rec["parameters"]["embedding_fingerprint"] and rec["deniable_version"]
    assert "data:image/png;base64," in rep.read_text(encoding="utf-8")
    # re-run from the recorded parameters: identical numbers
    out2 = tmp_path / "b.json"
    res2 = runner.invoke(cli, _args_from_record(rec, emb_path, str(out2)))
    assert res2.exit_code == 0, res2.output
    rec2 = json.loads(out2.read_text())
    assert rec2["sweeps"] == rec["sweeps"] and rec2["examples"] == rec["examples"]
    assert rec2["parameters"] | {"words": 0} == rec["parameters"] | {"words": 0}


def test_seed_is_recorded_when_not_given(tmp_path, emb_path):
    out = tmp_path / "a.json"
    res = CliRunner().invoke(cli, ["calibrate", "-m", "madlib", "--embedding", emb_path, "--epsilons", "2", "--words", "5",
                                   "--draws", "20", "-o", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    seed = json.loads(out.read_text())["parameters"]["seed"]
    assert isinstance(seed, int) and seed >= 0


def test_explicit_words(tmp_path, emb_path):
    out = tmp_path / "a.json"
    res = CliRunner().invoke(cli, ["calibrate", "-m", "madlib", "--embedding", emb_path, "--epsilons", "2", "--word", "w3",
                                   "--word", "w7", "--draws", "20", "--seed", "1", "-o", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["sweeps"][0]["results"][0]["columns"]["word"] == ["w3", "w7"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-m", "nope"], "unknown mechanism"),
        (["-m", "madlib", "--epsilons", "1,x"], "comma-separated"),
        (["-m", "madlib", "--epsilons", "0,1"], "> 0"),
        (["-m", "madlib", "--param", "lam"], "KEY=VALUE"),
        (["-m", "madlib", "--param", "bogus=1"], "bogus"),
        (["-m", "madlib", "--word", "zzz"], "zzz"),
        (["-m", "madlib", "--draws", "0"], "draws"),
    ],
)
def test_usage_errors_exit_2(emb_path, extra, message):
    res = CliRunner().invoke(cli, ["calibrate", "--embedding", emb_path, "--no-progress", "--words", "3", "--draws", "5", *extra])
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_parse_param():
    assert parse_param("lam=0.5") == ("lam", 0.5)
    assert parse_param("k=3") == ("k", 3)
    assert parse_param("flag=true") == ("flag", True)
    assert parse_param("index=exact") == ("index", "exact")


def test_json_to_stdout_is_pure_json(emb_path):
    res = CliRunner().invoke(cli, ["calibrate", "-m", "madlib", "--embedding", emb_path, "--epsilons", "3", "--words", "4",
                                   "--draws", "10", "--seed", "2", "-o", "-", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["parameters"]["seed"] == 2


def _one_line_error(res) -> str:
    assert "Traceback" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, res.output
    return errors[0]


BASE = ["calibrate", "--words", "3", "--draws", "5", "--epsilons", "2"]


@pytest.mark.parametrize("option", ["--html-report", "-o"])
def test_bad_output_paths_rejected_before_computing(tmp_path, emb_path, option):
    target = str(tmp_path / "nonexist" / "r.out")
    res = CliRunner().invoke(cli, [*BASE, "-m", "madlib", "--embedding", emb_path, option, target, "--progress"])
    assert res.exit_code == 2 and "does not exist" in _one_line_error(res)
    assert "calibrate:" not in res.stderr  # the forced progress bar never started: nothing ran
    res = CliRunner().invoke(cli, [*BASE, "-m", "madlib", "--embedding", emb_path, option, str(tmp_path)])
    assert res.exit_code == 2 and "directory" in _one_line_error(res)


def test_report_to_stdout_is_refused(emb_path):
    res = CliRunner().invoke(cli, [*BASE, "-m", "madlib", "--embedding", emb_path, "--html-report", "-"])
    assert res.exit_code == 2 and "stdout" in _one_line_error(res)


def test_unknown_param_lists_known_names(emb_path):
    res = CliRunner().invoke(cli, [*BASE, "-m", "mahalanobis", "--embedding", emb_path, "--param", "lambda=0.5"])
    line = _one_line_error(res)
    assert res.exit_code == 2 and "lambda" in line and "known:" in line and "lam" in line
    assert "unexpected keyword" not in line


@pytest.mark.filterwarnings("ignore::deniable.errors.DeniableWarning")  # "binarizing ... takes a while"
def test_brr_errors_use_cli_spelling(tmp_path):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a 1 0 0\nb 0 1 0\nc 0 0 1\nd 1 1 0\n")
    res = CliRunner().invoke(cli, [*BASE, "-m", "brr", "--embedding", str(tiny)])
    line = _one_line_error(res)
    assert res.exit_code == 2 and "n_words=4, dim=3" in line and "--param n_bits=3" in line
    # 20-bit codes have no exact probabilities: the hint names the option, not a Python keyword
    res = CliRunner().invoke(cli, [*BASE, "-m", "brr", "--embedding", str(tiny), "--param", "n_bits=20",
                                   "--param", "method=random-projection", "--method", "exact"])
    line = _one_line_error(res)
    assert res.exit_code == 2 and "--method sample" in line and "method='sample'" not in line


def test_words_empty_message_says_why():
    from deniable.cli.calibrate import _friendly

    msg = _friendly("words is empty: nothing to measure", n_words_asked=200)
    assert "--words 200" in msg and "--word" in msg and "words is empty" not in msg


def test_tem_gamma_recorded_per_epsilon(emb_path):
    res = CliRunner().invoke(cli, ["calibrate", "-m", "tem", "--embedding", emb_path, "--epsilons", "1,4", "--words", "3",
                                   "--param", "precomputed_neighbors=8", "--seed", "0", "-o", "-", "--no-progress"])
    assert res.exit_code == 0, res.output
    sweep = json.loads(res.stdout)["sweeps"][0]
    gammas = [r["params"]["gamma"] for r in sweep["results"]]
    assert sweep["params"]["gamma"] == gammas and gammas[0] > gammas[1]  # γ shrinks as ε grows
    assert sweep["params"]["precomputed_neighbors"] == 8  # ε-independent parameters stay scalars


@pytest.mark.parametrize("spelling", ["--limit", "--embedding-limit"])
def test_limit_is_applied_and_recorded(emb_path, spelling):
    res = CliRunner().invoke(cli, [*BASE, "-m", "madlib", "--embedding", emb_path, spelling, "20", "--words", "50", "--seed", "1",
                                   "-o", "-", "--no-progress"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["parameters"]["limit"] == 20 and rec["parameters"]["embedding_size"][0] == 20
    assert int(rec["sweeps"][0]["summaries"][0]["n_words"]) == 20


@pytest.mark.parametrize(("flag", "drawn"), [(None, False), ("--no-progress", False), ("--progress", True)])
def test_progress_only_on_a_terminal_unless_forced(emb_path, flag, drawn):
    res = CliRunner().invoke(cli, [*BASE, "-m", "madlib", "--embedding", emb_path, "--seed", "0", *([flag] if flag else [])])
    assert res.exit_code == 0, res.output
    assert ("calibrate:" in res.stderr) is drawn


def test_max_nw_prints_the_chosen_epsilon_and_table(emb_path, tmp_path):
    out = tmp_path / "t.json"
    r = CliRunner().invoke(cli, ["calibrate", "-m", "tem", "--embedding", emb_path, "--max-nw", "0.5", "-o", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text())
    eps = rec["choice"]["epsilon"]
    assert f"epsilon = {eps:.6g}" in r.output and "chosen for max_n_w=0.5" in r.output
    assert [row["max_n_w"] for row in rec["table"]] == [0.9, 0.5, 0.1]
    import deniable

    m = deniable.TEM(deniable.load_embedding(emb_path), epsilon=eps)
    assert max(m.probabilities(i)[i] for i in range(60)) <= 0.5
    for bad in ("0", "1", "nan"):
        r = CliRunner().invoke(cli, ["calibrate", "-m", "tem", "--embedding", emb_path, "--max-nw", bad])
        assert r.exit_code == 2 and "strictly between 0 and 1" in r.output


def test_calibrate_without_a_terminal_prints_progress_lines(tmp_path, emb_path, monkeypatch):
    """Without a terminal (a log file, a scheduler) progress is one plain line every
    LOG_INTERVAL seconds (30), with an ETA; here the interval is 0 so every update prints."""
    import deniable._progress as prog

    monkeypatch.setattr(prog, "LOG_INTERVAL", 0.0)
    res = CliRunner().invoke(cli, ["calibrate", "-m", "madlib", "--embedding", emb_path, "--epsilons", "2,4", "--words", "5",
                                   "--draws", "20", "-o", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("calibrate: ")]
    assert lines and "ETA" in lines[0] and "of 10 words" in lines[0] and lines[-1].endswith("done")
    assert "\r" not in res.stderr  # no bar redraws in a log
