"""Privacy targets: how long `get_mechanism(name, max_n_w=...)` takes.

* resolution from the shipped calibration (bundled embedding, default parameters), per mechanism;
* computing a calibration for a "user" embedding of the same size (the bundled one with the
  shipped data bypassed and no cache), per estimator, with the default options;

Reference measured in the same run: privatizing every vocabulary word once with Madlib (one
exact nearest-neighbour search per word), so the machine's load cancels in the ratios.

    python benchmarks/bench_targets.py            # everything (minutes)
    python benchmarks/bench_targets.py --quick    # resolution only
    python benchmarks/bench_targets.py --exact santext,santext_plus,knn_tem --quick
        # the exact estimator's grid path (self_probabilities) vs probabilities per word and ε
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import deniable
from deniable.calibration.targets import compute_calibration


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mechanisms", default=",".join(deniable.available_mechanisms()), help="default: every registered mechanism")
    ap.add_argument("--exact", default="", help="mechanisms whose self_probabilities grid path to time against the per-word loop")
    ap.add_argument("--exact-words", type=int, default=8)
    args = ap.parse_args()
    names = args.mechanisms.split(",") if args.mechanisms else []

    t = time.perf_counter()
    emb = deniable.load_embedding()
    print(f"load bundled embedding: {time.perf_counter() - t:.2f} s ({len(emb)} words)")
    madlib = deniable.Madlib(emb, epsilon=10)
    t = time.perf_counter()
    madlib.sample_ids(np.arange(len(emb)), rng=0)
    ref = time.perf_counter() - t
    print(f"reference: Madlib over the {len(emb)}-word vocabulary once: {ref:.2f} s ({len(emb) / ref:,.0f} words/s)")

    if args.exact:
        from deniable.calibration.targets import default_epsilons

        grid = default_epsilons()
        ids = np.random.default_rng(0).choice(len(emb), args.exact_words, replace=False)
        for name in args.exact.split(","):
            mechs = [deniable.get_mechanism(name, emb, epsilon=float(e)) for e in grid]
            t = time.perf_counter()
            fast = mechs[0].self_probabilities(ids, grid)
            tf = time.perf_counter() - t
            t = time.perf_counter()
            loop = np.array([[m.probabilities(int(w))[w] for m in mechs] for w in ids])
            tl = time.perf_counter() - t
            print(f"{name}: N_w over {grid.size} epsilons, {ids.size} words: self_probabilities {ids.size / tf:.1f} words/s "
                  f"({tf / ref:.2f}x reference), probabilities loop {ids.size / tl:.2f} words/s ({tl / ref:.2f}x reference); "
                  f"speed-up {tl / tf:.0f}x; max relative difference {np.max(np.abs(fast - loop) / np.maximum(loop, 1e-300)):.1e}")

    for name in names:
        t = time.perf_counter()
        try:
            mech = deniable.get_mechanism(name, emb, max_n_w=0.5)
        except ValueError as exc:
            print(f"get_mechanism({name!r}, max_n_w=0.5): {time.perf_counter() - t:.2f} s: refused: {exc}")
            continue
        dt = time.perf_counter() - t
        c = mech.epsilon_choice
        print(f"get_mechanism({name!r}, max_n_w=0.5): {dt:.2f} s ({dt / ref:.2f}x reference) -> epsilon {mech.epsilon:.4g}; "
              f"worst {c.worst_word!r} {c.worst_n_w:.3f}, median {c.median_n_w:.3f}; {c.source}")
    if args.quick:
        return

    for name in names:
        t = time.perf_counter()
        cal = compute_calibration(lambda e, name=name: deniable.get_mechanism(name, emb, epsilon=e), progress=False, rng=1)
        dt = time.perf_counter() - t
        try:
            chosen = f"{cal.choose(0.5).epsilon:.4g}"
        except ValueError:
            chosen = "none (unreachable)"
        print(f"compute_calibration({name}) defaults, {len(emb)} words: {dt:.1f} s ({dt / ref:.1f}x reference); "
              f"{cal.estimator}; coverage: {cal.coverage[:90]}; epsilon for 0.5: {chosen}", flush=True)


if __name__ == "__main__":
    main()
