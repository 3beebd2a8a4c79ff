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
    fn = dataset_privatizer(mech, "text", key="id", rng=3, output_column="private")
    assert len(pickle.dumps(fn)) < 2000 < len(pickle.dumps(mech)) // 100
    one = ds.map(fn, batched=True, batch_size=7)["private"]
    two = privatize_dataset(ds, "text", mech, key="id", rng=3, output_column="private", num_proc=2, batch_size=25)["private"]
    assert one == two == privatize_keyed(mech, texts, list(range(61)), rng=3, stream="text")
    assert one[-1] is None and all("unknown" not in t for t in one[:-1])


def test_each_split_and_each_data_set_is_its_own_release():
    """A DatasetDict: every split privatized, each with its own release identity (its name), so
    equal rows of two splits do not share randomness, with or without a seed; a privatizer used
    on two data sets gives them independent randomness."""
    mech = deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=0.5)
    text = "w1 w2 w3 w4 w5 w6"
    split = datasets.Dataset.from_dict({"text": [text] * 8, "id": list(range(8))})
    dd = datasets.DatasetDict({"train": split, "test": split})
    out = privatize_dataset(dd, "text", mech)
    assert isinstance(out, datasets.DatasetDict) and set(out) == {"train", "test"}
    train, test = list(out["train"]["text"]), list(out["test"]["text"])
    assert train != test and len(set(train)) > 1  # no randomness shared between or within the splits
    seeded = privatize_dataset(dd, "text", mech, key="id", rng=4)
    ref = {name: privatize_keyed(mech, [text] * 8, list(range(8)), rng=4, stream="text", release_id=name) for name in ("train", "test")}
    assert {name: list(seeded[name]["text"]) for name in seeded} == ref
    assert list(privatize_dataset(split, "text", mech, key="id", rng=4, release_id="train")["text"]) == ref["train"]
    fn = dataset_privatizer(mech, "text")
    a, b = split.map(fn, batched=True)["text"], split.map(fn, batched=True)["text"]
    assert list(a) != list(b)  # one privatizer, two data sets: independent
    with pytest.raises(ValueError, match=r"seed=4 without row keys.*key=<id column>"):
        privatize_dataset(dd, "text", mech, rng=4)
    with pytest.warns(deniable.PrivacyWarning, match="content_keys"):
        same = privatize_dataset(dd, "text", mech, rng=4, content_keys=True)
    assert len(set(same["train"]["text"])) == 1


def test_map_needs_batches_and_names_the_batch_in_errors():
    mech = deniable.get_mechanism("madlib", random_embedding(20, 3), epsilon=3)
    ds = datasets.Dataset.from_dict({"text": ["w1", "w2"], "id": [1, None]})
    with pytest.raises(TypeError, match="batched=True"):
        ds.map(dataset_privatizer(mech, "text"))
    with pytest.raises(ValueError, match="batch starting at dataset row 0: row 1: the row key is missing"):
        ds.map(dataset_privatizer(mech, "text", key="id"), batched=True, with_indices=True)


def test_seed_is_a_deprecated_alias_of_rng(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    mech = deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=1)
    texts = [f"w{i % 40} w{(i * 3) % 40}" for i in range(20)]
    ds = datasets.Dataset.from_dict({"text": texts, "id": list(range(20))})
    new = privatize_dataset(ds, "text", mech, key="id", rng=6)["text"]
    with pytest.warns(DeprecationWarning, match=r"privatize_dataset\(seed=\.\.\.\) is deprecated; use rng="):
        old = privatize_dataset(ds, "text", mech, key="id", seed=6)["text"]
    assert old == new == privatize_keyed(mech, texts, list(range(20)), rng=6, stream="text")
    assert new != privatize_dataset(ds, "text", mech, key="id", rng=7)["text"]  # control: the seed matters
    with pytest.warns(DeprecationWarning, match=r"dataset_privatizer\(seed=\.\.\.\) is deprecated; use rng="):
        fn = dataset_privatizer(mech, "text", key="id", seed=6)
    assert ds.map(fn, batched=True)["text"] == new
    with pytest.raises(TypeError, match="both rng= and seed="):
        privatize_dataset(ds, "text", mech, key="id", rng=6, seed=6)
    with pytest.raises(TypeError, match="both rng= and seed="):
        dataset_privatizer(mech, "text", key="id", rng=6, seed=6)
