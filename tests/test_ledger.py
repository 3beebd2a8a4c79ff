"""deniable.Ledger: what a row records (never text), the totals, the budget, concurrent writers."""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import deniable
from deniable import Ledger, Madlib
from deniable.embeddings import Embedding
from deniable.errors import DataError
from deniable.ledger import APPLICATION_ID, BudgetExceeded, Tally, file_identity
from deniable.text import words_of

SRC = Path(__file__).resolve().parents[1] / "src"


def ledger_bytes(path: Path) -> bytes:
    """Every byte SQLite keeps for the ledger: the file, its write-ahead log and shared memory."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


# -- what a row records -------------------------------------------------------------------------------


def test_a_release_row_and_the_totals(tmp_path):
    book = Ledger(tmp_path / "l.db")
    r1 = book.record("madlib", epsilon=4, params={"lam": 0.5}, dataset="tickets", words=[3, 5, 0], users=["ann", "bob", 7], output="out.txt")
    assert len(r1.release_id) == 32 and r1.time.endswith("+00:00")
    assert (r1.dataset, r1.mechanism, r1.params, r1.epsilon, r1.records, r1.words, r1.max_words, r1.users, r1.output) == (
        "tickets", "madlib", {"lam": 0.5}, 4.0, 3, 8, 5, 3, "out.txt",
    )
    assert r1.version == deniable.__version__ and r1.epsilon_choice is None
    book.record("madlib", epsilon=2, dataset="mail", words=[2, 6], users=["ann", "ann"])
    book.record("madlib", epsilon=1, dataset="tickets", words=4)  # one record, no user keys
    assert len(book) == 3 and [r.dataset for r in book.releases()] == ["tickets", "mail", "tickets"]
    assert [r.dataset for r in book.releases(user="ann")] == ["tickets", "mail"]
    assert [r.epsilon for r in book.releases(dataset="tickets", user="bob")] == [4.0]

    ds = {t.key: t for t in book.totals("dataset")}
    t = ds["tickets"]
    assert (t.releases, t.records, t.words) == (2, 4, 12)
    assert t.epsilon_sum == 5.0  # 4 + 1, per word
    assert t.record_bound == 4 * 5 + 1 * 4  # Σ ε_i · (words of the largest record)
    assert t.epsilon_words == 4 * 8 + 1 * 4  # Σ ε_i · words
    users = {t.key: t for t in book.totals("user")}
    assert set(users) == {"ann", "bob", "7"}
    ann = users["ann"]
    assert (ann.releases, ann.records, ann.words, ann.epsilon_sum, ann.record_bound, ann.epsilon_words) == (2, 3, 11, 6.0, 4 * 3 + 2 * 6, 4 * 3 + 2 * 8)
    assert users["7"].epsilon_sum == 4.0 and users["7"].words == 0
    with pytest.raises(ValueError, match="'dataset' or 'user'"):
        book.totals("users")


def test_a_mechanism_object_gives_name_epsilon_params_metric_and_embedding(tmp_path):
    rng = np.random.default_rng(0)
    emb = Embedding([f"w{i}" for i in range(20)], rng.standard_normal((20, 4)).astype(np.float32))
    mech = Madlib(emb, epsilon=3.5)
    rel = Ledger(tmp_path / "l.db").record(mech, dataset="d", words=[2])
    assert (rel.mechanism, rel.epsilon, rel.params) == ("madlib", 3.5, mech.params)
    assert rel.metric == mech.guarantee.metric and rel.embedding == emb.fingerprint

    class Choice:  # how ε was chosen: the target is kept, the calibration's worst word is not
        def to_dict(self):
            return {"epsilon": 3.5, "max_n_w": 0.5, "confidence": 0.95, "coverage": "all", "estimator": "exact", "source": "shipped", "worst_word": "w7"}

    mech.epsilon_choice = Choice()
    rel = Ledger(tmp_path / "l.db").record(mech, dataset="d", words=[2])
    assert rel.epsilon_choice == {"target": "max_n_w", "max_n_w": 0.5, "confidence": 0.95, "coverage": "all", "estimator": "exact", "source": "shipped"}
    with pytest.raises(TypeError, match="read from the mechanism"):
        Ledger(tmp_path / "l.db").record(mech, epsilon=2, dataset="d", words=[1])


def test_invalid_arguments_name_the_problem(tmp_path):
    book = Ledger(tmp_path / "l.db")
    bad = [
        (dict(mechanism="madlib", dataset="d", words=[1]), TypeError, "needs epsilon"),
        (dict(mechanism="madlib", epsilon=0, dataset="d", words=[1]), ValueError, "epsilon"),
        (dict(mechanism="madlib", epsilon=1, dataset="", words=[1]), ValueError, "dataset must be a non-empty name"),
        (dict(mechanism="madlib", epsilon=1, dataset="d", words=[-1]), ValueError, "words must be an integer >= 0"),
        (dict(mechanism="madlib", epsilon=1, dataset="d", words=[1, 2], users=["a"]), ValueError, "one user key per record"),
        (dict(mechanism="madlib", epsilon=1, dataset="d", words=[1, 2], users=["a", None]), ValueError, r"users\[1\] is None"),
        (dict(mechanism="madlib", epsilon=1, dataset="d", words=[1], users=[1.5]), TypeError, "string or an integer"),
        (dict(mechanism="madlib", epsilon=1, dataset="d", words=[1], users=[""]), ValueError, "must not be empty"),
        (dict(mechanism=object(), dataset="d", words=[1]), TypeError, "Mechanism"),
    ]
    for kwargs, exc, match in bad:
        with pytest.raises(exc, match=match):
            book.record(**kwargs)
    tally = Tally()
    tally.add(3, "a")
    tally.add(2)  # words without a user key, among records that have one
    with pytest.raises(ValueError, match="have no user key"):
        book.record("madlib", epsilon=1, dataset="d", words=tally)
    with pytest.raises(TypeError, match="carries its own user keys"):
        book.record("madlib", epsilon=1, dataset="d", words=Tally(), users=["a"])
    assert len(book) == 0  # nothing was written by any of them
    for kwargs, match in ((dict(max_total=0), "max_total"), (dict(max_total=float("nan")), "max_total"), (dict(hash_key=b""), "hash_key"), (dict(timeout=-1), "timeout")):
        with pytest.raises(ValueError, match=match):
            Ledger(tmp_path / "m.db", **kwargs)


def test_the_file_must_be_a_ledger(tmp_path):
    (tmp_path / "text.txt").write_text("not a database\n" * 100)
    with pytest.raises(DataError, match="not a deniable ledger"):
        Ledger(tmp_path / "text.txt")
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    with pytest.raises(DataError, match="not a deniable ledger"):
        Ledger(tmp_path / "other.db")
    with pytest.raises(DataError, match="no ledger here"):
        Ledger(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(DataError, match="folder does not exist"):
        Ledger(tmp_path / "nowhere" / "l.db")
    Ledger(tmp_path / "l.db").close()
    con = sqlite3.connect(tmp_path / "l.db")
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(DataError, match="newer deniable"):
        Ledger(tmp_path / "l.db")


def test_file_identity_hashes_the_bytes(tmp_path):
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_bytes(b"the same bytes\n")
    b.write_bytes(b"the same bytes\n")
    c.write_bytes(b"other bytes\n")
    assert file_identity(a) == file_identity(b) == "sha256:" + hashlib.sha256(b"the same bytes\n").hexdigest()
    assert file_identity(a) != file_identity(c)
    keyed = Ledger(tmp_path / "l.db", hash_key="secret").file_identity(a)
    assert keyed == "hmac-sha256:" + hmac.new(b"secret", b"the same bytes\n", hashlib.sha256).hexdigest()


# -- never the text -----------------------------------------------------------------------------------


def test_the_database_bytes_hold_no_input_word(tmp_path):
    words = ["zebra", "saxophone", "umbrella", "lighthouse", "marmalade", "quokka", "trombone", "xylophone"]
    rng = np.random.default_rng(1)
    emb = Embedding([*words, *(f"w{i}" for i in range(30))], rng.standard_normal((38, 6)).astype(np.float32))
    mech = Madlib(emb, epsilon=2)
    texts = ["my zebra plays the saxophone", "an umbrella by the lighthouse", "marmalade for the quokka", "trombone and xylophone"]
    counts: list[int] = []
    outputs = deniable.text.privatize_texts(mech, texts, rng=0, privatized_per_text=counts)
    path = tmp_path / "l.db"
    book = Ledger(path)
    book.record(mech, dataset="survey-2026", words=counts, users=["user-a", "user-b", "user-a", "user-c"], output="private.txt")
    book.totals("user")
    data = ledger_bytes(path)
    assert Path(f"{path}-wal").exists()  # the rows may still be in the log: it is searched too
    found = [w for t in texts + outputs for w in words_of(t) if len(w) > 3 and w.lower().encode() in data.lower()]
    assert not found, f"input or output words in the ledger: {found}"
    # control: the search finds what the ledger does store
    assert b"survey-2026" in data and b"user-a" in data and b"private.txt" in data


def test_keyed_hashes_of_user_keys(tmp_path):
    path = tmp_path / "l.db"
    book = Ledger(path, hash_key="team secret")
    book.record("madlib", epsilon=1, dataset="d", words=[2, 3], users=["alice@example.com", 17])
    expected = hmac.new(b"team secret", b"alice@example.com", hashlib.sha256).hexdigest()
    assert book.user_key("alice@example.com") == expected
    assert {t.key for t in book.totals("user")} == {expected, book.user_key("17")}
    assert [r.users for r in book.releases(user="alice@example.com")] == [2]
    data = ledger_bytes(path)
    assert b"alice@example.com" not in data and expected.encode() in data  # control: the hash is there
    book.close()
    assert len(Ledger(path)) == 1  # reading needs no key
    with pytest.raises(ValueError, match="keyed hashes of user keys; give the same hash_key"):
        Ledger(path).record("madlib", epsilon=1, dataset="d", words=[1], users=["x"])
    with pytest.raises(ValueError, match="different hash_key"):
        Ledger(path, hash_key="another")
    raw = tmp_path / "raw.db"
    Ledger(raw).record("madlib", epsilon=1, dataset="d", words=[1], users=["x"])
    with pytest.raises(ValueError, match="stores user keys as given"):
        Ledger(raw, hash_key="team secret")


# -- the budget ---------------------------------------------------------------------------------------


def test_a_release_past_the_budget_is_refused_before_anything_is_written(tmp_path):
    book = Ledger(tmp_path / "l.db", max_total=10)
    book.record("madlib", epsilon=6, dataset="a", words=[3], users=["u"])
    before = (book.releases(), book.totals("dataset"), book.totals("user"))
    with pytest.raises(BudgetExceeded, match=r"user 'u' has epsilon_sum 6; this release's epsilon 5 would make it 11 > max_total 10") as info:
        book.record("madlib", epsilon=5, dataset="b", words=[3, 3], users=["v", "u"])  # another dataset: user totals cross datasets
    assert (info.value.scope, info.value.key, info.value.total, info.value.epsilon, info.value.max_total) == ("user", "u", 6.0, 5.0, 10.0)
    with pytest.raises(BudgetExceeded, match="dataset 'a'"):
        book.record("madlib", epsilon=5, dataset="a", words=[3])
    assert (book.releases(), book.totals("dataset"), book.totals("user")) == before  # nothing written
    book.record("madlib", epsilon=4, dataset="b", words=[3], users=["u"])  # exactly at the budget: allowed
    assert {t.key: t.epsilon_sum for t in book.totals("user")} == {"u": 10.0}
    # check(): the same rule, writing nothing; an explicit max_total; none at all is no check
    with pytest.raises(BudgetExceeded):
        book.check(0.5, dataset="c", users=["u"])
    Ledger(tmp_path / "l.db").check(100, dataset="a", users=["u"])
    with pytest.raises(BudgetExceeded, match="dataset 'b'"):
        Ledger(tmp_path / "l.db").check(2, dataset="b", max_total=5)
    assert len(book) == 2


def test_the_budget_tolerates_only_rounding(tmp_path):
    book = Ledger(tmp_path / "l.db", max_total=0.3)
    for _ in range(3):
        book.record("madlib", epsilon=0.1, dataset="d", words=[1])  # 0.1 + 0.1 + 0.1 = 0.30000000000000004
    with pytest.raises(BudgetExceeded):
        book.record("madlib", epsilon=1e-6, dataset="d", words=[1])
    assert len(book) == 3 and math.isclose(book.totals()[0].epsilon_sum, 0.3)


# -- concurrency --------------------------------------------------------------------------------------

WORKER = r"""
import os, sys, time
from deniable.ledger import BudgetExceeded, Ledger
path, name, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
max_total = float(sys.argv[5]) if len(sys.argv) > 5 else None
book = Ledger(path, max_total=max_total)
open(f"{go}.{name}", "w").close()  # ready
while not os.path.exists(go):
    time.sleep(0.001)
start, ok, refused = time.time(), 0, 0
for i in range(n):
    users = ["shared"] if max_total else [f"{name}-{i % 7}", "everyone"]
    try:
        book.record("madlib", epsilon=1.0, dataset="shared" if max_total else name, words=[3] * len(users), users=users)
        ok += 1
    except BudgetExceeded:
        refused += 1
print(ok, refused, start, time.time())
"""


def run_writers(path: Path, n_procs: int, n_each: int, *extra: str) -> list[tuple[int, int, float, float]]:
    """``n_procs`` processes writing ``n_each`` releases each, released together; (ok, refused,
    start, end) per process."""
    go = path.parent / "go"
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(path), f"p{i}", str(n_each), str(go), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for i in range(n_procs)
    ]
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.p{i}").exists() for i in range(n_procs)) and time.monotonic() < deadline:
        if any(p.poll() for p in procs):
            break  # a writer failed: its error is reported below
        time.sleep(0.01)  # every writer has started and opened the ledger
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        ok, refused, start, end = out.split()
        results.append((int(ok), int(refused), float(start), float(end)))
    return results


def most_at_once(results: list[tuple[int, int, float, float]]) -> int:
    """The largest number of writers that were running at one moment."""
    return max(sum(r[2] <= t < r[3] for r in results) for t in (r[2] for r in results))


def test_concurrent_writer_processes_lose_and_duplicate_nothing(tmp_path):
    path = tmp_path / "l.db"  # created by the writers themselves, concurrently
    t0 = time.perf_counter()
    results = run_writers(path, 8, 1000)
    elapsed = time.perf_counter() - t0
    assert [r[:2] for r in results] == [(1000, 0)] * 8
    assert most_at_once(results) >= 4, results  # the writers did run together (else this test could not fail)
    con = sqlite3.connect(path)
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT release_id) FROM releases").fetchone() == (8000, 8000)
    assert con.execute("SELECT dataset, COUNT(*) FROM releases GROUP BY dataset").fetchall() == [(f"p{i}", 1000) for i in range(8)]
    assert con.execute("SELECT COUNT(*) FROM release_users").fetchone() == (16000,)
    con.close()
    everyone = {t.key: t for t in Ledger(path).totals("user")}["everyone"]
    assert (everyone.releases, everyone.epsilon_sum) == (8000, 8000.0)
    print(f"8 processes x 1000 releases: {elapsed:.1f} s")


def test_concurrent_writers_never_pass_the_budget(tmp_path):
    path = tmp_path / "l.db"
    Ledger(path).close()
    results = run_writers(path, 8, 150, "300")  # 1,200 attempts at epsilon 1 against a budget of 300
    assert sum(r[0] for r in results) == 300 and sum(r[1] for r in results) == 900
    assert most_at_once(results) >= 2, results
    totals = Ledger(path).totals("user")
    assert [(t.key, t.releases, t.epsilon_sum) for t in totals] == [("shared", 300, 300.0)]


def test_threads_share_one_ledger(tmp_path):
    book = Ledger(tmp_path / "l.db", max_total=300)
    refused = []

    def write(k: int) -> None:
        for _ in range(50):
            try:
                book.record("madlib", epsilon=1, dataset=f"t{k}", words=[2], users=["all"])
            except BudgetExceeded:
                refused.append(k)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(book) == 300 and len(refused) == 100
    assert len({r.release_id for r in book.releases()}) == 300
    assert [(t.key, t.epsilon_sum) for t in book.totals("user")] == [("all", 300.0)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() only")
def test_a_ledger_inherited_through_fork_opens_its_own_connection(tmp_path):
    book = Ledger(tmp_path / "l.db")
    book.record("madlib", epsilon=1, dataset="parent", words=[1])
    pid = os.fork()
    if pid == 0:  # the child: must not use the parent's connection
        code = 1
        try:
            book.record("madlib", epsilon=1, dataset="child", words=[1])
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    book.record("madlib", epsilon=1, dataset="parent", words=[1])
    assert sorted(r.dataset for r in book.releases()) == ["child", "parent", "parent"]


def test_a_pickled_ledger_opens_its_own_connection(tmp_path):
    import pickle

    book = Ledger(tmp_path / "l.db", max_total=2, hash_key="k")
    book.record("madlib", epsilon=1, dataset="d", words=[1], users=["u"])
    copy = pickle.loads(pickle.dumps(book))
    assert (copy.path, copy.max_total, copy.user_key("u")) == (book.path, 2.0, book.user_key("u"))
    copy.record("madlib", epsilon=1, dataset="e", words=[1], users=["u"])
    with pytest.raises(BudgetExceeded):
        book.record("madlib", epsilon=1, dataset="f", words=[1], users=["u"])
    assert len(book) == len(copy) == 2


def test_the_module_docs_state_the_guarantee():
    import deniable.ledger as mod

    doc = mod.__doc__
    for phrase in ("ε·d per word, summed", "basic sequential composition", "Feyisetan et al.", "do **not** bound", "BEGIN IMMEDIATE", "never records"):
        assert phrase.lower() in doc.lower(), phrase
    assert "max_total" in Ledger.__doc__ and "hash_key" in Ledger.__doc__


def test_commits_are_durable_wal_with_synchronous_full(tmp_path):
    """docs/ledger.md promises a recorded release survives a crash: WAL with synchronous=FULL
    (WAL's NORMAL may drop the last commits on power loss)."""
    book = Ledger(tmp_path / "l.db")
    book.record("madlib", epsilon=1, dataset="d", words=1)
    conn = book._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
