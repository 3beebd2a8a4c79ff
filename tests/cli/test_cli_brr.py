"""`deniable export brr` and `deniable privacy-ratio`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from deniable import brr_runtime
from deniable.binary import BinaryEmbedding, load_default_binary_embedding
from deniable.cli.main import cli


@pytest.fixture
def glove_file(tmp_path):
    rng = np.random.default_rng(0)
    lines = [f"w{i} " + " ".join(f"{x:.4f}" for x in rng.standard_normal(6)) for i in range(60)]
    p = tmp_path / "emb.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_export_default_bundle(tmp_path):
    out = tmp_path / "default.brr"
    r = CliRunner().invoke(cli, ["export", "brr", "-o", str(out)])
    assert r.exit_code == 0, r.output
    be = BinaryEmbedding.load(out)
    assert be.fingerprint == load_default_binary_embedding().fingerprint
    assert "% of the float32 embedding" in r.output
    bundle = brr_runtime.load_bundle(out)
    assert bundle.n_bits == 256 and len(bundle.words) == 33849


def test_export_custom_embedding(tmp_path, glove_file):
    out = tmp_path / "small.brr"
    r = CliRunner().invoke(cli, ["export", "brr", "-o", str(out), "--embedding", str(glove_file), "--bits", "16", "--method", "random-projection"])
    assert r.exit_code == 0, r.output
    be = BinaryEmbedding.load(out)
    assert len(be) == 60 and be.n_bits == 16 and be.unk_method == "encoded-mean"
    assert be.metadata["binarizer"]["method"] == "random-projection"
    text = brr_runtime.load_bundle(out).privatize("w1 w2 unknown", 1.0, rng=0)
    assert all(w in be.words for w in text.split())


def test_export_errors(tmp_path, glove_file):
    r = CliRunner().invoke(cli, ["export", "brr", "-o", str(tmp_path / "x.brr"), "--embedding", str(glove_file), "--bits", "64", "--method", "itq"])
    assert r.exit_code == 2 and "ITQ" in r.output
    r = CliRunner().invoke(cli, ["export", "brr", "-o", str(tmp_path / "x.brr"), "--bits", "0"])
    assert r.exit_code == 2
    bad = tmp_path / "bad.txt"
    bad.write_text("w1 1 2\nw2 1\n")
    r = CliRunner().invoke(cli, ["export", "brr", "-o", str(tmp_path / "x.brr"), "--embedding", str(bad), "--method", "random-projection"])
    assert r.exit_code == 1 and "bad.txt" in r.output
    assert not (tmp_path / "x.brr").exists()


def test_privacy_ratio_command(glove_file):
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "mahalanobis", "--embedding", str(glove_file), "-e", "10", "--aggregate", "both", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output[r.output.index("{"):])
    for agg in ("avg", "max"):
        ra = res["ratio"][agg]
        assert ra == pytest.approx(res["mechanism_a"][f"P_{agg}"] / res["mechanism_b"][f"P_{agg}"])
        assert res["epsilon_b"][agg]["10"] == pytest.approx(10 * ra)


def test_privacy_ratio_madlib_brr_text(tmp_path):
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "brr", "--embedding-limit", "300", "-e", "5"])
    assert r.exit_code == 0, r.output
    assert "R_avg" in r.output and "epsilon_B" in r.output and "hamming" in r.output


def test_privacy_ratio_errors():
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "nope"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "brr", "--embedding-limit", "50", "-e", "-1"])
    assert r.exit_code == 2 and "epsilon" in r.output


def _one_line_error(res) -> str:
    assert "Traceback" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, res.output
    return errors[0]


@pytest.fixture
def tiny_file(tmp_path):
    p = tmp_path / "tiny.txt"
    p.write_text("a 1 0 0\nb 0 1 0\nc 0 0 1\nd 1 1 0\n")
    return p


def test_export_too_few_words_is_a_usage_error(tmp_path):
    out = tmp_path / "x.brr"
    res = CliRunner().invoke(cli, ["export", "brr", "-o", str(out), "--embedding-limit", "1"])
    assert res.exit_code == 2 and "at least 2 words" in _one_line_error(res) and "--embedding-limit" in res.output
    # ITQ on 2 words: n_bits is bounded by min(words, dim), not by the dimension alone
    res = CliRunner().invoke(cli, ["export", "brr", "-o", str(out), "--embedding-limit", "2"])
    line = _one_line_error(res)
    assert res.exit_code == 2 and "min(words, dimension) = 2" in line and "--bits 2" in line and "random-projection" in line
    assert not out.exists()
    res = CliRunner().invoke(cli, ["export", "brr", "-o", str(out), "--embedding-limit", "2", "--bits", "2"])
    assert res.exit_code == 0, res.output
    assert BinaryEmbedding.load(out).n_bits == 2


def test_export_one_word_file_is_a_data_error(tmp_path):
    one = tmp_path / "one.txt"
    one.write_text("a 1 0 0\n")
    res = CliRunner().invoke(cli, ["export", "brr", "-o", str(tmp_path / "x.brr"), "--embedding", str(one), "--method", "random-projection", "--bits", "4"])
    assert res.exit_code == 1 and "one.txt" in _one_line_error(res)


def test_export_refuses_stdout_and_missing_folder(tmp_path, tiny_file):
    res = CliRunner().invoke(cli, ["export", "brr", "-o", "-", "--embedding", str(tiny_file), "--bits", "2"])
    assert res.exit_code == 2 and "stdout" in _one_line_error(res)
    assert res.stdout_bytes == b""  # nothing binary reached the terminal
    res = CliRunner().invoke(cli, ["export", "brr", "-o", str(tmp_path / "no" / "x.brr"), "--embedding", str(tiny_file), "--bits", "2"])
    assert res.exit_code == 2 and "does not exist" in _one_line_error(res)
    assert "binarizing" not in res.output  # rejected before any work


@pytest.mark.filterwarnings("ignore::deniable.errors.DeniableWarning")  # "binarizing ... takes a while"
def test_privacy_ratio_brr_on_a_tiny_embedding(tiny_file):
    res = CliRunner().invoke(cli, ["privacy-ratio", "tem", "brr", "-e", "1", "--embedding", str(tiny_file)])
    line = _one_line_error(res)
    assert res.exit_code == 2 and "n_words=4, dim=3" in line and "--param n_bits=3" in line and "--binary" in line
    res = CliRunner().invoke(cli, ["privacy-ratio", "tem", "brr", "-e", "1", "--embedding", str(tiny_file), "--param", "n_bits=3", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["mechanism_b"]["metric"] == "hamming" and data["params"] == {"n_bits": 3}


def test_privacy_ratio_param_and_limit_alias(glove_file):
    base = ["privacy-ratio", "madlib", "mahalanobis", "--embedding", str(glove_file), "-e", "1", "--json"]
    a = CliRunner().invoke(cli, [*base, "--param", "lam=0.2", "--embedding-limit", "30"])
    b = CliRunner().invoke(cli, [*base, "--lam", "0.2", "--embedding-limit", "30"])
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert ra["ratio"] == rb["ratio"] and ra["mechanism_a"]["n_words"] == 30
    c = CliRunner().invoke(cli, [*base, "--param", "lam=0.9"])
    assert json.loads(c.stdout)["ratio"] != ra["ratio"]  # the parameter reaches the mechanism
    res = CliRunner().invoke(cli, [*base, "--param", "n_bits=3"])
    assert res.exit_code == 2 and "known: lam (mahalanobis)" in _one_line_error(res)
    res = CliRunner().invoke(cli, [*base, "--param", "lam=0.3", "--lam", "0.2"])
    assert res.exit_code == 2 and "conflicts" in _one_line_error(res)
    res = CliRunner().invoke(cli, [*base, "--param", "lam=2"])
    assert res.exit_code == 2 and "lam must be in [0, 1]" in _one_line_error(res)


def test_privacy_ratio_takes_every_registered_mechanism_with_a_finite_metric():
    """Peer mechanisms with a Euclidean guarantee get a ratio (1 against Madlib on the same
    vectors); one whose metric is infinite between some words is refused with the reason."""
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "knn_tem", "--embedding-limit", "300", "-e", "5", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["ratio"]["avg"] == pytest.approx(1.0)
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "custext", "--embedding-limit", "300", "-e", "5"])
    assert r.exit_code == 2 and "privacy ratio is undefined" in r.output
