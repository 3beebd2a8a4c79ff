"""deniable evaluate: end to end on a tiny embedding, resume, exit codes."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    emb = tmp_path / "emb.txt"
    emb.write_text("".join(f"{w} " + " ".join(f"{v:.4f}" for v in rng.standard_normal(4)) + "\n" for w in words))
    data = tmp_path / "data.csv"
    with data.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(80):
            lab = i % 2
            pool = words[:20] if lab else words[20:]
            w.writerow([" ".join(rng.choice(pool, size=8)), "pos" if lab else "neg"])
    return emb, data


def test_evaluate_end_to_end_and_resume(files, tmp_path):
    emb, data = files
    out = tmp_path / "out"
    args = ["evaluate", str(data), "-m", "madlib", "-e", "1,50", "--seeds", "2", "--embedding", str(emb), "-o", str(out),
            "--min-simulations", "2000", "--no-progress"]
    r = run(*args)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["n_train"] == 64 and res["config"]["n_test"] == 16
    assert [s["epsilon"] for s in res["summary"]] == [1.0, 50.0]
    hi = res["summary"][1]
    assert hi["seeds"] == 2 and hi["inversion_top1"]["mean"] > 0.9  # epsilon 50: words barely change
    assert res["summary"][0]["inversion_top1"]["mean"] < hi["inversion_top1"]["mean"]
    assert "mia" in res["baseline"] and "inversion" not in res["baseline"]
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["baseline.json", "madlib_eps1_seed0.json", "madlib_eps1_seed1.json", "madlib_eps50_seed0.json", "madlib_eps50_seed1.json"]
    assert (out / "results.png").stat().st_size > 1000
    # resume: a finished run is read back, not recomputed
    marker = out / "runs" / "madlib_eps50_seed1.json"
    rec = json.loads(marker.read_text())
    rec["acc_clean"] = -1.0
    marker.write_text(json.dumps(rec))
    r = run(*args)
    assert r.exit_code == 0
    res2 = json.loads((out / "results.json").read_text())
    assert -1.0 in [x["acc_clean"] for x in res2["runs"]]
    # same seed, same numbers
    assert res2["summary"][0] == res["summary"][0]


@pytest.mark.parametrize(
    "extra, code, message",
    [
        (["-e", "0"], 2, "epsilon"),
        (["-e", "1", "--attacks", "magic"], 2, "unknown attack"),
        (["-e", "1", "--label-column", "nope"], 1, "missing column"),
        (["-e", "1", "-m", "nosuch"], 2, "unknown mechanism"),
    ],
)
def test_errors(files, tmp_path, extra, code, message):
    emb, data = files
    args = ["evaluate", str(data), "--embedding", str(emb), "-o", str(tmp_path / "o"), "--no-progress"]
    if "-m" not in extra:
        args += ["-m", "madlib"]
    r = run(*args, *extra)
    assert r.exit_code == code
    assert message in r.output
    assert len(r.output.strip().splitlines()) <= 3


def test_missing_file_is_data_error(tmp_path):
    r = run("evaluate", str(tmp_path / "none.csv"), "-m", "madlib", "-e", "1", "-o", str(tmp_path / "o"))
    assert r.exit_code == 1 and "not found" in r.output


class _LetterModel:
    """A stand-in sentence encoder: unit-normalized letter counts (no torch needed)."""

    def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True):
        out = np.zeros((len(texts), 128))
        for i, t in enumerate(texts):
            for c in t:
                out[i, ord(c) % 128] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def test_similarity_is_measured_per_run_and_part_of_resume(files, tmp_path, monkeypatch):
    from deniable.evaluation import similarity as similarity_mod

    monkeypatch.setattr(similarity_mod, "load_sentence_model", lambda model=None, device=None: _LetterModel())
    emb, data = files
    out = tmp_path / "out"
    base = ["evaluate", str(data), "-m", "madlib", "-e", "0.5,1000", "--seeds", "2", "--embedding", str(emb), "-o", str(out),
            "--attacks", "none", "--no-progress"]
    r = run(*base, "--similarity", "10")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    low, high = res["summary"]
    assert high["similarity"]["mean"] == pytest.approx(1.0)  # epsilon 1000: the text comes back as it was
    assert low["similarity"]["mean"] < 0.99 and low["similarity"]["ci95"] is not None
    assert all(x["similarity"]["n"] == 10 and "sample" not in x for x in res["runs"])
    assert "similarity" not in res["baseline"]
    # runs saved without similarity are recomputed when it is asked for, and kept when it is not
    r = run(*base)
    assert r.exit_code == 0
    assert all("similarity" not in x for x in json.loads((out / "results.json").read_text())["runs"])
    r = run(*base, "--similarity", "10")
    assert all("similarity" in x for x in json.loads((out / "results.json").read_text())["runs"])


def test_similarity_without_the_extra_is_a_usage_error(files, tmp_path, monkeypatch):
    from deniable.evaluation import similarity as similarity_mod

    def missing(model=None, device=None):
        raise ImportError('sentence_transformers is not installed; or install the optional extra: pip install "deniable[eval]"')

    monkeypatch.setattr(similarity_mod, "load_sentence_model", missing)
    emb, data = files
    r = run("evaluate", str(data), "-m", "madlib", "-e", "1", "--embedding", str(emb), "-o", str(tmp_path / "o"), "--similarity", "5")
    assert r.exit_code == 2 and "deniable[eval]" in r.output
    assert not (tmp_path / "o").exists()  # nothing ran


def test_max_nw_targets_choose_each_epsilon_and_are_recorded(files, tmp_path):
    """--max-nw: one ε per target from the calibration (the same choice as the Python API), every
    word's exact N_w at that ε within the target, the targets in results.json and the output."""
    import deniable
    from deniable.calibration.targets import choose_epsilon

    emb, data = files
    out = tmp_path / "out"
    r = run("evaluate", str(data), "-m", "santext", "--max-nw", "0.5,0.9", "--seeds", "2", "--embedding", str(emb), "-o", str(out),
            "--min-simulations", "2000", "--no-progress")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["max_nw"] == [0.5, 0.9]
    vocab = deniable.load_embedding(str(emb))
    for row, tau in zip(res["summary"], (0.5, 0.9)):
        choice, _ = choose_epsilon(lambda e: deniable.get_mechanism("santext", vocab, epsilon=e), tau)
        assert row["max_nw"] == [tau] and row["epsilon"] == pytest.approx(choice.epsilon) and row["seeds"] == 2
        m = deniable.get_mechanism("santext", vocab, epsilon=row["epsilon"])
        assert max(m.probabilities(i)[i] for i in range(len(vocab))) <= tau
        assert f"max_nw={tau:g}  epsilon={row['epsilon']:g}" in r.output
    assert res["summary"][0]["epsilon"] < res["summary"][1]["epsilon"]
    # SanText has closed-form probabilities: the Bayes-optimal adversary is reported next to the sampled one
    assert all("inversion_exact_top1" in row and "inversion_exact_expected_top1" in row for row in res["summary"])
    assert "inversion_exact_top1=" in r.output


def test_max_nw_reads_the_embedding_file_once_for_all_targets(files, tmp_path, monkeypatch):
    """A user's embedding file is read once, not once per target (probe) plus once per chosen ε."""
    from deniable.cli import privatize as privatize_mod

    reads = []
    real = privatize_mod._load_vocabulary
    monkeypatch.setattr(privatize_mod, "_load_vocabulary", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    emb, data = files
    r = run("evaluate", str(data), "-m", "santext", "--max-nw", "0.5,0.9", "--embedding", str(emb), "-o", str(tmp_path / "o"),
            "--attacks", "none", "--no-progress")
    assert r.exit_code == 0, r.output
    assert reads == [str(emb)]
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert [row["max_nw"] for row in res["summary"]] == [[0.5], [0.9]]



def test_no_exact_inversion_skips_the_bayes_optimal_adversary(files, tmp_path):
    emb, data = files
    r = run("evaluate", str(data), "-m", "tem", "-e", "2", "--seeds", "1", "--embedding", str(emb), "-o", str(tmp_path / "o"),
            "--attacks", "inversion", "--min-simulations", "2000", "--no-exact-inversion", "--no-progress")
    assert r.exit_code == 0, r.output
    row = json.loads((tmp_path / "o" / "results.json").read_text())["summary"][0]
    assert "inversion_top1" in row and "inversion_exact_top1" not in row
    # the same command with the exact adversary does not reuse those runs without it
    r = run("evaluate", str(data), "-m", "tem", "-e", "2", "--seeds", "1", "--embedding", str(emb), "-o", str(tmp_path / "o"),
            "--attacks", "inversion", "--min-simulations", "2000", "--no-progress")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["config"]["exact_inversion"] is True and "inversion_exact_top1" in res["summary"][0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--max-nw", "0.5", "-e", "1"], "not both"),
        ([], "give -e/--epsilon"),
        (["--max-nw", "0.5,1"], "strictly between 0 and 1"),
        (["--max-nw", "0.5,half"], "must be numbers separated by commas"),
    ],
)
def test_target_usage_errors(files, tmp_path, extra, message):
    emb, data = files
    r = CliRunner().invoke(cli, ["evaluate", str(data), "-m", "tem", "--embedding", str(emb), "-o", str(tmp_path / "o"), "--no-progress", *extra])
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_a_target_no_epsilon_meets_is_a_usage_error_naming_the_word(files, tmp_path):
    """SanText+ keeps each non-sensitive word with probability 1 - p = 0.7 at every ε."""
    emb, data = files
    r = CliRunner().invoke(cli, ["evaluate", str(data), "-m", "santext_plus", "--max-nw", "0.5", "--embedding", str(emb),
                                 "--param", 'sensitive=["w36","w37","w38","w39"]', "-o", str(tmp_path / "o"), "--no-progress"])
    assert r.exit_code == 2, r.output
    assert "no epsilon" in r.output and "max_n_w=0.5" in r.output and "N_w up to 0.7" in r.output
    assert not (tmp_path / "o").exists()  # nothing written


def test_device_runs_the_torch_backend_and_names_mechanisms_without_one(files, tmp_path):
    pytest.importorskip("torch")
    emb, data = files
    out = tmp_path / "out"
    r = run("evaluate", str(data), "-m", "vickrey", "-e", "3", "--seeds", "1", "--embedding", str(emb), "-o", str(out),
            "--min-simulations", "2000", "--no-progress", "--device", "cpu")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["device"] == "cpu"
    run_rec = json.loads((out / "runs" / "vickrey_eps3_seed0.json").read_text())
    assert "backend='torch'" in run_rec["mechanism"]
    r = run("evaluate", str(data), "-m", "santext", "-e", "3", "--embedding", str(emb), "-o", str(tmp_path / "o2"), "--device", "cpu")
    assert r.exit_code == 2 and "santext has no torch backend" in r.output and not (tmp_path / "o2").exists()
