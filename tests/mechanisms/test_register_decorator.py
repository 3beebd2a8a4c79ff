"""``@register(name)``: a Mechanism subclass registered where it is defined, offered by
``get_mechanism`` and ``available_mechanisms``; the built-in names stay lazily imported."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from deniable import Embedding, Mechanism, available_mechanisms, get_mechanism
from deniable.mechanisms import registry
from deniable.mechanisms.base import Guarantee
from deniable.mechanisms.registry import register


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """Registrations made by a test do not outlive it."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_DEPRECATED", dict(registry._DEPRECATED))


def _identity_class(name: str) -> type[Mechanism]:
    class Keep(Mechanism):
        """Returns every word unchanged (no privacy: a test double)."""

        def _sample_ids(self, ids, rng):
            return ids.copy()

        def distance(self, a, b):
            return np.where(np.asarray(a) == np.asarray(b), 0.0, np.inf)

        def derive_guarantee(self):
            return Guarantee(self.epsilon, "infinite between different words", "the vocabulary")

    Keep.name = name
    return Keep


def _vocab() -> Embedding:
    return Embedding(["a", "b", "c"], np.eye(3, dtype=np.float32))


def test_register_offers_the_class_by_name():
    cls = register("keep_words")(_identity_class("keep_words"))
    assert cls.name == "keep_words" and "keep_words" in available_mechanisms()
    assert registry.mechanism_class("keep_words") is cls
    mech = get_mechanism("keep_words", _vocab(), epsilon=1.0)
    assert type(mech) is cls and mech.privatize("a b c", rng=0) == "a b c"


def test_register_refuses_a_taken_name_unless_replacing():
    with pytest.raises(ValueError, match="already registered"):
        register("madlib")(_identity_class("madlib"))
    cls = register("madlib", replace=True)(_identity_class("madlib"))
    assert registry.mechanism_class("madlib") is cls


def test_register_refuses_what_is_not_a_mechanism_or_misnamed():
    with pytest.raises(TypeError, match="subclass of deniable.Mechanism"):
        register("thing")(object)
    with pytest.raises(ValueError, match="set name = 'other'"):
        register("other")(_identity_class("keep_words"))
    with pytest.raises(ValueError, match="non-empty"):
        register("")
    assert "other" not in available_mechanisms() and "thing" not in available_mechanisms()  # nothing half-registered


def test_built_ins_stay_lazy():
    """``import deniable`` imports no mechanism module beyond Madlib, Mahalanobis and TEM; a
    name resolves to its class on first use."""
    code = (
        "import sys, deniable\n"
        "lazy = ['deniable.mechanisms.santext', 'deniable.mechanisms.custext', 'deniable.mechanisms.vickrey',"
        " 'deniable.mechanisms.diffractor', 'deniable.mechanisms.knn_tem', 'deniable.mechanisms.brr']\n"
        "assert not [m for m in lazy if m in sys.modules], [m for m in lazy if m in sys.modules]\n"
        "from deniable.mechanisms.registry import mechanism_class\n"
        "assert mechanism_class('vickrey').__name__ == 'Vickrey' and 'deniable.mechanisms.vickrey' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
