import numpy as np
import pytest

from deniable import UNK_ID, DataError, DeniableWarning, Embedding, load_embedding


def test_basic_access():
    emb = Embedding(["a", "b", "c"], np.eye(3))
    assert len(emb) == 3 and emb.dim == 3
    assert emb.vectors.dtype == np.float32 and emb.vectors.flags.c_contiguous
    assert emb.id_of("b") == 1
    assert emb.ids_of(["c", "zzz", "a"]).tolist() == [2, UNK_ID, 0]
    assert "a" in emb and "z" not in emb
    np.testing.assert_allclose(emb.mean, [1 / 3] * 3, rtol=1e-6)
    with pytest.raises(KeyError, match="not in the vocabulary"):
        emb.id_of("zzz")
    with pytest.raises(ValueError):
        emb.vectors[0, 0] = 5.0  # read-only


def test_uncased_detection():
    assert Embedding(["a", "b"], np.ones((2, 2))).uncased
    assert not Embedding(["a", "B"], np.ones((2, 2))).uncased


def test_duplicates_keep_first_and_warn():
    with pytest.warns(DeniableWarning, match="duplicate"):
        emb = Embedding(["a", "b", "a"], np.array([[1.0], [2.0], [3.0]]))
    assert emb.words == ["a", "b"]
    assert emb.vector("a")[0] == 1.0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rows_rejected(bad):
    v = np.ones((3, 2))
    v[1, 0] = bad
    with pytest.raises(DataError, match="'b'"):
        Embedding(["a", "b", "c"], v)


def test_shape_errors():
    with pytest.raises(DataError, match="2 words but 3 vectors"):
        Embedding(["a", "b"], np.ones((3, 2)))
    with pytest.raises(DataError, match="empty"):
        Embedding([], np.ones((0, 2)))
    with pytest.raises(DataError, match="2-D"):
        Embedding(["a"], np.ones(3))


def test_restrict():
    emb = Embedding(list("abcd"), np.arange(8).reshape(4, 2))
    top = emb.restrict(top_n=2)
    assert top.words == ["a", "b"]
    sub = emb.restrict(words=["d", "a"])
    assert sub.words == ["d", "a"]
    np.testing.assert_array_equal(sub.vectors, [[6, 7], [0, 1]])
    with pytest.raises(TypeError):
        emb.restrict()
    with pytest.raises(KeyError):
        emb.restrict(words=["x"])
    with pytest.raises(ValueError):
        emb.restrict(top_n=0)


def test_fingerprint_is_stable_and_content_sensitive():
    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    a = Embedding(list("abc"), v)
    assert a.fingerprint == Embedding(list("abc"), v.copy()).fingerprint
    assert a.fingerprint != Embedding(list("abd"), v).fingerprint
    v2 = v.copy()
    v2[2, 1] += 1e-3
    assert a.fingerprint != Embedding(list("abc"), v2).fingerprint
    assert len(a.fingerprint) == 16


def test_default_embedding():
    emb = load_embedding()
    assert len(emb) == 33849 and emb.dim == 300
    assert emb.uncased
    assert emb.words[:3] == ["the", "and", "to"]
    assert emb.fingerprint == load_embedding().fingerprint
    assert len(load_embedding(limit=100)) == 100


def test_default_embedding_matches_source(shared_data):
    """The bundled float16 copy equals the shared GloVe file within float16 rounding."""
    with np.load(shared_data / "embeddings" / "glove840b300d_34k.npz") as z:
        words = z["words"].tolist()
        vectors = z["vectors"]
    emb = load_embedding()
    idx = {w: i for i, w in enumerate(words)}
    rows = [idx[w] for w in emb.words]
    err = np.abs(emb.vectors - vectors[rows]).max()
    assert err <= 2e-3
    assert len(words) - len(emb) == 11  # the NO-BREAK SPACE tokens
