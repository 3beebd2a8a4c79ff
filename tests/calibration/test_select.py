"""Tests of deniable.calibration.select.select_epsilon: the safe (private) direction; it is
deprecated in favour of the calibration store (one test checks the warning, the others silence it)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from deniable import Embedding, Madlib
from deniable.calibration.plausible import plausible_deniability
from deniable.calibration.select import meets_targets, select_epsilon
from deniable.mechanisms.base import Guarantee, Mechanism

pytestmark = pytest.mark.filterwarnings("ignore:select_epsilon is deprecated:DeprecationWarning")


class RandomizedResponse(Mechanism):
    """Toy with closed forms: keep w with p = e^ε/(e^ε+V-1), else a uniform other word.

    N_w = p for every word, so the largest ε with N_w ≤ t is ln(t(V-1)/(1-t)); the η-effective
    support is ≥ m iff e^ε < ((1-η)(V-1) - m + 2)/η.
    """

    name = "rr"

    def __init__(self, n: int = 50, *, epsilon: float, exact: bool = False) -> None:
        emb = Embedding([f"w{i}" for i in range(n)], np.eye(n, dtype=np.float32))
        super().__init__(emb, epsilon=epsilon)
        self._exact = exact
        self.p = math.exp(self.epsilon) / (math.exp(self.epsilon) + n - 1)

    def _sample_ids(self, ids, rng):
        keep = rng.random(ids.shape[0]) < self.p
        other = rng.integers(0, self.n_words - 1, size=ids.shape[0])
        other = other + (other >= ids)
        return np.where(keep, ids, other)

    def probabilities(self, word_or_id):
        if not self._exact:
            raise NotImplementedError
        i = self.id_of(word_or_id)
        q = (1 - self.p) / (self.n_words - 1)
        out = np.full(self.n_words, q)
        out[i] = self.p
        return out

    def distance(self, a, b):
        return (np.asarray(a) != np.asarray(b)).astype(np.float64)

    def derive_guarantee(self):
        return Guarantee(self.epsilon, "discrete metric", "50 words")


V = 50


def n_w_boundary(t: float) -> float:
    return math.log(t * (V - 1) / (1 - t))


def s_w_boundary(m: int, eta: float) -> float:
    return math.log(((1 - eta) * (V - 1) - m + 2) / eta)


@pytest.mark.parametrize("seed", range(6))
def test_never_above_true_boundary_sampled(seed):
    target = 0.3
    true = n_w_boundary(target)  # ~3.04
    sel = select_epsilon(lambda e: RandomizedResponse(V, epsilon=e), max_n_w=target, words=10, draws=400, rtol=0.02, rng=seed)
    assert sel.epsilon is not None
    assert sel.epsilon <= true
    assert sel.epsilon >= true - 0.6  # not absurdly conservative: Wilson half-width at 4000 draws
    # the re-measured statistics meet the target, also without confidence bounds
    fresh = plausible_deniability(RandomizedResponse(V, epsilon=sel.epsilon), draws=4000, rng=100 + seed)
    assert meets_targets(fresh, max_n_w=target, conservative=False)[0]
    assert sel.check is not None and meets_targets(sel.check, max_n_w=target)[0]
    stages = [e["stage"] for e in sel.evaluations]
    assert stages[0] == "bracket" and "bisect" in stages and stages[-1] == "recheck"


@pytest.mark.filterwarnings("default")
def test_select_epsilon_is_deprecated_and_names_its_replacement():
    from deniable.calibration.targets import choose_epsilon

    f = lambda e: RandomizedResponse(V, epsilon=e, exact=True)  # noqa: E731
    with pytest.warns(DeprecationWarning, match=r"get_mechanism\(name, max_n_w=\.\.\.\)") as rec:
        sel = select_epsilon(f, max_n_w=0.3, words=None, rtol=0.01)
    msg = str(rec[0].message)
    assert "calibration_for" in msg and "sweep_epsilons" in msg
    assert rec[0].filename == __file__  # reported at the caller's line
    true = n_w_boundary(0.3)
    assert true * (1 - 0.02) <= sel.epsilon <= true  # it still works as documented
    # control: the replacement chooses a private epsilon without the warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        choice, _ = choose_epsilon(f, 0.3, epsilons=np.geomspace(1, 8, 41), cache_dir=False, progress=False)
    assert true / 8 ** (1 / 40) <= choice.epsilon <= true  # the grid point just below the boundary


def test_exact_boundary_n_w_and_s_w():
    f = lambda e: RandomizedResponse(V, epsilon=e, exact=True)  # noqa: E731
    sel = select_epsilon(f, max_n_w=0.3, words=None, rtol=0.001)
    assert sel.check.method == "exact"
    true = n_w_boundary(0.3)
    assert true * (1 - 0.002) <= sel.epsilon <= true
    sel = select_epsilon(f, min_s_w=30, eta=0.05, words=None, rtol=0.001)
    true = s_w_boundary(30, 0.05)
    assert true * (1 - 0.002) <= sel.epsilon <= true
    both = select_epsilon(f, max_n_w=0.3, min_s_w=30, eta=0.05, words=None, rtol=0.001)
    assert both.epsilon <= min(n_w_boundary(0.3), s_w_boundary(30, 0.05))


def test_uncertain_decisions_choose_smaller_epsilon():
    # with few draws the Wilson bound is wide: the answer moves down, never up
    f = lambda e: RandomizedResponse(V, epsilon=e)  # noqa: E731
    few = select_epsilon(f, max_n_w=0.3, words=5, draws=30, rng=1)
    many = select_epsilon(f, max_n_w=0.3, words=5, draws=3000, rng=1)
    assert few.epsilon < many.epsilon <= n_w_boundary(0.3)


def test_quantile_target_on_real_mechanism():
    rng = np.random.default_rng(0)
    emb = Embedding([f"w{i}" for i in range(60)], rng.standard_normal((60, 4)).astype(np.float32))
    worst = select_epsilon(lambda e: Madlib(emb, epsilon=e), max_n_w=0.5, words=12, draws=200, rtol=0.05, rng=3)
    median = select_epsilon(lambda e: Madlib(emb, epsilon=e), max_n_w=0.5, quantile=0.5, words=12, draws=200, rtol=0.05, rng=3)
    assert worst.epsilon is not None and median.epsilon is not None
    assert worst.epsilon <= median.epsilon * 1.1
    assert max(worst.check.n_w_high) <= 0.5
    d = worst.to_dict()
    assert d["epsilon"] == worst.epsilon and d["check"]["method"] == "sampled"


def test_unreachable_and_capped_targets():
    f = lambda e: RandomizedResponse(V, epsilon=e, exact=True)  # noqa: E731
    assert select_epsilon(f, max_n_w=1e-6, words=None, eps_min=0.01).epsilon is None  # N_w >= 1/V always
    capped = select_epsilon(f, max_n_w=0.999, words=None, eps_max=4.0)
    assert capped.capped and capped.epsilon == 4.0


def test_validation():
    f = lambda e: RandomizedResponse(V, epsilon=e)  # noqa: E731
    with pytest.raises(ValueError, match="target"):
        select_epsilon(f)
    with pytest.raises(ValueError, match="max_n_w"):
        select_epsilon(f, max_n_w=1.5)
    with pytest.raises(ValueError, match="eps_min"):
        select_epsilon(f, max_n_w=0.5, eps_start=0.0001)
    with pytest.raises(TypeError, match="draws"):
        select_epsilon(f, max_n_w=0.5, draws="many")


# -- word coverage: the extreme words, the all-words final check, Bonferroni re-checks ----------


class IsolatedRR(Mechanism):
    """Toy with one worst word: V points in the plane, word 0 far from all others. Keep w with
    p_w = e^ε / (e^ε + c_w), else a uniform other word; c_0 = (V-1)/20, c_w = V-1 otherwise, so
    word 0 is returned unchanged far more often (as a sparse word is under Madlib) and its
    boundary for N_w ≤ t is ln(t·c_0/(1-t)), about ln 20 ≈ 3 below every other word's.
    """

    name = "isolated-rr"
    n = 400

    def __init__(self, *, epsilon: float, exact: bool = False) -> None:
        pts = np.random.default_rng(0).standard_normal((self.n, 2))
        pts[0] = (50.0, 50.0)
        emb = Embedding([f"w{i}" for i in range(self.n)], pts.astype(np.float32))
        super().__init__(emb, epsilon=epsilon)
        self._pts = emb.vectors
        self._exact = exact
        c = np.full(self.n, self.n - 1.0)
        c[0] = (self.n - 1) / 20
        self.keep = math.exp(self.epsilon) / (math.exp(self.epsilon) + c)

    def points(self, ids):
        return self._pts[np.asarray(ids)]

    def _sample_ids(self, ids, rng):
        keep = rng.random(ids.shape[0]) < self.keep[ids]
        other = rng.integers(0, self.n_words - 1, size=ids.shape[0])
        other = other + (other >= ids)
        return np.where(keep, ids, other)

    def probabilities(self, word_or_id):
        if not self._exact:
            raise NotImplementedError
        i = self.id_of(word_or_id)
        out = np.full(self.n_words, (1 - self.keep[i]) / (self.n_words - 1))
        out[i] = self.keep[i]
        return out

    def distance(self, a, b):
        return (np.asarray(a) != np.asarray(b)).astype(np.float64)

    def derive_guarantee(self):
        return Guarantee(self.epsilon, "discrete metric", "400 words")


def worst_word_boundary(t: float) -> float:
    return math.log(t * (IsolatedRR.n - 1) / 20 / (1 - t))


@pytest.mark.parametrize("seed", range(4))
def test_worst_word_always_measured_and_respected(seed):
    t = 0.3
    f = lambda e: IsolatedRR(epsilon=e)  # noqa: E731
    sel = select_epsilon(f, max_n_w=t, words=10, extreme=2, draws=400, rtol=0.02, rng=seed)
    assert 0 in sel.check.word_id.tolist()
    assert sel.coverage.startswith("sample of 10 + ") and sel.coverage.endswith(" extreme words")
    assert sel.epsilon <= worst_word_boundary(t)
    assert sel.to_dict()["coverage"] == sel.coverage


def test_without_extreme_words_the_worst_word_is_missed():
    # the failure the extreme words fix: a 10-word sample (1 of 40 in the sparsest stratum)
    # usually misses word 0, and the selection lands above its boundary
    t = 0.3
    f = lambda e: IsolatedRR(epsilon=e)  # noqa: E731
    over = [select_epsilon(f, max_n_w=t, words=10, extreme=0, draws=400, rng=s).epsilon > worst_word_boundary(t) for s in range(4)]
    assert sum(over) >= 3


def test_exact_final_check_on_all_words_finds_the_worst_word():
    t = 0.3
    f = lambda e: IsolatedRR(epsilon=e, exact=True)  # noqa: E731
    # without extreme words and without the all-words check, the sample misses word 0
    sample_only = select_epsilon(f, max_n_w=t, words=10, extreme=0, final_all=False, rtol=0.001, rng=1)
    assert 0 not in sample_only.check.word_id.tolist()
    assert sample_only.epsilon > worst_word_boundary(t)
    assert sample_only.coverage == "sample of 10 + 0 extreme words"
    # default: the exact final check runs on all words, fails at word 0 and the search goes on
    sel = select_epsilon(f, max_n_w=t, words=10, extreme=0, rtol=0.001, rng=1)
    assert sel.coverage == "all words" and len(sel.check) == IsolatedRR.n
    assert worst_word_boundary(t) * (1 - 0.002) <= sel.epsilon <= worst_word_boundary(t)
    assert [e["stage"] for e in sel.evaluations].count("final") == 1
    assert sel.recheck_confidence is None


@pytest.mark.parametrize("max_rechecks", [0, 4, 20])
def test_rechecks_use_bonferroni_adjusted_confidence(max_rechecks):
    from deniable.calibration.plausible import wilson_interval

    sel = select_epsilon(
        lambda e: RandomizedResponse(V, epsilon=e), max_n_w=0.3, words=5, draws=200, max_rechecks=max_rechecks,
        confidence=0.9, rng=2,
    )
    adj = 1 - 0.1 / (max_rechecks + 1)
    assert sel.recheck_confidence == pytest.approx(adj)
    assert sel.check.confidence == pytest.approx(adj)
    rechecks = [e for e in sel.evaluations if e["stage"] == "recheck"]
    assert rechecks and all(e["confidence"] == pytest.approx(adj) for e in rechecks)
    assert all(e["confidence"] == 0.9 for e in sel.evaluations if e["stage"] != "recheck")
    hits = np.rint(sel.check.n_w * sel.check.draws)
    np.testing.assert_allclose(sel.check.n_w_high, wilson_interval(hits, sel.check.draws, adj)[1])
    assert sel.to_dict()["recheck_confidence"] == pytest.approx(adj)


def test_coverage_of_all_and_given_words():
    f = lambda e: RandomizedResponse(V, epsilon=e)  # noqa: E731
    assert select_epsilon(f, max_n_w=0.3, words="all", draws=100, rng=0).coverage == "all words"
    assert select_epsilon(f, max_n_w=0.3, words=["w1", "w2"], draws=100, rng=0).coverage == "2 given words"
    assert select_epsilon(f, max_n_w=0.3, words=V, draws=100, rng=0).coverage == "all words"


def test_repr_is_concise():
    sel = select_epsilon(lambda e: IsolatedRR(epsilon=e), max_n_w=0.3, words=10, draws=200, rng=0)
    r = repr(sel)
    assert r.startswith("EpsilonSelection(epsilon=") and "array(" not in r and len(r.splitlines()) <= 4
    assert sel.coverage in r and "max_n_w=0.3" in r
    rc = repr(sel.check)
    assert rc.startswith("PlausibleDeniability(mechanism='isolated-rr'") and "array(" not in rc
    assert len(rc.splitlines()) <= 4 and "'w0'" in rc  # the worst word is named


def test_curve_fast_path_agrees_with_the_sampled_search_and_errs_private():
    """Madlib (radial curves) and TEM (exact kernel) take the curve path; its ε sits at or below
    the boundary that the generic sampled search finds, within the grid spacing and noise."""
    from deniable import TEM

    rng = np.random.default_rng(0)
    emb = Embedding([f"w{i}" for i in range(150)], rng.standard_normal((150, 5)).astype(np.float32))
    fast = select_epsilon(lambda e: Madlib(emb, epsilon=e), max_n_w=0.5, words="all", draws=400, rng=1)
    assert fast.check.meta["estimator"] == "radial" and fast.coverage == "all words"
    assert any(e["stage"] == "recheck" and e["passed"] for e in fast.evaluations)
    slow = select_epsilon(lambda e: Madlib(emb, epsilon=e), max_n_w=0.5, words="all", draws=400, method="sample", rng=1)
    assert slow.epsilon is not None and fast.epsilon <= slow.epsilon * 1.25
    assert fast.epsilon >= slow.epsilon / 1.6  # not absurdly conservative either
    # independent check at the chosen epsilon: no word significantly above the target
    pd = plausible_deniability(Madlib(emb, epsilon=fast.epsilon), "all", draws=1000, rng=5, method="sample")
    assert pd.n_w_low.max() <= 0.5
    ex = select_epsilon(lambda e: TEM(emb, epsilon=e, cache_dir=False), max_n_w=0.3, words=20, rng=0)
    assert ex.coverage == "all words" and ex.check.method == "exact"
    m = TEM(emb, epsilon=ex.epsilon, cache_dir=False)
    assert max(m.probabilities(i)[i] for i in range(150)) <= 0.3
    m_up = TEM(emb, epsilon=ex.epsilon * 1.05, cache_dir=False)
    assert max(m_up.probabilities(i)[i] for i in range(150)) > 0.3 * 0.97
