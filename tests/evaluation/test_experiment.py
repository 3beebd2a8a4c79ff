"""evaluate_mechanism / privatize_recording: the recorded ids are the privatization's own."""

from __future__ import annotations

import numpy as np

from deniable import Madlib
from deniable.evaluation import TextClassifier, token_ids
from deniable.evaluation.experiment import evaluate_mechanism, privatize_recording

from ..conftest import random_embedding


def test_recorded_ids_match_the_text():
    emb = random_embedding(n=30, dim=3)
    texts = ["w1 w2, w3!", "W4 unknownword w5", ""]
    mech = Madlib(emb, epsilon=2.0)
    priv, x, y = privatize_recording(mech, texts, rng=0)
    np.testing.assert_array_equal(x, token_ids(mech, texts))
    assert x[4] == -1 and (np.delete(x, 4) >= 0).all()  # the unknown word went in as UNK
    out_words = [w for t in priv for w in t.lower().replace(",", " ").replace("!", " ").split()]
    assert out_words == [emb.words[i] for i in y]
    again, _, y2 = privatize_recording(mech, texts, rng=0)
    assert again == priv and (y2 == y).all()


def test_evaluate_mechanism_keys():
    emb = random_embedding(n=30, dim=3)
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(emb.words[:15] if i % 2 else emb.words[15:], size=6)) for i in range(40)]
    labels = [i % 2 for i in range(40)]
    rec = evaluate_mechanism(Madlib(emb, epsilon=30.0), texts[:30], labels[:30], texts[30:], labels[30:], rng=1, min_simulations=500, samples=2)
    assert {"acc_clean", "acc_priv", "changed_train", "inversion", "mia", "sample", "seconds"} <= set(rec)
    assert rec["inversion"]["n_simulations"] >= 500 and len(rec["sample"]) == 2
    base = evaluate_mechanism(None, texts[:30], labels[:30], texts[30:], labels[30:], attacks=["membership"],
                              audit_classifier=TextClassifier(alpha=1e-7))
    assert base["mechanism"] == "none" and "inversion" not in base and "mia" in base and "mia_audit" in base
    assert "inversion_exact" not in rec  # Madlib: no closed-form probabilities


def _labelled(emb, n=40, seed=0):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(emb.words[:15] if i % 2 else emb.words[15:], size=6)) for i in range(n)]
    return texts, [i % 2 for i in range(n)]


def test_exact_inversion_where_probabilities_are_closed_form():
    """The Bayes-optimal adversary is added for mechanisms with exact probabilities: identity
    recovers everything, and on SanText its exact expected rate is what inversion_attack gives."""
    import pytest

    from deniable import SanText
    from deniable.evaluation import IdentityMechanism, inversion_attack

    emb = random_embedding(n=30, dim=3)
    texts, labels = _labelled(emb)
    rec = evaluate_mechanism(IdentityMechanism(emb), texts[:30], labels[:30], texts[30:], labels[30:], rng=1, min_simulations=500,
                             attacks=["inversion"])
    assert rec["inversion_exact"]["method"] == "exact" and rec["inversion_exact"]["top1"] == 1.0
    san = SanText(emb, epsilon=3.0, cache_dir=False)
    rec = evaluate_mechanism(san, texts[:30], labels[:30], texts[30:], labels[30:], rng=1, min_simulations=500, attacks=["inversion"])
    x_tr, x_te = token_ids(san, texts[:30]), token_ids(san, texts[30:])
    prior = np.bincount(x_tr[x_tr >= 0], minlength=len(emb)).astype(float)
    want = inversion_attack(san, x_te, prior=prior, method="exact", rng=0)
    assert rec["inversion_exact"]["expected_top1"] == pytest.approx(want.expected_top1, rel=1e-12)
    assert rec["inversion"]["method"] == "sample"  # the column every mechanism has stays the sampled adversary
    off = evaluate_mechanism(san, texts[:30], labels[:30], texts[30:], labels[30:], rng=1, min_simulations=500, attacks=["inversion"],
                             exact_inversion=False)
    assert "inversion_exact" not in off
    with pytest.raises(ValueError, match="closed-form"):
        evaluate_mechanism(Madlib(emb, epsilon=3.0), texts[:30], labels[:30], texts[30:], labels[30:], rng=1, min_simulations=500,
                           attacks=["inversion"], exact_inversion=True)
