"""The torch backend: samplers against their closed forms (on CPU torch, and on CUDA when there),
exact nearest neighbour against a float64 reference (ties included), BRR's search and tie rule
against the numpy engine, the API's validation. Skipped where torch is not installed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from deniable import UNK_ID, Embedding, get_mechanism  # noqa: E402
from deniable.backends.torch_backend import (  # noqa: E402
    TorchBRR,
    TorchEuclideanIndex,
    TorchHammingIndex,
    TorchMadlib,
    TorchMahalanobis,
    TorchTEM,
    TorchVickrey,
    torch_generator,
)
from deniable.binary import BinaryEmbedding, HammingIndex  # noqa: E402
from deniable.mechanisms.brr import BRR  # noqa: E402
from deniable.mechanisms.tem import TEM  # noqa: E402
from deniable.neighbors import ExactEuclideanIndex  # noqa: E402

from .._stats import chi2_pvalue  # noqa: E402

P_MIN = 1e-4  # statistical tests fail below this p-value (fixed seeds)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]


def rand_emb(n=40, d=5, seed=0, scales=None):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, d))
    if scales is not None:
        v = v * np.asarray(scales)
    return Embedding([f"w{i}" for i in range(n)], v.astype(np.float32))


def float64_nn(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Reference: argmin over float64 ‖q − e‖², first (lowest) id among equal distances."""
    E = vectors.astype(np.float64)
    out = np.empty(len(queries), dtype=np.int64)
    for i, q in enumerate(queries.astype(np.float64)):
        diff = E - q
        out[i] = int(np.argmin(np.einsum("ij,ij->i", diff, diff)))
    return out


# -- noise against the closed form ------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d,eps", [(1, 0.5), (5, 2.0), (300, 10.0)])
def test_madlib_noise_radius_is_gamma(device, d, eps):
    mech = TorchMadlib(rand_emb(20, d), epsilon=eps, device=device)
    z = mech.sample_noise_tensor(20_000, torch_generator(1, device)).cpu().double().numpy()
    r = np.linalg.norm(z, axis=1)
    assert stats.kstest(r, stats.gamma(a=d, scale=1 / eps).cdf).pvalue > P_MIN
    # control: the same draws against a 5 % wrong scale must fail
    assert stats.kstest(r, stats.gamma(a=d, scale=1.05 / eps).cdf).pvalue < P_MIN


@pytest.mark.parametrize("d", [3, 50])
def test_madlib_noise_directions_are_uniform(d):
    mech = TorchMadlib(rand_emb(20, d), epsilon=1.0, device="cpu")
    z = mech.sample_noise_tensor(20_000, torch_generator(2, "cpu")).double().numpy()
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    axis = np.random.default_rng(3).standard_normal(d)
    axis /= np.linalg.norm(axis)
    for proj in (u[:, 0], u @ axis):
        assert stats.kstest((proj + 1) / 2, beta.cdf).pvalue > P_MIN
    # control: a direction biased towards the first axis fails
    biased = u + 0.05 * np.eye(d)[0]
    biased /= np.linalg.norm(biased, axis=1, keepdims=True)
    assert stats.kstest((biased[:, 0] + 1) / 2, beta.cdf).pvalue < P_MIN


def test_mahalanobis_noise_rm_norm_is_gamma_and_covariance_shape():
    emb = rand_emb(500, 4, scales=[4, 1, 0.5, 0.25], seed=5)
    eps, lam, d = 3.0, 0.8, 4
    mech = TorchMahalanobis(emb, epsilon=eps, lam=lam, device="cpu")
    z = mech.sample_noise_tensor(200_000, torch_generator(6, "cpu")).double().numpy()
    assert stats.kstest(mech.rm_norm(z[:20_000]), stats.gamma(a=d, scale=1 / eps).cdf).pvalue > P_MIN
    emp = z.T @ z / len(z)
    want = (d + 1) / eps**2 * (lam * mech.sigma + (1 - lam) * np.eye(d))
    assert np.abs(emp - want).max() <= 0.03 * np.abs(want).max()
    # control: the covariance of Madlib's (spherical) noise is far from it
    iso = (d + 1) / eps**2 * np.eye(d)
    assert np.abs(iso - want).max() > 0.1 * np.abs(want).max()


def exact_1d_probabilities(x: np.ndarray, eps: float) -> np.ndarray:
    """P[M(x_j) = x_i] for Madlib in one dimension: Laplace(1/eps) noise, Voronoi intervals."""
    order = np.argsort(x)
    xs = x[order]
    edges = np.concatenate([[-np.inf], (xs[1:] + xs[:-1]) / 2, [np.inf]])
    lap = stats.laplace(scale=1 / eps)
    P = np.empty((len(x), len(x)))
    for j, xj in enumerate(x):
        P[j, order] = np.diff(lap.cdf(edges - xj))
    return P


@pytest.mark.parametrize("device", DEVICES)
def test_madlib_1d_output_distribution_is_exact(device):
    x = np.array([0.0, 0.3, 1.0, 1.8, 3.0, -0.9])
    emb = Embedding([f"w{i}" for i in range(len(x))], x[:, None])
    eps = 1.3
    mech = TorchMadlib(emb, epsilon=eps, device=device)
    P = exact_1d_probabilities(x, eps)
    rng = np.random.default_rng(10)
    for j in (0, 2, 5):
        out = mech.sample_ids(np.full(50_000, j), rng=rng)
        assert chi2_pvalue(out, P[j]) > P_MIN
    # control: the distribution of a different epsilon is rejected
    assert chi2_pvalue(out, exact_1d_probabilities(x, 1.6)[5]) < P_MIN


# -- exact nearest neighbour -----------------------------------------------------------------


def tie_cases() -> tuple[np.ndarray, np.ndarray]:
    """Vectors with duplicates and queries exactly equidistant from several of them."""
    vecs = np.array([[0, 0], [2, 0], [0, 2], [2, 0], [1, 1], [-2, 0], [0, -2], [1, 1]], np.float32)
    queries = np.array([[1, 0], [0, 1], [2, 0], [1, 1], [0, 0], [-1, 0], [0.5, 0.5], [1, 3], [4, 4]], np.float32)
    return vecs, queries


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_nearest_neighbour_equals_float64_reference(device, precision):
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((1500, 32)).astype(np.float32) * rng.uniform(0.5, 2, (1500, 1)).astype(np.float32)
    vecs[100] = vecs[7]  # duplicates: the lowest id wins
    vecs[1499] = vecs[7]
    base = vecs[rng.integers(0, 1500, 800)]
    queries = (base + rng.standard_normal(base.shape).astype(np.float32) * rng.uniform(0.01, 3, (800, 1)).astype(np.float32)).astype(np.float32)
    queries[:10] = vecs[7]  # exact hits on the duplicated vector
    # small blocks force the vocabulary-blocked path and the cross-block merge
    for mem in (1 << 30, 1 << 16):
        index = TorchEuclideanIndex(vecs, device=device, precision=precision, memory_bytes=mem)
        got = index.search(queries)
        np.testing.assert_array_equal(got, float64_nn(vecs, queries))
    assert (got[:10] == 7).all()
    tv, tq = tie_cases()
    np.testing.assert_array_equal(TorchEuclideanIndex(tv, device=device, precision=precision).search(tq), float64_nn(tv, tq))


def test_nearest_neighbour_check_has_power():
    """Control: without the error bound (tolerance 0) bf16 scores pick wrong neighbours."""
    rng = np.random.default_rng(8)
    vecs = rng.standard_normal((3000, 48)).astype(np.float32)
    queries = (vecs[rng.integers(0, 3000, 1500)] + 2.0 * rng.standard_normal((1500, 48))).astype(np.float32)
    ref = float64_nn(vecs, queries)
    index = TorchEuclideanIndex(vecs, device="cpu", precision="bf16")
    index.score_error_bound = lambda qn: torch.zeros_like(qn, dtype=torch.float64)
    assert (index.search(queries) != ref).sum() > 0
    approx = TorchEuclideanIndex(vecs, device="cpu", precision="bf16", exact=False)
    assert (approx.search(queries) != ref).sum() > 0


def test_nearest_neighbour_agrees_with_numpy_index():
    """Same noisy vectors, numpy's certified fp32 engine: both are the float64 nearest neighbour."""
    emb = rand_emb(2000, 32, seed=9)
    rng = np.random.default_rng(9)
    q = (emb.vectors[rng.integers(0, 2000, 4000)] + rng.standard_normal((4000, 32)) * 0.7).astype(np.float32)
    ours = TorchEuclideanIndex(emb.vectors, device="cpu").search(q)
    theirs = ExactEuclideanIndex(emb.vectors).search(q)
    ref = float64_nn(emb.vectors, q)
    np.testing.assert_array_equal(ours, ref)
    np.testing.assert_array_equal(theirs, ref)


def float64_two_nn(vectors: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference: the two least float64 distances and their ids, nearest first, lowest id on ties."""
    E = vectors.astype(np.float64)
    ids = np.empty((len(queries), 2), dtype=np.int64)
    dist = np.empty((len(queries), 2))
    for i, q in enumerate(queries.astype(np.float64)):
        d = np.sqrt(np.einsum("ij,ij->i", E - q, E - q))
        o = np.lexsort((np.arange(len(E)), d))[:2]
        ids[i], dist[i] = o, d[o]
    return ids, dist


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_two_nearest_equal_float64_reference(device, precision):
    rng = np.random.default_rng(17)
    vecs = rng.standard_normal((1200, 24)).astype(np.float32) * rng.uniform(0.5, 2, (1200, 1)).astype(np.float32)
    vecs[100] = vecs[7]  # duplicates: both come back, lowest id first
    vecs[1199] = vecs[7]
    vecs[300] = vecs[8]
    base = vecs[rng.integers(0, 1200, 600)]
    queries = (base + rng.standard_normal(base.shape).astype(np.float32) * rng.uniform(0.01, 3, (600, 1)).astype(np.float32)).astype(np.float32)
    queries[:5] = vecs[7]
    queries[5:10] = vecs[8]
    ref_ids, ref_d = float64_two_nn(vecs, queries)
    for mem in (1 << 30, 1 << 16):  # one block, and the vocabulary-blocked path with its merge
        index = TorchEuclideanIndex(vecs, device=device, precision=precision, memory_bytes=mem)
        ids, d = index.two_nearest_tensor(torch.from_numpy(queries).to(device))
        np.testing.assert_array_equal(ids.cpu().numpy(), ref_ids)
        np.testing.assert_allclose(d.cpu().numpy(), ref_d, rtol=1e-12, atol=1e-12)
    assert (ids[:5].cpu().numpy() == [7, 100]).all() and (ids[5:10].cpu().numpy() == [8, 300]).all()
    tv, tq = tie_cases()
    got, _ = TorchEuclideanIndex(tv, device=device, precision=precision).two_nearest_tensor(torch.from_numpy(tq).to(device))
    np.testing.assert_array_equal(got.cpu().numpy(), float64_two_nn(tv, tq)[0])
    with pytest.raises(ValueError, match="at least two"):
        TorchEuclideanIndex(tv[:1], device=device).two_nearest_tensor(torch.from_numpy(tq).to(device))


def test_two_nearest_check_has_power():
    """Control: without the error bound bf16 scores give wrong pairs (and the re-rank fixes them)."""
    rng = np.random.default_rng(18)
    vecs = rng.standard_normal((3000, 48)).astype(np.float32)
    queries = (vecs[rng.integers(0, 3000, 1500)] + 2.0 * rng.standard_normal((1500, 48))).astype(np.float32)
    ref, _ = float64_two_nn(vecs, queries)
    index = TorchEuclideanIndex(vecs, device="cpu", precision="bf16")
    index.score_error_bound = lambda qn: torch.zeros_like(qn, dtype=torch.float64)
    assert (index.two_nearest_tensor(torch.from_numpy(queries))[0].numpy() != ref).any(axis=1).sum() > 0
    exact = TorchEuclideanIndex(vecs, device="cpu", precision="bf16")
    np.testing.assert_array_equal(exact.two_nearest_tensor(torch.from_numpy(queries))[0].numpy(), ref)
    assert exact.stats["reranked"] > 0


def _vickrey_exact_1d():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "mechanisms" / "test_vickrey.py"
    spec = importlib.util.spec_from_file_location("_vickrey_tests", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_vickrey_1d_output_distribution_is_exact(device):
    """TorchVickrey against the exact 1-D output probabilities (Laplace noise integrated against
    the selection rule), with a control threshold that must not fit."""
    vt = _vickrey_exact_1d()
    eps, t = 3.0, 0.75
    m = get_mechanism("vickrey", vt.emb_1d(), epsilon=eps, t=t, backend="torch", device=device)
    assert isinstance(m, TorchVickrey) and m.guarantee == get_mechanism("vickrey", vt.emb_1d(), epsilon=eps, t=t).guarantee
    n, k = 100_000, len(vt.X1D)
    out = m.sample_ids(np.repeat(np.arange(k), n), rng=11).reshape(k, n)
    P = vt.exact_1d(vt.X1D, eps, t)
    for j in range(k):
        assert chi2_pvalue(out[j], P[j]) > P_MIN, j
    wrong = vt.exact_1d(vt.X1D, eps, t - 0.15)
    assert min(vt.chi2_p(out[j], wrong[j]) for j in range(k)) < 1e-6


def test_vickrey_mahalanobis_variant_matches_numpy():
    """Elliptical noise (noise='mahalanobis') in several dimensions: the torch and numpy
    samplers give the same output distribution (two-sample chi-square), and differ detectably
    from the Euclidean variant (control)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 3)) * np.array([3.0, 1.0, 0.3])
    emb = Embedding([f"w{i}" for i in range(12)], X.astype(np.float32))
    kw = {"epsilon": 2.0, "t": 0.6, "noise": "mahalanobis", "lam": 0.8}
    n = 60_000
    ours = np.bincount(get_mechanism("vickrey", emb, backend="torch", device="cpu", **kw).sample_ids(np.full(n, 4), rng=1), minlength=12)
    ref = np.bincount(get_mechanism("vickrey", emb, **kw).sample_ids(np.full(n, 4), rng=2), minlength=12)
    keep = (ours + ref) > 10
    assert stats.chi2_contingency(np.vstack([ours[keep], ref[keep]]))[1] > P_MIN
    euc = np.bincount(TorchVickrey(emb, epsilon=2.0, t=0.6, device="cpu").sample_ids(np.full(n, 4), rng=1), minlength=12)
    keep = (euc + ref) > 10
    assert stats.chi2_contingency(np.vstack([euc[keep], ref[keep]]))[1] < 1e-6
    one = Embedding(["only"], np.zeros((1, 3), np.float32))
    assert TorchVickrey(one, epsilon=1.0, device="cpu").sample_ids([0, 0, UNK_ID], rng=0).tolist() == [0, 0, 0]


# -- BRR ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("eps", [0.3, 2.0, 8.0])
def test_brr_flip_rate(device, eps):
    be = BinaryEmbedding(["a", "b"], np.zeros((2, 4), np.uint64), n_bits=256)
    mech = TorchBRR(be, epsilon=eps, device=device)
    q = mech.randomize_pm_tensor(torch.zeros(4000, dtype=torch.int64, device=device), torch_generator(3, device))
    flips = int((q.float() > 0).sum())  # code 0 is all -1: a +1 is a flipped bit
    n = q.numel()
    p = 1 / (1 + np.exp(eps))
    assert stats.binomtest(flips, n, p).pvalue > P_MIN
    # control: the rate of a 10 % larger epsilon is rejected
    assert stats.binomtest(flips, n, 1 / (1 + np.exp(1.1 * eps))).pvalue < P_MIN


@pytest.mark.parametrize("device", DEVICES)
def test_brr_output_distribution_is_exact(device):
    rng = np.random.default_rng(4)
    bits = rng.random((12, 8)) < 0.5
    bits[5] = bits[2]  # identical codes: always tied
    be = BinaryEmbedding.from_bits([f"w{i}" for i in range(12)], bits)
    mech = TorchBRR(be, epsilon=1.2, device=device)
    ref = BRR(be, epsilon=1.2, index="exact")
    for w in (0, 2, UNK_ID):
        out = mech.sample_ids(np.full(40_000, w), rng=w + 2)
        assert chi2_pvalue(out, ref.probabilities(w)) > P_MIN
    assert chi2_pvalue(out, BRR(be, epsilon=1.5, index="exact").probabilities(UNK_ID)) < P_MIN


@pytest.mark.parametrize("device", DEVICES)
def test_hamming_search_equals_numpy_engine_with_same_ties(device):
    rng = np.random.default_rng(5)
    bits = rng.random((1500, 128)) < 0.5
    bits[10:20] = bits[0]  # a block of identical codes
    be = BinaryEmbedding.from_bits([f"w{i}" for i in range(1500)], bits)
    qbits = bits[rng.integers(0, 1500, 1000)] ^ (rng.random((1000, 128)) < 0.3)
    qbits[:50] = bits[0]
    from deniable.binary.codes import pack_bits

    q = pack_bits(qbits)
    u = rng.random(1000)
    for mem in (1 << 30, 1 << 16):
        ours = TorchHammingIndex(bits, device=device, memory_bytes=mem).search(q, ties=u)
        np.testing.assert_array_equal(ours, HammingIndex(be.codes).search(q, ties=u))
    assert len(set(ours[:50].tolist())) > 5  # the tied block is spread by the uniforms


# -- TEM ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("eps,metric", [(1.0, "euclidean"), (6.0, "euclidean"), (3.0, "angular"), (2.0, "manhattan")])
def test_tem_sampling_matches_closed_form(device, eps, metric):
    emb = rand_emb(60, 4, seed=11)
    mech = TorchTEM(emb, epsilon=eps, metric=metric, precomputed_neighbors=8, cache_dir=False, device=device)
    for w in (0, 17, UNK_ID):
        out = mech.sample_ids(np.full(30_000, w), rng=w + 5)
        assert chi2_pvalue(out, mech.probabilities(w)) > P_MIN, (w, metric)
    other = TEM(emb, epsilon=eps * 1.3, metric=metric, precomputed_neighbors=8, cache_dir=False)
    assert chi2_pvalue(out, other.probabilities(UNK_ID)) < P_MIN


def test_tem_device_tables_are_the_numpy_samplers():
    """The device sampler takes the numpy mechanism's sampling tables (the envelope is built once,
    in one place) and the same number of inverse-CDF halvings."""
    emb = rand_emb(60, 4, seed=11)
    mech = TorchTEM(emb, epsilon=2.0, precomputed_neighbors=8, cache_dir=False, device="cpu")
    D = mech._device_tables()
    T = mech._get_tables()
    assert D["tables"] is T and D["halvings"] == T.halvings
    np.testing.assert_array_equal(D["cum"].numpy(), T.cum)
    np.testing.assert_array_equal(D["env"].numpy(), T.env)


def test_tem_callable_metric_falls_back_to_cpu_distances():
    emb = rand_emb(30, 3, seed=12)

    def l1(A, B):
        return np.abs(A[:, None, :] - B[None, :, :]).sum(-1)

    mech = TorchTEM(emb, epsilon=1.0, metric=l1, precomputed_neighbors=4, cache_dir=False, device="cpu")
    out = mech.sample_ids(np.full(20_000, 3), rng=1)
    assert chi2_pvalue(out, mech.probabilities(3)) > P_MIN


# -- API ----------------------------------------------------------------------------------------


def test_get_mechanism_backend_and_device():
    emb = rand_emb(50, 6)
    m = get_mechanism("madlib", emb, epsilon=2.0, backend="torch", device="cpu")
    assert isinstance(m, TorchMadlib) and m.guarantee == get_mechanism("madlib", emb, epsilon=2.0).guarantee
    assert "device='cpu'" in repr(m)
    ids = np.arange(50).reshape(5, 10)
    a = m.sample_ids(ids, rng=3)
    assert a.shape == ids.shape and a.dtype == np.int64
    np.testing.assert_array_equal(a, m.sample_ids(ids, rng=3))
    assert not np.array_equal(m.sample_ids(np.arange(50).repeat(20), rng=3), m.sample_ids(np.arange(50).repeat(20), rng=4))
    assert m.sample_ids(np.array([], dtype=np.int64)).shape == (0,)
    with pytest.raises(ValueError, match="ids must lie"):
        m.sample_ids([50])
    with pytest.raises(ValueError, match="backend must be"):
        get_mechanism("madlib", emb, epsilon=1.0, backend="jax")
    with pytest.raises(ValueError, match="needs backend='torch'"):
        get_mechanism("madlib", emb, epsilon=1.0, device="cuda")
    with pytest.raises(ValueError, match="no torch backend"):
        get_mechanism("santext", emb, epsilon=1.0, backend="torch", device="cpu")
    with pytest.raises(ValueError, match="numpy-backend option"):
        get_mechanism("madlib", emb, epsilon=1.0, backend="torch", device="cpu", index="faiss-flat")
    with pytest.raises(ValueError, match="precision"):
        get_mechanism("madlib", emb, epsilon=1.0, backend="torch", device="cpu", precision="fp8")
    with pytest.raises(ValueError, match="device"):
        get_mechanism("madlib", emb, epsilon=1.0, backend="torch", device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="device='cpu'"):
            get_mechanism("madlib", emb, epsilon=1.0, backend="torch", device="cuda")


def test_device_tensor_api_and_unk():
    emb = rand_emb(30, 4)
    m = TorchMahalanobis(emb, epsilon=1e7, lam=0.5, device="cpu")
    ids = torch.arange(30)
    assert torch.equal(m.sample_ids_tensor(ids, torch_generator(0, "cpu")), ids)  # almost no noise
    nearest_to_mean = int(np.argmin(np.linalg.norm(emb.vectors - emb.mean, axis=1)))
    assert m.sample_ids([UNK_ID, UNK_ID], rng=0).tolist() == [nearest_to_mean] * 2
    with pytest.raises(TypeError, match="integer"):
        m.sample_ids_tensor(torch.zeros(3))


def test_privatize_text_through_torch_backend():
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran"]
    rng = np.random.default_rng(0)
    emb = Embedding(words, rng.standard_normal((len(words), 4)).astype(np.float32))
    for name in ("madlib", "mahalanobis", "tem"):
        m = get_mechanism(name, emb, epsilon=1.0, backend="torch", device="cpu", **({"cache_dir": False} if name == "tem" else {}))
        out = m.privatize(["The cat sat, on the MAT!", "zebra?"], rng=1)
        assert [o.count(" ") for o in out] == [5, 0] and out[0].endswith("!") and out[1].endswith("?")
        assert "zebra" not in out[1]
        for w in out[0].replace(",", " ").replace("!", " ").split() + [out[1][:-1]]:
            assert w.lower() in words


def test_pickle_round_trip():
    import pickle

    rng = np.random.default_rng(1)
    be = BinaryEmbedding.from_bits([f"w{i}" for i in range(20)], rng.random((20, 16)) < 0.5)
    m = TorchBRR(be, epsilon=2.0, device="cpu")
    m2 = pickle.loads(pickle.dumps(m))
    assert isinstance(m2, TorchBRR) and str(m2.device) == "cpu"
    np.testing.assert_array_equal(m.sample_ids(np.arange(20), rng=5), m2.sample_ids(np.arange(20), rng=5))


def test_fp32_search_ignores_a_global_tf32_setting():
    """The search forces true fp32 products during the call and restores the caller's setting."""
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        rng = np.random.default_rng(13)
        vecs = rng.standard_normal((500, 16)).astype(np.float32)
        q = (vecs[:200] + rng.standard_normal((200, 16))).astype(np.float32)
        index = TorchEuclideanIndex(vecs, device="cpu")
        seen = []
        real = index._scores

        def spy(*a, **k):
            seen.append(torch.get_float32_matmul_precision())
            return real(*a, **k)

        index._scores = spy
        np.testing.assert_array_equal(index.search(q), float64_nn(vecs, q))
        assert seen and set(seen) == {"highest"}
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(old)


def test_vickrey_device_choice_rule_and_repr():
    """The device copy of the selection rule equals the numpy one (zeros included), and the repr
    names the search (exact or approximate, precision) as the other torch mechanisms do."""
    from deniable.backends.torch_backend import _first_probability_tensor
    from deniable.mechanisms.vickrey import vickrey_first_probability

    rng = np.random.default_rng(3)
    d1 = np.r_[0.0, 0.0, rng.uniform(0, 3, 200)]
    d2 = np.r_[0.0, 1.0, d1[2:] + rng.uniform(0, 3, 200)]
    for t in (0.0, 0.3, 0.75, 1.0):
        got = _first_probability_tensor(torch.from_numpy(d1), torch.from_numpy(d2), t).numpy()
        np.testing.assert_allclose(got, vickrey_first_probability(d1, d2, t), rtol=0, atol=1e-15)
    emb = rand_emb(20, 4)
    assert "index='torch-exact/fp32'" in repr(TorchVickrey(emb, epsilon=1.0, device="cpu"))
    assert "index='torch-approx/bf16'" in repr(TorchVickrey(emb, epsilon=1.0, device="cpu", precision="bf16", exact=False))
