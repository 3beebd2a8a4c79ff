"""Throughput of ``deniable.spark.privatize_column`` against the single-process path.

Measured in the same run, on the same texts, with Madlib on the bundled embedding:

* single process: ``privatize_texts`` over 1 MiB batches with one generator (what the CLI does);
* single process, keyed: :func:`deniable.integrations.keyed.privatize_keyed` (one generator per
  row, the reference of the Spark path) — the cost of partition-independent randomness;
* Spark ``local[1]`` and ``local[2]`` (and any ``--masters``): ``privatize_column`` keyed by an id
  column, forced with the ``noop`` writer. Each session first runs a small warm-up job (Python
  workers started, mechanism loaded), timed and reported separately; the main job is then timed
  whole, shipping and scheduling included.

Prints words/s and the ratio to the single-process path, which is measured before and again
after the Spark runs (the machine is shared; the ratio to the mean of the two is the claim). Goal: local[2] >= 0.6x the
single process on a 2-core machine (overhead, not a slowdown). The projection to a cluster is
per-core throughput x cores x the measured local[2] efficiency.

Usage: python benchmarks/bench_spark.py [--words 1000000] [--words-per-text 20] [--masters local[1],local[2]]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import numpy as np

import deniable
from deniable.integrations.keyed import privatize_keyed
from deniable.text.privatize import privatize_texts


def load() -> str:
    """The 1/5/15-minute load averages (the machine may be shared: read the ratios with them)."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def make_texts(vocab: list[str], n_words: int, per_text: int, seed: int = 0) -> list[str]:
    """Texts of ``per_text`` words drawn Zipf-like from the 20,000 most frequent words."""
    rng = np.random.default_rng(seed)
    top = np.asarray(vocab[:20000], dtype=object)
    ranks = np.minimum(rng.zipf(1.2, size=n_words) - 1, len(top) - 1)
    words = top[ranks]
    return [" ".join(words[i : i + per_text]) for i in range(0, n_words, per_text)]


def single_process(mech, texts: list[str]) -> float:
    t = time.perf_counter()
    batch: list[str] = []
    chars = 0
    gen = np.random.default_rng(0)
    for text in texts:
        batch.append(text)
        chars += len(text)
        if chars >= 1 << 20:
            privatize_texts(mech, batch, rng=gen)
            batch, chars = [], 0
    if batch:
        privatize_texts(mech, batch, rng=gen)
    return time.perf_counter() - t


def spark_run(master: str, mech, texts: list[str], partitions: int) -> tuple[float, float]:
    import pandas as pd
    from pyspark.sql import SparkSession

    from deniable.spark import privatize_column

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(master)
        .appName("deniable-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = spark.createDataFrame(pd.DataFrame({"id": np.arange(len(texts)), "text": texts}))
        df = df.repartition(partitions).cache()
        df.count()
        warm = df.limit(200).repartition(partitions)
        t = time.perf_counter()
        privatize_column(warm, "text", mech, key="id", seed=1).write.format("noop").mode("overwrite").save()
        warm_s = time.perf_counter() - t
        t = time.perf_counter()
        privatize_column(df, "text", mech, key="id", seed=0).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t, warm_s
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=1_000_000)
    ap.add_argument("--words-per-text", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--partitions-per-core", type=int, default=4)
    ap.add_argument("--skip-keyed", action="store_true", help="skip the keyed single-process measurement")
    args = ap.parse_args()

    mech = deniable.get_mechanism("madlib", epsilon=args.epsilon)
    texts = make_texts(mech.vocabulary.words, args.words, args.words_per_text)
    n_words = sum(len(t.split()) for t in texts)
    print(f"Madlib epsilon={args.epsilon:g}, bundled embedding ({mech.n_words} words); {len(texts):,} texts, {n_words:,} words; cpus: {os.cpu_count()} [{load()}]")
    privatize_texts(mech, texts[:50], rng=0)  # warm-up

    base = n_words / single_process(mech, texts)
    print(f"single process (privatize_texts, 1 MiB batches): {base:,.0f} words/s [{load()}]")
    if not args.skip_keyed:
        t = time.perf_counter()
        for s in range(0, len(texts), 10000):
            privatize_keyed(mech, texts[s : s + 10000], range(s, min(s + 10000, len(texts))), seed=0, stream="text")
        keyed = n_words / (time.perf_counter() - t)
        print(f"single process, keyed per row (privatize_keyed): {keyed:,.0f} words/s ({keyed / base:.2f}x) [{load()}]")

    per_core = {}
    for master in [m.strip() for m in args.masters.split(",") if m.strip()]:
        cores = int(master[master.index("[") + 1 : master.index("]")].split(",")[0]) if "[" in master else 1
        secs, warm = spark_run(master, mech, texts, max(1, cores * args.partitions_per_core))
        wps = n_words / secs
        per_core[master] = (wps, cores)
        print(f"spark {master}: {wps:,.0f} words/s ({wps / base:.2f}x single process; warm-up job {warm:.1f} s, not counted) [{load()}]")
    # the machine is shared: measure the reference again after the Spark runs and compare with both
    again = n_words / single_process(mech, texts)
    mean = (base + again) / 2
    print(f"single process again, after the Spark runs: {again:,.0f} words/s (before: {base:,.0f}; mean {mean:,.0f}) [{load()}]")
    for master, (wps, _) in per_core.items():
        print(f"spark {master} / mean single process: {wps / mean:.2f}x")
    if len(per_core) >= 2:
        (m1, (w1, c1)), (m2, (w2, c2)) = itertools.islice(per_core.items(), 2)
        eff = (w2 / c2) / (w1 / c1)
        print(f"scaling {m1} -> {m2}: {w2 / w1:.2f}x for {c2 / c1:.0f}x cores (per-core efficiency {eff:.2f})")
        print(
            f"projection: a cluster of N executor cores runs about N x {w1 / c1:,.0f} x {eff:.2f} = N x {w1 / c1 * eff:,.0f} words/s "
            f"(1e9 words on 100 cores: {1e9 / (100 * w1 / c1 * eff) / 3600:.1f} h), if executors are as fast as this machine's cores"
        )


if __name__ == "__main__":
    main()
