"""`deniable privatize --spark` and `deniable ngrams count --spark` on a real local Spark (local[2]):
the same outputs as the Python API (privatize) and as the single-machine command (ngrams count),
one-line usage errors (exit 2) and data errors (exit 1).

The Spark session is the one of tests/spark/conftest.py (one per test run); the commands reuse
an active session instead of starting their own, so `--master local[2]` below selects the Spark
path without starting a second JVM."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import deniable
from deniable.cli.main import cli
from deniable.embeddings import load_embedding
from deniable.integrations.keyed import privatize_keyed
from deniable.ngrams.io import load_counts

from ..spark.conftest import spark  # noqa: F401  (the session-wide local[2] fixture)

pytest.importorskip("pandas")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_line(res, code: int, *needles: str) -> str:
    assert res.exit_code == code, (res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def emb(tmp_path_factory):
    rng = np.random.default_rng(0)
    p = tmp_path_factory.mktemp("emb") / "emb.npz"
    np.savez(p, words=np.array([f"w{i}" for i in range(120)]), vectors=rng.standard_normal((120, 5)).astype(np.float32))
    return p


def _records(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        text = " ".join(f"w{j}" for j in rng.integers(0, 130, int(rng.integers(1, 9)))) + ", W3 zebra."
        out.append({"id": i, "user": f"u{i % 7}", "text": None if i % 11 == 4 else text})
    return out


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_privatize_jsonl_equals_the_python_api_for_the_same_seed_and_key(spark, emb, tmp_path):  # noqa: F811
    records = _records(300)
    src = _jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out"
    res = run("privatize", src, "-o", out, "--master", "local[2]", "-m", "madlib", "--embedding", emb, "-e", "3",
              "--seed", "5", "--key", "id", "--output-format", "parquet")
    assert res.exit_code == 0, res.output
    err = res.stderr.strip().splitlines()
    assert err[0] == "note: " + str(src) + ": only 'text' was privatized; other fields copied unchanged: id, user"
    assert err[-1].startswith("madlib epsilon=3: column 'text' privatized on Spark") and "rows keyed by 'id'" in err[-1]
    got = spark.read.parquet(str(out)).toPandas().set_index("id").sort_index()
    mech = deniable.get_mechanism("madlib", load_embedding(emb), epsilon=3)
    ref = privatize_keyed(mech, [r["text"] for r in records], [r["id"] for r in records], rng=5, stream="text")
    assert got["text"].tolist() == ref and got["user"].tolist() == [r["user"] for r in records]
    assert got["text"].isna().sum() == sum(r["text"] is None for r in records) > 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # the same call from Python (deniable.spark.files); another release identity, another draw
    from deniable.spark.files import privatize_files

    privatize_files(src, tmp_path / "api", mech, spark=spark, key="id", rng=5, output_format="parquet")
    api = spark.read.parquet(str(tmp_path / "api")).toPandas().set_index("id").sort_index()
    assert api["text"].tolist() == ref
    res = run("privatize", src, "-o", tmp_path / "other", "--spark", "-m", "madlib", "--embedding", emb, "-e", "3", "--seed", "5", "--key", "id", "--release-id", "t2")
    assert res.exit_code == 0, res.output
    assert "rows keyed by 'id', release 't2'" in res.stderr.splitlines()[-1]
    other = spark.read.json(str(tmp_path / "other")).toPandas().set_index("id").sort_index()  # jsonl, as the input
    assert other["text"].tolist() != ref
    texts = [r["text"] for r in records]
    assert other["text"].tolist() == privatize_keyed(mech, texts, [r["id"] for r in records], rng=5, stream="text", release_id="t2")


def test_privatize_csv_directory_independent_by_default_content_keys_on_request(spark, emb, tmp_path):  # noqa: F811
    records = _records(120, seed=1)
    repeated = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12"
    for i in range(3, 120, 10):
        records[i]["text"] = repeated
    src = tmp_path / "parts"
    src.mkdir()
    for part in range(3):
        with open(src / f"part-{part}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "body"])
            w.writerows([r["id"], r["text"] or "w0, with a comma"] for r in records[part::3])

    def read(out):
        got = spark.read.option("header", True).option("multiLine", True).option("escape", '"').csv(str(out)).toPandas()
        return dict(zip(got["id"].astype(int), got["body"]))

    # default: every row its own randomness under a fresh secret, so the 12 copies differ
    res = run("privatize", src, "-o", tmp_path / "fresh", "--spark", "-m", "madlib", "--embedding", emb, "-e", "2", "--column", "body")
    assert res.exit_code == 0, res.output
    assert "every row drawn independently (a fresh secret for this run)" in res.stderr.splitlines()[-1]
    fresh = read(tmp_path / "fresh")
    assert len(fresh) == 120 and len({fresh[i] for i in range(3, 120, 10)}) > 1
    # content keys: asked for, warned once, identical texts give identical outputs
    out = tmp_path / "out.csv"
    res = run("privatize", src, "-o", out, "--spark", "-m", "madlib", "--embedding", emb, "-e", "2", "--seed", "9", "--column", "body", "--content-keys")
    assert res.exit_code == 0, res.output
    assert "rows keyed by their text" in res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")] == [
        "warning: --content-keys: identical texts got identical outputs, which shows which rows were equal; each text keeps its guarantee, the table as a whole does not"
    ]
    got = read(out)
    texts = [r["text"] or "w0, with a comma" for r in records]
    mech = deniable.get_mechanism("madlib", load_embedding(emb), epsilon=2)
    with pytest.warns(deniable.PrivacyWarning):
        ref = privatize_keyed(mech, texts, rng=9, stream="body", content_keys=True)
    assert [got[r["id"]] for r in records] == ref
    assert len({got[i] for i in range(3, 120, 10)}) == 1  # content keys: identical texts, identical outputs


def test_max_nw_resolves_epsilon_on_the_driver(spark, emb, tmp_path):  # noqa: F811
    lines = [" ".join(f"w{j}" for j in np.random.default_rng(i).integers(0, 120, 10)) for i in range(40)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    single = run("privatize", src, "-m", "madlib", "--embedding", emb, "--max-nw", "0.5", "--seed", "0", "--no-progress")
    assert single.exit_code == 0, single.output
    out = tmp_path / "out"
    res = run("privatize", src, "-o", out, "--spark", "-m", "madlib", "--embedding", emb, "--max-nw", "0.5", "--seed", "0", "--content-keys")
    assert res.exit_code == 0, res.output
    assert any(ln.startswith("epsilon chosen for max_n_w=0.5") for ln in res.stderr.splitlines()), res.stderr
    mech = deniable.get_mechanism("madlib", load_embedding(emb), max_n_w=0.5)
    assert f"madlib epsilon={mech.epsilon:.4g}" in res.stderr
    assert f"madlib epsilon={mech.epsilon:.4g} (chosen for max N_w 0.5)" in single.stderr  # the same choice without Spark
    got = [r.value for r in spark.read.text(str(out)).collect()]
    with pytest.warns(deniable.PrivacyWarning):
        assert got == privatize_keyed(mech, lines, rng=0, stream="text", content_keys=True)


def _users(tmp_path):
    rng = np.random.default_rng(3)
    words = ["the", "cat", "sat", "on", "mat", "dog", "log", "a", "secret"]
    recs = [{"user": f"u{int(rng.integers(0, 25))}", "text": " ".join(rng.choice(words, int(rng.integers(0, 12))))} for _ in range(400)]
    (tmp_path / "public.txt").write_text("the cat sat on the mat\nthe dog sat on the log\na cat sat on a mat\n")
    return recs, _jsonl(tmp_path / "users.jsonl", recs)


def _same_counts(a_path, b_path, *, ordered: bool = True):
    a, va = load_counts(a_path)
    b, vb = load_counts(b_path)
    assert va.keys == vb.keys and a.keys == b.keys and a.dropped == b.dropped and a.matrix.dtype == b.matrix.dtype
    order = list(range(a.n_users)) if ordered else [b.user_ids.index(u) for u in a.user_ids]
    assert a.user_ids == tuple(b.user_ids[i] for i in order)
    assert (a.matrix != b.matrix[order]).nnz == 0 and a.matrix.nnz > 0


def test_ngrams_count_spark_equals_the_single_machine_count(spark, tmp_path):  # noqa: F811
    recs, users = _users(tmp_path)
    pub = tmp_path / "public.txt"
    single = run("ngrams", "count", users, "--public", pub, "-n", "2", "-o", tmp_path / "single.npz")
    assert single.exit_code == 0, single.output
    res = run("ngrams", "count", users, "--public", pub, "-n", "2", "--master", "local[2]", "-o", tmp_path / "spark.npz")
    assert res.exit_code == 0, res.output
    assert res.stderr.strip().splitlines()[-1] == single.stderr.strip().splitlines()[-1].replace("single.npz", "spark.npz")
    _same_counts(tmp_path / "single.npz", tmp_path / "spark.npz")
    assert (tmp_path / "single.npz").read_bytes() == (tmp_path / "spark.npz").read_bytes()  # the same bundle, byte for byte
    # a directory of Parquet part files (any partitioning): the same counts, users in any order
    spark.createDataFrame(recs).repartition(3).write.parquet(str(tmp_path / "users.parquet"))
    res = run("ngrams", "count", tmp_path / "users.parquet", "--public", pub, "-n", "2", "--spark", "-o", tmp_path / "parquet.npz")
    assert res.exit_code == 0, res.output
    _same_counts(tmp_path / "single.npz", tmp_path / "parquet.npz", ordered=False)


def test_spark_data_errors_are_one_line_exit_1(spark, emb, tmp_path):  # noqa: F811
    src = _jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "w1 w2"}, {"id": None, "text": "w3"}])
    base = ["privatize", src, "--spark", "-m", "madlib", "--embedding", emb, "-e", "3"]
    one_line(run(*base, "-o", tmp_path / "a", "--column", "body"), 1, "no column 'body'", "--column")
    one_line(run(*base, "-o", tmp_path / "b", "--key", "uid"), 1, "no key column 'uid'")
    one_line(run(*base, "-o", tmp_path / "c", "--key", "id"), 1, "Spark job failed", "key column 'id' is null in a row whose text is not null")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet\n")
    one_line(run("privatize", bad, "--spark", "-m", "madlib", "--embedding", emb, "-e", "3", "-o", tmp_path / "d"), 1, "Spark job failed")
    assert not [p.name for p in tmp_path.iterdir() if p.name in "abcd" or p.name.endswith(".tmp")]
    (tmp_path / "public.txt").write_text("w1 w2 w3\n")
    one_line(run("ngrams", "count", src, "--public", tmp_path / "public.txt", "-n", "2", "--spark", "-o", tmp_path / "c.npz"), 1, "no column 'user'")
    assert not (tmp_path / "c.npz").exists()


@pytest.mark.parametrize(
    "extra, hint",
    [
        (["--spark", "--device", "cuda", "-o", "OUT"], "--device"),
        (["--master"], "requires an argument"),
        (["--master", " ", "-o", "OUT"], "needs a Spark master URL"),
        (["--spark"], "give it with -o DIR"),
        (["--spark", "-o", "EXISTING"], "already exists"),
        (["--spark", "--report", "-o", "OUT"], "--report"),
        (["--spark", "--secure", "-o", "OUT"], "--secure"),
        (["--spark", "-o", "OUT", "INPUT"], "one INPUT"),
        (["--key", "id", "-o", "OUT"], "add --spark"),
        (["--release-id", "t1", "-o", "OUT"], "add --spark"),
        (["--content-keys", "-o", "OUT"], "add --spark"),
        (["--spark", "--seed", "1", "-o", "OUT"], "--seed with --spark needs --key COLUMN"),
        (["--spark", "--key", "id", "--content-keys", "-o", "OUT"], "cannot be combined with --key"),
        (["--spark", "--key", "id", "--release-id", "", "-o", "OUT"], "needs a non-empty name"),
        (["--output-format", "csv", "-o", "OUT"], "add --spark"),
        (["--format", "parquet", "-o", "OUT"], "add --spark"),
        (["DIR", "-o", "OUT"], "is a directory"),
    ],
)
def test_spark_usage_errors_are_one_line_exit_2(tmp_path, extra, hint):
    src = tmp_path / "in.txt"
    src.write_text("w1 w2\n")
    (tmp_path / "existing").mkdir()
    names = {"OUT": tmp_path / "out", "EXISTING": tmp_path / "existing", "INPUT": src, "DIR": tmp_path / "existing"}
    res = run("privatize", src, "-m", "madlib", "-e", "3", *[names.get(a, a) for a in extra])
    one_line(res, 2, hint)
    assert not (tmp_path / "out").exists()


def test_spark_without_pyspark_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    src = tmp_path / "in.jsonl"
    src.write_text('{"user": "u", "text": "w1 w2"}\n')
    need = 'pip install "deniable[spark]"'
    one_line(run("privatize", src, "--spark", "-m", "madlib", "-e", "3", "-o", tmp_path / "out"), 2, need)
    one_line(run("ngrams", "count", src, "--public", src, "--spark", "-o", tmp_path / "c.npz"), 2, need)
    # ngrams count: the other usage errors of --spark, and directories / parquet without it
    one_line(run("ngrams", "count", "-", "--public", src, "--spark", "-o", tmp_path / "c.npz"), 2, "not stdin")
    one_line(run("ngrams", "count", tmp_path, "--public", src, "-o", tmp_path / "c.npz"), 2, "is a directory", "--spark")
    one_line(run("ngrams", "count", src, "--public", src, "--format", "parquet", "-o", tmp_path / "c.npz"), 2, "add --spark")


def test_cli_format_list_matches_the_library():
    from deniable.cli.privatize import SPARK_FORMATS
    from deniable.spark.files import TABLE_FORMATS

    assert SPARK_FORMATS == TABLE_FORMATS


def test_a_session_started_by_the_command_keeps_spark_output_off_the_terminal(tmp_path, monkeypatch, capfd):
    """Without an active session the command starts one with the JVM's stderr sent to a
    temporary log (faked here: no second JVM): the terminal gets one line, the log is removed
    unless an error names it."""
    import glob
    import os
    import tempfile

    pytest.importorskip("pyspark")
    import pyspark.sql

    import deniable.spark.files as files

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pyspark.sql.SparkSession, "getActiveSession", classmethod(lambda cls: None))

    def bad_master(master):
        os.write(2, b'Exception in thread "main" org.apache.spark.SparkException: Master must either be yarn or start with spark, k8s, or local\n')
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.")

    monkeypatch.setattr(files, "spark_session", bad_master)
    src = tmp_path / "in.txt"
    src.write_text("w1 w2\n")
    res = run("privatize", src, "-o", tmp_path / "out", "--master", "foo", "-m", "madlib", "-e", "3")
    line = one_line(res, 2, "Invalid value for --master: Spark rejected it: Master must either be yarn or start with spark, k8s, or local")
    assert "JAVA_GATEWAY" not in line and "Exception in thread" not in capfd.readouterr().err
    assert not glob.glob(str(tmp_path / "deniable-spark-*.log"))

    def no_java(master):
        os.write(2, b"JAVA_HOME is not set\n")
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.")

    monkeypatch.setattr(files, "spark_session", no_java)
    res = run("ngrams", "count", src, "--public", src, "-n", "2", "--spark", "-o", tmp_path / "c.npz")
    line = one_line(res, 1, "Spark could not start", "Java 17", "Spark's log: ")
    assert "JAVA_HOME is not set" not in capfd.readouterr().err
    logs = glob.glob(str(tmp_path / "deniable-spark-*.log"))
    assert len(logs) == 1 and logs[0] in line and Path(logs[0]).read_text() == "JAVA_HOME is not set\n"
