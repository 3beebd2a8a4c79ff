"""``deniable ngrams count|release|evaluate`` end to end with CliRunner."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.ngrams.io import load_counts, read_release

PUBLIC = "the cat sat on the mat\nthe dog sat on the log\na cat sat on a mat\nthe cat sat on the log\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "public.txt").write_text(PUBLIC)
    recs = [
        {"user": "u1", "text": "The cat sat on the mat. secret words here"},
        {"user": "u2", "text": "the dog sat on the log"},
        {"user": "u1", "text": "a cat sat on a mat"},
        {"user": "u3", "text": "the cat sat on the log"},
    ]
    (tmp_path / "users.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / "users.csv").write_text("author,body\nu1,the cat sat on the mat\nu2,\"the dog sat on the log\"\n")
    return tmp_path


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_count_release_evaluate_roundtrip(files):
    counts = files / "counts.npz"
    r = run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-n", "3", "-o", str(counts))
    assert r.exit_code == 0, r.output
    users, vocab = load_counts(counts)
    assert users.user_ids == ("u1", "u2", "u3") and users.dropped > 0
    assert not any("secret" in k for k in vocab.keys)

    out = files / "rel.tsv"
    r = run("ngrams", "release", str(counts), "-e", "1", "-d", "1e-6", "-S", "0.5", "--rho", "0.4", "--seed", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    keys, probs, meta = read_release(out)
    assert set(keys) == set(vocab.keys) and np.isclose(probs.sum(), 1)
    assert meta["mechanism"] == "bayesian" and meta["calibration"] == "analytic" and meta["params"]["S"] == 0.5
    assert meta["sensitivity_method"] == "exact" and meta["epsilon"] == 1.0
    # the default (paper's local sensitivity) is not formal DP: one warning line, nothing data dependent written
    warn = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warn) == 1 and "NOT a formal differential-privacy guarantee" in warn[0]
    assert meta["formal_dp"] is False and "sigma" not in meta and "sensitivity" not in meta
    assert "n_users" not in out.read_text().splitlines()[0] and "sigma" not in r.stderr and "diagnostics" not in r.stderr

    r = run("ngrams", "evaluate", str(out), "--counts", str(counts), "--heldout", str(counts))
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["kl"] >= 0 and res["perplexity"] >= 1


@pytest.mark.parametrize("mech", ["laplace", "laplace-public", "k-anonymity"])
def test_release_baselines_parquet(files, mech):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    out = files / "rel.parquet"
    args = ["ngrams", "release", str(counts), "-m", mech, "--seed", "0", "-o", str(out), "-K", "1"]
    if mech != "k-anonymity":
        args += ["-e", "0.5", "-W", "2"]
    r = run(*args)
    assert r.exit_code == 0, r.output
    keys, probs, meta = read_release(out)
    assert meta["mechanism"] == mech and np.isclose(probs.sum(), 1)
    formal = mech == "laplace"  # laplace-public's default L1 sensitivity is local; k-anonymity is not DP
    assert meta["formal_dp"] is formal and ("warning:" in r.stderr) is not formal
    assert ("laplace_scale" in meta) is formal and "n_users" not in json.dumps(meta)


def test_laplace_needs_W_and_paper_rule_warns(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    out = files / "rel.tsv"
    for mech in ("laplace", "laplace-public"):
        r = run("ngrams", "release", str(counts), "-m", mech, "-e", "1", "-o", str(out))
        assert r.exit_code == 2 and "-W is required" in r.output
    assert run("ngrams", "release", str(counts), "-m", "laplace", "-e", "1", "-W", "lots", "-o", str(out)).exit_code == 2
    assert not out.exists()
    r = run("ngrams", "release", str(counts), "-m", "laplace", "-e", "1", "-W", "paper-rule", "--seed", "0", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "warning:" in r.stderr and "user count" in r.stderr
    _, _, meta = read_release(out)
    assert meta["formal_dp"] is False and meta["params"]["W"] == "paper-rule" and "laplace_scale" not in meta
    r = run("ngrams", "release", str(counts), "-m", "laplace-public", "-e", "1", "-W", "3", "--sensitivity", "2", "--seed", "0", "-o", str(out))
    assert r.exit_code == 0 and "warning:" not in r.stderr
    assert read_release(out)[2]["formal_dp"] is True


def test_formal_bayesian_and_diagnostics_flag(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    out = files / "rel.parquet"
    r = run("ngrams", "release", str(counts), "-e", "1", "--sensitivity", "3", "--seed", "0", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "warning:" not in r.stderr and "formal_dp=True" in r.stderr
    _, _, meta = read_release(out)
    assert meta["formal_dp"] is True and meta["params"]["sensitivity_bound"] == 3.0 and meta["sigma"] > 0
    assert run("ngrams", "release", str(counts), "-e", "1", "--sensitivity", "-1", "-o", str(out)).exit_code == 2
    # diagnostics only on request, on stderr, with a warning; never in the file
    r = run("ngrams", "release", str(counts), "-e", "1", "--diagnostics", "--seed", "0", "-o", str(out))
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    diag = [line for line in lines if line.startswith("diagnostics: ")]
    assert len(diag) == 1 and any("NOT privatized" in line for line in lines)
    d = json.loads(diag[0][len("diagnostics: "):])
    assert d["n_users"] == 3 and d["sigma"] > 0 and d["gamma"] > 0
    assert r.stdout == "" and "n_users" not in json.dumps(read_release(out)[2])


def test_tuned_release(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    out = files / "rel.tsv"
    r = run("ngrams", "release", str(counts), "-e", "2", "--tune", "--score", "expected", "--seed", "1", "-o", str(out))
    assert r.exit_code == 0, r.output
    _, _, meta = read_release(out)
    assert meta["mechanism"] == "bayesian-tuned" and meta["params"]["epsilon_tune"] == pytest.approx(2 / 3)
    assert meta["params"]["score"] == "expected" and meta["formal_dp"] is False
    assert "S" not in meta["params"] and "rho" not in meta["params"] and "warning:" in r.stderr


def test_csv_input_with_custom_fields(files):
    counts = files / "c.npz"
    r = run("ngrams", "count", str(files / "users.csv"), "--public", str(files / "public.txt"), "--user-field", "author", "--text-field", "body", "-o", str(counts))
    assert r.exit_code == 0, r.output
    users, _ = load_counts(counts)
    assert users.n_users == 2


def test_usage_and_data_errors(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    r = run("ngrams", "release", str(counts), "-o", str(files / "x.tsv"))
    assert r.exit_code == 2 and "epsilon" in r.output
    r = run("ngrams", "release", str(counts), "-e", "-1", "-o", str(files / "x.tsv"))
    assert r.exit_code == 2
    r = run("ngrams", "release", str(counts), "-e", "1", "--tune", "-m", "laplace", "-o", str(files / "x.tsv"))
    assert r.exit_code == 2
    assert not (files / "x.tsv").exists()
    bad = files / "bad.jsonl"
    bad.write_text('{"user": "a", "text": "x"}\n{not json\n')
    r = run("ngrams", "count", str(bad), "--public", str(files / "public.txt"), "-o", str(files / "c2.npz"))
    assert r.exit_code == 1 and "bad.jsonl:2" in r.output
    assert not (files / "c2.npz").exists()
    r = run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "--user-field", "who", "-o", str(files / "c3.npz"))
    assert r.exit_code == 1 and "who" in r.output
    notcounts = files / "public.npz"
    notcounts.write_bytes(b"garbage")
    r = run("ngrams", "release", str(notcounts), "-e", "1", "-o", str(files / "x.tsv"))
    assert r.exit_code == 1
