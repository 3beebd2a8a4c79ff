"""The capability contract of :class:`deniable.Mechanism` holds for every registered mechanism
: ``params``, ``has_exact_probabilities`` and ``metric_space`` say what the mechanism
does, so calibration need not probe it."""

from __future__ import annotations

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


def _build(name: str) -> Mechanism:
    kw = dict(PARAMS.get(name, {}))
    emb = _embedding()
    if name == "brr":
        return get_mechanism(name, binarize(emb, n_bits=kw.pop("n_bits"), method="random-projection", rng=0), epsilon=2.0, **kw)
    try:
        return get_mechanism(name, emb, epsilon=2.0, cache_dir=False, **kw)
    except TypeError:  # no cache_dir parameter
        return get_mechanism(name, emb, epsilon=2.0, **kw)


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
