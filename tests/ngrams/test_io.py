"""Readers (JSONL/CSV, gz), the counts bundle and release writers (TSV/Parquet), atomic outputs."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from deniable import ngrams
from deniable.errors import DataError
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
    rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    p = tmp_path / f"r.{suffix}"
    write_release(p, rel)
    keys, probs, meta = read_release(p)
    assert keys == rel.keys
    np.testing.assert_array_equal(probs, rel.probabilities)  # repr() of floats is exact
    assert meta["sigma"] == rel.sigma and meta["guarantee"] == rel.guarantee


def test_failed_write_leaves_target_untouched(tmp_path):
    users, vocab = _bundle()
    rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, rng=0)
    p = tmp_path / "r.tsv"
    p.write_text("old")
    with pytest.raises(ValueError):
        write_release(p, rel, fmt="xlsx")
    assert p.read_text() == "old"
    with pytest.raises(DataError, match="folder"):
        write_release(tmp_path / "missing" / "r.tsv", rel)
