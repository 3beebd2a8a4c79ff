"""One evaluation run of a mechanism on a labelled data set: utility and attacks together.

:func:`evaluate_mechanism` privatizes the training and test texts once (recording the word ids
in and out), then measures on the same privatization: downstream accuracy (clean and privatized
test text), loss-threshold membership inference, and word inversion by an adversary who
simulated the mechanism on the training words. It is what ``deniable evaluate`` and
``scripts/evaluation_experiments.py`` run per (mechanism, ε, seed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from ..text.privatize import ObservedSampler, privatize_texts
from .inversion import has_exact_probabilities, inversion_attack
from .membership import membership_scores_result
from .utility import TextClassifier, _check_labels, _check_texts, classification_scores, tokenize_texts, words_changed

__all__ = ["ATTACKS", "evaluate_mechanism", "privatize_recording"]

#: What :func:`evaluate_mechanism` measures besides utility.
ATTACKS = ("inversion", "membership")


def privatize_recording(mechanism: Any, texts: Sequence[str], *, rng: RNGLike = None, oov: str = "unk") -> tuple[list[str], np.ndarray, np.ndarray]:
    """``mechanism.privatize(texts)`` (one batch call) plus the word ids that went into the
    mechanism and the ids it sampled, token by token (``-1`` = out of vocabulary, privatized as
    UNK with ``oov="unk"``)."""
    inputs: list[np.ndarray] = []
    outputs: list[np.ndarray] = []

    def observe(ids: np.ndarray, out: np.ndarray) -> None:
        inputs.append(ids)
        outputs.append(out)

    rec = ObservedSampler(mechanism, observe)
    priv = privatize_texts(rec, list(texts), rng=as_generator(rng), oov=oov)
    cat = lambda a: np.concatenate(a).astype(np.int64, copy=False) if a else np.zeros(0, dtype=np.int64)  # noqa: E731
    return priv, cat(inputs), cat(outputs)


def _inversion_attacks(
    rec: dict[str, Any],
    mechanism: Any,
    train_ids: tuple[np.ndarray, np.ndarray],
    test_ids: tuple[np.ndarray, np.ndarray],
    rng: np.random.Generator,
    *,
    min_simulations: int,
    k: int,
    exact_inversion: bool | None,
) -> None:
    """The inversion attacks of :func:`evaluate_mechanism`, written into ``rec``: the simulating
    adversary (``inversion``) and, where asked or available, the Bayes-optimal one
    (``inversion_exact``). ``train_ids``/``test_ids``: the (input, output) word ids recorded by
    :func:`privatize_recording`; ``rng`` draws the extra simulations."""
    x_tr, y_tr = train_ids
    x_te, y_te = test_ids
    t = time.time()
    keep = x_tr >= 0
    sx, sy = x_tr[keep], y_tr[keep]
    if sx.size == 0:
        raise ValueError("the training texts have no in-vocabulary words: nothing to simulate the inversion attack on")
    reps = int(math.ceil(min_simulations / sx.size)) - 1
    if reps > 0:
        extra = np.tile(sx, reps)
        sx, sy = np.concatenate([sx, extra]), np.concatenate([sy, mechanism.sample_ids(extra, rng=rng)])
    prior = np.bincount(x_tr[keep], minlength=mechanism.n_words).astype(np.float64)
    inv = inversion_attack(mechanism, x_te, outputs=y_te, prior=prior, simulations=(sx, sy), method="sample", k=k)
    rec["inversion"] = {key: v for key, v in inv.as_dict().items() if key not in ("mechanism", "extra")}
    rec["inversion_s"] = time.time() - t
    if exact_inversion or (exact_inversion is None and has_exact_probabilities(mechanism)):
        t = time.time()
        inv = inversion_attack(mechanism, x_te, outputs=y_te, prior=prior, method="exact", k=k)
        rec["inversion_exact"] = {key: v for key, v in inv.as_dict().items() if key not in ("mechanism", "extra")}
        rec["inversion_exact_s"] = time.time() - t


def evaluate_mechanism(
    mechanism: Any,
    train_texts: Sequence[str],
    train_labels: Any,
    test_texts: Sequence[str],
    test_labels: Any,
    *,
    rng: RNGLike = None,
    attacks: Sequence[str] = ATTACKS,
    classifier: TextClassifier | None = None,
    min_simulations: int = 1_000_000,
    k: int = 5,
    samples: int = 0,
    audit_classifier: TextClassifier | None = None,
    exact_inversion: bool | None = None,
) -> dict[str, Any]:
    """Utility and attacks of one privatization of a labelled data set, as a JSON-ready dict.

    * Utility: ``classifier`` (default TF-IDF + logistic regression) trained on the privatized
      training texts, scored on the clean (``acc_clean``, ``f1_clean``) and the privatized
      (``acc_priv``, ``f1_priv``) test texts; ``changed_train``/``changed_test`` = fraction of
      word tokens replaced.
    * ``"membership"``: loss-threshold attack on that classifier, members = the clean training
      texts, non-members = the clean test texts (``mia``: AUC, DeLong interval, advantage).
    * ``"inversion"``: the adversary simulated the mechanism on the training tokens (repeated up
      to ``min_simulations`` draws) with their frequencies as prior, and inverts the privatized
      test tokens (``inversion``: top-1/top-k, rare words, Wilson intervals; see
      :func:`inversion_attack`, ``method="sample"`` for every mechanism so they are compared
      alike). Where the mechanism has closed-form probabilities also the Bayes-optimal adversary
      with the same prior (``inversion_exact``: ``method="exact"``, including the exact expected
      rates ``expected_top1`` …); ``exact_inversion=False`` skips it, ``True`` requires it.

    ``audit_classifier`` (e.g. ``TextClassifier(alpha=1e-7)``, barely regularized): a second
    model fitted on the same privatized training texts and attacked the same way (``mia_audit``)
    — a model that memorizes its training set, so that membership leakage, if the privatization
    lets any through, is measurable even where the utility model does not overfit.

    ``mechanism=None`` is the non-private baseline (utility and membership only). ``samples``
    stores that many privatized test texts (``sample``) for a later similarity step. Timings in
    seconds are included (``privatize_s``, ``fit_s``, ``inversion_s``, ``mia_s``, ``seconds``).
    """
    train_texts = _check_texts("train_texts", train_texts)
    test_texts = _check_texts("test_texts", test_texts)
    ytr = _check_labels("train_labels", train_labels, len(train_texts), "train_texts")
    yte = _check_labels("test_labels", test_labels, len(test_texts), "test_texts")
    unknown = sorted(set(attacks) - set(ATTACKS))
    if unknown:
        raise ValueError(f"unknown attack(s) {', '.join(unknown)}; known: {', '.join(ATTACKS)}")
    clf = classifier if classifier is not None else TextClassifier(tol=1e-6)
    t0 = time.time()
    rec: dict[str, Any] = {}
    # every text set is tokenized once and every feature matrix built once: the fit, the two
    # accuracies, words changed and the membership attack all reuse them
    tr_clean, te_clean = tokenize_texts(train_texts), tokenize_texts(test_texts)
    if mechanism is None:
        tr_fit, te_priv = tr_clean, te_clean
        Xtr_fit = clf.features.fit_transform(tr_fit)
        clf.model.fit(Xtr_fit, ytr)
        Xte_clean = clf.transform(te_clean)
        acc, f1 = classification_scores(yte, clf.model.predict(Xte_clean))
        rec.update(mechanism="none", epsilon=None, acc_clean=acc, f1_clean=f1, acc_priv=acc, f1_priv=f1, changed_train=0.0, changed_test=0.0)
        Xtr_clean = Xtr_fit
    else:
        g_tr, g_te, g_att = as_generator(rng).spawn(3)
        ptr, x_tr, y_tr = privatize_recording(mechanism, train_texts, rng=g_tr)
        pte, x_te, y_te = privatize_recording(mechanism, test_texts, rng=g_te)
        rec.update(mechanism=repr(mechanism), epsilon=float(mechanism.epsilon), privatize_s=time.time() - t0, words=int(x_tr.size + x_te.size))
        t = time.time()
        tr_fit, te_priv = tokenize_texts(ptr), tokenize_texts(pte)
        c1, n1 = words_changed(tr_clean, tr_fit)
        c2, n2 = words_changed(te_clean, te_priv)
        Xtr_fit = clf.features.fit_transform(tr_fit)
        clf.model.fit(Xtr_fit, ytr)
        Xte_clean = clf.transform(te_clean)
        acc_c, f1_c = classification_scores(yte, clf.model.predict(Xte_clean))
        acc_p, f1_p = classification_scores(yte, clf.predict(te_priv))
        Xtr_clean = None
        rec["fit_s"] = time.time() - t
        rec.update(acc_clean=acc_c, f1_clean=f1_c, acc_priv=acc_p, f1_priv=f1_p, changed_train=c1 / max(n1, 1), changed_test=c2 / max(n2, 1))
        if "inversion" in attacks:
            _inversion_attacks(rec, mechanism, (x_tr, y_tr), (x_te, y_te), g_att, min_simulations=min_simulations, k=k,
                               exact_inversion=exact_inversion)
        if samples:
            rec["sample"] = pte[:samples]
    if "membership" in attacks:
        t = time.time()
        if Xtr_clean is None:
            Xtr_clean = clf.transform(tr_clean)
        mia = membership_scores_result(clf, tr_clean, ytr, te_clean, yte, mechanism=mechanism, features=(Xtr_clean, Xte_clean))
        rec["mia"] = {key: v for key, v in mia.as_dict().items() if key != "mechanism"}
        if audit_classifier is not None:
            audit_classifier.fit(tr_fit, ytr)
            mia = membership_scores_result(audit_classifier, tr_clean, ytr, te_clean, yte, mechanism=mechanism)
            rec["mia_audit"] = {key: v for key, v in mia.as_dict().items() if key != "mechanism"}
        rec["mia_s"] = time.time() - t
    rec["n_train"], rec["n_test"] = len(train_texts), len(test_texts)
    rec["seconds"] = time.time() - t0
    return rec
