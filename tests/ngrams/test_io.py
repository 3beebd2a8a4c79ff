"""Readers (JSONL/CSV, gz), the counts bundle and release writers (TSV/Parquet), atomic outputs."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from deniable import ngrams
from deniable.errors import DataError, PrivacyWarning
from deniable.ngrams import paper
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
    rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    p = tmp_path / f"r.{suffix}"
    write_release(p, rel)
    keys, probs, meta = read_release(p)
    assert keys == rel.keys
    np.testing.assert_array_equal(probs, rel.probabilities)  # repr() of floats is exact
    assert meta["sigma"] == rel.sigma and meta["guarantee"] == rel.guarantee and meta["formal_dp"] is True and meta["sampler"] == rel.sampler
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


LOCAL = {  # the paper's modes (NOT DP), on (users, vocab)
    "exact": lambda u, v: paper.bayesian_not_dp(u, v, epsilon=1.0, delta=1e-6, rng=0),
    "claim1": lambda u, v: paper.bayesian_not_dp(u, v, epsilon=1.0, delta=1e-6, sensitivity="claim1", rng=0),
    "tuned": lambda u, v: paper.bayesian_tuned_not_dp(u, v, epsilon=1.0, delta=1e-6, S_grid=[0.1, 1.0], rho_grid=[0.3, 0.6], rng=0),
    "laplace-public": lambda u, v: paper.laplace_public_not_dp(u, v, epsilon=1.0, W=5.0, rng=0),
    "paper-rule": lambda u, v: paper.laplace_not_dp(u, epsilon=1.0, rng=0),
    "k-anonymity": lambda u, v: paper.k_anonymity_not_dp(u, K=1),
}


@pytest.mark.parametrize("suffix", ["tsv", "parquet"])
@pytest.mark.parametrize("mode", sorted(LOCAL))
def test_written_release_has_no_data_dependent_values(tmp_path, suffix, mode):
    """Parse the file: no user count, local sensitivity, sigma, gamma, scale or tuned choice."""
    vocab = ngrams.build_vocabulary(ngrams.count_public(["a b c d e. a b c d. b c d e a"], 2), n=2)
    users = ngrams.count_users([(f"u{i}", t) for i, t in enumerate(["a b c", "c d e", "b c d", "a b", "d e a b", "b c", "a b c d e", "e a"])], vocab)
    with pytest.warns(PrivacyWarning, match="NOT"):
        rel = LOCAL[mode](users, vocab)
    assert not rel.formal_dp
    p = tmp_path / f"r.{suffix}"
    write_release(p, rel)
    header = _header(p, suffix)
    meta = json.loads(header.split(" ", 2)[2]) if suffix == "tsv" else read_release(p)[2]
    assert meta == json.loads(json.dumps(rel.metadata()))
    assert meta["formal_dp"] is False and "NOT" in meta["guarantee"]
    for key in ("n_users", "gamma", "sigma", "sensitivity", "laplace_scale", "kept", "tuning_sensitivity", "n_train_users", "diagnostics"):
        assert f'"{key}"' not in header, key
    assert set(meta) <= {"library", "version", "mechanism", "epsilon", "delta", "formal_dp", "guarantee", "calibration", "sensitivity_method", "sampler", "vocabulary_size", "params"}
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
    lap = ngrams.release_laplace(users, epsilon=0.5, W=3.0, rng=0)
    bay = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, sensitivity=8.0, sampler="numpy", rng=0)
    for rel in (lap, bay):
        assert rel.formal_dp
        p = tmp_path / "r.tsv"
        write_release(p, rel)
        _, _, meta = read_release(p)
        assert meta["formal_dp"] is True and "n_users" not in json.dumps(meta)
    assert read_release(p)[2]["sigma"] == pytest.approx(ngrams.analytic_sigma(1.0, 1e-6, 8.0))
    assert read_release(p)[2]["sampler"] == "numpy" and read_release(p)[2]["sensitivity"] == 8.0


def test_failed_write_leaves_target_untouched(tmp_path):
    users, vocab = _bundle()
    rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    p = tmp_path / "r.tsv"
    p.write_text("old")
    with pytest.raises(ValueError):
        write_release(p, rel, fmt="xlsx")
    assert p.read_text() == "old"
    with pytest.raises(DataError, match="folder"):
        write_release(tmp_path / "missing" / "r.tsv", rel)


# --- input checks: one DataError naming file, line (and column / field) ---------------------------


def test_missing_field_is_named(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_text('{"user": 0, "text": "ok"}\n{"user": 1, "body": "x"}\n')
    with pytest.raises(DataError, match="no field 'text'.*'body'") as info:
        list(read_user_texts(p))
    assert (info.value.path, info.value.line) == (str(p), 2)
    p.write_text('{"text": "x"}\n')
    with pytest.raises(DataError, match="no field 'user'"):
        list(read_user_texts(p))


def test_invalid_json_gives_line_and_column(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_text('{"user": 0, "text": "ok"}\n\n{"user": 1, "text": x}\n')
    with pytest.raises(DataError, match=r"invalid JSON at column 21") as info:
        list(read_user_texts(p))
    assert info.value.line == 3
    p.write_text('{"user": 1,\n')  # truncated: the column is on this line, not the next one
    with pytest.raises(DataError, match="column 12"):
        list(read_user_texts(p))


def test_invalid_utf8_reports_the_exact_line_far_into_the_file(tmp_path):
    p = tmp_path / "u.jsonl"
    good = b'{"user": 0, "text": "' + b"word " * 40 + b'"}\n'
    p.write_bytes(good * 500 + b'{"user": 1, "text": "caf\xe9"}\n')  # far past any decoder chunk
    with pytest.raises(DataError, match="invalid UTF-8.*0xe9") as info:
        list(read_user_texts(p))
    assert info.value.line == 501


@pytest.mark.parametrize("name,first", [("p.txt", b"the dog"), ("p.jsonl", b'{"text": "the dog"}'), ("p.csv", b"text")])
def test_nul_bytes_are_binary_data(tmp_path, name, first):
    p = tmp_path / name
    p.write_bytes(first + b"\nthe cat\x00 sat\n")
    with pytest.raises(DataError, match="NUL") as info:
        list(read_texts(p))
    assert (info.value.path, info.value.line) == (str(p), 2)


@pytest.mark.parametrize("name,content", [("u.jsonl", ""), ("u.jsonl", "\n  \n"), ("u.csv", ""), ("u.csv", "user,text\n")])
def test_private_file_without_records_is_an_error(tmp_path, name, content):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(DataError) as info:
        list(read_user_texts(p))
    assert info.value.path == str(p)


def test_bom_is_ignored_and_empty_public_yields_nothing(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"user": "a", "text": "hi"}\n')
    assert list(read_user_texts(p)) == [("a", "hi")]
    e = tmp_path / "e.txt"
    e.write_text("")
    assert list(read_texts(e)) == []


def _object_npz(path):
    np.savez(path, keys=np.array([{"a": 1}], dtype=object))


@pytest.mark.parametrize("make", [lambda p: p.write_bytes(b"garbage"), lambda p: p.write_bytes(b"PK\x03\x04broken zip"), lambda p: np.savez(p, x=np.arange(3)), _object_npz])
def test_load_counts_rejects_anything_else_in_one_line(tmp_path, make):
    p = tmp_path / "c.npz"
    make(p)
    with pytest.raises(DataError, match="not a counts bundle written by `deniable ngrams count`") as info:
        load_counts(p)
    msg = str(info.value)
    assert "\n" not in msg and "pickle" not in msg and info.value.path == str(p)


def _tamper(src, dst, **changes):
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    np.savez(dst, **arrays)


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda z: {"indices": np.array([0, 1, 999, 2, 1, 0], dtype=np.int32)[: z["indices"].size]}, r"n-gram index 999 at position 2 is out of range: the vocabulary has \d+ n-grams"),
        (lambda z: {"indices": -z["indices"] - 1}, r"n-gram index -1 at position 0 is out of range"),
        (lambda z: {"data": np.where(np.arange(z["data"].size) == 1, -3, z["data"])}, r"count -3 at position 1 is negative"),
        (lambda z: {"data": np.where(np.arange(z["data"].size) == 0, np.nan, z["data"].astype(float))}, r"count nan at position 0 is not a finite number"),
        (lambda z: {"data": np.full(z["data"].size, np.inf)}, r"not a finite number"),
        (lambda z: {"indptr": z["indptr"][::-1].copy()}, r"inconsistent sparse layout"),
        (lambda z: {"indptr": z["indptr"][:-1]}, r"'indptr' has \d+ entries for \d+ users"),
        (lambda z: {"data": z["data"][:-1]}, r"inconsistent sparse layout"),
        (lambda z: {"shape": np.array([2, 3, 4])}, r"'shape' must be two non-negative integers"),
        (lambda z: {"keys": z["keys"][:-1]}, r"'keys' must hold one string per n-gram column"),
        (lambda z: {"public_counts": -np.ones(z["public_counts"].size)}, r"'public_counts' must be finite and >= 0"),
        (lambda z: {"data": z["data"].astype(str)}, r"must be a 1-D numeric array"),
    ],
)
def test_tampered_counts_bundle_one_clear_line(tmp_path, change, match):
    """Issue 14 item 5: out-of-range indices, negative/NaN counts, a broken layout: one DataError
    naming the file and what is wrong, never a numpy or scipy error."""
    users, vocab = _bundle()
    good = tmp_path / "good.npz"
    save_counts(good, users, vocab)
    with np.load(good) as z:
        changes = change({k: z[k] for k in z.files})
    bad = tmp_path / "bad.npz"
    _tamper(good, bad, **changes)
    with pytest.raises(DataError, match=match) as info:
        load_counts(bad)
    msg = str(info.value)
    assert msg.startswith(f"{bad}: not a counts bundle written by `deniable ngrams count`: ") and "\n" not in msg


def test_counts_with_negative_or_nan_values_in_the_api_are_rejected():
    import scipy.sparse as sp

    for bad in (np.array([[1.0, -1.0]]), np.array([[np.nan, 1.0]])):
        with pytest.raises(ValueError, match="finite and >= 0"):
            ngrams.release_bayesian(sp.csr_matrix(bad), np.ones(2), epsilon=1.0, delta=1e-6)


@pytest.mark.parametrize(
    "path,fmt,expected",
    [("r.tsv", None, "tsv"), ("r.TSV", None, "tsv"), ("r.tsv.gz", None, "tsv"), ("r.parquet", None, "parquet"), ("r.out", "tsv", "tsv"), ("-", None, "tsv"), ("-", "tsv", "tsv")],
)
def test_release_format(path, fmt, expected):
    from deniable.ngrams.io import release_format

    assert release_format(path, fmt) == expected


@pytest.mark.parametrize(
    "path,fmt,match",
    [("r.parquet", "tsv", "contradicts"), ("r.tsv", "parquet", "contradicts"), ("r.txt", None, "cannot tell"), ("-", "parquet", "stdout"), ("r.parquet.gz", None, "gzip")],
)
def test_release_format_errors(path, fmt, match):
    from deniable.ngrams.io import release_format

    with pytest.raises(ValueError, match=match):
        release_format(path, fmt)


def test_outputs_get_normal_permissions(tmp_path):
    import os

    users, vocab = _bundle()
    rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    old = os.umask(0o022)
    try:
        for p in (tmp_path / "c.npz", tmp_path / "r.tsv", tmp_path / "r.parquet"):
            save_counts(p, users, vocab) if p.suffix == ".npz" else write_release(p, rel)
            assert (p.stat().st_mode & 0o777) == 0o644, p  # not mkstemp's private 0600
    finally:
        os.umask(old)
    with pytest.raises(ValueError, match="gz"):
        save_counts(tmp_path / "c.npz.gz", users, vocab)


def test_gzipped_tsv_release_roundtrip(tmp_path):
    users, vocab = _bundle()
    rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    p = tmp_path / "r.tsv.gz"
    write_release(p, rel)
    assert p.read_bytes()[:2] == b"\x1f\x8b"
    keys, probs, _ = read_release(p)
    assert keys == rel.keys and np.array_equal(probs, rel.probabilities)


@pytest.mark.parametrize(
    "name,content,match",
    [
        ("r.tsv", "a b\tnot-a-number\n", "NGRAM<TAB>PROBABILITY"),
        ("r.tsv", "a b\t1.5\n", "NGRAM<TAB>PROBABILITY"),
        ("r.tsv", "# deniable-ngrams-release {oops\na b\t1\n", "metadata JSON"),
        ("r.tsv", "", "no NGRAM"),
        ("r.parquet", "not parquet", "not a release"),
    ],
)
def test_read_release_errors(tmp_path, name, content, match):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(DataError, match=match) as info:
        read_release(p)
    assert info.value.path == str(p)


def test_stdin_is_named_in_errors(monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"user": 1, "text": "hi"}\n{"user": 2}\n')))
    with pytest.raises(DataError, match=r"^<stdin>:2: record has no field 'text'"):
        list(read_user_texts("-", fmt="jsonl"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    with pytest.raises(DataError, match="^<stdin>: no JSONL records"):
        list(read_user_texts("-", fmt="jsonl"))
