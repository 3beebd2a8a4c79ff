"""SIGTERM / SIGHUP / SIGINT in the middle of a run leave no temporary file and no partial output
(SIGTERM once left a hidden ``.OUT.xxxx.tmp`` with partial privatized text)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ENTRY = [sys.executable, "-c", "from deniable.cli.main import main; main()"]


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    d = tmp_path_factory.mktemp("signals")
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    (d / "emb.txt").write_text("".join(w + " " + " ".join(f"{x:.3f}" for x in rng.random(4)) + "\n" for w in words))
    (d / "in.txt").write_text((" ".join(words) + "\n") * 100_000)  # ~4M words: runs for many seconds
    return d


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_signal_mid_run_leaves_nothing(workload, sig):
    d = workload
    out = d / "out.txt"
    out.unlink(missing_ok=True)
    cmd = [*ENTRY, "privatize", "in.txt", "-o", "out.txt", "-m", "madlib", "-e", "10", "--embedding", "emb.txt", "--seed", "0"]
    p = subprocess.Popen(cmd, cwd=d, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(f.stat().st_size > 0 for f in d.glob(".out.txt.*.tmp")):  # partial output written
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline, "no temporary output appeared"
        time.sleep(0.02)
    p.send_signal(sig)
    rc = p.wait(timeout=60)
    err = p.stderr.read()
    assert "Traceback" not in err
    if sig == signal.SIGINT:
        assert rc == 1
    else:
        assert rc == -sig  # ended by the same signal, after cleaning up
    assert not out.exists()
    assert list(d.glob(".out.txt*")) == []


def test_signal_keeps_the_previous_output(workload):
    d = workload
    out = d / "kept.txt"
    out.write_text("previous result\n")
    cmd = [*ENTRY, "privatize", "in.txt", "-o", "kept.txt", "-m", "madlib", "-e", "10", "--embedding", "emb.txt"]
    p = subprocess.Popen(cmd, cwd=d, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(f.stat().st_size > 0 for f in d.glob(".kept.txt.*.tmp")):
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    p.terminate()
    assert p.wait(timeout=60) == -signal.SIGTERM
    assert out.read_text() == "previous result\n" and list(d.glob(".kept.txt.*")) == []


def test_closed_pipe_stops_quietly(workload):
    """`deniable privatize ... | head`: the reader leaving is not an error worth a message."""
    d = workload
    cmd = " ".join([sys.executable, "-c", "'from deniable.cli.main import main; main()'", "privatize", "in.txt", "-m", "madlib", "-e", "10", "--embedding", "emb.txt"])
    r = subprocess.run(["bash", "-c", f"{cmd} | head -c 10 > /dev/null; echo ${{PIPESTATUS[0]}}"], cwd=d, capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "1" and r.stderr == "", r.stderr
