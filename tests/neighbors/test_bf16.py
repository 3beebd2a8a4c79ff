"""Certified bfloat16 search: float64-exact answers on random, tied and adversarial queries."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deniable.neighbors import INDEX_NAMES, make_index  # noqa: E402
from deniable.neighbors.bf16 import Bf16EuclideanIndex, _bits_to_f64  # noqa: E402


def reference_knn(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 brute force: k nearest by (distance, id)."""
    X = np.asarray(vectors, dtype=np.float32).astype(np.float64)
    Q = np.asarray(queries, dtype=np.float32).astype(np.float64)
    d2 = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(2)
    ids = np.empty((len(Q), k), dtype=np.int64)
    for i in range(len(Q)):
        order = np.lexsort((np.arange(len(X)), d2[i]))
        ids[i] = order[:k]
    return ids, np.sqrt(np.take_along_axis(d2, ids, axis=1))


def raw_bf16_argmin(index: Bf16EuclideanIndex, queries: np.ndarray) -> np.ndarray:
    """What an uncertified bfloat16 search would return (argmax of the computed T)."""
    t = _bits_to_f64(index._products(np.asarray(queries, dtype=np.float32))[0][:, : index.size])
    return t.argmax(axis=1)


def near_tie_queries(X: np.ndarray, rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    """Queries whose nearest and second nearest words are much closer in distance than the
    bfloat16 error: a random query of norm ~``scale`` moved onto the bisector of its two nearest
    words a, b (then tilted by ±1e-4·(a − b))."""
    V, d = X.shape
    X64 = X.astype(np.float64)
    q = X64[rng.integers(0, V, n)] + scale / np.sqrt(d) * rng.standard_normal((n, d))
    top2 = reference_knn(X, q, 2)[0]
    a, b = X64[top2[:, 0]], X64[top2[:, 1]]
    diff = a - b
    ok = (diff * diff).sum(1) > 0  # not a pair of duplicate vectors
    q, a, b, diff = q[ok], a[ok], b[ok], diff[ok]
    off = (2 * np.einsum("ij,ij->i", q, diff) - (a * a).sum(1) + (b * b).sum(1)) / (2 * (diff * diff).sum(1))
    q = q - (off - rng.uniform(-1e-4, 1e-4, len(q)))[:, None] * diff
    return q.astype(np.float32)


@pytest.fixture(scope="module")
def vocab() -> np.ndarray:
    rng = np.random.default_rng(7)
    # GloVe-like: unequal norms, a few duplicates (ties must go to the lowest id)
    X = rng.standard_normal((1500, 40)) * rng.uniform(0.3, 1.5, (1500, 1))
    X[100] = X[7]
    X[1200] = X[7]
    return X.astype(np.float32)


def test_bf16_rounding_is_to_nearest() -> None:
    """The bound assumes our own float32 → bfloat16 conversion rounds to nearest (≤ 2⁻⁸ relative)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(200_000) * np.exp(rng.uniform(-20, 20, 200_000))).astype(np.float32)
    y = torch.from_numpy(x).to(torch.bfloat16).float().numpy().astype(np.float64)
    rel = np.abs(y - x) / np.abs(x.astype(np.float64))
    assert rel.max() <= 2.0**-8
    assert rel.max() > 2.0**-8 * 0.99  # the bound is attained: a truncating conversion would show 2⁻⁷


def test_error_bound_holds_and_is_tight(vocab: np.ndarray) -> None:
    idx = Bf16EuclideanIndex(vocab)
    rng = np.random.default_rng(1)
    for scale in (0.1, 3.0, 100.0):
        q = (vocab[rng.integers(0, len(vocab), 300)] + scale * rng.standard_normal((300, vocab.shape[1]))).astype(np.float32)
        t = _bits_to_f64(idx._products(q)[0][:, : len(vocab)])  # the padding columns are not vectors
        Q, X = q.astype(np.float64), vocab.astype(np.float64)
        T = 2 * Q @ X.T - (X * X).sum(1)
        bound = idx.error_bound(np.linalg.norm(Q, axis=1)[:, None], np.linalg.norm(X, axis=1)[None, :], t)
        ratio = np.abs(t - T) / bound
        assert ratio.max() <= 1.0
        assert ratio.max() > 0.02  # within ~50× of the worst case seen, else the sieve keeps far too many candidates


@pytest.mark.parametrize("scale", [0.05, 1.0, 30.0, 3000.0])
def test_search_equals_float64_reference(vocab: np.ndarray, scale: float) -> None:
    rng = np.random.default_rng(2)
    idx = Bf16EuclideanIndex(vocab, block_queries=97)  # several blocks, one ragged
    q = (vocab[rng.integers(0, len(vocab), 400)] + scale * rng.standard_normal((400, vocab.shape[1]))).astype(np.float32)
    ref, ref_d = reference_knn(vocab, q, 3)
    assert np.array_equal(idx.search(q), ref[:, 0])
    for k in (1, 2, 3):
        ids, dist = idx.knn(q, k)
        assert np.array_equal(ids, ref[:, :k])
        np.testing.assert_allclose(dist, ref_d[:, :k], rtol=1e-12)


def test_near_ties_need_the_certificate(vocab: np.ndarray) -> None:
    """Queries whose two nearest words are closer together than the bfloat16 error: the raw
    bfloat16 argmax is wrong on some of them (so this test fails if the float64 re-measurement
    or the bound were dropped); the index is right on all."""
    rng = np.random.default_rng(3)
    idx = Bf16EuclideanIndex(vocab)
    for scale in (2.0, 50.0):
        q = near_tie_queries(vocab, rng, 400, scale)
        ref = reference_knn(vocab, q, 2)[0]
        assert (raw_bf16_argmin(idx, q) != ref[:, 0]).sum() >= 5
        assert np.array_equal(idx.search(q), ref[:, 0])
        assert np.array_equal(idx.knn(q, 2)[0], ref)


def test_duplicates_go_to_lowest_id(vocab: np.ndarray) -> None:
    idx = Bf16EuclideanIndex(vocab)
    q = np.repeat(vocab[[1200]], 5, axis=0) + np.float32(1e-3)
    assert (idx.search(q) == 7).all()  # rows 7, 100 and 1200 are the same vector
    assert (idx.knn(q, 3)[0] == [7, 100, 1200]).all()


def test_all_negative_rows_take_the_slow_path(vocab: np.ndarray) -> None:
    """Queries near the origin: every T = 2q·e − ‖e‖² is negative, the int16 order of bfloat16
    patterns breaks, and those rows are compared through order-preserving keys."""
    rng = np.random.default_rng(4)
    idx = Bf16EuclideanIndex(vocab)
    q = (1e-3 * rng.standard_normal((50, vocab.shape[1]))).astype(np.float32)
    q[0] = 0.0
    ref = reference_knn(vocab, q, 2)[0]
    assert np.array_equal(idx.search(q), ref[:, 0])
    assert np.array_equal(idx.knn(q, 2)[0], ref)
    assert idx.stats["slow_rows"] >= 50
    assert idx.stats["reordered_rows"] >= 50  # all group maxima negative: the bound is redone


def test_make_index_and_validation(vocab: np.ndarray) -> None:
    assert "exact-bf16" in INDEX_NAMES
    idx = make_index("exact-bf16", vocab)
    assert isinstance(idx, Bf16EuclideanIndex) and idx.exact
    assert idx.search(np.empty((0, vocab.shape[1]), np.float32)).shape == (0,)
    with pytest.raises(ValueError, match="shape"):
        idx.search(np.zeros((2, 3), np.float32))
    bad = np.zeros((1, vocab.shape[1]), np.float32)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        idx.search(bad)
    with pytest.raises(ValueError, match="non-empty"):
        Bf16EuclideanIndex(np.zeros((0, 4)))


@pytest.mark.parametrize("name", ["madlib", "mahalanobis", "vickrey"])
def test_mechanisms_same_outputs_as_exact(name: str) -> None:
    """Same noise (same seed), same nearest neighbour: the outputs equal the default index's."""
    import deniable

    emb = deniable.load_embedding()
    ids = np.random.default_rng(5).integers(0, len(emb), 1500)
    for eps in (2.0, 20.0):
        a = deniable.get_mechanism(name, embedding=emb, epsilon=eps)
        b = deniable.get_mechanism(name, embedding=emb, epsilon=eps, index="exact-bf16")
        assert "exact-bf16" in repr(b)
        assert np.array_equal(a.sample_ids(ids, rng=11), b.sample_ids(ids, rng=11))


def test_vickrey_rejects_approximate_index() -> None:
    import deniable

    with pytest.raises(ValueError, match="two nearest"):
        deniable.get_mechanism("vickrey", epsilon=5.0, index="faiss-hnsw")


@pytest.mark.parametrize(
    ("vectors", "queries", "k"),
    [
        ([[1.0], [10.0]], [[0.0], [9.0], [5.5], [-3.0]], 2),  # V = 2, every T negative for q = 0
        ([[1.0], [2.0], [5.0], [10.0]], [[0.0], [0.6], [-1.0], [7.0]], 3),
        ([[1.0], [2.0], [3.0], [5.0], [10.0]], [[0.6], [0.0], [4.1]], 4),
        ([[1.0], [2.0], [3.0]], [[0.0], [2.6]], 5),  # k > V: clipped to V
    ],
)
def test_small_vocabularies_and_large_k(vectors: list, queries: list, k: int) -> None:
    """Few positive scores: the raw int16 order of the k largest patterns breaks (negative
    bfloat16 patterns order backwards); the k-th largest value is then taken through keys."""
    X, Q = np.array(vectors, np.float32), np.array(queries, np.float32)
    idx = Bf16EuclideanIndex(X)
    kk = min(k, len(X))
    ref, ref_d = reference_knn(X, Q, kk)
    ids, dist = idx.knn(Q, k)
    assert np.array_equal(ids, ref)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-12)


def test_random_small_vocabularies_every_k() -> None:
    rng = np.random.default_rng(9)
    for trial in range(60):
        V, d = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        X = (rng.standard_normal((V, d)) * 10 ** rng.uniform(-2, 2)).astype(np.float32)
        Q = (rng.standard_normal((20, d)) * 10 ** rng.uniform(-2, 2)).astype(np.float32)
        idx = Bf16EuclideanIndex(X)
        for k in range(1, V + 1):
            assert np.array_equal(idx.knn(Q, k)[0], reference_knn(X, Q, k)[0]), (trial, V, d, k)


def test_nearest_packed_in_one_column_group() -> None:
    """The k-th value comes from the maxima of groups of 64 adjacent columns: when the k nearest
    words all sit in one group it is only a lower bound, and the search must stay exact (the
    rest of the vocabulary scores negative, or mildly positive elsewhere)."""
    rng = np.random.default_rng(11)
    d, lower_bound_strict = 6, 0
    for V in (64, 65, 129, 200, 257):
        for trial in range(4):
            X = rng.standard_normal((V, d))
            g = int(rng.integers(0, V // 64))  # a full group
            close = rng.choice(np.arange(g * 64, g * 64 + 64), 4, replace=False)
            q = 5 * rng.standard_normal(d)
            X[close] = q + 1e-3 * rng.standard_normal((4, d))
            others = np.setdiff1d(np.arange(V), close)
            X[others] = -q * rng.uniform(0.5, 3, (others.size, 1)) + rng.standard_normal((others.size, d))
            if trial % 2:
                X[others[:3]] = q * rng.uniform(0.2, 0.6, (3, 1))
            X = X.astype(np.float32)
            Q = np.stack([q, q + 1e-4 * rng.standard_normal(d), X[close[0]], (X[close[0]] + X[others[0]]) / 2]).astype(np.float32)
            idx = Bf16EuclideanIndex(X)
            bits, group_max = idx._products(Q)
            if group_max.shape[1] >= 2:
                kth_value = -np.sort(-_bits_to_f64(bits[:, :V]), axis=1)[:, 1]
                second = -np.sort(-group_max.astype(np.int32), axis=1)[:, 1]  # int16 patterns
                bound = _bits_to_f64(second.astype(np.int16))
                lower_bound_strict += int(((second >= 0) & (bound < kth_value)).sum())
            for k in (1, 2, 3, 4, 5):
                ids, dist = idx.knn(Q, k)
                ref_ids, ref_dist = reference_knn(X, Q, k)
                assert np.array_equal(ids, ref_ids), (V, trial, k)
                np.testing.assert_allclose(dist, ref_dist, rtol=1e-12, atol=1e-15)
    assert lower_bound_strict > 0  # the case this test is for did occur


def test_vickrey_two_word_vocabulary_matches_exact() -> None:
    import deniable

    emb = deniable.Embedding(["a", "b"], np.array([[1.0, 0.0], [0.0, 10.0]], np.float32))
    ids = np.random.default_rng(0).integers(0, 2, 2000)
    a = deniable.get_mechanism("vickrey", embedding=emb, epsilon=5.0)
    b = deniable.get_mechanism("vickrey", embedding=emb, epsilon=5.0, index="exact-bf16")
    assert np.array_equal(a.sample_ids(ids, rng=3), b.sample_ids(ids, rng=3))


def test_huge_norms_within_the_limit() -> None:
    """Real scores far below zero (‖e‖² ≈ 1e34) still rank above the padding columns."""
    X = np.array([[1e17], [2e17], [-3e17]], np.float32)
    Q = np.array([[0.0], [1.6e17], [-1e18]], np.float32)
    idx = Bf16EuclideanIndex(X)
    for k in (1, 2, 3):
        assert np.array_equal(idx.knn(Q, k)[0], reference_knn(X, Q, k)[0])


def test_overflow_is_refused() -> None:
    with pytest.raises(ValueError, match="overflow"):
        Bf16EuclideanIndex(np.array([[0.0], [1e19]], np.float32))
    idx = Bf16EuclideanIndex(np.array([[0.0], [2e10]], np.float32))
    with pytest.raises(ValueError, match="overflow"):
        idx.search(np.array([[1.9e28]], np.float32))
