"""Every word-taking probability API follows the oov policy: an out-of-vocabulary word is UNK
, for every registered mechanism with a closed form."""

from __future__ import annotations

import numpy as np
import pytest

from deniable import UNK_ID, Embedding, available_mechanisms, get_mechanism

# mechanisms whose exact output distribution is exposed, with parameters that fit a tiny vocabulary
EXACT = {
    "tem": {},
    "brr": {"n_bits": 8},
    "santext": {},
    "santext_plus": {"p": 1.0},
    "custext": {"K": 5},
    "knn_tem": {"k": 5},
    "diffractor": {},
}


def tiny_embedding(n: int = 40, dim: int = 6) -> Embedding:
    rng = np.random.default_rng(3)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def test_every_exact_mechanism_is_listed() -> None:
    # a new mechanism with a closed form should be added here; madlib/mahalanobis/vickrey have none
    exact = {n for n in available_mechanisms() if n not in ("madlib", "mahalanobis", "vickrey")}
    assert exact <= set(EXACT), f"add {sorted(exact - set(EXACT))} to EXACT"


@pytest.mark.parametrize("name", sorted(EXACT))
def test_unknown_word_probabilities_are_unk_probabilities(name: str) -> None:
    kw = dict(EXACT[name])
    if name == "brr":
        from deniable import binarize

        emb = binarize(tiny_embedding(), n_bits=kw.pop("n_bits"), method="random-projection", rng=0)
    else:
        emb = tiny_embedding()
        kw["cache_dir"] = False
    try:
        mech = get_mechanism(name, emb, epsilon=2.0, **kw)
    except TypeError:  # a mechanism without a cache_dir parameter
        kw.pop("cache_dir", None)
        mech = get_mechanism(name, emb, epsilon=2.0, **kw)
    p_oov = mech.probabilities("definitely-not-a-word")
    p_unk = mech.probabilities(UNK_ID)
    np.testing.assert_allclose(p_oov, p_unk, rtol=0, atol=0)
    assert p_oov.shape == (len(emb),)
    assert abs(p_oov.sum() - 1.0) < 1e-9
    # a vocabulary word still gets its own distribution
    assert not np.array_equal(mech.probabilities("w0"), p_unk)
