"""SanText and SanText+: closed form vs an independent brute force, metric DP on all pairs (and
where it fails for SanText+'s non-sensitive words), the sensitive set from corpus frequency
(fit), exact sampling (chi-square against the closed form, with a control that must fail), OOV,
pickling, registry and CLI parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.mechanisms.santext import SanText, SanTextPlus

from .._stats import chi2_pvalue
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


def brute_santext_plus(emb: Embedding, eps: float, sens: np.ndarray, p: float, open_: np.ndarray | None = None) -> np.ndarray:
    """Rows: words then UNK. ``sens``: V_S (the replacements); ``open_``: the non-sensitive words,
    kept with probability 1 − p (default: every word outside V_S)."""
    D = brute_dist(brute_points(emb))
    V = len(emb)
    open_set = set(np.setdiff1d(np.arange(V), sens).tolist() if open_ is None else np.asarray(open_).tolist())
    P = np.zeros((V + 1, V))
    for x in range(V + 1):
        w = np.exp(-eps / 2 * D[x, sens])
        em = np.zeros(V)
        em[sens] = w / w.sum()
        if x not in open_set:
            P[x] = em
        else:
            P[x] = p * em
            P[x, x] += 1 - p
    return P


#: Explicit sensitive sets (the old embedding-order rule, for the tests of fixed sets).
LAST_30 = [f"w{i}" for i in range(10, 40)]
LAST_20 = [f"w{i}" for i in range(20, 40)]
#: A corpus in which w20..w39 are frequent (5 times each), w0..w9 rare (once each, after two
#: out-of-vocabulary words seen once) and w10..w19 absent: 32 distinct words, so w = 0.3 makes
#: the last ⌊0.3·32⌋ + 1 = 10 of the frequency ranking sensitive: w0..w9 (ties keep first occurrence).
CORPUS = [" ".join(f"w{i}" for i in range(20, 40))] * 5 + ["zz1 zz2 " + " ".join(f"W{i}." for i in range(10))]
FIT_SENSITIVE = np.arange(10)
FIT_OPEN = np.arange(20, 40)
FIT_ABSENT = np.arange(10, 20)


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
    mech = SanText(emb, epsilon=eps, precomputed_neighbors=k, cache_dir=False)
    words = [0, 13, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=11).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, (eps, k, w)


def test_santext_chi_square_control_fails() -> None:
    emb = make_embedding()
    out = SanText(emb, epsilon=3.0, precomputed_neighbors=5, cache_dir=False).sample_ids(np.full(N_DRAWS, 4), rng=1)
    assert chi2_pvalue(out, SanText(emb, epsilon=3.3, cache_dir=False).probabilities(4)) < 1e-6


# -- SanText+ ------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_santext_plus_closed_form(p: float) -> None:
    emb = make_embedding()
    eps = 2.0
    mech = SanTextPlus(emb, epsilon=eps, sensitive=LAST_30, p=p, cache_dir=False)
    sens = np.arange(10, 40)
    np.testing.assert_array_equal(mech.target_ids, sens)
    P = brute_santext_plus(emb, eps, sens, p)
    ours = np.array([mech.probabilities(i) for i in range(len(emb))] + [mech.probabilities(-1)])
    np.testing.assert_allclose(ours, P, rtol=1e-9, atol=1e-300)


def test_santext_plus_guarantee_holds_on_sensitive_words_and_fails_beyond() -> None:
    emb = make_embedding()
    eps, p = 2.0, 0.3
    mech = SanTextPlus(emb, epsilon=eps, sensitive=LAST_30, p=p, cache_dir=False)
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
    full = SanTextPlus(emb, epsilon=eps, sensitive=LAST_30, p=1.0, cache_dir=False)
    rows = [0, 5, 20, 3, 9, 33, -1]
    assert_metric_dp(full.log_probability_rows(rows), distance_matrix(full, rows), eps)


@pytest.mark.parametrize("k", [3, 128])
def test_santext_plus_sampler_is_exact(k: int) -> None:
    emb = make_embedding()
    mech = SanTextPlus(emb, epsilon=1.5, sensitive=LAST_20, p=0.4, precomputed_neighbors=k, cache_dir=False)
    words = [0, 7, 25, -1]  # non-sensitive, non-sensitive, sensitive, UNK
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=5).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, (k, w)
    # control: the wrong p is detected
    wrong = SanTextPlus(emb, epsilon=1.5, sensitive=LAST_20, p=0.45, cache_dir=False)
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
    a = SanTextPlus(emb, epsilon=2.0, precomputed_neighbors=4, cache_dir=tmp_path).fit(CORPUS)
    out = a.sample_ids(np.arange(40).repeat(20), rng=3)
    assert a.cache_file is not None and a.cache_file.exists()
    b = SanTextPlus(emb, epsilon=2.0, precomputed_neighbors=4, cache_dir=tmp_path).fit(CORPUS)
    np.testing.assert_array_equal(b.sample_ids(np.arange(40).repeat(20), rng=3), out)
    assert b.cache_file == a.cache_file
    c = SanTextPlus(emb, epsilon=2.0, w=0.5, precomputed_neighbors=4, cache_dir=tmp_path).fit(CORPUS)  # another target set: another file
    c.precompute()
    assert c.cache_file != a.cache_file


# -- the sensitive set from the user's corpus (fit) ---------------------------------------------------


def test_fit_takes_the_least_frequent_corpus_words_not_the_embedding_order() -> None:
    emb = make_embedding()
    eps, p = 2.0, 0.3
    mech = SanTextPlus(emb, epsilon=eps, w=0.3, p=p, cache_dir=False)
    assert mech.fit(CORPUS) is mech and mech.fitted
    np.testing.assert_array_equal(mech.target_ids, FIT_SENSITIVE)
    np.testing.assert_array_equal(np.flatnonzero(mech.is_non_sensitive), FIT_OPEN)
    assert mech.fit_summary == {"texts": 6, "tokens": 112, "distinct_words": 32, "ranked_sensitive": 10, "sensitive": 10, "non_sensitive": 20, "absent": 10}
    # w0: rare in the corpus but first in the embedding order -> the exponential mechanism's closed
    # form over V_S (an independent sum), no 1 - p floor
    D = brute_dist(brute_points(emb))
    em_w0 = 1.0 / np.exp(-eps / 2 * D[0, FIT_SENSITIVE]).sum()
    assert mech.probabilities("w0")[0] == pytest.approx(em_w0, rel=1e-9) and em_w0 < 1 - p - 0.1
    assert mech.self_probabilities([0], [eps])[0, 0] == pytest.approx(em_w0, rel=1e-9)
    # a frequent word gets the 1 - p floor (and is never a replacement)
    assert mech.probabilities("w39")[39] == pytest.approx(1 - p, rel=1e-12)
    # a word absent from the corpus is always replaced (and is not a replacement either)
    assert mech.probabilities("w15")[15] == 0.0 and mech.probabilities("w15")[FIT_SENSITIVE].sum() == pytest.approx(1.0)
    out = mech.sample_ids(np.repeat([0, 15, 39], 20_000), rng=3).reshape(3, -1)
    assert (out[0] == 0).mean() == pytest.approx(em_w0, abs=0.01) and (out[1] == 15).sum() == 0
    assert (out[2] == 39).mean() == pytest.approx(1 - p, abs=0.01)
    # control: the embedding-order rule (the last 90 % of the vocabulary) leaves w0 non-sensitive,
    # released verbatim 70 % of the time
    by_order = SanTextPlus(emb, epsilon=eps, p=p, sensitive=[f"w{i}" for i in range(4, 40)], cache_dir=False)
    assert by_order.probabilities("w0")[0] >= 1 - p


def test_without_a_corpus_every_word_is_protected_and_equals_santext() -> None:
    emb = make_embedding()
    plus = get_mechanism("santext_plus", emb, epsilon=2.0, p=0.3, precomputed_neighbors=5, cache_dir=False)
    plain = SanText(emb, epsilon=2.0, precomputed_neighbors=5, cache_dir=False)
    assert not plus.fitted and plus.is_sensitive.all() and not plus.is_non_sensitive.any() and plus.finite_metric
    rows = np.r_[np.arange(40), -1]
    np.testing.assert_allclose(plus.log_probability_rows(rows), plain.log_probability_rows(rows), rtol=1e-12)
    ids = np.arange(40).repeat(50)
    np.testing.assert_array_equal(plus.sample_ids(ids, rng=8), plain.sample_ids(ids, rng=8))  # same samples for a seed
    assert np.isfinite(distance_matrix(plus, rows)).all()
    assert_metric_dp(plus.log_probability_rows(rows), distance_matrix(plus, rows), 2.0)
    assert "not fitted to a corpus, so SanText+ equals SanText" in plus.guarantee.domain


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_fitted_closed_form_guarantee_and_the_ln_1_over_p_cross_term(p: float) -> None:
    emb = make_embedding()
    eps = 2.0
    mech = SanTextPlus(emb, epsilon=eps, w=0.3, p=p, cache_dir=False).fit(CORPUS)
    P = brute_santext_plus(emb, eps, FIT_SENSITIVE, p, FIT_OPEN)
    np.testing.assert_allclose(np.exp(mech.log_probability_rows(ALL_IDS)), P, rtol=1e-9, atol=1e-300)
    protected = list(FIT_SENSITIVE) + list(FIT_ABSENT) + [-1]
    assert_metric_dp(mech.log_probability_rows(protected), distance_matrix(mech, protected), eps)  # ε·d on all outputs
    if p == 1.0:
        assert mech.finite_metric and np.isfinite(distance_matrix(mech, ALL_IDS)).all()
        return
    assert mech.distance(np.array([25]), np.array([3]))[0] == np.inf and not mech.finite_metric
    # non-sensitive pairs on sensitive outputs: ε·d (the factor p cancels)
    if p > 0:
        D = brute_dist(brute_points(emb))
        L = np.log(P[:, FIT_SENSITIVE])
        open_ = FIT_OPEN
        gap = (L[open_][:, None, :] - L[open_][None, :, :]).max(axis=2) - eps * D[np.ix_(open_, open_)]
        assert gap.max() <= 1e-9
        # always-replaced vs non-sensitive: bounded by ε·d + ln(1/p), and the ln(1/p) is needed
        prot = np.array(list(FIT_SENSITIVE) + list(FIT_ABSENT) + [40])
        cross = (L[prot][:, None, :] - L[open_][None, :, :]).max(axis=2) - eps * D[np.ix_(prot, open_)]
        assert cross.max() <= math.log(1 / p) + 1e-9
        assert cross.max() > 0.0  # an ε·d bound alone fails for this pair


def test_fit_on_embedding_order_words_and_errors() -> None:
    emb = make_embedding()
    m = SanTextPlus(emb, epsilon=1.0, w=0.0, cache_dir=False).fit(["w5 w5 qq w6 w7"])  # ⌊0·4⌋ + 1 = 1: only the last-ranked word
    assert m.fit_summary["ranked_sensitive"] == 1 and m.target_ids.tolist() == [7]
    assert np.flatnonzero(m.is_non_sensitive).tolist() == [5, 6]
    with pytest.raises(ValueError, match="no replacement word"):  # the last-ranked word is out of the vocabulary
        SanTextPlus(emb, epsilon=1.0, w=0.0, cache_dir=False).fit(["w5 w5 qq"])
    with pytest.raises(ValueError, match="no word"):
        SanTextPlus(emb, epsilon=1.0, cache_dir=False).fit(["...", ""])
    with pytest.raises(TypeError, match="single string"):
        SanTextPlus(emb, epsilon=1.0, cache_dir=False).fit("w1 w2")
    with pytest.raises(TypeError, match="strings"):
        SanTextPlus(emb, epsilon=1.0, cache_dir=False).fit([b"w1"])
    with pytest.raises(ValueError, match="sensitive="):
        SanTextPlus(emb, epsilon=1.0, sensitive=["w1"], cache_dir=False).fit(CORPUS)
    again = SanTextPlus(emb, epsilon=1.0, w=0.3, cache_dir=False).fit(["w1 w2 w2"]).fit(CORPUS)  # refitting replaces the sets
    np.testing.assert_array_equal(again.target_ids, FIT_SENSITIVE)


def test_a_pickled_fitted_mechanism_keeps_its_sets_and_samples_identically(tmp_path) -> None:
    import pickle

    from deniable.integrations.shipping import pack

    emb = make_embedding()
    mech = SanTextPlus(emb, epsilon=1.5, w=0.3, p=0.4, precomputed_neighbors=4, cache_dir=False).fit(CORPUS)
    ids = np.r_[np.arange(40), -1].repeat(25)
    want = mech.sample_ids(ids, rng=12)
    clone = pickle.loads(pickle.dumps(mech))
    assert clone.fitted and clone.fit_summary == mech.fit_summary and clone.params == mech.params
    np.testing.assert_array_equal(clone.target_ids, FIT_SENSITIVE)
    np.testing.assert_array_equal(clone.sample_ids(ids, rng=12), want)
    shipped = pack(mech, directory=tmp_path / "ship").load()
    np.testing.assert_array_equal(shipped.sample_ids(ids, rng=12), want)
    # control: an unfitted mechanism with the same constructor call samples differently
    assert not np.array_equal(SanTextPlus(emb, epsilon=1.5, w=0.3, p=0.4, precomputed_neighbors=4, cache_dir=False).sample_ids(ids, rng=12), want)


# -- interface -----------------------------------------------------------------------------------


def test_interface_registry_repr_and_validation() -> None:
    emb = make_embedding()
    m = get_mechanism("santext", emb, epsilon=3.0, cache_dir=False)
    assert isinstance(m, SanText) and m.guarantee.epsilon == 3.0 and "Euclidean" in m.guarantee.metric
    assert "SanText(epsilon=3" in repr(m) and "UNK" in m.guarantee.domain
    ids = np.array([[0, -1], [5, 39]])
    out = m.sample_ids(ids, rng=0)
    assert out.shape == ids.shape and out.dtype == np.int64 and ((out >= 0) & (out < 40)).all()
    mp = get_mechanism("santext_plus", emb, epsilon=3.0, w=0.3, p=0.2, cache_dir=False)
    assert isinstance(mp, SanTextPlus) and "no metric-DP" not in mp.guarantee.domain and "not fitted" in repr(mp)
    mp.fit(CORPUS)
    assert "no metric-DP" in mp.guarantee.domain and "p=0.2" in repr(mp) and "fitted: 10 of 30 corpus words" in repr(mp)
    for kwargs, exc in [
        (dict(w=1.5), ValueError),
        (dict(p=-0.1), ValueError),
        (dict(sensitive="w1"), TypeError),
        (dict(metric="cosine"), ValueError),
        (dict(precomputed_neighbors=0), ValueError),
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
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    for name, params in [("santext", []), ("santext_plus", ["--param", "w=0.3", "--param", "p=0.5", "--fit", str(corpus)])]:
        out = tmp_path / f"{name}.txt"
        res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(out), "-m", name, "-e", "2", "--embedding", str(vec), "--seed", "1", *params])
        assert res.exit_code == 0, res.output
        words = out.read_text().split()
        assert len(words) == 4 and "qqq" not in words
    res = CliRunner().invoke(cli, ["privatize", str(src), "-m", "santext_plus", "-e", "2", "--embedding", str(vec), "--param", "bogus=1"])
    assert res.exit_code == 2


def test_cli_fit(tmp_path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    vec = tmp_path / "emb.txt"
    emb = make_embedding()
    vec.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(emb.words, emb.vectors)) + "\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w0 w39 w15\n" * 300)
    base = ["privatize", str(src), "-m", "santext_plus", "-e", "2", "--embedding", str(vec), "--param", "w=0.3", "--param", "p=0.3"]
    out = tmp_path / "o.txt"
    res = CliRunner().invoke(cli, [*base, "-o", str(out), "--seed", "3", "--fit", str(corpus)])
    assert res.exit_code == 0, res.output
    rows = np.array([line.split() for line in out.read_text().splitlines()])
    want = SanTextPlus(emb, epsilon=2.0, w=0.3, p=0.3, cache_dir=False).fit(CORPUS)
    assert (rows[:, 1] == "w39").mean() == pytest.approx(0.7, abs=0.08)  # frequent: the 1 - p floor
    assert (rows[:, 0] == "w0").mean() == pytest.approx(want.probabilities("w0")[0], abs=0.08)  # rare: no floor
    assert (rows[:, 2] == "w15").sum() == 0 and set(rows[:, 0]) <= {f"w{i}" for i in range(10)}  # absent: always replaced
    # without --fit every word is sensitive: w39 is no longer kept 70 % of the time
    res = CliRunner().invoke(cli, [*base, "-o", str(out), "--seed", "3"])
    assert res.exit_code == 0 and (np.array([line.split() for line in out.read_text().splitlines()])[:, 1] == "w39").mean() < 0.5
    common = ["privatize", str(src), "--embedding", str(vec), "--fit", str(corpus)]
    for args, msg in [(["-m", "santext", "-e", "2"], "no fit step"), (["-m", "santext_plus", "--max-nw", "0.5"], "--max-nw")]:
        res = CliRunner().invoke(cli, [*common, *args])
        assert res.exit_code == 2 and msg in res.output, res.output
    empty = tmp_path / "empty.txt"
    empty.write_text("...\n")
    res = CliRunner().invoke(cli, [*base, "--fit", str(empty)])
    assert res.exit_code == 2 and "no word" in res.output


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
    mech = SanTextPlus(emb, epsilon=1.0, w=0.3, p=p).fit(CORPUS)
    sens = mech.target_ids
    got = mech.self_probabilities(np.arange(V), EPS_GRID)
    want = np.array([np.diag(brute_santext_plus(emb, e, sens, p, FIT_OPEN)[:V]) for e in EPS_GRID]).T
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    assert np.all(got[FIT_OPEN] == 1 - p)  # kept verbatim, whatever ε
    assert np.all(got[FIT_ABSENT] == 0)  # absent from the corpus: always replaced, never a replacement


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
    mech = SanTextPlus(emb, epsilon=1.7, w=0.3, p=p).fit(CORPUS)
    with np.errstate(divide="ignore"):
        want = np.log(brute_santext_plus(emb, 1.7, mech.target_ids, p, FIT_OPEN))
    got = mech.log_probability_rows(ALL_IDS, block=7)
    np.testing.assert_allclose(np.exp(got), np.exp(want), rtol=1e-9, atol=1e-300)
    assert np.array_equal(np.isinf(got), np.isinf(want))  # zero probability exactly where the closed form has it
    for i in (0, 5, 39, -1):  # and the same as the one-row method
        np.testing.assert_allclose(got[i], mech.log_probabilities(int(ALL_IDS[i])), rtol=1e-12)
