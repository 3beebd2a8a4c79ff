"""Word-taking APIs follow the ``oov`` policy (issue 14 item 6) and reject bytes clearly (item 7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import deniable
from deniable.embeddings import UNK_ID


@pytest.fixture(scope="module")
def emb():
    return deniable.load_embedding(limit=300)


@pytest.fixture(scope="module")
def tem(emb):
    return deniable.TEM(emb, epsilon=3.0, cache_dir=False)


def test_tem_probabilities_of_an_unknown_word_are_unk(tem):
    p = tem.probabilities("qzxqzxq")  # raised KeyError before
    assert np.array_equal(p, tem.probabilities(UNK_ID)) and math.isclose(p.sum(), 1.0)
    assert np.array_equal(tem.log_probabilities("Qzxqzxq"), tem.log_probabilities(UNK_ID))
    assert np.array_equal(tem.distances_from("qzxqzxq"), tem.distances_from(UNK_ID))
    assert not np.array_equal(p, tem.probabilities("the"))
    for oov in ("drop", "keep"):
        with pytest.raises(KeyError, match=f"oov='{oov}' does not privatize it"):
            tem.probabilities("qzxqzxq", oov=oov)
    with pytest.raises(ValueError, match="oov must be one of"):
        tem.probabilities("qzxqzxq", oov="pass")


@pytest.mark.parametrize("kind", ["madlib", "tem"])
def test_privacy_loss_bound_follows_the_oov_policy(emb, tem, kind):
    mech = tem if kind == "tem" else deniable.Madlib(emb, epsilon=3.0)
    d = float(mech.distance(np.array([UNK_ID]), np.array([mech.id_of("the")]))[0])
    assert mech.privacy_loss_bound("qzxqzxq", "the") == pytest.approx(3.0 * d)  # raised KeyError before
    assert mech.privacy_loss_bound("qzxqzxq", "zzqqxx") == 0.0  # both are UNK
    assert mech.privacy_loss_bound("qzxqzxq", "the", oov="keep") == math.inf  # copied verbatim
    assert mech.privacy_loss_bound("qzxqzxq", "zzqqxx", oov="keep") == math.inf
    assert mech.privacy_loss_bound("qzxqzxq", "qzxqzxq", oov="keep") == 0.0
    assert mech.privacy_loss_bound("qzxqzxq", "the", oov="drop") == math.inf  # a visible gap
    assert mech.privacy_loss_bound("qzxqzxq", "zzqqxx", oov="drop") == 0.0
    assert mech.privacy_loss_bound("the", "of", oov="drop") == mech.privacy_loss_bound("the", "of")


def test_id_of_is_strict_unless_asked(tem):
    with pytest.raises(KeyError, match="oov='unk'"):
        tem.id_of("qzxqzxq")
    assert tem.id_of("qzxqzxq", oov="unk") == UNK_ID and tem.id_of("The", oov="unk") == tem.id_of("the")
    with pytest.raises(TypeError, match="got float"):
        tem.id_of(1.5)


@pytest.mark.parametrize("data", [b"the cat", bytearray(b"the cat")])
def test_privatize_bytes_names_the_fix(emb, data):
    mech = deniable.Madlib(emb, epsilon=3.0)
    with pytest.raises(TypeError, match=r"got (bytes|bytearray); decode it first"):  # said "got int" before
        mech.privatize(data)
    with pytest.raises(TypeError, match="str or a list of str, got int"):
        mech.privatize(5)
