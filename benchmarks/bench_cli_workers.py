"""Speed of ``deniable privatize --workers N`` against ``--workers 1`` on a large real file.

Question: on this machine, how much faster is the command line with N processes privatizing
whole batches (tokenize, look up, sample, rebuild): the main process, which also reads and
writes, and N - 1 workers forked from it after the mechanism is built (with ``--device``, N
workers doing the text work while the main process samples on the device)? For each mechanism,
the same command with each ``--workers`` count (default 1 and 2) in subprocesses, interleaved
(round after round, every count once per round), wall time end to end (interpreter start,
embedding load and the workers' start included); the speed-up of N is the ratio of the medians of
the first count and N in the same run. Each run's output is compared byte for byte with the
others of the same mechanism (it must be identical: same seed). The load average is recorded
before every run.

CPU seconds are recorded too: the command runs in a small driver (this file with ``--drive``)
that reads, when the run ends, its own CPU time and that of each worker process
(``/proc/PID/stat``; with text-only workers, the workers' share includes the forkserver they
start from). On a busy machine wall time says what a user gets now; the CPU times say
what the work costs. On idle cores a ``--workers 2`` run takes at least its critical path, the
largest CPU time of one of its processes (the others run beside it), so ``--workers 1`` CPU time
÷ that critical path bounds its speed-up there (``idle_core_bound``; an upper bound: waiting
between the processes is not counted); the sum is what the run takes from the machine.

Data: IMDb reviews from ``../shared/data`` (or ``--data``: a ``.csv.gz`` with a ``review``
column; one review per line, in file order) until ``--words`` words (default 1.2 M); mechanisms
whose sampling is a nearest-neighbour search over the vocabulary (Madlib, Mahalanobis, Vickrey,
BRR; a few thousand words per second on a CPU) run on the first ``--slow-words`` words (default
100,000) of the same file, unless ``--device`` samples on an accelerator.

With ``--halves``, each round also runs the command (in the same driver) pinned to one CPU core
(the process and all it starts) and, side by side, two such commands each pinned to its own core and each on one
half of the file's lines: two processes that share nothing (no messages; each reads and writes
its own files, each pays the start-up). One-core time ÷ that pair's wall time is what this
machine gives a split of the work between two processes without any cost of splitting it, a
reference for ``--workers 2`` (whose outputs differ from the halves': the batches differ).
``--repeat K`` writes the corpus up to K times over when ``--words`` asks for more than it has.

Usage: ``python benchmarks/bench_cli_workers.py [--words 1200000] [--rounds 3]
[--only custext tem] [--workers 1 2 4] [--halves] [--repeat 3] [--device cuda] [--data imdb.csv.gz]
[--json record.json]``
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
from _common import IMDB, compile_package, privatize_command

MECHANISMS = {"custext": 3.0, "tem": 3.0, "santext": 3.0, "madlib": 10.0}  # name: epsilon
SLOW = {"madlib", "mahalanobis", "vickrey", "brr"}


def _write_corpus(path: Path, n_words: int, data: Path, repeat: int = 1) -> int:
    """IMDb reviews, one per line (inner newlines as spaces), until ``n_words`` whitespace-separated
    words, the whole corpus again (at most ``repeat`` times in all) while it has fewer; returns
    the words written."""
    if not data.exists():
        sys.exit(f"needs the IMDb file {data} (see shared/data/README.md)")
    csv.field_size_limit(sys.maxsize)
    total = 0
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(repeat):
            with gzip.open(data, "rt", encoding="utf-8", newline="") as f:
                for row in csv.DictReader(f):
                    text = " ".join(row["review"].splitlines())
                    out.write(text + "\n")
                    total += len(text.split())
                    if total >= n_words:
                        return total
    return total


def _halves(src: Path) -> tuple[Path, Path]:
    """The first and the second half of ``src``'s lines (by bytes), as two files beside it."""
    data = src.read_bytes()
    cut = data.find(b"\n", len(data) // 2) + 1 or len(data)
    first, second = src.with_suffix(".half1.txt"), src.with_suffix(".half2.txt")
    first.write_bytes(data[:cut])
    second.write_bytes(data[cut:])
    return first, second


def _pinned(pairs: list[tuple[Path, Path]], name: str, epsilon: float) -> float:
    """Wall seconds of one one-core command per (input, output) pair, side by side, the k-th
    pinned to the k-th CPU core this process may use; each in the driver, as the other runs (the
    same start and end)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < len(pairs):
        sys.exit(f"--halves needs {len(pairs)} CPU cores, this process may use {len(cores)}")
    t = time.perf_counter()
    procs = [subprocess.Popen(privatize_command(src, out, name, epsilon, 1, program=_driver(out)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda c=core: os.sched_setaffinity(0, {c}))  # type: ignore[misc]
             for (src, out), core in zip(pairs, cores)]
    errors = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - t
    for p, err in zip(procs, errors):
        if p.returncode != 0:
            sys.exit(f"{' '.join(p.args)} failed:\n{err}")  # type: ignore[arg-type]
    return wall


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


def _driver(out: Path) -> list[str]:
    """The program that runs a command writing ``out``: this file's driver (see :func:`_drive`),
    its CPU seconds beside ``out``."""
    return [sys.executable, __file__, "--drive", str(out.with_suffix(".cpu.json"))]


def _run(src: Path, out: Path, name: str, epsilon: float, workers: int, device: str | None = None) -> dict[str, Any]:
    """Wall seconds, CPU seconds, output sha256 and the summary line of one command."""
    cpu_file = out.with_suffix(".cpu.json")
    cmd = [*privatize_command(src, out, name, epsilon, workers, program=_driver(out)),
           *(["--device", device] if device else [])]
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
    ap.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="worker counts, the first the reference (default: 1 2)")
    ap.add_argument("--halves", action="store_true", help="also a one-core run and two one-core runs on the two halves side by side")
    ap.add_argument("--repeat", type=int, default=1, help="write the corpus up to this many times over for --words (default 1)")
    ap.add_argument("--device", default=None, help="sample with the torch backend on this device (e.g. cuda)")
    ap.add_argument("--data", type=Path, default=IMDB, help="IMDb reviews, .csv.gz with a 'review' column")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    slow = set() if args.device else SLOW
    names = args.only or list(MECHANISMS)
    rows: list[dict[str, Any]] = []
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        halves: dict[Path, tuple[Path, Path]] = {}
        for size in sorted({args.slow_words if n in slow else args.words for n in names}):
            path = Path(tmp) / f"imdb_{size}.txt"
            files[size] = (path, _write_corpus(path, size, args.data, args.repeat))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cpu(s), Python {platform.python_version()}, numpy {np.__version__}")
        for name in names:
            src, n_words = files[args.slow_words if name in slow else args.words]
            eps = MECHANISMS.get(name, 3.0)
            counts = list(dict.fromkeys(args.workers))
            runs: dict[int, list[dict[str, Any]]] = {w: [] for w in counts}
            pinned: dict[str, list[float]] = {"one_core": [], "halves": []}
            if args.halves and src not in halves:
                halves[src] = _halves(src)
            for _ in range(args.rounds):
                for w in counts:
                    load = os.getloadavg()[0]
                    runs[w].append(_run(src, Path(tmp) / f"out_{w}.txt", name, eps, w, args.device) | {"load_average_1min": load})
                if args.halves:
                    pinned["one_core"].append(_pinned([(src, Path(tmp) / "out_one_core.txt")], name, eps))
                    pinned["halves"].append(_pinned([(h, Path(tmp) / f"out_half{k}.txt") for k, h in enumerate(halves[src])], name, eps))
            identical = len({r["sha256"] for rs in runs.values() for r in rs}) == 1
            med = {w: statistics.median(r["seconds"] for r in rs) for w, rs in runs.items()}
            cpu = {w: {"main": statistics.median(r["cpu_main"] for r in rs), "workers": statistics.median(sum(r["cpu_workers"]) + r["cpu_forkserver"] for r in rs),
                       "critical": statistics.median(max([r["cpu_main"], *r["cpu_workers"]]) for r in rs)} for w, rs in runs.items()}
            first, last = counts[0], counts[-1]
            row = {
                "mechanism": name, "epsilon": eps, "device": args.device, "words": n_words, "bytes": src.stat().st_size, "identical_output": identical,
                **{f"median_seconds_{w}": med[w] for w in counts}, "speedup": med[first] / med[last],
                **{f"speedup_{w}": med[first] / med[w] for w in counts[1:]},
                **{f"words_per_second_{w}": n_words / med[w] for w in counts},
                "median_cpu_seconds": {str(w): c for w, c in cpu.items()},
                "idle_core_bound": cpu[first]["critical"] / cpu[last]["critical"],
                "load_average_range": [min(r["load_average_1min"] for rs in runs.values() for r in rs), max(r["load_average_1min"] for rs in runs.values() for r in rs)],
                "runs": {str(w): rs for w, rs in runs.items()},
            }
            if args.halves:
                one, pair = statistics.median(pinned["one_core"]), statistics.median(pinned["halves"])
                row |= {"median_seconds_one_core": one, "median_seconds_halves": pair, "halves_speedup": one / pair,
                        **{f"one_core_speedup_{w}": one / med[w] for w in counts}, "pinned_runs": pinned}
            rows.append(row)
            times = "  ".join(f"--workers {w}: {med[w]:6.2f} s" for w in counts)
            speedups = " ".join(f"{med[first] / med[w]:.2f}" for w in counts[1:])
            print(f"{name:10s} {n_words:>10,d} words  {times}  speed-up {speedups}  "
                  f"CPU main {cpu[first]['main']:.2f} -> {cpu[last]['main']:.2f} s + workers {cpu[last]['workers']:.2f} s  "
                  f"identical {identical}  load {row['load_average_range'][0]:.1f}-{row['load_average_range'][1]:.1f}", flush=True)
            if args.halves:
                print(f"{'':10s} one core: {row['median_seconds_one_core']:6.2f} s  two halves side by side: {row['median_seconds_halves']:6.2f} s "
                      f"({row['halves_speedup']:.2f}x one core)  "
                      + "  ".join(f"--workers {w}: {row[f'one_core_speedup_{w}']:.2f}x one core" for w in counts), flush=True)
    if args.json:
        record = {
            "benchmark": "bench_cli_workers.py", "args": vars(args) | {"json": str(args.json), "data": str(args.data)},
            "machine": {"arch": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
            "data": str(args.data.relative_to(IMDB.parents[3])) if args.data == IMDB else args.data.name, "rows": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
