"""The capability contract of :class:`deniable.Mechanism` holds for every registered mechanism
: ``params``, ``has_exact_probabilities`` and ``metric_space`` say what the mechanism
does, so calibration need not probe it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from deniable import Embedding, Mechanism, available_mechanisms, binarize, get_mechanism
from deniable.calibration.privacy_ratio import mechanism_metric_stats
from deniable.metrics import MetricSpace, get_metric

#: Parameters that make each mechanism small and exact where it can be (BRR: 8 bits).
PARAMS: dict[str, dict] = {
    "brr": {"n_bits": 8},
    "santext_plus": {"p": 1.0},
    "custext": {"K": 5},
    "knn_tem": {"k": 5},
    "tem": {"metric": "angular"},
}


def _embedding(n: int = 30, dim: int = 6) -> Embedding:
    rng = np.random.default_rng(5)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def _build(name: str, epsilon: float = 2.0) -> Mechanism:
    kw = dict(PARAMS.get(name, {}))
    emb = _embedding()
    if name == "brr":
        return get_mechanism(name, binarize(emb, n_bits=kw.pop("n_bits"), method="random-projection", rng=0), epsilon=epsilon, **kw)
    try:
        return get_mechanism(name, emb, epsilon=epsilon, cache_dir=False, **kw)
    except TypeError:  # no cache_dir parameter
        return get_mechanism(name, emb, epsilon=epsilon, **kw)


@pytest.fixture(scope="module", params=sorted(available_mechanisms()))
def mechanism(request) -> Mechanism:
    return _build(request.param)


def test_params_are_the_repr_parameters(mechanism):
    params = mechanism.params
    assert isinstance(params, dict) and "epsilon" not in params
    for k, v in params.items():
        assert f", {k}={v!r}" in repr(mechanism)
    params["injected"] = 1  # a copy: changing it changes nothing
    assert "injected" not in mechanism.params


def test_has_exact_probabilities_says_whether_probabilities_answer(mechanism):
    fn = getattr(type(mechanism), "probabilities", None)
    if fn is None:
        assert mechanism.has_exact_probabilities is False
        return
    try:
        p = mechanism.probabilities(3)
    except NotImplementedError:
        assert mechanism.has_exact_probabilities is False
        return
    assert mechanism.has_exact_probabilities is True
    assert p.shape == (mechanism.n_words,) and abs(p.sum() - 1.0) < 1e-9


def test_brr_declares_its_exact_probabilities_without_computing_them():
    emb = _embedding()
    small = get_mechanism("brr", binarize(emb, n_bits=8, method="random-projection", rng=0), epsilon=1.0)
    large = get_mechanism("brr", binarize(emb, n_bits=24, method="random-projection", rng=0), epsilon=1.0)
    assert small.has_exact_probabilities and not large.has_exact_probabilities
    with pytest.raises(NotImplementedError):
        large.probabilities(0)


def test_metric_space_is_the_guarantee_metric(mechanism):
    """Where a mechanism gives a metric space, the space's distances are its ``distance``."""
    space = mechanism.metric_space()
    if not mechanism.finite_metric:
        assert space is None
        n = mechanism.n_words
        a, b = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
        assert np.isinf(mechanism.distance(a, b)).any()  # what finite_metric = False declares
        return
    if space is None:
        return
    assert isinstance(space, MetricSpace)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, mechanism.n_words, 200), rng.integers(0, mechanism.n_words, 200)
    pts = np.asarray(space.points)
    f = get_metric(space.metric)
    want = np.array([f(pts[i : i + 1], pts[j : j + 1])[0, 0] for i, j in zip(a, b)])
    np.testing.assert_allclose(mechanism.distance(a, b), want, rtol=1e-5, atol=1e-5)


def test_without_a_metric_space_the_ratio_uses_distance():
    """Control: a mechanism that changes ``distance`` without declaring a space gets None, and
    its statistics come from its own distance (a wrong space would give Euclidean numbers)."""
    from deniable import Madlib

    class Odd(Madlib):
        def distance(self, a, b):
            return np.abs(np.asarray(a) - np.asarray(b)).astype(float)

    odd = Odd(_embedding(12), epsilon=1.0)
    assert odd.metric_space() is None
    ids = np.arange(12)
    assert mechanism_metric_stats(odd).avg == pytest.approx(np.abs(ids[:, None] - ids[None]).mean())


def test_finite_metric_declares_infinite_distances():
    """CusText (several output sets) and SanText+ with p < 1 have ∞ distances; SanText+ with
    p = 1 and one-set CusText do not (control)."""
    from deniable.mechanisms.custext import CusText
    from deniable.mechanisms.santext import SanTextPlus

    emb = _embedding()
    n = len(emb)
    a, b = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    cases = [
        (CusText(emb, epsilon=1.0, K=5, cache_dir=False), False),
        (CusText(emb, epsilon=1.0, K=n, cache_dir=False), True),
        (SanTextPlus(emb, epsilon=1.0, p=0.3, sensitive=emb.words[3:], cache_dir=False), False),
        (SanTextPlus(emb, epsilon=1.0, p=0.3, cache_dir=False), True),  # not fitted: every word sensitive
        (SanTextPlus(emb, epsilon=1.0, p=1.0, sensitive=emb.words[3:], cache_dir=False), True),
    ]
    for mech, finite in cases:
        assert mech.finite_metric is finite
        assert bool(np.isfinite(mech.distance(a, b)).all()) is finite


# -- the optional capabilities declared on the base class ----------------------------------------


def _probe_dependent(name: str, params: dict) -> set[str]:
    """What differs in ``params`` between builds at ε = 1 and ε = 2: the ε-derived parameters a
    declaration must name."""
    emb = _embedding()
    kw = dict(params)
    if name == "brr":
        emb = binarize(emb, n_bits=kw.pop("n_bits"), method="random-projection", rng=0)

    def build(e: float) -> Mechanism:
        try:
            return get_mechanism(name, emb, epsilon=e, cache_dir=False, **kw)
        except TypeError:
            return get_mechanism(name, emb, epsilon=e, **kw)

    a, b = build(1.0).params, build(2.0).params
    return {k for k, v in a.items() if b.get(k) != v}


#: Extra parameter sets whose ε-dependence differs (γ given, Diffractor's TEM noise).
_DEPENDENCE_CASES = [(n, dict(PARAMS.get(n, {}))) for n in sorted(available_mechanisms())] + [
    ("tem", {"metric": "angular", "gamma": 0.5}),
    ("diffractor", {"noise": "tem"}),
    ("diffractor", {"noise": "tem", "gamma": 0.5}),
]


@pytest.mark.parametrize(("name", "params"), _DEPENDENCE_CASES, ids=lambda x: x if isinstance(x, str) else ",".join(x) or "-")
def test_epsilon_dependent_params_are_what_two_builds_show(name, params):
    """Every built-in declares which parameters ε derives, and the declaration is what building
    at two ε shows (so calibration keys are unchanged by asking instead of building twice)."""
    kw = dict(params)
    emb = _embedding()
    if name == "brr":
        emb = binarize(emb, n_bits=kw.pop("n_bits"), method="random-projection", rng=0)
    try:
        mech = get_mechanism(name, emb, epsilon=1.0, cache_dir=False, **kw)
    except TypeError:
        mech = get_mechanism(name, emb, epsilon=1.0, **kw)
    declared = mech.epsilon_dependent_params()
    assert declared is not None, f"{name} does not declare its epsilon-dependent parameters"
    assert set(declared) == _probe_dependent(name, params)


def test_undeclared_epsilon_dependence_is_probed_by_the_calibration_key():
    """A mechanism that declares nothing (the default None) is keyed by what differs between two
    builds; control: the same mechanism declaring nothing ε-derived keeps the ε-derived value in
    its key."""
    from deniable.calibration.targets import calibration_key
    from deniable.mechanisms.tem import TEM

    emb = _embedding()

    class Undeclared(TEM):
        def epsilon_dependent_params(self):
            return None

    class Wrong(TEM):
        def epsilon_dependent_params(self):
            return frozenset()

    _, undeclared, _ = calibration_key(lambda e: Undeclared(emb, epsilon=e, cache_dir=False))
    _, declared, _ = calibration_key(lambda e: TEM(emb, epsilon=e, cache_dir=False))
    _, wrong, _ = calibration_key(lambda e: Wrong(emb, epsilon=e, cache_dir=False))
    assert "gamma" not in undeclared and undeclared == declared and "beta" in declared
    assert "gamma" in wrong  # control: the key follows the declaration


def test_calibration_estimator_is_a_known_estimator(mechanism):
    from deniable.calibration.targets import ESTIMATORS

    assert mechanism.calibration_estimator() in ESTIMATORS


def test_the_calibration_asks_the_contract_for_its_estimator(monkeypatch):
    """``estimator="auto"`` uses what the instance declares: a Madlib whose
    ``calibration_estimator()`` says "sampled" is calibrated by sampling (control: "radial")."""
    from deniable.calibration.compute import compute_calibration
    from deniable.mechanisms.madlib import Madlib

    emb = _embedding()
    grid = [1.0, 10.0]
    kw = {"epsilons": grid, "words": [0, 1], "draws": 20, "directions": 16, "progress": False}
    assert compute_calibration(lambda e: Madlib(emb, epsilon=e), **kw).estimator == "radial"
    monkeypatch.setattr(Madlib, "calibration_estimator", lambda self: "sampled")
    assert compute_calibration(lambda e: Madlib(emb, epsilon=e), **kw).estimator == "sampled"


def test_calibration_estimator_follows_the_instance():
    """Radial needs an exact search, the kernel a Euclidean TEM; Vickrey (a Mahalanobis subclass)
    is not radial."""
    from deniable.mechanisms.madlib import Madlib
    from deniable.mechanisms.tem import TEM
    from deniable.mechanisms.vickrey import Vickrey

    emb = _embedding()
    assert Madlib(emb, epsilon=1.0).calibration_estimator() == "radial"
    assert TEM(emb, epsilon=1.0, cache_dir=False).calibration_estimator() == "kernel"
    assert TEM(emb, epsilon=1.0, metric="angular", cache_dir=False).calibration_estimator() in ("exact", "sampled")
    assert Vickrey(emb, epsilon=1.0).calibration_estimator() == "radial-vickrey"


def test_precompute_fit_backend_and_points_have_defaults():
    """Every mechanism answers the optional capabilities: ``precompute()`` (None without
    tables), ``fittable`` / ``fit`` (TypeError unless fittable), ``backend``, ``has_points``."""
    from deniable.mechanisms.santext import SanTextPlus

    emb = _embedding()
    brr = get_mechanism("brr", binarize(emb, n_bits=8, method="random-projection", rng=0), epsilon=1.0)
    madlib = get_mechanism("madlib", emb, epsilon=1.0)
    tem = get_mechanism("tem", emb, epsilon=1.0, cache_dir=False)
    assert brr.precompute() is None and madlib.precompute(progress=False) is None
    assert tem.precompute() is not None  # control: TEM has neighbourhood tables
    assert (brr.backend, madlib.backend) == ("numpy", "numpy")
    assert not madlib.fittable and SanTextPlus.fittable
    with pytest.raises(TypeError, match="no fit step"):
        madlib.fit(["a text"])
    assert madlib.has_points and not brr.has_points
    with pytest.raises(NotImplementedError):
        brr.points(np.arange(3))


@dataclass(frozen=True)
class Choice:
    """Stands for an EpsilonChoice: its ε and how it was chosen."""

    epsilon: float

    def __str__(self) -> str:
        return f"chosen for a test at {self.epsilon:g}"


def test_with_epsilon_choice_returns_a_configured_copy():
    """``with_epsilon_choice`` leaves the mechanism unchanged and gives a copy whose guarantee
    says how ε was chosen, with the same samples for a seed; a choice for another ε is refused."""
    import pickle

    emb = _embedding()
    mech = get_mechanism("madlib", emb, epsilon=2.0)
    before = dict(vars(mech))
    chosen = mech.with_epsilon_choice(Choice(2.0))
    assert vars(mech) == before and mech.epsilon_choice is None and mech.guarantee.chosen_by is None
    assert chosen is not mech and type(chosen) is type(mech) and chosen.epsilon_choice == Choice(2.0)
    assert chosen.guarantee.chosen_by == "chosen for a test at 2"
    ids = np.arange(len(emb))
    np.testing.assert_array_equal(chosen.sample_ids(ids, rng=3), mech.sample_ids(ids, rng=3))
    assert pickle.loads(pickle.dumps(chosen)).guarantee.chosen_by == "chosen for a test at 2"
    with pytest.raises(ValueError, match="epsilon"):
        mech.with_epsilon_choice(Choice(3.0))


def test_self_probabilities_is_declared_and_exact_where_given(mechanism):
    """Every mechanism answers ``self_probabilities``: None (no shortcut) or N_w for each word and
    ε equal to ``probabilities`` of a mechanism built at that ε (checked on two words, two ε)."""
    eps = np.array([0.5, 4.0])
    got = mechanism.self_probabilities(np.array([0, 3]), eps)
    if got is None:
        return
    got = np.asarray(got)
    assert got.shape == (2, 2)
    for j, e in enumerate(eps):
        other = _build(mechanism.name, float(e))
        for i, w in enumerate((0, 3)):
            assert got[i, j] == pytest.approx(float(other.probabilities(w)[w]), rel=1e-6, abs=1e-12)
