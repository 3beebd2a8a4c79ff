"""Tests of deniable.calibration.document (per-document guarantee)."""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest

from deniable import Embedding, Madlib, Mahalanobis
from deniable.calibration.document import DocumentGuarantee, document_bound, document_guarantee


def _embedding() -> Embedding:
    rng = np.random.default_rng(0)
    return Embedding([f"w{i}" for i in range(30)], rng.standard_normal((30, 4)).astype(np.float32))


def _brute(mech):
    V = mech.n_words
    a, b = np.repeat(np.arange(V), V), np.tile(np.arange(V), V)
    d = mech.distance(a, b)
    return float(d.max()), float(d.mean())


@dataclass
class _Stats:
    avg: float
    max: float


@pytest.fixture
def stub_metric_stats(monkeypatch):
    """Stand-in for deniable.calibration.privacy_ratio.mechanism_metric_stats (brute force)."""
    mod = types.ModuleType("deniable.calibration.privacy_ratio")
    calls = []

    def mechanism_metric_stats(mech):
        calls.append(mech)
        mx, avg = _brute(mech)
        return _Stats(avg=avg, max=mx)

    mod.mechanism_metric_stats = mechanism_metric_stats
    monkeypatch.setitem(sys.modules, "deniable.calibration.privacy_ratio", mod)
    import deniable.calibration as pkg

    monkeypatch.setattr(pkg, "privacy_ratio", mod, raising=False)
    return calls


def test_document_guarantee_formula(stub_metric_stats):
    mech = Madlib(_embedding(), epsilon=3.0)
    mx, avg = _brute(mech)
    g = document_guarantee(mech, np.array([0, 5, 7, 7]))
    assert isinstance(g, DocumentGuarantee)
    assert g.n_words == 4 and g.n_unknown == 0 and g.epsilon == 3.0
    assert g.worst_case == pytest.approx(3.0 * 4 * mx)
    assert g.typical == pytest.approx(3.0 * 4 * avg)
    assert g.typical < g.worst_case
    d = g.to_dict()
    assert d["worst_case"] == g.worst_case and d["mechanism"] == "madlib"
    assert "worst case" in str(g)
    assert stub_metric_stats  # the shared (cached) statistics were used


def test_worst_case_bounds_every_pairwise_document_bound(stub_metric_stats):
    mech = Mahalanobis(_embedding(), epsilon=2.0, lam=0.7)
    rng = np.random.default_rng(1)
    doc = rng.integers(0, 30, size=12)
    g = document_guarantee(mech, doc)
    for _ in range(200):
        other = rng.integers(0, 30, size=12)
        assert document_bound(mech, doc, other) <= g.worst_case + 1e-9
    # the bound is attained by the farthest pair
    V = mech.n_words
    a, b = np.repeat(np.arange(V), V), np.tile(np.arange(V), V)
    i = int(np.argmax(mech.distance(a, b)))
    assert document_bound(mech, np.full(12, a[i]), np.full(12, b[i])) == pytest.approx(g.worst_case)


def test_unknown_words_are_covered(stub_metric_stats):
    mech = Madlib(_embedding(), epsilon=1.0)
    g = document_guarantee(mech, [0, -1, 3])
    assert g.n_words == 3 and g.n_unknown == 1
    V = mech.n_words
    to_unk = mech.distance(np.full(V, -1), np.arange(V)).max()
    assert g.p_max >= to_unk
    assert document_bound(mech, [0, -1, 3], [0, int(np.argmax(mech.distance(np.full(V, -1), np.arange(V)))), 3]) <= g.worst_case


def test_document_bound_is_epsilon_times_sum_of_distances():
    mech = Madlib(_embedding(), epsilon=2.5)
    a, b = np.array([0, 1, 2]), np.array([0, 4, 9])
    expected = 2.5 * float(np.linalg.norm(mech.points([1]) - mech.points([4]).astype(np.float64)) + np.linalg.norm(mech.points([2]).astype(np.float64) - mech.points([9])))
    assert document_bound(mech, a, b) == pytest.approx(expected, rel=1e-6)
    assert document_bound(mech, a, a) == 0.0
    assert document_bound(mech, [], []) == 0.0
    with pytest.raises(ValueError, match="same number of words"):
        document_bound(mech, [0, 1], [0])
    with pytest.raises(ValueError, match="ids must lie"):
        document_bound(mech, [0, 99], [0, 1])


def test_empty_document(stub_metric_stats):
    g = document_guarantee(Madlib(_embedding(), epsilon=1.0), np.array([], dtype=np.int64))
    assert g.n_words == 0 and g.worst_case == 0.0


def test_with_real_privacy_ratio_module_if_landed():
    try:
        importlib.import_module("deniable.calibration.privacy_ratio")
    except ImportError:
        pytest.skip("deniable.calibration.privacy_ratio has not landed yet")
    mech = Madlib(_embedding(), epsilon=2.0)
    mx, avg = _brute(mech)
    g = document_guarantee(mech, [1, 2, 3])
    assert g.p_max == pytest.approx(mx, rel=1e-6) and g.p_avg == pytest.approx(avg, rel=1e-6)
