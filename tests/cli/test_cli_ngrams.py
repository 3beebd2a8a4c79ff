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
    # the default is formal (epsilon, delta)-DP: no warning, sigma and sampler stated
    r = run("ngrams", "release", str(counts), "-e", "1", "-d", "1e-6", "-S", "0.5", "--rho", "0.4", "--seed", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    keys, probs, meta = read_release(out)
    assert set(keys) == set(vocab.keys) and np.isclose(probs.sum(), 1)
    assert meta["mechanism"] == "bayesian" and meta["params"]["S"] == 0.5 and meta["formal_dp"] is True
    assert meta["sensitivity_method"] == "derived" and meta["epsilon"] == 1.0 and meta["params"]["max_ngrams_per_user"] == 50
    assert "warning:" not in r.stderr and "formal_dp=True" in r.stderr and f"sampler={meta['sampler']}" in r.stderr and meta["sigma"] > 0
    # the paper's local sensitivity only with --local-sensitivity: one warning line, nothing data dependent written
    r = run("ngrams", "release", str(counts), "-e", "1", "-d", "1e-6", "-S", "0.5", "--rho", "0.4", "--local-sensitivity", "--seed", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    keys, probs, meta = read_release(out)
    assert meta["sensitivity_method"] == "exact" and meta["calibration"] == "analytic"
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
    formal = mech != "k-anonymity"  # the Laplace baselines are formal by default; k-anonymity is not DP
    assert meta["formal_dp"] is formal and ("warning:" in r.stderr) is not formal
    assert ("laplace_scale" in meta) is formal and "n_users" not in json.dumps(meta)


def test_laplace_W_and_paper_rule_warns(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    out = files / "rel.tsv"
    for mech in ("laplace", "laplace-public"):
        r = run("ngrams", "release", str(counts), "-m", mech, "-e", "1", "--local-sensitivity", "-o", str(out))
        assert r.exit_code == 2 and "-W is required" in r.output
        r = run("ngrams", "release", str(counts), "-m", mech, "-e", "1", "-k", "3", "-C", "2", "--sampler", "numpy", "-o", str(out))
        assert r.exit_code == 0 and "warning:" not in r.stderr, r.output
        meta = read_release(out)[2]
        assert meta["formal_dp"] is True and meta["sensitivity"] == (6.0 if mech == "laplace" else 2.0) and meta["sampler"] == "numpy"
    out.unlink()
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
    r = run("ngrams", "release", str(counts), "-m", "laplace-public", "-e", "1", "--sensitivity", "1.5", "-o", str(out))
    assert r.exit_code == 2 and "below the derived global L1 sensitivity 2" in r.output


def test_formal_bayesian_and_diagnostics_flag(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    out = files / "rel.parquet"
    r = run("ngrams", "release", str(counts), "-e", "1", "--sensitivity", "30", "--seed", "0", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "warning:" not in r.stderr and "formal_dp=True" in r.stderr
    _, _, meta = read_release(out)
    assert meta["formal_dp"] is True and meta["params"]["sensitivity_bound"] == 30.0 and meta["sigma"] > 0
    assert run("ngrams", "release", str(counts), "-e", "1", "--sensitivity", "-1", "-o", str(out)).exit_code == 2
    # a number below the derived bound C*sqrt(k) is a usage error naming the bound
    r = run("ngrams", "release", str(counts), "-e", "1", "--sensitivity", "3", "-o", str(out))
    assert r.exit_code == 2 and "below the derived global L2 sensitivity 7.07107" in r.output
    r = run("ngrams", "release", str(counts), "-e", "1", "--sensitivity", "exact", "-o", str(out))
    assert r.exit_code == 2 and "--local-sensitivity" in r.output
    # diagnostics only on request, on stderr, with a warning; never in the file
    r = run("ngrams", "release", str(counts), "-e", "1", "--local-sensitivity", "--diagnostics", "--seed", "0", "-o", str(out))
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
    r = run("ngrams", "release", str(counts), "-e", "2", "--tune", "--seed", "1", "-o", str(out))
    assert r.exit_code == 0 and "warning:" not in r.stderr, r.output
    _, _, meta = read_release(out)  # formal tuning: the choice is post-processing, published
    assert meta["formal_dp"] is True and meta["params"]["tuning"] == "noisy-holdout" and "S" in meta["params"] and "rho" in meta["params"]
    r = run("ngrams", "release", str(counts), "-e", "2", "--tune", "--local-sensitivity", "--score", "expected", "--seed", "1", "-o", str(out))
    assert r.exit_code == 0, r.output
    _, _, meta = read_release(out)
    assert meta["mechanism"] == "bayesian-tuned" and meta["params"]["epsilon_tune"] == pytest.approx(2 / 3)
    assert meta["params"]["score"] == "expected" and meta["formal_dp"] is False
    assert "S" not in meta["params"] and "rho" not in meta["params"] and "warning:" in r.stderr


@pytest.mark.parametrize(
    "args,function,formal",
    [
        (["-e", "1"], "release_bayesian", True),
        (["-e", "1", "-S", "0.5", "--no-tune"], "release_bayesian", True),
        (["-m", "laplace", "-e", "1"], "release_laplace", True),
        (["-m", "laplace-public", "-e", "1", "-W", "3"], "release_laplace", True),
        (["-m", "laplace", "-e", "1", "-W", "3", "--local-sensitivity"], "release_laplace", True),  # a public cap: formal anyway
        (["-e", "1", "--local-sensitivity"], "bayesian_not_dp", False),
        (["-e", "1", "--local-sensitivity", "--tune"], "bayesian_tuned_not_dp", False),
        (["-m", "laplace-public", "-e", "1", "-W", "3", "--local-sensitivity"], "laplace_public_not_dp", False),
        (["-m", "laplace", "-e", "1", "-W", "paper-rule"], "laplace_not_dp", False),
        (["-m", "laplace-public", "-e", "1", "-W", "paper-rule"], "laplace_public_not_dp", False),
        (["-m", "k-anonymity", "-K", "1"], "k_anonymity_not_dp", False),
    ],
)
def test_cli_calls_the_formal_api_and_the_paper_only_behind_its_flags(files, monkeypatch, args, function, formal):
    """Each option set reaches exactly one of the new functions (never the deprecated release: no
    deprecation line), the paper's only behind --local-sensitivity, -W paper-rule or -m k-anonymity."""
    from deniable import ngrams
    from deniable.ngrams import paper

    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    called = []
    for module, name in [(ngrams, "release_bayesian"), (ngrams, "release_laplace")] + [(paper, n) for n in paper.__all__ if n.endswith("_not_dp")]:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: called.append(_name) or _real(*a, **k))
    r = run("ngrams", "release", str(counts), *args, "--seed", "0", "-o", str(files / "r.tsv"))
    assert r.exit_code == 0, r.output
    assert called == [function] and "deprecated" not in r.stderr
    assert read_release(files / "r.tsv")[2]["formal_dp"] is formal and ("warning:" in r.stderr) is not formal
    assert read_release(files / "r.tsv")[2]["params"]["n"] == 3  # the vocabulary's n-gram order, as before


def test_cli_W_only_with_the_laplace_mechanisms(files):
    counts = files / "counts.npz"
    assert run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(counts)).exit_code == 0
    for args in (["-e", "1"], ["-e", "1", "--local-sensitivity"], ["-m", "k-anonymity"]):
        r = run("ngrams", "release", str(counts), *args, "-W", "3", "-o", str(files / "r.tsv"))
        assert r.exit_code == 2 and "-W applies to -m laplace" in r.output


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


# --- UX review fixes -------------------------------------------------------------------------------


def _count(files, out="counts.npz"):
    r = run("ngrams", "count", str(files / "users.jsonl"), "--public", str(files / "public.txt"), "-o", str(files / out))
    assert r.exit_code == 0, r.output
    return files / out


def _one_error_line(r, code):
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    err = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(err) == 1, r.stderr
    return err[0]


def test_count_to_stdout_is_a_usage_error(files, monkeypatch):
    monkeypatch.chdir(files)
    r = run("ngrams", "count", "users.jsonl", "--public", "public.txt", "-o", "-")
    assert "stdout" in _one_error_line(r, 2)
    assert not (files / "-").exists() and r.stdout == ""
    r = run("ngrams", "count", "users.jsonl", "--public", "public.txt", "-o", "c.npz.gz")
    assert ".gz" in _one_error_line(r, 2)


def test_release_tsv_to_stdout(files):
    counts = _count(files)
    r = run("ngrams", "release", str(counts), "-e", "1", "--seed", "0", "--sampler", "numpy", "-o", "-")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("# deniable-ngrams-release ") and lines[1] == "ngram\tprobability"
    assert sum(float(line.split("\t")[1]) for line in lines[2:]) == pytest.approx(1)
    assert "-> stdout" in r.stderr and "release format" not in r.output
    out = files / "same.tsv"
    assert run("ngrams", "release", str(counts), "-e", "1", "--seed", "0", "--sampler", "numpy", "-o", str(out)).exit_code == 0
    assert out.read_text() == r.stdout  # seeded numpy noise is reproducible (OpenDP's never is)
    r = run("ngrams", "release", str(counts), "-e", "1", "--format", "parquet", "-o", "-")
    assert "TSV" in _one_error_line(r, 2)


@pytest.mark.parametrize(
    "name,fmt,match",
    [("r.parquet", "tsv", "contradicts"), ("r.tsv", "parquet", "contradicts"), ("r.txt", None, "cannot tell"), ("r.parquet.gz", None, "gzip")],
)
def test_release_format_must_match_the_name(files, name, fmt, match):
    counts = _count(files)
    args = ["ngrams", "release", str(counts), "-e", "1", "-o", str(files / name)] + (["--format", fmt] if fmt else [])
    r = run(*args)
    assert match in _one_error_line(r, 2)
    assert not (files / name).exists()
    # an explicit format with a neutral name is fine
    r = run("ngrams", "release", str(counts), "-e", "1", "--format", "parquet", "-o", str(files / "r.out"))
    assert r.exit_code == 0 and (files / "r.out").read_bytes()[:4] == b"PAR1"


def test_evaluate_prints_json_numbers_or_null_with_note(files):
    from deniable.ngrams.io import load_counts as _load

    counts = _count(files)
    _, vocab = _load(counts)
    rel = files / "zeros.tsv"  # a thresholded release: probability 0 for n-grams the data has
    probs = [1.0] + [0.0] * (len(vocab.keys) - 1)
    rel.write_text("ngram\tprobability\n" + "".join(f"{k}\t{p}\n" for k, p in zip(vocab.keys, probs)))
    r = run("ngrams", "evaluate", str(rel), "--counts", str(counts), "--heldout", str(counts))
    assert r.exit_code == 0, r.output
    assert '"inf"' not in r.stdout and "Infinity" not in r.stdout
    res = json.loads(r.stdout)
    assert res["kl"] is None and res["perplexity"] is None and "--smoothing" in res["note"]
    r = run("ngrams", "evaluate", str(rel), "--counts", str(counts), "--heldout", str(counts), "--smoothing", "1e-3")
    res = json.loads(r.stdout)
    assert isinstance(res["kl"], float) and isinstance(res["perplexity"], float) and res["kl"] > 0 and "note" not in res
    assert res["smoothing"] == 1e-3


def test_empty_private_file_is_a_data_error(files):
    empty = files / "empty.jsonl"
    empty.write_text("")
    r = run("ngrams", "count", str(empty), "--public", str(files / "public.txt"), "--format", "jsonl", "-o", str(files / "c.npz"))
    assert str(empty) in _one_error_line(r, 1)
    assert not (files / "c.npz").exists()


@pytest.mark.parametrize("content", [b"", b"\n\n", b"one two\n", b"the cat\x00 sat on the mat\n"])
def test_public_files_without_ngrams_are_named(files, content):
    bad = files / "bad_public.txt"
    bad.write_bytes(content)
    r = run("ngrams", "count", str(files / "users.jsonl"), "--public", str(bad), "-o", str(files / "c.npz"))
    line = _one_error_line(r, 1)
    assert str(bad) in line and ("NUL" in line if b"\x00" in content else "public vocabulary is empty" in line)


def test_record_errors_name_field_line_and_column(files):
    bad = files / "bad.jsonl"
    bad.write_text('{"user": "a", "text": "x"}\n{"user": "b"}\n')
    line = _one_error_line(run("ngrams", "count", str(bad), "--public", str(files / "public.txt"), "-o", str(files / "c.npz")), 1)
    assert f"{bad}:2:" in line and "'text'" in line
    bad.write_text('{"user": "a", "text": "x"}\n{"user": "b", "text": }\n')
    line = _one_error_line(run("ngrams", "count", str(bad), "--public", str(files / "public.txt"), "-o", str(files / "c.npz")), 1)
    assert f"{bad}:2:" in line and "column 23" in line


@pytest.mark.parametrize("content", [b"hello", b"PK\x03\x04junk", None])
def test_non_counts_file_is_one_clear_line(files, content):
    bad = files / "bad.npz"
    if content is None:
        np.savez(bad, keys=np.array([object()], dtype=object))
    else:
        bad.write_bytes(content)
    for args in (["release", str(bad), "-e", "1", "-o", str(files / "x.tsv")], ["evaluate", str(files / "x.tsv"), "--counts", str(bad)]):
        if args[0] == "evaluate":
            _count(files)
            assert run("ngrams", "release", str(files / "counts.npz"), "-e", "1", "-o", str(files / "x.tsv")).exit_code == 0
        line = _one_error_line(run("ngrams", *args), 1)
        assert "not a counts bundle written by `deniable ngrams count`" in line and "pickle" not in line


def _bad_inputs(files):
    """(args, expected exit code) for a range of bad inputs; none may produce a traceback."""
    counts = _count(files)
    assert run("ngrams", "release", str(counts), "-e", "1", "-o", str(files / "ok.tsv")).exit_code == 0
    (files / "empty.txt").write_text("")
    (files / "empty.npz").write_bytes(b"")
    (files / "latin1.jsonl").write_bytes(b'{"user": "a", "text": "caf\xe9"}\n')
    (files / "latin1.txt").write_bytes(b"the caf\xe9 sat on the mat\n")
    (files / "nul.jsonl").write_bytes(b'{"user": "a", "text": "x\x00"}\n')
    (files / "list.jsonl").write_text("[1, 2]\n")
    (files / "num.jsonl").write_text('{"user": "a", "text": 5}\n')
    (files / "bad.csv").write_text('user,text\n"a,"unterminated\n')
    (files / "garbage.tsv").write_bytes(b"\x00\x01\x02")
    (files / "garbage.parquet").write_text("nope")
    (files / "ok.txt").write_text("ngram\tprobability\n")
    c, p, o, ok = str(counts), str(files / "public.txt"), str(files / "out.tsv"), str(files / "ok.tsv")
    u = str(files / "users.jsonl")
    return [
        (["count", str(files / "missing.jsonl"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", u, "--public", str(files / "missing.txt"), "-o", str(files / "c.npz")], 1),
        (["count", str(files / "latin1.jsonl"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", u, "--public", str(files / "latin1.txt"), "-o", str(files / "c.npz")], 1),
        (["count", str(files / "nul.jsonl"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", str(files / "list.jsonl"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", str(files / "num.jsonl"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", str(files / "bad.csv"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", str(files / "empty.txt"), "--public", p, "-o", str(files / "c.npz")], 1),
        (["count", u, "--public", p, "-o", str(files / "nodir" / "c.npz")], 1),
        (["count", u, "--public", p, "-n", "0", "-o", str(files / "c.npz")], 2),
        (["release", str(files / "missing.npz"), "-e", "1", "-o", o], 1),
        (["release", str(files / "empty.npz"), "-e", "1", "-o", o], 1),
        (["release", p, "-e", "1", "-o", o], 1),
        (["release", c, "-e", "0", "-o", o], 2),
        (["release", c, "-e", "-1", "-o", o], 2),
        (["release", c, "-e", "nan", "-o", o], 2),
        (["release", c, "-e", "inf", "-o", o], 2),
        (["release", c, "-e", "one", "-o", o], 2),
        (["release", c, "-e", "1", "-d", "0", "-o", o], 2),
        (["release", c, "-e", "1", "-d", "1", "-o", o], 2),
        (["release", c, "-e", "1", "-d", "nan", "-o", o], 2),
        (["release", c, "-e", "1", "--rho", "nan", "-o", o], 2),
        (["release", c, "-e", "1", "-S", "0", "-o", o], 2),
        (["release", c, "-e", "1", "--sensitivity", "nan", "-o", o], 2),
        (["release", c, "-m", "k-anonymity", "-K", "0", "-o", o], 2),
        (["release", c, "-m", "k-anonymity", "-K", "-3", "-o", o], 2),
        (["release", c, "-m", "laplace", "-e", "1", "-W", "0", "-o", o], 2),
        (["release", c, "-e", "1", "-o", str(files / "nodir" / "r.tsv")], 1),
        (["evaluate", str(files / "garbage.tsv"), "--counts", c], 1),
        (["evaluate", str(files / "garbage.parquet"), "--counts", c], 1),
        (["evaluate", str(files / "ok.txt"), "--counts", c], 1),
        (["evaluate", ok, "--counts", p], 1),
        (["evaluate", ok, "--counts", c, "--heldout", str(files / "empty.npz")], 1),
        (["evaluate", ok, "--counts", c, "--smoothing", "1"], 2),
        (["evaluate", ok, "--counts", c, "--smoothing", "nan"], 2),
        (["evaluate", str(files / "missing.tsv"), "--counts", c], 1),
    ]


def test_no_tracebacks_on_bad_input(files):
    for args, code in _bad_inputs(files):
        r = CliRunner().invoke(cli, ["ngrams", *args])
        assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit), (args, r.exception)
        assert r.exit_code == code, (args, r.output)
        assert "Traceback" not in r.output and len([x for x in r.stderr.splitlines() if x.startswith("Error:")]) == 1, (args, r.output)
    assert not (files / "out.tsv").exists() and not (files / "c.npz").exists()


# --- formal CLI releases move the perturbed statistic by at most the derived sensitivity ----


def _bundle_from(path, dense):
    import scipy.sparse as sp

    from deniable import ngrams
    from deniable.ngrams.io import save_counts

    V = dense.shape[1]
    keys = tuple(f"w{i} x" for i in range(V))
    vocab = ngrams.NgramVocabulary(keys, np.arange(1.0, V + 1), n=2)
    m = sp.csr_matrix(dense.astype(np.int32))
    save_counts(path, ngrams.UserCounts(m, keys, tuple(f"u{i}" for i in range(m.shape[0]))), vocab)


@pytest.mark.parametrize(
    "args,norm",
    [([], 2), (["-S", "0.5", "--rho", "0.7"], 2), (["-C", "3", "-k", "7"], 2), (["-m", "laplace"], 1), (["-m", "laplace", "-W", "4"], 1), (["-m", "laplace-public"], 1)],
)
@pytest.mark.parametrize("adversary", ["every", "huge-unique"])
def test_cli_formal_modes_respect_the_derived_sensitivity(tmp_path, monkeypatch, args, norm, adversary):
    """The CLI path (load bundle -> release -> write) goes through the same enforced bounds: the
    statistic handed to the sampler moves by at most the derived sensitivity when an adversarial
    user is added; a planted CLI run without the bounding step fails the same check."""
    from deniable.ngrams import formal, noise

    calls = []

    def record(x, sensitivity, *a, **k):
        calls.append((np.asarray(x, dtype=np.float64).copy(), float(sensitivity)))
        return np.asarray(x, dtype=np.float64), 1.0, "recorded"

    monkeypatch.setattr(noise, "gaussian_mechanism", record)
    monkeypatch.setattr(noise, "laplace_mechanism", record)
    rng = np.random.default_rng(0)
    V = 60
    dense = np.zeros((25, V), dtype=np.int64)
    dense[:, :40] = rng.poisson(0.5, (25, 40))
    adv = np.ones(V, dtype=np.int64) if adversary == "every" else np.r_[np.zeros(40), np.full(20, 10**6)].astype(np.int64)
    _bundle_from(tmp_path / "d.npz", dense)
    _bundle_from(tmp_path / "d2.npz", np.vstack([dense, adv]))

    def change():
        calls.clear()
        for name in ("d.npz", "d2.npz"):
            r = run("ngrams", "release", str(tmp_path / name), "-e", "1", "--seed", "4", "-o", str(tmp_path / "r.tsv"), *args)
            assert r.exit_code == 0 and "formal_dp=True" in r.stderr and "warning:" not in r.stderr, r.output
        (x1, s1), (x2, s2) = calls
        assert s1 == s2
        return float(np.linalg.norm(x2 - x1, ord=norm)), s1

    delta, sens = change()
    assert delta <= sens * (1 + 1e-9)
    if adversary == "huge-unique" and "laplace-public" not in args:  # planted: no bounding step
        monkeypatch.setattr(formal, "bound_contributions", lambda m, k, C, rng=None: m.astype(np.float64))
        if "-W" not in args:
            delta, sens = change()
            assert delta > 100 * sens


def test_cli_default_k_matches_the_library():
    from deniable.cli import ngrams as cli_ngrams
    from deniable.ngrams import DEFAULT_MAX_NGRAMS_PER_USER

    assert cli_ngrams.DEFAULT_MAX_NGRAMS_PER_USER == DEFAULT_MAX_NGRAMS_PER_USER


@pytest.mark.parametrize(
    "key,value,match",
    [("indices", "oob", "out of range"), ("data", "neg", "is negative"), ("data", "nan", "not a finite number")],
)
def test_cli_tampered_bundle_exits_1_with_one_line(tmp_path, key, value, match):
    """Issue 14 item 5 through the CLI: exit 1, one line naming the file, no traceback."""
    _bundle_from(tmp_path / "good.npz", np.eye(4, dtype=np.int64))
    with np.load(tmp_path / "good.npz") as z:
        arrays = {k: z[k] for k in z.files}
    if value == "oob":
        arrays["indices"] = arrays["indices"] + 1000
    elif value == "neg":
        arrays["data"] = -arrays["data"]
    else:
        arrays["data"] = np.full(arrays["data"].size, np.nan)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    for cmd in (["release", str(bad), "-e", "1", "-o", str(tmp_path / "r.tsv")], ["evaluate", str(tmp_path / "r.tsv"), "--counts", str(bad)]):
        if cmd[0] == "evaluate":
            assert run("ngrams", "release", str(tmp_path / "good.npz"), "-e", "1", "-o", str(tmp_path / "r.tsv")).exit_code == 0
        r = CliRunner().invoke(cli, ["ngrams", *cmd])
        assert r.exit_code == 1, r.output
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert len(lines) == 1 and str(bad) in lines[0] and match in lines[0] and "Traceback" not in r.output, r.output
    assert not (tmp_path / "r.tsv").exists() or (tmp_path / "r.tsv").stat().st_size > 0
