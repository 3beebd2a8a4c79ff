"""PrivatizeTransformer: a scikit-learn transformer that clones, pipes and follows rng."""

from __future__ import annotations

import numpy as np
import pytest

import deniable

from ..conftest import random_embedding

pytest.importorskip("sklearn")
from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from deniable.integrations.sklearn import PrivatizeTransformer


@pytest.fixture(scope="module")
def emb():
    return random_embedding(40, 4)


def test_params_clone_and_rng(emb):
    t = PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=np.random.default_rng(0))
    assert t.get_params()["epsilon"] == 2 and t.get_params()["content_keys"] is False
    c = clone(t).set_params(epsilon=5)
    assert c.epsilon == 5 and t.epsilon == 2
    texts = ["w1 w2 w3", None, "w4 W5"]
    a = t.fit_transform(texts)
    assert a[1] is None and a.dtype == object
    # a Generator is drawn from at each call: the same outputs for the same Generator seed
    assert list(a) == list(PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=np.random.default_rng(0)).transform(texts))
    many = ["w1 w2 w3 w4 w5 w6"] * 3
    assert list(t.transform(many)) != list(t.transform(many))
    rs = PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=np.random.RandomState(1))
    assert list(rs.transform(many)) != list(rs.transform(many))
    fresh = PrivatizeTransformer("madlib", epsilon=2, embedding=emb)
    once = fresh.transform(many)
    assert len(set(once)) > 1 and list(once) != list(fresh.transform(many))  # equal texts, independent draws
    # an int would give row i of every call the same randomness: refused unless content keys are asked for
    with pytest.raises(ValueError, match=r"rng=0 would give row i of every transform call the same randomness"):
        PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=0).fit(texts)
    keyed = PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=0, content_keys=True)
    with pytest.warns(deniable.PrivacyWarning, match="content_keys"):
        same = keyed.fit_transform(many + texts)
    assert len(set(same[:3])) == 1
    with pytest.warns(deniable.PrivacyWarning):
        assert list(same) == list(keyed.transform(many + texts))  # content keys and an int: the same output at every call


def test_random_state_is_a_deprecated_alias_of_rng(emb):
    texts = ["w1 w2 w3 w4 w5 w6", "w7 w8"]
    old = PrivatizeTransformer("madlib", epsilon=2, embedding=emb, random_state=np.random.default_rng(4))
    assert old.get_params()["random_state"] is not None and old.get_params()["rng"] is None
    with pytest.warns(DeprecationWarning, match=r"random_state=\.\.\.\) is deprecated; use rng="):
        a = old.transform(texts)
    new = PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=np.random.default_rng(4))
    c = clone(new)  # copies the Generator in its current state
    assert list(a) == list(new.transform(texts))  # same values, same outputs
    # clone keeps both parameters; a clone of a new-style transformer never warns
    assert set(c.get_params()) >= {"rng", "random_state"} and c.get_params()["random_state"] is None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert list(c.transform(texts)) == list(a)
    old_clone = clone(PrivatizeTransformer("madlib", epsilon=2, embedding=emb, random_state=np.random.default_rng(4)))
    assert old_clone.get_params()["rng"] is None
    with pytest.warns(DeprecationWarning):
        assert list(old_clone.transform(texts)) == list(a)  # clone copies the deprecated parameter too
    with pytest.raises(ValueError, match="give rng only"):
        PrivatizeTransformer("madlib", epsilon=2, embedding=emb, rng=1, random_state=1, content_keys=True).fit(texts)
    with pytest.raises(ValueError, match=r"rng=0 would give row i"), pytest.warns(DeprecationWarning):
        PrivatizeTransformer("madlib", epsilon=2, embedding=emb, random_state=0).fit(texts)


def test_in_a_pipeline_before_a_vectorizer(emb):
    rng = np.random.default_rng(0)
    X = [" ".join(rng.choice([f"w{i}" for i in range(20)], 6)) for _ in range(40)]
    y = [i % 2 for i in range(40)]
    pipe = make_pipeline(PrivatizeTransformer("madlib", epsilon=50, embedding=emb), CountVectorizer(), LogisticRegression())
    pipe.fit(X, y)
    assert pipe.predict(X).shape == (40,)
    assert clone(pipe).get_params()["privatizetransformer__epsilon"] == 50


def test_series_and_errors(emb):
    pd = pytest.importorskip("pandas")
    t = PrivatizeTransformer("madlib", epsilon=2, embedding=emb)
    s = pd.Series(["w1", None], index=[7, 8], name="t")
    out = t.transform(s)
    assert isinstance(out, pd.Series) and out.index.tolist() == [7, 8] and out[8] is None
    with pytest.raises(TypeError, match="row 1: expected a string"):
        t.transform(["w1", 3])
    with pytest.raises(TypeError, match="single string"):
        t.transform("w1 w2")
    with pytest.raises(ValueError, match="oov must be one of"):
        PrivatizeTransformer("madlib", epsilon=2, embedding=emb, oov="pass").fit(["w1"])
    with pytest.raises(TypeError, match="epsilon is required"):
        PrivatizeTransformer("madlib").fit(["w1"])
