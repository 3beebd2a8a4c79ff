"""Evaluation: downstream utility of privatized text, and attacks on it.

* :mod:`deniable.evaluation.utility` — privatize a data set, bag-of-words features on the
  library's tokenizer, L2 logistic regression (numpy/scipy), and :func:`downstream_accuracy`.
* :mod:`deniable.evaluation.inversion` — :func:`inversion_attack`, the Bayes adversary who
  guesses input words from privatized words.
* :mod:`deniable.evaluation.membership` — :func:`membership_inference`, a loss-threshold
  membership attack on a classifier trained on privatized text (AUC with a DeLong interval).
* :mod:`deniable.evaluation.authorship` — :func:`authorship_attack`, attribution of privatized
  texts to their authors from clean texts.
* :mod:`deniable.evaluation.similarity` — :func:`semantic_similarity` with an offline sentence
  embedding model (optional extra ``deniable[eval]``).
* :mod:`deniable.evaluation.reference` — :class:`IdentityMechanism` (no privacy) and
  :class:`UniformMechanism` (perfect privacy), the references that calibrate the attacks.
"""

from .authorship import AuthorProfiles, AuthorshipResult, authorship_attack, split_by_author
from .inversion import InversionResult, inversion_attack, token_ids, wilson_interval
from .membership import MembershipResult, auc_interval, example_losses, membership_inference, membership_scores_result
from .reference import IdentityMechanism, UniformMechanism
from .similarity import SimilarityResult, load_sentence_model, semantic_similarity
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
    "AuthorProfiles",
    "AuthorshipResult",
    "BagOfWords",
    "DownstreamResult",
    "IdentityMechanism",
    "InversionResult",
    "LogisticRegression",
    "MembershipResult",
    "SimilarityResult",
    "TextClassifier",
    "UniformMechanism",
    "auc_interval",
    "authorship_attack",
    "classification_scores",
    "downstream_accuracy",
    "example_losses",
    "inversion_attack",
    "load_sentence_model",
    "membership_inference",
    "membership_scores_result",
    "privatize_dataset",
    "semantic_similarity",
    "split_by_author",
    "token_ids",
    "tokens_of",
    "wilson_interval",
    "words_changed",
]
