"""Helpers shared by the benchmark scripts (run as ``python benchmarks/bench_x.py``, so this
folder is on ``sys.path``)."""

from __future__ import annotations

import compileall
import csv
import gzip
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import deniable
from deniable.text.tokenize import split_words

IMDB = Path(__file__).resolve().parents[2] / "shared" / "data" / "classification" / "imdb_50k.csv.gz"


def compile_package() -> None:
    """Compile the package's modules to bytecode, as ``pip install`` does, before timing the
    command line: a source checkout run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile
    every module again at each start (about 0.1 s here), which no installed copy does."""
    compileall.compile_dir(Path(deniable.__file__).parent, quiet=1)


def privatize_command(src: Path, out: Path, name: str, epsilon: float, workers: int, *, program: list[str] | None = None) -> list[str]:
    """The benchmarks' ``deniable privatize`` command (seed 0, no progress bar): run by
    ``program`` (default the console script beside this Python, else ``deniable`` on the PATH)."""
    if program is None:
        exe = Path(sys.executable).with_name("deniable")
        program = [str(exe) if exe.exists() else "deniable"]
    return [*program, "privatize", str(src), "-o", str(out), "-m", name, "-e", str(epsilon), "--seed", "0", "--no-progress", "--workers", str(workers)]


def token_ids(emb: deniable.Embedding, n: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """``n`` vocabulary ids of real running text (IMDb review words; OOV -> -1, i.e. UNK), or
    Zipf-distributed ids when the shared data is absent; with a description of which."""
    if IMDB.exists():
        words: list[str] = []
        csv.field_size_limit(sys.maxsize)
        with gzip.open(IMDB, "rt", encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                words.extend(w.lower() for w in split_words(row["review"])[1::2])
                if len(words) >= n:
                    break
        ids = emb.ids_of(words[:n])
        return ids, f"IMDB review words ({(ids == -1).mean():.1%} out of vocabulary -> UNK)"
    ranks = np.arange(1, len(emb) + 1)
    p = 1.0 / ranks
    return rng.choice(len(emb), size=n, p=p / p.sum()), "Zipf-distributed ids (shared data not found)"


def rate(fn: Callable[[np.ndarray], object], ids: np.ndarray, repeat: int = 1) -> float:
    """Words per second of ``fn(ids)``, best of ``repeat`` runs."""
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn(ids)
        best = min(best, time.perf_counter() - t)
    return ids.size / best
