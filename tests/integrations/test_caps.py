"""Per-user word caps (deniable.integrations.capping) and the pandas path's ledger records: exactly
N words privatized per user (the first ones in row order), the rest [UNK] or dropped, the
ledger's totals equal to a recomputation, and an over-budget release refused with nothing
privatized or recorded."""

from __future__ import annotations

import numpy as np
import pytest

import deniable
from deniable import Ledger
from deniable.integrations.capping import CAPPED_WORD, allowances, privatized_counts, split_capped
from deniable.ledger import BudgetExceeded, Tally
from deniable.text import privatize_texts
from deniable.text.tokenize import split_words

from ..conftest import random_embedding

pd = pytest.importorskip("pandas")

VOCAB = [f"w{i}" for i in range(30)] + ["do", "s", "nt", "cat"]


@pytest.fixture(scope="module")
def mech():
    return deniable.get_mechanism("madlib", random_embedding(len(VOCAB), 4, seed=2, words=VOCAB), epsilon=2)


def _random_texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    pieces = VOCAB[:8] + ["zzq", "Cat's", "don't", "I'm", "W3", "x’s", "n't", "'s", "-", ", ", "  ", "'", "é"]
    return ["".join(rng.choice(pieces, int(rng.integers(0, 9)), replace=True).tolist()) + rng.choice(["", " ", "."]) for _ in range(n)]


@pytest.mark.parametrize("oov", ["unk", "drop", "keep"])
def test_counts_equal_what_privatize_texts_privatizes(mech, oov):
    texts = _random_texts(400, seed=1)
    per_text: list[int] = []
    with pytest.warns() if oov == "keep" else _nothing():
        privatize_texts(mech, texts, rng=0, oov=oov, privatized_per_text=per_text)
    assert privatized_counts(mech.vocabulary, texts, oov) == per_text
    if oov != "unk":  # control: counting every word would differ
        assert privatized_counts(mech.vocabulary, texts, "unk") != per_text


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("oov", ["unk", "drop"])
def test_a_capped_text_privatizes_exactly_its_allowance(mech, oov):
    clitic_cut = [0]  # prefixes whose last word is tokenized otherwise than in the text (a clitic's context cut)
    for text in _random_texts(400, seed=2):
        n = privatized_counts(mech.vocabulary, [text], oov)[0]
        assert split_capped(text, n, mech.vocabulary, oov, "unk") is None
        for allowed in range(n):
            prefix, rest = split_capped(text, allowed, mech.vocabulary, oov, "unk")  # type: ignore[misc]
            assert privatized_counts(mech.vocabulary, [prefix], oov) == [allowed]  # never more; here exactly
            whole = split_words(text)
            head = split_words(prefix)
            cut = len(head) // 2  # words in the prefix: the text's first words
            assert prefix == "".join(whole[: 2 * cut]) and head[1::2][:-1] == whole[1 : 2 * cut : 2][:-1]
            clitic_cut[0] += head[1::2][-1:] != whole[1 : 2 * cut : 2][-1:]
            assert rest == whole[2 * cut] + "".join(CAPPED_WORD + sep for sep in whole[2 * cut + 2 :: 2])
            dropped = split_capped(text, allowed, mech.vocabulary, oov, "drop")
            assert dropped is not None and dropped[0] == prefix and dropped[1] == rest.replace(CAPPED_WORD, "")
    assert clitic_cut[0] > 0  # the random texts do reach that case


def test_allowances_take_the_first_words_in_row_order():
    assert allowances(["a", "b", "a", "a", "b"], [3, 1, 4, 2, 0], 5) == [3, 1, 2, 0, 0]
    assert allowances([1, 1], [2, 2], 10) == [2, 2]


def _output_words(text: str | None) -> tuple[int, int]:
    """(privatized words, capped words) of an output."""
    if text is None:
        return 0, 0
    words = split_words(text)[1::2]
    capped = sum(w == CAPPED_WORD.strip("[]") for w in words)
    return len(words) - capped, capped


def test_pandas_cap_ledger_totals_and_refusal(mech, tmp_path):
    from deniable.integrations.pandas import privatize_frame

    rng = np.random.default_rng(4)
    rows = [{"id": i, "user": ["ann", "bo", 3][i % 3], "text": None if i == 4 else " ".join(rng.choice(VOCAB[:30], int(rng.integers(2, 7))))} for i in range(24)]
    df = pd.DataFrame(rows)
    book = Ledger(tmp_path / "l.db", max_total=3)
    cap = 9
    out = privatize_frame(df, "text", mech, key="id", rng=1, user_col="user", max_words_per_user=cap, ledger=book, dataset="posts", output="out.parquet")
    expected: dict[str, list[int]] = {}
    for r, o in zip(rows, out["text"]):
        if r["text"] is None:
            assert o is None
            continue
        n = len(r["text"].split())
        e = expected.setdefault(str(r["user"]), [0, 0, 0, 0])  # records, allowed, largest, capped
        a = max(0, min(n, cap - e[1]))
        assert _output_words(o) == (a, n - a)  # the first words of the user in row order are privatized
        e[0], e[1], e[2], e[3] = e[0] + 1, e[1] + a, max(e[2], a), e[3] + n - a
    assert all(e[1] == cap and e[3] > 0 for e in expected.values())  # every user went over the cap
    totals = {t.key: t for t in book.totals("user")}
    assert {k: (t.records, t.words, t.record_bound, t.epsilon_words) for k, t in totals.items()} == {
        k: (e[0], e[1], 2.0 * e[2], 2.0 * e[1]) for k, e in expected.items()
    }
    (rel,) = book.releases()
    assert (rel.records, rel.words, rel.output) == (23, 3 * cap, "out.parquet")
    # drop: the capped words are removed, their separators stay
    dropped = privatize_frame(df, "text", mech, key="id", rng=1, user_col="user", max_words_per_user=cap, over_cap="drop")
    assert all(o is None or CAPPED_WORD not in o for o in dropped["text"])
    assert [len(split_words(o)) if o else 0 for o in dropped["text"]] != [0] * len(rows)
    # control: without the cap every word is privatized
    free = privatize_frame(df, "text", mech, key="id", rng=1)
    assert sum(_output_words(o)[0] for o in free["text"]) > 3 * cap
    # over the budget (2 + 2 > 3): refused, nothing recorded, nothing returned
    with pytest.raises(BudgetExceeded):
        privatize_frame(df, "text", mech, key="id", rng=1, user_col="user", max_words_per_user=cap, ledger=book, dataset="other")
    assert len(book) == 1


def test_pandas_usage_errors(mech, tmp_path):
    from deniable.integrations.pandas import privatize_frame, privatize_series

    df = pd.DataFrame({"text": ["w1 w2", "w3"], "user": ["a", None]})
    with pytest.raises(ValueError, match="users="):
        privatize_series(df["text"], mech, max_words_per_user=1)
    with pytest.raises(ValueError, match="user key"):
        privatize_frame(df, "text", mech, user_col="user", max_words_per_user=1)
    with pytest.raises(ValueError, match="dataset"):
        privatize_frame(df.assign(user=["a", "b"]), "text", mech, user_col="user", ledger=Ledger(tmp_path / "l.db"))
    with pytest.raises(ValueError, match="max_words_per_user"):
        privatize_series(df["text"], mech, max_words_per_user=0)
    with pytest.raises(ValueError, match="over_cap"):
        privatize_series(df["text"], mech, over_cap="mask")
    assert len(Ledger(tmp_path / "l.db")) == 0


def test_tally_totals_equal_adding_records_one_by_one():
    one, agg = Tally(), Tally()
    for words, user in [(3, "a"), (0, "a"), (5, "b"), (2, "a")]:
        one.add(words, user)
    agg.add_totals(3, 5, 3, user="a")
    agg.add_totals(1, 5, 5, user="b")
    assert (one.records, one.words, one.max_words, one.users) == (agg.records, agg.words, agg.max_words, agg.users)
    with pytest.raises(ValueError, match="inconsistent"):
        agg.add_totals(1, 2, 3)
