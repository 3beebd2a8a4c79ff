"""Word inversion attack: calibrated on no-privacy / perfect-privacy references, exact vs sampled."""

from __future__ import annotations

import numpy as np
import pytest

from deniable import TEM, Madlib
from deniable.evaluation import IdentityMechanism, UniformMechanism, inversion_attack, wilson_interval
from deniable.evaluation.inversion import _log_likelihood_rows, token_ids

from ..conftest import random_embedding


def zipf_tokens(V: int, n: int, seed: int = 0) -> np.ndarray:
    """n token ids with Zipf-like frequencies over V words (word 0 most frequent)."""
    w = 1.0 / np.arange(1, V + 1)
    return np.random.default_rng(seed).choice(V, size=n, p=w / w.sum())


@pytest.fixture(scope="module")
def emb():
    return random_embedding(n=60, dim=4, seed=3)


@pytest.mark.parametrize("method", ["exact", "sample"])
def test_identity_recovers_everything(emb, method):
    x = zipf_tokens(len(emb), 3000)
    res = inversion_attack(IdentityMechanism(emb), x, rng=0, method=method, n_simulations=20_000, rare_max_count=15)
    assert res.top1 == 1.0 and res.topk == 1.0
    assert res.unchanged == 1.0
    assert res.n_rare > 0 and res.rare_top1 == 1.0  # rare words too
    if method == "exact":
        assert res.expected_top1 == pytest.approx(1.0)


@pytest.mark.parametrize("method", ["exact", "sample"])
def test_uniform_is_chance(emb, method):
    V = len(emb)
    x = zipf_tokens(V, 20_000, seed=1)
    res = inversion_attack(UniformMechanism(emb), x, rng=1, method=method, n_simulations=50_000, rare_max_count=100)
    # the best the adversary can do is guess the most frequent words: the prior-only rate
    assert res.prior_top1 == pytest.approx(np.mean(x == 0), abs=1e-12)
    lo, hi = res.top1_ci
    assert lo <= res.prior_top1 + 0.01 and res.top1 <= res.prior_top1 + 0.02
    assert res.topk <= res.prior_topk + 0.02
    assert res.n_rare > 0 and res.rare_top1 == 0.0  # rare words are never the best guess
    if method == "exact":
        assert res.expected_top1 == pytest.approx(res.prior_top1, abs=1e-9)
        assert res.expected_topk == pytest.approx(res.prior_topk, abs=1e-9)
        assert abs(res.top1 - res.expected_top1) < 0.015


def test_uniform_with_uniform_prior_is_one_over_v(emb):
    V = len(emb)
    x = np.random.default_rng(2).integers(0, V, size=30_000)
    res = inversion_attack(UniformMechanism(emb), x, rng=2, method="exact", prior=np.ones(V))
    assert res.expected_top1 == pytest.approx(1 / V, abs=0.003)  # q(guess): one word, ~1/V
    lo, hi = res.top1_ci
    assert lo < 1 / V < hi + 0.01


def test_tem_fast_rows_equal_closed_form(emb):
    tem = TEM(emb, epsilon=2.0, cache_dir=False)
    xs = np.array([0, 5, 17, -1])
    rows = _log_likelihood_rows(tem, xs)
    for i, x in enumerate(xs):
        np.testing.assert_allclose(rows[i], tem.log_probabilities(int(x)), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tem.log_probability_rows(xs, block=3), rows, rtol=1e-12)  # blocks that do not divide the rows


def test_tem_exact_and_sampled_agree(emb):
    """The sampled attacker converges to the exact Bayes rule; exact expected rate matches draws."""
    tem = TEM(emb, epsilon=3.0, cache_dir=False)
    x = zipf_tokens(len(emb), 20_000, seed=4)
    ex = inversion_attack(tem, x, rng=5, method="exact")
    assert ex.top1_ci[0] - 0.005 <= ex.expected_top1 <= ex.top1_ci[1] + 0.005
    sa = inversion_attack(tem, x, rng=6, method="sample", n_simulations=400_000)
    # a plug-in rule never beats the Bayes rule (beyond sampling error) and gets close to it
    assert sa.top1 <= ex.expected_top1 + 0.015
    assert sa.top1 >= ex.expected_top1 - 0.03
    # more privacy, less recovery: monotone in epsilon
    lo = inversion_attack(TEM(emb, epsilon=0.5, cache_dir=False), x, rng=7, method="exact")
    hi = inversion_attack(TEM(emb, epsilon=20.0, cache_dir=False), x, rng=7, method="exact")
    assert lo.expected_top1 < ex.expected_top1 < hi.expected_top1
    assert hi.expected_top1 > 0.99


def test_control_wrong_likelihood_does_worse(emb):
    """Control that must fail: an attacker using another mechanism's likelihood (too little noise
    assumed) recovers less than the Bayes rule of the true mechanism."""
    x = zipf_tokens(len(emb), 20_000, seed=8)
    true = TEM(emb, epsilon=1.0, cache_dir=False)
    y = true.sample_ids(x, rng=9)
    right = inversion_attack(true, x, outputs=y, method="exact")
    wrong = inversion_attack(IdentityMechanism(emb), x, outputs=y, method="exact")  # reads y as x
    assert wrong.top1 == pytest.approx(right.unchanged)
    assert right.top1 > wrong.top1 + 0.05


def test_madlib_sampled_between_references(emb):
    x = zipf_tokens(len(emb), 5000, seed=10)
    res = inversion_attack(Madlib(emb, epsilon=2.0), x, rng=11)
    assert res.method == "sample" and res.n_simulations == 100_000
    assert res.prior_top1 < res.top1 < 1.0
    assert res.topk >= res.top1
    assert res.expected_top1 is None


def test_given_simulations_and_texts(emb):
    words = emb.words
    texts = [" ".join(words[i] for i in zipf_tokens(len(emb), 30, seed=s)) + " zzzunknown" for s in range(200)]
    mech = Madlib(emb, epsilon=50.0)
    ids = token_ids(mech, texts)
    assert (ids == -1).sum() == 200
    sim_x = zipf_tokens(len(emb), 50_000, seed=12)
    sim_y = mech.sample_ids(sim_x, rng=13)
    res = inversion_attack(mech, texts, rng=14, simulations=(sim_x, sim_y))
    assert res.n_oov == 200 and res.n_tokens == 6000 and res.n_simulations == 50_000
    assert res.top1 > 0.99  # epsilon 50 on a 4-d embedding barely changes words


def test_exact_adversary_ranks_inputs_by_log_likelihood_below_float64(emb):
    """Diffractor at ε = 30: the last word of the list is 55 or more positions from each of the
    first five, so its probability from any of them is 0 as a float64 (about e^(−1650)). The
    posterior is ranked in log space: the Bayes guesses for it are the allowed inputs nearest in
    the list (positions 4, then 3). Control: the probability form gives those likelihoods as 0."""
    from deniable.mechanisms.diffractor import Diffractor

    mech = Diffractor(emb, epsilon=30.0, cache_dir=False)
    order = mech.precompute()[0]
    allowed, far = order[:5], order[-1]
    rows = _log_likelihood_rows(mech, allowed)
    assert np.isfinite(rows).all()
    np.testing.assert_allclose(np.diff(rows[:, far]), 30.0, rtol=1e-9)  # each position nearer: e^30 likelier
    assert all(mech.probabilities(int(x))[far] == 0 for x in allowed)
    prior = np.zeros(len(emb))
    prior[allowed] = 1.0
    x = np.repeat(allowed, 20)
    res = inversion_attack(mech, x, outputs=np.full(x.size, far), prior=prior, method="exact", k=2, smoothing=0.0)
    assert res.top1 == pytest.approx(0.2) and res.topk == pytest.approx(0.4)  # positions 4 and 3
    assert res.expected_top1 is not None and np.isfinite(res.expected_top1)


def test_wilson_interval():
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert all(np.isnan(wilson_interval(0, 0)))


def test_validation(emb):
    mech = IdentityMechanism(emb)
    with pytest.raises(ValueError, match="method"):
        inversion_attack(mech, np.array([1]), method="magic")
    with pytest.raises(ValueError, match="prior"):
        inversion_attack(mech, np.array([1]), prior=np.ones(3))
    with pytest.raises(ValueError, match="no in-vocabulary"):
        inversion_attack(mech, np.array([-1, -1]))
    with pytest.raises(ValueError, match="outputs"):
        inversion_attack(mech, np.array([1, 2]), outputs=np.array([1]))
    with pytest.raises(ValueError, match="closed-form"):
        inversion_attack(Madlib(emb, epsilon=1.0), np.array([1, 2]), method="exact")


def test_batched_rows_are_used_and_a_subclass_that_changes_the_distribution_is_respected(emb):
    from deniable import SanText
    from deniable.evaluation.inversion import _batched_rows_match

    san = SanText(emb, epsilon=2.0, cache_dir=False)
    xs = np.array([0, 7, 59])
    assert _batched_rows_match(san)
    np.testing.assert_allclose(_log_likelihood_rows(san, xs), np.stack([san.log_probabilities(int(x)) for x in xs]), rtol=1e-12)

    class Flat(SanText):  # changes the distribution, inherits SanText's batched rows
        def log_probabilities(self, word_or_id):
            return np.full(self.n_words, -np.log(self.n_words))

    class FlatMixin:  # the same, from a mixin placed before SanText
        def log_probabilities(self, word_or_id):
            return np.full(self.n_words, -np.log(self.n_words))

    class Mixed(FlatMixin, SanText):
        pass

    for cls in (Flat, Mixed):
        flat = cls(emb, epsilon=2.0, cache_dir=False)
        assert not _batched_rows_match(flat)
        np.testing.assert_allclose(_log_likelihood_rows(flat, xs), -np.log(len(emb)))
        # control: the inherited batched method would have given SanText's rows
        assert not np.allclose(flat.log_probability_rows(xs), -np.log(len(emb)))


# -- the Bayes adversary against the simple strategies -----------------------------------------


def _exact_mechanisms(emb, epsilon):
    import warnings

    import deniable

    out = []
    for name in deniable.available_mechanisms():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                mech = deniable.get_mechanism(name, emb, epsilon=epsilon)
            except (TypeError, ValueError):  # needs another embedding kind (BRR: binary codes)
                continue
        if mech.has_exact_probabilities and type(mech).__name__ not in {m.__class__.__name__ for _, m in out}:
            out.append((name, mech))
    return out


@pytest.fixture(scope="module")
def zipf_emb():
    return random_embedding(n=300, dim=4, seed=11)


@pytest.mark.parametrize("epsilon", [1.0, 10.0, 50.0])
def test_bayes_adversary_is_never_beaten_by_a_simple_strategy(zipf_emb, epsilon):
    """With the prior estimated from a disjoint sample (so some attacked words are missing from
    it), the Bayes adversary's top-1 is at least the identity guess (read the output as is), the
    prior mode and the sampled-posterior adversary, up to 3 standard errors; with the prior left
    unsmoothed (the old default) the identity guess beats it somewhere (the control)."""
    V = len(zipf_emb)
    prior_tokens = zipf_tokens(V, 1500, seed=21)  # the adversary's sample: misses many rare words
    x = zipf_tokens(V, 6000, seed=22)  # the attacked text, disjoint draw
    assert np.isin(x, prior_tokens, invert=True).mean() > 0.05
    prior = np.bincount(prior_tokens, minlength=V).astype(float)
    mechs = _exact_mechanisms(zipf_emb, epsilon)
    assert {"tem", "santext", "custext", "diffractor"} <= {n for n, _ in mechs}
    beaten_unsmoothed = []
    for name, mech in mechs:
        y = mech.sample_ids(x, rng=5)
        bayes = inversion_attack(mech, x, outputs=y, prior=prior, method="exact", rng=6)
        sampled = inversion_attack(mech, x, outputs=y, prior=prior, method="sample", n_simulations=60_000, rng=7)
        se = 3 * np.sqrt(0.25 / bayes.n_tokens)
        for strategy, rate in (("identity", bayes.unchanged), ("prior mode", bayes.prior_top1), ("sampled posterior", sampled.top1)):
            assert bayes.top1 >= rate - se, f"{name} eps={epsilon}: Bayes top-1 {bayes.top1:.3f} < {strategy} {rate:.3f}"
        assert bayes.smoothing is not None and bayes.smoothing > 0
        raw = inversion_attack(mech, x, outputs=y, prior=prior, method="exact", rng=6, smoothing=0.0)
        if raw.top1 < raw.unchanged - se:
            beaten_unsmoothed.append(name)
    if epsilon >= 10:
        assert beaten_unsmoothed, "control: an unsmoothed prior should lose to the identity guess at large epsilon"


def test_loo_smoothing_follows_how_often_new_words_appear():
    from deniable.evaluation.inversion import loo_smoothing

    assert loo_smoothing(np.array([5.0, 3.0, 0.0])) == 0.0  # no singleton: nothing says new words occur
    few = np.zeros(1000)
    few[:10] = 100.0
    few[10:12] = 1.0  # 2 singletons in 1002 tokens
    many = few.copy()
    many[12:200] = 1.0  # 190 singletons
    assert 0 < loo_smoothing(few) < loo_smoothing(many)
