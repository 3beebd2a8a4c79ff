"""BinaryEmbedding.restrict: the first words of a binary embedding, same UNK code."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.binary import BinaryEmbedding


def _be() -> BinaryEmbedding:
    bits = np.random.default_rng(0).integers(0, 2, size=(10, 70)).astype(bool)
    return BinaryEmbedding.from_bits([f"w{i}" for i in range(10)], bits, source="test")


def test_restrict_keeps_the_first_words_and_the_unk_code():
    be = _be()
    small = be.restrict(top_n=4)
    assert small.words == be.words[:4] and small.n_bits == be.n_bits and small.source == "test"
    np.testing.assert_array_equal(small.codes, be.codes[:4])
    np.testing.assert_array_equal(small.unk_code, be.unk_code)  # not recomputed from the 4 words
    assert be.restrict(top_n=10) is be and be.restrict(top_n=99) is be


def test_restrict_rejects_a_bad_size():
    with pytest.raises(ValueError, match="top_n"):
        _be().restrict(top_n=0)
