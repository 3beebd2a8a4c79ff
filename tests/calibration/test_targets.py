"""Tests of deniable.calibration.targets: ε ↦ N_w curves, privacy targets, shipped data.

Estimators are checked against independent references (sampling with the mechanism itself, or
closed forms) with stated tolerances; each comparison has a control that must fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import deniable
from deniable import BRR, TEM, Embedding, Madlib, Mahalanobis
from deniable.binary import BinaryEmbedding
from deniable.calibration.plausible import plausible_deniability
from deniable.calibration.targets import (
    Calibration,
    calibration_key,
    check_target,
    compute_calibration,
    known_calibration,
    shipped_calibration,
)


def clustered_embedding(n: int = 300, dim: int = 6, seed: int = 0) -> Embedding:
    """Dense clusters plus a few far-away words: N_w differs a lot between words."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, dim)) * 3
    x = centres[rng.integers(0, 12, n)] + rng.standard_normal((n, dim)) * 0.6
    x[:5] *= 2.5  # isolated words
    return Embedding([f"w{i}" for i in range(n)], x.astype(np.float32))


EMB = clustered_embedding()
GRID = np.geomspace(0.3, 30, 21)


def _sampled(mech, ids, draws, seed):
    return plausible_deniability(mech, ids, draws=draws, rng=seed, method="sample")


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, float("nan"), float("inf"), True, "0.5", None])
def test_check_target_rejects_non_probabilities(bad):
    with pytest.raises((ValueError, TypeError), match="max_n_w"):
        check_target("max_n_w", bad)
    assert check_target("max_n_w", 0.5) == 0.5


@pytest.mark.parametrize("make", [lambda e: Madlib(EMB, epsilon=e), lambda e: Mahalanobis(EMB, epsilon=e, lam=0.7)], ids=["madlib", "mahalanobis"])
def test_radial_estimator_matches_independent_sampling(make):
    cal = compute_calibration(make, epsilons=GRID, words="all", estimator="radial", directions=400, rng=1, progress=False)
    ids = np.array([0, 1, 2, 3, 4, 50, 100, 150, 200, 250])  # isolated and ordinary words
    for j in (6, 10, 14):
        ref = _sampled(make(GRID[j]), ids, draws=2000, seed=j)
        est = cal.n_w[np.searchsorted(cal.word_ids, ids), j]
        # both are means of [0,1] variables: 400 directions and 2000 draws, sd <= 0.5/sqrt(n)
        tol = 4.5 * np.sqrt(0.25 / 400 + 0.25 / 2000)
        assert np.all(np.abs(est - ref.n_w) <= tol), (j, est, ref.n_w)
        # control: the same estimates are far from the mechanism at 3x epsilon
        far = _sampled(make(3 * GRID[j]), ids, draws=2000, seed=j)
        assert np.any(np.abs(est - far.n_w) > tol)
    # the upper bounds cover the sampled truth for (almost) every word and epsilon
    ref = _sampled(make(GRID[10]), np.arange(60), draws=3000, seed=99)
    up = cal.n_w_upper[:60, 10]
    assert np.mean(up >= ref.n_w - 2 * np.sqrt(0.25 / 3000)) >= 0.9


def test_kernel_estimator_bounds_tem_exactly_from_above():
    def make(e):
        return TEM(EMB, epsilon=e, cache_dir=False)

    cal = compute_calibration(make, epsilons=GRID, progress=False)
    assert cal.estimator == "kernel" and cal.coverage == "all words"
    factor = cal.meta["max_overestimate_factor"]
    for j in (0, 8, 16, 20):
        m = make(GRID[j])
        exact = np.array([m.probabilities(i)[i] for i in range(0, EMB.__len__(), 15)])
        got = cal.n_w[::15, j]
        assert np.all(got >= exact * (1 - 1e-9))  # never under-states
        assert np.all(got <= np.minimum(1.0, exact * factor) + 1e-12)
    # control: a histogram without rounding up would under-state some words
    assert np.any(cal.n_w[::15, 8] > np.array([make(GRID[8]).probabilities(i)[i] for i in range(0, len(EMB), 15)]))


def tiny_brr(eps_unused: float = 1.0) -> BinaryEmbedding:
    rng = np.random.default_rng(3)
    bits = rng.random((40, 8)) < 0.5
    return BinaryEmbedding.from_bits([f"b{i}" for i in range(40)], bits)


BE = tiny_brr()


def test_sampled_estimator_matches_exact_brr_probabilities():
    def make(e):
        return BRR(BE, epsilon=e, index="exact")

    grid = np.geomspace(0.2, 5, 13)
    exact = compute_calibration(make, epsilons=grid, words="all", estimator="exact", progress=False)
    samp = compute_calibration(make, epsilons=grid, words="all", estimator="sampled", draws=3000, rng=2, progress=False)
    measured = np.array(samp.meta["measured_epsilons"])
    cols = np.flatnonzero(np.isin(grid.round(6), measured))
    assert cols.size >= 3
    diff = np.abs(samp.n_w[:, cols] - exact.n_w[:, cols])
    assert diff.max() <= 4.5 * math.sqrt(0.25 / 3000)
    # one-sided 95 % Wilson bounds: about 95 % of (word, epsilon) pairs covered (520 pairs)
    assert np.mean(samp.n_w_upper >= exact.n_w - 1e-12) >= 0.92
    # control: exact values at another epsilon are far off
    assert np.abs(samp.n_w[:, cols[1:]] - exact.n_w[:, cols[:-1]]).max() > 4.5 * math.sqrt(0.25 / 3000)


def _toy_calibration(worst: np.ndarray, median: np.ndarray | None = None) -> Calibration:
    eps = np.geomspace(1, 10, worst.size)
    median = worst / 2 if median is None else median
    n_w = np.vstack([median, median, worst])
    return Calibration("toy", {}, "fp", 3, "exact", 0.95, "all words", eps, np.arange(3), n_w, n_w.copy(),
                       np.ones(3, bool), words=["a", "b", "z"])


def test_choose_takes_largest_epsilon_whose_smaller_grid_points_all_pass():
    worst = np.array([0.1, 0.2, 0.3, 0.6, 0.4, 0.45, 0.7])  # a non-monotone blip at index 3
    cal = _toy_calibration(worst)
    c = cal.choose(0.5)
    assert c.epsilon == pytest.approx(cal.epsilons[2])  # not index 5, past the failing index 3
    assert c.worst_word == "z" and c.worst_n_w == pytest.approx(0.3)
    assert cal.choose(0.99).epsilon == pytest.approx(cal.epsilons[-1])
    with pytest.raises(ValueError, match="raise the target"):
        cal.choose(0.05)
    rows = cal.table((0.9, 0.5, 0.05))
    assert rows[0]["epsilon"] == pytest.approx(cal.epsilons[-1]) and rows[2]["epsilon"] is None
    assert "max_n_w=0.5" in str(c) and "all words" in str(c)


def test_save_load_roundtrip_never_understates(tmp_path):
    cal = compute_calibration(lambda e: Madlib(EMB, epsilon=e), epsilons=GRID, words="all", estimator="radial",
                              directions=50, rng=0, progress=False)
    full = Calibration.load(cal.save(tmp_path / "f.npz"))
    assert np.array_equal(full.n_w, cal.n_w) and full.params == cal.params and full.words == cal.words
    small = Calibration.load(cal.save(tmp_path / "c.npz", compact=True))
    assert np.all(small.n_w >= cal.n_w - 1e-12) and np.all(small.n_w <= cal.n_w + 1 / 255 + 1e-12)
    assert np.all(small.n_w_upper >= cal.n_w_upper - 1e-12)
    assert np.array_equal(small.worst_upper, cal.worst_upper)  # decisions use exact values
    assert small.choose(0.95).epsilon == cal.choose(0.95).epsilon


def test_key_leaves_out_parameters_derived_from_epsilon():
    name, params, fp = calibration_key(lambda e: TEM(EMB, epsilon=e, cache_dir=False))
    assert name == "tem" and "gamma" not in params and params["beta"] == 0.001 and fp == EMB.fingerprint
    _, params, _ = calibration_key(lambda e: TEM(EMB, epsilon=e, gamma=2.0, cache_dir=False))
    assert params["gamma"] == 2.0


def test_get_mechanism_with_target_computes_once_then_uses_the_cache(tmp_path):
    with pytest.raises(TypeError, match="not both"):
        deniable.get_mechanism("madlib", EMB, epsilon=1.0, max_n_w=0.5)
    with pytest.raises(TypeError, match="max_n_w"):
        deniable.get_mechanism("madlib", EMB)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        deniable.get_mechanism("madlib", EMB, max_n_w=1.0)
    mech = deniable.get_mechanism("tem", EMB, max_n_w=0.5, cache_dir=tmp_path)
    choice = mech.epsilon_choice
    assert mech.epsilon == choice.epsilon and "computed" in choice.source
    assert "chosen for max_n_w=0.5" in str(mech.guarantee) and mech.guarantee.chosen_by
    # exact check of the claim on every word (TEM has closed-form probabilities)
    assert max(mech.probabilities(i)[i] for i in range(len(EMB))) <= 0.5
    # and the next grid point (10% up) would break it for some word
    up = TEM(EMB, epsilon=mech.epsilon * 10 ** (1 / 24) * 1.0001, cache_dir=False)
    assert max(up.probabilities(i)[i] for i in range(len(EMB))) > 0.5 / mech.epsilon_choice.confidence * 0.9
    again = deniable.get_mechanism("tem", EMB, max_n_w=0.5, cache_dir=tmp_path)
    assert again.epsilon == mech.epsilon and "cached" in again.epsilon_choice.source
    assert known_calibration(again, cache_dir=tmp_path) is not None
    # a changed epsilon drops the statement from the guarantee
    again.epsilon = 1.0
    assert again.guarantee.chosen_by is None


def test_cache_key_holds_every_option_that_changes_the_result(tmp_path):
    """A 0.99-confidence request after a cached 0.95 one must not get the 0.95 calibration."""
    from deniable.calibration.targets import calibration_for, calibration_options

    def factory(e):
        return Madlib(EMB, epsilon=e)

    opts = dict(epsilons=GRID, estimator="sampled", words=20, isolated=3, draws=60, progress=False)
    low = calibration_for(factory, cache_dir=tmp_path, confidence=0.95, **opts)
    assert "computed" in low.source and low.confidence == 0.95
    high = calibration_for(factory, cache_dir=tmp_path, confidence=0.99, **opts)
    assert "computed" in high.source and high.confidence == 0.99
    # the stricter level gives larger upper bounds from the same draws (same seed)
    assert np.all(high.n_w_upper >= low.n_w_upper - 1e-12) and np.any(high.n_w_upper > low.n_w_upper)
    again = calibration_for(factory, cache_dir=tmp_path, confidence=0.99, **opts)
    assert "cached" in again.source and again.confidence == 0.99
    assert np.array_equal(again.n_w_upper, high.n_w_upper)
    assert "cached" in calibration_for(factory, cache_dir=tmp_path, confidence=0.95, **opts).source
    # each result-changing option is in the key; progress is not; a Generator is never cached
    base = calibration_options({**opts, "confidence": 0.95})
    for change in ({"draws": 61}, {"epsilons": GRID[:-1]}, {"estimator": "radial"}, {"words": 21}, {"isolated": 4}):
        assert calibration_options({**opts, "confidence": 0.95, **change}) != base, change
    assert calibration_options({**opts, "confidence": 0.95}, rng=1) != base
    assert calibration_options({**opts, "confidence": 0.95, "progress": True}) == base
    assert calibration_options({**opts}, rng=np.random.default_rng(0)) is None
    with pytest.raises(TypeError, match="unknown option"):
        calibration_options({"confidance": 0.99})


def test_shipped_calibration_serves_only_the_default_options(tmp_path):
    from deniable.calibration.targets import calibration_for

    emb = deniable.load_embedding()
    assert calibration_for(lambda e: Madlib(emb, epsilon=e), cache_dir=tmp_path).source == "shipped calibration"
    # a stricter confidence is not what was shipped: it is computed (here on a small grid)
    cal = calibration_for(lambda e: Madlib(emb, epsilon=e), cache_dir=False, confidence=0.99, epsilons=[1.0, 10.0],
                          estimator="sampled", words=5, isolated=1, draws=20, progress=False)
    assert cal.source == "computed" and cal.confidence == 0.99


def test_user_calibration_for_sampled_mechanism_covers_isolated_words():
    cal = compute_calibration(lambda e: Madlib(EMB, epsilon=e), epsilons=GRID, estimator="sampled", words=30, isolated=5,
                              draws=200, rng=0, progress=False)
    assert set(range(5)) <= set(cal.word_ids.tolist())  # the scaled-out words are the most isolated
    assert "most isolated" in cal.coverage and cal.sample.sum() == 30


# -- the shipped calibration of the bundled embedding ------------------------------------------


MECHS = ["madlib", "mahalanobis", "tem", "brr"]


@pytest.mark.parametrize("name", MECHS)
def test_shipped_calibration_matches_the_default_mechanism(name):
    emb = deniable.load_embedding()

    def factory(e):
        return deniable.get_mechanism(name, emb, epsilon=e)

    key = calibration_key(factory)
    cal = shipped_calibration(*key)
    assert cal is not None, f"no shipped calibration for {key}; run scripts/build_calibration.py"
    assert cal.n_vocab == len(emb) and cal.source == "shipped calibration"
    assert cal.s_w is not None and len(cal.s_w["p50"]) == len(cal.s_w["epsilons"])
    assert cal.coverage.startswith("all")  # every word at least screened (BRR: flips, Madlib/Mahalanobis: radial)
    c = cal.choose(0.5)
    assert cal.worst_upper[np.searchsorted(cal.epsilons, c.epsilon)] <= 0.5


@pytest.mark.slow
@pytest.mark.parametrize("name", MECHS)
def test_independent_sampling_check_of_the_target_on_isolated_and_random_words(name):
    """The "done when" check: at the ε chosen for max_n_w=0.5 the most isolated words and random
    words have N_w ≤ 0.5 within sampling error (fresh draws, a seed the build never used)."""
    mech = deniable.get_mechanism(name, max_n_w=0.5)
    cal = known_calibration(mech)
    iso = np.array(cal.meta["isolated_1pct"][:15])
    rand = np.random.default_rng(12345).choice(mech.n_words, 15, replace=False)
    worst = cal.word_ids[np.argsort(-cal._interp(cal.n_w, mech.epsilon))[:10]]
    ids = np.unique(np.concatenate([iso, rand, worst]))
    if name == "tem":
        n_w = np.array([mech.probabilities(int(i))[i] for i in ids])
        assert n_w.max() <= 0.5
    else:
        pd = plausible_deniability(mech, ids, draws=400, rng=2024, method="sample")
        # one-sided: no word is significantly above the target (Wilson lower bound, 95 %)
        assert pd.n_w_low.max() <= 0.5, dict(zip(pd.word, pd.n_w))
    # control: at 1.5x the chosen epsilon some of these words are clearly above the target
    hot = deniable.get_mechanism(name, epsilon=mech.epsilon * 1.5)
    if name == "tem":
        assert max(hot.probabilities(int(i))[i] for i in ids) > 0.5
    else:
        assert plausible_deniability(hot, ids, draws=400, rng=7, method="sample").n_w_low.max() > 0.5


def test_radial_screening_covers_every_word_and_refines_the_riskiest():
    make = lambda e: Madlib(EMB, epsilon=e)  # noqa: E731
    cal = compute_calibration(make, epsilons=GRID, screen=8, refine=20, isolated=5, sample=50, directions=200, rng=3, progress=False)
    assert cal.coverage.startswith("all 300 words") and cal.word_ids.size == 300
    refined = np.array(cal.meta["refined_ids"])
    assert set(range(5)) <= set(refined.tolist())  # the isolated words are refined
    assert cal.sample.sum() == 50 and np.all(np.isin(np.flatnonzero(cal.sample), refined))
    # screened-only words carry point estimates as their bound; refined words proper upper bounds
    other = np.setdiff1d(np.arange(300), refined)
    assert np.array_equal(cal.n_w_upper[other], cal.n_w[other])
    assert np.all(cal.n_w_upper[refined] >= cal.n_w[refined])
    # the riskiest word after refinement is a refined one
    assert cal.worst_index[10] in refined


# -- the flips estimator (BRR) ---------------------------------------------------------------------


def test_flips_estimator_matches_exact_brr_probabilities_from_above():
    """Nested-flips curves against the exact enumeration (8-bit codes, every word, 13 ε): never
    below the truth beyond sampling error; above it by at most the tie rounding (ties counted
    where they first occur); a control at the neighbouring ε must fail the same check."""

    def make(e):
        return BRR(BE, epsilon=e, index="auto")

    grid = np.geomspace(0.2, 5, 13)
    exact = compute_calibration(make, epsilons=grid, words="all", estimator="exact", progress=False)
    draws = 4000
    fl = compute_calibration(make, epsilons=grid, words="all", estimator="flips", draws=draws, rng=2, progress=False)
    assert fl.estimator == "flips" and fl.meta["draws"] == draws
    tol = 4.5 * math.sqrt(0.25 / draws)
    diff = fl.n_w - exact.n_w
    assert diff.min() >= -tol  # never under-states
    assert diff.max() <= 0.1  # tie rounding only (8-bit codes tie often; measured max 0.062)
    assert np.mean(np.abs(diff)) <= 0.02
    assert np.mean(fl.n_w_upper >= exact.n_w - 1e-12) >= 0.99
    # control: compared with the exact values one grid step up, the estimates under-state
    assert (fl.n_w[:, :-1] - exact.n_w[:, 1:]).min() < -tol


def test_flips_estimator_matches_direct_sampling_on_longer_codes():
    """64-bit codes, 500 words (no enumeration possible): flips curves vs the mechanism's own
    draws at 4 ε, within 4.5 standard errors of the difference; control at a shifted ε fails."""
    rng = np.random.default_rng(4)
    be = BinaryEmbedding.from_bits([f"c{i}" for i in range(500)], rng.random((500, 64)) < 0.5)

    def make(e):
        return BRR(be, epsilon=e, index="auto")

    grid = np.array([0.5, 0.75, 1.0, 1.25])
    ids = np.arange(0, 500, 50)
    fl = compute_calibration(make, epsilons=grid, words=ids, estimator="flips", draws=1000, rng=3, progress=False)
    n = 2000
    tol = 4.5 * math.sqrt(0.25 / n + 0.25 / 1000)
    emp = np.empty((ids.size, grid.size))
    for j, e in enumerate(grid):
        out = make(e).sample_ids(np.repeat(ids, n), rng=10 + j).reshape(ids.size, n)
        emp[:, j] = (out == ids[:, None]).mean(axis=1)
    assert np.abs(fl.n_w - emp).max() <= tol
    assert np.abs(fl.n_w[:, 1:] - emp[:, :-1]).max() > tol  # control: the neighbouring ε is far


def test_auto_estimator_picks_flips_for_brr_with_faiss():
    pytest.importorskip("faiss")
    rng = np.random.default_rng(5)
    be = BinaryEmbedding.from_bits([f"d{i}" for i in range(300)], rng.random((300, 32)) < 0.5)
    cal = compute_calibration(lambda e: BRR(be, epsilon=e), epsilons=[0.5, 1.0, 2.0], draws=50, rng=0, progress=False)
    assert cal.estimator == "flips" and cal.coverage == "all words"
    assert np.all(np.diff(cal.n_w, axis=1) >= -1e-12)  # N_w grows with ε within each word (coupled draws)


def test_flips_screening_covers_every_word_and_refines_the_worst():
    rng = np.random.default_rng(6)
    be = BinaryEmbedding.from_bits([f"e{i}" for i in range(400)], rng.random((400, 32)) < 0.5)

    def make(e):
        return BRR(be, epsilon=e, index="auto")

    grid = np.geomspace(0.5, 4, 8)
    cal = compute_calibration(make, epsilons=grid, words="auto", screen=4, refine=20, isolated=5, sample=20, draws=200,
                              estimator="flips", rng=1, progress=False)
    assert cal.coverage.startswith("all 400 words") and "4-draw screening" in cal.coverage
    refined = np.asarray(cal.meta["refined_ids"])
    assert cal.meta["screen_draws"] == 4 and cal.meta["draws"] == 200 and refined.size >= 20
    # the word deciding each grid point's worst case has a refined (200-draw) upper bound
    assert np.all(np.isin(cal.worst_index, refined))
    # and that bound covers a fresh 2000-draw measurement of the same words
    worst = np.unique(cal.worst_index)
    ref = compute_calibration(make, epsilons=grid, words=worst, estimator="flips", draws=2000, rng=9, progress=False)
    assert np.mean(cal.n_w_upper[worst] >= ref.n_w - 2 * math.sqrt(0.25 / 2000)) >= 0.9


def _loop_n_w(make, ids, grid):
    return np.array([[float(make(float(e)).probabilities(int(w))[w]) for e in grid] for w in ids])


@pytest.mark.parametrize("name", ["santext", "santext_plus", "knn_tem"])
def test_exact_estimator_fast_path_equals_the_per_word_loop(name, monkeypatch):
    small = clustered_embedding(n=60)
    grid = np.geomspace(0.3, 30, 9)

    def make(e):
        return deniable.get_mechanism(name, small, epsilon=e)

    calls = {"n": 0}
    cls = type(make(1.0))
    orig = cls.probabilities

    def counted(self, w):
        calls["n"] += 1
        return orig(self, w)

    monkeypatch.setattr(cls, "probabilities", counted)
    cal = compute_calibration(make, epsilons=grid, words="all", estimator="exact", progress=False)
    assert calls["n"] <= 9  # the spot check only (3 words x 3 ε): the grid came from self_probabilities
    monkeypatch.setattr(cls, "probabilities", orig)
    np.testing.assert_allclose(cal.n_w, _loop_n_w(make, cal.word_ids, grid), rtol=1e-9)


def test_exact_estimator_falls_back_when_the_factory_changes_more_than_epsilon():
    small = clustered_embedding(n=60)
    grid = np.geomspace(0.3, 30, 9)

    def make(e):  # p moves with ε: self_probabilities of the first instance would be wrong
        return deniable.get_mechanism("santext_plus", small, epsilon=e, sensitive=small.words[30:], p=min(1.0, e / 30))

    cal = compute_calibration(make, epsilons=grid, words="all", estimator="exact", progress=False)
    np.testing.assert_allclose(cal.n_w, _loop_n_w(make, cal.word_ids, grid), rtol=1e-9)
    fast = make(grid[0]).self_probabilities(cal.word_ids, grid)
    assert not np.allclose(fast, cal.n_w, rtol=1e-3)  # control: the fast path would have been wrong


def test_every_registered_mechanism_resolves_a_target_from_shipped_data_or_fails_at_once():
    """For every registered name a target on the bundled embedding is read from shipped data
    (nothing computed), or refused at once naming the reachable targets."""
    import time

    from deniable.calibration.targets import _DATA

    for name in deniable.available_mechanisms():
        assert (_DATA / f"{name}.npz").is_file(), f"no calibration shipped for {name}"
        t0 = time.perf_counter()
        mech = deniable.get_mechanism(name, max_n_w=0.9)
        assert mech.epsilon_choice.source == "shipped calibration", name
        assert time.perf_counter() - t0 < 30, name  # loading, never computing (minutes)
    with pytest.raises(ValueError, match=r"reachable targets: max_n_w >= 0\.5"):
        deniable.get_mechanism("diffractor", max_n_w=0.1)  # the clamped list ends keep N_w >= 1/2
