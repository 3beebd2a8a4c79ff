"""scripts/evaluation_experiments.py: the movie-reviews split and the unit grid (every
registered mechanism, a missing privacy ratio fails loudly)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

import deniable

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "evaluation_experiments.py"


@pytest.fixture(scope="module")
def ee():
    spec = importlib.util.spec_from_file_location("evaluation_experiments", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _args(**kw):
    base = {"mechanisms": "", "levels": "2,10", "datasets": "sms", "seeds": 2}
    base.update(kw)
    return argparse.Namespace(**base)


def test_units_cover_every_registered_mechanism_at_matched_epsilon(ee):
    ratios = {m: 0.5 for m in deniable.available_mechanisms() if m != "madlib"}
    ratios["custext"] = None  # no finite ratio: runs at the level's epsilon
    units = ee.units(_args(), ratios)
    assert units[0] == ("sms", "none", 0.0, None, 0)
    names = {u[1] for u in units[1:]}
    assert names == set(deniable.available_mechanisms())
    assert len(units) == 1 + 2 * 2 * len(names)
    eps = {(u[1], u[2]): u[3] for u in units[1:]}
    assert eps[("madlib", 10.0)] == 10.0 and eps[("tem", 10.0)] == 5.0 and eps[("custext", 2.0)] == 2.0


def test_units_refuse_a_mechanism_without_ratio(ee):
    with pytest.raises(SystemExit, match="no privacy ratio for 'brr'"):
        ee.units(_args(mechanisms="madlib,brr"), {})


def test_movie_reviews_split(ee, shared_data):
    xtr, ytr, xte, yte = ee.load_dataset("movies", shared_data)
    assert (len(xtr), len(xte)) == (1600, 400)
    assert set(ytr) == set(yte) == {"pos", "neg"}
    assert sum(y == "pos" for y in ytr + yte) == 1000
    assert not set(xtr) & set(xte)
    assert ee.load_dataset("movies", shared_data)[2] == xte  # fixed split
