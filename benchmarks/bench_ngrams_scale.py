#!/usr/bin/env python
"""Scale benchmark: Algorithm 1 with the EXACT sensitivity on a synthetic Zipfian workload.

Default: 4,000,000 users over a 50,000-trigram vocabulary (the paper's setting, §4.1/Figure 1).
Each user writes 1 + LogNormal(log 10, 1) n-gram tokens (capped at 5,000), drawn from a Zipf(1.1)
distribution over the vocabulary; per-user counts are aggregated chunk by chunk (int64 keys
user·|V| + ngram -> np.unique) into one CSR matrix with int32 indices and int32 counts. Public counts
α come from an independent draw of a perturbed Zipf distribution.

Prints the time of each phase, the peak resident memory (ru_maxrss) and, as a same-run reference,
the speed of the naive O(|V|)-per-user brute force (remove the user, recompute x̂ and w) measured on
a few hundred users and extrapolated — and checks that both agree on those users.

    .venv/bin/python benchmarks/bench_ngrams_scale.py                 # 4M users (~minutes, a few GB)
    .venv/bin/python benchmarks/bench_ngrams_scale.py --users 200000  # a smaller run
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np
import scipy.sparse as sp

from deniable.errors import PrivacyWarning
from deniable.ngrams import paper
from deniable.ngrams.counting import clamp_counts
from deniable.ngrams.sensitivity import log_count_stats, per_user_sensitivity


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def zipf_cdf(V: int, s: float) -> np.ndarray:
    p = np.arange(1, V + 1, dtype=np.float64) ** -s
    return np.cumsum(p / p.sum())


def generate(users: int, V: int, s: float, median_tokens: float, chunk: int, rng: np.random.Generator) -> sp.csr_matrix:
    cdf = zipf_cdf(V, s)
    indptr_parts, index_parts, data_parts = [], [], []
    for start in range(0, users, chunk):
        n = min(chunk, users - start)
        tokens = np.minimum(1 + np.floor(rng.lognormal(np.log(median_tokens), 1.0, n)), 5000).astype(np.int64)
        rows = np.repeat(np.arange(n, dtype=np.int64), tokens)
        cols = np.searchsorted(cdf, rng.random(rows.size)).astype(np.int64)
        np.minimum(cols, V - 1, out=cols)
        keys, counts = np.unique(rows * V + cols, return_counts=True)  # sorted by (row, col)
        r = keys // V
        index_parts.append((keys - r * V).astype(np.int32))
        data_parts.append(counts.astype(np.int32))
        indptr_parts.append(np.bincount(r, minlength=n))
        del tokens, rows, cols, keys, counts, r
    row_nnz = np.concatenate(indptr_parts)
    indptr = np.zeros(users + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    m = sp.csr_matrix((np.concatenate(data_parts), np.concatenate(index_parts), indptr), shape=(users, V))
    m.has_canonical_format = True  # sorted, no duplicates by construction
    return m


def naive_per_user(m: sp.csr_matrix, rows: np.ndarray, S: float, C: float) -> np.ndarray:
    """Reference: for each user, rebuild c, N, x̂, w and r over all |V| columns (O(|V|) per user)."""
    st = log_count_stats(m)
    r = np.minimum(1.0, S * st.N / C) * st.xhat
    out = np.empty(rows.size)
    for k, u in enumerate(rows):
        a, b = m.indptr[u], m.indptr[u + 1]
        cols, d = m.indices[a:b], m.data[a:b]
        c = st.c.copy()
        N = st.N.astype(np.float64)
        c[cols] -= d
        N[cols] -= 1
        ell = np.log1p(c)
        r_minus = np.minimum(1.0, S * N / C) * (ell - ell.mean())
        out[k] = np.linalg.norm(r - r_minus)
    return out


def main() -> None:
    # These runs measure the paper's local-sensitivity releases on purpose; each would warn.
    warnings.filterwarnings("ignore", category=PrivacyWarning)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=4_000_000)
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--median-tokens", type=float, default=10.0)
    ap.add_argument("--chunk-users", type=int, default=250_000)
    ap.add_argument("--C", type=float, default=10.0, help="clamp (§4.3: 10 for >= 1M users)")
    ap.add_argument("--S", type=float, default=1.0)
    ap.add_argument("--rho", type=float, default=0.5)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-8)
    ap.add_argument("--reference-users", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    t0 = time.perf_counter()
    m = generate(args.users, args.vocab, args.zipf, args.median_tokens, args.chunk_users, rng)
    t_gen = time.perf_counter() - t0
    mem_bytes = m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
    print(f"workload: {args.users:,} users x {args.vocab:,} n-grams, nnz {m.nnz:,} ({m.nnz / args.users:.1f}/user), "
          f"{int(m.data.sum(dtype=np.int64)):,} tokens; CSR {mem_bytes / 2**20:.0f} MiB; generated in {t_gen:.1f}s; peak RSS {peak_rss_gib():.2f} GiB")
    # public counts: an independent draw from a perturbed Zipf (a related but different corpus)
    p_pub = np.arange(1, args.vocab + 1, dtype=np.float64) ** (-0.95 * args.zipf) * rng.lognormal(0.0, 0.5, args.vocab)
    alpha = rng.multinomial(50_000_000, p_pub / p_pub.sum()).astype(np.float64)

    t0 = time.perf_counter()
    rel = paper.bayesian_not_dp(m, alpha, epsilon=args.epsilon, delta=args.delta, S=args.S, rho=args.rho, C=args.C, sensitivity="exact", rng=rng)
    t_rel = time.perf_counter() - t0
    print(f"exact-sensitivity release (Algorithm 1, clamp C={args.C:g}, S={args.S:g}, rho={args.rho:g}, eps={args.epsilon:g}, delta={args.delta:g}): "
          f"{t_rel:.1f}s = {args.users / t_rel:,.0f} users/s, {m.nnz / t_rel / 1e6:.1f}M nnz/s; "
          f"gamma={rel.diagnostics['gamma']:.5f}, sensitivity(mu_ps)={rel.sensitivity:.5f}, sigma={rel.sigma:.5f} ({rel.calibration}); peak RSS {peak_rss_gib():.2f} GiB")
    c1 = paper.bayesian_not_dp(m, alpha, epsilon=args.epsilon, delta=args.delta, S=args.S, rho=args.rho, C=args.C, sensitivity="claim1", rng=rng)
    print(f"Claim 1 bound for comparison: gamma <= {c1.diagnostics['gamma']:.5f} (sigma {c1.sigma:.5f})")

    # same-run reference: naive O(|V|)-per-user brute force on a sample of users, extrapolated
    mc = clamp_counts(m, args.C)
    sample = np.sort(rng.choice(args.users, size=min(args.reference_users, args.users), replace=False))
    t0 = time.perf_counter()
    naive = naive_per_user(mc, sample, args.S, args.C)
    t_naive = (time.perf_counter() - t0) / sample.size
    fast = per_user_sensitivity(mc[sample], args.S, args.C, stats=log_count_stats(mc))  # rows + global stats
    assert np.allclose(fast, naive, rtol=1e-8, atol=1e-12), float(np.max(np.abs(fast - naive)))
    est = t_naive * args.users
    print(f"reference naive brute force: {t_naive * 1e3:.2f} ms/user -> {est / 3600:.1f} h for all users (extrapolated); "
          f"exact O(nnz) release is {est / t_rel:,.0f}x faster; per-user values agree on {sample.size} users")
    print(f"peak RSS overall: {peak_rss_gib():.2f} GiB")


if __name__ == "__main__":
    main()
