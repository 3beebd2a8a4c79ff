"""Tests of deniable.calibration.report / plots / sweep: records, HTML and plots."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from deniable import Embedding, Madlib
from deniable.calibration import plots as plots_mod
from deniable.calibration.report import example_replacements, render_html, run_calibration, write_html
from deniable.calibration.sweep import summarize, sweep_epsilons


def _embedding() -> Embedding:
    rng = np.random.default_rng(0)
    return Embedding([f"w{i}" for i in range(50)], rng.standard_normal((50, 4)).astype(np.float32))


@pytest.fixture(scope="module")
def record():
    return run_calibration("madlib", [1.0, 4.0, 12.0], embedding=_embedding(), words=12, draws=80, seed=5, n_examples=4)


def test_record_holds_parameters_and_numbers(record):
    p = record["parameters"]
    assert p["seed"] == 5 and p["draws"] == 80 and p["epsilons"] == [1.0, 4.0, 12.0] and p["mechanism"] == "madlib"
    assert p["embedding_fingerprint"] == _embedding().fingerprint
    assert record["deniable_version"] and record["format"] == "deniable-calibration/1"
    sweep = record["sweeps"][0]
    assert [s["epsilon"] for s in sweep["summaries"]] == [1.0, 4.0, 12.0]
    assert len(sweep["results"]) == 3 and len(sweep["results"][0]["columns"]["n_w"]) == 12
    json.dumps(record, allow_nan=False)
    # monotone in epsilon on this seed
    means = [s["n_w_mean"] for s in sweep["summaries"]]
    assert means[0] < means[1] < means[2]
    ex = record["examples"]
    assert list(ex) == ["1", "4", "12"] and all(len(v) == 4 for d in ex.values() for v in d.values())


def test_same_seed_reproduces_record(record):
    again = run_calibration("madlib", [1.0, 4.0, 12.0], embedding=_embedding(), words=12, draws=80, seed=5, n_examples=4)
    assert again["sweeps"] == record["sweeps"] and again["examples"] == record["examples"]
    other = run_calibration("madlib", [1.0, 4.0, 12.0], embedding=_embedding(), words=12, draws=80, seed=6, n_examples=4)
    assert other["sweeps"] != record["sweeps"]


def test_html_is_self_contained_with_png_plots(record, tmp_path):
    path = tmp_path / "r.html"
    write_html(record, path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(uris) == 4  # N_w and S_w histograms, two percentile plots
    assert all(base64.b64decode(u)[:8] == b"\x89PNG\r\n\x1a\n" for u in uris)
    assert "http://" not in text and "https://" not in text  # nothing fetched from outside
    assert "Example replacements" in text and "w = " in text
    assert 'pip install "deniable[plot]"' not in text


def test_html_without_matplotlib_still_has_tables(record, monkeypatch):
    monkeypatch.setattr(plots_mod, "matplotlib_available", lambda: False)
    text = render_html(record)
    assert "<img" not in text
    assert "pip install &quot;deniable[plot]&quot;" in text or 'pip install "deniable[plot]"' in text
    assert "n_w_max" in text and "Example replacements" in text


def test_plots_return_png_and_validate_stat(record, tmp_path):
    sweep = record["sweeps"][0]
    png = plots_mod.plot_histograms(sweep, "s_w", path=tmp_path / "h.png")
    assert png[:4] == b"\x89PNG" and (tmp_path / "h.png").read_bytes() == png
    assert plots_mod.plot_percentiles([sweep, sweep], "n_w")[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="stat"):
        plots_mod.plot_histograms(sweep, "bogus")


def test_summaries_match_numpy():
    emb = _embedding()
    sw = sweep_epsilons(lambda e: Madlib(emb, epsilon=e), [2.0, 8.0], 10, draws=60, rng=1)
    for r, s in zip(sw.results, sw.summaries()):
        assert s["n_w_mean"] == pytest.approx(r.n_w.mean())
        assert s["n_w_max"] == r.n_w.max() and s["s_w_min"] == r.s_w.min()
        assert s["s_w_p50"] == pytest.approx(np.median(r.s_w))
        assert s["n_w_sd"] == pytest.approx(r.n_w.std(ddof=1))
    assert np.array_equal(sw.results[0].word_id, sw.results[1].word_id)  # same words at every epsilon
    assert summarize(sw.results[0]) == sw.results[0].summary()
    rows = sw.table("n_w", scale=60)
    assert rows[0][0] == 2.0 and rows[0][1] == pytest.approx(sw.results[0].n_w.mean() * 60)


def test_example_replacements_only_vocabulary_words():
    emb = _embedding()
    ex = example_replacements(lambda e: Madlib(emb, epsilon=e), ["w1", "w2"], [1.0, 50.0], n=6, rng=0)
    assert all(o in emb.words for d in ex.values() for outs in d.values() for o in outs)
    assert ex["50"]["w1"] == ["w1"] * 6  # huge epsilon: the word itself


@pytest.mark.parametrize("make", [lambda: 7, lambda: np.random.SeedSequence(7), lambda: np.random.default_rng(7)], ids=["int", "seedsequence", "generator"])
def test_every_rng_form_gives_the_same_numbers(make):
    emb = _embedding()
    f = lambda e: Madlib(emb, epsilon=e)  # noqa: E731
    ref = sweep_epsilons(f, [2.0, 8.0], 6, draws=40, rng=7)
    sw = sweep_epsilons(f, [2.0, 8.0], 6, draws=40, rng=make())
    assert sw.to_dict() == ref.to_dict()
    assert example_replacements(f, ["w1"], [3.0], n=5, rng=make()) == example_replacements(f, ["w1"], [3.0], n=5, rng=7)
    assert sweep_epsilons(f, [2.0], 6, draws=40, rng=None).results[0].draws == 40


def test_no_direct_default_rng_in_calibration_sources():
    import inspect

    from deniable.calibration import plausible, report, select, sweep

    for mod in (plausible, report, select, sweep):
        src = inspect.getsource(mod)
        assert "np.random.default_rng(" not in src and "np.random.SeedSequence(" not in src, mod.__name__
