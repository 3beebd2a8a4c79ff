"""The example mechanism of docs/tutorials/add_mechanism.md (examples/mechanisms/toy_exponential.py):
registered by the decorator, ε·d-private over every pair of inputs (the shared checker), and
sampling the distribution it states."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.mechanisms import registry

from ._metric_dp import assert_metric_dp, distance_matrix, metric_dp_excess

MODULE = Path(__file__).resolve().parents[2] / "examples" / "mechanisms" / "toy_exponential.py"


@pytest.fixture
def toy(monkeypatch):
    """The example module, imported with the registry restored afterwards (its registration
    must not leak into other tests)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    spec = importlib.util.spec_from_file_location("toy_exponential", MODULE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "toy_exponential", module)
    spec.loader.exec_module(module)
    return module


def embedding(n: int = 25, dim: int = 4) -> Embedding:
    rng = np.random.default_rng(7)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def test_toy_exponential_is_metric_dp(toy):
    """Every pair of inputs (UNK included) and every output: log-ratio ≤ ε·d."""
    mech = get_mechanism("toy_exponential", embedding(), epsilon=3.0)
    assert isinstance(mech, toy.ToyExponential)
    ids = np.arange(-1, mech.n_words)
    excess = assert_metric_dp(mech.log_probability_rows(ids), distance_matrix(mech, ids), mech.epsilon)
    assert excess > -1.0  # the bound is nearly tight for some pair


def test_the_checker_catches_a_wrong_epsilon(toy):
    """Control: the same rows checked against half the ε they were built with fail."""
    mech = get_mechanism("toy_exponential", embedding(), epsilon=3.0)
    ids = np.arange(mech.n_words)
    assert metric_dp_excess(mech.log_probability_rows(ids), distance_matrix(mech, ids), mech.epsilon / 2) > 1e-3


def test_toy_exponential_samples_its_distribution(toy):
    """20 000 draws for one word: every output frequency within 5 standard errors (+ 1e-3) of
    its probability; control: the frequencies are far from a uniform distribution."""
    mech = get_mechanism("toy_exponential", embedding(), epsilon=3.0)
    n = 20_000
    freq = np.bincount(mech.sample_ids(np.full(n, 4), rng=0), minlength=mech.n_words) / n
    p = mech.probabilities(4)
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-3)
    assert np.abs(freq - 1 / mech.n_words).max() > 0.05


def test_toy_exponential_declares_the_contract(toy):
    mech = get_mechanism("toy_exponential", embedding(), epsilon=1.0)
    assert mech.has_exact_probabilities and mech.calibration_estimator() == "exact"
    assert mech.epsilon_dependent_params() == frozenset() and mech.params == {}
    assert mech.precompute() is None and not mech.fittable
