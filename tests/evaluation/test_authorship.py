"""Authorship attribution: identity recovers authors, uniform replacement is at chance."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.evaluation import AuthorProfiles, IdentityMechanism, UniformMechanism, authorship_attack, split_by_author

from ..conftest import random_embedding


def author_corpus(n_authors=50, posts=6, seed=0, vocab=500):
    """Each author draws words from their own skewed distribution over a shared vocabulary."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocab)])
    texts, authors = [], []
    for a in range(n_authors):
        p = rng.dirichlet(np.full(vocab, 0.05))
        for _ in range(posts):
            texts.append(" ".join(rng.choice(words, size=40, p=p)))
            authors.append(a)
    return texts, np.array(authors), words


@pytest.fixture(scope="module")
def corpus():
    texts, authors, words = author_corpus()
    tr, te = split_by_author(authors, test_per_author=1, rng=0)
    emb = random_embedding(n=len(words), dim=4, words=list(words))
    return texts, authors, tr, te, emb


def test_split_by_author():
    authors = np.array([1, 1, 1, 2, 3, 3, 3, 3])
    tr, te = split_by_author(authors, test_per_author=2, min_texts=3, rng=0)
    assert sorted(np.r_[tr, te].tolist()) == list(range(8))
    assert sorted(authors[te].tolist()) == [1, 1, 3, 3]  # author 2 (1 text) stays in train
    assert set(authors[tr]) == {1, 2, 3}


def test_identity_and_uniform(corpus):
    texts, authors, tr, te, emb = corpus
    T = lambda idx: [texts[i] for i in idx]  # noqa: E731
    model = AuthorProfiles().fit(T(tr), authors[tr])
    clean = authorship_attack(None, T(tr), authors[tr], T(te), authors[te], model=model)
    ident = authorship_attack(IdentityMechanism(emb), T(tr), authors[tr], T(te), authors[te], model=model, rng=1)
    assert clean.topk[1] > 0.9 and ident.topk == clean.topk
    uni = authorship_attack(UniformMechanism(emb), T(tr), authors[tr], T(te), authors[te], model=model, rng=2)
    assert uni.chance[1] == pytest.approx(1 / 50) and uni.chance[10] == pytest.approx(10 / 50)
    assert uni.topk_ci[1][0] <= uni.chance[1] and uni.topk[10] < 0.45
    assert uni.n_test == 50 and uni.n_authors == 50


def test_ties_count_against_attacker(corpus):
    texts, authors, tr, te, emb = corpus
    model = AuthorProfiles().fit([texts[i] for i in tr], authors[tr])
    ranks = model.true_author_ranks(["", "zzz unknownword"], [authors[0], authors[0]])
    assert (ranks == 49).all()  # all-zero scores: every other author ties
    assert model.true_author_ranks(["w1"], ["nobody"])[0] == 50
