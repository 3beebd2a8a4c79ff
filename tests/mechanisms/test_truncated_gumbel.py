"""The deprecated name ``truncated_gumbel`` / ``TruncatedGumbel``: it warns (DeprecationWarning
naming the docs page), builds the k-nearest TEM (same distribution, same samples for a seed) and
is not listed among the available mechanisms."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import deniable
from deniable import Embedding, available_mechanisms, get_mechanism
from deniable.mechanisms.knn_tem import KnnTEM
from deniable.mechanisms.truncated_gumbel import TruncatedGumbel

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mechanisms"


def make_embedding(n: int = 40, dim: int = 5, seed: int = 4) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def test_the_old_name_warns_and_builds_the_same_mechanism() -> None:
    emb = make_embedding()
    new = get_mechanism("knn_tem", emb, epsilon=3.0, k=6, cache_dir=False)
    with pytest.warns(DeprecationWarning, match="knn_tem.md") as rec:
        old = get_mechanism("truncated_gumbel", emb, epsilon=3.0, k=6, cache_dir=False)
    assert "not the FLAIRS 2021" in str(rec[0].message)
    with pytest.warns(DeprecationWarning):
        direct = TruncatedGumbel(emb, epsilon=3.0, k=6, cache_dir=False)
    assert isinstance(old, KnnTEM) and old.name == new.name == "knn_tem"
    ids = np.r_[np.arange(40), -1].repeat(30)
    np.testing.assert_array_equal(old.sample_ids(ids, rng=4), new.sample_ids(ids, rng=4))
    np.testing.assert_array_equal(direct.log_probability_rows([0, 5, -1]), new.log_probability_rows([0, 5, -1]))
    assert old.params == new.params and old.guarantee == new.guarantee
    with pytest.warns(DeprecationWarning):  # unpickling rebuilds it under its old name, which warns again
        clone = pickle.loads(pickle.dumps(old))
    np.testing.assert_array_equal(clone.sample_ids(ids, rng=4), new.sample_ids(ids, rng=4))


def test_the_new_name_does_not_warn_and_the_old_one_is_not_listed() -> None:
    import warnings

    emb = make_embedding()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        get_mechanism("knn_tem", emb, epsilon=1.0, k=3, cache_dir=False)
        assert deniable.KnnTEM is KnnTEM and deniable.TruncatedGumbel is TruncatedGumbel  # importing does not warn
    assert "knn_tem" in available_mechanisms() and "truncated_gumbel" not in available_mechanisms()
    assert "KnnTEM" in deniable.__all__ and "TruncatedGumbel" not in deniable.__all__


def test_docs_page_says_what_it_is() -> None:
    page = (DOCS / "knn_tem.md").read_text(encoding="utf-8")
    assert "not the FLAIRS 2021" in page and "truncated_gumbel" in page
    assert not (DOCS / "truncated_gumbel.md").exists()
