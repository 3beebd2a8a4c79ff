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
            "--seed", str(p["seed"]), "--examples", ",".join(p["examples"]), "--json", out, "--no-progress"]
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
                              "--words", "10", "--draws", "60", "--seed", "9", "--report", str(rep), "--json", str(out)])
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
                                   "--draws", "20", "--json", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    seed = json.loads(out.read_text())["parameters"]["seed"]
    assert isinstance(seed, int) and seed >= 0


def test_explicit_words(tmp_path, emb_path):
    out = tmp_path / "a.json"
    res = CliRunner().invoke(cli, ["calibrate", "-m", "madlib", "--embedding", emb_path, "--epsilons", "2", "--word", "w3",
                                   "--word", "w7", "--draws", "20", "--seed", "1", "--json", str(out), "--no-progress"])
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
                                   "--draws", "10", "--seed", "2", "--json", "-", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["parameters"]["seed"] == 2
