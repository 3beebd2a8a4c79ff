"""deniable._rng: the rng argument."""

import numpy as np
import pytest

from deniable import Madlib, as_generator
from deniable.embeddings import Embedding


def test_forms():
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    assert as_generator(5).random() == np.random.default_rng(5).random()
    assert as_generator(np.random.SeedSequence(5)).random() == np.random.default_rng(5).random()
    assert isinstance(as_generator(None), np.random.Generator)
    for bad, exc in ((-1, ValueError), (True, TypeError), (1.5, TypeError), ("fast", ValueError), (np.random.RandomState(0), TypeError)):
        with pytest.raises(exc):
            as_generator(bad)


def test_secure_generator():
    pytest.importorskip("randomgen")
    a, b = as_generator("secure"), as_generator("secure")
    assert type(a.bit_generator).__name__ == "ChaCha"
    assert a.random() != b.random()  # freshly keyed each time
    emb = Embedding([f"w{i}" for i in range(20)], np.random.default_rng(0).standard_normal((20, 3)).astype(np.float32))
    out = Madlib(emb, epsilon=1.0).sample_ids(np.arange(20).repeat(50), rng="secure")
    assert out.shape == (1000,) and out.min() >= 0 and out.max() < 20


def test_secure_missing_dependency_hint(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "randomgen", None)
    with pytest.raises(ImportError, match=r'pip install "deniable\[secure\]"'):
        as_generator("secure")
