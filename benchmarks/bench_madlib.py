"""Throughput of Madlib and Mahalanobis ``sample_ids`` on the bundled default embedding.

Prints words/s and two ratios measured in the same run (the machine is shared and noisy, so
absolute numbers are not comparable across runs):

* against a naive per-word reference (distance to every vocabulary vector in a Python loop,
  the approach of public implementations);
* against the matrix-multiply bound: measured float32 GEMM FLOP/s ÷ (2·V·d) words/s, the cost
  of the unavoidable exact 1-NN scan.

Targets: Madlib ≥ 30× the naive reference and ≥ 50 % of the GEMM bound.

Usage: python benchmarks/bench_madlib.py [--tokens 16384] [--naive-words 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import deniable
from deniable.mechanisms.madlib import sample_laplace_directions


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def naive_reference(emb: deniable.Embedding, ids: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """One word at a time: noise, distance to every vocabulary vector, argmin."""
    E = emb.vectors
    out = np.empty(len(ids), dtype=np.int64)
    for k, i in enumerate(ids):
        noisy = E[i] + sample_laplace_directions(1, emb.dim, epsilon, rng)[0]
        out[k] = int(np.argmin(np.linalg.norm(E - noisy, axis=1)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--naive-words", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=10.0)
    args = ap.parse_args()

    emb = deniable.load_embedding()
    V, d = len(emb), emb.dim
    rng = np.random.default_rng(0)
    ids = rng.integers(0, V, size=args.tokens)
    print(f"embedding: {V} words x {d} dims; tokens per run: {args.tokens}; epsilon={args.epsilon}")

    # GEMM throughput with the shape class of the search (batch x d) @ (d x V), float32.
    Q = rng.standard_normal((1024, d + 1), dtype=np.float32)
    Et = np.ascontiguousarray(rng.standard_normal((V, d + 1), dtype=np.float32))
    out = np.empty((1024, V), dtype=np.float32)
    t = best_time(lambda: np.matmul(Q, Et.T, out=out), args.repeat + 2)
    flops = 2.0 * 1024 * (d + 1) * V / t
    bound = flops / (2.0 * V * d)
    print(f"GEMM: {flops / 1e9:.1f} GFLOP/s -> bound {bound:,.0f} words/s")

    naive_ids = ids[: args.naive_words]
    t = best_time(lambda: naive_reference(emb, naive_ids, args.epsilon, rng), 1)
    naive = len(naive_ids) / t
    print(f"naive per-word reference: {naive:,.0f} words/s")

    results = {}
    for name, params in (("madlib", {}), ("mahalanobis", {"lam": 0.5})):
        mech = deniable.get_mechanism(name, emb, epsilon=args.epsilon, **params)
        mech.sample_ids(ids[:1024], rng=1)  # warm-up
        t = best_time(lambda m=mech: m.sample_ids(ids, rng=rng), args.repeat)
        wps = args.tokens / t
        results[name] = wps
        print(f"{name:12s} {wps:>10,.0f} words/s   {wps / naive:6.1f}x naive   {wps / bound:6.1%} of GEMM bound")
    ok_naive = results["madlib"] / naive >= 30
    ok_bound = results["madlib"] / bound >= 0.5
    print(f"targets: madlib >= 30x naive: {'PASS' if ok_naive else 'FAIL'}; madlib >= 50% of GEMM bound: {'PASS' if ok_bound else 'FAIL'}")


if __name__ == "__main__":
    main()
