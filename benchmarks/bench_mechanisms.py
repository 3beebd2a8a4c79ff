"""Throughput of the mechanisms users compare us with, against Madlib in the same run.

For each epsilon, measured in the same process on the same tokens (the machine is shared and
noisy: compare ratios, not absolute numbers across runs):

* Madlib ``sample_ids`` words/s (exact blocked 1-NN search), the reference;
* words/s of ``vickrey`` (Euclidean and Mahalanobis), ``santext``, ``santext_plus``,
  ``custext``, ``truncated_gumbel``, ``diffractor`` (geometric and TEM noise), and the ratio to
  Madlib. Goal: every ratio >= 0.2.

One-time pre-processing (epsilon-independent, cached on disk: k-nearest tables, CusText output
sets, Diffractor word lists) is timed separately, before the runs; per-epsilon table builds are
timed apart from sampling too. Note that epsilon is not comparable across mechanisms (CusText:
per pair in an output set; Diffractor: per list position).

Tokens: words of IMDB reviews from ../shared/data (out-of-vocabulary words become UNK), or
Zipf-distributed ids without the shared data.

Run:  .venv/bin/python benchmarks/bench_mechanisms.py [--tokens 200000] [--madlib-tokens 8192]
      [--eps 1 5 10 20] [--cache-dir DIR | --fresh-cache] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from _common import rate, token_ids

import deniable

# (label, registry name, parameters)
MECHANISMS = [
    ("vickrey (euclidean, t=0.75)", "vickrey", {}),
    ("vickrey (mahalanobis, lam=0.75)", "vickrey", {"noise": "mahalanobis"}),
    ("santext", "santext", {}),
    ("santext_plus (w=0.9, p=0.3)", "santext_plus", {}),
    ("custext (K=20)", "custext", {}),
    ("truncated_gumbel (k=20)", "truncated_gumbel", {}),
    ("diffractor (geometric)", "diffractor", {}),
    ("diffractor (tem)", "diffractor", {"noise": "tem"}),
]
# Madlib-like mechanisms (a 1-NN scan per token) are measured on fewer tokens
SLOW = {"vickrey"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=200_000, help="tokens per fast-mechanism measurement")
    ap.add_argument("--madlib-tokens", type=int, default=8192, help="tokens for Madlib and Vickrey")
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 5.0, 10.0, 20.0])
    ap.add_argument("--cache-dir", default=None, help="pre-processing cache (default: $DENIABLE_CACHE_DIR or ~/.cache/deniable)")
    ap.add_argument("--fresh-cache", action="store_true", help="use an empty temporary cache (times the pre-processing from scratch)")
    ap.add_argument("--only", nargs="*", default=None, help="registry names to measure (default: all)")
    ap.add_argument("--markdown", action="store_true", help="also print a markdown table of the ratios")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    emb = deniable.load_embedding()
    ids, what = token_ids(emb, args.tokens, rng)
    print(f"embedding: {len(emb)} words x {emb.dim}; tokens: {ids.size} {what}")
    print(f"machine: {os.cpu_count()} cpu(s); numpy {np.__version__}")
    tmp = tempfile.TemporaryDirectory(prefix="deniable-bench-mech-") if args.fresh_cache else None
    cache_dir = tmp.name if tmp else args.cache_dir
    mechs = [m for m in MECHANISMS if args.only is None or m[1] in args.only]

    print("\npre-processing (epsilon-independent, cached):")
    for label, name, params in mechs:
        if name in SLOW:
            continue
        kw = dict(params, cache_dir=cache_dir) if cache_dir else dict(params)
        t = time.perf_counter()
        m = deniable.get_mechanism(name, emb, epsilon=1.0, **kw)
        m.precompute()
        print(f"  {label:34s} {time.perf_counter() - t:8.1f} s")

    slow_ids = ids[: args.madlib_tokens]
    rows: list[tuple[float, str, float, float, float]] = []
    print()
    header = f"{'eps':>5} {'mechanism':34s} {'words/s':>12} {'build s':>8} {'Madlib w/s':>11} {'x Madlib':>9}  goal >= 0.2x"
    print(header)
    print("-" * len(header))
    all_ok = True
    for eps in args.eps:
        mad = deniable.Madlib(emb, epsilon=eps)
        mad.sample_ids(slow_ids[:256], rng=rng)
        mad_rate = rate(lambda x: mad.sample_ids(x, rng=rng), slow_ids)
        for label, name, params in mechs:
            kw = dict(params)
            if name not in SLOW and cache_dir:
                kw["cache_dir"] = cache_dir
            mech = deniable.get_mechanism(name, emb, epsilon=eps, **kw)
            t = time.perf_counter()
            mech.sample_ids(ids[:16], rng=rng)  # loads the cache, builds the per-epsilon tables
            build = time.perf_counter() - t
            toks = slow_ids if name in SLOW else ids
            r = rate(lambda x: mech.sample_ids(x, rng=rng), toks, repeat=1 if name in SLOW else 2)
            ratio = r / mad_rate
            ok = ratio >= 0.2
            all_ok &= ok
            rows.append((eps, label, r, mad_rate, ratio))
            print(f"{eps:>5g} {label:34s} {r:>12,.0f} {build:>8.2f} {mad_rate:>11,.0f} {ratio:>9.2f}  {'OK' if ok else 'MISSED'}", flush=True)
    print()
    print("all mechanisms >= 0.2x Madlib" if all_ok else "some mechanisms MISSED the 0.2x Madlib goal")
    if args.markdown:
        labels = [m[0] for m in mechs]
        print("\n| mechanism | " + " | ".join(f"eps={e:g}" for e in args.eps) + " |")
        print("|---|" + "---:|" * len(args.eps))
        for lab in labels:
            cells = [f"{r:,.0f} w/s ({x:.1f}x)" for (e, l, r, _, x) in rows if l == lab]
            print(f"| {lab} | " + " | ".join(cells) + " |")
        mads = {e: m for (e, _, _, m, _) in rows}
        print("| Madlib (reference) | " + " | ".join(f"{mads[e]:,.0f} w/s" for e in args.eps) + " |")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
