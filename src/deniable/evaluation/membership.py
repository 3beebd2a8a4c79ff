"""Membership inference on a classifier trained on privatized text (loss-threshold attack).

The attacker holds a candidate record (text, label) and black-box access to a model's
probabilities; it guesses "member" when the model's loss on the record is low (Yeom et al.,
"Privacy Risk in Machine Learning", CSF 2018: the loss-threshold adversary; the TEM paper §5 and
the Madlib paper's auditor measure the same risk). Sweeping the threshold gives an ROC curve; its
area (AUC) is 0.5 for a model that reveals nothing about membership and 1 for one that reveals
everything. The AUC is the Mann–Whitney statistic of the scores −loss of members against
non-members, with DeLong's variance for the interval.

Word-level privatization protects the training *texts*; the records the attacker holds are the
clean texts (the strongest case: it knows exactly what a member wrote).

(The n-gram releases have their own membership attack, on a released distribution rather than a
model: :func:`deniable.ngrams.release_membership_inference`.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats

from .._rng import RNGLike, as_generator, spawn
from ._record import ResultRecord
from .utility import TextClassifier, TokenizedTexts, _check_labels, _check_texts, _softmax_rows, privatize_dataset

__all__ = ["MembershipResult", "auc_interval", "example_losses", "membership_inference", "membership_scores_result"]


def auc_interval(member_scores: Any, nonmember_scores: Any, confidence: float = 0.95) -> tuple[float, tuple[float, float], float]:
    """AUC of "member" scores against "non-member" scores, its DeLong interval, and its standard error.

    AUC = P[s_member > s_nonmember] + ½·P[tie] (Mann–Whitney, by mid-ranks). The variance is
    DeLong, DeLong & Clarke-Pearson (1988), computed from placement values by mid-ranks
    (Sun & Xu 2014); the interval is AUC ± z·se clipped to [0, 1].
    """
    a = np.asarray(member_scores, dtype=np.float64).ravel()
    b = np.asarray(nonmember_scores, dtype=np.float64).ravel()
    m, n = a.size, b.size
    if m < 2 or n < 2:
        raise ValueError(f"need at least 2 member and 2 non-member scores, got {m} and {n}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("scores must be finite")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    r_all = scipy.stats.rankdata(np.concatenate([a, b]))
    ra, rb = r_all[:m], r_all[m:]
    auc = (ra.sum() - m * (m + 1) / 2.0) / (m * n)
    v10 = (ra - scipy.stats.rankdata(a)) / n  # placement of each member among non-members
    v01 = 1.0 - (rb - scipy.stats.rankdata(b)) / m
    se = math.sqrt(max(v10.var(ddof=1) / m + v01.var(ddof=1) / n, 0.0))
    z = float(scipy.stats.norm.ppf(0.5 + confidence / 2.0))
    return float(auc), (max(0.0, auc - z * se), min(1.0, auc + z * se)), se


def _scores(classifier: TextClassifier, texts: Any, labels: Any, X: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, per-text cross-entropy, predicted labels) from one sparse product of the
    features (``X``, precomputed, or the features of ``texts``) with the weights."""
    n = texts.n_texts if isinstance(texts, TokenizedTexts) else len(_check_texts("texts", texts))
    y = _check_labels("labels", labels, n, "texts")
    if X is None:
        X = classifier.transform(texts)
    elif X.shape[0] != n:
        raise ValueError(f"features have {X.shape[0]} rows but there are {n} texts")
    model = classifier.model
    Z = model.decision_function(X)
    pred = model.classes_[np.argmax(Z, axis=1)]  # = model.predict(X)
    P = _softmax_rows(Z)  # = model.predict_proba(X), from the same scores
    classes = model.classes_
    pos = np.searchsorted(classes, y)
    pos = np.minimum(pos, len(classes) - 1)
    known = classes[pos] == y
    out = np.full(n, np.inf)
    with np.errstate(divide="ignore"):
        out[known] = -np.log(np.maximum(P[np.flatnonzero(known), pos[known]], 1e-300))
    return y, out, pred


def example_losses(classifier: TextClassifier, texts: Sequence[str] | TokenizedTexts, labels: Any) -> np.ndarray:
    """Cross-entropy −log p(label | text) of a fitted :class:`TextClassifier`, per text (labels
    unseen in training get +inf). ``texts`` may be :class:`~deniable.evaluation.utility.TokenizedTexts`."""
    return _scores(classifier, texts, labels)[1]


@dataclass(frozen=True)
class MembershipResult(ResultRecord):
    """Outcome of :func:`membership_inference`.

    Attributes
    ----------
    auc, auc_ci, auc_se
        Area under the ROC curve of the loss-threshold attack, its DeLong interval and s.e.
    advantage
        max over thresholds of TPR − FPR (the membership advantage of Yeom et al.).
    n_members, n_nonmembers
        Records attacked.
    train_accuracy, test_accuracy
        The model's accuracy on the members' and non-members' clean texts.
    mechanism, epsilon
        ``repr`` of the mechanism (``"none"`` for the non-private baseline) and its ε.
    """

    auc: float
    auc_ci: tuple[float, float]
    auc_se: float
    advantage: float
    n_members: int
    n_nonmembers: int
    train_accuracy: float
    test_accuracy: float
    mechanism: str
    epsilon: float | None
    confidence: float


def _advantage(a: np.ndarray, b: np.ndarray) -> float:
    """max_t TPR(t) − FPR(t) for the rule score ≥ t (a: members, b: non-members)."""
    s = np.concatenate([a, b])
    is_m = np.concatenate([np.ones(a.size), np.zeros(b.size)])
    order = np.argsort(-s, kind="stable")
    s, is_m = s[order], is_m[order]
    tpr = np.cumsum(is_m) / a.size
    fpr = np.cumsum(1 - is_m) / b.size
    last = np.append(s[1:] != s[:-1], True)  # only thresholds between distinct scores
    return float(max(0.0, (tpr - fpr)[last].max()))


def membership_scores_result(
    classifier: TextClassifier,
    member_texts: Sequence[str] | TokenizedTexts,
    member_labels: Any,
    nonmember_texts: Sequence[str] | TokenizedTexts,
    nonmember_labels: Any,
    *,
    mechanism: Any = None,
    confidence: float = 0.95,
    features: tuple[Any, Any] | None = None,
) -> MembershipResult:
    """Run the loss-threshold attack against an already fitted classifier.

    Each record set costs one sparse product of its features with the weights (losses and
    accuracies come from the same scores). ``features``: the members' and non-members'
    ``classifier.transform`` matrices when already computed (the texts are then only counted);
    the texts may be :class:`~deniable.evaluation.utility.TokenizedTexts`.
    """
    Xa, Xb = features if features is not None else (None, None)
    ya, la, pa = _scores(classifier, member_texts, member_labels, Xa)
    yb, lb, pb = _scores(classifier, nonmember_texts, nonmember_labels, Xb)
    cap = np.nanmax(np.concatenate([la[np.isfinite(la)], lb[np.isfinite(lb)], [0.0]])) + 1.0
    sa, sb = -np.minimum(la, cap), -np.minimum(lb, cap)
    auc, ci, se = auc_interval(sa, sb, confidence)
    acc_a = float(np.mean(pa == ya))
    acc_b = float(np.mean(pb == yb))
    eps = None if mechanism is None else float(getattr(mechanism, "epsilon", math.nan))
    return MembershipResult(
        auc=auc,
        auc_ci=ci,
        auc_se=se,
        advantage=_advantage(sa, sb),
        n_members=len(la),
        n_nonmembers=len(lb),
        train_accuracy=acc_a,
        test_accuracy=acc_b,
        mechanism="none" if mechanism is None else repr(mechanism),
        epsilon=eps,
        confidence=confidence,
    )


def membership_inference(
    mechanism: Any,
    texts: Sequence[str],
    labels: Any,
    *,
    rng: RNGLike = None,
    member_fraction: float = 0.5,
    classifier: TextClassifier | None = None,
    oov: str = "unk",
    confidence: float = 0.95,
) -> MembershipResult:
    """Loss-threshold membership inference against a classifier trained on privatized text.

    Splits ``texts`` at random into members (``member_fraction``) and non-members, privatizes the
    members' texts with ``mechanism`` (``None``: the non-private baseline), fits ``classifier``
    (default TF-IDF + logistic regression) on them, and attacks it with the members' and
    non-members' **clean** texts and labels. Returns the AUC with a DeLong interval.

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`, or None.
    texts, labels
        The records (≥ 2 classes).
    rng
        Generator, int seed or None: the split and the privatization (independent streams).
    member_fraction
        Fraction of records in the training set, in (0, 1).
    classifier
        An unfitted :class:`TextClassifier` (fitted in place).
    oov
        Passed to ``mechanism.privatize``.
    confidence
        Level of the AUC interval.

    Returns
    -------
    MembershipResult
    """
    texts = _check_texts("texts", texts)
    y = _check_labels("labels", labels, len(texts), "texts")
    if not 0 < member_fraction < 1:
        raise ValueError(f"member_fraction must be in (0, 1), got {member_fraction!r}")
    n = len(texts)
    n_mem = int(round(member_fraction * n))
    if n_mem < 2 or n - n_mem < 2:
        raise ValueError(f"need at least 2 members and 2 non-members, got {n_mem} and {n - n_mem} from {n} texts")
    g_split, g_priv = spawn(as_generator(rng), 2)
    perm = g_split.permutation(n)
    mem, non = np.sort(perm[:n_mem]), np.sort(perm[n_mem:])
    mem_texts = [texts[i] for i in mem]
    train = mem_texts if mechanism is None else privatize_dataset(mechanism, mem_texts, rng=g_priv, oov=oov)
    if classifier is None:
        classifier = TextClassifier()
    classifier.fit(train, y[mem])
    return membership_scores_result(
        classifier, mem_texts, y[mem], [texts[i] for i in non], y[non], mechanism=mechanism, confidence=confidence
    )
