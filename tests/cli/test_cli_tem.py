"""``deniable precompute tem``: builds the neighbourhood cache; parameters and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from deniable import load_embedding
from deniable.cli.main import cli
from deniable.mechanisms.tem import TEM


@pytest.fixture
def emb_file(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path / "emb.npz"
    np.savez(path, words=np.array([f"w{i}" for i in range(80)]), vectors=rng.standard_normal((80, 6)).astype(np.float32))
    return path


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_precompute_builds_cache_used_by_tem(emb_file, tmp_path) -> None:
    cache = tmp_path / "cache"
    res = run("precompute", "tem", "-e", "10", "--param", "beta=0.001", "--param", "precomputed_neighbors=8", "--embedding", str(emb_file), "--cache-dir", str(cache))
    assert res.exit_code == 0, res.output
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("tem-knn-") and "-euclidean-k8-" in files[0].name
    assert str(files[0]) in res.output and "gamma=" in res.output
    # a TEM built in Python with the same key finds and uses that file
    mech = TEM(load_embedding(emb_file), epsilon=3.0, precomputed_neighbors=8, cache_dir=cache)
    mech.precompute()
    assert mech.cache_file == files[0]
    # running again reuses the file
    res2 = run("precompute", "tem", "-e", "10", "--param", "precomputed_neighbors=8", "--embedding", str(emb_file), "--cache-dir", str(cache))
    assert res2.exit_code == 0 and len(list(cache.iterdir())) == 1


def test_precompute_compact_table_resumes_and_is_used(emb_file, tmp_path) -> None:
    """storage=compact: a folder cache that TEM then uses; a second run after an interrupted
    build says it resumes."""
    cache = tmp_path / "cache"
    res = run("precompute", "tem", "-e", "3", "--param", "precomputed_neighbors=8", "--param", "storage=compact", "--embedding", str(emb_file),
              "--cache-dir", str(cache), "--progress")
    assert res.exit_code == 0, res.output
    (folder,) = cache.iterdir()
    assert folder.is_dir() and folder.name.startswith("tem-knnids-") and str(folder) in res.output
    assert "81 rows (vocabulary + UNK), 648 entries" in res.output and "resumes where it stopped" in res.output
    mech = TEM(load_embedding(emb_file), epsilon=3.0, precomputed_neighbors=8, cache_dir=cache, storage="compact")
    mech.precompute()
    assert mech.cache_file == folder
    # a partial build left behind (as by a killed run) is continued, not restarted
    partial = folder.with_name(folder.name + ".partial")
    folder.rename(partial)
    import json

    meta = json.loads((partial / "meta.json").read_text())
    meta.pop("complete")
    (partial / "meta.json").write_text(json.dumps(meta))
    (partial / "done").write_text("40")
    res = run("precompute", "tem", "-e", "3", "--param", "precomputed_neighbors=8", "--param", "storage=compact", "--embedding", str(emb_file),
              "--cache-dir", str(cache), "--progress")
    assert res.exit_code == 0, res.output
    assert "resuming the k-nearest table" in res.output and "at row 40 of 81" in res.output
    assert folder.is_dir() and not partial.exists()


def test_precompute_metric_env_dir_and_radius(emb_file, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "env"))
    res = run("precompute", "tem", "-e", "20", "--metric", "angular", "--param", "neighbors=radius", "--embedding", str(emb_file))
    assert res.exit_code == 0, res.output
    (f,) = (tmp_path / "env").iterdir()
    assert f.name.startswith("tem-radius-") and "-angular-" in f.name
    res = run("precompute", "tem", "-e", "2", "--param", "metric=manhattan", "--param", "precomputed_neighbors=4", "--embedding", str(emb_file), "--rebuild")
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "env").iterdir())) == 2


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--param", "foo=1"], "unknown TEM parameter"),
        (["--param", "beta=2"], "beta"),
        (["--param", "precomputed_neighbors=0"], "precomputed_neighbors must be"),
        (["--param", "nokey"], "KEY=VALUE"),
        (["--metric", "cosine"], "cosine"),
        (["--metric", "angular", "--param", "metric=euclidean"], "conflicts"),
        (["-e", "0"], "epsilon"),
        (["-e", "-1"], "epsilon"),
    ],
)
def test_usage_errors_exit_2(emb_file, tmp_path, args, needle) -> None:
    base = ["precompute", "tem", "--embedding", str(emb_file), "--cache-dir", str(tmp_path)]
    if "-e" not in args:
        base += ["-e", "5"]
    res = CliRunner().invoke(cli, base + args)
    assert res.exit_code == 2, res.output
    assert needle in res.output


def test_missing_or_bad_embedding(tmp_path) -> None:
    res = CliRunner().invoke(cli, ["precompute", "tem", "-e", "5", "--embedding", str(tmp_path / "nope.npz")])
    assert res.exit_code == 1 and "nope.npz" in res.output
    bad = tmp_path / "bad.txt"
    bad.write_text("w1 0.1 0.2\nw2 0.3\n")
    res = CliRunner().invoke(cli, ["precompute", "tem", "-e", "5", "--embedding", str(bad), "--cache-dir", str(tmp_path)])
    assert res.exit_code == 1 and "bad.txt" in res.output


def test_help() -> None:
    res = run("precompute", "tem", "--help")
    assert res.exit_code == 0 and "--cache-dir" in res.output and "--param" in res.output


def _one_line_error(res) -> str:
    assert "Traceback" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, res.output
    return errors[0]


@pytest.mark.parametrize(("flag", "drawn"), [(None, False), ("--no-progress", False), ("--progress", True)])
def test_progress_bar_only_on_a_terminal_unless_forced(emb_file, tmp_path, flag, drawn) -> None:
    # CliRunner's stderr is not a terminal: the default hides the bar, --progress forces it
    args = ["precompute", "tem", "-e", "5", "--param", "precomputed_neighbors=4", "--embedding", str(emb_file), "--cache-dir", str(tmp_path), "--rebuild"]
    res = CliRunner().invoke(cli, args + ([flag] if flag else []))
    assert res.exit_code == 0, res.output
    assert ("nearest neighbours" in res.stderr) is drawn
    assert "cache:" in res.stdout


@pytest.mark.parametrize("spelling", ["--limit", "--embedding-limit"])
def test_limit_and_its_alias(emb_file, tmp_path, spelling) -> None:
    res = run("precompute", "tem", "-e", "5", "--param", "precomputed_neighbors=4", "--embedding", str(emb_file), "--cache-dir", str(tmp_path), spelling, "20")
    assert res.exit_code == 0, res.output
    assert "|W|=20" in res.output


def test_unknown_param_lists_known_names(emb_file, tmp_path) -> None:
    res = CliRunner().invoke(cli, ["precompute", "tem", "-e", "5", "--embedding", str(emb_file), "--cache-dir", str(tmp_path), "--param", "lam=1"])
    assert res.exit_code == 2
    assert "known: beta, gamma, precomputed_neighbors" in _one_line_error(res) and ", k" not in _one_line_error(res)


def test_old_k_param_still_builds_the_same_table(emb_file, tmp_path) -> None:
    """``--param k=N`` is TEM's deprecated alias of ``precomputed_neighbors=N``: the same cache file."""
    new = run("precompute", "tem", "-e", "5", "--param", "precomputed_neighbors=6", "--embedding", str(emb_file), "--cache-dir", str(tmp_path / "a"))
    with pytest.warns(DeprecationWarning, match="precomputed_neighbors="):
        old = run("precompute", "tem", "-e", "5", "--param", "k=6", "--embedding", str(emb_file), "--cache-dir", str(tmp_path / "b"))
    assert new.exit_code == old.exit_code == 0, old.output
    (a,), (b,) = (tmp_path / "a").iterdir(), (tmp_path / "b").iterdir()
    assert a.name == b.name and "-k6-" in a.name and a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("name", ["santext", "santext_plus", "custext", "knn_tem", "diffractor"])
def test_precompute_tables_of_the_other_mechanisms(emb_file, tmp_path, name) -> None:
    """`deniable precompute NAME` writes the cache the mechanism then uses, and reuses it."""
    from deniable.mechanisms import get_mechanism

    cache = tmp_path / "cache"
    size = {"santext": "precomputed_neighbors", "santext_plus": "precomputed_neighbors", "knn_tem": "k", "custext": "K"}.get(name)
    value = 5 if name == "custext" else 8
    params = ["--param", f"{size}={value}"] if size else []
    res = run("precompute", name, "--embedding", str(emb_file), "--cache-dir", str(cache), *params)
    assert res.exit_code == 0, res.output
    files = sorted(cache.iterdir())
    assert files and all(str(f) in res.output for f in files)
    before = {f: f.stat().st_mtime_ns for f in files}
    kw = {size: value} if size else {}
    mech = get_mechanism(name, load_embedding(emb_file), epsilon=2.0, cache_dir=cache, **kw)
    mech.precompute()
    assert sorted(cache.iterdir()) == files and {f: f.stat().st_mtime_ns for f in files} == before  # used, not rebuilt


def test_precompute_tables_bad_parameter_exits_2(emb_file, tmp_path) -> None:
    res = CliRunner().invoke(cli, ["precompute", "custext", "--param", "bogus=1", "--embedding", str(emb_file), "--cache-dir", str(tmp_path)])
    assert res.exit_code == 2 and "bogus" in res.output
