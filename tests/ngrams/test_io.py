"""Readers (JSONL/CSV, gz), the counts bundle and release writers (TSV/Parquet), atomic outputs."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from deniable import ngrams
from deniable.errors import DataError, PrivacyWarning
from deniable.ngrams.io import load_counts, read_release, read_texts, read_user_texts, save_counts, write_release


def test_read_user_texts_jsonl_csv_gz(tmp_path):
    p = tmp_path / "u.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"user": 7, "text": "hello world"}) + "\n\n" + json.dumps({"user": "b", "text": "x"}) + "\n")
    assert list(read_user_texts(p)) == [("7", "hello world"), ("b", "x")]
    c = tmp_path / "u.csv"
    c.write_text('id,body\n1,"a, b"\n2,c\n')
    assert list(read_user_texts(c, user_field="id", text_field="body")) == [("1", "a, b"), ("2", "c")]


@pytest.mark.parametrize(
    "content,match",
    [('{"user": 1}\n', "fields"), ("[1, 2]\n", "fields"), ('{"user": 1, "text": 5}\n', "string"), ("{oops\n", "invalid JSON")],
)
def test_read_user_texts_errors_name_file_and_line(tmp_path, content, match):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"user": 0, "text": "ok"}\n' + content)
    with pytest.raises(DataError, match=match) as info:
        list(read_user_texts(p))
    assert info.value.line == 2 and info.value.path == str(p)


def test_invalid_utf8_and_missing_csv_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b'{"user": 0, "text": "\xff"}\n')
    with pytest.raises(DataError, match="UTF-8"):
        list(read_user_texts(p))
    c = tmp_path / "u.csv"
    c.write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match="lacks"):
        list(read_user_texts(c))
    with pytest.raises(DataError, match="JSONL or CSV"):
        list(read_user_texts(tmp_path / "x.txt"))


def test_read_texts(tmp_path):
    t = tmp_path / "p.txt"
    t.write_text("one two\nthree\n")
    assert list(read_texts(t)) == ["one two\n", "three\n"]


def _bundle():
    vocab = ngrams.build_vocabulary(ngrams.count_public(["a b c d. a b c"], 2), n=2)
    users = ngrams.count_users([("x", "a b c"), ("y", "c d e"), ("x", "b c")], vocab)
    return users, vocab


def test_counts_roundtrip(tmp_path):
    users, vocab = _bundle()
    p = tmp_path / "c.npz"
    save_counts(p, users, vocab)
    u2, v2 = load_counts(p)
    assert v2.keys == vocab.keys and np.array_equal(v2.public_counts, vocab.public_counts) and v2.n == 2
    assert u2.user_ids == users.user_ids and (u2.matrix != users.matrix).nnz == 0 and u2.dropped == users.dropped
    assert [x.name for x in tmp_path.iterdir()] == ["c.npz"]  # no temporary left behind


@pytest.mark.parametrize("suffix", ["tsv", "parquet"])
def test_release_roundtrip(tmp_path, suffix):
    users, vocab = _bundle()
    rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, sensitivity=2.0, rng=0)
    p = tmp_path / f"r.{suffix}"
    write_release(p, rel)
    keys, probs, meta = read_release(p)
    assert keys == rel.keys
    np.testing.assert_array_equal(probs, rel.probabilities)  # repr() of floats is exact
    assert meta["sigma"] == rel.sigma and meta["guarantee"] == rel.guarantee and meta["formal_dp"] is True
    assert meta["params"]["n"] == 2 and meta["vocabulary_size"] == len(vocab) and meta["version"]


def _header(path, suffix):
    """The raw metadata text written next to the probabilities."""
    if suffix == "tsv":
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# deniable-ngrams-release ") and lines[1] == "ngram\tprobability"
        assert not any(line.startswith("#") for line in lines[1:])
        return lines[0]
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    assert schema.names == ["ngram", "probability"]
    return b"".join(schema.metadata.values()).decode()


def _numbers(v):
    return {repr(float(v)), json.dumps(float(v))} | ({str(int(v))} if float(v).is_integer() else set())


LOCAL = {
    "exact": dict(),
    "claim1": dict(sensitivity="claim1"),
    "tuned": dict(tune=True, S_grid=[0.1, 1.0], rho_grid=[0.3, 0.6]),
    "laplace-public": dict(mechanism="laplace-public", W=5.0),
    "paper-rule": dict(mechanism="laplace", W="paper-rule"),
    "k-anonymity": dict(mechanism="k-anonymity", K=1),
}


@pytest.mark.parametrize("suffix", ["tsv", "parquet"])
@pytest.mark.parametrize("mode", sorted(LOCAL))
def test_written_release_has_no_data_dependent_values(tmp_path, suffix, mode):
    """Parse the file: no user count, local sensitivity, sigma, gamma, scale or tuned choice."""
    vocab = ngrams.build_vocabulary(ngrams.count_public(["a b c d e. a b c d. b c d e a"], 2), n=2)
    users = ngrams.count_users([(f"u{i}", t) for i, t in enumerate(["a b c", "c d e", "b c d", "a b", "d e a b", "b c", "a b c d e", "e a"])], vocab)
    with pytest.warns(PrivacyWarning, match="NOT"):
        rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, rng=0, **LOCAL[mode])
    assert not rel.formal_dp
    p = tmp_path / f"r.{suffix}"
    write_release(p, rel)
    header = _header(p, suffix)
    meta = json.loads(header.split(" ", 2)[2]) if suffix == "tsv" else read_release(p)[2]
    assert meta == json.loads(json.dumps(rel.metadata()))
    assert meta["formal_dp"] is False and "NOT" in meta["guarantee"]
    for key in ("n_users", "gamma", "sigma", "sensitivity", "laplace_scale", "kept", "tuning_sensitivity", "n_train_users", "diagnostics"):
        assert f'"{key}"' not in header, key
    assert set(meta) <= {"library", "version", "mechanism", "epsilon", "delta", "formal_dp", "guarantee", "calibration", "sensitivity_method", "vocabulary_size", "params"}
    # none of the data-dependent numbers appears anywhere in the metadata text
    secret = {k: v for k, v in rel.diagnostics_json().items() if isinstance(v, (int, float)) and not isinstance(v, bool) and v not in (0, 1) and k not in ("S", "rho")}
    if mode == "tuned":  # the locally tuned choice is a diagnostic; only the public grids are written
        assert {"S", "rho"} <= set(rel.diagnostics) and not {"S", "rho"} & set(meta["params"])
    assert "n_users" in secret and (mode in ("k-anonymity", "paper-rule") or "sensitivity" in secret)
    text = header.replace(" ", "")
    for k, v in secret.items():
        for form in _numbers(v):
            if len(form) > 2:  # short integers (a user count of 8) would match unrelated digits
                assert form not in text, (k, form)
    assert meta["params"].get("n_users") is None and rel.diagnostics["n_users"] == 8


def test_formal_releases_publish_only_public_scales(tmp_path):
    users, vocab = _bundle()
    lap = ngrams.release(users, vocab, epsilon=0.5, delta=0, mechanism="laplace", W=3.0, rng=0)
    bay = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, sensitivity=4.0, rng=0)
    for rel in (lap, bay):
        assert rel.formal_dp
        p = tmp_path / "r.tsv"
        write_release(p, rel)
        _, _, meta = read_release(p)
        assert meta["formal_dp"] is True and "n_users" not in json.dumps(meta)
    assert read_release(p)[2]["sigma"] == pytest.approx(ngrams.analytic_sigma(1.0, 1e-6, 0.5 * 4.0))


def test_failed_write_leaves_target_untouched(tmp_path):
    users, vocab = _bundle()
    rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, sensitivity=1.0, rng=0)
    p = tmp_path / "r.tsv"
    p.write_text("old")
    with pytest.raises(ValueError):
        write_release(p, rel, fmt="xlsx")
    assert p.read_text() == "old"
    with pytest.raises(DataError, match="folder"):
        write_release(tmp_path / "missing" / "r.tsv", rel)
