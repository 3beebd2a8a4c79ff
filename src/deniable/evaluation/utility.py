"""Downstream utility of privatized text: train a text classifier on privatized data, test it.

The Madlib paper (§5.2) measures utility as the accuracy of a classifier trained on privatized
text and tested on clean text ("training time"), or trained on clean text and tested on
privatized text ("test time"); the TEM paper (§5, "Utility"), the BRR paper (§6, "Utility") and the
Mahalanobis paper (§5.2, SMS Spam) train on privatized text and test on held-out text. This
module provides the pieces, with no dependency beyond numpy/scipy:

* :func:`privatize_dataset` — one batch ``mechanism.privatize`` call over a list of texts.
* :class:`BagOfWords` — bag-of-words / TF-IDF features over the library's own tokenizer
  (:func:`deniable.text.words_of`, NFC-normalized and lower-cased like vocabulary lookups), as a
  ``scipy.sparse`` CSR matrix, built with array operations.
* :class:`LogisticRegression` — L2-regularized multinomial logistic regression fitted with
  L-BFGS (``scipy.optimize``); deterministic (no randomness).
* :func:`downstream_accuracy` — the whole experiment for one mechanism (or ``None``, the
  non-private baseline) returning a :class:`DownstreamResult`.
* :func:`words_changed` — the fraction of word tokens a privatization replaced (1 − the empirical
  N_w over tokens), to relate utility to privacy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._rng import RNGLike, as_generator, spawn
from .._validation import check_int
from ..text.tokenize import keys_of, token_codes
from ._logistic import LogisticRegression, _softmax_rows  # noqa: F401  (_softmax_rows: re-exported for membership)

__all__ = [
    "PRIVATIZE_MODES",
    "WEIGHTINGS",
    "BagOfWords",
    "DownstreamResult",
    "LogisticRegression",
    "TextClassifier",
    "classification_scores",
    "downstream_accuracy",
    "privatize_dataset",
    "TokenizedTexts",
    "tokenize_texts",
    "tokens_of",
    "words_changed",
]

#: What :func:`downstream_accuracy` privatizes: the training texts only (test on clean text, the
#: Madlib paper's setting) or training and test texts.
PRIVATIZE_MODES = ("train", "both")
#: Feature weightings of :class:`BagOfWords`.
WEIGHTINGS = ("tfidf", "count", "binary")


def _check_texts(name: str, texts: Any) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a sequence of strings, got {type(texts).__name__}")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"{name} must contain strings, got an element of type {type(t).__name__}")
    return out


def _check_labels(name: str, labels: Any, n: int, texts_name: str) -> np.ndarray:
    if isinstance(labels, str) or not isinstance(labels, (Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of labels, got {type(labels).__name__}")
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but {texts_name} has {n} texts")
    return arr


# -- privatization ---------------------------------------------------------------------------
def privatize_dataset(mechanism: Any, texts: Sequence[str], *, rng: RNGLike = None, oov: str = "unk") -> list[str]:
    """Privatize every text of a data set with one batch ``mechanism.privatize`` call.

    The guarantee is the mechanism's (``mechanism.guarantee``), per word; a text of n words gets
    n·ε·d by composition. ``oov`` is passed through (default ``"unk"``: unknown words are
    privatized as UNK, never copied).

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`.
    texts
        The texts (a sequence of ``str``).
    rng
        Generator, int seed or None (see :func:`deniable._rng.as_generator`).
    oov
        ``"unk"``, ``"drop"`` or ``"keep"`` (unsafe, warns).

    Returns
    -------
    list of str, one privatized text per input text, in order.
    """
    if not callable(getattr(mechanism, "privatize", None)):
        raise TypeError(f"mechanism must be a deniable Mechanism (with .privatize), got {type(mechanism).__name__}")
    texts = _check_texts("texts", texts)
    gen = as_generator(rng)
    if not texts:
        return []
    return list(mechanism.privatize(texts, rng=gen, oov=oov))


def tokens_of(text: str) -> list[str]:
    """The feature tokens of ``text``: :func:`deniable.text.words_of`, each NFC-normalized and
    lower-cased exactly as an uncased vocabulary lookup does (:func:`deniable.text.lookup_key`)."""
    return keys_of(text, lower=True)


@dataclass(frozen=True, eq=False)
class TokenizedTexts:
    """Texts tokenized once (:func:`tokens_of`), as integer codes.

    ``words`` holds the distinct tokens in order of first occurrence, ``codes`` the index into
    ``words`` of every token in order, ``lengths`` each text's token count. The features,
    :func:`words_changed` and the membership attack all take it, so a text set is tokenized
    once per evaluation however often it is used, and everything after the tokenizer works on
    integer arrays.
    """

    words: list[str]
    codes: np.ndarray
    lengths: np.ndarray

    @property
    def n_texts(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def rows(self) -> np.ndarray:
        """The text index of each token."""
        return np.repeat(np.arange(self.n_texts, dtype=np.int64), self.lengths)

    @property
    def tokens(self) -> list[str]:
        """All tokens in order (as strings)."""
        return [self.words[i] for i in self.codes.tolist()]


def tokenize_texts(texts: Sequence[str] | TokenizedTexts) -> TokenizedTexts:
    """:class:`TokenizedTexts` of ``texts`` (returned as is when already tokenized)."""
    if isinstance(texts, TokenizedTexts):
        return texts
    texts = _check_texts("texts", texts)
    per_text = [tokens_of(t) for t in texts]
    lengths = np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text))
    tokens = list(itertools.chain.from_iterable(per_text))
    codes, words = token_codes(tokens)
    return TokenizedTexts(words, codes, lengths)


def words_changed(original: Sequence[str] | TokenizedTexts, privatized: Sequence[str] | TokenizedTexts) -> tuple[int, int]:
    """``(changed, total)`` word tokens between texts and their privatized versions.

    Words are compared position by position (case-insensitively, as :func:`tokens_of`), text by
    text. ``changed / total`` is 1 − the empirical N_w pooled over tokens (N_w = Pr[M(w) = w],
    Madlib paper §3.2); out-of-vocabulary words always count as changed. A text whose word count
    differs after privatization (a vocabulary word containing punctuation, such as ``e-mail``,
    re-tokenizes into several words; ``oov="drop"`` removes words) is compared on its common
    prefix and the extra or missing words count as changed. Either argument may be
    :class:`TokenizedTexts`.
    """
    a = original if isinstance(original, TokenizedTexts) else tokenize_texts(_check_texts("original", original))
    b = privatized if isinstance(privatized, TokenizedTexts) else tokenize_texts(_check_texts("privatized", privatized))
    if a.n_texts != b.n_texts:
        raise ValueError(f"original has {a.n_texts} texts but privatized has {b.n_texts}")
    total = int(a.lengths.sum())
    m = np.minimum(a.lengths, b.lengths)
    if not m.any():
        return total, total
    # positions j < m_i of every text i, in a's and in b's flat token order
    start_a = np.cumsum(a.lengths) - a.lengths
    start_b = np.cumsum(b.lengths) - b.lengths
    within = np.arange(int(m.sum()), dtype=np.int64) - np.repeat(np.cumsum(m) - m, m)
    ia = np.repeat(start_a, m) + within
    ib = np.repeat(start_b, m) + within
    index = {w: i for i, w in enumerate(a.words)}
    b_in_a = np.fromiter((index.get(w, -1) for w in b.words), dtype=np.int64, count=len(b.words))  # -1: not in a
    same = int((a.codes[ia] == b_in_a[b.codes[ib]]).sum())
    return total - same, total


# -- features --------------------------------------------------------------------------------
class BagOfWords:
    """Bag-of-words features on the library's tokenizer, as a CSR matrix.

    Tokens are :func:`tokens_of` (``words_of`` + NFC + lower case), so the features see words
    exactly as the mechanisms' vocabulary lookups do.

    Parameters
    ----------
    weighting
        ``"tfidf"`` (default: (1 + ln tf)·idf with smoothed idf = ln((1+n)/(1+df)) + 1, rows
        L2-normalized), ``"count"`` (raw counts) or ``"binary"`` (presence).
    min_df
        Keep words occurring in at least this many training texts.
    max_features
        Keep at most this many words (the most frequent by document frequency; ties by word).
    """

    def __init__(self, *, weighting: str = "tfidf", min_df: int = 1, max_features: int | None = None) -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(map(repr, WEIGHTINGS))}, got {weighting!r}")
        self.weighting = weighting
        self.min_df = check_int("min_df", min_df, minimum=1)
        self.max_features = None if max_features is None else check_int("max_features", max_features, minimum=1)
        self.vocabulary_: Any = None  # an array once fitted
        self._index: dict[str, int] = {}
        self.idf_: Any = None  # an array once fitted

    def fit(self, texts: Sequence[str] | TokenizedTexts) -> BagOfWords:
        """Learn the vocabulary (sorted words) and document frequencies from ``texts`` (or
        :class:`TokenizedTexts`)."""
        tok = tokenize_texts(texts)
        V = len(tok.words)
        pairs = np.unique(tok.rows * max(V, 1) + tok.codes)  # (text, word) pairs, once each
        df_by_code = np.bincount(pairs % max(V, 1), minlength=V)
        order = sorted(range(V), key=tok.words.__getitem__)
        vocab = np.array([tok.words[i] for i in order], dtype=object)
        df = df_by_code[np.asarray(order, dtype=np.int64)]
        keep = df >= self.min_df
        if self.max_features is not None and keep.sum() > self.max_features:
            order_df = np.lexsort((np.arange(len(vocab)), -df))  # df descending, then word order
            order_df = order_df[keep[order_df]][: self.max_features]
            keep = np.zeros(len(vocab), dtype=bool)
            keep[order_df] = True
        self.vocabulary_ = vocab[keep]
        self._index = {w: i for i, w in enumerate(self.vocabulary_.tolist())}
        n = tok.n_texts
        self.idf_ = np.log((1.0 + n) / (1.0 + df[keep])) + 1.0
        return self

    @property
    def n_features(self) -> int:
        self._check_fitted()
        return len(self.vocabulary_)

    def _check_fitted(self) -> None:
        if self.vocabulary_ is None:
            raise RuntimeError("BagOfWords is not fitted: call fit(texts) first")

    def transform(self, texts: Sequence[str] | TokenizedTexts) -> sp.csr_matrix:
        """Features of ``texts`` (or :class:`TokenizedTexts`), (n_texts, n_features) float64
        CSR; unseen words are ignored."""
        self._check_fitted()
        tok = tokenize_texts(texts)
        vocab = self.vocabulary_
        get = self._index.get
        col_of_code = np.fromiter((get(w, -1) for w in tok.words), dtype=np.int64, count=len(tok.words))
        rows, cols = tok.rows, col_of_code[tok.codes]
        found = cols >= 0
        rows, cols = rows[found], cols[found]
        X = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(tok.n_texts, len(vocab)))
        X.sum_duplicates()
        if self.weighting == "binary":
            X.data[:] = 1.0
        elif self.weighting == "tfidf":
            X.data = (1.0 + np.log(X.data)) * self.idf_[X.indices]
            norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
            norms[norms == 0] = 1.0
            X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
        return X

    def fit_transform(self, texts: Sequence[str] | TokenizedTexts) -> sp.csr_matrix:
        """``fit(texts).transform(texts)``, tokenizing once."""
        tok = tokenize_texts(texts)
        return self.fit(tok).transform(tok)


# -- classifier ------------------------------------------------------------------------------
class TextClassifier:
    """:class:`BagOfWords` features + :class:`LogisticRegression`, on raw texts."""

    def __init__(
        self,
        *,
        weighting: str = "tfidf",
        min_df: int = 1,
        max_features: int | None = None,
        alpha: float = 1e-4,
        max_iter: int = 1000,
        tol: float = 1e-8,
    ) -> None:
        self.features = BagOfWords(weighting=weighting, min_df=min_df, max_features=max_features)
        self.model = LogisticRegression(alpha=alpha, max_iter=max_iter, tol=tol)

    def fit(self, texts: Sequence[str] | TokenizedTexts, labels: Any) -> TextClassifier:
        tok = texts if isinstance(texts, TokenizedTexts) else tokenize_texts(_check_texts("texts", texts))
        y = _check_labels("labels", labels, tok.n_texts, "texts")
        self.model.fit(self.features.fit_transform(tok), y)
        return self

    def transform(self, texts: Sequence[str] | TokenizedTexts) -> sp.csr_matrix:
        """The fitted features of ``texts`` (pass them to ``model`` to avoid re-tokenizing)."""
        return self.features.transform(texts)

    def predict(self, texts: Sequence[str] | TokenizedTexts) -> np.ndarray:
        return self.model.predict(self.features.transform(texts))


def classification_scores(y_true: Any, y_pred: Any) -> tuple[float, float]:
    """``(accuracy, macro-F1)``: macro-F1 is the unweighted mean of the per-class F1 =
    2·TP/(support + predicted) over the classes present in ``y_true`` or ``y_pred``."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1:
        raise ValueError(f"y_true and y_pred must be 1-D of equal length, got {y_true.shape} and {y_pred.shape}")
    if y_true.size == 0:
        raise ValueError("y_true is empty")
    classes, inv = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    t, p = inv[: y_true.size], inv[y_true.size :]
    K = len(classes)
    tp = np.bincount(t[t == p], minlength=K).astype(np.float64)
    support, predicted = np.bincount(t, minlength=K), np.bincount(p, minlength=K)
    denom = support + predicted
    f1 = np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    return float(np.mean(t == p)), float(f1.mean())


# -- the experiment --------------------------------------------------------------------------
@dataclass(frozen=True)
class DownstreamResult:
    """Outcome of :func:`downstream_accuracy`.

    Attributes
    ----------
    accuracy, macro_f1
        On the test texts (privatized or not, see ``privatize``).
    n_train, n_test
        Numbers of texts.
    mechanism
        ``repr`` of the mechanism (with its guarantee), or ``"none"`` for the baseline.
    epsilon
        The mechanism's ε (None for the baseline).
    privatize
        ``"train"`` or ``"both"`` (``"none"`` for the baseline).
    words_changed_train, words_changed_test
        Fraction of word tokens the privatization replaced (see :func:`words_changed`); 0 where
        nothing was privatized.
    """

    accuracy: float
    macro_f1: float
    n_train: int
    n_test: int
    mechanism: str
    epsilon: float | None
    privatize: str
    words_changed_train: float
    words_changed_test: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def downstream_accuracy(
    mechanism: Any,
    train_texts: Sequence[str],
    train_labels: Any,
    test_texts: Sequence[str],
    test_labels: Any,
    *,
    privatize: str = "train",
    rng: RNGLike = None,
    classifier: TextClassifier | None = None,
    oov: str = "unk",
) -> DownstreamResult:
    """Accuracy of a classifier trained on privatized text (Madlib paper §5.2, "training time").

    Privatizes the training texts (``privatize="train"``; test on clean text) or both training
    and test texts (``"both"``), each with one batch call (independent child generators of
    ``rng``), fits ``classifier`` (default: TF-IDF + L2 logistic regression) on the training
    texts and scores it on the test texts. ``mechanism=None`` is the non-private baseline (no
    randomness used).

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`, or None.
    train_texts, train_labels, test_texts, test_labels
        Texts (sequences of str) and labels (any hashable, ≥ 2 classes in training).
    privatize
        ``"train"`` or ``"both"``.
    rng
        Generator, int seed or None.
    classifier
        An unfitted :class:`TextClassifier` (default ``TextClassifier()``); it is fitted in place.
    oov
        Passed to :func:`privatize_dataset`.

    Returns
    -------
    DownstreamResult
    """
    if privatize not in PRIVATIZE_MODES:
        raise ValueError(f"privatize must be one of {', '.join(map(repr, PRIVATIZE_MODES))}, got {privatize!r}")
    train_texts = _check_texts("train_texts", train_texts)
    test_texts = _check_texts("test_texts", test_texts)
    y_train = _check_labels("train_labels", train_labels, len(train_texts), "train_texts")
    y_test = _check_labels("test_labels", test_labels, len(test_texts), "test_texts")
    if not train_texts or not test_texts:
        raise ValueError(f"need at least one training and one test text, got {len(train_texts)} and {len(test_texts)}")
    if classifier is None:
        classifier = TextClassifier()
    elif not isinstance(classifier, TextClassifier):
        raise TypeError(f"classifier must be a TextClassifier, got {type(classifier).__name__}")
    gen = as_generator(rng)
    frac_train = frac_test = 0.0
    epsilon = None
    name, mode = "none", "none"
    if mechanism is not None:
        g_train, g_test = spawn(gen, 2)
        priv_train = privatize_dataset(mechanism, train_texts, rng=g_train, oov=oov)
        c, t = words_changed(train_texts, priv_train)
        frac_train = c / t if t else 0.0
        train_texts = priv_train
        if privatize == "both":
            priv_test = privatize_dataset(mechanism, test_texts, rng=g_test, oov=oov)
            c, t = words_changed(test_texts, priv_test)
            frac_test = c / t if t else 0.0
            test_texts = priv_test
        epsilon = float(mechanism.epsilon)
        name, mode = repr(mechanism), privatize
    classifier.fit(train_texts, y_train)
    acc, f1 = classification_scores(y_test, classifier.predict(test_texts))
    return DownstreamResult(
        accuracy=acc,
        macro_f1=f1,
        n_train=len(train_texts),
        n_test=len(test_texts),
        mechanism=name,
        epsilon=epsilon,
        privatize=mode,
        words_changed_train=frac_train,
        words_changed_test=frac_test,
    )
