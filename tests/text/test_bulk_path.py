"""The bulk path (ASCII texts on one byte array) equals the per-token path byte for byte.

``_privatize_reference`` (one Python string per token) is the oracle: for a seed,
``privatize_texts`` must give the same texts, the same ``stats`` and ``privatized_per_text``, and
hand the mechanism the same ids, on a fuzzed ASCII corpus (every ASCII character, case patterns,
clitics, digits, underscores, long words, NUL, empty and whitespace-only texts), on mixed batches
(non-ASCII texts go token by token in the same ``sample_ids`` call) and on real texts, for several
mechanisms and every ``oov`` and ``case`` setting.
"""

import csv
import gzip
import warnings

import numpy as np
import pytest

import deniable
from deniable import Embedding, PrivacyWarning
from deniable.text import _bulk, privatize_texts, split_words
from deniable.text import privatize as privatize_module
from deniable.text.privatize import ObservedSampler, _privatize_reference
from deniable.text.tokenize import case_pattern

FRAGMENTS = [
    "'s", "'S", "n't", "N'T", "N't", "'re", "'RE", "'ll", "'ve", "'d", "'m", "'t", "'", "n", "t", "s", "re",
    " ", "  ", "\n", "\t", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", ".", ",", "!?", "(", ")", "-", "_", "__", "@", "#", "%", "$", "+", "~",
    "the", "The", "THE", "tHe", "cat", "Cat", "CAT", "i", "I", "a", "A", "don", "DON", "Don", "do", "x", "X", "NASA", "Paris", "McDonald",
    "42", "3.14", "1st", "A1", "a1", "_under_", "\x00", "\x7f", "beautiful", "Beautiful", "BEAUTIFUL", "extraordinarily", "EXTRAORDINARILY",
    "w" * 17, "Q" * 70, "z" * 65, "antidisestablishmentarianism",
]


def ascii_corpus(n: int, seed: int = 0) -> list[str]:
    """Texts of every ASCII character and the fragments above, with empty, whitespace-only and
    very long texts among them."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        r = rng.random()
        if r < 0.04:
            texts.append("")
            continue
        if r < 0.08:
            texts.append("".join(rng.choice([" ", "\t", "\n", "\r"], size=int(rng.integers(1, 6)))))
            continue
        k = int(rng.integers(1, 400 if r > 0.97 else 40))
        texts.append("".join(chr(int(rng.integers(0, 128))) if rng.random() < 0.35 else FRAGMENTS[int(rng.integers(len(FRAGMENTS)))] for _ in range(k)))
    return texts


@pytest.fixture(autouse=True)
def always_bulk(monkeypatch):
    """Every batch with an ASCII text takes the bulk path, however short."""
    monkeypatch.setattr(privatize_module, "BULK_MIN_CHARS", 0)


class Recorder:
    """A mechanism that records the ids it samples for, then samples with ``mechanism``."""

    def __init__(self, mechanism):
        self.mechanism = mechanism
        self.vocabulary = mechanism.vocabulary
        self.calls = []

    def sample_ids(self, ids, rng=None):
        self.calls.append(np.asarray(ids).copy())
        return self.mechanism.sample_ids(ids, rng=rng)


def assert_same(mechanism, texts, seed, oov="unk", case="preserve"):
    """Bulk and per-token paths agree on texts, stats, privatized_per_text and the ids sampled."""
    results = []
    for fn in (privatize_texts, _privatize_reference):
        rec, stats, per_text = Recorder(mechanism), {"words": 7}, []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            out = fn(rec, texts, rng=seed, oov=oov, case=case, stats=stats, privatized_per_text=per_text)
        results.append((out, stats, per_text, rec.calls))
    (out, stats, per_text, calls), (ref, ref_stats, ref_per_text, ref_calls) = results
    for a, b, t in zip(out, ref, texts):
        assert a == b, (t, a, b)
    assert out == ref and stats == ref_stats and per_text == ref_per_text
    assert len(calls) == len(ref_calls) <= 1
    assert all(np.array_equal(a, b) for a, b in zip(calls, ref_calls))


@pytest.fixture(scope="module")
def small_embedding():
    return deniable.load_embedding(limit=3000)


def test_bulk_tokens_are_split_words_tokens():
    texts = ascii_corpus(2000, seed=3)
    batch = _bulk.tokenize(texts)
    buf = batch.buf.tobytes().decode("ascii")
    tokens = [buf[a:b] for a, b in zip(batch.starts.tolist(), batch.ends.tolist())]
    first = np.concatenate(([0], np.cumsum(batch.counts)))
    for i, t in enumerate(texts):
        assert buf[batch.text_starts[i] : batch.text_ends[i]] == t
        assert tokens[first[i] : first[i + 1]] == split_words(t)[1::2], repr(t)
    codes = _bulk.case_codes(batch)
    assert [("lower", "title", "upper")[c] for c in codes.tolist()] == [case_pattern(w) for w in tokens]


def test_bulk_tokens_around_every_ascii_pair():
    chars = [chr(c) for c in range(128)]
    texts = [t for a in chars for b in chars for t in (f"x{a}'{b}s", f"x{a}n'{b}t{a}", f"n{a}'re{b}", f"{a}'s{b}n't", f"{a}{b}'ll")]
    batch = _bulk.tokenize(texts)
    buf = batch.buf.tobytes().decode("ascii")
    tokens = [buf[a:b] for a, b in zip(batch.starts.tolist(), batch.ends.tolist())]
    first = np.concatenate(([0], np.cumsum(batch.counts)))
    for i, t in enumerate(texts):
        assert tokens[first[i] : first[i + 1]] == split_words(t)[1::2], repr(t)


@pytest.mark.parametrize("name", ["custext", "knn_tem", "diffractor", "tem", "brr"])
def test_fuzzed_ascii_corpus_every_policy(name, small_embedding):
    mech = deniable.get_mechanism(name, epsilon=1.0) if name == "brr" else deniable.get_mechanism(name, small_embedding, epsilon=1.0)
    texts = ascii_corpus(600, seed=hash(name) % 1000)
    for seed, (oov, case) in enumerate([(o, c) for o in ("unk", "drop", "keep") for c in ("preserve", "lower")]):
        assert_same(mech, texts, seed, oov, case)


def test_mixed_batches_keep_text_order_and_one_call(small_embedding):
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    ascii_texts = ascii_corpus(200, seed=5)
    other = ["caf\u00e9 It\u2019s NA\u00cfVE", "\u00c9t\u00e9 don't", "\u039f\u0394\u039f\u03a3 the CAT", "na\u00efve's"]
    texts = [t for i, a in enumerate(ascii_texts) for t in ([a, other[i % 4]] if i % 7 == 0 else [a])]
    for seed, oov in enumerate(("unk", "drop", "keep")):
        assert_same(mech, texts, seed, oov)
    assert_same(mech, other, 9)  # no ASCII text: the per-token path


def test_cased_vocabulary_long_keys_clitic_tokens_and_non_ascii_outputs():
    """A cased vocabulary (raw look-ups, no case restoration) and an uncased one whose words are
    long (past 8 and 64 bytes), contain NUL, are clitics or their letters, or are not ASCII (their
    title and upper forms change length: ``ß`` -> ``SS``)."""
    long_word = "supercalifragilistic" * 4
    rng = np.random.default_rng(0)
    cased = ["The", "the", "cat", "'s", "n't", "do", "caf\u00e9", "Paris", "NASA", "extraordinarily", "Extraordinarily", long_word, "a\x00b"]
    uncased = ["the", "cat", "s", "nt", "'re", "do", "stra\u00dfe", "\u00e9t\u00e9", "\ufb01x", "extraordinarily", long_word, "a\x00b", "\u0131"]
    texts = ascii_corpus(300, seed=7) + ["The cat's; don't CAT'S Paris paris NASA nasa EXTRAORDINARILY Extraordinarily " + long_word + " " + long_word.upper() + " a\x00b A\x00B"] * 5
    for words in (cased, uncased):
        emb = Embedding(words, rng.standard_normal((len(words), 4)).astype(np.float32))
        mech = deniable.get_mechanism("tem", emb, epsilon=0.5)
        for seed, (oov, case) in enumerate([(o, c) for o in ("unk", "drop", "keep") for c in ("preserve", "lower")]):
            assert_same(mech, texts, seed, oov, case)


@pytest.mark.parametrize("name", ["custext", "diffractor", "santext"])
def test_real_texts(name, shared_data, small_embedding):
    texts = []
    with gzip.open(shared_data / "classification" / "sms_spam_collection.csv.gz", "rt", encoding="utf-8", newline="") as f:
        texts += [row["text"] for row in csv.DictReader(f)][:3000]
    with gzip.open(shared_data / "classification" / "imdb_50k.csv.gz", "rt", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        texts += [next(reader)["review"] for _ in range(300)]
    assert sum(t.isascii() for t in texts) > 0.9 * len(texts)
    mech = deniable.get_mechanism(name, small_embedding, epsilon=3.0)
    assert_same(mech, texts, 0)
    assert_same(mech, texts, 1, "drop", "lower")
    assert_same(mech, texts[:500], 2, "keep")


def test_the_bulk_path_is_taken_and_its_table_is_kept_with_the_vocabulary(small_embedding, monkeypatch):
    """Control for the tests above: ASCII batches never reach the per-token path, and the table
    is cached per vocabulary, never on the mechanism."""
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    before = dict(vars(mech))
    expected = _privatize_reference(mech, ["The cat sat."], rng=0)

    def fail(*args, **kwargs):
        raise AssertionError("per-token path used")

    monkeypatch.setattr(privatize_module, "_privatize_reference", fail)
    assert privatize_texts(mech, ["The cat sat."], rng=0) == expected
    assert _bulk.vocab_table(small_embedding) is _bulk._TABLES[small_embedding]
    assert vars(mech).keys() == before.keys()
    with pytest.raises(AssertionError, match="per-token"):  # token_outputs: the per-token path
        privatize_texts(mech, ["The cat sat."], rng=0, token_outputs=[])


def test_a_different_sample_is_detected(small_embedding):
    """Control: the comparison fails when the samples differ (another seed)."""
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    texts = ["the cat sat on the mat and the dog ran to the park " * 20]
    assert privatize_texts(mech, texts, rng=0) != _privatize_reference(mech, texts, rng=1)


def test_observed_sampler_and_unusual_vocabularies(small_embedding):
    seen = []
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    observed = ObservedSampler(mech, lambda ids, out: seen.append((ids, out)))
    texts = ascii_corpus(50, seed=11)
    assert privatize_texts(observed, texts, rng=4) == _privatize_reference(mech, texts, rng=4)
    assert len(seen) == 1 and seen[0][0].size == sum(len(split_words(t)) // 2 for t in texts)
    # a word that is not valid UTF-8 (lone surrogate): no table, the per-token path
    emb = Embedding(["the", "cat", "\ud800"], np.eye(3, dtype=np.float32))
    assert _bulk.vocab_table(emb) is None
    assert_same(deniable.get_mechanism("tem", emb, epsilon=1.0), ["the cat THE Cat dog"] * 3, 0)


def test_empty_batches_and_texts_without_words(small_embedding):
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    for texts in ([""], ["", "  ", "..."], ["", "\u00e9"]):
        assert_same(mech, texts, 0)
    assert privatize_texts(mech, [], rng=0) == []
    with pytest.raises(TypeError, match="strings"):
        privatize_texts(mech, ["ok", 3], rng=0)
