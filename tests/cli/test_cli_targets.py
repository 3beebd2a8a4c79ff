"""Tests of the CLI privacy targets (deniable.cli._targets) and their use in `deniable privatize`."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli


@pytest.fixture
def emb_path(tmp_path):
    rng = np.random.default_rng(0)
    p = tmp_path / "emb.npz"
    words = [f"w{i}" for i in range(120)]
    np.savez(p, words=np.array(words), vectors=rng.standard_normal((120, 5)).astype(np.float32))
    return str(p)


@pytest.fixture
def text_path(tmp_path):
    p = tmp_path / "in.txt"
    rng = np.random.default_rng(1)
    lines = [" ".join(f"w{i}" for i in rng.integers(0, 120, 12)) + " zzz" for _ in range(20)]
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--max-nw", "0"], "strictly between 0 and 1"),
        (["--max-nw", "1"], "strictly between 0 and 1"),
        (["--max-nw", "-0.2"], "strictly between 0 and 1"),
        (["--max-nw", "nan"], "strictly between 0 and 1"),
        (["--max-nw", "half"], "must be a number"),
        (["-e", "1", "--max-nw", "0.5"], "not both"),
        ([], "give -e/--epsilon"),
        (["-e", "0"], "finite number > 0"),
        (["-e", "inf"], "finite number > 0"),
    ],
)
def test_bad_targets_are_one_line_usage_errors(emb_path, text_path, extra, message):
    res = run(["privatize", text_path, "-m", "tem", "--embedding", emb_path, "--no-progress", *extra])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and message in err[0], res.stderr


def test_max_nw_chooses_epsilon_prints_summary_and_report(emb_path, text_path, tmp_path):
    out = tmp_path / "out.txt"
    res = run(["privatize", text_path, "-o", str(out), "-m", "tem", "--embedding", emb_path, "--max-nw", "0.5", "--seed", "0",
               "--no-progress", "--report"])
    assert res.exit_code == 0, res.stderr
    err = res.stderr
    assert "(chosen for max N_w 0.5)" in err and "of in-vocabulary words changed" in err and "unknown (oov=unk)" in err
    assert "chosen for max_n_w=0.5" in err  # how: the worst word, its bound, coverage, source
    assert "input words most likely to come back unchanged" in err
    assert out.read_text().count("\n") == 20 and "zzz" not in out.read_text()
    # the chosen epsilon keeps every word's exact N_w <= 0.5 (TEM has closed-form probabilities)
    import deniable
    from deniable.calibration.targets import choose_epsilon

    emb = deniable.load_embedding(emb_path)
    choice, _ = choose_epsilon(lambda e: deniable.TEM(emb, epsilon=e), 0.5)
    m = deniable.TEM(emb, epsilon=choice.epsilon)
    assert max(m.probabilities(i)[i] for i in range(len(emb))) <= 0.5
    assert f"epsilon={choice.epsilon:.4g}" in err


def test_max_nw_reads_the_embedding_file_once(emb_path, text_path, tmp_path, monkeypatch):
    from deniable.cli import privatize as privatize_mod

    reads = []
    real = privatize_mod._load_vocabulary
    monkeypatch.setattr(privatize_mod, "_load_vocabulary", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    res = run(["privatize", text_path, "-o", str(tmp_path / "out.txt"), "-m", "tem", "--embedding", emb_path, "--max-nw", "0.5",
               "--seed", "0", "--no-progress"])
    assert res.exit_code == 0, res.stderr
    assert reads == [emb_path]


def test_summary_warns_when_output_is_almost_the_input(emb_path, text_path):
    res = run(["privatize", text_path, "-m", "tem", "--embedding", emb_path, "-e", "1000", "--seed", "0", "--no-progress"])
    assert res.exit_code == 0
    assert "almost the input" in res.stderr
    res = run(["privatize", text_path, "-m", "tem", "--embedding", emb_path, "-e", "0.001", "--seed", "0", "--no-progress"])
    assert "almost noise" in res.stderr
    res = run(["privatize", text_path, "-m", "tem", "--embedding", emb_path, "--max-nw", "0.5", "--seed", "0", "--no-progress"])
    assert "almost" not in res.stderr


def test_check_targets_directly():
    import click

    from deniable.cli._targets import check_targets

    assert check_targets(2.0, None) == (2.0, None)
    assert check_targets(None, 0.3) == (None, 0.3)
    for e, m in [(None, None), (1.0, 0.5)]:
        with pytest.raises(click.UsageError):
            check_targets(e, m)
    for e, m in [(-1.0, None), (float("nan"), None), (None, 0.0), (None, 1.0), (None, float("nan"))]:
        with pytest.raises(click.BadParameter):
            check_targets(e, m)
