"""Privacy ratio (BRR paper Definition 5.1 / A.2): exact against brute force on small spaces."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from deniable import Embedding, Madlib, Mahalanobis
from deniable.binary import BinaryEmbedding, pack_bits
from deniable.calibration.privacy_ratio import (
    MetricSpace,
    MetricStats,
    equivalent_epsilon,
    mechanism_metric_stats,
    metric_stats,
    privacy_measure,
    privacy_ratio,
)
from deniable.mechanisms.brr import BRR


def _emb(n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, d)).astype(np.float32))


def _brute(points, dist):
    vals = [dist(points[i], points[j]) for i, j in itertools.product(range(len(points)), repeat=2)]
    return math.fsum(vals) / len(points) ** 2, max(vals)


BRUTE = {
    "euclidean": lambda a, b: float(np.sqrt(((a - b) ** 2).sum())),
    "manhattan": lambda a, b: float(np.abs(a - b).sum()),
    "chebyshev": lambda a, b: float(np.abs(a - b).max()),
    "angular": lambda a, b: float(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))),
}


@pytest.mark.parametrize("metric", list(BRUTE))
@pytest.mark.parametrize("memory", [1 << 16, 128 << 20])
def test_metric_stats_equal_brute_force(metric, memory):
    X = np.random.default_rng(1).standard_normal((37, 6))
    s = metric_stats(X, metric, memory_bytes=memory)
    avg, mx = _brute(X, BRUTE[metric])
    assert s.avg == pytest.approx(avg, rel=1e-9) and s.max == pytest.approx(mx, rel=1e-9)
    assert s.n == 37 and s.metric == metric


def test_hamming_stats_equal_brute_force():
    bits = np.random.default_rng(2).random((50, 70)) < 0.5
    s = metric_stats(pack_bits(bits), "hamming", memory_bytes=1 << 16)
    avg, mx = _brute(bits.astype(int), lambda a, b: float((a != b).sum()))
    assert s.avg == pytest.approx(avg, rel=1e-12) and s.max == mx


def test_callable_metric_not_assumed_symmetric():
    X = np.arange(6, dtype=float).reshape(3, 2)
    f = lambda A, B: np.maximum(A[:, None, 0] - B[None, :, 0], 0)  # noqa: E731 (asymmetric on purpose)
    s = metric_stats(X, f)
    assert s.avg == pytest.approx(sum(max(a - b, 0) for a in (0, 2, 4) for b in (0, 2, 4)) / 9)


def test_ratio_and_equivalent_epsilon_definition_5_1():
    X = np.random.default_rng(3).standard_normal((30, 4))
    bits = np.random.default_rng(4).random((30, 16)) < 0.5
    a = MetricSpace(X, "euclidean")
    b = (pack_bits(bits), "hamming")
    for agg in ("avg", "max"):
        pa, pb = privacy_measure(a, agg), privacy_measure(b, agg)
        r = privacy_ratio(a, b, agg)
        assert r == pytest.approx(pa / pb)
        eb = equivalent_epsilon(10.0, a, b, aggregate=agg)
        assert eb == pytest.approx(r * 10.0)
        assert eb * pb == pytest.approx(10.0 * pa)  # equal privacy-loss estimates (Eq. 3)
    st = MetricStats(avg=2.0, max=5.0, n=3, metric="x")
    assert equivalent_epsilon(3.0, st, MetricStats(avg=4.0, max=10.0, n=3, metric="y")) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="aggregate"):
        privacy_ratio(a, b, "median")
    with pytest.raises(ValueError):
        equivalent_epsilon(0, a, b)
    with pytest.raises(TypeError):
        privacy_measure(42)
    with pytest.raises(ValueError, match="coincide"):
        privacy_ratio(a, MetricSpace(np.zeros((3, 2))), "avg")


def test_mechanism_metric_stats_madlib_mahalanobis_brr():
    emb = _emb()
    ids = np.arange(len(emb))
    ii, jj = np.repeat(ids, len(ids)), np.tile(ids, len(ids))
    mad = Madlib(emb, epsilon=1.0)
    s = mechanism_metric_stats(mad)
    d = mad.distance(ii, jj)
    assert s.avg == pytest.approx(d.mean(), rel=1e-9) and s.max == pytest.approx(d.max(), rel=1e-9)
    assert mechanism_metric_stats(mad) is s  # cached
    assert mechanism_metric_stats(Madlib(emb, epsilon=5.0)) is s  # shared across epsilons
    mah = Mahalanobis(emb, epsilon=1.0, lam=0.7)
    s2 = mechanism_metric_stats(mah)
    d2 = mah.distance(ii, jj)
    assert s2.avg == pytest.approx(d2.mean(), rel=1e-9) and s2.max == pytest.approx(d2.max(), rel=1e-9)
    assert s2.avg != pytest.approx(s.avg)
    bits = np.random.default_rng(0).random((len(emb), 12)) < 0.5
    brr = BRR(BinaryEmbedding.from_bits(emb.words, bits), epsilon=1.0, index="exact")
    s3 = mechanism_metric_stats(brr)
    d3 = brr.distance(ii, jj)
    assert s3.avg == pytest.approx(d3.mean()) and s3.max == d3.max() and s3.metric == "hamming"
    # Madlib at eps -> BRR at R*eps, and the privacy-loss estimates match
    eb = equivalent_epsilon(4.0, mad, brr)
    assert eb * s3.avg == pytest.approx(4.0 * s.avg)


def test_mechanism_with_metric_attribute_and_fallback():
    emb = _emb(20, 3)

    class WithMetric(Madlib):
        metric = "manhattan"

    s = mechanism_metric_stats(WithMetric(emb, epsilon=1.0))
    X = emb.vectors.astype(np.float64)
    assert s.avg == pytest.approx(np.abs(X[:, None] - X[None]).sum(-1).mean()) and s.metric == "manhattan"

    class Odd(Madlib):
        def distance(self, a, b):
            return np.abs(np.asarray(a) - np.asarray(b)).astype(float)

    s2 = mechanism_metric_stats(Odd(emb, epsilon=1.0))
    ids = np.arange(20)
    assert s2.avg == pytest.approx(np.abs(ids[:, None] - ids[None]).mean()) and s2.max == 19


@pytest.mark.slow
def test_default_codes_hamming_stats():
    """On the full default vocabulary (33,849 words x 256 bits) the Hamming stats are sane."""
    import deniable

    brr = deniable.get_mechanism("brr", epsilon=1.0)
    sb = mechanism_metric_stats(brr)
    assert 60 < sb.avg < 200 and sb.max <= 256 and sb.n == 33849


def test_privacy_ratio_refuses_mechanisms_with_infinite_distances():
    """CusText and SanText+ guarantee ε·d with d = ∞ across output sets / sensitivity classes:
    no metric scale, so the ratio must refuse them rather than use the vectors' distances."""
    from deniable.calibration.privacy_ratio import mechanism_metric_stats
    from deniable.mechanisms.custext import CusText
    from deniable.mechanisms.santext import SanText, SanTextPlus

    emb = _emb()
    for mech in (CusText(emb, epsilon=1.0, K=5, cache_dir=False), SanTextPlus(emb, epsilon=1.0, sensitive=emb.words[5:], cache_dir=False)):
        assert mech.finite_metric is False
        with pytest.raises(ValueError, match="privacy ratio is undefined"):
            mechanism_metric_stats(mech)
    # control: SanText's distance is finite and gets statistics
    stats = mechanism_metric_stats(SanText(emb, epsilon=1.0, cache_dir=False))
    assert math.isfinite(stats.aggregate("avg")) and stats.aggregate("avg") > 0
