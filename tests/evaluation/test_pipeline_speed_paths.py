"""The fast paths of the evaluation pipeline give exactly what the plain ones give: the ASCII
tokenizer path, tokenizing once (TokenizedTexts), vectorized words_changed, the membership
attack from precomputed features, and inversion guesses computed per distinct output word."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.evaluation import TextClassifier, membership_scores_result
from deniable.evaluation.membership import example_losses
from deniable.evaluation.utility import BagOfWords, TokenizedTexts, tokenize_texts, tokens_of, words_changed
from deniable.text import lookup_key, words_of

MIXED = [
    "Hello, World! hello",
    "NASA's e-mail: Café déjà-vu",
    "ΑΣ'Α ΟΔΟΣ.",  # final sigma: lower-casing the whole text would differ from per word
    "cafe\u0301 CAFÉ",  # decomposed é: NFC per word
    "İstanbul ÉCOLE",
    "   ",
    "",
    "x_y 3.14 $5 😀ok",
    "It's A TEST--of <br /> tokens; 42!",
]


@pytest.mark.parametrize("text", MIXED)
def test_tokens_of_equals_per_word_lookup_keys(text):
    assert tokens_of(text) == [lookup_key(w, lower=True) for w in words_of(text)]


def test_ascii_fast_path_control_non_ascii_text_would_differ():
    """Control: for the final-sigma text, lower-casing the whole text is NOT the per-word key, so
    the fast path must stay restricted to ASCII (this is what the test above guards)."""
    t = "ΑΣ'Α"
    assert words_of(t.lower()) != [lookup_key(w, lower=True) for w in words_of(t)]


def _words_changed_reference(a, b):
    changed = total = 0
    for x, y in zip(a, b):
        ta, tb = tokens_of(x), tokens_of(y)
        m = min(len(ta), len(tb))
        total += len(ta)
        changed += sum(p != q for p, q in zip(ta[:m], tb[:m])) + (len(ta) - m)
    return changed, total


def test_words_changed_vectorized_equals_loop():
    rng = np.random.default_rng(0)
    vocab = ["a", "b", "c", "D", "e-mail", "ß"]
    a = [" ".join(rng.choice(vocab, size=rng.integers(0, 6))) for _ in range(300)]
    b = [" ".join(rng.choice(vocab, size=rng.integers(0, 6))) for _ in range(300)]
    assert words_changed(a, b) == _words_changed_reference(a, b)
    assert words_changed(tokenize_texts(a), tokenize_texts(b)) == _words_changed_reference(a, b)
    assert words_changed(a, a) == (0, sum(len(tokens_of(t)) for t in a))
    assert words_changed(["", "x"], ["y", ""]) == (1, 1)
    with pytest.raises(ValueError, match="privatized has 1"):
        words_changed(tokenize_texts(["a", "b"]), ["a"])


def test_tokenized_texts_give_the_same_features_and_fit():
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(["Alpha", "beta", "GAMMA", "déjà", "e-mail"], size=7)) for _ in range(120)]
    labels = rng.integers(0, 2, 120)
    tok = tokenize_texts(texts)
    assert isinstance(tok, TokenizedTexts) and tok.n_texts == 120 and tokenize_texts(tok) is tok
    b1, b2 = BagOfWords().fit(texts), BagOfWords()
    X2 = b2.fit_transform(tok)
    assert (b1.transform(texts) != X2).nnz == 0 and list(b1.vocabulary_) == list(b2.vocabulary_)
    c1 = TextClassifier(alpha=1e-3).fit(texts, labels)
    c2 = TextClassifier(alpha=1e-3).fit(tok, labels)
    np.testing.assert_array_equal(c1.model.coef_, c2.model.coef_)
    np.testing.assert_array_equal(c1.predict(texts), c2.predict(tok))


def test_membership_from_precomputed_features_is_identical():
    rng = np.random.default_rng(2)
    words = [f"w{i}" for i in range(200)]
    texts = [" ".join(rng.choice(words, size=10)) for _ in range(400)]
    labels = rng.integers(0, 2, 400)
    clf = TextClassifier(alpha=1e-6).fit(texts[:200], labels[:200])
    plain = membership_scores_result(clf, texts[:200], labels[:200], texts[200:], labels[200:])
    a, b = tokenize_texts(texts[:200]), tokenize_texts(texts[200:])
    fast = membership_scores_result(clf, a, labels[:200], b, labels[200:], features=(clf.transform(a), clf.transform(b)))
    assert plain == fast and plain.auc > 0.6 and plain.auc_ci[0] > 0.55  # memorized random labels: the attack sees it
    # losses = -log predict_proba of the true label; accuracy = predict
    P = clf.model.predict_proba(clf.transform(texts[:200]))
    np.testing.assert_allclose(example_losses(clf, texts[:200], labels[:200]), -np.log(P[np.arange(200), labels[:200]]))
    assert plain.train_accuracy == float(np.mean(clf.predict(texts[:200]) == labels[:200]))
    with pytest.raises(ValueError, match="rows"):
        membership_scores_result(clf, a, labels[:200], b, labels[200:], features=(clf.transform(b)[:10], clf.transform(b)))


def test_ascii_fast_path_on_every_pair_of_ascii_characters():
    for i in range(128):
        for j in range(128):
            s = f"a{chr(i)}B{chr(j)}c"
            assert tokens_of(s) == [lookup_key(w, lower=True) for w in words_of(s)], repr(s)
