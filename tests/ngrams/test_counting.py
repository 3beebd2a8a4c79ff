"""Counting: public-only vocabulary, per-user counts, clamping to C and the total cap W."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from deniable import ngrams
from deniable.errors import PrivacyWarning
from deniable.ngrams import paper
from deniable.ngrams.counting import users_per_ngram

PUBLIC = ["the cat sat on the mat. the dog sat on the log!", "a cat sat on a mat"]
PRIVATE = [
    ("alice", "The cat sat on the mat. My secret code zebra quokka"),
    ("bob", "the dog sat on the log"),
    ("alice", "the cat sat on the mat the cat sat"),
    ("carol", "zebra quokka walrus"),
]


def test_ngrams_within_sentences_and_lowercased():
    assert ngrams.ngrams_of("The cat sat. On mat", 2) == ["the cat", "cat sat", "on mat"]
    assert ngrams.ngrams_of("A b", 3) == []
    assert ngrams.ngrams_of("Aa Bb", 1, lowercase=False) == ["Aa", "Bb"]
    with pytest.raises(ValueError):
        ngrams.ngrams_of("x", 0)


def test_vocabulary_comes_from_public_counts_only():
    pub = ngrams.count_public(PUBLIC, 3)
    vocab = ngrams.build_vocabulary(pub, n=3)
    assert set(vocab.keys) == set(pub)
    assert vocab.keys[:2] == ("cat sat on", "sat on the")  # most frequent first, ties by key
    assert vocab.public_counts[0] == 2
    small = ngrams.build_vocabulary(pub, n=3, max_size=2)
    assert len(small) == 2
    with pytest.raises(ValueError):
        ngrams.build_vocabulary({}, n=3)


def test_count_users_drops_private_only_ngrams():
    vocab = ngrams.build_vocabulary(ngrams.count_public(PUBLIC, 3), n=3)
    users = ngrams.count_users(PRIVATE, vocab)
    assert users.user_ids == ("alice", "bob", "carol")
    assert users.matrix.shape == (3, len(vocab))
    assert users.matrix.indices.dtype == np.int32
    # alice: "the cat sat" x3, "cat sat on" x2, "sat on the" x1, "on the mat" x2, ... ; carol: nothing public
    row = users.matrix.getrow(0).toarray().ravel()
    assert row[vocab.index("the cat sat")] == 3
    assert users.matrix.getrow(2).nnz == 0
    assert users.dropped > 0  # "my secret code", "zebra quokka walrus", ...


@pytest.mark.parametrize("mechanism", ["bayesian", "laplace", "laplace-public", "k-anonymity"])
def test_private_only_ngrams_never_released(mechanism):
    vocab = ngrams.build_vocabulary(ngrams.count_public(PUBLIC, 3), n=3)
    users = ngrams.count_users(PRIVATE, vocab)
    if mechanism == "bayesian":  # the formal releases: no warning
        rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-5, rng=0)
    elif mechanism.startswith("laplace"):
        rel = ngrams.release_laplace(users, vocab if mechanism == "laplace-public" else None, epsilon=1.0, W=2.0, rng=0)
    else:
        with pytest.warns(PrivacyWarning):
            rel = paper.k_anonymity_not_dp(users, K=1)
    private_grams = {g for _, text in PRIVATE for g in ngrams.ngrams_of(text, 3)}
    private_only = private_grams - set(ngrams.count_public(PUBLIC, 3))
    assert private_only  # the fixture has some
    assert not private_only & set(rel.keys)
    assert set(rel.keys) == set(vocab.keys)
    assert np.isclose(rel.probabilities.sum(), 1.0)
    assert not any("zebra" in k or "secret" in k for k in rel.keys)


def test_tuned_release_keys_are_public_only():
    vocab = ngrams.build_vocabulary(ngrams.count_public(PUBLIC, 3), n=3)
    users = ngrams.count_users(PRIVATE * 3, vocab)
    rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-5, rng=0)  # formal, (S, rho) tuned privately
    assert rel.keys == vocab.keys and rel.formal_dp and rel.params["tuning"] == "noisy-holdout"
    with pytest.warns(PrivacyWarning):
        rel = paper.bayesian_tuned_not_dp(users, vocab, epsilon=1.0, delta=1e-5, rng=0)
    assert rel.keys == vocab.keys


def test_clamp_counts_to_C():
    m = sp.csr_matrix(np.array([[5, 0, 1], [2, 3, 0]]))
    out = ngrams.clamp_counts(m, 2)
    assert out.toarray().tolist() == [[2, 0, 1], [2, 2, 0]]
    assert m.toarray()[0, 0] == 5  # input untouched
    frac = ngrams.clamp_counts(m, 1.5)
    assert np.allclose(frac.toarray(), [[1.5, 0, 1], [1.5, 1.5, 0]])
    with pytest.raises(ValueError):
        ngrams.clamp_counts(m, 0)
    with pytest.raises(TypeError):
        ngrams.clamp_counts(m, "2")


def test_bayesian_release_clamps_each_user():
    # a user repeating one n-gram many times must count as C, not as the raw count
    a = sp.csr_matrix(np.array([[100, 0, 1], [1, 1, 1]]))
    b = sp.csr_matrix(np.array([[1, 0, 1], [1, 1, 1]]))
    alpha = np.array([5.0, 3.0, 1.0])
    pa = ngrams.prepare_bayesian(a, alpha, epsilon=1, delta=1e-5, C=1)
    pb = ngrams.prepare_bayesian(b, alpha, epsilon=1, delta=1e-5, C=1)
    assert np.allclose(pa.mu, pb.mu) and pa.sigma == pb.sigma


def test_cap_user_totals_W():
    m = sp.csr_matrix(np.array([[6.0, 2.0, 0.0], [1.0, 0.0, 0.0]]))
    out = ngrams.cap_user_totals(m, 4)
    assert np.allclose(out.toarray(), [[3.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert np.all(np.asarray(out.sum(axis=1)).ravel() <= 4 + 1e-12)


def test_users_per_ngram():
    m = sp.csr_matrix(np.array([[2, 0, 1], [1, 0, 0], [3, 0, 1]]))
    assert users_per_ngram(m).tolist() == [3, 0, 2]


def test_negative_counts_rejected():
    with pytest.raises(ValueError, match=">= 0"):
        ngrams.clamp_counts(sp.csr_matrix(np.array([[-1, 2]])), 1)
