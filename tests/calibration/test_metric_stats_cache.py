"""The O(V^2) metric statistics are cached on disk and reused by a fresh process."""

import numpy as np

import deniable.calibration.privacy_ratio as pr
from deniable import Embedding, Madlib


def test_disk_cache_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path))
    emb = Embedding([f"w{i}" for i in range(60)], np.random.default_rng(0).standard_normal((60, 4)).astype(np.float32))
    first = pr.mechanism_metric_stats(Madlib(emb, epsilon=1.0))
    assert list(tmp_path.glob("metric-stats-*.json"))
    pr._BY_KEY.clear()  # as in a new process
    monkeypatch.setattr(pr, "metric_stats", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    again = pr.mechanism_metric_stats(Madlib(emb, epsilon=2.0))
    assert (again.avg, again.max, again.n) == (first.avg, first.max, first.n)
    # a different embedding is not served from the cache
    other = Embedding(emb.words, emb.vectors * 2)
    monkeypatch.undo()
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path))
    assert np.isclose(pr.mechanism_metric_stats(Madlib(other, epsilon=1.0)).max, 2 * first.max)
