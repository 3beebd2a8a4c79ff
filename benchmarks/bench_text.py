"""Text handling of ``privatize_texts`` (tokenize, look up, restore case, rebuild the texts),
without the mechanism: a stand-in sampler returns its input ids, so only the text work is timed.

Prints words/s of ``privatize_texts`` and its ratio to two references measured in the same run
(interleaved, best of ``--rounds``): the layout-keeping tokenization alone
(``split_words`` on every text, the least any layout-preserving rewrite must do) and
``str.split`` (whitespace only). Texts: IMDb reviews from ``../shared/data`` (or generated
sentences when the data is absent).

Usage: ``python benchmarks/bench_text.py [--texts 5000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys
import time
from collections.abc import Callable

import numpy as np
from _common import IMDB

import deniable
from deniable.text import privatize_texts, split_words


class _Echo:
    """Stand-in mechanism: returns the ids it is given (UNK as word 0)."""

    def __init__(self, vocabulary: deniable.Embedding) -> None:
        self.vocabulary = vocabulary

    def sample_ids(self, ids: np.ndarray, rng: object = None) -> np.ndarray:
        return np.maximum(np.asarray(ids), 0)


def _texts(n: int) -> tuple[list[str], str]:
    if IMDB.exists():
        csv.field_size_limit(sys.maxsize)
        texts = []
        with gzip.open(IMDB, "rt", encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                texts.append(row["review"])
                if len(texts) >= n:
                    break
        return texts, f"{n:,} IMDb reviews"
    gen = np.random.default_rng(0)
    words = ["The", "film", "was", "good", "bad", "and", "I", "liked", "it", "NASA", "Paris", "plot"]
    return [" ".join(gen.choice(words, 200)) + "." for _ in range(n)], f"{n:,} generated texts"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    emb = deniable.load_embedding()
    texts, what = _texts(args.texts)
    n_words = sum(len(split_words(t)) // 2 for t in texts)
    echo = _Echo(emb)
    runs: dict[str, Callable[[], object]] = {
        "privatize_texts (text handling)": lambda: privatize_texts(echo, texts, rng=0),
        "split_words (reference)": lambda: [split_words(t) for t in texts],
        "str.split (reference)": lambda: [t.split() for t in texts],
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(args.rounds):  # interleaved: every round measures all three under the same load
        for name, fn in runs.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    print(f"{what}, {n_words:,} words; best of {args.rounds} interleaved rounds\n")
    print("| | words/s | time relative to privatize_texts |")
    print("|---|---:|---:|")
    ref = best["privatize_texts (text handling)"]
    for name, s in best.items():
        print(f"| {name} | {n_words / s:,.0f} | {s / ref:.2f} |")


if __name__ == "__main__":
    main()
