import numpy as np
import pytest

from deniable.neighbors import ExactEuclideanIndex, make_index


def brute(E, Q):
    d = ((Q[:, None, :].astype(np.float64) - E[None, :, :].astype(np.float64)) ** 2).sum(-1)
    return d.argmin(1), np.sqrt(np.sort(d, axis=1))


@pytest.mark.parametrize(
    "V,d,n,mem",
    [(1, 3, 5, 1 << 20), (7, 2, 1, 1 << 20), (500, 16, 1000, 1 << 20), (3000, 8, 257, 1 << 16), (2000, 64, 50, 1 << 16)],
)
def test_search_equals_brute_force(V, d, n, mem):
    rng = np.random.default_rng(V + d + n)
    E = rng.standard_normal((V, d)).astype(np.float32)
    Q = (E[rng.integers(0, V, n)] + 0.5 * rng.standard_normal((n, d))).astype(np.float32)
    idx = ExactEuclideanIndex(E, memory_bytes=mem)
    want, _ = brute(E, Q)
    np.testing.assert_array_equal(idx.search(Q), want)


def test_vocabulary_blocking_is_used():
    # a small budget forces several vocabulary blocks per query block
    idx = ExactEuclideanIndex(np.zeros((3000, 8), dtype=np.float32), memory_bytes=1 << 16)
    qb, vb = idx._blocks(1000)
    assert vb < 3000 and qb * vb * 4 <= max(1 << 16, 64 * 4)


@pytest.mark.parametrize("k", [1, 5, 40])
def test_knn_equals_brute_force(k):
    rng = np.random.default_rng(k)
    E = rng.standard_normal((800, 12)).astype(np.float32)
    Q = rng.standard_normal((90, 12)).astype(np.float32)
    ids, dists = ExactEuclideanIndex(E, memory_bytes=1 << 16).knn(Q, k)
    d = np.sqrt(((Q[:, None, :].astype(np.float64) - E[None].astype(np.float64)) ** 2).sum(-1))
    want = np.argsort(d, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_allclose(dists, np.take_along_axis(d, want, 1), rtol=1e-12)


def test_ties_go_to_lowest_id():
    E = np.array([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert ExactEuclideanIndex(E).search(np.zeros((1, 2), np.float32)).tolist() == [0]


def test_empty_and_bad_queries():
    idx = ExactEuclideanIndex(np.eye(3, dtype=np.float32))
    assert idx.search(np.empty((0, 3), np.float32)).shape == (0,)
    with pytest.raises(ValueError, match="shape"):
        idx.search(np.ones((2, 4)))
    with pytest.raises(ValueError):
        ExactEuclideanIndex(np.empty((0, 3)))


def test_make_index():
    E = np.eye(4, dtype=np.float32)
    assert isinstance(make_index("exact", E), ExactEuclideanIndex)
    with pytest.raises(ValueError, match="unknown index"):
        make_index("annoy", E)
    with pytest.raises(TypeError):
        make_index(42, E)


def test_faiss_flat_equals_exact_and_approximate_is_valid():
    pytest.importorskip("faiss")
    rng = np.random.default_rng(3)
    E = rng.standard_normal((2000, 16)).astype(np.float32)
    Q = (E[rng.integers(0, 2000, 300)] + 0.3 * rng.standard_normal((300, 16))).astype(np.float32)
    exact = ExactEuclideanIndex(E).search(Q)
    np.testing.assert_array_equal(make_index("faiss-flat", E).search(Q), exact)
    for name in ("faiss-hnsw", "faiss-ivf"):
        got = make_index(name, E).search(Q)
        assert got.shape == (300,) and got.min() >= 0 and got.max() < 2000
        assert (got == exact).mean() > 0.8


def test_missing_optional_dependency_hint(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "faiss", None)  # makes "import faiss" raise ImportError
    with pytest.raises(ImportError, match=r'pip install "deniable\[faiss\]"'):
        make_index("faiss-flat", np.eye(3, dtype=np.float32))
