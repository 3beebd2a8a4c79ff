"""`deniable serve --ledger`: every privatize request appends one ledger row (never the text),
a request over the budget is refused (403) with no text returned and nothing recorded, and many
concurrent requests neither lose nor duplicate a row nor pass the budget together."""

from __future__ import annotations

import threading

import pytest

from deniable import Ledger


def _post(client, **body):
    return client.post("/v1/privatize", json={"mechanism": "madlib", "epsilon": 3.0, **body})


def test_each_request_appends_one_row_with_the_words_privatized(make_client, tmp_path):
    db = tmp_path / "l.db"
    client = make_client(ledger=str(db), ledger_dataset="tickets")
    texts = ["meet me at the station", "the zzqx dog", "call"]
    r = _post(client, texts=texts, users=["alice", 7, "alice"])
    assert r.status_code == 200, r.text
    body = r.json()
    (rel,) = Ledger(db).releases()
    assert body["release_id"] == rel.release_id and "users" not in body
    assert (rel.dataset, rel.mechanism, rel.epsilon, rel.records, rel.words, rel.max_words, rel.users) == ("tickets", "madlib", 3.0, 3, 9, 5, 2)
    users = {t.key: (t.records, t.words, t.record_bound) for t in Ledger(db).totals("user")}
    assert users == {"alice": (2, 6, 15.0), "7": (1, 3, 9.0)}
    r = _post(client, texts=["the zzqx dog"], oov="drop")  # the unknown word is dropped: not privatized, not counted
    assert r.status_code == 200 and Ledger(db).releases()[-1].words == 2
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for word in (b"station", b"zzqx"):
        assert word not in raw  # the ledger never holds text


def test_a_request_over_the_budget_is_refused_before_any_text_is_returned(make_client, tmp_path):
    db = tmp_path / "l.db"
    Ledger(db).record("madlib", epsilon=3, dataset="elsewhere", words=[2], users=["bob"])
    client = make_client(ledger=str(db), max_total=5.0)
    r = _post(client, texts=["call me"], users=["bob"])  # bob: 3 + 3 > 5
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "budget_exceeded" and "user 'bob'" in err["message"] and "texts" not in r.json()
    assert str(tmp_path) not in r.text  # no server path in the answer
    assert _post(client, texts=["call me"], users=["carol"]).status_code == 200
    r = _post(client, texts=["call me"], users=["dave"])  # the dataset: 3 + 3 > 5
    assert r.status_code == 403 and "dataset 'deniable-serve'" in r.json()["error"]["message"]
    assert [r.dataset for r in Ledger(db).releases()] == ["elsewhere", "deniable-serve"]


def test_user_keys_need_a_ledger_and_one_per_text(make_client, tmp_path):
    r = _post(make_client(), texts=["meet me"], users=["a"])
    assert r.status_code == 422 and "no ledger" in r.json()["error"]["message"]
    client = make_client(ledger=str(tmp_path / "l.db"))
    r = _post(client, texts=["meet me", "call"], users=["a"])
    assert r.status_code == 422 and "one per text" in r.json()["error"]["message"]
    assert _post(client, texts=["meet"], users=[""]).status_code == 422
    assert _post(client, texts=["meet"], users=[1.5]).status_code == 422
    assert len(Ledger(tmp_path / "l.db")) == 0
    with pytest.raises(ValueError, match="ledger"):
        from deniable.service import ServiceConfig

        ServiceConfig(max_total=3)


def test_concurrent_requests_lose_nothing_duplicate_nothing_and_never_pass_the_budget(make_client, tmp_path):
    db = tmp_path / "l.db"
    n_threads, per_thread = 8, 25
    client = make_client(ledger=str(db), max_total=100.0, max_concurrent=8)
    answers: list[tuple[int, str | None]] = []
    lock = threading.Lock()
    start = threading.Barrier(n_threads)
    in_flight = [0, 0]  # now, most at once

    def work(k: int) -> None:
        start.wait()
        for _ in range(per_thread):
            with lock:
                in_flight[0] += 1
                in_flight[1] = max(in_flight)
            r = client.post("/v1/privatize", json={"mechanism": "madlib", "epsilon": 1.0, "texts": ["meet me at noon"], "users": [f"t{k}"]})
            with lock:
                in_flight[0] -= 1
                answers.append((r.status_code, r.json().get("release_id")))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert in_flight[1] >= 4  # the requests did overlap
    ok = [rid for status, rid in answers if status == 200]
    assert sorted({s for s, _ in answers}) == [200, 403]  # the budget of 100 < 200 requests was reached
    assert len(ok) == 100 and len(answers) == n_threads * per_thread
    book = Ledger(db)
    assert sorted(r.release_id for r in book.releases()) == sorted(ok)  # every answered release recorded once, no other
    (total,) = book.totals("dataset")
    assert (total.releases, total.epsilon_sum, total.words) == (100, 100.0, 400)
    assert sum(t.releases for t in book.totals("user")) == 100
