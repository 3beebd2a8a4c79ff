"""`deniable privatize --ledger` and `deniable ledger show`: rows and totals, the budget (exit 1, no
output written), usage errors (exit 2), and no text in the ledger file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from deniable import Ledger
from deniable.cli.main import cli

WORDS = ["zebra", "saxophone", "umbrella", "lighthouse", "marmalade", "quokka", "trombone", "xylophone", "the", "my", "and", "for", "by", "an"]


def run(*args, input=None, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env, catch_exceptions=False)


@pytest.fixture
def files(tmp_path):
    """A small embedding holding every input word, and a JSON Lines and a CSV input."""
    rng = np.random.default_rng(0)
    emb = tmp_path / "emb.txt"
    with open(emb, "w", encoding="utf-8") as f:
        for w in [*WORDS, *(f"w{i}" for i in range(20))]:
            f.write(w + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(5)) + "\n")
    jsonl = tmp_path / "in.jsonl"
    rows = [
        {"id": 1, "user": "annabel", "body": "my zebra and the saxophone"},  # 5 words
        {"id": 2, "user": 42, "body": "an umbrella by the lighthouse"},  # 5 words
        {"id": 3, "user": "annabel", "body": "marmalade for the quokka"},  # 4 words
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]) + "\n", encoding="utf-8")
    table = tmp_path / "in.csv"
    with open(table, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["user", "body"])
        w.writerow(["bob", "trombone and xylophone"])
        w.writerow(["cy", "the zebra"])
        w.writerow(["bob", "quokka"])
    return tmp_path, emb, jsonl, table


def privatize(emb, src, out, *extra, input=None, env=None):
    return run("privatize", src, "-o", out, "-m", "madlib", "-e", "2", "--embedding", emb, "--column", "body", "--seed", "0", *extra, input=input, env=env)


def test_privatize_appends_a_release_and_show_prints_the_totals(files):
    tmp, emb, jsonl, table = files
    book = tmp / "ledger.db"
    r = privatize(emb, jsonl, tmp / "a.jsonl", "--ledger", book, "--user-column", "user")
    assert r.exit_code == 0, r.output
    assert "ledger: release" in r.stderr and "3 user key(s)" not in r.stderr and "2 user key(s)" in r.stderr
    r = privatize(emb, table, tmp / "b.csv", "--ledger", book, "--user-column", "user", "--dataset", "tickets")
    assert r.exit_code == 0, r.output
    rels = Ledger(book).releases()
    assert [(x.mechanism, x.epsilon, x.records, x.words, x.max_words, x.users) for x in rels] == [("madlib", 2.0, 4, 14, 5, 2), ("madlib", 2.0, 3, 6, 3, 2)]
    assert rels[0].dataset.startswith("sha256:") and rels[1].dataset == "tickets"
    assert rels[0].output == str((tmp / "a.jsonl").resolve()) and rels[0].metric.startswith("Euclidean")
    assert (tmp / "a.jsonl").exists() and (tmp / "b.csv").exists()

    r = run("ledger", "show", book, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["releases"] == 2 and [d["key"] for d in doc["datasets"]] == sorted([rels[0].dataset, "tickets"])
    users = {u["key"]: u for u in doc["users"]}
    assert set(users) == {"annabel", "42", "bob", "cy"}
    assert tuple(users["annabel"][k] for k in ("records", "words", "epsilon_sum", "record_bound", "epsilon_words")) == (2, 9, 2.0, 10.0, 18.0)
    assert (users["bob"]["words"], users["bob"]["record_bound"]) == (4, 6.0)

    r = run("ledger", "show", book)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"ledger {book}: 2 release(s), 2 dataset(s), 4 user key(s)")
    assert lines[1].split()[:8] == ["scope", "key", "releases", "records", "words", "epsilon_sum", "record_bound", "epsilon_words"]
    assert any(line.split()[:8] == ["user", "annabel", "1", "2", "9", "2", "10", "18"] for line in lines), r.stdout
    assert any(line.startswith("d1: Euclidean") for line in lines) and "epsilon * d per word, summed" in r.stdout


def test_over_budget_exits_1_and_writes_no_output(files):
    tmp, emb, jsonl, _ = files
    book = tmp / "ledger.db"
    assert privatize(emb, jsonl, tmp / "a.jsonl", "--ledger", book, "--user-column", "user", "--max-total", "3").exit_code == 0
    # another dataset name, but user 'annabel' already has epsilon_sum 2: 2 + 2 > 3, found after the run
    before = sorted(p.name for p in tmp.iterdir())
    r = privatize(emb, jsonl, tmp / "b.jsonl", "--ledger", book, "--user-column", "user", "--max-total", "3", "--dataset", "again")
    assert r.exit_code == 1
    err = [line for line in r.stderr.splitlines() if line.startswith("Error")]
    assert len(err) == 1 and "release refused by the ledger" in err[0] and "> max_total 3" in err[0] and "the output was not written" in err[0]
    assert sorted(p.name for p in tmp.iterdir()) == before  # no output, no temporary file
    assert len(Ledger(book)) == 1
    # the same dataset again: refused before anything is privatized
    r = privatize(emb, jsonl, tmp / "c.jsonl", "--ledger", book, "--max-total", "3")
    assert r.exit_code == 1 and "nothing was privatized or written" in r.stderr and "dataset 'sha256:" in r.stderr
    assert not (tmp / "c.jsonl").exists() and len(Ledger(book)) == 1
    # control: a budget that fits is accepted
    assert privatize(emb, jsonl, tmp / "d.jsonl", "--ledger", book, "--user-column", "user", "--max-total", "4", "--dataset", "again").exit_code == 0
    assert len(Ledger(book)) == 2 and (tmp / "d.jsonl").exists()


def test_usage_errors_exit_2(files):
    tmp, emb, jsonl, table = files
    txt = tmp / "in.txt"
    txt.write_text("the zebra\n")
    book = tmp / "ledger.db"
    cases = [
        ((jsonl, tmp / "o", "--max-total", "3"), "--ledger"),
        ((jsonl, tmp / "o", "--user-column", "user"), "--ledger"),
        ((jsonl, tmp / "o", "--dataset", "x"), "--ledger"),
        ((jsonl, "-", "--ledger", book, "--max-total", "3"), "-o FILE"),
        ((txt, tmp / "o", "--ledger", book, "--user-column", "user"), "jsonl or csv"),
        ((jsonl, tmp / "o", "--ledger", book, "--user-column", "body"), "never stores text"),
        ((jsonl, tmp / "o", "--ledger", book, "--max-total", "0"), "max-total"),
        ((jsonl, tmp / "o", "--ledger", book, "--dataset", " "), "non-empty"),
        (("-", tmp / "o", "--ledger", book), "--dataset NAME"),
        ((jsonl, tmp / "o", "--ledger", tmp), "directory"),
        ((jsonl, tmp / "o", "--ledger", book, "--spark"), "--spark"),
    ]
    for args, message in cases:
        r = privatize(emb, *args)
        assert r.exit_code == 2, (args, r.output)
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    r = run("privatize", jsonl, table, "-o", tmp, "-m", "madlib", "-e", "2", "--embedding", emb, "--ledger", book, "--dataset", "x")
    assert r.exit_code == 2 and "--dataset names one input" in r.stderr
    assert not book.exists() and not (tmp / "o").exists()  # a usage error creates nothing
    assert run("ledger", "show", tmp / "missing.db").exit_code == 2
    assert run("ledger").exit_code in (0, 2) and "show" in run("ledger", "--help").stdout


def test_data_errors_exit_1_with_one_line(files):
    tmp, emb, jsonl, _ = files
    bad = tmp / "bad.jsonl"
    bad.write_text(json.dumps({"user": "annabel", "body": "the zebra"}) + "\n" + json.dumps({"body": "the quokka"}) + "\n")
    r = privatize(emb, bad, tmp / "o.jsonl", "--ledger", tmp / "l.db", "--user-column", "user")
    assert r.exit_code == 1 and "bad.jsonl:2: no field 'user' (--user-column)" in r.stderr and not (tmp / "o.jsonl").exists()
    bad.write_text(json.dumps({"user": [1], "body": "the zebra"}) + "\n")
    r = privatize(emb, bad, tmp / "o.jsonl", "--ledger", tmp / "l.db", "--user-column", "user")
    assert r.exit_code == 1 and "must be a non-empty string or an integer" in r.stderr
    assert len(Ledger(tmp / "l.db")) == 0
    (tmp / "notes.db").write_text("not a ledger\n" * 50)
    for args in (("ledger", "show", tmp / "notes.db"),):
        r = run(*args)
        assert r.exit_code == 1 and r.stderr.strip().startswith("Error:") and "not a deniable ledger" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = privatize(emb, jsonl, tmp / "o.jsonl", "--ledger", tmp / "notes.db")
    assert r.exit_code == 1 and "not a deniable ledger" in r.stderr and not (tmp / "o.jsonl").exists()


def test_stdin_needs_a_name_and_stdout_is_recorded(files):
    tmp, emb, _, _ = files
    book = tmp / "l.db"
    r = run("privatize", "-", "-m", "madlib", "-e", "2", "--embedding", emb, "--seed", "0", "--ledger", book, "--dataset", "pasted", input="the zebra and the quokka\n")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.split()) == 5
    (rel,) = Ledger(book).releases()
    assert (rel.dataset, rel.output, rel.records, rel.words) == ("pasted", "<stdout>", 1, 5)


def test_the_ledger_file_holds_no_input_word(files):
    tmp, emb, jsonl, table = files
    book = tmp / "l.db"
    for src, out in ((jsonl, "a.jsonl"), (table, "b.csv")):
        assert privatize(emb, src, tmp / out, "--ledger", book, "--user-column", "user").exit_code == 0
    assert run("ledger", "show", book).exit_code == 0
    data = b"".join(p.read_bytes() for p in (book, Path(f"{book}-wal"), Path(f"{book}-shm")) if p.exists())
    texts = [json.loads(line)["body"] for line in jsonl.read_text().splitlines() if line.strip()] + ["trombone and xylophone", "the zebra", "quokka"]
    words = {w for t in texts for w in t.split() if len(w) > 3}
    assert len(words) == 8
    found = sorted(w for w in words if w.encode() in data)
    assert not found, f"input words in the ledger file: {found}"
    assert b"annabel" in data and b"bob" in data  # control: the search sees the user keys it stores


def test_a_key_in_the_environment_stores_keyed_hashes(files):
    tmp, emb, jsonl, _ = files
    book = tmp / "l.db"
    r = privatize(emb, jsonl, tmp / "a.jsonl", "--ledger", book, "--user-column", "user", env={"DENIABLE_LEDGER_KEY": "s3cret"})
    assert r.exit_code == 0, r.output
    keyed = Ledger(book, hash_key="s3cret")
    assert {t.key for t in keyed.totals("user")} == {keyed.user_key("annabel"), keyed.user_key(42)}
    assert keyed.releases()[0].dataset.startswith("hmac-sha256:")
    data = book.read_bytes() + Path(f"{book}-wal").read_bytes()
    assert b"annabel" not in data and keyed.user_key("annabel").encode() in data
    # without the key, a write is refused before the run (the totals would split): exit 1, nothing written
    r = privatize(emb, jsonl, tmp / "b.jsonl", "--ledger", book, "--user-column", "user", "--dataset", "x")
    assert r.exit_code == 1 and "DENIABLE_LEDGER_KEY" in r.stderr and not (tmp / "b.jsonl").exists()
    assert len(Ledger(book)) == 1


def test_show_marks_keys_released_under_several_metrics(tmp_path):
    from deniable import Madlib
    from deniable.embeddings import Embedding

    book = Ledger(tmp_path / "l.db")
    assert run("ledger", "show", tmp_path / "l.db").stdout.startswith(f"ledger {tmp_path / 'l.db'}: 0 release(s)")
    rng = np.random.default_rng(0)
    for seed in (0, 1):  # two embeddings: two metrics d
        emb = Embedding([f"w{i}" for i in range(10)], rng.standard_normal((10, 3)).astype(np.float32))
        book.record(Madlib(emb, epsilon=1), dataset="d", words=[2, 3], users=[f"only-{seed}", "both"])
    totals = {t.key: t for t in book.totals("user")}
    assert len(totals["both"].metrics) == 2 and len(totals["only-0"].metrics) == 1
    r = run("ledger", "show", tmp_path / "l.db")
    assert r.exit_code == 0
    rows = {line.split()[1]: line.split()[8] for line in r.stdout.splitlines() if line.startswith(("user ", "dataset "))}
    assert rows == {"d": "d1,d2", "both": "d1,d2", "only-0": "d1", "only-1": "d2"} or rows == {"d": "d1,d2", "both": "d1,d2", "only-0": "d2", "only-1": "d1"}
    assert "several d" in r.stdout and "bookkeeping, not one guarantee" in r.stdout
