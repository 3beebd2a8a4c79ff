"""``precomputed_neighbors``: how many nearest words TEM, SanText, SanText+ and 1-Diffractor
store per word (a speed and memory setting), formerly ``k`` (a deprecated alias that warns);
kNN-TEM's ``k`` (its candidate-list size, which defines its distribution) keeps its name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.mechanisms.diffractor import Diffractor, greedy_word_list
from deniable.mechanisms.knn_tem import KnnTEM
from deniable.mechanisms.santext import SanText, SanTextPlus
from deniable.mechanisms.tem import TEM
from deniable.mechanisms.truncated_gumbel import TruncatedGumbel

RENAMED = {"tem": TEM, "santext": SanText, "santext_plus": SanTextPlus, "diffractor": Diffractor}
EPSILON = {"tem": 1.0, "santext": 1.0, "santext_plus": 1.0, "diffractor": 0.3}
N = 200
IDS = np.tile(np.arange(N), 20)


def make_embedding(n: int = N, dim: int = 6, seed: int = 3) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


EMB = make_embedding()


def build(name: str, **kw):
    extra = {"sensitive": [f"w{i}" for i in range(0, N, 3)], "p": 0.4} if name == "santext_plus" else {}
    return RENAMED[name](EMB, epsilon=EPSILON[name], cache_dir=False, **extra, **kw)


@pytest.mark.parametrize("name", sorted(RENAMED))
def test_old_keyword_warns_and_gives_the_same_samples(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keyword never warns
        new = build(name, precomputed_neighbors=64)
    with pytest.warns(DeprecationWarning, match=r"k=\.\.\.\) is deprecated: pass precomputed_neighbors=") as rec:
        old = build(name, k=64)
    assert rec[0].filename == __file__  # the warning points at the caller's line
    assert new.precomputed_neighbors == old.precomputed_neighbors == 64 and not hasattr(new, "k")
    a, b = new.sample_ids(IDS, rng=11), old.sample_ids(IDS, rng=11)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, new.sample_ids(IDS, rng=12))  # control: the comparison can fail
    assert new.params == old.params and repr(new) == repr(old) and "k=" not in repr(new).replace("neighbors=", "")
    with pytest.warns(DeprecationWarning):
        same = build(name, precomputed_neighbors=64, k=64)  # both, agreeing: accepted
    assert same.precomputed_neighbors == 64
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="precomputed_neighbors=64 and its deprecated alias k=32"):
        build(name, precomputed_neighbors=64, k=32)


@pytest.mark.parametrize("name", sorted(RENAMED))
def test_registry_accepts_both_names(name: str) -> None:
    extra = {"sensitive": ["w1", "w2", "w3"]} if name == "santext_plus" else {}
    new = get_mechanism(name, EMB, epsilon=EPSILON[name], precomputed_neighbors=16, cache_dir=False, **extra)
    with pytest.warns(DeprecationWarning, match="precomputed_neighbors="):
        old = get_mechanism(name, EMB, epsilon=EPSILON[name], k=16, cache_dir=False, **extra)
    np.testing.assert_array_equal(new.sample_ids(IDS, rng=4), old.sample_ids(IDS, rng=4))


@pytest.mark.parametrize("n_precomputed", [3, 64])
def test_the_distribution_does_not_depend_on_precomputed_neighbors(n_precomputed: int) -> None:
    """The exact samplers: the same closed form whatever the table size (the samples for a seed
    may differ: the rejection rounds draw differently)."""
    small, full = TEM(EMB, epsilon=0.7, precomputed_neighbors=n_precomputed, cache_dir=False), TEM(EMB, epsilon=0.7, cache_dir=False)
    np.testing.assert_allclose(small.log_probability_rows(np.arange(10)), full.log_probability_rows(np.arange(10)), rtol=1e-12)
    s_small = SanText(EMB, epsilon=0.7, precomputed_neighbors=n_precomputed, cache_dir=False)
    np.testing.assert_allclose(s_small.log_probability_rows(np.arange(10)), SanText(EMB, epsilon=0.7, cache_dir=False).log_probability_rows(np.arange(10)), rtol=1e-12)
    np.testing.assert_array_equal(greedy_word_list(EMB, precomputed_neighbors=n_precomputed, cache_dir=False), greedy_word_list(EMB, cache_dir=False))


def test_word_list_keyword_alias() -> None:
    with pytest.warns(DeprecationWarning, match="greedy_word_list.*precomputed_neighbors="):
        old = greedy_word_list(EMB, k=5, cache_dir=False)
    np.testing.assert_array_equal(old, greedy_word_list(EMB, precomputed_neighbors=5, cache_dir=False))


def test_validation_names_the_new_keyword() -> None:
    with pytest.raises(ValueError, match="precomputed_neighbors"):
        TEM(EMB, epsilon=1.0, precomputed_neighbors=0)
    with pytest.raises(TypeError, match="precomputed_neighbors"):
        Diffractor(EMB, epsilon=1.0, precomputed_neighbors=2.5)


def test_knn_tem_k_keeps_its_name_and_defines_the_distribution() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = KnnTEM(EMB, epsilon=1.0, k=5, cache_dir=False), get_mechanism("knn_tem", EMB, epsilon=1.0, k=6, cache_dir=False)
    assert a.k == 5 and a.params["k"] == 5 and "precomputed_neighbors" not in a.params
    assert not np.allclose(a.probabilities(0), b.probabilities(0))  # k changes the distribution
    with pytest.raises(TypeError):
        KnnTEM(EMB, epsilon=1.0, precomputed_neighbors=64)  # not a kNN-TEM parameter
    with pytest.warns(DeprecationWarning) as rec:  # the old class name warns for itself, not for k
        old = TruncatedGumbel(EMB, epsilon=1.0, k=5, cache_dir=False)
    assert old.k == 5 and all("precomputed_neighbors" not in str(w.message) for w in rec)
    np.testing.assert_array_equal(old.sample_ids(IDS, rng=2), a.sample_ids(IDS, rng=2))


def test_catalog_lists_the_new_name_only() -> None:
    from deniable.service.catalog import mechanism_spec

    for name in RENAMED:
        listed = [p.name for p in mechanism_spec(name).params]
        assert "precomputed_neighbors" in listed and "k" not in listed, (name, listed)
        assert mechanism_spec(name).param("precomputed_neighbors").description.startswith("Nearest words stored per word")
    listed = [p.name for p in mechanism_spec("knn_tem").params]
    assert "k" in listed and "precomputed_neighbors" not in listed, listed


def test_shipped_tem_calibration_resolves_as_before() -> None:
    """The shipped TEM calibration is keyed by ``precomputed_neighbors`` and serves the default
    TEM, built with either keyword: max_n_w = 0.5 resolves to the pinned ε 1.333521432163324."""
    from deniable.calibration.record import calibration_key
    from deniable.calibration.store import known_calibration, shipped_calibration

    mech = get_mechanism("tem", max_n_w=0.5)
    assert mech.epsilon == 1.333521432163324 and mech.epsilon_choice.source == "shipped calibration"
    with pytest.warns(DeprecationWarning):
        old = get_mechanism("tem", max_n_w=0.5, k=128)
    assert old.epsilon == mech.epsilon and old.epsilon_choice.source == "shipped calibration"
    fixed = get_mechanism("tem", epsilon=3.0)
    name, params, fp = calibration_key(lambda e: TEM(fixed.embedding, epsilon=e))
    assert params == {"beta": 0.001, "metric": "euclidean", "precomputed_neighbors": 128}
    assert shipped_calibration(name, params, fp) is not None and known_calibration(fixed) is not None
    assert known_calibration(TEM(fixed.embedding, epsilon=3.0, beta=0.01)) is None  # control: another key
