"""k-nearest TEM: closed form vs an independent brute-force Gumbel-max-over-top-k-and-⊥ model,
the metric-DP inequality on all pairs (and a control that must fail), exact sampling (chi-square
against the closed form, controls that must fail), edge cases, registry and CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.mechanisms.knn_tem import KnnTEM

from .._stats import chi2_pvalue
from ._metric_dp import ATOL, assert_metric_dp, log_rows, metric_dp_excess

N_DRAWS = 100_000
P_MIN = 1e-4


def make_embedding(n: int = 40, dim: int = 5, seed: int = 4) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def brute(emb: Embedding, eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Gumbel-max over the k nearest (scores -d) and bottom (score -d_k + 2 ln(V - k)/eps, then
    uniform over the rest), evaluated in closed form. Rows: words then UNK."""
    pts = np.vstack([emb.vectors, emb.vectors.astype(np.float64).mean(axis=0).astype(np.float32)[None]]).astype(np.float64)
    V = len(emb)
    D = np.array([[math.sqrt(sum((a - b) ** 2 for a, b in zip(x, y))) for y in pts] for x in pts])
    P = np.zeros((V + 1, V))
    for r in range(V + 1):
        order = sorted(range(V), key=lambda j: (D[r, j], j))
        L, rest = order[:k], order[k:]
        scores = [-D[r, j] for j in L]
        if rest:
            scores.append(-D[r, L[-1]] + 2 * math.log(len(rest)) / eps)
        s = np.array(scores) * eps / 2
        q = np.exp(s - s.max())
        q /= q.sum()
        P[r, L] = q[: len(L)]
        if rest:
            P[r, rest] = q[-1] / len(rest)
    return P, D


@pytest.mark.parametrize("eps,k", [(0.5, 3), (4.0, 5), (4.0, 40), (20.0, 10)])
def test_closed_form_bruteforce_and_metric_dp(eps: float, k: int) -> None:
    emb = make_embedding()
    mech = KnnTEM(emb, epsilon=eps, k=k, cache_dir=False)
    P, D = brute(emb, eps, k)
    ours = np.array([mech.probabilities(i) for i in range(40)] + [mech.probabilities(-1)])
    np.testing.assert_allclose(ours, P, rtol=1e-9, atol=1e-300)
    assert_metric_dp(mech.log_probability_rows(np.r_[np.arange(40), -1]), D, eps)
    assert mech.privacy_loss_bound(2, 30) == pytest.approx(eps * D[2, 30], rel=1e-9)


def test_metric_dp_check_has_teeth() -> None:
    """A truncation radius that is not 1-Lipschitz (twice the k-th distance) breaks the bound."""
    emb = make_embedding()
    eps, k = 4.0, 3
    pts = np.vstack([emb.vectors, emb.vectors.astype(np.float64).mean(axis=0)[None]]).astype(np.float64)
    D = np.linalg.norm(pts[:, None] - pts[None, :], axis=2)
    dk = np.sort(D[:, :40], axis=1)[:, k - 1]
    bad = np.exp(-eps / 2 * np.minimum(D[:, :40], 3 * dk[:, None]))
    bad /= bad.sum(axis=1, keepdims=True)
    assert metric_dp_excess(log_rows(bad), D, eps) > ATOL


@pytest.mark.parametrize("eps,k", [(1.0, 3), (6.0, 8), (2.0, 40)])
def test_sampler_is_exact(eps: float, k: int) -> None:
    emb = make_embedding()
    mech = KnnTEM(emb, epsilon=eps, k=k, cache_dir=False)
    words = [0, 21, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=8).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, (eps, k, w)
    if eps >= 5:  # controls (where the alternatives differ enough): another k, another epsilon
        assert chi2_pvalue(out[0], KnnTEM(emb, epsilon=eps, k=k + 2, cache_dir=False).probabilities(0)) < 1e-6
        assert chi2_pvalue(out[0], KnnTEM(emb, epsilon=eps * 1.15, k=k, cache_dir=False).probabilities(0)) < 1e-6


def test_truncation_radius_and_edges() -> None:
    emb = make_embedding()
    m = KnnTEM(emb, epsilon=2.0, k=4, cache_dir=False)
    d = np.sort(np.linalg.norm(emb.vectors.astype(np.float64) - emb.vectors[7].astype(np.float64), axis=1))
    assert m.truncation_radius(7) == pytest.approx(d[3], rel=1e-12)
    assert KnnTEM(emb, epsilon=2.0, k=100, cache_dir=False).truncation_radius(7) == math.inf
    one = KnnTEM(emb, epsilon=2.0, k=1, cache_dir=False)  # L_x = {x}: bottom spreads evenly
    p = one.probabilities(5)
    assert p[5] == pytest.approx(1 / (1 + 39 * math.exp(0)), rel=1e-12)  # gamma_x = 0: uniform
    single = KnnTEM(Embedding(["a"], np.ones((1, 2), np.float32)), epsilon=1.0, cache_dir=False)
    np.testing.assert_array_equal(single.sample_ids([0, -1], rng=0), [0, 0])


def test_interface_registry_cli(tmp_path) -> None:
    emb = make_embedding()
    m = get_mechanism("knn_tem", emb, epsilon=3.0, k=6, cache_dir=False)
    assert isinstance(m, KnnTEM) and "Euclidean" in m.guarantee.metric and "k=6" in repr(m)
    out = m.sample_ids(np.array([[0, -1], [3, 39]]), rng=0)
    assert out.shape == (2, 2) and ((out >= 0) & (out < 40)).all()
    assert "zzz" not in m.privatize("w1 zzz", rng=0)
    for kwargs, exc in [(dict(k=0), ValueError), (dict(k=1.5), TypeError), (dict(metric="cosine"), ValueError), (dict(cache_dir=2), TypeError)]:
        with pytest.raises(exc):
            KnnTEM(emb, epsilon=1.0, **kwargs)
    from click.testing import CliRunner

    from deniable.cli.main import cli

    vec = tmp_path / "emb.txt"
    vec.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(emb.words, emb.vectors)) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 qqq\n")
    res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(tmp_path / "o.txt"), "-m", "knn_tem", "-e", "3", "--embedding", str(vec), "--param", "k=5", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert "qqq" not in (tmp_path / "o.txt").read_text()


@pytest.mark.parametrize("k", [1, 7, 40])
def test_self_probabilities_match_the_brute_force_on_every_word(k: int) -> None:
    emb = make_embedding()
    V = len(emb)
    grid = np.geomspace(0.05, 80, 9)
    got = get_mechanism("knn_tem", emb, epsilon=1.0, k=k).self_probabilities(np.arange(V), grid)
    want = np.array([np.diag(brute(emb, e, k)[0][:V]) for e in grid]).T
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    if k < V:  # control: without the truncation the values differ
        untrunc = np.array([np.diag(brute(emb, e, V)[0][:V]) for e in grid]).T
        assert not np.allclose(got, untrunc, rtol=1e-3)


@pytest.mark.parametrize("k", [1, 7, 40])
def test_log_probability_rows_match_the_brute_force(k: int) -> None:
    emb = make_embedding()
    ids = np.r_[np.arange(len(emb)), -1]  # every word, then UNK (the brute force's last row)
    got = get_mechanism("knn_tem", emb, epsilon=1.7, k=k).log_probability_rows(ids, block=7)
    np.testing.assert_allclose(np.exp(got), brute(emb, 1.7, k)[0], rtol=1e-9, atol=1e-300)
    if k < len(emb):  # control: without the truncation the rows differ
        assert not np.allclose(np.exp(got), brute(emb, 1.7, len(emb))[0], rtol=1e-3)
