"""Authorship attribution of privatized texts: who wrote this?

The attacker has clean texts of many known authors (e.g. their public posts) and one privatized
text; it ranks the authors by the similarity of the text to each author's profile. The profile
method (one TF-IDF vector per author from all their texts, cosine similarity; e.g. Koppel,
Schler & Argamon, "Computational methods in authorship attribution", JASIST 2009, §4) scales
to thousands of authors with one sparse matrix product and is a linear classifier. Top-k
accuracy is the fraction of test texts whose true author is among the k best-ranked; chance is
k / number of authors. Ties count against the attacker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._rng import RNGLike, as_generator
from .._validation import check_int
from ._record import ResultRecord
from .inversion import wilson_interval
from .utility import BagOfWords, _check_labels, _check_texts, privatize_dataset

__all__ = ["AuthorProfiles", "AuthorshipResult", "authorship_attack", "split_by_author"]


def _l2_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ X)


class AuthorProfiles:
    """One L2-normalized TF-IDF profile per author; texts are ranked by cosine similarity.

    Term weights are (1 + ln tf)·idf with idf = ln((1 + A)/(1 + a_w)) + 1 over the A authors
    (a_w: authors who used word w); words are :func:`deniable.evaluation.tokens_of` tokens.

    Parameters
    ----------
    min_authors
        Keep words used by at least this many authors (1: all words).
    max_features
        Keep at most this many words (most texts first).
    """

    def __init__(self, *, min_authors: int = 1, max_features: int | None = None) -> None:
        self.min_authors = check_int("min_authors", min_authors, minimum=1)
        self.bow = BagOfWords(weighting="count", max_features=max_features)
        self.authors_: Any = None  # an array once fitted
        self.idf_: Any = None  # an array once fitted
        self.profiles_: Any = None  # a sparse matrix once fitted

    def fit(self, texts: Sequence[str], authors: Any) -> AuthorProfiles:
        texts = _check_texts("texts", texts)
        a = _check_labels("authors", authors, len(texts), "texts")
        self.authors_, owner = np.unique(a, return_inverse=True)
        X = self.bow.fit_transform(texts)
        A = sp.csr_matrix((np.ones(len(texts)), (owner, np.arange(len(texts)))), shape=(len(self.authors_), len(texts)))
        C = sp.csr_matrix(A @ X)  # word counts per author
        df = np.bincount(C.indices, minlength=C.shape[1])
        keep = df >= self.min_authors
        self._keep = keep
        C = C[:, np.flatnonzero(keep)]
        self.idf_ = np.log((1.0 + C.shape[0]) / (1.0 + df[keep])) + 1.0
        self.profiles_ = self._weigh(C)
        return self

    def _weigh(self, C: sp.csr_matrix) -> sp.csr_matrix:
        C = sp.csr_matrix(C, dtype=np.float64, copy=True)
        C.data = (1.0 + np.log(C.data)) * self.idf_[C.indices]
        return _l2_rows(C)

    def transform(self, texts: Sequence[str]) -> sp.csr_matrix:
        """TF-IDF query vectors of ``texts`` in the profiles' space."""
        if self.profiles_ is None:
            raise RuntimeError("AuthorProfiles is not fitted: call fit(texts, authors) first")
        X = self.bow.transform(texts)[:, np.flatnonzero(self._keep)]
        return self._weigh(X)

    def true_author_ranks(self, texts: Sequence[str], authors: Any, *, block: int = 2048) -> np.ndarray:
        """For each text, how many other authors score at least as high as its true author (0 =
        attributed correctly with no tie); texts by unknown authors get the number of authors."""
        texts = _check_texts("texts", texts)
        a = _check_labels("authors", authors, len(texts), "texts")
        Q = self.transform(texts)
        n_auth = len(self.authors_)
        pos = np.minimum(np.searchsorted(self.authors_, a), n_auth - 1)
        known = self.authors_[pos] == a
        ranks = np.full(len(texts), n_auth, dtype=np.int64)
        PT = self.profiles_.T.tocsc()
        for s in range(0, len(texts), block):
            S = np.asarray((Q[s : s + block] @ PT).todense())
            rows = np.arange(S.shape[0])
            true = S[rows, pos[s : s + block]]
            r = (true[:, None] <= S).sum(axis=1) - 1
            ranks[s : s + block] = np.where(known[s : s + block], r, n_auth)
        return ranks


@dataclass(frozen=True)
class AuthorshipResult(ResultRecord):
    """Outcome of :func:`authorship_attack`.

    Attributes
    ----------
    topk, topk_ci
        ``{k: fraction of test texts whose author is among the k best-ranked}`` and Wilson
        intervals (keys are the requested ks).
    chance
        ``{k: k / n_authors}``.
    n_test, n_authors
        Texts attacked and candidate authors.
    mechanism, epsilon
        ``repr`` of the mechanism (``"none"``: clean test texts) and its ε.
    """

    topk: dict[int, float]
    topk_ci: dict[int, tuple[float, float]]
    chance: dict[int, float]
    n_test: int
    n_authors: int
    mechanism: str
    epsilon: float | None
    confidence: float


def split_by_author(authors: Any, *, test_per_author: int = 1, min_texts: int = 2, rng: RNGLike = None) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, test)``: for each author with at least ``min_texts`` texts,
    ``test_per_author`` of them drawn at random go to test; the rest (and every text of authors
    with fewer texts) to train. Every test author keeps at least one training text."""
    a = np.asarray(authors)
    if a.ndim != 1:
        raise ValueError(f"authors must be one-dimensional, got shape {a.shape}")
    t = check_int("test_per_author", test_per_author, minimum=1)
    m = check_int("min_texts", min_texts, minimum=t + 1)
    perm = as_generator(rng).permutation(a.size)
    _, owner = np.unique(a[perm], return_inverse=True)
    order = np.argsort(owner, kind="stable")
    o = owner[order]
    starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]])
    sizes = np.diff(np.r_[starts, o.size])
    rank = np.arange(o.size) - np.repeat(starts, sizes)
    is_test = (rank < t) & (np.repeat(sizes, sizes) >= m)
    idx = perm[order]
    return np.sort(idx[~is_test]), np.sort(idx[is_test])


def authorship_attack(
    mechanism: Any,
    train_texts: Sequence[str],
    train_authors: Any,
    test_texts: Sequence[str],
    test_authors: Any,
    *,
    rng: RNGLike = None,
    model: AuthorProfiles | None = None,
    ks: Sequence[int] = (1, 10),
    oov: str = "unk",
    confidence: float = 0.95,
) -> AuthorshipResult:
    """Top-k attribution accuracy of privatized texts to authors known from clean texts.

    Fits author profiles on the clean training texts (unless a fitted ``model`` is given),
    privatizes the test texts with ``mechanism`` (``None``: attack the clean test texts, the
    non-private baseline) and ranks the candidate authors of each.

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`, or None.
    train_texts, train_authors
        The attacker's clean texts and their authors (any hashable ids).
    test_texts, test_authors
        The texts to attribute and their true authors.
    rng
        Generator, int seed or None (the privatization).
    model
        A fitted :class:`AuthorProfiles` to reuse across runs (then the training texts are not
        refitted; pass the same ones).
    ks
        The k of top-k accuracy.
    oov, confidence
        Passed to ``privatize``; level of the Wilson intervals.

    Returns
    -------
    AuthorshipResult
    """
    ks = sorted({check_int("k", k, minimum=1) for k in ks})
    test_texts = _check_texts("test_texts", test_texts)
    y = _check_labels("test_authors", test_authors, len(test_texts), "test_texts")
    if not test_texts:
        raise ValueError("no test texts")
    if model is None:
        model = AuthorProfiles().fit(train_texts, train_authors)
    q = test_texts if mechanism is None else privatize_dataset(mechanism, test_texts, rng=as_generator(rng), oov=oov)
    ranks = model.true_author_ranks(q, y)
    n, A = len(q), len(model.authors_)
    hits = {k: int((ranks < k).sum()) for k in ks}
    eps = None if mechanism is None else float(getattr(mechanism, "epsilon", math.nan))
    return AuthorshipResult(
        topk={k: hits[k] / n for k in ks},
        topk_ci={k: wilson_interval(hits[k], n, confidence) for k in ks},
        chance={k: min(1.0, k / A) for k in ks},
        n_test=n,
        n_authors=A,
        mechanism="none" if mechanism is None else repr(mechanism),
        epsilon=eps,
        confidence=confidence,
    )
