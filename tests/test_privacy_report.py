"""The sign-off report of a privatization run (``deniable.reports``, ``--privacy-report``).

Every section is present and its numbers equal a recomputation from the run: per-document bound
quantiles (``document_guarantee``), the count of words seen once and returned unchanged (from the
outputs, token by token), and the attack rate (``inversion_attack`` with the recorded ids, outputs
and seed). Example text appears only with the opt-in. The page renders in headless Chromium.
"""

from __future__ import annotations

import html
import json
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from deniable import get_mechanism, load_embedding
from deniable.calibration.document import document_guarantee
from deniable.cli.main import cli
from deniable.evaluation import inversion_attack
from deniable.evaluation.inversion import token_ids
from deniable.reports import PrivacyReport, RunRecorder, privatize_with_report
from deniable.text.privatize import privatize_texts

SECRET_LINE = "Please send the quarterly report to my brother before the meeting on Monday."
TEXTS = [
    SECRET_LINE,
    "The weather was good and we walked to the old market near the river.",
    "She said the new school is far from the house, but the children like it.",
    "We will meet at the station at ten and take the train to the city.",
    "My doctor told me to rest for a week and drink more water.",
    "The company paid the bill late again, so the bank called twice.",
]


@pytest.fixture(scope="module")
def vocab():
    return load_embedding(limit=1500)  # small: the exact adversary runs in well under a second


def _report(mech, **kw):
    return privatize_with_report(mech, TEXTS, rng=3, seed=5, **kw)


def test_sections_and_numbers_match_a_recomputation(vocab):
    mech = get_mechanism("tem", vocab, epsilon=2.0)
    out, rep = _report(mech)
    d = rep.to_dict()
    for key in ("mechanism", "run", "documents", "survival", "attack", "curve", "warnings", "examples", "notice"):
        assert key in d
    assert d["mechanism"]["epsilon"] == 2.0 and "given directly" in d["mechanism"]["epsilon_how"]
    assert d["mechanism"]["guarantee"]["metric"] == str(mech.guarantee.metric)
    # the recorder does not change the output
    assert out == privatize_texts(get_mechanism("tem", vocab, epsilon=2.0), TEXTS, rng=3)
    # per-document bounds: epsilon * l * P_max with l the privatized words per text
    lengths = [len(token_ids(mech, [t])) for t in TEXTS]
    g = document_guarantee(mech, [-1])
    worst = 2.0 * np.array(lengths) * g.p_max
    for q in (0.0, 0.5, 0.95, 1.0):
        assert d["documents"]["quantiles"][f"q{q:g}"] == pytest.approx(float(np.quantile(worst, q)), rel=1e-12)
    assert sum(d["documents"]["histogram"]["counts"]) == len(TEXTS)
    # rare words unchanged: recount from the texts and their outputs, token by token
    ids_in = token_ids(mech, TEXTS)
    ids_out = token_ids(mech, out)
    c = Counter(ids_in[ids_in >= 0].tolist())
    rare_same = sum(1 for a, b in zip(ids_in.tolist(), ids_out.tolist()) if a >= 0 and c[a] == 1 and a == b)
    assert d["survival"]["rare_words"] == sum(1 for v in c.values() if v == 1)
    assert d["survival"]["rare_unchanged"] == rare_same
    # the attack: inversion_attack on the recorded (all, here) tokens with the same outputs and seed
    at = d["attack"]
    assert at["method"] == "exact" and at["sampled_tokens"] == ids_in.size
    again = inversion_attack(mech, ids_in, outputs=ids_out, rng=at["attack_seed"], method="exact")
    assert at["top1"] == again.top1 and at["top1_ci"] == list(again.top1_ci)
    assert at["prior_top1"] == again.prior_top1 and at["unchanged"] == again.unchanged
    # failing control: a different seed's outputs give a different attack input
    other = privatize_texts(mech, TEXTS, rng=4)
    assert token_ids(mech, other).tolist() != ids_out.tolist()
    # the curve marks the run's epsilon among its points
    assert [p["epsilon"] for p in d["curve"]["points"]] == pytest.approx([0.5, 1.0, 2.0, 4.0, 8.0])


def test_attack_sample_is_bounded_and_uniform(vocab):
    mech = get_mechanism("tem", vocab, epsilon=2.0)
    before = dict(vars(mech))
    rec = RunRecorder(mech, max_pairs=20, rng=0)
    out = privatize_texts(rec.sampler, TEXTS * 3, rng=1)
    assert out == privatize_texts(mech, TEXTS * 3, rng=1)  # observing does not change the output
    x, y = rec.pairs
    assert x.size == 20 and rec.tokens == token_ids(mech, TEXTS * 3).size
    # the recorded pairs are (input, output) pairs of this run
    full_in, full_out = token_ids(mech, TEXTS * 3), token_ids(mech, out)
    pairs = set(zip(full_in.tolist(), full_out.tolist()))
    assert all((a, b) in pairs for a, b in zip(x.tolist(), y.tolist()))
    assert vars(mech).keys() == before.keys() and "sample_ids" not in vars(mech)  # nothing written on the mechanism


def test_no_examples_without_opt_in(vocab, tmp_path):
    mech = get_mechanism("madlib", vocab, epsilon=10.0)
    _, rep = _report(mech, curve=False)
    path = tmp_path / "r.html"
    rep.write(path)
    page = path.read_text(encoding="utf-8")
    assert SECRET_LINE not in page and "quarterly report to my" not in page
    assert rep["examples"] == [] and "rare_unchanged_words" not in rep["survival"]
    _, rep2 = _report(mech, curve=False, examples=2)
    rep2.write(path)
    assert SECRET_LINE in path.read_text(encoding="utf-8")  # control: the opt-in shows it


def test_json_and_html_and_warnings(vocab, tmp_path):
    mech = get_mechanism("madlib", vocab, epsilon=200.0)  # almost the identity
    _, rep = _report(mech, curve=False)
    rep.write(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data == rep.to_dict() and data["attack"]["method"] == "sample"
    assert any("almost the input" in w for w in data["warnings"])
    rep.write(tmp_path / "r.html")
    page = html.unescape((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert page.startswith("<!DOCTYPE html>") and "keep it with the text's owner" in page.lower()
    for title in ("Mechanism, epsilon and guarantee", "Per-document bounds", "most likely to survive", "What an adversary recovers"):
        assert title in page


def test_without_matplotlib_the_report_says_so(vocab, monkeypatch):
    import deniable.calibration.plots as plots

    monkeypatch.setattr(plots, "matplotlib_available", lambda: False)
    _, rep = _report(get_mechanism("tem", vocab, epsilon=2.0), curve=False)
    assert rep.plots == {} and "matplotlib is not installed" in rep["plots"]
    assert 'pip install "deniable[plot]"' in html.unescape(rep.to_html())


def test_cli_writes_the_report(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    runner = CliRunner()
    args = ["privatize", str(src), "-o", str(tmp_path / "out.txt"), "-m", "tem", "-e", "2", "--limit", "1500", "--seed", "1"]
    r = runner.invoke(cli, [*args, "--privacy-report", str(tmp_path / "r.json")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["run"]["documents"] == len(TEXTS) and data["examples"] == []
    assert "privacy report:" in r.stderr
    # the output is the same with and without the report
    r2 = runner.invoke(cli, [*args[:3], str(tmp_path / "out2.txt"), *args[4:]], catch_exceptions=False)
    assert r2.exit_code == 0 and (tmp_path / "out.txt").read_text() == (tmp_path / "out2.txt").read_text()
    r3 = runner.invoke(cli, [*args, "--privacy-report", str(tmp_path / "r.html"), "--report-examples", "1"], catch_exceptions=False)
    assert r3.exit_code == 0 and SECRET_LINE in (tmp_path / "r.html").read_text(encoding="utf-8")
    r4 = runner.invoke(cli, [*args, "--report-examples", "1"])
    assert r4.exit_code == 2 and "--privacy-report" in r4.output


CHROMIUM = os.environ.get("DENIABLE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; make test does)")
def test_renders_in_chromium(vocab, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (test extra)")
    pytest.importorskip("matplotlib", reason="the plots need matplotlib")
    _, rep = _report(get_mechanism("tem", vocab, epsilon=2.0))
    assert set(rep.plots) == {"n_w", "curve"}
    path = tmp_path / "r.html"
    rep.write(path)
    shot = Path(__file__).resolve().parents[1] / "build" / "privacy_report.png"
    shot.parent.mkdir(exist_ok=True)
    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-dev-shm-usage"]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            assert page.locator("h2").count() >= 6
            assert page.eval_on_selector_all("img", "els => els.filter(e => e.complete && e.naturalWidth > 100).length") == 2
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert not errors
    assert shot.stat().st_size > 50_000  # a page with two plots, not a blank one


def test_report_type(vocab):
    _, rep = _report(get_mechanism("tem", vocab, epsilon=2.0), curve=False, plots=False)
    assert isinstance(rep, PrivacyReport) and rep["plots"] == "not drawn: plots=False"
