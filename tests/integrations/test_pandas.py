"""pandas helpers: missing values kept, errors naming the row, keyed mode equal to the reference."""

from __future__ import annotations

import numpy as np
import pytest

import deniable
from deniable.integrations.keyed import privatize_keyed

from ..conftest import random_embedding

pd = pytest.importorskip("pandas")
from deniable.integrations.pandas import privatize_frame, privatize_series  # noqa: E402


@pytest.fixture(scope="module")
def mech():
    return deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=2)


def test_series_keeps_missing_values_and_matches_the_keyed_reference(mech):
    s = pd.Series(["w1 w2, w3", None, np.nan, "W4 unknownword", pd.NA, ""], index=list("abcdef"), name="text")
    out = privatize_series(s, mech, key="index", rng=0)
    assert out.index.equals(s.index) and out.name == "text"
    assert out["b"] is None and isinstance(out["c"], float) and np.isnan(out["c"]) and out["e"] is pd.NA
    assert out[["a", "d", "f"]].tolist() == privatize_keyed(mech, ["w1 w2, w3", "W4 unknownword", ""], ["a", "d", "f"], rng=0, stream="text")
    assert "unknownword" not in out["d"]
    typed = privatize_series(s.astype("string"), mech)
    assert typed.dtype == "string" and typed.isna().tolist() == [False, True, True, False, True, False]


def test_default_is_a_fresh_release_with_independent_rows(mech):
    s = pd.Series(["w1 w2 w3 w4 w5 w6"] * 6, name="text")
    a, b = privatize_series(s, mech), privatize_series(s, mech)
    assert a.nunique() > 1 and a.tolist() != b.tolist()  # equal texts: independent outputs, in one call and across calls
    g = np.random.default_rng(5)  # a Generator is drawn from: reproducible from its seed, calls differ
    first = privatize_series(s, mech, rng=g)
    assert first.tolist() != privatize_series(s, mech, rng=g).tolist()
    assert first.tolist() == privatize_series(s, mech, rng=np.random.default_rng(5)).tolist()
    # an explicit release identity separates two releases keyed by the same ids
    df = pd.DataFrame({"id": range(6), "text": s})
    train = privatize_frame(df, "text", mech, key="id", rng=1, release_id="train")["text"]
    test = privatize_frame(df, "text", mech, key="id", rng=1, release_id="test")["text"]
    assert train.tolist() != test.tolist()
    assert train.tolist() == privatize_keyed(mech, s.tolist(), list(range(6)), rng=1, stream="text", release_id="train")
    with pytest.warns(deniable.PrivacyWarning, match="content_keys"):
        same = privatize_frame(df, "text", mech, rng=1, content_keys=True)["text"]
    assert same.nunique() == 1


def test_errors_name_the_row(mech):
    with pytest.raises(TypeError, match=r"row 2 \(index 'z'\) of 'body': expected a string or a missing value, got int 7"):
        privatize_series(pd.Series(["w1", "w2", 7], index=["x", "y", "z"], name="body"), mech)
    with pytest.raises(ValueError, match=r"row 1 \(index 11\): the row key is missing"):
        privatize_series(pd.Series(["w1", "w2"], index=[10, 11]), mech, key=[1, None], rng=0)
    with pytest.raises(ValueError, match=r"seed=0 without row keys.*key='index'"):
        privatize_series(pd.Series(["w1"]), mech, rng=0)
    with pytest.raises(TypeError, match="epsilon is required"):
        privatize_series(pd.Series(["w1"]), "madlib")
    with pytest.raises(KeyError, match="no column 'body'"):
        privatize_frame(pd.DataFrame({"text": ["w1"]}), "body", mech)


def test_keyed_mode_equals_the_reference_and_ignores_order(mech):
    df = pd.DataFrame({"id": [5, 3, 9, 1], "text": ["w1 w2", None, "w3 w3 w3", "w1 w2"]})
    out = privatize_frame(df, "text", mech, key="id", rng=4, output_col="private")
    assert out["text"].equals(df["text"])  # the input column is kept
    ref = privatize_keyed(mech, df["text"].tolist(), df["id"].tolist(), rng=4, stream="text")
    assert out["private"].tolist() == ref
    shuffled = privatize_frame(df.iloc[::-1], "text", mech, key="id", rng=4)
    assert shuffled["text"].iloc[::-1].tolist() == ref
    by_index = privatize_series(df.set_index("id")["text"], mech, key="index", rng=4)
    assert by_index.tolist() == ref
