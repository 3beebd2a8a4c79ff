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
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "brr", "--limit", "300", "-e", "5"])
    assert r.exit_code == 0, r.output
    assert "R_avg" in r.output and "epsilon_B" in r.output and "hamming" in r.output


def test_privacy_ratio_errors():
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "nope"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["privacy-ratio", "madlib", "brr", "--limit", "50", "-e", "-1"])
    assert r.exit_code == 2 and "epsilon" in r.output
