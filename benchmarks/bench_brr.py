"""BRR on the bundled default embedding (256-bit codes): speed, bundle size, binarizer quality.

Reports, in one run (the machine is shared and noisy, so only same-run ratios are meaningful):

* ``sample_ids`` words/s of BRR (``index="auto"``: FAISS binary flat when installed; and the
  numpy popcount engine) against Madlib with its exact index, on the same token ids; each timing
  is the best of ``--repeat`` interleaved rounds. Target: BRR ≥ 2× Madlib exact (the
  paper: 1.68×).
* The bundle size (``deniable export brr``) against the float32 embedding Madlib searches
  (V·d·4 bytes). Target: ≤ 4 %.
* The default binarizer's 10-NN overlap between real (Euclidean) and binary (Hamming) space on
  2,000 random query words (seed 0).

Usage: python benchmarks/bench_brr.py [--tokens 16384] [--repeat 3] [--epsilon-madlib 10]
"""

from __future__ import annotations

import argparse
import time
from importlib import resources

import numpy as np

import deniable
from deniable.binary import DEFAULT_BINARY_FILE, DEFAULT_METHOD, load_default_binary_embedding, nn_overlap
from deniable.calibration.privacy_ratio import equivalent_epsilon
from deniable.mechanisms.brr import BRR


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epsilon-madlib", type=float, default=10.0)
    ap.add_argument("--brr-epsilon", type=float, default=None, help="default: matched to Madlib by the privacy ratio (avg)")
    ap.add_argument("--queries", type=int, default=2000, help="query words for the NN overlap")
    args = ap.parse_args()

    emb = deniable.load_embedding()
    be = load_default_binary_embedding()
    madlib = deniable.Madlib(emb, epsilon=args.epsilon_madlib)
    if args.brr_epsilon is None:
        t = time.perf_counter()
        eps_brr = equivalent_epsilon(args.epsilon_madlib, madlib, BRR(be, epsilon=1.0, index="exact"), aggregate="avg")
        ratio_time = time.perf_counter() - t
    else:
        eps_brr, ratio_time = args.brr_epsilon, float("nan")
    engines = {"brr[auto]": BRR(be, epsilon=eps_brr, index="auto"), "brr[numpy]": BRR(be, epsilon=eps_brr, index="exact")}
    ids = np.random.default_rng(0).integers(0, len(emb), size=args.tokens)

    runs = {"madlib[exact]": madlib, **engines}
    best = {k: float("inf") for k in runs}
    for r in range(args.repeat):
        for name, mech in runs.items():
            t = time.perf_counter()
            mech.sample_ids(ids, rng=r)
            best[name] = min(best[name], time.perf_counter() - t)
    wps = {k: args.tokens / v for k, v in best.items()}

    bundle_bytes = len((resources.files("deniable.binary") / "data" / DEFAULT_BINARY_FILE).read_bytes())
    f32_bytes = len(emb) * emb.dim * 4
    t = time.perf_counter()
    overlap = nn_overlap(emb, be, k=10, n_queries=args.queries, rng=0)
    overlap_time = time.perf_counter() - t

    auto = engines["brr[auto]"].index
    print(f"default embedding: {len(emb)} words x {emb.dim} dims; codes: {be.n_bits} bits ({DEFAULT_METHOD}), fingerprint {be.fingerprint}")
    print(f"epsilon: Madlib {args.epsilon_madlib:g}, BRR {eps_brr:.4g} (privacy ratio, avg; computed in {ratio_time:.1f} s)")
    print(f"tokens: {args.tokens} uniform random ids; best of {args.repeat} interleaved rounds")
    for name, v in wps.items():
        print(f"  {name:<14} {v:>10,.0f} words/s")
    print(f"  brr[auto] engine: {type(auto).__name__}")
    print(f"speed ratio BRR[auto] / Madlib[exact]  = {wps['brr[auto]'] / wps['madlib[exact]']:.2f}x (target >= 2x)")
    print(f"speed ratio BRR[numpy] / Madlib[exact] = {wps['brr[numpy]'] / wps['madlib[exact]']:.2f}x")
    print(f"bundle: {bundle_bytes:,} bytes vs float32 embedding {f32_bytes:,} bytes = {100 * bundle_bytes / f32_bytes:.2f} % (target <= 4 %)")
    print(f"10-NN overlap real vs binary ({DEFAULT_METHOD}, {args.queries} queries): {overlap:.3f} ({overlap_time:.1f} s)")


if __name__ == "__main__":
    main()
