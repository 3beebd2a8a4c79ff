"""SanText and SanText+: closed form vs an independent brute force, metric DP on all pairs (and
where it fails for SanText+'s non-sensitive words), exact sampling (chi-square against the closed
form, with a control that must fail), OOV, registry and CLI parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from deniable import Embedding, get_mechanism
from deniable.mechanisms.santext import SanText, SanTextPlus

from ._metric_dp import ATOL, assert_metric_dp, distance_matrix, log_rows, metric_dp_excess

N_DRAWS = 100_000
P_MIN = 1e-4


def make_embedding(n: int = 40, dim: int = 5, seed: int = 0) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def brute_points(emb: Embedding) -> np.ndarray:
    return np.vstack([emb.vectors, emb.vectors.astype(np.float64).mean(axis=0).astype(np.float32)[None]]).astype(np.float64)


def brute_dist(pts: np.ndarray) -> np.ndarray:
    return np.array([[math.sqrt(sum((a - b) ** 2 for a, b in zip(x, y))) for y in pts] for x in pts])


def brute_santext(emb: Embedding, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows: words then UNK; P[x -> y] = exp(-eps/2 d) / sum."""
    D = brute_dist(brute_points(emb))
    W = np.exp(-eps / 2 * D[:, : len(emb)])
    return W / W.sum(axis=1, keepdims=True), D


def brute_santext_plus(emb: Embedding, eps: float, sens: np.ndarray, p: float) -> np.ndarray:
    D = brute_dist(brute_points(emb))
    V = len(emb)
    P = np.zeros((V + 1, V))
    for x in range(V + 1):
        w = np.exp(-eps / 2 * D[x, sens])
        em = np.zeros(V)
        em[sens] = w / w.sum()
        if x == V or x in set(sens.tolist()):
            P[x] = em
        else:
            P[x] = p * em
            P[x, x] += 1 - p
    return P


def chi2_pvalue(samples: np.ndarray, p: np.ndarray) -> float:
    n = samples.size
    obs = np.bincount(samples, minlength=p.size).astype(float)
    assert obs[p == 0].sum() == 0, "sampled an output of probability 0"
    exp = p * n
    small = exp < 5
    o = np.r_[obs[~small], obs[small].sum()]
    e = np.r_[exp[~small], exp[small].sum()]
    keep = e > 0
    o, e = o[keep], e[keep]
    if o.size < 2:
        return 1.0
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)


# -- SanText -------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.5, 3.0, 12.0])
def test_santext_closed_form_and_metric_dp_on_all_pairs(eps: float) -> None:
    emb = make_embedding()
    mech = SanText(emb, epsilon=eps, cache_dir=False)
    P, D = brute_santext(emb, eps)
    ours = np.array([mech.probabilities(i) for i in range(len(emb))] + [mech.probabilities(-1)])
    np.testing.assert_allclose(ours, P, rtol=1e-9)
    assert_metric_dp(mech.log_probability_rows(np.r_[np.arange(len(emb)), -1]), D, eps)
    # the check has teeth: exp(-eps * d) without the 1/2 violates it
    bad = np.exp(-eps * D[:, : len(emb)])
    bad /= bad.sum(axis=1, keepdims=True)
    assert metric_dp_excess(log_rows(bad), D, eps) > ATOL
    assert mech.privacy_loss_bound(3, 17) == pytest.approx(eps * D[3, 17], rel=1e-9)


@pytest.mark.parametrize("eps,k", [(0.5, 3), (3.0, 5), (12.0, 40)])
def test_santext_sampler_is_exact(eps: float, k: int) -> None:
    emb = make_embedding()
    mech = SanText(emb, epsilon=eps, k=k, cache_dir=False)
    words = [0, 13, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=11).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, (eps, k, w)


def test_santext_chi_square_control_fails() -> None:
    emb = make_embedding()
    out = SanText(emb, epsilon=3.0, k=5, cache_dir=False).sample_ids(np.full(N_DRAWS, 4), rng=1)
    assert chi2_pvalue(out, SanText(emb, epsilon=3.3, cache_dir=False).probabilities(4)) < 1e-6


# -- SanText+ ------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_santext_plus_closed_form(p: float) -> None:
    emb = make_embedding()
    eps = 2.0
    mech = SanTextPlus(emb, epsilon=eps, w=0.75, p=p, cache_dir=False)
    sens = np.arange(10, 40)
    np.testing.assert_array_equal(mech.target_ids, sens)
    P = brute_santext_plus(emb, eps, sens, p)
    ours = np.array([mech.probabilities(i) for i in range(len(emb))] + [mech.probabilities(-1)])
    np.testing.assert_allclose(ours, P, rtol=1e-9, atol=1e-300)


def test_santext_plus_guarantee_holds_on_sensitive_words_and_fails_beyond() -> None:
    emb = make_embedding()
    eps, p = 2.0, 0.3
    mech = SanTextPlus(emb, epsilon=eps, w=0.75, p=p, cache_dir=False)
    sens_rows = list(range(10, 40)) + [-1]
    P = {x: mech.probabilities(x) for x in range(40)}
    P[-1] = mech.probabilities(-1)
    D_sens = distance_matrix(mech, sens_rows)
    assert np.isfinite(D_sens).all()
    assert_metric_dp(mech.log_probability_rows(sens_rows), D_sens, eps)
    # non-sensitive words: distance is infinite, and a finite bound would indeed fail
    assert mech.distance(np.array([0]), np.array([15]))[0] == np.inf
    assert P[0][0] >= 1 - p and P[15][0] == 0  # kept verbatim: the output w0 reveals the input
    # on sensitive outputs the ratio between a sensitive and a non-sensitive input reaches
    # exp(eps*d)/p > exp(eps*d) for a pair at small distance
    D = np.linalg.norm(emb.vectors[:10, None].astype(np.float64) - emb.vectors[None, 10:], axis=2)
    i, j = np.unravel_index(D.argmin(), D.shape)
    ratio = (P[10 + j][10:] / P[i][10:]).max()
    assert ratio > np.exp(eps * D[i, j])
    # ... but never beyond exp(eps*d)/p (the bound docs/mechanisms/santext.md states), both directions
    pts = np.vstack([emb.vectors, emb.vectors.astype(np.float64).mean(axis=0)[None]]).astype(np.float64)
    worst = 0.0
    for x in range(10):
        for x2 in sens_rows:
            d = float(np.linalg.norm(pts[x] - pts[x2]))
            r = max((P[x2][10:] / P[x][10:]).max(), (P[x][10:] / P[x2][10:]).max())
            worst = max(worst, r / np.exp(eps * d))
    assert 1.0 < worst <= 1 / p * (1 + 1e-9)
    # with p = 1 every word is covered
    full = SanTextPlus(emb, epsilon=eps, w=0.75, p=1.0, cache_dir=False)
    rows = [0, 5, 20, 3, 9, 33, -1]
    assert_metric_dp(full.log_probability_rows(rows), distance_matrix(full, rows), eps)


@pytest.mark.parametrize("k", [3, 128])
def test_santext_plus_sampler_is_exact(k: int) -> None:
    emb = make_embedding()
    mech = SanTextPlus(emb, epsilon=1.5, w=0.5, p=0.4, k=k, cache_dir=False)
    words = [0, 7, 25, -1]  # non-sensitive, non-sensitive, sensitive, UNK
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=5).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, (k, w)
    # control: the wrong p is detected
    wrong = SanTextPlus(emb, epsilon=1.5, w=0.5, p=0.45, cache_dir=False)
    assert chi2_pvalue(out[0], wrong.probabilities(0)) < 1e-6


def test_santext_plus_explicit_sensitive_words_and_oov() -> None:
    emb = make_embedding()
    mech = SanTextPlus(emb, epsilon=1.0, sensitive=["w1", "w2", "w3"], p=0.0, cache_dir=False)
    out = mech.sample_ids(np.array([-1] * 200 + [1] * 200 + [30] * 200), rng=0)
    assert set(out[:400].tolist()) <= {1, 2, 3}  # UNK and sensitive words become sensitive words
    assert (out[400:] == 30).all()  # p = 0: non-sensitive words kept
    text = mech.privatize("zzz w1 w30", rng=0)
    assert "zzz" not in text and text.split()[2] == "w30"
    with pytest.raises(KeyError):
        SanTextPlus(emb, epsilon=1.0, sensitive=["nope"], cache_dir=False)


def test_subset_cache_roundtrip(tmp_path) -> None:
    emb = make_embedding()
    a = SanTextPlus(emb, epsilon=2.0, w=0.5, k=4, cache_dir=tmp_path)
    out = a.sample_ids(np.arange(40).repeat(20), rng=3)
    assert a.cache_file is not None and a.cache_file.exists()
    b = SanTextPlus(emb, epsilon=2.0, w=0.5, k=4, cache_dir=tmp_path)
    np.testing.assert_array_equal(b.sample_ids(np.arange(40).repeat(20), rng=3), out)
    assert b.cache_file == a.cache_file
    c = SanTextPlus(emb, epsilon=2.0, w=0.25, k=4, cache_dir=tmp_path)  # another target set: another file
    c.precompute()
    assert c.cache_file != a.cache_file


# -- interface -----------------------------------------------------------------------------------


def test_interface_registry_repr_and_validation() -> None:
    emb = make_embedding()
    m = get_mechanism("santext", emb, epsilon=3.0, cache_dir=False)
    assert isinstance(m, SanText) and m.guarantee.epsilon == 3.0 and "Euclidean" in m.guarantee.metric
    assert "SanText(epsilon=3" in repr(m) and "UNK" in m.guarantee.domain
    ids = np.array([[0, -1], [5, 39]])
    out = m.sample_ids(ids, rng=0)
    assert out.shape == ids.shape and out.dtype == np.int64 and ((out >= 0) & (out < 40)).all()
    mp = get_mechanism("santext_plus", emb, epsilon=3.0, w=0.5, p=0.2, cache_dir=False)
    assert isinstance(mp, SanTextPlus) and "no metric-DP" in mp.guarantee.domain and "p=0.2" in repr(mp)
    for kwargs, exc in [
        (dict(w=1.5), ValueError),
        (dict(p=-0.1), ValueError),
        (dict(w=0.001), ValueError),
        (dict(sensitive="w1"), TypeError),
        (dict(metric="cosine"), ValueError),
        (dict(k=0), ValueError),
        (dict(cache_dir=3), TypeError),
    ]:
        with pytest.raises(exc):
            SanTextPlus(emb, epsilon=1.0, **kwargs)


def test_cli_params(tmp_path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    vec = tmp_path / "emb.txt"
    emb = make_embedding()
    vec.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(emb.words, emb.vectors)) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 qqq w30\n")
    for name, params in [("santext", []), ("santext_plus", ["--param", "w=0.5", "--param", "p=0.5"])]:
        out = tmp_path / f"{name}.txt"
        res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(out), "-m", name, "-e", "2", "--embedding", str(vec), "--seed", "1", *params])
        assert res.exit_code == 0, res.output
        words = out.read_text().split()
        assert len(words) == 4 and "qqq" not in words
    res = CliRunner().invoke(cli, ["privatize", str(src), "-m", "santext_plus", "-e", "2", "--embedding", str(vec), "--param", "bogus=1"])
    assert res.exit_code == 2


# -- the chance of keeping the input over an ε grid (N_w calibration's fast path) -------------------


EPS_GRID = np.geomspace(0.05, 80, 9)


def test_santext_self_probabilities_match_the_brute_force_on_every_word() -> None:
    emb = make_embedding()
    V = len(emb)
    got = get_mechanism("santext", emb, epsilon=1.0).self_probabilities(np.arange(V), EPS_GRID)
    want = np.array([np.diag(brute_santext(emb, e)[0][:V]) for e in EPS_GRID]).T
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    # control: the instance's own ε must not leak into the grid
    wrong = np.array([np.diag(brute_santext(emb, 2 * e)[0][:V]) for e in EPS_GRID]).T
    assert not np.allclose(got, wrong, rtol=1e-3)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_santext_plus_self_probabilities_match_the_brute_force(p: float) -> None:
    emb = make_embedding()
    V = len(emb)
    mech = SanTextPlus(emb, epsilon=1.0, w=0.6, p=p)
    sens = mech.target_ids
    got = mech.self_probabilities(np.arange(V), EPS_GRID)
    want = np.array([np.diag(brute_santext_plus(emb, e, sens, p)[:V]) for e in EPS_GRID]).T
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    assert np.all(got[~mech.is_sensitive] == 1 - p)  # kept verbatim, whatever ε


def test_self_probabilities_reject_unk() -> None:
    with pytest.raises(ValueError, match="vocabulary ids"):
        get_mechanism("santext", make_embedding(), epsilon=1.0).self_probabilities([-1], [1.0])


ALL_IDS = np.r_[np.arange(40), -1]  # every word of make_embedding() and UNK (last row of the brute force)


def test_santext_log_probability_rows_match_the_brute_force() -> None:
    emb = make_embedding()
    mech = get_mechanism("santext", emb, epsilon=1.7)
    got = mech.log_probability_rows(ALL_IDS, block=7)  # blocks that do not divide the rows
    np.testing.assert_allclose(np.exp(got), brute_santext(emb, 1.7)[0], rtol=1e-9, atol=1e-300)
    # control: a different ε gives different rows
    assert not np.allclose(np.exp(got), brute_santext(emb, 3.4)[0], rtol=1e-3)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_santext_plus_log_probability_rows_match_the_brute_force(p: float) -> None:
    emb = make_embedding()
    mech = SanTextPlus(emb, epsilon=1.7, w=0.6, p=p)
    with np.errstate(divide="ignore"):
        want = np.log(brute_santext_plus(emb, 1.7, mech.target_ids, p))
    got = mech.log_probability_rows(ALL_IDS, block=7)
    np.testing.assert_allclose(np.exp(got), np.exp(want), rtol=1e-9, atol=1e-300)
    assert np.array_equal(np.isinf(got), np.isinf(want))  # zero probability exactly where the closed form has it
    for i in (0, 5, 39, -1):  # and the same as the one-row method
        np.testing.assert_allclose(got[i], mech.log_probabilities(int(ALL_IDS[i])), rtol=1e-12)
