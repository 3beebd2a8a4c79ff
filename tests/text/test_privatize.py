"""Text in, text out: layout, case, and the out-of-vocabulary policy (property tests)."""

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deniable import Embedding, Madlib, PrivacyWarning
from deniable.text import apply_case, case_pattern, privatize_texts, split_words
from deniable.text.tokenize import clitic_pattern

VOCAB = ["the", "cat", "sat", "on", "mat", "paris", "nasa", "i", "a", "42"]
EMB = Embedding(VOCAB, np.random.default_rng(0).standard_normal((len(VOCAB), 4)).astype(np.float32))
NOISY = Madlib(EMB, epsilon=0.5)
IDENTITY = Madlib(EMB, epsilon=1e8)

word = st.one_of(st.sampled_from(VOCAB + [w.upper() for w in VOCAB] + [w.title() for w in VOCAB]), st.from_regex(r"[A-Za-zé]{1,8}", fullmatch=True))
sep = st.text(alphabet=" \t\n.,;:!?'\"()-–…€✓", min_size=0, max_size=4)
texts = st.lists(st.tuples(sep, word), max_size=12).map(lambda xs: "".join(s + w for s, w in xs)) | st.text(max_size=60)


def separators(t: str) -> list[str]:
    return split_words(t)[0::2]


def is_separator_char(c: str) -> bool:
    return c.isspace() or unicodedata.category(c).startswith("P")


@settings(deadline=None)
@given(st.text(max_size=200))
def test_split_join_identity(t):
    parts = split_words(t)
    assert "".join(parts) == t
    assert all(w and not any(is_separator_char(c) for c in w) for w in parts[1::2])
    assert all(is_separator_char(c) for sep in parts[0::2] for c in sep)


@settings(max_examples=150, deadline=None)
@given(st.lists(texts, min_size=1, max_size=4), st.sampled_from(["unk", "drop"]), st.integers(0, 2**32 - 1))
def test_no_out_of_vocabulary_word_and_layout_kept(batch, oov, seed):
    out = privatize_texts(NOISY, batch, rng=seed, oov=oov)
    assert len(out) == len(batch)
    for src, dst in zip(batch, out):
        # every output word is a vocabulary word: nothing from the input leaks unless sampled,
        # and what passes through is only whitespace and punctuation
        assert all(w.lower() in VOCAB for w in split_words(dst)[1::2])
        assert all(is_separator_char(c) for sep in separators(dst) for c in sep)
        if oov == "unk":
            # a clitic's place gets a sampled word after a space (no clitic letters in VOCAB)
            parts = split_words(src)
            seps = [" " if i + 1 < len(parts) and clitic_pattern().fullmatch(parts[i + 1]) else parts[i] for i in range(0, len(parts), 2)]
            assert separators(dst) == seps
            assert len(split_words(dst)) == len(split_words(src))
        else:
            assert "".join(separators(dst)) == "".join(separators(src))


def test_identity_mechanism_keeps_text_and_case():
    text = "The CAT sat on a Mat; Paris, NASA: I 42!"
    assert IDENTITY.privatize(text, rng=0) == text


def test_oov_policies():
    text = "the zebra sat"
    unk = IDENTITY.privatize(text, rng=0)
    assert "zebra" not in unk and len(unk.split()) == 3
    assert IDENTITY.privatize(text, rng=0, oov="drop") == "the  sat"
    with pytest.warns(PrivacyWarning, match="1 out-of-vocabulary"):
        assert IDENTITY.privatize(text, rng=0, oov="keep") == text
    with pytest.raises(ValueError, match="oov must be one of"):
        IDENTITY.privatize(text, oov="pass")


def test_unknown_words_are_privatized_as_one_point():
    """All unknown words share the UNK point: their outputs have the same distribution."""
    out = privatize_texts(NOISY, ["qwerty"] * 3000 + ["zxcvb"] * 3000, rng=1)
    a = np.bincount([VOCAB.index(w) for w in out[:3000]], minlength=len(VOCAB))
    b = np.bincount([VOCAB.index(w) for w in out[3000:]], minlength=len(VOCAB))
    from scipy.stats import chi2_contingency

    keep = (a + b) > 0
    assert chi2_contingency(np.stack([a[keep], b[keep]])).pvalue > 1e-4


def test_case_patterns():
    assert [case_pattern(t) for t in ["abc", "Abc", "ABC", "I", "aBC", "1a"]] == ["lower", "title", "upper", "title", "lower", "lower"]
    assert apply_case("paris", "title") == "Paris" and apply_case("nasa", "upper") == "NASA"


def test_str_and_list_and_stats():
    assert isinstance(IDENTITY.privatize("the cat"), str)
    assert IDENTITY.privatize(["the cat", "", "..."], rng=0) == ["the cat", "", "..."]
    stats = {}
    privatize_texts(IDENTITY, ["the cat", "foo bar"], rng=0, stats=stats)
    assert stats == {"words": 4, "unknown": 2, "in_vocabulary": 2, "changed": 0}
    for oov, want in (("unk", [2, 2, 0]), ("drop", [2, 0, 0])):
        counts = []
        privatize_texts(IDENTITY, ["the cat", "foo bar", "..."], rng=0, oov=oov, privatized_per_text=counts)
        assert counts == want
    with pytest.raises(TypeError, match="strings"):
        IDENTITY.privatize([b"bytes"])


def test_cased_vocabulary_lookup_is_exact():
    emb = Embedding(["Paris", "paris", "the"], np.eye(3, dtype=np.float32) * 10)
    mech = Madlib(emb, epsilon=1e8)
    assert not emb.uncased
    assert mech.privatize("Paris paris PARIS", rng=0, oov="drop") == "Paris paris "


@pytest.mark.parametrize(
    "text",
    [
        "\u24d9\u24de\u24d7\u24dd lives here",  # a name in enclosed letters (category So)
        "\U0001f179\U0001f17e\U0001f177\U0001f17d",  # negative squared letters
        "\u0928\u092e\u0938\u094d\u0924\u0947",  # Devanagari with virama and vowel sign (Mn/Mc)
        "cafe\u0301 and na\u0308ive",  # decomposed accents
        "snake_case $5 C++ \U0001f600 a\u200db",  # underscore is punctuation; symbols, emoji, ZWJ are word material
    ],
)
def test_no_word_material_passes_through(text):
    """Marks, symbols and format characters belong to words, which are privatized: only
    whitespace and punctuation reach the output unchanged."""
    out = privatize_texts(NOISY, [text], rng=0)[0]
    leaked = [c for c in out if not is_separator_char(c) and not c.isascii()]
    assert not leaked, (text, out)
    assert all(w.lower() in VOCAB for w in split_words(out)[1::2])


def test_nfc_lookup():
    emb = Embedding(["café", "naïve"], np.eye(2, dtype=np.float32) * 10)
    mech = Madlib(emb, epsilon=1e8)
    assert mech.privatize("cafe\u0301 NAI\u0308VE", rng=0) == "café NAÏVE"
    assert mech.id_of("Cafe\u0301") == 0


def test_case_lower_option():
    assert IDENTITY.privatize("The CAT sat", rng=0, case="lower") == "the cat sat"
    with pytest.raises(ValueError, match="case must be one of"):
        IDENTITY.privatize("x", case="upper")


def test_runtime_tokenizer_is_the_library_tokenizer():
    from deniable import brr_runtime
    from deniable.text import word_pattern

    assert brr_runtime.word_pattern().pattern == word_pattern().pattern


def test_summary_counts_changed_and_unknown_words():
    text = "the cat sat on the mat foo bar"
    _, s = IDENTITY.privatize(text, rng=0, return_summary=True)
    assert (s.words, s.in_vocabulary, s.unknown, s.changed) == (8, 6, 2, 0)
    assert s.fraction_unknown == 0.25 and s.fraction_changed == 0.0
    assert "0.0% of in-vocabulary words changed" in s.line() and "25.0% unknown" in s.line()
    # changed counts exactly the in-vocabulary positions whose output differs from the input
    stats = {}
    texts = ["the cat sat on the mat"] * 50
    out = privatize_texts(NOISY, texts, rng=1, stats=stats)
    diff = sum(a != b for t, o in zip(texts, out) for a, b in zip(t.split(), o.lower().split()))
    assert stats["changed"] == diff == NOISY.privatize(texts, rng=1, return_summary=True)[1].changed
    assert stats["in_vocabulary"] == 300


def test_summary_warns_at_the_extremes_only():
    from deniable.text.privatize import PrivatizationSummary

    def summary(changed, n=100):
        return PrivatizationSummary("madlib", 10.0, words=n, in_vocabulary=n, changed=changed, unknown=0, useful_range=(5.0, 20.0))

    assert "almost the input" in summary(4).warnings()[0] and "5 to 20" in summary(4).warnings()[0]
    assert "almost noise" in summary(96).warnings()[0]
    assert summary(5).warnings() == [] and summary(95).warnings() == [] and summary(50).warnings() == []
    assert summary(0, n=10).warnings() == []  # too few words to say anything
    _, s = IDENTITY.privatize(" ".join(["the cat sat on the mat"] * 5), rng=0, return_summary=True)
    assert "almost the input" in s.warnings()[0]


def test_summary_names_the_useful_range_from_the_shipped_calibration():
    """The text layer finds the useful ε range through the extension point the package root
    connects to the calibration layer (docs/architecture.md), for a mechanism built at a plain ε."""
    import deniable
    from deniable.text import privatize as text_privatize

    assert text_privatize._USEFUL_RANGE is not None  # connected by `import deniable`
    mech = deniable.get_mechanism("madlib", epsilon=1e4)  # almost nothing changes
    _, summary = mech.privatize(" ".join(["the cat sat on the mat and the dog ran to the park"] * 3), rng=0, return_summary=True)
    lo, hi = summary.useful_range
    assert 1 < lo < hi < 100
    assert "useful range on this vocabulary" in summary.warnings()[0]


def test_ascii_pattern_splits_like_the_full_pattern():
    """The ASCII fast path is the same tokenizer: every pair of ASCII characters, and words
    around them, split identically with both patterns."""
    from deniable.text.tokenize import ascii_word_pattern, word_pattern

    full, small = word_pattern(), ascii_word_pattern()
    chars = [chr(c) for c in range(128)]
    for a in chars:
        for b in chars:
            t = f"x{a}{b}y {a}z{b}"
            assert small.split(t) == full.split(t), repr(t)


class _Shift:
    """A deterministic stand-in mechanism: word id i → (i + 1) mod V (UNK → 0)."""

    vocabulary = EMB

    def sample_ids(self, ids, rng=None):
        ids = np.asarray(ids)
        return np.where(ids < 0, 0, (ids + 1) % len(VOCAB))


@settings(max_examples=150, deadline=None)
@given(st.lists(texts, min_size=1, max_size=5), st.sampled_from(["unk", "drop", "keep"]), st.sampled_from(["preserve", "lower"]))
def test_each_token_gets_its_own_output_and_case(batch, oov, case):
    """Output words are built once per distinct (word, case) pair; each token must still get
    exactly the word and case a token-by-token privatization gives."""
    import warnings

    expected = []
    for t in batch:
        parts = split_words(t)
        for j in range(1, len(parts), 2):
            w = parts[j]
            key = unicodedata.normalize("NFC", w).lower()
            i = VOCAB.index(key) if key in VOCAB else -1
            if i < 0 and oov != "unk":
                parts[j] = w if oov == "keep" else ""
                continue
            if clitic_pattern().fullmatch(w):  # OOV as a clitic (no "'s" nor "s" in VOCAB)
                i = -1
                if oov != "unk":
                    parts[j] = w if oov == "keep" else ""
                    continue
            new = VOCAB[0 if i < 0 else (i + 1) % len(VOCAB)]
            parts[j] = apply_case(new, case_pattern(w)) if case == "preserve" else new
            if clitic_pattern().fullmatch(w):
                parts[j] = " " + parts[j]
        expected.append("".join(parts))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        assert privatize_texts(_Shift(), batch, rng=0, oov=oov, case=case) == expected


def test_one_mechanism_shared_by_16_threads_writes_nothing_and_each_call_gets_its_own_summary():
    """Each thread privatizes its own texts; its summary counts its own words only, and the
    mechanism's attributes are the same objects before and after."""
    import threading

    import deniable

    mech = deniable.get_mechanism("madlib", epsilon=8.0)
    mech.privatize("warm up the lazily built search index", rng=0)
    before = {k: id(v) for k, v in vars(mech).items()}
    snapshot = dict(vars(mech))
    results: dict[int, tuple[list[str], object]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(16)

    def work(i: int) -> None:
        try:
            texts = [" ".join(["the"] * (i + 1) + ["zzqqxunknown"] * i)] * 3  # 3(i+1) known, 3i unknown words
            barrier.wait()
            for _ in range(20):
                out, summary = mech.privatize(texts, rng=i, return_summary=True)
                if (summary.words, summary.unknown) != (3 * (2 * i + 1), 3 * i) or len(out) != 3:
                    raise AssertionError(f"thread {i} got a summary of other words: {summary}")
            results[i] = (out, summary)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 16
    assert {k: id(v) for k, v in vars(mech).items()} == before and vars(mech).keys() == snapshot.keys()
    with pytest.raises(AttributeError, match="return_summary=True"):
        _ = mech.last_privatization


# -- English clitics ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, words",
    [
        ("I'm here", ["I", "'m", "here"]),
        ("my mother's house", ["my", "mother", "'s", "house"]),
        ("don't DON'T can\u2019t won't", ["do", "n't", "DO", "N'T", "ca", "n\u2019t", "wo", "n't"]),
        ("they're, we'll, you've, I'd, It\u2019S", ["they", "'re", "we", "'ll", "you", "'ve", "I", "'d", "It", "\u2019S"]),
        ("she'd've", ["she", "'d", "'ve"]),
        # not clitics: no stem, more letters, other words with apostrophes
        ("'s n't x's's don'ts O'Brien rock'n'roll dogs' '90s", ["s", "n", "t", "x", "'s", "'s", "don", "ts", "O", "Brien", "rock", "n", "roll", "dogs", "90s"]),
        ("mother's\u0301 mother''s", ["mother", "s\u0301", "mother", "s"]),
    ],
)
def test_clitics_are_words_of_their_own(text, words):
    parts = split_words(text)
    assert "".join(parts) == text
    assert parts[1::2] == words


def _sample_sentences() -> list[str]:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "sample.txt"
    return path.read_text(encoding="utf-8").splitlines() + [
        "I'm sure they don't mind; it\u2019s fine, we'll see what you've got and I'd go. THEY'RE HERE."
    ]


def test_sample_sentences_keep_clitics_as_units():
    """Madlib at epsilon 10 on the bundled embedding (which has no clitic tokens: a clitic is
    looked up as its letters, ``'s`` as ``s``): every apostrophe-joined word comes out as a stem
    plus a clitic, or a stem and a separate word; never a sampled word glued after the apostrophe
    (``mother'huffington``)."""
    import re

    import deniable

    mech = Madlib(deniable.load_embedding(), epsilon=10)
    texts = _sample_sentences()
    n_clitics = sum(1 for t in texts for w in split_words(t)[1::2] if clitic_pattern().fullmatch(w))
    assert n_clitics == 8
    glued = re.compile(r"\w['\u2019](\w+)")
    as_clitic = seen = 0
    for seed in range(20):
        for src, out in zip(texts, mech.privatize(texts, rng=seed)):
            for m in glued.finditer(out):
                seen += 1
                # the only letters after an apostrophe are a clitic's, and its stem is a word of its own
                assert m.group(1).lower() in {"s", "m", "d", "re", "ll", "ve", "t"}, (src, out)
                as_clitic += 1
            assert out.count("'") + out.count("\u2019") <= src.count("'") + src.count("\u2019")
    # at epsilon 10 the clitic letters are sampled back often enough to be seen as clitics
    assert seen > 10 and as_clitic == seen


def test_clitic_lookup_and_output():
    """A clitic is looked up as its form ('s), else as its letters (s), and written back as a
    clitic with the input's apostrophe; any other sampled word is put after a space."""
    vocab = ["mother", "s", "do", "nt", "house", "dog"]
    emb = Embedding(vocab, np.eye(len(vocab), dtype=np.float32))
    same = Madlib(emb, epsilon=1e8)
    assert privatize_texts(same, ["Mother's house; DON\u2019T"], rng=0) == ["Mother's house; DON\u2019T"]

    class ToDog:
        vocabulary = emb

        def sample_ids(self, ids, rng=None):
            return np.full(len(ids), vocab.index("dog"))

    assert privatize_texts(ToDog(), ["Mother's house"], rng=0) == ["Dog dog dog"]
    # a vocabulary with clitic tokens: looked up as such
    emb2 = Embedding(["mother", "'s", "s"], np.eye(3, dtype=np.float32))
    rec = []

    class Record:
        vocabulary = emb2

        def sample_ids(self, ids, rng=None):
            rec.append(np.asarray(ids).tolist())
            return np.asarray(ids)

    assert privatize_texts(Record(), ["mother\u2019s"], rng=0) == ["mother\u2019s"]
    assert rec == [[0, 1]]


def test_fast_splitters_split_like_the_word_pattern():
    """split_words picks a faster pattern for texts without apostrophes or non-ASCII characters:
    the same split as word_pattern on every pair of ASCII characters, with ’ and non-ASCII
    material, and on random Unicode text."""
    from deniable.text.tokenize import word_pattern

    full = word_pattern().split
    chars = [chr(c) for c in range(128)] + ["\u2019", "é", "\u0301", "\u00a0", "😀", "ς", "א"]
    for a in chars:
        for b in chars:
            for t in (f"x{a}{b}y {a}z{b}", f"{a}n{b}t {b}s{a}"):
                assert split_words(t) == full(t), repr(t)
    rng = np.random.default_rng(0)
    pool = np.array([*range(0x20, 0x7F), *range(0xA0, 0x250), *range(0x300, 0x370), 0x2019, 0x2018, 0x3C2, 0x5D0, 0x1F600, 0x200D, 9, 10])
    for _ in range(3000):
        t = "".join(map(chr, rng.choice(pool, size=int(rng.integers(0, 40)))))
        assert split_words(t) == full(t), repr(t)
