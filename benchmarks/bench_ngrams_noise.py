#!/usr/bin/env python
"""Noise samplers of the formal n-gram releases: OpenDP vs numpy on one large count vector.

Issue 9 asks for OpenDP's samplers (exact, safe against floating-point attacks) unless they cannot
serve 5·10⁶-entry vectors in reasonable time. This prints, for a vector of ``--size`` integer
counts (default 5,000,000, the largest vocabularies the paper considers), the wall time and
entries/s of

* OpenDP's discrete Gaussian (the default formal Bayesian release: integer bounded counts),
* OpenDP's discrete Laplace (formal Laplace),
* OpenDP's float Laplace (Laplace + public: a float vector, grid 2^-40),
* numpy's Gaussian and Laplace (the reference, same run),

through :func:`deniable.ngrams.noise.gaussian_mechanism` / ``laplace_mechanism`` (calibration
included), with the ratio to numpy, and checks the empirical standard deviation of each.

    .venv/bin/python benchmarks/bench_ngrams_noise.py               # 5M entries (minutes on 2 cores)
    .venv/bin/python benchmarks/bench_ngrams_noise.py --size 200000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from deniable.ngrams import noise


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=5_000_000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    args = ap.parse_args()
    n = args.size
    rng = np.random.default_rng(0)
    counts = rng.poisson(50.0, n).astype(np.int64)
    frac = counts / counts.sum()
    sens2, sens1 = np.sqrt(50.0), 50.0  # k = 50, C = 1
    print(f"vector: {n:,} entries; epsilon={args.epsilon}, delta={args.delta}; CPUs: {os.cpu_count()}")
    rows = []
    (x, s, _), t_np_g = timed(lambda: noise.gaussian_mechanism(counts, sens2, args.epsilon, args.delta, sampler="numpy", rng=rng))
    rows.append(("numpy Gaussian (int counts)", t_np_g, float(np.std(x - counts)), s))
    (x, b, _), t_np_l = timed(lambda: noise.laplace_mechanism(counts, sens1, args.epsilon, sampler="numpy", rng=rng))
    rows.append(("numpy Laplace (int counts)", t_np_l, float(np.std(x - counts)), b * np.sqrt(2)))
    (x, s, _), t = timed(lambda: noise.gaussian_mechanism(counts, sens2, args.epsilon, args.delta, sampler="opendp"))
    rows.append(("OpenDP discrete Gaussian (int counts)", t, float(np.std(x - counts)), s))
    (x, b, _), t = timed(lambda: noise.laplace_mechanism(counts, sens1, args.epsilon, sampler="opendp"))
    rows.append(("OpenDP discrete Laplace (int counts)", t, float(np.std(x - counts)), b * np.sqrt(2)))
    (x, b, _), t = timed(lambda: noise.laplace_mechanism(frac, 2.0, args.epsilon, sampler="opendp"))
    rows.append(("OpenDP float Laplace (normalised, 2^-40 grid)", t, float(np.std(x - frac)), b * np.sqrt(2)))
    ref = {"Gaussian": t_np_g, "Laplace": t_np_l}
    print(f"{'sampler':48s} {'seconds':>9s} {'entries/s':>12s} {'x numpy':>9s} {'sd':>10s} {'expected sd':>12s}")
    for name, t, sd, expected in rows:
        kind = "Gaussian" if "Gaussian" in name else "Laplace"
        print(f"{name:48s} {t:9.2f} {n / t:12,.0f} {t / ref[kind]:9.0f} {sd:10.4g} {expected:12.4g}")


if __name__ == "__main__":
    main()
