"""Speed of the text path against the id path, for every registered mechanism.

Question: how much of a mechanism's speed survives when it privatizes text (tokenize, look up,
sample, restore case, rebuild the texts) instead of word ids? For each registered mechanism,
measured in one process on the same words, interleaved (round after round, every path once per
round, best of ``--rounds``; the machine may be shared, so compare same-run ratios):

* **id path**: ``mechanism.sample_ids(ids)`` on the ids of the texts' words (the ids the text
  path itself passes to the mechanism);
* **text path**: ``mechanism.privatize(texts)``, with the text path's numpy loops and, when numba
  is installed (``deniable[fast]``), with its compiled loops (``DENIABLE_COMPILED=0`` / ``1``);
* their ratio (text-path words/s ÷ id-path words/s; 1.0 = text handling costs nothing);
* **CLI**: ``deniable privatize`` in a subprocess on a file of IMDb texts (one per line), wall
  time including the interpreter's start and the embedding load, with ``--workers 1`` and
  ``--workers 2`` on both cores, with ``--workers 1`` on one core (the process and what it
  starts pinned to one CPU), and on a one-line file (the fixed start-up cost); words/s end to end,
  its ratio to the id path's words/s, and the two-core speed-up (one-core seconds ÷ the faster
  two-core run); best of ``--cli-rounds`` interleaved rounds (every command once per round).
  The file holds the corpus's first texts with at least ``--cli-words`` words (default
  100,000) and enough for about ``--cli-seconds`` of the mechanism's id path, the whole corpus
  again and again (at most ``--cli-max-repeat`` times) for a mechanism that needs more.

Also the text work alone (a stand-in mechanism that samples nothing) against ``split_words``
and ``str.split`` on the whole corpus. Texts: IMDb reviews from ``../shared/data`` (generated
sentences when the data is absent). Mechanisms whose id path is slow (nearest-neighbour
searches) are measured on the first texts of the corpus only, enough for about
``--seconds`` of id-path work (at least ``--min-words``); the table gives the words used.

Usage: ``python benchmarks/bench_text.py [--words 100000] [--rounds 3] [--only tem custext]
[--no-cli] [--cli-words 100000] [--cli-seconds 10] [--cli-rounds 3] [--cli-max-repeat 3] [--json record.json]``
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import IMDB, compile_package, privatize_command

import deniable
from deniable import _threads
from deniable.text import _kernels, privatize_texts, split_words


class _Echo:
    """Stand-in mechanism: returns the ids it is given (UNK as word 0)."""

    def __init__(self, vocabulary: deniable.Embedding) -> None:
        self.vocabulary = vocabulary

    def sample_ids(self, ids: np.ndarray, rng: object = None) -> np.ndarray:
        return np.maximum(np.asarray(ids), 0)


def _texts(n_words: int) -> tuple[list[str], str]:
    """Whole texts (newlines replaced by spaces, one text per line in the CLI's file) until
    ``n_words`` words."""
    texts: list[str] = []
    total = 0
    if IMDB.exists():
        csv.field_size_limit(sys.maxsize)
        with gzip.open(IMDB, "rt", encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                t = " ".join(row["review"].splitlines())
                texts.append(t)
                total += len(split_words(t)) // 2
                if total >= n_words:
                    break
        return texts, "IMDb reviews (shared/data/classification/imdb_50k.csv.gz, first rows)"
    gen = np.random.default_rng(0)
    words = ["The", "film", "was", "good", "bad", "and", "I", "liked", "it", "NASA", "Paris", "plot", "don't"]
    while total < n_words:
        texts.append(" ".join(gen.choice(words, 200)) + ".")
        total += 200
    return texts, "generated sentences (shared data not found)"


def _n_words(texts: list[str]) -> int:
    return sum(len(split_words(t)) // 2 for t in texts)


def _loops(mode: str, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with the text path's numpy or compiled loops (``DENIABLE_COMPILED``, read at
    each batch)."""

    def run() -> object:
        before = os.environ.get("DENIABLE_COMPILED")
        os.environ["DENIABLE_COMPILED"] = "1" if mode == "compiled" else "0"
        try:
            return fn()
        finally:
            if before is None:
                os.environ.pop("DENIABLE_COMPILED")
            else:
                os.environ["DENIABLE_COMPILED"] = before

    return run


def _numba_version() -> str | None:
    try:
        import numba
    except ImportError:
        return None
    return str(numba.__version__)


class _Recorder:
    """Stand-in mechanism that keeps the ids the text path passes to ``sample_ids``."""

    def __init__(self, vocabulary: deniable.Embedding) -> None:
        self.vocabulary = vocabulary
        self.ids = np.zeros(0, dtype=np.int64)

    def sample_ids(self, ids: np.ndarray, rng: object = None) -> np.ndarray:
        self.ids = np.asarray(ids, dtype=np.int64)
        return np.maximum(self.ids, 0)


def _ids(vocab: deniable.Embedding, texts: list[str]) -> np.ndarray:
    """The ids the text path passes to the mechanism (oov="unk": every word, UNK as -1)."""
    rec = _Recorder(vocab)
    privatize_texts(rec, texts, rng=0)
    return rec.ids


def _best(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):  # interleaved: every round measures every path under the same load
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def _cli_seconds(name: str, epsilon: float, src: Path, workers: int = 1, *, one_core: bool = False) -> float:
    """Wall seconds of ``deniable privatize src`` in a subprocess (``one_core``: allowed to run on
    one CPU core only, with everything it starts)."""
    with tempfile.TemporaryDirectory(prefix="deniable-bench-text-") as tmp:
        dst = Path(tmp) / "out.txt"
        cmd = privatize_command(src, dst, name, epsilon, workers)
        core = min(os.sched_getaffinity(0)) if one_core else None
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if one_core else None)
        if done.returncode != 0:
            raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}")
        return time.perf_counter() - t


def _cli_file(path: Path, corpus: list[tuple[str, int]], target: int, max_repeat: int) -> tuple[int, int]:
    """Write the corpus's first texts (one per line) with at least ``target`` words to ``path``,
    the whole corpus again and again (at most ``max_repeat`` times) when it has fewer; returns
    (words, times the corpus was read)."""
    total, times = 0, 0
    with open(path, "w", encoding="utf-8") as out:
        while total < target and times < max_repeat:
            times += 1
            for t, k in corpus:
                if total >= target:
                    break
                out.write(t + "\n")
                total += k
    return total, times


def _mechanisms(emb: deniable.Embedding, texts: list[str], names: list[str], args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, tuple[list[str], np.ndarray, int]]]:
    """Each mechanism, built and warmed up, with the first texts enough for ``args.seconds`` of
    its id path (at least ``args.min_words`` words), their ids and word count."""
    ids_all = _ids(emb, texts)
    mechs, subsets = {}, {}
    for name in names:
        m = deniable.get_mechanism(name, emb, epsilon=args.epsilon)
        m.precompute()
        m.sample_ids(ids_all[:1000], rng=0)  # warm up (lazily built tables)
        t = time.perf_counter()
        m.sample_ids(ids_all[:1000], rng=0)
        n_target = max(args.min_words, int(1000 / (time.perf_counter() - t) * args.seconds))
        k, total = 0, 0
        while k < len(texts) and total < n_target:
            total += len(split_words(texts[k])) // 2
            k += 1
        mechs[name] = m
        subsets[name] = (texts[:k], ids_all[:total], total)
    return mechs, subsets


def _row(name: str, subset: tuple[list[str], np.ndarray, int], best: dict[str, float], args: argparse.Namespace, corpus: list[tuple[str, int]], compiled: bool) -> dict[str, Any]:
    _, _, n = subset
    idr, txt = n / best[f"{name} id"], n / best[f"{name} text numpy"]
    row: dict[str, Any] = {"mechanism": name, "words": n, "id_words_per_s": idr, "text_numpy_words_per_s": txt, "text_numpy_over_id": txt / idr}
    if compiled:
        txt = n / best[f"{name} text compiled"]
        row.update(text_compiled_words_per_s=txt, text_compiled_over_id=txt / idr)
    if not args.no_cli:
        compile_package()
        with tempfile.TemporaryDirectory(prefix="deniable-bench-text-") as tmp:
            src, line = Path(tmp) / "in.txt", Path(tmp) / "one.txt"
            total, times = _cli_file(src, corpus, max(args.cli_words, int(idr * args.cli_seconds)), args.cli_max_repeat)
            line.write_text(corpus[0][0] + "\n", encoding="utf-8")
            runs: dict[str, list[float]] = {"startup": [], "workers_1": [], "workers_2": [], "one_core": []}
            try:
                for _ in range(args.cli_rounds):  # interleaved: each round runs every command once
                    runs["startup"].append(_cli_seconds(name, args.epsilon, line))
                    runs["workers_1"].append(_cli_seconds(name, args.epsilon, src, workers=1))
                    runs["workers_2"].append(_cli_seconds(name, args.epsilon, src, workers=2))
                    runs["one_core"].append(_cli_seconds(name, args.epsilon, src, workers=1, one_core=True))
            except RuntimeError as exc:  # reported in the table, the other mechanisms still run
                row["cli_error"] = str(exc)
                return row
        startup, one, two, core = (min(runs[k]) for k in ("startup", "workers_1", "workers_2", "one_core"))
        row.update(cli_runs=runs)
        row.update(cli_words=total, cli_corpus_times=times, cli_startup_seconds=startup, cli_seconds=one, cli_words_per_s=total / one, cli_over_id=total / one / idr,
                   cli2_seconds=two, cli2_words_per_s=total / two, cli2_over_id=total / two / idr, cli_one_core_seconds=core,
                   two_core_speedup=core / min(one, two))
        print(f"  {name}: CLI on {total:,} words: {one:.2f} s (--workers 1), {two:.2f} s (--workers 2), {core:.2f} s (one core), start-up {startup:.2f} s", flush=True)
    return row


def _tables(rows: list[dict[str, Any]], compiled: bool, *, cli: bool) -> None:
    """The text-path table and, with ``cli``, the command-line table of ``rows``."""
    print("\n| mechanism | words | id path words/s | text path, numpy loops | text / id |" + (" text path, compiled loops | text / id |" if compiled else ""))
    print("|---|---:|---:|---:|---:|" + ("---:|---:|" if compiled else ""))
    for r in rows:
        extra = f" {r['text_compiled_words_per_s']:,.0f} | {r['text_compiled_over_id']:.2f} |" if compiled else ""
        print(f"| {r['mechanism']} | {r['words']:,} | {r['id_words_per_s']:,.0f} | {r['text_numpy_words_per_s']:,.0f} | {r['text_numpy_over_id']:.2f} |{extra}")
    if not cli:
        return
    print("\n| mechanism | CLI words | CLI s (one line) | `--workers 1` s | CLI / id | `--workers 2` s | CLI / id | one core s | two cores / one |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "cli_error" in r:
            print(f"| {r['mechanism']} | failed ({r['cli_error']}) |")
            continue
        print(f"| {r['mechanism']} | {r['cli_words']:,} | {r['cli_startup_seconds']:.2f} | {r['cli_seconds']:.2f} | {r['cli_over_id']:.2f} | "
              f"{r['cli2_seconds']:.2f} | {r['cli2_over_id']:.2f} | {r['cli_one_core_seconds']:.2f} | {r['two_core_speedup']:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=100_000, help="words of text (whole texts, at least this many)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best of)")
    p.add_argument("--epsilon", type=float, default=5.0)
    p.add_argument("--seconds", type=float, default=1.0, help="id-path work per measurement for slow mechanisms")
    p.add_argument("--min-words", type=int, default=3000)
    p.add_argument("--only", nargs="*", default=None, help="registry names (default: all registered)")
    p.add_argument("--no-cli", action="store_true", help="skip the CLI subprocess runs")
    p.add_argument("--cli-words", type=int, default=100_000, help="least words of the CLI's input file")
    p.add_argument("--cli-seconds", type=float, default=10.0, help="id-path seconds of words the CLI's input holds (at most the whole corpus)")
    p.add_argument("--cli-max-words", type=int, default=12_000_000, help="words of the corpus read for the CLI's input")
    p.add_argument("--cli-rounds", type=int, default=3, help="interleaved rounds of the CLI runs (best of)")
    p.add_argument("--cli-max-repeat", type=int, default=3, help="times the CLI's input may hold the corpus read (a fast mechanism's file)")
    p.add_argument("--json", default=None, help="write the raw record here")
    p.add_argument("--render", default=None, help="print the tables of this record (written by --json) and stop")
    args = p.parse_args()
    if args.render:
        record = json.loads(Path(args.render).read_text(encoding="utf-8"))
        rows = record["mechanisms"]
        _tables(rows, "text_compiled_words_per_s" in rows[0], cli="cli_seconds" in rows[0] or "cli_error" in rows[0])
        return
    load_start = os.getloadavg()[0]

    emb = deniable.load_embedding()
    texts, what = _texts(args.words)
    n_all = _n_words(texts)
    names = args.only or deniable.available_mechanisms()
    print(f"texts: {len(texts):,} {what}, {n_all:,} words; epsilon {args.epsilon:g}; best of {args.rounds} interleaved rounds")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpu(s), load average {os.getloadavg()[0]:.1f}; Python {platform.python_version()}, numpy {np.__version__}\n")

    compiled = _kernels.compiled() is not None
    loops = ["numpy", "compiled"] if compiled else ["numpy"]
    print(f"text path loops: {', '.join(loops)} (compiled: numba {'installed' if compiled else 'not installed'}; {_threads.threads()} thread(s) per large batch)\n")
    echo = _Echo(emb)
    base = _best(
        {
            **{f"text work only, {mode} loops (privatize_texts, stand-in mechanism)": _loops(mode, lambda: privatize_texts(echo, texts, rng=0)) for mode in loops},
            "split_words (tokenization alone)": lambda: [split_words(t) for t in texts],
            "str.split (whitespace only)": lambda: [t.split() for t in texts],
        },
        args.rounds,
    )
    print("| reference | words/s |\n|---|---:|")
    for k, s in base.items():
        print(f"| {k} | {n_all / s:,.0f} |")

    mechs, subsets = _mechanisms(emb, texts, names, args)
    fns: dict[str, Callable[[], object]] = {}
    for name, m in mechs.items():
        sub, ids, _ = subsets[name]
        fns[f"{name} id"] = lambda m=m, ids=ids: m.sample_ids(ids, rng=0)
        for mode in loops:
            fns[f"{name} text {mode}"] = _loops(mode, lambda m=m, sub=sub: m.privatize(sub, rng=0))
    best = _best(fns, args.rounds)
    corpus: list[tuple[str, int]] = []
    if not args.no_cli:
        cli_texts, _ = _texts(args.cli_max_words)
        corpus = [(t, len(split_words(t)) // 2) for t in cli_texts]
    rows = [_row(name, subsets[name], best, args, corpus, compiled) for name in mechs]
    _tables(rows, compiled, cli=not args.no_cli)
    if args.json:
        record = {
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "texts": len(texts),
            "words": n_all,
            "data": what,
            "epsilon": args.epsilon,
            "rounds": args.rounds,
            "cli_rounds": args.cli_rounds,
            "machine": {"arch": platform.machine(), "cpus": os.cpu_count(), "load_average": load_start, "python": platform.python_version(), "numpy": np.__version__,
                        "numba": _numba_version(), "text_threads": _threads.threads(), "load_average_end": os.getloadavg()[0]},
            "references_words_per_s": {k: n_all / s for k, s in base.items()},
            "mechanisms": rows,
        }
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
