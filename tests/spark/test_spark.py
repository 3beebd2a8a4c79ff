"""deniable.spark on a real local Spark (local[2]): the same outputs as one process, whatever the
partitioning, retries, nulls and empty partitions; n-gram counts equal to the single-machine ones."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import deniable
from deniable import ngrams
from deniable.integrations.keyed import keyed_bound_contributions, privatize_keyed

from ..conftest import random_embedding

pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def mech():
    return deniable.get_mechanism("madlib", random_embedding(60, 5, seed=3), epsilon=3)


def _rows(n: int, seed: int = 0, null_every: int = 7) -> list[tuple[int, str | None]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)] + ["Zebra", "unknownword"]
    texts = [" ".join(rng.choice(words, 3)) + "." for _ in range(n)]
    return [(i, None if i % null_every == 3 else t) for i, t in enumerate(texts)]


@pytest.mark.slow
def test_privatize_column_equals_single_process_for_any_partitioning(spark, mech):
    import pandas as pd

    from deniable.spark import privatize_column

    rows = _rows(100_000)
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["id", "text"]), "id long, text string")  # via Arrow
    got7 = privatize_column(df.repartition(7), "text", mech, key="id", rng=11, output_col="private").select("id", "private").toPandas()
    assert len(got7) == len(rows) and got7["id"].nunique() == len(rows)
    by_id = dict(zip(got7["id"].tolist(), got7["private"].tolist()))
    # rows are independent of their batch (tests/integrations/test_keyed.py), so the reference can
    # be computed for every 5th row only: 20,000 rows compared one by one
    sample = rows[::5]
    ref = dict(zip([i for i, _ in sample], privatize_keyed(mech, [t for _, t in sample], [i for i, _ in sample], rng=11, stream="text")))
    mismatches = [i for i in ref if by_id[i] != ref[i]]
    assert not mismatches, f"{len(mismatches)} rows differ from the single-process output, e.g. id {mismatches[:3]}"
    assert by_id[3] is None and by_id[4] is not None  # nulls stay null
    assert sum(v is None for v in by_id.values()) == sum(t is None for _, t in rows)
    one = privatize_column(df.filter("id % 50 = 0").repartition(1), "text", mech, key="id", rng=11, output_col="p").select("id", "p").collect()
    assert len(one) == 2000 and all(r.p == ref[r.id] for r in one)


def test_retried_task_reproduces_its_output_even_without_a_seed(spark, mech, tmp_path):
    """A task that fails after its first batch is retried and redraws exactly what it drew:
    keyed by an id column (with or without a seed), and by default (a secret drawn once per
    call on the driver, rows keyed by their position, recomputed on the same input)."""
    from pyspark import TaskContext

    from deniable.spark import privatize_column

    df = spark.createDataFrame(_rows(3000, seed=1), "id long, text string").repartition(3)
    for seed, key in ((5, "id"), (None, "id"), (None, None)):
        private = privatize_column(df, "text", mech, rng=seed, key=key)
        clean = {r.id: r.text for r in private.collect()}
        marker = tmp_path / f"failed-{seed}-{key}"

        def fail_once(batches, marker=str(marker)):
            ctx = TaskContext.get()
            for i, batch in enumerate(batches):
                yield batch
                if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and i == 0:
                    open(marker, "w").close()
                    raise RuntimeError("simulated executor failure after the first batch")

        retried = {r.id: r.text for r in private.mapInPandas(fail_once, private.schema).collect()}
        assert marker.exists(), "the first attempt did not fail: the test proves nothing"
        assert retried == clean


def test_nulls_empty_partitions_and_keys(spark, mech):
    from deniable.spark import privatize_column

    rows = [(1, "w1 w2 w3"), (2, None), (None, None), (4, "w1 w2 w3"), (5, "")]
    df = spark.createDataFrame(rows, "id long, text string").repartition(12)  # most partitions empty
    got = {r.id: r.text for r in privatize_column(df, "text", mech, key="id", rng=3).collect()}
    ref = privatize_keyed(mech, [t for _, t in rows], [0 if i is None else i for i, _ in rows], rng=3, stream="text")
    assert got == {i: ref[j] for j, (i, _) in enumerate(rows)}
    assert got[2] is None and got[None] is None and got[5] == ""
    # content keys (opt-in, warned): identical texts, identical outputs; another stream, another draw
    with pytest.warns(deniable.PrivacyWarning, match="content_keys"):
        both = privatize_column(df, "text", mech, rng=3, output_col="a", content_keys=True)
    with pytest.warns(deniable.PrivacyWarning):
        both = privatize_column(both, "text", mech, rng=3, output_col="b", stream="other", content_keys=True)
    out = {r.id: (r.a, r.b) for r in both.collect()}
    assert out[1][0] == out[4][0]
    with pytest.warns(deniable.PrivacyWarning):
        ref = privatize_keyed(mech, ["w1 w2 w3"], rng=3, stream="other", content_keys=True)
    assert out[1][1] == ref[0]
    # a release identity separates two tables keyed by the same ids
    named = {r.id: r.text for r in privatize_column(df, "text", mech, key="id", rng=3, release_id="t2").collect()}
    assert named[1] == privatize_keyed(mech, ["w1 w2 w3"], [1], rng=3, stream="text", release_id="t2")[0]
    # a seed without a key is refused on the driver, before any job
    with pytest.raises(ValueError, match=r"seed=3 without row keys.*key=<id column>"):
        privatize_column(df, "text", mech, rng=3)
    with pytest.raises(ValueError, match="cannot be combined with explicit keys"):
        privatize_column(df, "text", mech, key="id", content_keys=True)
    with pytest.raises(Exception, match="null in a row whose text is not null"):
        bad = spark.createDataFrame([(None, "w1")], "id long, text string")
        privatize_column(bad, "text", mech, key="id", rng=0).collect()


def test_privatize_column_validates_on_the_driver(spark, mech):
    from deniable.spark import privatize_column

    df = spark.createDataFrame([(1, "w1", 1.5)], "id long, text string, x double")
    with pytest.raises(ValueError, match="no column 'body'"):
        privatize_column(df, "body", mech)
    with pytest.raises(TypeError, match="must be a string column"):
        privatize_column(df, "id", mech)
    with pytest.raises(TypeError, match="key column 'x' must hold integers, strings or binary"):
        privatize_column(df, "text", mech, key="x")
    with pytest.raises(TypeError, match="epsilon is required"):
        privatize_column(df, "text", "madlib")
    with pytest.raises(ValueError, match="oov must be one of"):
        privatize_column(df, "text", mech, oov="pass")


def test_tasks_carry_a_few_hundred_bytes_not_the_embedding(spark):
    from pyspark import cloudpickle

    from deniable.integrations.keyed import resolve_randomness
    from deniable.integrations.shipping import shipment_for
    from deniable.spark._udf import privatize_udf_function

    big = deniable.get_mechanism("madlib", random_embedding(20_000, 50), epsilon=3)  # ~4 MB of vectors
    ship = shipment_for(big)
    fn = privatize_udf_function(ship, resolve_randomness(0, keyed=True, stream="text"), oov="unk", case="preserve", keyed=True)
    assert len(cloudpickle.dumps(fn)) < 20_000 < len(pickle.dumps(big)) // 100
    assert ship.nbytes > 4_000_000  # the vectors travel as a file, once per executor (the exact index keeps no copy)


def test_count_ngrams_equals_single_machine_counting(spark, tmp_path):
    from deniable.spark import count_ngrams

    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(12)]
    records = [(int(rng.integers(0, 40)), " ".join(rng.choice(words, int(rng.integers(0, 9)))) + ". " + " ".join(rng.choice(words, 4))) for _ in range(600)]
    records += [(99, None)]  # a user whose only text is null: counted with no n-grams, as an empty text
    vocab = ngrams.build_vocabulary(ngrams.count_public([t for _, t in records[:200] if t], 2), n=2, max_size=60)
    single = ngrams.count_users([(u, t or "") for u, t in records], vocab)
    df = spark.createDataFrame(records, "user long, text string")
    got = count_ngrams(df, "user", "text", vocab)
    assert got.user_ids == single.user_ids and got.dropped == single.dropped
    assert got.keys == single.keys and got.matrix.dtype == single.matrix.dtype
    assert (got.matrix != single.matrix).nnz == 0

    # bounded on the executors == bounded on one machine, whatever the partitioning
    bounded = count_ngrams(df.repartition(5), "user", "text", vocab, max_ngrams_per_user=3, C=1, rng=7)
    ref = keyed_bound_contributions(single, max_ngrams_per_user=3, C=1, rng=7)
    order = [bounded.user_ids.index(u) for u in ref.user_ids]
    assert (bounded.matrix[order] != ref.matrix).nnz == 0
    assert bounded.matrix.max() == 1 and np.diff(bounded.matrix.indptr).max() == 3

    # the file `deniable ngrams release` reads
    from deniable.ngrams.io import load_counts, save_counts

    save_counts(tmp_path / "counts.npz", got, vocab)
    loaded, _ = load_counts(tmp_path / "counts.npz")
    assert (loaded.matrix != single.matrix).nnz == 0


def test_file_jobs_read_directories_and_write_atomically(spark, mech, tmp_path):
    import json

    from deniable.ngrams.io import load_counts
    from deniable.spark.files import count_ngrams_files, detect_table_format, privatize_files

    src = tmp_path / "posts"
    src.mkdir()
    records = [{"id": i, "user": f"u{i % 3}", "text": f"w{i % 9} w{(i * 5) % 40} w3. w1 w2"} for i in range(40)]
    for part in range(2):
        with open(src / f"part-{part}.jsonl", "w") as f:
            for r in records[part::2]:
                f.write(json.dumps(r) + "\n")
    assert detect_table_format(src) == "jsonl"
    out = tmp_path / "private.parquet"
    privatize_files(src, out, mech, spark=spark, output_format="parquet", key="id", rng=2)
    got = spark.read.parquet(str(out)).toPandas().set_index("id").sort_index()
    ref = privatize_keyed(mech, [r["text"] for r in records], [r["id"] for r in records], rng=2, stream="text")
    assert got["text"].tolist() == ref and got["user"].tolist() == [r["user"] for r in records]
    with pytest.raises(FileExistsError):
        privatize_files(src, out, mech, spark=spark, key="id", rng=2)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    vocab = ngrams.build_vocabulary(ngrams.count_public([r["text"] for r in records], 2), n=2)
    count_ngrams_files(src, vocab, tmp_path / "counts.npz", spark=spark)
    loaded, _ = load_counts(tmp_path / "counts.npz")
    single = ngrams.count_users([(r["user"], r["text"]) for r in records], vocab)
    order = [loaded.user_ids.index(u) for u in single.user_ids]
    assert (loaded.matrix[order] != single.matrix).nnz == 0


def test_workers_that_cannot_import_deniable_give_one_clear_error(spark, monkeypatch):
    """A worker Python without deniable's dependencies (a session started from an un-activated
    virtual environment) is reported before any job runs, naming PYSPARK_PYTHON."""
    import deniable.spark as ds

    def broken(_):
        raise ModuleNotFoundError("No module named 'pandas'")

    monkeypatch.setattr(ds, "_worker_probe", lambda x: broken(x))
    monkeypatch.setattr(ds, "_CHECKED", set())
    with pytest.raises(RuntimeError, match=r"cannot import 'pandas'.*PYSPARK_PYTHON"):
        ds.check_workers(spark)
    monkeypatch.undo()
    ds.check_workers(spark)  # the real probe passes on this session, and is remembered
    assert str(spark.sparkContext.applicationId) in ds._CHECKED


def test_seed_is_a_deprecated_alias_of_rng(spark, mech):
    """privatize_column(seed=) and count_ngrams(seed=) give the outputs of rng= for the same int,
    with a DeprecationWarning naming rng=; both at once is refused on the driver."""
    from deniable.spark import count_ngrams, privatize_column

    rows = _rows(40)
    df = spark.createDataFrame(rows, "id long, text string").repartition(3)
    new = {r.id: r.text for r in privatize_column(df, "text", mech, key="id", rng=4).collect()}
    with pytest.warns(DeprecationWarning, match=r"privatize_column\(seed=\.\.\.\) is deprecated; use rng="):
        old = {r.id: r.text for r in privatize_column(df, "text", mech, key="id", seed=4).collect()}
    assert old == new == dict(zip([i for i, _ in rows], privatize_keyed(mech, [t for _, t in rows], [i for i, _ in rows], rng=4, stream="text")))
    assert new != {r.id: r.text for r in privatize_column(df, "text", mech, key="id", rng=5).collect()}  # control
    with pytest.raises(TypeError, match="both rng= and seed="):
        privatize_column(df, "text", mech, key="id", rng=4, seed=4)

    records = [(u, " ".join(f"w{(u * 7 + j) % 60}" for j in range(12))) for u in range(6)]
    vocab = ngrams.build_vocabulary(ngrams.count_public([t for _, t in records], 1), n=1, max_size=60)
    udf = spark.createDataFrame(records, "user long, text string")
    by_rng = count_ngrams(udf, "user", "text", vocab, max_ngrams_per_user=2, rng=7)
    with pytest.warns(DeprecationWarning, match=r"count_ngrams\(seed=\.\.\.\) is deprecated; use rng="):
        by_seed = count_ngrams(udf, "user", "text", vocab, max_ngrams_per_user=2, seed=7)
    assert by_rng.user_ids == by_seed.user_ids and (by_rng.matrix != by_seed.matrix).nnz == 0
    with pytest.raises(TypeError, match="both rng= and seed="):
        count_ngrams(udf, "user", "text", vocab, rng=7, seed=7)
