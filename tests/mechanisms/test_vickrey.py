"""Vickrey: exact 1-D output probabilities (Laplace noise integrated against the selection rule),
the metric-DP inequality on all pairs, the sampler chi-square-tested against them (with a control
that must fail), the Mahalanobis variant against an independent reference, edge cases, CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, stats

from deniable import Embedding, Madlib, get_mechanism
from deniable.mechanisms.vickrey import Vickrey, vickrey_first_probability

P_MIN = 1e-4
X1D = np.array([0.0, 0.3, 1.0, 1.8, 3.0, -0.9])


def emb_1d(x: np.ndarray = X1D) -> Embedding:
    return Embedding([f"w{i}" for i in range(len(x))], x[:, None].astype(np.float32))


def exact_1d(x: np.ndarray, eps: float, t: float) -> np.ndarray:
    """P[j -> i] = integral of the Laplace(1/eps) density of z times the probability that the
    selection rule returns i at v = x_j + z (two nearest of v, nearest with prob (1-t)d2/(t d1+(1-t)d2))."""
    x = x.astype(np.float32).astype(np.float64)
    n = len(x)

    def sel(v: float) -> np.ndarray:
        d = np.abs(x - v)
        o = np.lexsort((np.arange(n), d))
        p = np.zeros(n)
        d1, d2 = d[o[0]], d[o[1]]
        p1 = (1 - t) * d2 / (t * d1 + (1 - t) * d2) if t * d1 + (1 - t) * d2 > 0 else 1 - t
        p[o[0]] += p1
        p[o[1]] += 1 - p1
        return p

    mids = [(a + b) / 2 for a in x for b in x] + list(x)
    P = np.zeros((n, n))
    for j in range(n):
        brk = sorted(set(float(m - x[j]) for m in mids))
        L = 60.0 / eps + 10
        edges = [-L] + [b for b in brk if -L < b < L] + [L]
        for i in range(n):
            tot = 0.0
            for a, b in itertools.pairwise(edges):
                tot += integrate.quad(lambda z: 0.5 * eps * np.exp(-eps * abs(z)) * sel(x[j] + z)[i], a, b, epsabs=1e-12, epsrel=1e-10)[0]
            P[j, i] = tot
    return P


def chi2_p(samples: np.ndarray, p: np.ndarray) -> float:
    obs = np.bincount(samples, minlength=p.size).astype(float)
    exp = p * samples.size
    keep = exp > 5
    other_o, other_e = obs[~keep].sum(), exp[~keep].sum()
    o = np.r_[obs[keep], other_o] if other_e > 0 else obs[keep]
    e = np.r_[exp[keep], other_e] if other_e > 0 else exp[keep]
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)


def test_selection_rule() -> None:
    np.testing.assert_allclose(vickrey_first_probability([1.0], [3.0], 0.5), [0.75])
    np.testing.assert_allclose(vickrey_first_probability([1.0, 2.0], [3.0, 2.0], 0.0), [1.0, 1.0])
    np.testing.assert_allclose(vickrey_first_probability([1.0], [3.0], 1.0), [0.0])
    np.testing.assert_allclose(vickrey_first_probability([0.0], [0.0], 0.75), [0.25])


@pytest.mark.slow
@pytest.mark.parametrize("eps,t", [(0.7, 0.5), (3.0, 0.75)])
def test_exact_1d_distribution_metric_dp_and_sampler(eps: float, t: float) -> None:
    mech = Vickrey(emb_1d(), epsilon=eps, t=t)
    P = exact_1d(X1D, eps, t)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-7)
    d = np.abs(X1D[:, None] - X1D[None, :])
    for j in range(len(X1D)):
        for k in range(len(X1D)):
            assert np.all(P[j] <= np.exp(eps * d[j, k]) * P[k] * (1 + 1e-6))
    n = 100_000
    out = mech.sample_ids(np.repeat(np.arange(len(X1D)), n), rng=7).reshape(len(X1D), n)
    for j in range(len(X1D)):
        assert chi2_p(out[j], P[j]) > P_MIN, j
    # control: the same draws do not fit another threshold
    wrong = exact_1d(X1D, eps, t - 0.15)
    assert min(chi2_p(out[j], wrong[j]) for j in range(len(X1D))) < 1e-6


def test_t_zero_is_madlib() -> None:
    emb = emb_1d()
    a = Vickrey(emb, epsilon=2.0, t=0.0).sample_ids(np.repeat(np.arange(6), 1300), rng=3)
    b = Madlib(emb, epsilon=2.0).sample_ids(np.repeat(np.arange(6), 1300), rng=3)
    np.testing.assert_array_equal(a, b)  # one batch, same noise stream; t = 0 always keeps the nearest


def _reference_mahalanobis(mech: Vickrey, word: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Independent reference: noise from the Mahalanobis sampler, brute-force two nearest, rule."""
    X = mech.embedding.vectors.astype(np.float64)
    v = X[word] + mech.sample_noise(n, rng)
    D = np.linalg.norm(v[:, None, :] - X[None, :, :], axis=2)
    o = np.argsort(D, axis=1, kind="stable")[:, :2]
    d1 = np.take_along_axis(D, o[:, :1], axis=1)[:, 0]
    d2 = np.take_along_axis(D, o[:, 1:2], axis=1)[:, 0]
    p1 = (1 - mech.t) * d2 / (mech.t * d1 + (1 - mech.t) * d2)
    return np.where(rng.random(n) < p1, o[:, 0], o[:, 1])


def test_mahalanobis_variant_matches_reference() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 3)) * np.array([3.0, 1.0, 0.3])
    emb = Embedding([f"w{i}" for i in range(12)], X.astype(np.float32))
    mech = Vickrey(emb, epsilon=2.0, t=0.6, noise="mahalanobis", lam=0.8)
    n = 60_000
    ours = np.bincount(mech.sample_ids(np.full(n, 4), rng=1), minlength=12)
    ref = np.bincount(_reference_mahalanobis(mech, 4, n, np.random.default_rng(2)), minlength=12)
    keep = (ours + ref) > 10
    assert stats.chi2_contingency(np.vstack([ours[keep], ref[keep]]))[1] > P_MIN
    # control: the Euclidean variant differs detectably from the Mahalanobis reference
    euc = np.bincount(Vickrey(emb, epsilon=2.0, t=0.6).sample_ids(np.full(n, 4), rng=1), minlength=12)
    keep = (euc + ref) > 10
    assert stats.chi2_contingency(np.vstack([euc[keep], ref[keep]]))[1] < 1e-6
    # the guarantee's metric is the regularized Mahalanobis distance
    a, b = np.array([1]), np.array([7])
    assert mech.distance(a, b)[0] == pytest.approx(float(mech.rm_norm(X[1] - X[7])[0]), rel=1e-5)
    assert "Mahalanobis" in mech.guarantee.metric and "lam=0.8" in repr(mech)


@pytest.mark.parametrize("index", ["exact", "exact-bf16"])
def test_two_nearest_are_the_float64_two_nearest(index: str) -> None:
    """The two words the rule chooses between are the float64 two nearest (ties to the lowest id),
    also where float32 scores cannot tell them apart (vectors of norm ~1e4, gaps O(1)) and for
    duplicated vectors; they come from the index's k-NN API (``knn(q, 2)``)."""
    if index == "exact-bf16":
        pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    X = (1e4 + rng.standard_normal((300, 8))).astype(np.float32)
    X[200] = X[17]
    mech = Vickrey(Embedding([f"w{i}" for i in range(300)], X), epsilon=5.0, index=index)
    q = np.vstack([(1e4 + rng.standard_normal((200, 8))), X[[200]]]).astype(np.float32)
    ids, dist = mech._two_nearest(q)
    d = np.sqrt(((q[:, None, :].astype(np.float64) - X[None].astype(np.float64)) ** 2).sum(-1))
    ref = np.array([np.lexsort((np.arange(300), row))[:2] for row in d])
    np.testing.assert_array_equal(ids, ref)
    np.testing.assert_allclose(dist, np.take_along_axis(d, ref, axis=1), rtol=1e-12)
    assert ids[-1].tolist() == [17, 200]


def test_interface_validation_and_oov() -> None:
    emb = emb_1d()
    m = get_mechanism("vickrey", emb, epsilon=5.0, t=0.5)
    assert isinstance(m, Vickrey) and "Euclidean" in m.guarantee.metric and "t=0.5" in repr(m)
    out = m.sample_ids(np.array([[0, -1], [5, 2]]), rng=0)
    assert out.shape == (2, 2) and ((out >= 0) & (out < 6)).all()
    assert "zzz" not in m.privatize("w1 zzz", rng=0)
    single = Vickrey(Embedding(["a"], np.ones((1, 2), np.float32)), epsilon=1.0)
    np.testing.assert_array_equal(single.sample_ids([0, -1], rng=0), [0, 0])
    for kwargs, exc in [(dict(t=1.5), ValueError), (dict(t="x"), TypeError), (dict(noise="cosine"), ValueError), (dict(lam=0.5), ValueError), (dict(noise="mahalanobis", lam=2.0), ValueError)]:
        with pytest.raises(exc):
            Vickrey(emb, epsilon=1.0, **kwargs)


def test_cli_params(tmp_path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    rng = np.random.default_rng(0)
    vec = tmp_path / "emb.txt"
    vec.write_text("\n".join(f"w{i} " + " ".join(f"{x:.5f}" for x in rng.standard_normal(4)) for i in range(30)) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 qqq\n")
    for params in (["--param", "t=0.5"], ["--param", "noise=mahalanobis", "--param", "lam=0.3"]):
        out = tmp_path / "out.txt"
        res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(out), "-m", "vickrey", "-e", "5", "--embedding", str(vec), "--seed", "1", *params])
        assert res.exit_code == 0, res.output
        assert len(out.read_text().split()) == 3 and "qqq" not in out.read_text()


def test_noise_parameter_and_its_deprecated_alias_metric() -> None:
    """``noise=`` chooses the noise family; ``metric=`` is a deprecated alias (a warning naming
    ``noise=``, the same samples for a seed); both given and different is an error; ``params``,
    ``repr`` and the guarantee speak of ``noise``."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 3)) * np.array([3.0, 1.0, 0.3])
    emb = Embedding([f"w{i}" for i in range(12)], X.astype(np.float32))
    ids = np.tile(np.arange(12), 200)
    for noise, kw in (("euclidean", {}), ("mahalanobis", {"lam": 0.8})):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # noise= itself never warns
            new = Vickrey(emb, epsilon=2.0, t=0.6, noise=noise, **kw)
        with pytest.warns(DeprecationWarning, match="noise="):
            old = Vickrey(emb, epsilon=2.0, t=0.6, metric=noise, **kw)
        with pytest.warns(DeprecationWarning):
            both = Vickrey(emb, epsilon=2.0, t=0.6, noise=noise, metric=noise, **kw)
        assert new.noise == old.noise == both.noise == noise
        assert new.params == old.params and new.params["noise"] == noise and "metric" not in new.params
        assert f"noise='{noise}'" in repr(new) and "metric=" not in repr(new) and repr(new) == repr(old)
        assert new.guarantee == old.guarantee
        np.testing.assert_array_equal(new.sample_ids(ids, rng=7), old.sample_ids(ids, rng=7))
    # control: the two noise families give different samples for the same seed
    euc = Vickrey(emb, epsilon=2.0, t=0.6, noise="euclidean").sample_ids(ids, rng=7)
    mhl = Vickrey(emb, epsilon=2.0, t=0.6, noise="mahalanobis", lam=0.8).sample_ids(ids, rng=7)
    assert (euc != mhl).any()
    assert Vickrey(emb, epsilon=2.0).noise == "euclidean"
    assert "Mahalanobis" in Vickrey(emb, epsilon=2.0, noise="mahalanobis").guarantee.metric
    assert "Euclidean" in Vickrey(emb, epsilon=2.0).guarantee.metric
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="noise='mahalanobis'.*metric='euclidean'"):
        Vickrey(emb, epsilon=2.0, noise="mahalanobis", metric="euclidean", lam=0.8)
    with pytest.raises(ValueError, match="noise must be one of"):
        Vickrey(emb, epsilon=2.0, noise="cosine")
    with pytest.raises(ValueError, match="noise='mahalanobis'"):
        Vickrey(emb, epsilon=2.0, lam=0.5)
    with pytest.warns(DeprecationWarning):
        via_registry = get_mechanism("vickrey", emb, epsilon=2.0, metric="mahalanobis")
    assert via_registry.params == get_mechanism("vickrey", emb, epsilon=2.0, noise="mahalanobis").params
