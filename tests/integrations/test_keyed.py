"""Keyed per-row randomness: batched == row by row, independent streams, right distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import deniable
from deniable.errors import PrivacyWarning
from deniable.integrations.keyed import (
    key_bytes,
    keyed_bound_contributions,
    philox_key,
    privatize_keyed,
    resolve_randomness,
    row_generator,
)
from deniable.text.privatize import privatize_texts

from ..conftest import random_embedding


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)] + ["Unknown", "W3"]
    return [" ".join(rng.choice(words, int(rng.integers(0, 6)))) + "!" for _ in range(n)]


def _reference(mech, texts, keys, seed, stream, **kw):
    """The definition: each text alone, through privatize_texts, with its row generator."""
    return [None if t is None else privatize_texts(mech, [t], rng=row_generator(seed, stream, k), **kw)[0] for t, k in zip(texts, keys)]


@pytest.mark.parametrize("name", ["madlib", "mahalanobis", "tem"])
@pytest.mark.parametrize("oov", ["unk", "drop"])
def test_batched_equals_row_by_row_definition(name, oov):
    emb = random_embedding(40, 4, seed=1)
    params = {"lam": 0.5} if name == "mahalanobis" else {}
    mech = deniable.get_mechanism(name, emb, epsilon=2, **params)
    texts = _texts(300) + [None, ""]
    keys = list(range(len(texts)))
    got = privatize_keyed(mech, texts, keys, rng=9, stream="col", oov=oov)
    assert got == _reference(mech, texts, keys, 9, "col", oov=oov)
    assert got[-2] is None and got[-1] == ""


def test_brr_batched_equals_row_by_row_definition():
    from deniable.binary import binarize

    be = binarize(random_embedding(40, 16, seed=2), n_bits=16, rng=0)
    mech = deniable.get_mechanism("brr", be, epsilon=3)
    texts = _texts(200, seed=3)
    keys = [f"id-{i}" for i in range(len(texts))]
    assert privatize_keyed(mech, texts, keys, rng=4, stream="s") == _reference(mech, texts, keys, 4, "s")


def test_search_mechanisms_take_the_batched_path(monkeypatch):
    """Madlib's searches of all rows run as one batched call; the row-by-row fallback is not used."""
    from deniable.integrations import keyed

    def no_fallback(self, ids):
        raise AssertionError("fell back to row-by-row sampling")

    monkeypatch.setattr(keyed._KeyedSampler, "_row_by_row", no_fallback)
    mech = deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=2)
    calls = []
    real = mech.index.search
    monkeypatch.setattr(mech.index, "search", lambda q, *a, **k: calls.append(len(q)) or real(q, *a, **k), raising=False)
    texts = _texts(100)
    privatize_keyed(mech, texts, list(range(100)), rng=0)
    assert len(calls) == 1  # one batched search for the 100 rows


def test_rows_are_independent_of_their_batch_and_of_each_other():
    mech = deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=2)
    texts = _texts(120)
    keys = list(range(120))
    whole = privatize_keyed(mech, texts, keys, rng=1, stream="t")
    parts = privatize_keyed(mech, texts[:50], keys[:50], rng=1, stream="t") + privatize_keyed(mech, texts[50:], keys[50:], rng=1, stream="t")
    shuffled = np.random.default_rng(0).permutation(120)
    perm = privatize_keyed(mech, [texts[i] for i in shuffled], [keys[i] for i in shuffled], rng=1, stream="t")
    assert whole == parts == [perm[list(shuffled).index(i)] for i in range(120)]
    # another seed, stream or release identity: another draw
    assert whole != privatize_keyed(mech, texts, keys, rng=2, stream="t")
    assert whole != privatize_keyed(mech, texts, keys, rng=1, stream="u")
    assert whole != privatize_keyed(mech, texts, keys, rng=1, stream="t", release_id="test")
    named = privatize_keyed(mech, texts, keys, rng=1, stream="t", release_id="test")
    assert named == _reference_release(mech, texts, keys, 1, "t", "test")


def _reference_release(mech, texts, keys, seed, stream, release):
    return [privatize_texts(mech, [t], rng=row_generator(seed, stream, k, release=release))[0] for t, k in zip(texts, keys)]


def test_default_rows_are_independent_and_seeds_need_keys():
    """No seed, no keys: a fresh secret per call, rows keyed by position, so equal texts get
    independent outputs in one call and across calls. A seed without keys is refused; content
    keys are opt-in and warned."""
    mech = deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=0.5)
    text = "w1 w2 w3 w4 w5 w6"
    one = privatize_keyed(mech, [text] * 6)
    assert len(set(one)) > 1  # equal texts, independent draws
    assert one != privatize_keyed(mech, [text] * 6)  # another call, another secret
    with pytest.raises(ValueError, match=r"seed=1 without row keys.*unique key"):
        privatize_keyed(mech, [text], rng=1)
    with pytest.warns(PrivacyWarning, match="content_keys=True keys each row by its text") as rec:
        same = privatize_keyed(mech, [text] * 5, rng=1, content_keys=True)
    assert rec[0].filename == __file__  # the warning names the caller's line
    assert len(set(same)) == 1
    with pytest.raises(ValueError, match="cannot be combined with explicit keys"):
        privatize_keyed(mech, [text], [0], content_keys=True)
    with pytest.raises(ValueError, match="release_id must be a non-empty string"):
        privatize_keyed(mech, [text], [0], rng=1, release_id="")
    # a Generator is drawn from: reproducible from its seed, and successive calls differ
    g = np.random.default_rng(3)
    first, second = privatize_keyed(mech, [text] * 3, rng=g), privatize_keyed(mech, [text] * 3, rng=g)
    assert first != second and first == privatize_keyed(mech, [text] * 3, rng=np.random.default_rng(3))


def test_resolve_randomness_rule():
    fresh = resolve_randomness(None, keyed=False)
    assert fresh.keying == "position" and fresh.fresh and not fresh.reproducible
    assert str(fresh.seed) not in repr(fresh)  # the secret is never shown
    assert fresh.redrawn().seed != fresh.seed and fresh.seed != resolve_randomness(None, keyed=False).seed
    fixed = resolve_randomness(7, keyed=True, release_id="train", stream="text")
    assert fixed.keying == "explicit" and fixed.reproducible and fixed.redrawn() is fixed and fixed.release == ("train",)
    with pytest.warns(PrivacyWarning):
        assert resolve_randomness(7, keyed=False, content_keys=True).keying == "content"
    with pytest.raises(ValueError, match="key=<id column>"):
        resolve_randomness(7, keyed=False, key_hint="key=<id column>")
    with pytest.raises(TypeError, match="content_keys must be True or False"):
        resolve_randomness(None, keyed=False, content_keys="yes")
    assert fixed.row_keys(["a", "b"], [5, 6]) == [5, 6]
    assert fresh.row_keys(["a", "b"]) == [0, 1] and fresh.row_keys(["a", "b"], positions=[4, 9]) == [4, 9]
    with pytest.raises(TypeError, match="keyed by their position"):
        fresh.row_keys(["a"], [0])


def test_release_identities_are_distinct():
    """The release identity is length-prefixed: distinct identities, distinct Philox keys, and an
    identity never collides with no identity."""
    ids = [None, "a", "b", "ab", ("a", "b"), ("a", "bc"), ("ab", "c"), ("a", "b", "c")]
    assert len({tuple(philox_key(0, "t", 1, release=r)) for r in ids}) == len(ids)
    assert (philox_key(0, "t", 1, release="a") == philox_key(0, "t", 1, release=("a",))).all()
    assert (philox_key(0, "t", 1) == philox_key(0, "t", 1, release=())).all()


def test_key_canonical_forms():
    assert key_bytes(np.int32(7)) == key_bytes(np.int64(7)) == key_bytes(7)
    assert key_bytes(7) != key_bytes("7") != key_bytes(b"7")
    assert (philox_key(0, "t", -1) != philox_key(0, "t", 2**127 - 1)).any()
    for bad in (True, 1.5, None, (1, 2)):
        with pytest.raises(TypeError, match="row keys must be integers, strings or bytes"):
            key_bytes(bad)
    with pytest.raises(ValueError, match="fit in 128 bits"):
        key_bytes(2**130)


def test_errors_name_the_row():
    mech = deniable.get_mechanism("madlib", random_embedding(10, 3), epsilon=2)
    with pytest.raises(TypeError, match="row 1: texts must be strings"):
        privatize_keyed(mech, ["w1", 5], [0, 1], rng=0)
    with pytest.raises(ValueError, match="row 1: the row key is missing"):
        privatize_keyed(mech, ["w1", "w2"], [0, None], rng=0)
    with pytest.raises(TypeError, match="row 0: row keys must be"):
        privatize_keyed(mech, ["w1"], [1.5], rng=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        privatize_keyed(mech, ["w1"], rng=-1)


@pytest.mark.slow
def test_keyed_rows_follow_the_mechanisms_distribution():
    """Many rows with the same word and distinct keys: the outputs follow TEM's exact output
    distribution (chi-square). Control: all rows sharing one key repeat one draw and fail."""
    emb = random_embedding(12, 3, seed=5)
    mech = deniable.get_mechanism("tem", emb, epsilon=2, cache_dir=False)
    p = mech.probabilities("w0")
    n = 6000
    out = privatize_keyed(mech, ["w0"] * n, list(range(n)), rng=123, stream="x", case="lower")
    counts = np.bincount(mech.vocabulary.ids_of(out), minlength=len(p))
    keep = p * n >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(p[keep] * n, p[~keep].sum() * n)
    nonzero = expected > 0
    assert stats.chisquare(observed[nonzero], expected[nonzero]).pvalue > 1e-4
    shared = privatize_keyed(mech, ["w0"] * n, [0] * n, rng=123, stream="x", case="lower")
    c2 = np.bincount(mech.vocabulary.ids_of(shared), minlength=len(p))
    observed2 = np.append(c2[keep], c2[~keep].sum())
    assert stats.chisquare(observed2[nonzero], expected[nonzero]).pvalue < 1e-4


def test_bound_contributions_is_keyed_by_user():
    from deniable import ngrams

    records = [(u, " ".join(f"w{(u * 7 + j) % 13}" for j in range(12))) for u in range(30)]
    vocab = ngrams.build_vocabulary(ngrams.count_public([t for _, t in records], 2), n=2)
    counts = ngrams.count_users(records, vocab)
    a = keyed_bound_contributions(counts, max_ngrams_per_user=4, C=1, rng=3)
    assert np.diff(a.matrix.indptr).max() == 4 and a.matrix.max() == 1
    # user order does not matter: the same user keeps the same n-grams
    rev = ngrams.count_users(records[::-1], vocab)
    b = keyed_bound_contributions(rev, max_ngrams_per_user=4, C=1, rng=3)
    order = [b.user_ids.index(u) for u in a.user_ids]
    assert (b.matrix[order] != a.matrix).nnz == 0
    assert (keyed_bound_contributions(counts, max_ngrams_per_user=4, rng=4).matrix != keyed_bound_contributions(counts, max_ngrams_per_user=4, rng=3).matrix).nnz
    unbounded = keyed_bound_contributions(counts)
    assert (unbounded.matrix != counts.matrix).nnz == 0


def test_bound_contributions_rng_and_its_deprecated_alias_seed():
    """rng= takes None, an int or a Generator (through master_seed, as privatize_keyed does);
    seed= gives the same bounded counts for the same int, with a DeprecationWarning naming rng=
    at the caller's line; both at once is refused."""
    import warnings

    from deniable import ngrams

    records = [(u, " ".join(f"w{(u * 5 + j) % 17}" for j in range(15))) for u in range(40)]
    counts = ngrams.count_users(records, ngrams.build_vocabulary(ngrams.count_public([t for _, t in records], 2), n=2))
    new = keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=11)
    with pytest.warns(DeprecationWarning, match=r"keyed_bound_contributions\(seed=\.\.\.\) is deprecated; use rng=") as rec:
        old = keyed_bound_contributions(counts, max_ngrams_per_user=3, seed=11)
    assert rec[0].filename == __file__
    assert (old.matrix != new.matrix).nnz == 0
    assert (keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=12).matrix != new.matrix).nnz  # control: the seed matters
    with pytest.raises(TypeError, match="both rng= and seed=.*give rng= only"):
        keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=11, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        drawn = keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=np.random.default_rng(5))
        again = keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=np.random.default_rng(5))
    # a Generator is drawn from once: its 128 bits are the master seed
    from deniable.integrations.row_keys import master_seed

    master, fresh = master_seed(np.random.default_rng(5))
    assert not fresh and (drawn.matrix != again.matrix).nnz == 0
    assert (drawn.matrix != keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=master).matrix).nnz == 0
    with pytest.raises((TypeError, ValueError)):
        keyed_bound_contributions(counts, max_ngrams_per_user=3, rng=-1)


def test_seed_is_a_deprecated_alias_of_rng():
    """seed= gives the outputs of rng= for the same int, with a DeprecationWarning naming rng=
    at the caller's line; both at once is refused; a Generator rng is drawn from (no warning)."""
    import warnings

    mech = deniable.get_mechanism("madlib", random_embedding(40, 4), epsilon=0.5)
    texts, keys = _texts(50), list(range(50))
    with pytest.warns(DeprecationWarning, match=r"privatize_keyed\(seed=\.\.\.\) is deprecated; use rng=") as rec:
        old = privatize_keyed(mech, texts, keys, seed=7, stream="s")
    assert rec[0].filename == __file__
    assert old == privatize_keyed(mech, texts, keys, rng=7, stream="s") == _reference(mech, texts, keys, 7, "s")
    assert old != privatize_keyed(mech, texts, keys, rng=8, stream="s")  # control: the seed matters
    with pytest.raises(TypeError, match="both rng= and seed=.*give rng= only"):
        privatize_keyed(mech, texts, keys, rng=7, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        drawn = privatize_keyed(mech, texts, keys, rng=np.random.default_rng(5))
    assert drawn == privatize_keyed(mech, texts, keys, rng=np.random.default_rng(5))
