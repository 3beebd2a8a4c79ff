"""Evaluation: downstream utility of privatized text and membership-inference risk.

* :mod:`deniable.evaluation.utility` — privatize a data set, bag-of-words features on the
  library's tokenizer, L2 logistic regression (numpy/scipy), and :func:`downstream_accuracy`.
"""

from .utility import (
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

__all__ = [
    "BagOfWords",
    "DownstreamResult",
    "LogisticRegression",
    "TextClassifier",
    "classification_scores",
    "downstream_accuracy",
    "privatize_dataset",
    "tokens_of",
    "words_changed",
]
