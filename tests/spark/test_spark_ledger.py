"""deniable.spark with a per-user word cap and a ledger, on a real local Spark (local[2]): the cap
keeps exactly the first N words of each user (rows ordered by the key), the outputs equal the
pandas path's for the same seed and keys, the ledger's per-user totals equal a recomputation,
and a release over the budget writes nothing (no output directory, ledger unchanged)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

import deniable
from deniable import Ledger
from deniable.integrations.capping import CAPPED_WORD
from deniable.ledger import BudgetExceeded
from deniable.text.tokenize import split_words

from ..conftest import random_embedding

pd = pytest.importorskip("pandas")
CAP = 7


@pytest.fixture(scope="module")
def mech():
    return deniable.get_mechanism("madlib", random_embedding(60, 5, seed=3), epsilon=3)


def _records(n: int = 30) -> list[dict]:
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(60)] + ["unknownword"]
    out = []
    for i in range(n):
        text = None if i % 11 == 5 else " ".join(rng.choice(words, int(rng.integers(1, 6)))) + "."
        out.append({"id": i, "user": f"u{i % 4}", "text": text})
    return out


def _privatized(text: str | None) -> int:
    """Words of an output that were privatized (not the cap's constant)."""
    return 0 if text is None else sum(w != CAPPED_WORD.strip("[]") for w in split_words(text)[1::2])


def _expected(records: list[dict]) -> dict[str, tuple[int, int, int]]:
    """(records, words privatized, most in one record) per user, the cap applied in id order."""
    used: dict[str, list[int]] = {}
    for r in sorted(records, key=lambda r: r["id"]):
        if r["text"] is None:
            continue
        n = len(split_words(r["text"])[1::2])
        e = used.setdefault(r["user"], [0, 0, 0])
        a = max(0, min(n, CAP - e[1]))
        e[0], e[1], e[2] = e[0] + 1, e[1] + a, max(e[2], a)
    return {u: tuple(v) for u, v in used.items()}  # type: ignore[misc]


@pytest.mark.slow
def test_cap_and_ledger_on_spark_equal_the_pandas_path(spark, mech, tmp_path):
    from deniable.integrations.pandas import privatize_frame
    from deniable.spark import privatize_column

    records = _records()
    shuffled = records[::-1]  # the cap follows the key, not the order of the rows in the DataFrame
    df = spark.createDataFrame(pd.DataFrame(shuffled)).repartition(3)
    book = Ledger(tmp_path / "l.db")
    out = privatize_column(df, "text", mech, key="id", rng=5, user_col="user", max_words_per_user=CAP, ledger=book, dataset="posts")
    got = out.toPandas().set_index("id").sort_index()
    ref = privatize_frame(pd.DataFrame(records), "text", mech, key="id", rng=5, user_col="user", max_words_per_user=CAP).set_index("id")
    assert got["text"].tolist() == ref["text"].tolist()
    assert list(got.columns) == ["user", "text"]  # no temporary column left
    expected = _expected(records)
    per_user: dict[str, int] = {}
    for u, t in zip(got["user"], got["text"]):
        per_user[u] = per_user.get(u, 0) + _privatized(t)
    assert per_user == {u: e[1] for u, e in expected.items()}
    assert all(e[1] == CAP for e in expected.values())  # every user had more words than the cap
    totals = {t.key: t for t in book.totals("user")}
    assert {u: (t.records, t.words) for u, t in totals.items()} == {u: e[:2] for u, e in expected.items()}
    assert all(totals[u].record_bound == pytest.approx(3 * e[2]) and totals[u].epsilon_words == pytest.approx(3 * CAP) for u, e in expected.items())
    (rel,) = book.releases()
    assert (rel.records, rel.words, rel.users) == (sum(e[0] for e in expected.values()), 4 * CAP, 4)
    # the cap without a ledger: the same output, nothing recorded
    alone = privatize_column(df, "text", mech, key="id", rng=5, user_col="user", max_words_per_user=CAP).toPandas().set_index("id").sort_index()
    assert alone["text"].tolist() == got["text"].tolist() and len(book) == 1
    # control: without the cap, the same rows privatize more words than the cap for every user
    free = privatize_column(df, "text", mech, key="id", rng=5).toPandas()
    assert all(sum(_privatized(t) for t, u2 in zip(free["text"], free["user"]) if u2 == u) > CAP for u in expected)


@pytest.mark.slow
def test_spark_cli_records_and_refuses_before_writing(spark, mech, tmp_path):
    from deniable.cli.main import cli

    emb_path = tmp_path / "emb.npz"
    np.savez(emb_path, words=np.array(mech.vocabulary.words), vectors=np.asarray(mech.vocabulary.vectors, dtype=np.float32))
    src = tmp_path / "posts.jsonl"
    records = [r for r in _records() if r["text"] is not None]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    db = tmp_path / "l.db"
    base = ["privatize", str(src), "-m", "madlib", "-e", "3", "--embedding", str(emb_path), "--master", "local[2]", "--key", "id", "--ledger", str(db), "--dataset", "posts", "--user-column", "user", "--max-total", "5"]
    res = CliRunner().invoke(cli, [*base, "-o", str(tmp_path / "out1"), "--max-words-per-user", str(CAP)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "ledger: release" in res.stderr
    expected = _expected(records)
    assert {t.key: (t.records, t.words) for t in Ledger(db).totals("user")} == {u: e[:2] for u, e in expected.items()}
    written = pd.concat([pd.read_json(p, lines=True) for p in (tmp_path / "out1").glob("part-*")])
    assert sum(_privatized(t) for t in written["text"]) == 4 * CAP
    before = sqlite3.connect(db).execute("SELECT COUNT(*) FROM releases").fetchone()
    res = CliRunner().invoke(cli, [*base, "-o", str(tmp_path / "out2")], catch_exceptions=False)  # 3 + 3 > 5
    assert res.exit_code == 1 and "refused" in res.stderr and "nothing was privatized" in res.stderr, res.output
    assert not (tmp_path / "out2").exists()
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM releases").fetchone() == before
    # usage errors (exit 2): the cap needs user keys; --ledger with --spark needs --dataset
    res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(tmp_path / "out3"), "-m", "madlib", "-e", "3", "--master", "local[2]", "--max-words-per-user", "3"])
    assert res.exit_code == 2 and "--user-column" in res.output
    res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(tmp_path / "out3"), "-m", "madlib", "-e", "3", "--master", "local[2]", "--ledger", str(db)])
    assert res.exit_code == 2 and "--dataset" in res.output


@pytest.mark.slow
def test_a_user_budget_refusal_on_spark_writes_nothing(spark, mech, tmp_path):
    from deniable.spark.files import privatize_files

    src = tmp_path / "posts.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _records() if r["text"] is not None))
    book = Ledger(tmp_path / "l.db", max_total=5)
    book.record("madlib", epsilon=3, dataset="elsewhere", words=[2], users=["u2"])  # u2 already spent 3
    with pytest.raises(BudgetExceeded, match="u2"):
        privatize_files(src, tmp_path / "out", mech, spark=spark, key="id", user_col="user", ledger=book, dataset="posts")
    assert not (tmp_path / "out").exists()
    assert len(book) == 1
