"""Hugging Face datasets: a small function per worker, the same output for any num_proc."""

from __future__ import annotations

import pickle

import pytest

import deniable
from deniable.integrations.keyed import privatize_keyed

from ..conftest import random_embedding

datasets = pytest.importorskip("datasets")
from deniable.integrations.hf import dataset_privatizer, privatize_dataset  # noqa: E402


def test_map_is_small_and_independent_of_num_proc_and_batch_size(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    mech = deniable.get_mechanism("madlib", random_embedding(4000, 50), epsilon=3)  # ~2 MB of arrays
    texts = [f"w{i % 50} w{(i * 7) % 4000} unknown" for i in range(60)] + [None]
    ds = datasets.Dataset.from_dict({"text": texts, "id": list(range(61))})
    fn = dataset_privatizer(mech, "text", seed=3, output_column="private")
    assert len(pickle.dumps(fn)) < 2000 < len(pickle.dumps(mech)) // 100
    one = ds.map(fn, batched=True, with_indices=True, batch_size=7)["private"]
    two = privatize_dataset(ds, "text", mech, seed=3, output_column="private", num_proc=2, batch_size=25)["private"]
    assert one == two == privatize_keyed(mech, texts, list(range(61)), seed=3, stream="text")
    assert one[-1] is None and all("unknown" not in t for t in one[:-1])
    by_id = privatize_dataset(ds, "text", mech, seed=3, key="id")["text"]
    assert by_id == one


def test_map_without_indices_says_how_to_call_it():
    mech = deniable.get_mechanism("madlib", random_embedding(20, 3), epsilon=3)
    ds = datasets.Dataset.from_dict({"text": ["w1"]})
    with pytest.raises(TypeError, match="with_indices=True"):
        ds.map(dataset_privatizer(mech, "text", seed=0), batched=True)
