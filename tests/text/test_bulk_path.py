"""The bulk path (texts on one UTF-8 byte array) equals the per-token path byte for byte.

``_privatize_reference`` (one Python string per token) is the oracle: for a seed,
``privatize_texts`` must give the same texts, the same ``stats`` and ``privatized_per_text``, and
hand the mechanism the same ids, on a fuzzed ASCII corpus (every ASCII character, case patterns,
clitics, digits, underscores, long words, NUL, empty and whitespace-only texts), on a fuzzed
Unicode corpus (letters with and without combining marks, NFC and NFD forms, case patterns,
final sigma, emoji with ZWJ, right-to-left scripts, both apostrophes, lone surrogates), around
every pair of characters, and on real texts, for several mechanisms and every ``oov`` and
``case`` setting.
"""

import csv
import gzip
import unicodedata
import warnings

import numpy as np
import pytest

import deniable
from deniable import Embedding, PrivacyWarning, _threads
from deniable.text import _bulk, _kernels, _vocab_table, privatize_texts, split_words
from deniable.text import privatize as privatize_module
from deniable.text.privatize import ObservedSampler, _privatize_reference
from deniable.text.tokenize import CLITICS, case_pattern, clitic_pattern

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


@pytest.fixture(autouse=True, params=["numpy", "compiled"])
def always_bulk(request, monkeypatch):
    """Every batch with an ASCII text takes the bulk path, however short; every test runs with
    the numpy loops and with the compiled ones (skipped without numba), these cutting every batch
    of several texts between three threads."""
    monkeypatch.setattr(privatize_module, "BULK_MIN_CHARS", 0)
    if request.param == "numpy":
        monkeypatch.setenv("DENIABLE_COMPILED", "0")
    elif _kernels.compiled() is None:
        pytest.skip("numba is not installed: no compiled text path")
    else:  # every batch of several texts cut between three threads
        monkeypatch.setattr(_bulk, "PARALLEL_MIN_TOKENS", 1)
        monkeypatch.setattr(_threads, "_THREADS", [3])
    return request.param


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


UNICODE_FRAGMENTS = [
    "'s", "N'T", "\u2019s", "\u2019S", "\u2019RE", "n\u2019t", "N\u2019T", "\u2019ll", "\u2019", "\u2018", "n", "t", "s", " ", "\n", "\u00a0", "\u3000",
    "\u2014", "\u201c", "\u201d", "\u2026", "caf\u00e9", "Caf\u00e9", "CAF\u00c9", "cafe\u0301", "\u00c9t\u00e9", "na\u00efve", "NA\u00cfVE",
    "\u039f\u0394\u039f\u03a3", "\u03bf\u03b4\u03bf\u03c2", "\u03a3", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f600", "\u05e9\u05dc\u05d5\u05dd",
    "\u0627\u0644\u0633\u0644\u0627\u0645", "\u200f", "\u00df", "stra\u00dfe", "STRASSE", "\u0130stanbul", "\u0131", "\ufb01x", "\u01c5", "\u2160", "\u03d2", "\u00bd",
    "the", "The", "THE", "don", "DON", "NASA", "Paris", "I", "a", "extraordinarily", "Extraordinarily", "$5", "42", "\x00", "\u00e9" * 70,
]


def unicode_corpus(n: int, seed: int = 0, surrogates: bool = False) -> list[str]:
    """Texts of Unicode characters (Latin, combining marks, Greek, Hebrew, Arabic, punctuation,
    emoji) and the fragments above, a fifth of them in NFD; with ``surrogates``, some with a lone
    surrogate."""
    rng = np.random.default_rng(seed)
    pool = [*range(0x20, 0x7F), *range(0xA0, 0x250), *range(0x300, 0x370), *range(0x370, 0x400), *range(0x590, 0x600), *range(0x600, 0x650), 0x2019, 0x2018, 0x200D, 0x1F600, 9, 10]
    texts = []
    for _ in range(n):
        k = int(rng.integers(0, 40))
        t = "".join(chr(int(rng.choice(pool))) if rng.random() < 0.4 else UNICODE_FRAGMENTS[int(rng.integers(len(UNICODE_FRAGMENTS)))] for _ in range(k))
        if surrogates and rng.random() < 0.03:
            t += "\ud800"
        texts.append(unicodedata.normalize("NFD", t) if rng.random() < 0.2 else t)
    return texts


def assert_bulk_tokens(texts):
    """The bulk tokenizer's tokens, case codes, clitic kinds and non-ASCII tokens equal the
    per-token path's on ``texts``."""
    batch = _bulk.tokenize(texts)
    raw = batch.buf.tobytes()
    tokens = [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(batch.starts.tolist(), batch.ends.tolist())]
    first = np.concatenate(([0], np.cumsum(batch.counts)))
    for i, t in enumerate(texts):
        assert raw[batch.text_starts[i] : batch.text_ends[i]].decode("utf-8", "surrogatepass") == t
        assert tokens[first[i] : first[i + 1]] == split_words(t)[1::2], repr(t)
    codes = _bulk.case_codes(batch)
    assert [("lower", "title", "upper")[c] for c in codes.tolist()] == [case_pattern(w) for w in tokens]
    is_clitic = [clitic_pattern().fullmatch(w) is not None for w in tokens]
    assert batch.clitic.tolist() == [(2 if "\u2019" in w else 1) if c else 0 for w, c in zip(tokens, is_clitic)]
    assert batch.kind.tolist() == [CLITICS.index(w.lower().replace("\u2019", "'")) if c else -1 for w, c in zip(tokens, is_clitic)]
    assert batch.wide.tolist() == [j for j, w in enumerate(tokens) if not w.isascii()]
    assert batch.wide_tokens == [w for w in tokens if not w.isascii()]


def test_bulk_tokens_are_split_words_tokens():
    assert_bulk_tokens(ascii_corpus(2000, seed=3))
    assert_bulk_tokens(unicode_corpus(2000, seed=3, surrogates=True))


def test_bulk_tokens_around_every_pair_of_characters():
    """Every pair of ASCII characters, and every pair of an ASCII character and a non-ASCII one
    (apostrophes, letters, a combining mark, spaces, punctuation, emoji, RTL), around clitics
    written with either apostrophe."""
    ascii_chars = [chr(c) for c in range(128)]
    others = ["\u2019", "\u00e9", "\u00c9", "\u0301", "\u00a0", "\u3000", "\U0001f600", "\u200d", "\u03c2", "\u03a3", "\u05d0", "\u200f", "\u201c", "\u2014", "\u0130", "\u00df"]
    texts = [t for a in ascii_chars for b in ascii_chars for t in (f"x{a}'{b}s", f"x{a}n'{b}t{a}", f"n{a}'re{b}", f"{a}'s{b}n't", f"{a}{b}'ll")]
    assert_bulk_tokens(texts)
    pairs = [(a, b) for a in ascii_chars + others for b in others] + [(a, b) for a in others for b in ascii_chars]
    texts = [t for a, b in pairs for q in ("'", "\u2019") for t in (f"x{a}{q}{b}s", f"x{a}n{q}{b}t{a}", f"n{a}{q}re{b}", f"{a}{q}s{b}n{q}t", f"{a}{b}{q}ll", f"{b}n{q}T{a}")]
    assert_bulk_tokens(texts)


@pytest.mark.parametrize("name", ["custext", "knn_tem", "diffractor", "tem", "brr"])
def test_fuzzed_ascii_corpus_every_policy(name, small_embedding):
    mech = deniable.get_mechanism(name, epsilon=1.0) if name == "brr" else deniable.get_mechanism(name, small_embedding, epsilon=1.0)
    texts = ascii_corpus(600, seed=hash(name) % 1000)
    for seed, (oov, case) in enumerate([(o, c) for o in ("unk", "drop", "keep") for c in ("preserve", "lower")]):
        assert_same(mech, texts, seed, oov, case)


@pytest.mark.parametrize("name", ["custext", "knn_tem", "diffractor", "tem", "brr"])
def test_fuzzed_unicode_corpus_every_policy(name, small_embedding):
    mech = deniable.get_mechanism(name, epsilon=1.0) if name == "brr" else deniable.get_mechanism(name, small_embedding, epsilon=1.0)
    texts = unicode_corpus(500, seed=hash(name) % 1000, surrogates=True)
    assert any("\ud800" in t for t in texts)
    for seed, (oov, case) in enumerate([(o, c) for o in ("unk", "drop", "keep") for c in ("preserve", "lower")]):
        assert_same(mech, texts, seed, oov, case)


def test_every_pair_of_characters_privatizes_like_the_reference(small_embedding):
    others = ["\u2019", "\u00e9", "\u00c9", "\u0301", "\u00a0", "\U0001f600", "\u03a3", "\u05d0", "\u201c", "\u0130"]
    chars = [chr(c) for c in range(128)] + others
    texts = [t for a in chars for b in others for q in ("'", "\u2019") for t in (f"x{a}{q}{b}s the{b}", f"Don{q}t{a}{b}CAT{q}S", f"{b}{a}{q}re {a}NASA{b}")]
    mech = deniable.get_mechanism("tem", small_embedding, epsilon=1.0)
    assert_same(mech, texts, 0)
    assert_same(mech, texts, 1, "keep", "lower")


def test_mixed_batches_keep_text_order_and_one_call(small_embedding):
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    ascii_texts = ascii_corpus(200, seed=5)
    other = ["caf\u00e9 It\u2019s NA\u00cfVE", "\u00c9t\u00e9 don't \ud800", "\u039f\u0394\u039f\u03a3 the CAT", "na\u00efve's \udfff x"]
    texts = [t for i, a in enumerate(ascii_texts) for t in ([a, other[i % 4]] if i % 7 == 0 else [a])]
    for seed, oov in enumerate(("unk", "drop", "keep")):
        assert_same(mech, texts, seed, oov)
    assert_same(mech, other, 9)  # no ASCII text


def test_cased_vocabulary_long_keys_clitic_tokens_and_non_ascii_outputs():
    """A cased vocabulary (raw look-ups, no case restoration) and an uncased one whose words are
    long (past 8 and 64 bytes), contain NUL, are clitics or their letters, or are not ASCII (their
    title and upper forms change length: ``ß`` -> ``SS``)."""
    long_word = "supercalifragilistic" * 4
    rng = np.random.default_rng(0)
    cased = ["The", "the", "cat", "'s", "n't", "do", "caf\u00e9", "Paris", "NASA", "extraordinarily", "Extraordinarily", long_word, "a\x00b"]
    uncased = ["the", "cat", "s", "nt", "'re", "do", "stra\u00dfe", "\u00e9t\u00e9", "\ufb01x", "extraordinarily", long_word, "a\x00b", "\u0131"]
    texts = ascii_corpus(300, seed=7) + unicode_corpus(200, seed=7) + ["The cat's; don't CAT'S Paris paris NASA nasa EXTRAORDINARILY Extraordinarily " + long_word + " " + long_word.upper() + " a\x00b A\x00B"] * 5
    texts += ["caf\u00e9 Caf\u00e9 cafe\u0301 CAF\u00c9 STRA\u00dfE stra\u00dfe \u00e9t\u00e9 \u00c9T\u00c9 \ufb01x \u0130 \u0131 it\u2019s DON\u2019T"] * 5
    for words in (cased, uncased):
        emb = Embedding(words, rng.standard_normal((len(words), 4)).astype(np.float32))
        mech = deniable.get_mechanism("tem", emb, epsilon=0.5)
        for seed, (oov, case) in enumerate([(o, c) for o in ("unk", "drop", "keep") for c in ("preserve", "lower")]):
            assert_same(mech, texts, seed, oov, case)


def test_vocabularies_without_ascii_keys_and_without_packed_spans(monkeypatch):
    """A vocabulary of non-ASCII words only (every look-up one by one, every output rendered),
    and the output path that reads word starts and lengths separately."""
    words = ["caf\u00e9", "\u00e9t\u00e9", "na\u00efve", "\u03bf\u03b4\u03bf\u03c2", "stra\u00dfe"]
    emb = Embedding(words, np.random.default_rng(2).standard_normal((len(words), 4)).astype(np.float32))
    texts = ["The CAT the"] + unicode_corpus(150, seed=11) + ["CAF\u00c9 cafe\u0301 \u00c9t\u00e9 the cat"] * 5  # (the first token rendered)
    for seed, oov in enumerate(("unk", "drop", "keep")):
        assert_same(deniable.get_mechanism("tem", emb, epsilon=1.0), texts, seed, oov)
    emb = deniable.load_embedding(limit=500)
    monkeypatch.setattr(_vocab_table.vocab_table(emb), "word_span", None)
    assert_same(deniable.get_mechanism("tem", emb, epsilon=1.0), ascii_corpus(200, seed=12) + unicode_corpus(100, seed=12), 0)


def test_non_ascii_characters_past_the_eighth_byte():
    """A token whose first 8 bytes are ASCII and a later one is not is looked up and cased as
    the per-token path does (NFC, its own case pattern), never as an ASCII token."""
    words = ["the", "internationale\u0301", "internationalit\u00e9", "extraordinarily", "cat"]
    emb = Embedding(words, np.random.default_rng(4).standard_normal((len(words), 4)).astype(np.float32))
    texts = ["Internationalit\u00e9 INTERNATIONALIT\u00c9 internationalit\u00e9 internationalite\u0301 EXTRAORDINARILY\u00e9 Extraordinarily\u00c9 the"] * 20
    assert_same(deniable.get_mechanism("tem", emb, epsilon=1.0), texts, 0)
    table = _vocab_table.VocabTable(emb)
    ids = _bulk.scan(table, texts, lower=True)[1].reshape(20, -1)
    assert (ids[:, :4] == words.index("internationalit\u00e9")).all()


def test_clitic_places_in_small_and_large_batches(small_embedding):
    """A clitic's place gets the sampled word after a space, or as a clitic: from all of the
    vocabulary's bytes (a large batch) or from those of the words used (a small one)."""
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=0.5)
    text = "It's the cat's; don't CAT'S it\u2019s DON\u2019T we'll I'M They'RE Bob's"
    table = _vocab_table.vocab_table(small_embedding)
    for texts in ([text], [text] * 2000):
        assert (table.word_bytes.size > 4 * len(" ".join(texts))) == (len(texts) == 1)
        for seed in range(5):
            assert_same(mech, texts, seed)
            assert_same(mech, texts, seed, "drop", "lower")


def test_long_keys_sharing_a_hash_never_take_another_words_id(monkeypatch, always_bulk):
    """Long keys are found by a 64-bit hash of their bytes, then compared byte for byte. With a
    weak hash (the first 8 bytes), keys collide with each other (they are looked up one by one)
    and with other tokens (the comparison rejects them); the control shows that the hash alone
    would have given a wrong id. (The compiled look-up hashes with the compiled row hash; its
    collisions are tested below.)"""
    if always_bulk == "compiled":
        pytest.skip("a patched row_hash reaches the numpy look-up only")
    monkeypatch.setattr(_vocab_table, "row_hash", lambda columns: columns[0] | np.uint64(1))
    words = ["the", "extraordinary", "extraordinarily", "internationally", "characteristic", "a" * 70, "cat"]
    emb = Embedding(words, np.random.default_rng(1).standard_normal((len(words), 4)).astype(np.float32))
    table = _vocab_table.vocab_table(emb)
    assert table.shared_hashes.size == 1 and table.one_by_one
    texts = ["Extraordinary extraordinarily internationalist INTERNATIONALLY characteristics characteristic " + "A" * 70 + " " + "a" * 71 + " the"] * 40
    batch = _bulk.tokenize(texts)
    tokens = [t.lower() for t in split_words(texts[0])[1::2]] * 40
    assert _bulk.lookup(table, batch, lower=True).tolist() == emb.ids_of(tokens).tolist()
    assert_same(deniable.get_mechanism("tem", emb, epsilon=1.0), texts, 0)
    # control: without the comparison, "internationalist" would be "internationally"
    columns = list(_vocab_table.pack_keys([b"internationalist"], table.width).T)
    assert table.long_ids[table.long.find(_vocab_table.row_hash(columns))[0]] == words.index("internationally")
    assert table.find_long(columns)[0].tolist() == [-1]


def test_compiled_long_look_up_on_colliding_hashes(always_bulk):
    """The compiled look-up of long tokens hashes as ``row_hash`` does, compares the bytes of the
    row its hash finds (a token whose hash finds another key's row is unknown), and leaves a
    token whose hash several keys share to the one-by-one look-up."""
    if always_bulk == "numpy":
        pytest.skip("the compiled look-up")
    words = ["the", "extraordinary", "internationally", "characteristic", "cat"]
    emb = Embedding(words, np.random.default_rng(1).standard_normal((len(words), 4)).astype(np.float32))
    table = _vocab_table.VocabTable(emb)
    texts = ["Internationalist internationally INTERNATIONALLY extraordinary characteristics the"] * 30
    tokens = [t.lower() for t in split_words(texts[0])[1::2]] * 30
    assert _bulk.scan(table, texts, lower=True)[1].tolist() == emb.ids_of(tokens).tolist()
    # the hash of "internationalist" now finds the row of "internationally": rejected by the bytes
    (h,) = _vocab_table.row_hash(list(_vocab_table.pack_keys([b"internationalist"], table.width).T))
    row = int(np.flatnonzero(table.long_ids == words.index("internationally"))[0])
    table.long_rows, table.long_ids = table.long_rows[[row]], table.long_ids[[row]]
    table.long = _vocab_table.HashTable(np.array([h]), np.array([0]))
    ids = _bulk.scan(table, texts, lower=True)[1].reshape(30, -1)
    assert (ids[:, 0] == -1).all() and (ids[:, 1] == -1).all()  # neither key's hash is its own now
    # a hash shared by keys: one by one, so "internationalist" is looked up by name
    table.shared_hashes = np.array([h])
    ids = _bulk.scan(table, texts, lower=True)[1].reshape(30, -1)
    assert (ids[:, 0] == -1).all()
    emb2 = Embedding(words + ["internationalist"], np.zeros((len(words) + 1, 4), dtype=np.float32))
    table.ids_of = emb2.ids_of
    ids = _bulk.scan(table, texts, lower=True)[1].reshape(30, -1)
    assert (ids[:, 0] == len(words)).all()


def test_compiled_row_hash_is_row_hash(always_bulk):
    """The compiled look-up and the tables hash with the same functions."""
    if always_bulk == "numpy":
        pytest.skip("the compiled look-up")
    rows = np.random.default_rng(3).integers(0, 2**63, size=(200, 4), dtype=np.uint64)
    expected = _vocab_table.row_hash(list(rows.T))
    for r, e in zip(rows, expected.tolist()):
        h = r[0]
        for x in r[1:]:
            h = np.uint64(_kernels._hash_step(h, x))  # (a compiled function returns a Python int)
        assert int(_kernels._hash_finish(h)) == e


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

    monkeypatch.setattr(privatize_module, "_per_token", fail)
    assert privatize_texts(mech, ["The cat sat."], rng=0) == expected
    assert _bulk.vocab_table(small_embedding) is _vocab_table._TABLES[small_embedding]
    assert vars(mech).keys() == before.keys()
    with pytest.raises(AssertionError, match="per-token"):  # token_outputs: the per-token path
        privatize_texts(mech, ["The cat sat."], rng=0, token_outputs=[])


def test_every_text_of_a_large_batch_takes_the_bulk_path(small_embedding, monkeypatch):
    """Control for the Unicode tests: no text of a batch is split token by token, not even one
    with a lone surrogate."""
    mech = deniable.get_mechanism("custext", small_embedding, epsilon=1.0)
    texts = ["caf\u00e9 It\u2019s NA\u00cfVE \U0001f600", "\u039f\u0394\u039f\u03a3 the CAT", "bad \ud800 text"]
    expected = _privatize_reference(mech, texts, rng=0)
    split = []
    monkeypatch.setattr(privatize_module, "split_words", lambda t: split.append(t) or split_words(t))
    assert privatize_texts(mech, texts, rng=0) == expected
    assert split == []
    assert privatize_texts(mech, texts, rng=0, token_outputs=[]) == expected  # the per-token path
    assert split == texts


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
