"""One exactness suite for every k-NN engine of ``deniable.neighbors``: each must return the float64
brute force (distance √Σ(qᵢ − eᵢ)² on float32-rounded inputs, nearest first, ties to the lowest
id). Engines whose optional dependency is missing (FAISS, torch, CUDA) are skipped."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.neighbors import ENGINES, NearestNeighbors, nearest_neighbors, score_error_bound


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _cuda() -> bool:
    if not _has("torch"):
        return False
    import torch

    return bool(torch.cuda.is_available())


_needs_torch = pytest.mark.skipif(not _has("torch"), reason="torch is not installed")
_needs_faiss = pytest.mark.skipif(not _has("faiss"), reason="faiss is not installed")
_needs_cuda = pytest.mark.skipif(not _cuda(), reason="no CUDA device")

ENGINE_CASES = [
    pytest.param(("exact", {}), id="exact"),
    pytest.param(("exact", {"memory_bytes": 1 << 16}), id="exact-tiled"),  # many vocabulary tiles
    pytest.param(("exact-bf16", {}), id="exact-bf16", marks=_needs_torch),
    pytest.param(("faiss-flat", {}), id="faiss-flat", marks=_needs_faiss),
    pytest.param(("torch", {"device": "cpu"}), id="torch-cpu-fp32", marks=_needs_torch),
    pytest.param(("torch", {"device": "cpu", "precision": "bf16", "memory_bytes": 1 << 16}), id="torch-cpu-bf16-tiled", marks=_needs_torch),
    pytest.param(("torch", {"device": "cuda"}), id="torch-cuda-fp32", marks=_needs_cuda),
    pytest.param(("torch", {"device": "cuda", "precision": "tf32"}), id="torch-cuda-tf32", marks=_needs_cuda),
    pytest.param(("torch", {"device": "cuda", "precision": "bf16"}), id="torch-cuda-bf16", marks=_needs_cuda),
]


def reference(X: np.ndarray, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 brute force on the float32-rounded inputs: k nearest by (distance, id)."""
    X64 = np.asarray(X, dtype=np.float32).astype(np.float64)
    Q64 = np.asarray(Q, dtype=np.float32).astype(np.float64)
    k = min(k, len(X64))
    ids = np.empty((len(Q64), k), dtype=np.int64)
    dist = np.empty((len(Q64), k))
    for i, q in enumerate(Q64):
        diff = X64 - q
        d = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        o = np.lexsort((np.arange(len(X64)), d))[:k]
        ids[i], dist[i] = o, d[o]
    return ids, dist


def assert_exact(engine: NearestNeighbors, X: np.ndarray, Q: np.ndarray, ks: tuple[int, ...] = (1, 2, 10)) -> None:
    for k in ks:
        ids, dist = engine.knn(Q, k)
        ref_ids, ref_d = reference(X, Q, k)
        assert ids.dtype == np.int64 and dist.dtype == np.float64
        np.testing.assert_array_equal(ids, ref_ids, err_msg=f"k={k}")
        np.testing.assert_allclose(dist, ref_d, rtol=1e-12, atol=1e-300, err_msg=f"k={k}")
    np.testing.assert_array_equal(engine.search(Q), reference(X, Q, 1)[0][:, 0])


@pytest.fixture(params=ENGINE_CASES)
def build(request):
    name, options = request.param

    def make(X: np.ndarray) -> NearestNeighbors:
        return nearest_neighbors(X, name, **options)

    return make


# -- the exactness contract ------------------------------------------------------------------------


def test_random_vocabulary(build) -> None:
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((2000, 16)) * rng.uniform(0.5, 2.0, (2000, 1))).astype(np.float32)
    Q = (X[rng.integers(0, 2000, 150)] + rng.uniform(0.01, 2.0, (150, 1)) * rng.standard_normal((150, 16))).astype(np.float32)
    engine = build(X)
    assert isinstance(engine, NearestNeighbors) and engine.exact
    assert (engine.size, engine.dim) == (2000, 16)
    assert_exact(engine, X, Q)


def test_duplicates_go_to_the_lowest_id(build) -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 8)).astype(np.float32)
    X[[40, 120, 299]] = X[7]  # four copies of one vector
    X[200:215] = X[3]  # fifteen copies: more than the candidates beyond k of any engine
    Q = np.vstack([X[[7, 120, 3, 210]], X[[7, 3]] + np.float32(1e-3), rng.standard_normal((20, 8))]).astype(np.float32)
    engine = build(X)
    assert_exact(engine, X, Q)
    assert engine.knn(Q[:2], 4)[0].tolist() == [[7, 40, 120, 299]] * 2
    assert engine.knn(Q[2:3], 17)[0][0, :16].tolist() == [3, *range(200, 215)]


def test_equidistant_ties(build) -> None:
    """Integer grid: queries at cell centres and edge midpoints are exactly equidistant (in float32
    and float64) from two or four points, and k cuts through the tied group."""
    X = np.array([[x, y] for x in range(6) for y in range(6)], dtype=np.float32)
    Q = np.array([[x + 0.5, y + 0.5] for x in range(5) for y in range(5)] + [[x + 0.5, y] for x in range(5) for y in range(6)], dtype=np.float32)
    engine = build(X)
    assert_exact(engine, X, Q, ks=(1, 2, 3, 10, 36))
    np.testing.assert_array_equal(engine.knn(np.array([[0.5, 0.5]], np.float32), 4)[0], [[0, 1, 6, 7]])


def test_large_norms(build) -> None:
    """Vectors of norm ~1e4 whose neighbours differ by O(1) in distance: float32 scores
    ‖e‖² − 2q·e err by far more than the gaps (see the control below), the answer must not."""
    rng = np.random.default_rng(2)
    centre = np.full(12, 1e4)
    X = (centre + rng.standard_normal((400, 12))).astype(np.float32)
    Q = (centre + rng.standard_normal((60, 12))).astype(np.float32)
    assert_exact(build(X), X, Q)


def test_all_negative_coordinates(build) -> None:
    rng = np.random.default_rng(3)
    X = (-np.abs(rng.standard_normal((500, 10))) - 3.0).astype(np.float32)
    Q = (-np.abs(rng.standard_normal((80, 10))) - 3.0).astype(np.float32)
    Q[0] = X[11]
    assert (X < 0).all() and (Q < 0).all()
    assert_exact(build(X), X, Q)


def test_small_vocabularies_and_k_beyond_the_vocabulary(build) -> None:
    X = np.array([[1.0], [10.0], [-3.0]], dtype=np.float32)
    Q = np.array([[0.0], [9.0], [5.5], [-1.0]], dtype=np.float32)
    engine = build(X)
    assert_exact(engine, X, Q, ks=(1, 2, 3, 5))
    assert engine.knn(Q, 5)[0].shape == (4, 3)
    single = build(np.array([[2.0, 1.0]], dtype=np.float32))
    np.testing.assert_array_equal(single.search(np.zeros((3, 2), np.float32)), [0, 0, 0])


def test_empty_queries_and_bad_shapes(build) -> None:
    engine = build(np.eye(4, dtype=np.float32))
    assert engine.search(np.empty((0, 4), np.float32)).shape == (0,)
    ids, dist = engine.knn(np.empty((0, 4), np.float32), 2)
    assert ids.shape == (0, 2) and dist.shape == (0, 2)
    with pytest.raises(ValueError, match="shape"):
        engine.knn(np.ones((2, 3), np.float32), 1)


# -- the bound and its controls --------------------------------------------------------------------


def test_the_large_norm_case_needs_the_certificate() -> None:
    """Control for test_large_norms: the raw float32 ranking is wrong on many of those queries, and
    so is the numpy engine when its error bound is set to zero (nothing is re-measured)."""
    from deniable.neighbors import ExactEuclideanIndex

    rng = np.random.default_rng(2)
    centre = np.full(12, 1e4)
    X = (centre + rng.standard_normal((400, 12))).astype(np.float32)
    Q = (centre + rng.standard_normal((60, 12))).astype(np.float32)
    ref = reference(X, Q, 2)[0]
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64).astype(np.float32)
    raw = (sq[None, :] - 2.0 * (Q @ X.T)).argmin(axis=1)  # float32 scores, no certificate
    assert (raw != ref[:, 0]).sum() >= 10
    blind = ExactEuclideanIndex(X)
    blind.score_error_bound = lambda qn: np.zeros_like(qn)  # type: ignore[method-assign]
    assert (blind.knn(Q, 2)[0] != ref).any(axis=1).sum() >= 5
    certified = ExactEuclideanIndex(X)
    np.testing.assert_array_equal(certified.knn(Q, 2)[0], ref)
    assert certified.stats["rescanned"] > 0


def test_score_error_bound_holds_for_float32_products() -> None:
    """The float32 scores of the numpy engine are within the bound of the exact ones, on data from
    norm 1e-3 to 1e6, and the bound is not loose by more than ~1000× on the worst case seen."""
    rng = np.random.default_rng(4)
    worst = 0.0
    for scale in (1e-3, 1.0, 1e3, 1e6):
        X = (scale * rng.standard_normal((300, 64))).astype(np.float32)
        Q = (scale * rng.standard_normal((50, 64))).astype(np.float32)
        sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
        s32 = (np.multiply(Q, np.float32(-2.0)) @ X.T + sq.astype(np.float32)).astype(np.float64)
        exact = sq[None, :] - 2.0 * (Q.astype(np.float64) @ X.astype(np.float64).T)
        qn = np.linalg.norm(Q.astype(np.float64), axis=1)[:, None]
        bound = score_error_bound(qn, np.sqrt(sq.max()), 64)
        ratio = np.abs(s32 - exact) / bound
        assert ratio.max() <= 1.0
        worst = max(worst, float(ratio.max()))
    assert worst > 1e-3


def test_knn_bounded_bound_is_valid() -> None:
    """The numpy engine's lower bound on every vector left out (TEM's table bound) holds, and is
    the k-th distance when the next vector is clearly farther."""
    from deniable.neighbors import ExactEuclideanIndex

    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 6)).astype(np.float32)
    X[100:400] = X[0]  # a tied block beyond k: the certificate fails, the row is scanned again
    Q = np.vstack([X[:40], X.mean(axis=0, keepdims=True)])
    index = ExactEuclideanIndex(X)
    for k in (1, 4, 50):
        ids, dist, bound = index.knn_bounded(Q, k)
        np.testing.assert_array_equal(ids, reference(X, Q, k)[0])
        D = reference(X, Q, 3000)[1]
        for i in range(len(Q)):
            others = np.setdiff1d(np.arange(3000), ids[i])
            d_all = np.sqrt(((X[others].astype(np.float64) - Q[i].astype(np.float64)) ** 2).sum(1))
            assert bound[i] <= dist[i, -1] and (d_all >= bound[i]).all()
            if D[i, k] > D[i, k - 1] * (1 + 1e-3) + 1e-3:
                assert bound[i] == dist[i, -1]
    assert index.knn_bounded(Q, 3000)[2].tolist() == [np.inf] * len(Q)


def test_engine_names() -> None:
    assert ENGINES == ("exact", "exact-bf16", "faiss-flat", "torch")
    with pytest.raises(ValueError, match="unknown engine"):
        nearest_neighbors(np.eye(2, dtype=np.float32), "annoy")
    with pytest.raises(ValueError, match="finite"):
        nearest_neighbors(np.array([[0.0, np.nan]], np.float32))
