"""Membership inference: planted overfit model (AUC >> 0.5), membership-independent model (~0.5)."""

from __future__ import annotations

import numpy as np
import pytest

from deniable import Madlib
from deniable.evaluation import TextClassifier, auc_interval, membership_inference, membership_scores_result
from deniable.evaluation.reference import UniformMechanism

from ..conftest import random_embedding


def random_corpus(n: int, seed: int, vocab: int = 400):
    """Texts of random words with labels independent of the text: a model can only memorize."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    texts = [" ".join(rng.choice(words, size=12)) for _ in range(n)]
    labels = rng.integers(0, 2, size=n)
    return texts, labels


def test_auc_interval_known_values():
    auc, (lo, hi), se = auc_interval([3, 4, 5], [0, 1, 2])
    assert auc == 1.0
    auc, _, _ = auc_interval([1, 2], [1, 2])
    assert auc == 0.5  # ties count one half
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 4000), rng.normal(0, 1, 4000)
    auc, (lo, hi), se = auc_interval(a, b)
    # binormal AUC = Phi(1/sqrt(2)) = 0.7602
    assert lo < 0.7602 < hi and hi - lo < 0.03
    with pytest.raises(ValueError, match="at least 2"):
        auc_interval([1], [1, 2])


def test_auc_interval_coverage():
    """Control: the DeLong interval covers 0.5 for independent scores about 95% of the time."""
    rng = np.random.default_rng(1)
    cover = sum(lo <= 0.5 <= hi for _, (lo, hi), _ in (auc_interval(rng.random(200), rng.random(200)) for _ in range(300)))
    assert 0.90 <= cover / 300 <= 0.99


def test_overfit_model_is_detected():
    texts, labels = random_corpus(600, seed=2)
    clf = TextClassifier(alpha=1e-6)  # memorizes random labels
    res = membership_inference(None, texts, labels, rng=3, classifier=clf)
    assert res.train_accuracy > 0.95 and res.test_accuracy < 0.65
    assert res.auc > 0.8 and res.auc_ci[0] > 0.7
    assert res.advantage > 0.4 and res.mechanism == "none"


def test_membership_independent_model_is_chance():
    texts, labels = random_corpus(1200, seed=4)
    members = slice(0, 400)
    # trained on a third, disjoint set: its losses cannot depend on membership
    clf = TextClassifier(alpha=1e-6).fit(texts[800:], labels[800:])
    res = membership_scores_result(clf, texts[:400], labels[members], texts[400:800], labels[400:800])
    assert res.auc_ci[0] < 0.5 < res.auc_ci[1]
    assert abs(res.auc - 0.5) < 0.07


def test_privatization_with_no_information_removes_membership_signal():
    texts, labels = random_corpus(600, seed=5)
    emb = random_embedding(n=400, dim=4, words=[f"w{i}" for i in range(400)])
    res = membership_inference(UniformMechanism(emb), texts, labels, rng=6, classifier=TextClassifier(alpha=1e-6))
    assert res.auc_ci[0] < 0.5 < res.auc_ci[1] + 0.02
    strong = membership_inference(Madlib(emb, epsilon=500.0), texts, labels, rng=6, classifier=TextClassifier(alpha=1e-6))
    assert strong.auc > 0.8  # almost no noise: still memorized
    assert strong.epsilon == 500.0
