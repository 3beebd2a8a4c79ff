"""Speed of ``deniable privatize --workers 2`` against ``--workers 1`` on a large real file.

Question: on this machine, how much faster is the command line with two processes privatizing
whole batches (tokenize, look up, sample, rebuild): the main process, which also reads and
writes, and one worker forked from it after the mechanism is built? For each mechanism, the same
command with ``--workers 1`` and ``--workers 2`` in subprocesses, interleaved (round after round,
both worker counts once per round), wall time end to end (interpreter start, embedding load and
the workers' start included); the speed-up is the ratio of the two medians of the same run. Each
run's output is compared byte for byte with the ``--workers 1`` output of the same mechanism (it
must be identical: same seed). The load average is recorded before every run.

CPU seconds are recorded too: the command runs in a small driver (this file with ``--drive``)
that reads, when the run ends, its own CPU time and that of each worker process
(``/proc/PID/stat``; with text-only workers, the workers' share includes the forkserver they
start from). On a busy machine wall time says what a user gets now; the CPU times say
what the work costs. On idle cores a ``--workers 2`` run takes at least its critical path, the
largest CPU time of one of its processes (the others run beside it), so ``--workers 1`` CPU time
÷ that critical path bounds its speed-up there (``idle_core_bound``; an upper bound: waiting
between the processes is not counted); the sum is what the run takes from the machine.

Data: IMDb reviews from ``../shared/data`` (one review per line, in file order) until
``--words`` words (default 1.2 M); mechanisms whose sampling is a nearest-neighbour search over
the vocabulary (Madlib, Mahalanobis, Vickrey, BRR; a few thousand words per second) run on the
first ``--slow-words`` words (default 100,000) of the same file.

Usage: ``python benchmarks/bench_cli_workers.py [--words 1200000] [--rounds 3]
[--only custext tem] [--json record.json]``
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import IMDB, compile_package

MECHANISMS = {"custext": 3.0, "tem": 3.0, "santext": 3.0, "madlib": 10.0}  # name: epsilon
SLOW = {"madlib", "mahalanobis", "vickrey", "brr"}


def _write_corpus(path: Path, n_words: int) -> int:
    """IMDb reviews, one per line (inner newlines as spaces), until ``n_words`` whitespace-separated
    words; returns the words written."""
    if not IMDB.exists():
        sys.exit(f"needs the IMDb file {IMDB} (see shared/data/README.md)")
    csv.field_size_limit(sys.maxsize)
    total = 0
    with gzip.open(IMDB, "rt", encoding="utf-8", newline="") as f, open(path, "w", encoding="utf-8") as out:
        for row in csv.DictReader(f):
            text = " ".join(row["review"].splitlines())
            out.write(text + "\n")
            total += len(text.split())
            if total >= n_words:
                break
    return total


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _drive(cpu_file: str, argv: list[str]) -> None:
    """Run ``deniable`` with ``argv`` in this process; write this process's CPU seconds and each
    worker's (read when the workers stop) to ``cpu_file`` as JSON."""
    from multiprocessing import forkserver

    from deniable.backends import text
    from deniable.cli.main import main as cli_main

    workers: list[float] = []
    server: list[float] = []
    modes: list[str] = []
    close = text.ParallelPrivatizer.close

    def close_and_count(self: Any) -> None:
        if self._procs:
            modes.append(self._started)  # "whole": the workers sample too; "text": the text work only
        workers.extend(_cpu_seconds(p.pid) for p in self._procs if p.is_alive())
        pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
        if self._procs and pid:
            server[:] = [_cpu_seconds(pid)]
        close(self)

    text.ParallelPrivatizer.close = close_and_count  # type: ignore[method-assign]
    try:
        cli_main(argv)
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        Path(cpu_file).write_text(json.dumps({"main": time.process_time(), "workers": workers, "forkserver": sum(server), "mode": ",".join(modes)}))


def _run(src: Path, out: Path, name: str, epsilon: float, workers: int) -> dict[str, Any]:
    """Wall seconds, CPU seconds, output sha256 and the summary line of one command."""
    cpu_file = out.with_suffix(".cpu.json")
    cmd = [sys.executable, __file__, "--drive", str(cpu_file), "privatize", str(src), "-o", str(out), "-m", name, "-e", str(epsilon),
           "--seed", "0", "--no-progress", "--workers", str(workers)]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    cpu = json.loads(cpu_file.read_text())
    summary = next((ln for ln in r.stderr.splitlines() if " words, " in ln), "")
    return {"seconds": wall, "cpu_main": cpu["main"], "cpu_workers": cpu["workers"], "cpu_forkserver": cpu["forkserver"], "worker_mode": cpu["mode"], "sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "summary": summary}


def main() -> None:
    if sys.argv[1:2] == ["--drive"]:
        _drive(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, default=1_200_000)
    ap.add_argument("--slow-words", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None, help="mechanisms (default: custext tem santext madlib)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    names = args.only or list(MECHANISMS)
    rows: list[dict[str, Any]] = []
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for size in sorted({args.slow_words if n in SLOW else args.words for n in names}):
            path = Path(tmp) / f"imdb_{size}.txt"
            files[size] = (path, _write_corpus(path, size))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cpu(s), Python {platform.python_version()}, numpy {np.__version__}")
        for name in names:
            src, n_words = files[args.slow_words if name in SLOW else args.words]
            eps = MECHANISMS.get(name, 3.0)
            runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            for _ in range(args.rounds):
                for w in (1, 2):
                    load = os.getloadavg()[0]
                    runs[w].append(_run(src, Path(tmp) / f"out_{w}.txt", name, eps, w) | {"load_average_1min": load})
            identical = len({r["sha256"] for rs in runs.values() for r in rs}) == 1
            med = {w: statistics.median(r["seconds"] for r in rs) for w, rs in runs.items()}
            cpu = {w: {"main": statistics.median(r["cpu_main"] for r in rs), "workers": statistics.median(sum(r["cpu_workers"]) + r["cpu_forkserver"] for r in rs),
                       "critical": statistics.median(max([r["cpu_main"], *r["cpu_workers"]]) for r in rs)} for w, rs in runs.items()}
            row = {
                "mechanism": name, "epsilon": eps, "words": n_words, "bytes": src.stat().st_size, "identical_output": identical,
                "median_seconds_1": med[1], "median_seconds_2": med[2], "speedup": med[1] / med[2],
                "words_per_second_1": n_words / med[1], "words_per_second_2": n_words / med[2],
                "median_cpu_seconds": {str(w): c for w, c in cpu.items()},
                "idle_core_bound": cpu[1]["critical"] / cpu[2]["critical"],
                "load_average_range": [min(r["load_average_1min"] for rs in runs.values() for r in rs), max(r["load_average_1min"] for rs in runs.values() for r in rs)],
                "runs": {str(w): rs for w, rs in runs.items()},
            }
            rows.append(row)
            print(f"{name:10s} {n_words:>10,d} words  --workers 1: {med[1]:6.2f} s  --workers 2: {med[2]:6.2f} s  speed-up {row['speedup']:.2f}  "
                  f"CPU main {cpu[1]['main']:.2f} -> {cpu[2]['main']:.2f} s + workers {cpu[2]['workers']:.2f} s  "
                  f"identical {identical}  load {row['load_average_range'][0]:.1f}-{row['load_average_range'][1]:.1f}", flush=True)
    if args.json:
        record = {
            "benchmark": "bench_cli_workers.py", "args": vars(args) | {"json": str(args.json)},
            "machine": {"arch": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
            "data": str(IMDB.relative_to(IMDB.parents[3])), "rows": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
