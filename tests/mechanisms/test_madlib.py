"""Madlib and Mahalanobis: noise samplers against their closed forms, exact 1-D output
probabilities against the sampler, the metric-DP inequality, parameter validation."""

import numpy as np
import pytest
from scipy import stats

from deniable import UNK_ID, Embedding, Madlib, Mahalanobis, get_mechanism
from deniable.mechanisms.madlib import sample_laplace_directions

from ._metric_dp import assert_metric_dp, log_rows

P_MIN = 1e-4  # statistical tests fail below this p-value (fixed seeds)


def rand_emb(n=40, d=5, seed=0, scales=None):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, d))
    if scales is not None:
        v = v * np.asarray(scales)
    return Embedding([f"w{i}" for i in range(n)], v.astype(np.float32))


@pytest.mark.parametrize("d,eps", [(1, 0.5), (5, 2.0), (300, 10.0)])
def test_noise_magnitude_is_gamma(d, eps):
    z = sample_laplace_directions(20_000, d, eps, np.random.default_rng(1))
    r = np.linalg.norm(z, axis=1)
    assert stats.kstest(r, stats.gamma(a=d, scale=1 / eps).cdf).pvalue > P_MIN


def test_wrong_scale_is_detected():
    """The KS test above has power: a magnitude drawn with scale eps instead of 1/eps fails."""
    r = np.random.default_rng(1).gamma(5, 2.0, 20_000)
    assert stats.kstest(r, stats.gamma(a=5, scale=1 / 2.0).cdf).pvalue < P_MIN


@pytest.mark.parametrize("d", [3, 50])
def test_noise_directions_are_uniform(d):
    z = sample_laplace_directions(20_000, d, 1.0, np.random.default_rng(2))
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    axis = np.random.default_rng(3).standard_normal(d)
    axis /= np.linalg.norm(axis)
    for proj in (u[:, 0], u @ axis):
        assert stats.kstest((proj + 1) / 2, beta.cdf).pvalue > P_MIN


def exact_1d_probabilities(x: np.ndarray, eps: float) -> np.ndarray:
    """P[M(x_j) = x_i] for Madlib in one dimension: Laplace(1/eps) noise, Voronoi intervals."""
    order = np.argsort(x)
    xs = x[order]
    mids = (xs[1:] + xs[:-1]) / 2
    edges = np.concatenate([[-np.inf], mids, [np.inf]])
    lap = stats.laplace(scale=1 / eps)
    P = np.empty((len(x), len(x)))
    for j, xj in enumerate(x):
        cdf = lap.cdf(edges - xj)
        P[j, order] = np.diff(cdf)
    return P


@pytest.mark.parametrize("eps", [0.7, 3.0])
def test_madlib_1d_matches_exact_distribution(eps):
    x = np.array([0.0, 0.3, 1.0, 1.8, 3.0, -0.9])
    emb = Embedding([f"w{i}" for i in range(len(x))], x[:, None])
    mech = Madlib(emb, epsilon=eps)
    P = exact_1d_probabilities(x, eps)
    np.testing.assert_allclose(P.sum(1), 1.0)
    # metric-DP inequality on every pair, exactly
    assert_metric_dp(log_rows(P), np.abs(x[:, None] - x[None, :]), eps)
    rng = np.random.default_rng(10)
    n = 100_000
    for j in range(len(x)):
        out = mech.sample_ids(np.full(n, j), rng=rng)
        counts = np.bincount(out, minlength=len(x))
        expected = P[j] * n
        keep = expected > 5
        chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
        assert stats.chi2(keep.sum() - 1).sf(chi2) > P_MIN
        assert counts[~keep].sum() <= max(20, 5 * expected[~keep].sum())


def test_mahalanobis_noise_rm_norm_is_gamma():
    emb = rand_emb(200, 6, scales=[5, 1, 1, 0.5, 0.2, 2])
    mech = Mahalanobis(emb, epsilon=2.0, lam=0.7)
    z = mech.sample_noise(20_000, np.random.default_rng(4))
    assert stats.kstest(mech.rm_norm(z), stats.gamma(a=6, scale=0.5).cdf).pvalue > P_MIN


def test_mahalanobis_noise_covariance_shape():
    """E[ZZ^T] = E[Y^2]/d * Sigma_lam = (d+1)/eps^2 * Sigma_lam for Z = Y Sigma_lam^{1/2} X."""
    emb = rand_emb(500, 4, scales=[4, 1, 0.5, 0.25], seed=5)
    eps, lam, d = 3.0, 0.8, 4
    mech = Mahalanobis(emb, epsilon=eps, lam=lam)
    z = mech.sample_noise(400_000, np.random.default_rng(6))
    emp = z.T @ z / len(z)
    want = (d + 1) / eps**2 * (lam * mech.sigma + (1 - lam) * np.eye(d))
    assert np.abs(emp - want).max() <= 0.03 * np.abs(want).max()
    assert np.isclose(np.trace(mech.sigma), d)


def test_scaled_covariance_trace():
    from deniable.mechanisms.mahalanobis import scaled_covariance

    v = np.random.default_rng(0).standard_normal((100, 7)) * np.arange(1, 8)
    s = scaled_covariance(v)
    assert np.isclose(np.trace(s), 7)
    np.testing.assert_allclose(s / s[0, 0], np.cov(v, rowvar=False) / np.cov(v, rowvar=False)[0, 0])


def test_lambda_zero_is_madlib():
    emb = rand_emb(300, 8)
    ids = np.arange(300).repeat(20)
    a = Madlib(emb, epsilon=1.5).sample_ids(ids, rng=7)
    b = Mahalanobis(emb, epsilon=1.5, lam=0.0).sample_ids(ids, rng=7)
    np.testing.assert_array_equal(a, b)


def test_mahalanobis_distance_is_rm_norm():
    emb = rand_emb(50, 3, scales=[3, 1, 0.3])
    mech = Mahalanobis(emb, epsilon=1.0, lam=1.0)
    diff = emb.vectors[2].astype(np.float64) - emb.vectors[5]
    want = np.sqrt(diff @ np.linalg.inv(mech.sigma) @ diff)
    assert np.isclose(mech.distance(np.array([2]), np.array([5]))[0], want)
    assert np.isclose(mech.privacy_loss_bound("w2", "w5"), want)


def test_sample_ids_shape_unk_and_large_epsilon():
    emb = rand_emb(30, 4)
    mech = Madlib(emb, epsilon=1e7)
    ids = np.arange(30).reshape(5, 6)
    np.testing.assert_array_equal(mech.sample_ids(ids, rng=0), ids)  # almost no noise
    nearest_to_mean = int(np.argmin(np.linalg.norm(emb.vectors - emb.mean, axis=1)))
    assert mech.sample_ids([UNK_ID, UNK_ID], rng=0).tolist() == [nearest_to_mean] * 2
    assert mech.sample_ids(np.array([], dtype=np.int64)).shape == (0,)
    with pytest.raises(ValueError, match="ids must lie"):
        mech.sample_ids([30])
    with pytest.raises(ValueError, match="ids must lie"):
        mech.sample_ids([-2])
    with pytest.raises(TypeError, match="integer"):
        mech.sample_ids([0.5])


def test_reproducible_with_seed_and_generator():
    emb = rand_emb(100, 5)
    mech = Madlib(emb, epsilon=2.0)
    ids = np.arange(100)
    np.testing.assert_array_equal(mech.sample_ids(ids, rng=3), mech.sample_ids(ids, rng=3))
    np.testing.assert_array_equal(
        mech.sample_ids(ids, rng=np.random.default_rng(3)), mech.sample_ids(ids, rng=3)
    )
    assert not np.array_equal(mech.sample_ids(ids, rng=3), mech.sample_ids(ids, rng=4))


@pytest.mark.parametrize("cls", [Madlib, Mahalanobis])
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_epsilon_values_rejected(cls, bad):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        cls(rand_emb(), epsilon=bad)


@pytest.mark.parametrize("bad", ["1", True, None, 1j])
def test_epsilon_types_rejected(bad):
    with pytest.raises(TypeError, match="epsilon"):
        Madlib(rand_emb(), epsilon=bad)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_lambda_rejected(bad):
    with pytest.raises(ValueError, match="lam must be in"):
        Mahalanobis(rand_emb(), epsilon=1.0, lam=bad)


def test_singular_covariance_explained():
    emb = rand_emb(n=3, d=5)  # fewer words than dimensions
    with pytest.raises(ValueError, match="singular"):
        Mahalanobis(emb, epsilon=1.0, lam=1.0)
    Mahalanobis(emb, epsilon=1.0, lam=0.5)  # regularization fixes it


def test_keyword_only_and_embedding_type():
    with pytest.raises(TypeError):
        Madlib(rand_emb(), 1.0)  # epsilon must be keyword
    with pytest.raises(TypeError, match="deniable.Embedding"):
        Madlib(np.eye(3), epsilon=1.0)


def test_guarantee_stated():
    emb = rand_emb()
    for mech in (Madlib(emb, epsilon=3.0), Mahalanobis(emb, epsilon=3.0, lam=0.25)):
        g = mech.guarantee
        assert g.epsilon == 3.0 and "distance" in g.metric and "UNK" in g.domain
        assert "epsilon=3" in repr(mech) and g.metric in repr(mech)
        assert "Guarantee" in type(mech).__doc__


def test_registry():
    from deniable import available_mechanisms, register_mechanism

    emb = rand_emb()
    assert isinstance(get_mechanism("madlib", emb, epsilon=1.0), Madlib)
    m = get_mechanism("mahalanobis", emb, epsilon=1.0, lam=0.3)
    assert isinstance(m, Mahalanobis) and m.lam == 0.3
    assert {"madlib", "mahalanobis", "tem", "brr"} <= set(available_mechanisms())
    with pytest.raises(ValueError, match="unknown mechanism 'nope'; known mechanisms: .*madlib"):
        get_mechanism("nope", emb, epsilon=1.0)
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism("madlib", Madlib)
    with pytest.raises(TypeError):
        get_mechanism("madlib", emb, epsilon=1.0, lamda=0.5)  # misspelt parameter is not ignored


def test_default_embedding_mechanism_privatizes():
    mech = get_mechanism("madlib", epsilon=50.0)
    out = mech.privatize("The cat sat on the mat.", rng=0)
    assert out.endswith(".") and out[0].isupper()


def test_faiss_index_option():
    pytest.importorskip("faiss")
    emb = rand_emb(500, 8)
    ids = np.arange(500).repeat(4)
    a = Madlib(emb, epsilon=2.0).sample_ids(ids, rng=1)
    b = Madlib(emb, epsilon=2.0, index="faiss-flat").sample_ids(ids, rng=1)
    assert (a == b).mean() > 0.99  # exact both; float rounding may flip near-ties
