"""Madlib, Mahalanobis and Vickrey with ``index="exact-bf16"`` against the default ``"exact"``.

Both give the same outputs for a seed (the bfloat16 scores are certified and the candidates
re-measured in float64; the script checks equality). Prints words/s of ``sample_ids`` for each,
and the ratio measured in the same run (the machine is shared and noisy, so absolute numbers
are not comparable across runs), plus the mean float64 candidates per word. The speed-up needs
a CPU whose bfloat16 matrix product is fast (Intel AMX or AVX512-BF16, which torch uses through
oneDNN); elsewhere expect a slow-down, and keep ``"exact"``.

Usage: OMP_NUM_THREADS=1 python benchmarks/bench_bf16_search.py [--tokens 16384] [--epsilons 2,10,20]
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import rate, token_ids

import deniable


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--epsilons", default="2,10,20")
    ap.add_argument("--mechanisms", default="madlib,mahalanobis,vickrey")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    import torch

    emb = deniable.load_embedding()
    ids, what = token_ids(emb, args.tokens, np.random.default_rng(0))
    print(f"embedding: {len(emb)} words x {emb.dim} dims; {ids.size} tokens of {what}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"{'mechanism':<12} {'eps':>5} {'exact w/s':>10} {'bf16 w/s':>10} {'ratio':>6} {'cand/word':>9}  same outputs")
    for name in args.mechanisms.split(","):
        for eps in (float(e) for e in args.epsilons.split(",")):
            a = deniable.get_mechanism(name, embedding=emb, epsilon=eps)
            b = deniable.get_mechanism(name, embedding=emb, epsilon=eps, index="exact-bf16")
            same = bool(np.array_equal(a.sample_ids(ids, rng=1), b.sample_ids(ids, rng=1)))
            b.index.stats = dict.fromkeys(b.index.stats, 0)
            ra = rate(lambda x, m=a: m.sample_ids(x, rng=2), ids, args.repeat)
            rb = rate(lambda x, m=b: m.sample_ids(x, rng=2), ids, args.repeat)
            cand = b.index.stats["candidates"] / max(1, b.index.stats["queries"])
            print(f"{name:<12} {eps:>5g} {ra:>10.0f} {rb:>10.0f} {rb / ra:>5.2f}x {cand:>9.1f}  {same}", flush=True)


if __name__ == "__main__":
    main()
