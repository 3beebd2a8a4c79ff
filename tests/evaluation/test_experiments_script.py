"""scripts/evaluation_experiments.py: the movie-reviews split and the unit grid (every
registered mechanism, a missing privacy ratio fails loudly, N_w-target matching)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

import deniable

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "evaluation_experiments.py"


@pytest.fixture(scope="module")
def ee():
    spec = importlib.util.spec_from_file_location("evaluation_experiments", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _args(**kw):
    base = {"mechanisms": "", "levels": "2,10", "datasets": "sms", "seeds": 2, "max_nw": ""}
    base.update(kw)
    return argparse.Namespace(**base)


def test_units_cover_every_registered_mechanism_at_matched_epsilon(ee):
    ratios = {m: 0.5 for m in deniable.available_mechanisms() if m != "madlib"}
    ratios["custext"] = None  # no finite ratio: runs at the level's epsilon
    units = ee.units(_args(), ratios)
    assert units[0] == ("sms", "none", 0.0, None, 0)
    names = {u[1] for u in units[1:]}
    assert names == set(deniable.available_mechanisms())
    assert len(units) == 1 + 2 * 2 * len(names)
    eps = {(u[1], u[2]): u[3] for u in units[1:]}
    assert eps[("madlib", 10.0)] == 10.0 and eps[("tem", 10.0)] == 5.0 and eps[("custext", 2.0)] == 2.0


def test_units_refuse_a_mechanism_without_ratio(ee):
    with pytest.raises(SystemExit, match="no privacy ratio for 'brr'"):
        ee.units(_args(mechanisms="madlib,brr"), {})


def test_movie_reviews_split(ee, shared_data):
    xtr, ytr, xte, yte = ee.load_dataset("movies", shared_data)
    assert (len(xtr), len(xte)) == (1600, 400)
    assert set(ytr) == set(yte) == {"pos", "neg"}
    assert sum(y == "pos" for y in ytr + yte) == 1000
    assert not set(xtr) & set(xte)
    assert ee.load_dataset("movies", shared_data)[2] == xte  # fixed split


def test_units_matched_by_nw_target_use_the_calibrated_epsilon(ee):
    """--max-nw: each mechanism at the ε its privacy target picks (shipped calibrations), the
    level is the target."""
    from deniable.calibration.targets import mechanism_for_target

    units = ee.units(_args(mechanisms="madlib,tem", max_nw="0.5,0.9", seeds=1), {})
    eps = {(u[1], u[2]): u[3] for u in units[1:]}
    assert set(eps) == {(m, t) for m in ("madlib", "tem") for t in (0.5, 0.9)}
    for (m, t), e in eps.items():
        assert e == mechanism_for_target(m, max_n_w=t, progress=False).epsilon
    assert eps[("tem", 0.5)] < eps[("madlib", 0.5)] < eps[("madlib", 0.9)]


def _record(mechanism, level, seed=0, nw=False):
    rec = {"dataset": "sms", "mechanism": mechanism, "level": level, "epsilon": level or None, "seed": seed,
           "changed_train": 0.5, "acc_clean": 0.9, "acc_priv": 0.8, "mia": {"auc": 0.5}, "seconds": 1.0,
           "inversion": None if mechanism == "none" else {"unchanged": 0.1, "top1": 0.2, "topk": 0.3, "rare_top1": 0.0}}
    if nw:
        rec["max_n_w"] = level
    return rec


def test_summary_puts_nw_matched_units_in_their_own_table(ee, tmp_path):
    recs = [_record("none", 0.0), _record("madlib", 2.0), _record("madlib", 0.5, nw=True), _record("madlib", 0.5, seed=1, nw=True)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = ee.summarize(tmp_path, plots=False)
    ratio_part, nw_part = text.split("### sms — matched by a worst-case N_w target")
    assert "| 2 | madlib |" in ratio_part and "| 0.5 | madlib |" not in ratio_part
    assert "max N_w target" in nw_part and "| 0.5 | madlib | 0.5 | 2 |" in nw_part and "| 2 | madlib |" not in nw_part
    assert "| 0 | none |" in ratio_part and "| 0 | none |" in nw_part.split("### time")[0]


def test_missing_units_lists_what_no_folder_has(ee):
    n_mech = len(deniable.available_mechanisms())
    recs = [_record("madlib", lv, seed=s) for lv in (2.0, 10.0, 20.0) for s in range(3)] + [_record("tem", 2.0, seed=0), _record("tem", 0.5, nw=True)]
    text = "\n".join(ee.missing_units(recs))
    assert f"sms: {3 * 3 * n_mech - 10} of {3 * 3 * n_mech} units missing" in text
    assert "  madlib:" not in text  # complete
    assert "  tem: L2: seed 1,2; L10: all; L20: all" in text  # the N_w-matched unit does not count
    blogs = "\n".join(ee.missing_units([{**_record("madlib", 2.0, seed=0), "dataset": "blogs"}]))
    assert f"blogs: {3 * 3 * n_mech - 1} of {3 * 3 * n_mech} units missing" in blogs  # authorship has 3 seeds too


def test_units_skip_and_record_targets_no_epsilon_meets(ee, tmp_path, monkeypatch):
    """A target the mechanism cannot meet at any ε is skipped (not a crash of the whole grid),
    recorded in infeasible.json and named under the N_w table."""

    def fake(name, tau):
        if name == "santext_plus" and tau < 0.7:
            raise ValueError(f"no epsilon >= 0.01 meets max_n_w={tau} for santext_plus on this vocabulary (worst word 'most' has N_w up to 0.7 even there); raise the target")
        return 1.0 + tau

    monkeypatch.setattr(ee, "nw_epsilon", fake)
    units = ee.units(_args(mechanisms="madlib,santext_plus", max_nw="0.5,0.9", seeds=1, out=str(tmp_path)), {})
    got = {(u[1], u[2]) for u in units[1:]}
    assert got == {("madlib", 0.5), ("madlib", 0.9), ("santext_plus", 0.9)}
    assert list(json.loads((tmp_path / "infeasible.json").read_text())) == ["santext_plus 0.5"]
    recs = [_record("none", 0.0), _record("madlib", 0.5, nw=True)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    nw_part = ee.summarize(tmp_path, plots=False).split("matched by a worst-case N_w target")[1]
    assert "No ε meets these targets" in nw_part and "santext_plus at 0.5 (worst word 'most' has N_w up to 0.7 even there)" in nw_part


def test_exact_inversion_cells_are_computed_once_and_summarized(ee, tmp_path, monkeypatch):
    """--exact-inversion: one line per (data set, mechanism, level) whose mechanism has closed-form
    probabilities (Madlib has none: no line), equal to inversion_attack(method="exact") with the
    training prior; a rerun adds nothing; the summary shows it next to the units' sampled adversary."""
    import numpy as np

    from deniable.evaluation import inversion_attack, token_ids

    from ..conftest import random_embedding

    small = random_embedding(n=80, dim=4, seed=2)  # the bundled embedding's k-nearest table would take most of the test
    real = deniable.get_mechanism
    monkeypatch.setattr(deniable, "get_mechanism", lambda name, vocabulary=None, **kw: real(name, small, **kw))
    words = small.words[:60]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=8)) for _ in range(60)]
    monkeypatch.setattr(ee, "_data", lambda args, name: (texts[:40], [0] * 40, texts[40:], [0] * 20))
    (tmp_path / "ratios.json").write_text(json.dumps({"santext": 1.0}))
    args = _args(mechanisms="santext,madlib", levels="2", seeds=1, out=str(tmp_path), ratios=str(tmp_path / "ratios.json"))
    ee.exact_inversion(args)
    lines = [json.loads(x) for x in (tmp_path / "exact_inversion.jsonl").read_text().splitlines()]
    assert [(x["mechanism"], x["level"]) for x in lines] == [("santext", 2.0)]
    mech = deniable.get_mechanism("santext", epsilon=2.0)
    x_tr, x_te = token_ids(mech, texts[:40]), token_ids(mech, texts[40:])
    want = inversion_attack(mech, x_te, prior=np.bincount(x_tr[x_tr >= 0], minlength=mech.n_words).astype(float), method="exact")
    assert lines[0]["inversion_exact"]["expected_top1"] == pytest.approx(want.expected_top1, rel=1e-12)
    ee.exact_inversion(args)  # resume: nothing new
    assert len((tmp_path / "exact_inversion.jsonl").read_text().splitlines()) == 1
    (tmp_path / "results.jsonl").write_text(json.dumps(_record("santext", 2.0)) + "\n")
    table = ee.summarize(tmp_path, plots=False).split("### Bayes-optimal inversion")[1].split("###")[0]
    row = next(r for r in table.splitlines() if "| santext |" in r)
    unchanged = lines[0]["inversion_exact"]["unchanged"]  # read as is, on the exact run's own privatization
    assert f"| {100 * want.expected_top1:.1f} |" in row and row.endswith(f"| {100 * unchanged:.1f} | {100 * want.prior_top1:.1f} | 20.0 |")  # ...; prior only; the unit's sampled top-1


def test_update_doc_rewrites_only_the_tables_and_the_missing_list(ee, tmp_path):
    recs = [_record("none", 0.0), _record("madlib", 2.0), _record("madlib", 2.0, seed=1)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    prose = "Prose that a person wrote | with a bar in it."
    parts = []
    for head in ee.DOC_SECTIONS:
        parts += [head + " (details)", "", prose, "", "| old | table |", "|---|---|", "| stale | row |", "", "After the table."]
    parts += ["## What is missing", "", "```", "stale list", "```", "", "## Reproduce", "", "| keep | this |"]
    doc = tmp_path / "evaluation.md"
    doc.write_text("\n".join(parts))
    with pytest.raises(SystemExit, match="cannot merge the table under '## SMS Spam Collection"):
        ee.update_doc(doc, ee.summarize(tmp_path, plots=False))  # "| stale | row |" is no grid row
    report = ee.update_doc(doc, ee.summarize(tmp_path, plots=False), merge=False)
    text = doc.read_text()
    sms = text.split("## SMS Spam Collection (details)")[1].split("\n## ")[0]
    assert "| 2 | madlib | 2 | 2 |" in sms and "stale" not in sms and prose in sms and "After the table." in sms
    assert "stale list" not in text and "sms: " in text.split("## What is missing")[1]
    assert text.endswith("| keep | this |")  # a table under a heading the script does not own stays
    assert text.count("| stale | row |") == sum("skipped" in r for r in report) > 0  # no IMDb results: its table stays
    assert any("skipped '## IMDb'" in r for r in report)


def test_update_doc_names_a_heading_the_page_lacks(ee, tmp_path):
    doc = tmp_path / "evaluation.md"
    doc.write_text("## SMS Spam Collection\n\n| a |\n")
    with pytest.raises(SystemExit, match="no heading starting with '## IMDb'"):
        ee.update_doc(doc, "### sms\n\n| new |\n")
    assert doc.read_text() == "## SMS Spam Collection\n\n| a |\n"  # nothing half-written


def test_gpu_units_use_the_library_torch_backend(ee):
    """--gpu builds the torch backend's mechanism where there is one (Vickrey included: it needs
    the two nearest words, which a 1-NN index swap could not give) and numpy otherwise."""
    pytest.importorskip("torch")
    from deniable.backends.torch_backend import TorchVickrey

    mech = ee.build_mechanism("vickrey", 2.0, device="cpu")
    assert isinstance(mech, TorchVickrey) and "backend='torch'" in repr(mech)
    assert mech.sample_ids([0, 1, 2], rng=0).shape == (3,)
    assert type(ee.build_mechanism("santext", 2.0, device="cpu")).__name__ == "SanText"
    assert type(ee.build_mechanism("vickrey", 2.0)).__name__ == "Vickrey"
    assert ee._device(argparse.Namespace(gpu=True)) == "cuda" and ee._device(argparse.Namespace(gpu=False)) is None


def test_update_doc_never_takes_a_code_block_of_a_later_section(ee, tmp_path):
    recs = [_record("none", 0.0), _record("madlib", 2.0)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    parts = []
    for head in ee.DOC_SECTIONS:
        parts += [head, "", "| old |", ""]
    parts += ["## What is missing", "", "(the list was deleted)", "", "## Reproduce", "", "```", "keep this command", "```"]
    doc = tmp_path / "evaluation.md"
    doc.write_text("\n".join(parts))
    before = doc.read_text()
    with pytest.raises(SystemExit, match="no ``` block under '## What is missing'"):
        ee.update_doc(doc, ee.summarize(tmp_path, plots=False))
    assert doc.read_text() == before and not (tmp_path / "evaluation.md.tmp").exists()


def _page(ee, tmp_path, recs, name="page.md", sims=()):
    """A results page with every heading update_doc owns, its tables made from ``recs`` (and the
    similarity records ``sims``)."""
    folder = tmp_path / (name + ".units")
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (folder / "similarity.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sims))
    parts = []
    for head in ee.DOC_SECTIONS:
        parts += [head, "", "Prose.", "", "| a |", "|---|", ""]
    parts += ["## What is missing", "", "```", "old", "```", ""]
    doc = tmp_path / name
    doc.write_text("\n".join(parts))
    ee.update_doc(doc, ee.summarize(folder, plots=False), merge=False)
    return doc


def test_page_records_read_one_seed_rows_back(ee, tmp_path):
    """The page's one-seed rows come back as seed-0 records (to its 0.1-point rounding); rows with
    several seeds only as seed counts."""
    one = _record("madlib", 2.0)
    one.update(acc_clean=0.8123, mia={"auc": 0.5049})
    nw = _record("tem", 0.5, nw=True)
    doc = _page(ee, tmp_path, [_record("none", 0.0), one, _record("tem", 2.0), _record("tem", 2.0, seed=1), nw])
    recs, cells = ee.page_records(doc.read_text().split("\n"))
    got = {(r["mechanism"], r["level"], "max_n_w" in r): r for r in recs}
    r = got["madlib", 2.0, False]
    assert r["seed"] == 0 and r["from_page"] and r["epsilon"] == 2.0
    assert r["acc_clean"] == pytest.approx(0.812) and r["mia"]["auc"] == pytest.approx(0.505) and r["acc_priv"] == pytest.approx(0.8)
    assert r["inversion"] == pytest.approx({"unchanged": 0.1, "top1": 0.2, "topk": 0.3, "rare_top1": 0.0})
    assert got["tem", 0.5, True]["max_n_w"] == 0.5 and got["none", 0.0, False]["inversion"] is None
    assert ("tem", 2.0, False) not in got  # two seeds: not splittable
    assert cells["sms", "tem", 2.0, False] == 2 and cells["sms", "madlib", 2.0, False] == 1 and cells["sms", "tem", 0.5, True] == 1


def test_update_doc_combines_new_seeds_with_the_page_and_keeps_its_other_rows(ee, tmp_path):
    """The build folder of earlier runs is gone; the page holds their rows. New seeds of a one-seed
    cell combine with the page's seed 0; rows the new units do not touch stay as they were."""
    old = _record("madlib", 2.0)
    old["acc_clean"] = 0.5
    doc = _page(ee, tmp_path, [_record("none", 0.0), old, _record("tem", 2.0), _record("tem", 2.0, seed=1), _record("tem", 2.0, seed=2)])
    before = doc.read_text()
    tem_row = next(line for line in before.split("\n") if line.startswith("| 2 | tem |"))
    new = tmp_path / "new"
    new.mkdir()
    recs = [_record("madlib", 2.0, seed=1), _record("madlib", 2.0, seed=2), _record("vickrey", 10.0)]
    for r, acc in zip(recs, (0.6, 0.7, 0.9)):
        r["acc_clean"] = acc
    (new / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    ee.update_doc(doc, ee.summarize(new, plots=False, page=doc))
    rows = [line for line in doc.read_text().split("## IMDb")[0].split("\n") if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1:3] for r in rows[1:]] == [[" 0 ", " none "], [" 2 ", " madlib "], [" 2 ", " tem "], [" 10 ", " vickrey "]]
    madlib = rows[2]
    assert "| 2 | madlib | 2 | 3 | 50.0 ± 0.0 | 60.0 ± 24.8 |" in madlib  # mean of 50, 60, 70; t(2) half-width 24.8
    assert tem_row in rows  # three seeds on the page, none new: kept verbatim
    missing = doc.read_text().split("## What is missing")[1]
    n = len(deniable.available_mechanisms())
    assert f"sms: {9 * n - 7} of {9 * n} units missing" in missing  # madlib L2 ×3, tem L2 ×3, vickrey L10 ×1
    assert "  vickrey: L2: all; L10: seed 1,2; L20: all" in missing


def test_update_doc_saves_the_read_back_seed_0_records(ee, tmp_path, capsys):
    """After a merge the seed-0 value lives only inside a 3-seed mean: ``keep_page`` saves the
    read-back record, so a second summary (with that folder) rebuilds the same row, and without
    it the page's row is kept with a warning."""
    old = _record("madlib", 2.0)
    old["acc_clean"] = 0.5
    sim = {k: old[k] for k in ("dataset", "mechanism", "level", "epsilon", "seed")} | {"similarity": 0.1}
    doc = _page(ee, tmp_path, [_record("none", 0.0), old], sims=[sim])
    new = tmp_path / "new"
    new.mkdir()
    recs = [_record("madlib", 2.0, seed=1), _record("madlib", 2.0, seed=2)]
    for r, acc in zip(recs, (0.6, 0.7)):
        r["acc_clean"] = acc
    (new / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    keep = tmp_path / "from_page"
    ee.update_doc(doc, ee.summarize(new, plots=False, page=doc, keep_page=keep))
    first = doc.read_text()
    assert "| 2 | madlib | 2 | 3 | 50.0 ± 0.0 | 60.0 ± 24.8 |" in first
    saved = [json.loads(x) for x in (keep / "results.jsonl").read_text().splitlines()]
    assert [(r["mechanism"], r["seed"], r["from_page"], r["acc_clean"]) for r in saved] == [("madlib", 0, True, 0.5)]
    assert json.loads((keep / "similarity.jsonl").read_text())["similarity"] == pytest.approx(0.1)
    ee.update_doc(doc, ee.summarize([new, keep], plots=False, page=doc, keep_page=keep))
    assert doc.read_text() == first and "kept the page" not in capsys.readouterr().err
    assert len((keep / "results.jsonl").read_text().splitlines()) == 1  # not saved twice
    ee.summarize(new, plots=False, page=doc)  # without the saved folder: the 3-seed row cannot be rebuilt
    assert "kept the page's 3-seed row" in capsys.readouterr().err


def test_merge_rows_keeps_the_page_time_row_and_orders_like_the_summary(ee):
    head = ["| data set | mechanism | units |", "|---|---|---:|"]
    page = [*head, "| sms | tem | 9 |", "| imdb | madlib | 1 |"]
    new = [*head, "| sms | madlib | 2 |", "| imdb | madlib | 2 |"]
    assert ee.merge_rows("time per unit (median over units; seconds)", page, new) == [
        *head, "| sms | madlib | 2 |", "| sms | tem | 9 |", "| imdb | madlib | 1 |"]
    grid = ["| level | mechanism | seeds |", "|---|---|---:|"]
    page = [*grid, "| 10 | tem | 3 |", "| 2 | tem | 3 |", "| 2 | vickrey | 2 |"]
    new = [*grid, "| 2 | madlib | 1 |", "| 2 | tem | 1 |", "| 2 | vickrey | 3 |"]
    assert ee.merge_rows("imdb", page, new) == [  # never fewer seeds than the page row had
        *grid, "| 2 | madlib | 1 |", "| 2 | vickrey | 3 |", "| 2 | tem | 3 |", "| 10 | tem | 3 |"]


def test_merge_rows_relays_kept_rows_to_a_new_header(ee):
    """A column the new summary adds (the audit model's) must not shift the kept rows' cells."""
    page = ["| level | mechanism | seeds | MIA AUC % | similarity % |", "|---:|---|---:|---:|---:|", "| 2 | tem | 3 | 51.2 | 22.3 |"]
    new = ["| level | mechanism | seeds | MIA AUC % | MIA AUC audit model % | similarity % |", "|---:|---|---:|---:|---:|---:|",
           "| 2 | madlib | 1 | 50.0 | 60.0 | 5.0 |"]
    assert ee.merge_rows("sms", page, new)[2:] == ["| 2 | madlib | 1 | 50.0 | 60.0 | 5.0 |", "| 2 | tem | 3 | 51.2 | — | 22.3 |"]


def test_update_doc_plots_the_merged_tables(ee, tmp_path, monkeypatch):
    """The figures show the page's kept rows too, not only the new units."""
    doc = _page(ee, tmp_path, [_record("none", 0.0), _record("tem", 2.0)])
    new = tmp_path / "new"
    new.mkdir()
    (new / "results.jsonl").write_text(json.dumps(_record("madlib", 2.0)) + "\n")
    drawn = {}
    monkeypatch.setattr(ee, "_plots", lambda out, tables, prefix: drawn.update(out=out, tables=tables, prefix=prefix))
    ee.update_doc(doc, ee.summarize(new, plots=False, page=doc), plot_prefix="evaluation_")
    assert drawn["out"] == tmp_path and drawn["prefix"] == "evaluation_" and "sms — matched by a worst-case N_w target" in drawn["tables"]
    assert "Bayes-optimal inversion (mechanisms with closed-form probabilities)" not in drawn["tables"]
    assert [ee._row_cells(r)[1] for r in drawn["tables"]["sms"][2:]] == ["none", "madlib", "tem"]


def test_plots_draw_a_figure_per_grid_table(ee, tmp_path):
    pytest.importorskip("matplotlib")
    doc = _page(ee, tmp_path, [_record("none", 0.0), _record("madlib", 2.0), _record("madlib", 2.0, seed=1),
                               _record("madlib", 0.5, nw=True), _record("tem", 0.5, nw=True)])
    ee.update_doc(doc, ee.summarize(tmp_path / "page.md.units", plots=False, page=doc), plot_prefix="evaluation_")
    assert (tmp_path / "evaluation_sms.png").stat().st_size > 10_000 and not (tmp_path / "evaluation_imdb.png").exists()
    assert (tmp_path / "evaluation_sms_nw.png").stat().st_size > 10_000  # the N_w-target table has its own figure


def test_update_doc_never_shrinks_a_several_seed_row(ee, tmp_path, capsys):
    """A page row over 3 seeds whose per-seed values are gone is not replaced by one new seed
    (that would drop two); a full rerun of its seeds does replace it."""
    doc = _page(ee, tmp_path, [_record("none", 0.0)] + [_record("tem", 2.0, seed=s) for s in range(3)])
    row = next(line for line in doc.read_text().split("\n") if line.startswith("| 2 | tem |"))
    new = tmp_path / "new"
    new.mkdir()
    one = _record("tem", 2.0, seed=1)
    one["acc_clean"] = 0.1
    (new / "results.jsonl").write_text(json.dumps(one) + "\n")
    ee.update_doc(doc, ee.summarize(new, plots=False, page=doc))
    assert row in doc.read_text() and "kept the page's 3-seed row of sms tem 2" in capsys.readouterr().err
    full = [_record("tem", 2.0, seed=s) for s in range(3)]
    for r in full:
        r["acc_clean"] = 0.1
    (new / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in full))
    ee.update_doc(doc, ee.summarize(new, plots=False, page=doc))
    assert row not in doc.read_text() and "| 2 | tem | 2 | 3 | 50.0 ± 0.0 | 10.0 ± 0.0 |" in doc.read_text()


def test_the_real_results_page_round_trips(ee, tmp_path):
    """docs/results/evaluation.md is the only record of the units whose raw records are gone: an
    update with no new units must leave it byte for byte, and every grid row must read back."""
    page = Path(__file__).resolve().parents[2] / "docs" / "results" / "evaluation.md"
    doc = tmp_path / "evaluation.md"
    doc.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "empty").mkdir()
    ee.update_doc(doc, ee.summarize(tmp_path / "empty", plots=False, page=doc))
    assert doc.read_text(encoding="utf-8") == page.read_text(encoding="utf-8")
    recs, cells = ee.page_records(doc.read_text(encoding="utf-8").split("\n"))
    assert len(cells) > 150 and all(r["seed"] == 0 and cells[r["dataset"], r["mechanism"], r["level"], "max_n_w" in r] == 1 for r in recs)
    assert {d for d, *_ in cells} == {"sms", "imdb", "movies", "blogs"}


def test_seed_list_runs_only_those_seeds_and_the_baseline_only_with_seed_0(ee):
    got = ee.units(_args(mechanisms="madlib", levels="2", seed_list="1,2"), {"madlib": 1.0})
    assert [(u[1], u[4]) for u in got] == [("madlib", 1), ("madlib", 2)]
    got = ee.units(_args(mechanisms="madlib", levels="2", seed_list="0,2"), {"madlib": 1.0})
    assert [(u[1], u[4]) for u in got] == [("none", 0), ("madlib", 0), ("madlib", 2)]
