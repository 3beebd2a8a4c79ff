"""benchmarks/bench_peers.py: the no-peer mode, the input preparation and the driver protocol.

No peer package is needed: the protocol test runs a toy driver (a copy mechanism) with this
interpreter through the same ``Driver`` class and ``serve`` loop the real drivers use.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_peers.py"


def _load(name: str, path: Path):
    saved = dict(os.environ)  # bench_peers sets the thread variables for its own process
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))
        os.environ.clear()
        os.environ.update(saved)


bench = _load("bench_peers", SCRIPT)
common = _load("_driver_common", ROOT / "benchmarks" / "peers" / "_driver_common.py")


def test_without_peers_it_says_where_it_looked_and_exits_0(tmp_path):
    venvs = tmp_path / "venvs"
    r = subprocess.run([sys.executable, str(SCRIPT), "--venvs", str(venvs)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no peer environment found" in r.stdout
    for peer in ("mldp", "pypantera"):
        assert str(venvs / peer / "bin" / "python") in r.stdout
    assert f"bash benchmarks/peers/setup_peers.sh {venvs}" in r.stdout
    assert "Nothing was measured" in r.stdout


def test_find_peers_sees_an_environment(tmp_path):
    # control for the test above: a present interpreter is found, an absent one is not
    python = tmp_path / "mldp" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    found, looked = bench.find_peers(tmp_path)
    assert found == {"mldp": python}
    assert looked == [python, tmp_path / "pypantera" / "bin" / "python"]


def _imdb(path: Path, reviews: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["review", "sentiment"])
        w.writerows([r, "positive"] for r in reviews)
    return path


def test_read_words_keeps_the_first_in_vocabulary_words_lowercased(tmp_path):
    emb = SimpleNamespace(words=["the", "film", "was", "good", "bad"])
    data = _imdb(tmp_path / "imdb.csv.gz", ["The film, zzyzx, was GOOD!", "Bad film.", "the the the"])
    words, source = bench.read_words(emb, data, 6)
    assert words == ["the", "film", "was", "good", "bad", "film"]  # zzyzx skipped, stops at 6
    assert "imdb.csv.gz" in source and "first 6" in source
    assert bench.read_words(emb, data, 100)[0][-3:] == ["the", "the", "the"]  # the whole file when short


def test_read_words_falls_back_to_the_bundled_texts(tmp_path):
    emb = SimpleNamespace(words=["the", "and", "a", "was", "plot", "acting"])
    words, source = bench.read_words(emb, tmp_path / "absent.csv.gz", 500)
    assert len(words) == 500 and set(words) <= set(emb.words) and len(set(words)) > 1
    assert "bundled example texts" in source
    with pytest.raises(ValueError, match="--words"):
        bench.read_words(emb, None, 0)


def test_write_inputs_round_trips_through_the_driver_reader(tmp_path):
    rng = np.random.default_rng(0)
    emb = SimpleNamespace(words=["alpha", "beta", "gamma"], vectors=rng.standard_normal((3, 4)).astype(np.float32))
    bench.write_inputs(tmp_path, emb, ["beta", "alpha", "beta"])
    inputs = common.Inputs(tmp_path)
    assert inputs.vocab == emb.words and inputs.words == ["beta", "alpha", "beta"]
    np.testing.assert_array_equal(inputs.vectors, emb.vectors)
    text = inputs.glove_text().read_text().splitlines()
    assert text[1].split()[0] == "beta" and np.allclose([float(x) for x in text[1].split()[1:]], emb.vectors[1])
    with pytest.raises(ValueError, match="whitespace"):
        bench.write_inputs(tmp_path / "bad", SimpleNamespace(words=["a b"], vectors=emb.vectors[:1]), ["a b"])


TOY_DRIVER = '''
from _driver_common import serve

def copy(inputs, params):
    print("noise a peer prints")  # must not reach the protocol
    return (lambda words: list(words)), (lambda: None)

serve({"copy": copy})
'''


def test_run_pair_with_a_toy_driver(tmp_path, monkeypatch):
    import deniable

    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "_driver_common.py").write_text((ROOT / "benchmarks" / "peers" / "_driver_common.py").read_text())
    (peers / "drive_toy.py").write_text(TOY_DRIVER)
    monkeypatch.setattr(bench, "PEERS_DIR", peers)
    emb = deniable.load_embedding()
    words = ["the", "movie", "was", "good"] * 5
    bench.write_inputs(tmp_path / "in", emb, words)
    driver = bench.Driver("toy", Path(sys.executable), tmp_path / "in", tmp_path / "toy.log")
    try:
        assert driver.ask(cmd="list")["mechanisms"] == ["copy"]
        args = SimpleNamespace(budget=0.01, rounds=2, chunk=3, min_cpu=0.01, cold=False)
        pair = bench.Pair("toy", "copy", "madlib", ())
        rec = bench.run_pair(driver, pair, {"epsilon": 5.0}, args, emb, words, {})
        bad = bench.run_pair(driver, bench.Pair("toy", "absent", "madlib", ()), {"epsilon": 5.0}, args, emb, words, {})
    finally:
        driver.close()
    assert "error" not in rec, rec.get("error")
    assert 1 <= rec["words"] <= len(words) and len(rec["peer_rounds"]) == 2 == len(rec["deniable_rounds"])
    assert all(r["unchanged"] == 1.0 and r["in_vocab"] == 1.0 and r["n"] == rec["words"] for r in rec["peer_rounds"])
    assert rec["ratio_median"] > 0 and rec["deniable_mechanism"] == "madlib"
    assert "KeyError" in bad["error"]  # a failing peer call is reported, not raised
    assert "noise a peer prints" in (tmp_path / "toy.log").read_text()
    row = bench.format_row(rec)
    assert "toy:copy" in row and "madlib" in row and "ERROR" not in row
