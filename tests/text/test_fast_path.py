"""The bulk text path equals the reference tokenizer and a token-by-token privatization.

``word_pattern().split`` (the clitic-aware regular expression) is the reference tokenizer:
``split_words``, ``words_of`` and ``keys_of`` must give exactly its result on a fuzzed corpus
(Unicode letters and marks, NFC and NFD forms, case patterns, final sigma, emoji with ZWJ,
right-to-left scripts, apostrophes and clitics). ``privatize_texts`` must give, for a seed, the
output of the reference privatization below (token by token with the reference tokenizer, one
``sample_ids`` call on the same ids), for real mechanisms.
"""

import sys
import unicodedata
import warnings

import numpy as np
import pytest

import deniable
from deniable import Embedding, PrivacyWarning
from deniable.text import apply_case, case_pattern, privatize_texts, split_words, words_of
from deniable.text.tokenize import _is_word_char, clitic_form, clitic_pattern, keys_of, lookup_key, word_class, word_pattern

FRAGMENTS = [
    "'s", "'S", "n't", "N'T", "\u2019s", "\u2019RE", "'re", "'ll", "'ve", "'d", "'m", "'", "\u2019", "n", "t", "s",
    " ", "  ", "\n", "\t", "\u00a0", "\u3000", ".", ",", "!?", "\u2014", "\u201c", "\u201d", "(", ")", "-", "_",
    "don", "DON", "Don", "x", "caf\u00e9", "cafe\u0301", "\u039f\u0394\u039f\u03a3", "\u03bf\u03b4\u03bf\u03c2", "\u03a3",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f600", "\u05e9\u05dc\u05d5\u05dd", "\u0627\u0644\u0633\u0644\u0627\u0645", "\u200f",
    "NASA", "Paris", "i", "I", "42", "$5", "\u00df", "\u0130stanbul", "\ufb01", "\u01c5", "\u2160", "\ud800",
]


def fuzzed_corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    pool = np.array([*range(0x20, 0x7F), *range(0xA0, 0x250), *range(0x300, 0x370), *range(0x370, 0x400), *range(0x590, 0x600), *range(0x600, 0x650), 0x2019, 0x2018, 0x200D, 0x1F600, 9, 10])
    texts = []
    for _ in range(n):
        k = int(rng.integers(0, 40))
        pieces = [chr(int(c)) if rng.random() < 0.5 else FRAGMENTS[int(rng.integers(len(FRAGMENTS)))] for c in rng.choice(pool, size=k)]
        t = "".join(pieces)
        texts.append(unicodedata.normalize("NFD", t) if rng.random() < 0.2 else t)
    return texts


def test_tokenizer_equals_the_reference_pattern_on_a_fuzzed_corpus():
    reference = word_pattern().split
    for t in fuzzed_corpus(3000):
        parts = reference(t)
        assert split_words(t) == parts, repr(t)
        assert words_of(t) == parts[1::2], repr(t)
        for lower in (True, False):
            assert keys_of(t, lower=lower) == [lookup_key(w, lower=lower) for w in parts[1::2]], repr(t)


def test_tokenizer_equals_the_reference_pattern_around_every_ascii_pair():
    reference = word_pattern().split
    chars = [chr(c) for c in range(128)] + ["\u2019", "\u00e9", "\u0301", "\u00a0", "\U0001f600", "\u03c2", "\u05d0", "\u201c", "\u2014"]
    for a in chars:
        for b in chars:
            for t in (f"x{a}'{b}s", f"x{a}n'{b}t{a}", f"n{a}'re{b}", f"{a}'s{b}n't"):
                assert split_words(t) == reference(t), repr(t)


def test_word_characters_are_the_reference_class_for_every_code_point():
    """_is_word_char (the clitic checks) and the \\s of the run patterns against the reference
    class, over all of Unicode."""
    cls = __import__("re").compile(word_class())
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        assert _is_word_char(ch) == (cls.fullmatch(ch) is not None), hex(cp)


def reference_privatize(mechanism, texts, rng, oov="unk", case="preserve"):
    """Token by token with the reference tokenizer: the vocabulary key of each token, one
    ``sample_ids`` call on all ids, each output word rendered on its own."""
    vocab = mechanism.vocabulary
    preserve = vocab.uncased and case == "preserve"
    parts_list = [word_pattern().split(t) for t in texts]
    tokens = [w for p in parts_list for w in p[1::2]]
    ids = []
    for w in tokens:
        if clitic_pattern().fullmatch(w):
            k = w.lower().replace("\u2019", "'")
            i = int(vocab.ids_of([k])[0])
            ids.append(i if i >= 0 else int(vocab.ids_of([k.replace("'", "")])[0]))
        else:
            ids.append(int(vocab.ids_of([lookup_key(w, lower=vocab.uncased)])[0]))
    ids = np.array(ids, dtype=np.int64)
    sample = ids >= 0 if oov != "unk" else np.ones(len(ids), dtype=bool)
    chosen = iter(np.asarray(mechanism.sample_ids(ids[sample], rng=rng)).tolist()) if sample.any() else iter(())
    outs = []
    for w, s in zip(tokens, sample.tolist()):
        if not s:
            outs.append(w if oov == "keep" else "")
            continue
        new = vocab.words[next(chosen)]
        pattern = case_pattern(w) if preserve else "lower"
        if clitic_pattern().fullmatch(w):
            form = clitic_form(new, "\u2019" if "\u2019" in w else "'")
            outs.append(apply_case(form, pattern) if form is not None else " " + apply_case(new, pattern))
        else:
            outs.append(apply_case(new, pattern))
    out, k = [], 0
    for p in parts_list:
        n = len(p) // 2
        p[1::2] = outs[k : k + n]
        k += n
        out.append("".join(p))
    return out


@pytest.fixture(scope="module")
def corpus():
    from pathlib import Path

    sample = (Path(__file__).resolve().parents[2] / "examples" / "sample.txt").read_text(encoding="utf-8").splitlines()
    return sample + ["I'm sure they DON'T mind; it\u2019s fine. NASA, Paris!"] + fuzzed_corpus(150, seed=1)


@pytest.fixture(scope="module")
def small_embedding():
    return deniable.load_embedding(limit=3000)  # the 3,000 most frequent words: fast to build


@pytest.mark.parametrize("name", ["custext", "knn_tem", "diffractor", "tem", "santext", "brr"])
def test_samples_for_a_seed_equal_the_reference_privatization(name, corpus, small_embedding):
    mech = deniable.get_mechanism(name, epsilon=3.0) if name == "brr" else deniable.get_mechanism(name, small_embedding, epsilon=3.0)
    for seed, oov, case in [(0, "unk", "preserve"), (1, "drop", "preserve"), (2, "unk", "lower"), (3, "keep", "preserve")]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            assert privatize_texts(mech, corpus, rng=seed, oov=oov, case=case) == reference_privatize(mech, corpus, seed, oov, case), (seed, oov, case)


def test_cased_vocabulary_and_clitic_tokens_equal_the_reference():
    """A cased vocabulary (keys are not lower-cased, no case restoration) with clitic tokens."""
    words = ["The", "the", "cat", "'s", "n't", "do", "caf\u00e9", "\u03bf\u03b4\u03bf\u03c2", "Paris"]
    emb = Embedding(words, np.random.default_rng(0).standard_normal((len(words), 4)).astype(np.float32))
    assert not emb.uncased
    mech = deniable.get_mechanism("tem", emb, epsilon=2.0)
    texts = ["The cat's; don't CAT\u2019S caf\u00e9 cafe\u0301 \u039f\u0394\u039f\u03a3 \u03bf\u03b4\u03bf\u03c2 Paris paris"] * 3 + fuzzed_corpus(50, seed=2)
    for seed in range(3):
        assert privatize_texts(mech, texts, rng=seed) == reference_privatize(mech, texts, seed)


def test_reference_privatization_detects_a_changed_sample(small_embedding):
    """Control: the comparison fails when one token's output differs (a different seed)."""
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    texts = ["the cat sat on the mat and the dog ran to the park " * 20]
    assert privatize_texts(mech, texts, rng=0) != reference_privatize(mech, texts, 1)
