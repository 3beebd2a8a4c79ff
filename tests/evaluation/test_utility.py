"""Tests of deniable.evaluation.utility: featurizer, classifier, downstream_accuracy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from deniable import Embedding, Madlib
from deniable.evaluation.utility import (
    BagOfWords,
    DownstreamResult,
    LogisticRegression,
    TextClassifier,
    classification_scores,
    downstream_accuracy,
    privatize_dataset,
    tokens_of,
    words_changed,
)
from deniable.text import words_of


def _embedding(n: int = 40, dim: int = 5, seed: int = 0) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def _corpus(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Two classes: class 0 draws mostly from w0..w9, class 1 from w10..w19, both from w20..w39."""
    rng = np.random.default_rng(seed)
    texts, labels = [], rng.integers(0, 2, n)
    for y in labels:
        topical = rng.integers(0, 10, 3) + 10 * y
        noise = rng.integers(20, 40, 4)
        words = [f"w{i}" for i in np.concatenate([topical, noise])]
        rng.shuffle(words)
        texts.append(" ".join(words).capitalize() + ".")
    return texts, np.where(labels == 1, "pos", "neg")


# -- tokenizer consistency ----------------------------------------------------------------------
TEXTS = ["Hello, World! hello", "NASA's e-mail: Café déjà-vu", "   ", "", "x_y 3.14 $5 😀ok", "İstanbul ÉCOLE"]


@pytest.mark.parametrize("text", TEXTS)
def test_tokens_follow_the_library_tokenizer(text):
    assert tokens_of(text) == [w.lower() for w in words_of(text)]


def test_bag_of_words_counts_match_tokenizer():
    bow = BagOfWords(weighting="count").fit(TEXTS)
    vocab = list(bow.vocabulary_)
    assert vocab == sorted({w for t in TEXTS for w in tokens_of(t)})
    X = bow.transform(TEXTS).toarray()
    for i, t in enumerate(TEXTS):
        expected = np.zeros(len(vocab))
        for w, c in Counter(tokens_of(t)).items():
            expected[vocab.index(w)] = c
        np.testing.assert_array_equal(X[i], expected)


def test_bag_of_words_tfidf_binary_and_unseen_words():
    train = ["a a b", "b c", "c d d d"]
    bow = BagOfWords().fit(train)
    X = bow.transform(train + ["zzz unseen", "A A B"])
    assert sp.isspmatrix_csr(X) or sp.issparse(X)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, [1, 1, 1, 0, 1], atol=1e-12)
    np.testing.assert_allclose(X[4].toarray(), X[0].toarray())  # case-insensitive
    # tf-idf by hand for text 0: tf(a)=2, tf(b)=1; n=3, df(a)=1, df(b)=2
    idf = lambda df: np.log(4 / (1 + df)) + 1  # noqa: E731
    v = np.array([(1 + np.log(2)) * idf(1), idf(2)])
    np.testing.assert_allclose(X[0].toarray()[0, :2], v / np.linalg.norm(v))
    Xb = BagOfWords(weighting="binary").fit(train).transform(train)
    assert set(Xb.data.tolist()) == {1.0}


def test_bag_of_words_min_df_and_max_features():
    train = ["a b c", "a b", "a"]
    assert list(BagOfWords(min_df=2).fit(train).vocabulary_) == ["a", "b"]
    assert list(BagOfWords(max_features=1).fit(train).vocabulary_) == ["a"]
    assert BagOfWords().fit(["", ""]).transform(["a"]).shape == (1, 0)


# -- classifier -----------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.01, 0.1, 1.0])
def test_logistic_regression_reaches_closed_form_optimum(alpha):
    """x = +1 (class 1) and x = -1 (class 0), no intercept: by symmetry W = [[-a, a]] with
    d/da [log(1 + e^{-2a}) + alpha·a²] = 0, i.e. sigmoid(-2a) = alpha·a."""
    a = scipy.optimize.brentq(lambda a: 1 / (1 + np.exp(2 * a)) - alpha * a, 0, 1 / alpha)
    X = np.array([[1.0], [-1.0], [1.0], [-1.0]])
    model = LogisticRegression(alpha=alpha, fit_intercept=False).fit(X, [1, 0, 1, 0])
    np.testing.assert_allclose(model.coef_, [[-a, a]], rtol=1e-6, atol=1e-9)
    assert model.converged_


def test_logistic_regression_intercept_matches_class_frequencies():
    """With all-zero features only the (unpenalized) intercept matters: its softmax is the
    empirical class distribution."""
    y = np.array(["a"] * 5 + ["b"] * 3 + ["c"] * 2)
    model = LogisticRegression(alpha=1.0).fit(np.zeros((10, 3)), y)
    np.testing.assert_allclose(model.predict_proba(np.zeros((1, 3)))[0], [0.5, 0.3, 0.2], atol=1e-6)
    np.testing.assert_allclose(model.coef_, 0, atol=1e-9)


def test_logistic_regression_gradient_vanishes_and_sparse_equals_dense():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 4))
    y = np.argmax(X @ rng.standard_normal((4, 3)) + 0.5 * rng.standard_normal((60, 3)), axis=1)
    dense = LogisticRegression(alpha=0.05).fit(X, y)
    params = np.concatenate([dense.coef_.ravel(), dense.intercept_])
    _, grad = dense.objective(X, np.searchsorted(dense.classes_, y), params)
    assert np.abs(grad).max() < 1e-6
    sparse = LogisticRegression(alpha=0.05).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-6)
    # a worse point has a larger objective (the optimum is the minimum of a convex function)
    f_opt, _ = dense.objective(X, np.searchsorted(dense.classes_, y), params)
    f_other, _ = dense.objective(X, np.searchsorted(dense.classes_, y), params + 0.01)
    assert f_other > f_opt


def test_logistic_regression_separates_separable_data():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 2))
    y = np.where(X[:, 0] + 2 * X[:, 1] > 0, "yes", "no")
    model = LogisticRegression(alpha=1e-4).fit(X, y)
    assert np.mean(model.predict(X) == y) >= 0.99
    assert list(model.classes_) == ["no", "yes"]


def test_classification_scores_by_hand():
    acc, f1 = classification_scores(["a", "a", "b", "b"], ["a", "b", "b", "b"])
    assert acc == 0.75
    # F1(a) = 2·1/(2+1) = 2/3, F1(b) = 2·2/(2+3) = 4/5
    assert f1 == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert classification_scores([1, 2], [3, 3]) == (0.0, 0.0)


# -- privatization and the experiment ---------------------------------------------------------
class _CountingMechanism:
    """Wraps a mechanism and counts privatize calls (one batch call expected)."""

    def __init__(self, mech):
        self.mech, self.calls = mech, 0
        self.epsilon = mech.epsilon

    def privatize(self, texts, rng=None, **kw):
        self.calls += 1
        return self.mech.privatize(texts, rng=rng, **kw)


def test_privatize_dataset_single_batch_and_reproducible():
    emb = _embedding()
    texts, _ = _corpus(30, 0)
    m = _CountingMechanism(Madlib(emb, epsilon=2.0))
    a = privatize_dataset(m, texts, rng=7)
    assert m.calls == 1 and len(a) == len(texts)
    assert a == privatize_dataset(m, texts, rng=np.random.default_rng(7))
    assert a != privatize_dataset(m, texts, rng=8)
    assert all(w.lower() in set(emb.words) for t in a for w in words_of(t))
    assert privatize_dataset(m, [], rng=0) == []


def test_words_changed_counts():
    assert words_changed(["a b c", "d"], ["a X c", "D"]) == (1, 4)
    assert words_changed(["a b c"], ["a b"]) == (1, 3)  # a dropped word counts as changed
    assert words_changed(["a b"], ["a b c"]) == (0, 2)  # an extra output word does not add tokens
    with pytest.raises(ValueError, match="privatized has 1"):
        words_changed(["a", "b"], ["a"])


def test_downstream_accuracy_identity_mechanism_equals_baseline():
    emb = _embedding()
    xtr, ytr = _corpus(200, 1)
    xte, yte = _corpus(100, 2)
    base = downstream_accuracy(None, xtr, ytr, xte, yte, rng=0)
    assert base.mechanism == "none" and base.epsilon is None and base.privatize == "none"
    assert base.accuracy > 0.8
    identity = Madlib(emb, epsilon=1e9)  # noise ~ 1e-9 ≪ the distances between words
    for mode in ("train", "both"):
        r = downstream_accuracy(identity, xtr, ytr, xte, yte, privatize=mode, rng=3)
        assert isinstance(r, DownstreamResult)
        assert (r.accuracy, r.macro_f1) == (base.accuracy, base.macro_f1)
        assert r.words_changed_train == 0.0 and r.words_changed_test == 0.0
        assert r.epsilon == 1e9 and r.privatize == mode and r.mechanism.startswith("Madlib(")
        assert (r.n_train, r.n_test) == (200, 100)


def test_downstream_accuracy_noisy_mechanism_rng_reproducible():
    emb = _embedding()
    xtr, ytr = _corpus(120, 3)
    xte, yte = _corpus(60, 4)
    m = Madlib(emb, epsilon=1.0)
    r1 = downstream_accuracy(m, xtr, ytr, xte, yte, privatize="both", rng=11)
    r2 = downstream_accuracy(m, xtr, ytr, xte, yte, privatize="both", rng=np.random.default_rng(11))
    assert r1 == r2
    assert r1.words_changed_train > 0.5 and r1.words_changed_test > 0.5
    r3 = downstream_accuracy(m, xtr, ytr, xte, yte, privatize="both", rng=12)
    assert r3.words_changed_train != r1.words_changed_train


# -- validation ------------------------------------------------------------------------------
def test_parameter_validation():
    emb = _embedding()
    m = Madlib(emb, epsilon=1.0)
    xtr, ytr = _corpus(20, 5)
    with pytest.raises(ValueError, match="privatize must be one of"):
        downstream_accuracy(m, xtr, ytr, xtr, ytr, privatize="test")
    with pytest.raises(TypeError, match="train_texts must be a sequence"):
        downstream_accuracy(m, "one text", ytr, xtr, ytr)
    with pytest.raises(TypeError, match="test_texts must contain strings"):
        downstream_accuracy(m, xtr, ytr, [1, 2], [0, 1])
    with pytest.raises(ValueError, match="train_labels has 19 labels"):
        downstream_accuracy(m, xtr, ytr[:-1], xtr, ytr)
    with pytest.raises(ValueError, match="at least one training"):
        downstream_accuracy(m, [], [], xtr, ytr)
    with pytest.raises(TypeError, match="classifier must be a TextClassifier"):
        downstream_accuracy(m, xtr, ytr, xtr, ytr, classifier=object())
    with pytest.raises(TypeError, match="rng"):
        downstream_accuracy(m, xtr, ytr, xtr, ytr, rng=1.5)
    with pytest.raises(TypeError, match="mechanism must be"):
        privatize_dataset(object(), xtr, rng=0)
    with pytest.raises(ValueError, match="alpha must be a finite number > 0, got 0"):
        LogisticRegression(alpha=0)
    with pytest.raises(TypeError, match="max_iter must be an integer"):
        LogisticRegression(max_iter=1.5)
    with pytest.raises(TypeError, match="fit_intercept"):
        LogisticRegression(fit_intercept=1)
    with pytest.raises(ValueError, match="at least 2 classes"):
        LogisticRegression().fit(np.zeros((3, 1)), [1, 1, 1])
    with pytest.raises(RuntimeError, match="not fitted"):
        LogisticRegression().predict(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="X has 2 features"):
        LogisticRegression().fit(np.zeros((2, 1)), [0, 1]).predict(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="weighting must be one of"):
        BagOfWords(weighting="bm25")
    with pytest.raises(ValueError, match="min_df must be an integer >= 1, got 0"):
        BagOfWords(min_df=0)
    with pytest.raises(RuntimeError, match="not fitted"):
        BagOfWords().transform(["a"])
    with pytest.raises(ValueError, match="equal length"):
        classification_scores([1, 2], [1])
    with pytest.raises(ValueError, match="oov must be one of"):
        privatize_dataset(m, xtr, rng=0, oov="skip")
    assert isinstance(TextClassifier().fit(xtr, ytr).predict(xtr), np.ndarray)


def test_sms_spam_baseline_is_strong(shared_data):
    """Real data: the non-private TF-IDF + logistic regression baseline on SMS Spam (fixed 80/20
    split of scripts/utility_experiments.py) is well above the 86.6% majority class."""
    import csv
    import gzip

    with gzip.open(shared_data / "classification" / "sms_spam_collection.csv.gz", "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    perm = np.random.default_rng(0).permutation(len(rows))
    tr, te = perm[:4459], perm[4459:]
    r = downstream_accuracy(
        None, [rows[i]["text"] for i in tr], [rows[i]["label"] for i in tr], [rows[i]["text"] for i in te], [rows[i]["label"] for i in te]
    )
    assert r.n_test == 1115
    assert r.accuracy > 0.97 and r.macro_f1 > 0.93
