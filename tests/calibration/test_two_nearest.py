"""Tests of the ``radial-vickrey`` estimator (deniable.calibration.two_nearest): Vickrey's N_w
over ε, exact in the noise radius, against direct simulation of the mechanism, against Madlib's
radial estimator at t = 0, and which mechanisms it is picked for. Each comparison has a control
that must fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from deniable import Embedding, Madlib
from deniable.calibration.plausible import plausible_deniability
from deniable.calibration.targets import compute_calibration
from deniable.mechanisms.vickrey import Vickrey


def _embedding(n: int = 300, dim: int = 6, seed: int = 0) -> Embedding:
    """Dense clusters plus a few far-away words (the first five): N_w differs a lot between words."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, dim)) * 3
    x = centres[rng.integers(0, 12, n)] + rng.standard_normal((n, dim)) * 0.6
    x[:5] *= 2.5
    return Embedding([f"w{i}" for i in range(n)], x.astype(np.float32))


EMB = _embedding()
GRID = np.geomspace(0.3, 30, 11)
IDS = np.array([0, 1, 3, 50, 100, 150, 200, 250])  # isolated and ordinary words
VARIANTS = {"euclidean": {}, "mahalanobis": {"noise": "mahalanobis", "lam": 0.7}}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_matches_direct_simulation_and_detects_a_wrong_mixing_parameter(variant):
    """1,000 directions against 8,000 draws of the mechanism per word at two ε: both are means of
    [0, 1] values, so |difference| ≤ 4.5·√(0.25/1000 + 0.25/8000) = 0.076 (4.5 sd). Control: the
    estimator of the same mechanism with t = 0.5 instead of 0.75 must miss the simulation."""
    kw = VARIANTS[variant]

    def curves(t):
        cal = compute_calibration(lambda e: Vickrey(EMB, epsilon=e, t=t, **kw), epsilons=GRID, words=IDS, directions=1000,
                                  rng=1, progress=False)
        assert cal.estimator == "radial-vickrey"
        return cal

    cal, wrong = curves(0.75), curves(0.5)
    tol = 4.5 * np.sqrt(0.25 / 1000 + 0.25 / 8000)
    for j in (4, 7):
        ref = plausible_deniability(Vickrey(EMB, epsilon=GRID[j], t=0.75, **kw), IDS, draws=8000, rng=100 + j, method="sample")
        assert np.all(np.abs(cal.n_w[:, j] - ref.n_w) <= tol), (j, cal.n_w[:, j], ref.n_w)
        assert np.all(cal.n_w_upper[:, j] >= ref.n_w - 4.5 * np.sqrt(0.25 / 8000))
        assert np.any(np.abs(wrong.n_w[:, j] - ref.n_w) > tol)  # control: t = 0.5 is detected


def test_t_zero_is_madlib_radial_and_t_moves_it():
    """t = 0 always releases the nearest word: the same directions give Madlib's radial curves (up
    to the radial estimator's 1e-4 rounding of the cell edge and float32 selection)."""
    opts = dict(epsilons=GRID, words="all", directions=64, rng=5, progress=False)
    madlib = compute_calibration(lambda e: Madlib(EMB, epsilon=e), **opts)
    zero = compute_calibration(lambda e: Vickrey(EMB, epsilon=e, t=0.0), **opts)
    assert madlib.estimator == "radial" and zero.estimator == "radial-vickrey"
    assert np.max(np.abs(zero.n_w - madlib.n_w)) <= 2e-3
    mixed = compute_calibration(lambda e: Vickrey(EMB, epsilon=e, t=0.75), **opts)
    assert np.max(np.abs(mixed.n_w - madlib.n_w)) > 0.1  # control: the mix changes N_w


def test_t_one_releases_only_the_runner_up():
    """t = 1 releases the second-nearest word: N_w = P(t₁ ≤ R < t₂), checked by simulation on a
    few words (4.5 sd), with t = 0 (Madlib) as the control."""
    one = compute_calibration(lambda e: Vickrey(EMB, epsilon=e, t=1.0), epsilons=GRID, words=IDS, directions=1000, rng=2,
                              progress=False)
    ref = plausible_deniability(Vickrey(EMB, epsilon=GRID[6], t=1.0), IDS, draws=6000, rng=7, method="sample")
    tol = 4.5 * np.sqrt(0.25 / 1000 + 0.25 / 6000)
    assert np.all(np.abs(one.n_w[:, 6] - ref.n_w) <= tol)
    madlib = plausible_deniability(Madlib(EMB, epsilon=GRID[6]), IDS, draws=6000, rng=7, method="sample")
    assert np.any(np.abs(one.n_w[:, 6] - madlib.n_w) > tol)


def test_the_mechanism_contract_is_the_only_source_of_the_estimator():
    """``estimator="auto"`` is the mechanism's ``calibration_estimator()``; an estimator that
    models another mechanism's sampling is refused with the fix."""
    vick = lambda e: Vickrey(EMB, epsilon=e)  # noqa: E731
    assert Vickrey(EMB, epsilon=1.0).calibration_estimator() == "radial-vickrey"
    with pytest.raises(ValueError, match="radial estimator does not apply.*estimator='auto'"):
        compute_calibration(vick, epsilons=GRID, words=IDS, estimator="radial", progress=False)
    with pytest.raises(ValueError, match="radial-vickrey estimator does not apply"):
        compute_calibration(lambda e: Madlib(EMB, epsilon=e), epsilons=GRID, words=IDS, estimator="radial-vickrey", progress=False)
    with pytest.raises(ValueError, match="flips estimator applies to BRR"):
        compute_calibration(vick, epsilons=GRID, words=IDS, estimator="flips", progress=False)


def test_screening_covers_every_word():
    """With ``words="auto"`` every word is screened and the riskiest refined, as for Madlib."""
    cal = compute_calibration(lambda e: Vickrey(EMB, epsilon=e), epsilons=GRID, screen=8, refine=20, isolated=5, sample=50,
                              directions=100, rng=3, progress=False)
    assert cal.coverage.startswith("all 300 words") and cal.word_ids.size == 300
    refined = np.array(cal.meta["refined_ids"])
    assert set(range(5)) <= set(refined.tolist()) and cal.worst_index[6] in refined
    assert np.all((cal.n_w >= 0) & (cal.n_w <= cal.n_w_upper) & (cal.n_w_upper <= 1))
