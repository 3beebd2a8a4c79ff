"""KL divergence, trigram LM perplexity and the membership-inference estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from deniable import ngrams
from deniable.ngrams.evaluate import conditional_log_probs, top_contributor


def test_kl_known_values():
    p = np.array([0.5, 0.5, 0.0])
    assert ngrams.kl_divergence(p, p) == 0.0
    q = np.array([0.25, 0.75, 0.0])
    assert ngrams.kl_divergence(p, q) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75))
    assert ngrams.kl_divergence(p, np.array([1.0, 0, 0])) == math.inf
    assert math.isfinite(ngrams.kl_divergence(p, np.array([1.0, 0, 0]), smoothing=1e-3))
    with pytest.raises(ValueError):
        ngrams.kl_divergence(p, q, smoothing=1.0)


def test_trigram_perplexity_hand_computed():
    keys = ["a b c", "a b d", "x y z"]
    joint = np.array([0.3, 0.1, 0.6])
    logc = conditional_log_probs(joint, keys)
    np.testing.assert_allclose(np.exp(logc), [0.75, 0.25, 1.0])
    test = np.array([2, 1, 1])
    expected = math.exp(-(2 * math.log(0.75) + math.log(0.25) + 0) / 4)
    assert ngrams.trigram_perplexity(joint, keys, test) == pytest.approx(expected)
    assert ngrams.trigram_perplexity(np.array([0.3, 0.0, 0.7]), keys, test) == math.inf


def test_membership_inference_extremes():
    target = np.array([5.0, 0.0, 0.0])
    near, far = np.array([0.9, 0.05, 0.05]), np.array([0.1, 0.45, 0.45])
    assert ngrams.release_membership_inference(lambda g: near, lambda g: far, target, n_trials=10, rng=0) == 1.0
    assert ngrams.release_membership_inference(lambda g: far, lambda g: near, target, n_trials=10, rng=0) == 0.0
    assert ngrams.release_membership_inference(lambda g: near, lambda g: near, target, n_trials=10, rng=0) == 0.5


def test_membership_inference_is_a_deprecated_alias():
    target = np.array([5.0, 0.0, 0.0])
    near, far = np.array([0.9, 0.05, 0.05]), np.array([0.1, 0.45, 0.45])
    with pytest.warns(DeprecationWarning, match="use deniable.ngrams.release_membership_inference"):
        old = ngrams.membership_inference(lambda g: near, lambda g: far, target, n_trials=10, rng=0)
    assert old == ngrams.release_membership_inference(lambda g: near, lambda g: far, target, n_trials=10, rng=0) == 1.0


def test_ngram_vocabulary_old_name_warns():
    from deniable.ngrams import counting

    with pytest.warns(DeprecationWarning, match="use deniable.ngrams.NgramVocabulary"):
        from deniable.ngrams import Vocabulary
    assert Vocabulary is ngrams.NgramVocabulary
    with pytest.warns(DeprecationWarning):
        assert counting.Vocabulary is ngrams.NgramVocabulary
    assert "Vocabulary" not in ngrams.__all__
    with pytest.raises(AttributeError):
        ngrams.NoSuchName  # noqa: B018


def test_membership_inference_with_releases_is_near_chance_at_tiny_epsilon():
    rng = np.random.default_rng(0)
    dense = rng.integers(1, 3, size=(50, 20)) * (rng.random((50, 20)) < 0.4)
    dense[0] = 3
    m = sp.csr_matrix(dense)
    u = top_contributor(m)
    assert u == 0
    alpha = np.ones(20)
    with_u = ngrams.prepare_bayesian(m, alpha, epsilon=0.01, delta=1e-6, S=1.0, rho=0.5, sensitivity=2.0)
    without = ngrams.prepare_bayesian(m[1:], alpha, epsilon=0.01, delta=1e-6, S=1.0, rho=0.5, sensitivity=2.0)
    prob = ngrams.release_membership_inference(lambda g: np.exp(with_u.sample(g)), lambda g: np.exp(without.sample(g)), dense[0], n_trials=400, rng=1)
    assert abs(prob - 0.5) < 0.1  # 4 sd of a fair coin over 400 trials is 0.1


def test_private_distribution():
    m = sp.csr_matrix(np.array([[1, 3], [0, 4]]))
    np.testing.assert_allclose(ngrams.private_distribution(m), [1 / 8, 7 / 8])


def test_release_repr_is_short():
    from deniable.ngrams import Release

    n = 50_000
    probs = np.full(n, 1.0 / n)
    probs[[7, 3, 9]] += [3e-3, 2e-3, 1e-3]
    probs /= probs.sum()
    keys = tuple(f"w{i} x{i} y{i}" for i in range(n))
    rel = Release(keys, probs, "bayesian", 1.0, 1e-6, "guarantee text", formal_dp=True, params={"S": 1.0}, diagnostics={"big": list(range(1000))})
    r = repr(rel)
    assert len(r) < 300, len(r)
    assert r.startswith("Release(mechanism='bayesian', epsilon=1.0, delta=1e-06, formal_dp=True, size=50000")
    assert "'w7 x7 y7'" in r and "'w3 x3 y3'" in r and "'w9 x9 y9'" in r and "w0 x0" not in r
    small = Release(("a b",), np.array([1.0]), "k-anonymity", None, None, "not DP")
    assert repr(small) == "Release(mechanism='k-anonymity', epsilon=None, delta=None, formal_dp=False, size=1, top={'a b': 1})"
