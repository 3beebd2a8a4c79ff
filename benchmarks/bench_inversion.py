"""The exact inversion adversary's likelihood rows: batched ``log_probability_rows`` vs one
``log_probabilities`` call per input word (what ``inversion_attack(method="exact")`` did before).

Reference measured in the same run: privatizing every vocabulary word once with Madlib (one
exact nearest-neighbour search per word), so the machine's load cancels in the ratios.

    python benchmarks/bench_inversion.py                       # 256 words, TEM, SanText, SanText+, TruncatedGumbel
    python benchmarks/bench_inversion.py --words 64 --mechanisms santext
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import deniable
from deniable.mechanisms.base import Mechanism


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mechanisms", default="tem,santext,santext_plus,truncated_gumbel")
    ap.add_argument("--words", type=int, default=256)
    ap.add_argument("--epsilon", type=float, default=2.0)
    args = ap.parse_args()

    emb = deniable.load_embedding()
    madlib = deniable.Madlib(emb, epsilon=10)
    t = time.perf_counter()
    madlib.sample_ids(np.arange(len(emb)), rng=0)
    ref = time.perf_counter() - t
    print(f"reference: Madlib over the {len(emb)}-word vocabulary once: {ref:.2f} s ({len(emb) / ref:,.0f} words/s)")
    ids = np.random.default_rng(0).choice(len(emb), args.words, replace=False)
    for name in args.mechanisms.split(","):
        mech = deniable.get_mechanism(name, emb, epsilon=args.epsilon)
        mech.log_probability_rows(ids[:2])  # one-time tables (k-nearest) outside the timing
        t = time.perf_counter()
        fast = mech.log_probability_rows(ids)
        tf = time.perf_counter() - t
        t = time.perf_counter()
        loop = Mechanism.log_probability_rows(mech, ids)
        tl = time.perf_counter() - t
        finite = np.isfinite(loop)
        same = np.array_equal(finite, np.isfinite(fast)) and np.allclose(fast[finite], loop[finite], rtol=1e-9, atol=1e-12)
        print(f"{name}: {ids.size} rows of {len(emb)} words: batched {ids.size / tf:,.0f} rows/s ({tf / ref:.2f}x reference), "
              f"row by row {ids.size / tl:,.0f} rows/s ({tl / ref:.2f}x reference); speed-up {tl / tf:.1f}x; same rows: {same}")


if __name__ == "__main__":
    main()
