"""CusText: output sets (a partition covering every word, against a brute-force construction),
closed form vs brute force, ε-DP on all pairs inside each set (with a control that must fail),
exact sampling (chi-square), OOV, registry and CLI."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from deniable import Embedding, get_mechanism
from deniable.mechanisms.custext import CusText, build_output_sets

from ._metric_dp import assert_metric_dp, distance_matrix, log_rows, metric_dp_excess

N_DRAWS = 60_000
P_MIN = 1e-4


def make_embedding(n: int = 47, dim: int = 4, seed: int = 1) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def brute_sets(X: np.ndarray, K: int) -> list[list[int]]:
    X = X.astype(np.float64)
    free = list(range(len(X)))
    sets = []
    while free:
        h = free[0]
        d = sorted(free, key=lambda j: (float(np.sqrt(((X[h] - X[j]) ** 2).sum())) if j != h else -1.0, j))
        m = d[:K]
        sets.append(m)
        free = [j for j in free if j not in m]
    return sets


def brute_probs(x: np.ndarray, X: np.ndarray, members: list[int], eps: float) -> np.ndarray:
    d = np.array([np.sqrt(((x.astype(np.float64) - X[j].astype(np.float64)) ** 2).sum()) for j in members])
    u = (d.max() - d) / (d.max() - d.min()) if d.max() > d.min() else np.ones_like(d)
    w = np.exp(eps * u / 2)
    p = np.zeros(len(X))
    p[members] = w / w.sum()
    return p


def chi2_pvalue(samples: np.ndarray, p: np.ndarray) -> float:
    obs = np.bincount(samples, minlength=p.size).astype(float)
    assert obs[p == 0].sum() == 0, "sampled an output of probability 0"
    exp = p * samples.size
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep]).pvalue)


@pytest.mark.parametrize("K", [1, 5, 20])
def test_output_sets_partition_every_word_and_match_bruteforce(K: int) -> None:
    emb = make_embedding()
    members = build_output_sets(emb, K, k_lists=3, cache_dir=False)  # short lists: exercises the exact-scan fallback
    flat = members[members >= 0]
    assert sorted(flat.tolist()) == list(range(len(emb)))
    assert (np.count_nonzero(members >= 0, axis=1)[:-1] == K).all()
    got = [sorted(m[m >= 0].tolist()) for m in members]
    assert got == [sorted(s) for s in brute_sets(emb.vectors, K)]
    np.testing.assert_array_equal(members, build_output_sets(emb, K, k_lists=128, cache_dir=False))


@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_closed_form_and_dp_inside_every_set(eps: float) -> None:
    emb = make_embedding()
    mech = CusText(emb, epsilon=eps, K=6, cache_dir=False)
    sets = brute_sets(emb.vectors, 6)
    X = emb.vectors
    mean = X.astype(np.float64).mean(axis=0).astype(np.float32)
    P = {}
    for s in sets:
        for x in s:
            P[x] = brute_probs(X[x], X, s, eps)
            np.testing.assert_allclose(mech.probabilities(x), P[x], rtol=1e-9, atol=1e-15)
            assert sorted(mech.output_set(x)) == sorted(f"w{j}" for j in s)
    nearest = int(np.argmin(np.linalg.norm(X.astype(np.float64) - mean, axis=1)))
    unk_set = next(s for s in sets if nearest in s)
    P[-1] = brute_probs(mean, X, unk_set, eps)
    np.testing.assert_allclose(mech.probabilities(-1), P[-1], rtol=1e-9, atol=1e-15)
    rows = list(P)
    assert_metric_dp(mech.log_probability_rows(rows), distance_matrix(mech, rows), eps)  # ∞ across sets: no bound
    worst = 0.0
    for a in P:
        for b in P:
            d = mech.distance(np.array([a]), np.array([b]))[0]
            if np.isfinite(d):
                m = (P[a] > 0) & (P[b] > 0)
                worst = max(worst, float(np.max(np.log(P[a][m] / P[b][m]))))
            else:  # different sets: disjoint supports
                assert not np.any((P[a] > 0) & (P[b] > 0))
    assert worst > 0.5 * eps  # the bound is approached
    # control: scores without the 1/2 (exp(eps*u)) break the bound inside some set
    bad_excess = -np.inf
    for s in sets:
        Q = []
        for x in s:
            d = np.array([np.linalg.norm(X[x].astype(np.float64) - X[j]) for j in s])
            u = (d.max() - d) / (d.max() - d.min())
            Q.append(np.exp(eps * u) / np.exp(eps * u).sum())
        bad_excess = max(bad_excess, metric_dp_excess(log_rows(Q), 1.0 - np.eye(len(s)), eps))  # d = 1 inside a set
    assert bad_excess > np.log(1.01)


def test_sampler_is_exact_and_control_fails() -> None:
    emb = make_embedding()
    mech = CusText(emb, epsilon=2.0, K=8, cache_dir=False)
    words = [0, 9, 46, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=3).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, w
    wrong = CusText(emb, epsilon=2.3, K=8, cache_dir=False)
    assert chi2_pvalue(out[0], wrong.probabilities(0)) < 1e-6


def test_extremes() -> None:
    emb = make_embedding()
    one = CusText(emb, epsilon=1.0, K=1, cache_dir=False)  # every word is its own set: identity
    ids = np.arange(47)
    np.testing.assert_array_equal(one.sample_ids(ids, rng=0), ids)
    big = CusText(emb, epsilon=1e-9, K=100, cache_dir=False)  # one set, near-uniform
    np.testing.assert_allclose(big.probabilities(3), 1 / 47, rtol=1e-6)
    assert big.distance(np.array([0]), np.array([40]))[0] == 1.0


def test_interface_cache_registry_repr(tmp_path) -> None:
    emb = make_embedding()
    m = get_mechanism("custext", emb, epsilon=3.0, K=5, cache_dir=tmp_path)
    assert isinstance(m, CusText)
    out = m.sample_ids(np.array([[0, -1], [5, 46]]), rng=0)
    assert out.shape == (2, 2) and ((out >= 0) & (out < 47)).all()
    assert m.cache_file is not None and m.cache_file.exists()
    m2 = CusText(emb, epsilon=1.0, K=5, cache_dir=tmp_path)
    np.testing.assert_array_equal(m2.precompute(), m.precompute())
    g = m.guarantee
    assert g.epsilon == 3.0 and "output set" in g.metric and "UNK" in g.domain
    assert "CusText(epsilon=3" in repr(m) and "K=5" in repr(m)
    assert m.privacy_loss_bound(0, 0) == 0.0
    text = m.privatize("w1 zzz", rng=0)
    assert "zzz" not in text
    for kwargs, exc in [(dict(K=0), ValueError), (dict(K=2.0), TypeError), (dict(metric="manhattan"), ValueError), (dict(cache_dir=1), TypeError)]:
        with pytest.raises(exc):
            CusText(emb, epsilon=1.0, **kwargs)


def test_angular_metric() -> None:
    emb = make_embedding()
    m = CusText(emb, epsilon=2.0, K=4, metric="angular", cache_dir=False)
    members = m.precompute()
    assert sorted(members[members >= 0].tolist()) == list(range(47))
    out = m.sample_ids(np.full(N_DRAWS, 7), rng=2)
    assert chi2_pvalue(out, m.probabilities(7)) > P_MIN


def test_cli_params(tmp_path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    emb = make_embedding()
    vec = tmp_path / "emb.txt"
    vec.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(emb.words, emb.vectors)) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 qqq\n")
    out = tmp_path / "out.txt"
    res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(out), "-m", "custext", "-e", "2", "--embedding", str(vec), "--param", "K=5", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert len(out.read_text().split()) == 3 and "qqq" not in out.read_text()
