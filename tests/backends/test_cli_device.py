"""`deniable privatize --device`: the torch backend from the command line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from deniable import load_embedding
from deniable.cli.main import cli
from deniable.text import words_of

torch = pytest.importorskip("torch")

VOCAB = set(load_embedding().words)


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_device_cpu_privatizes_and_reproduces(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("Hello world, this is a test.\n\nSecond line: NASA in Paris!\n" * 50, encoding="utf-8")
    outs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.txt"
        r = run("privatize", str(src), "-o", str(out), "-m", "brr", "-e", "2", "--seed", "3", "--device", "cpu")
        assert r.exit_code == 0, r.output
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    lines = outs[0].split("\n")
    assert len(lines) == 151 and lines[1] == "" and lines[0].endswith(".")
    assert all(w.lower() in VOCAB for w in words_of(outs[0]))


def test_device_errors_are_usage_errors():
    r = CliRunner().invoke(cli, ["privatize", "-", "-m", "santext", "-e", "1", "--device", "cpu"], input="the cat\n")
    assert r.exit_code == 2 and "torch backend" in r.output
    r = CliRunner().invoke(cli, ["privatize", "-", "-m", "madlib", "-e", "1", "--device", "tpu"], input="the cat\n")
    assert r.exit_code == 2 and "device" in r.output
    if not torch.cuda.is_available():
        r = CliRunner().invoke(cli, ["privatize", "-", "-m", "madlib", "-e", "1", "--device", "cuda"], input="the cat\n")
        assert r.exit_code == 2 and "device='cpu'" in r.output
