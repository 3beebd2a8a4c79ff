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


def test_secure_generator_is_keyed_with_256_bits_directly(monkeypatch):
    """The ChaCha key is the 256-bit value from secrets, set as the key (no 128-bit SeedSequence)."""
    pytest.importorskip("randomgen")
    import secrets

    import deniable._rng as rngmod

    asked: list[int] = []
    key = (0xF1E2D3C4B5A69788 << 192) | (0x0123456789ABCDEF << 128) | (0xDEADBEEFCAFEBABE << 64) | 0x1122334455667788

    def randbits(k):
        asked.append(k)
        return key

    monkeypatch.setattr(secrets, "randbits", randbits)
    gen = as_generator("secure")
    assert asked == [256] and rngmod.SECURE_KEY_BITS == 256
    state = gen.bit_generator.state["state"]
    words = np.asarray(state["keysetup"], dtype=np.uint64)  # the cipher key, eight 32-bit words
    assert words.size == 8 and sum(int(w) << (32 * i) for i, w in enumerate(words.tolist())) == key
    # a key that differs in its top 128 bits alone gives another stream (a 128-bit pool would not see them)
    import randomgen

    low = key & ((1 << 128) - 1)
    a = np.random.Generator(randomgen.ChaCha(key=low, counter=0, rounds=20)).integers(0, 2**63, 4)
    b = np.random.Generator(randomgen.ChaCha(key=key, counter=0, rounds=20)).integers(0, 2**63, 4)
    assert gen.integers(0, 2**63, 4).tolist() == b.tolist() and a.tolist() != b.tolist()


def test_secure_missing_dependency_hint(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "randomgen", None)
    with pytest.raises(ImportError, match=r'pip install "deniable\[secure\]"'):
        as_generator("secure")
