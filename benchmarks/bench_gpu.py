"""The torch backend on an accelerator: words/s per mechanism, against the GEMM bound and the
numpy CPU path measured in the same run, exactness of the precisions, the end-to-end text path,
and a 1M-word vocabulary.

Reports, all measured in this run on this machine:

* the device, its measured matrix-product throughput (fp32 / tf32 / bf16 / fp16) at the
  search's shape, and the bound it sets: FLOP/s ÷ (2·V·d) words/s (BRR: ÷ (2·V·n_bits));
* ``sample_ids`` words/s of Madlib, Mahalanobis, TEM and BRR with ``backend="torch"`` (numpy ids
  in, numpy ids out; and device-resident tensors), ε, the fraction of the GEMM bound, peak device
  memory, and the numpy backend on this machine's CPU on the same ids;
* exactness: the fp32 search against a float64 reference, and for tf32/bf16 with and without
  the float64 re-rank: disagreements with the exact result and speed;
* the text path on real text (Project Gutenberg, the NLTK copy in ``shared/data``): serial
  ``privatize_texts`` and :class:`deniable.backends.text.ParallelPrivatizer`, words/s and the
  ratio to the id path (target ≥ 30 %);
* a random 1M-word × 300 vocabulary for Madlib and BRR: words/s and peak memory.

Targets: Madlib ≥ 10⁶ words/s at the bundled 34K vocabulary and ≥ 30 % of the fp32 GEMM bound;
BRR ≥ 3× Madlib; the 1M vocabulary runs; text path ≥ 30 % of the id path.

Usage: PYTHONPATH=src python benchmarks/bench_gpu.py [--device cuda] [--tokens 1048576]
       [--text PATH.zip|PATH.txt] [--workers N] [--json OUT.json] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

import deniable
from deniable.backends.text import ParallelPrivatizer
from deniable.backends.torch_backend import TorchEuclideanIndex, torch_generator
from deniable.text import privatize_texts
from deniable.text.tokenize import lookup_key, words_of

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("bench_gpu.py needs torch: pip install 'deniable[torch]'")

ROWS: list[dict] = []
print = functools.partial(print, flush=True)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs (after the caller's warm-up), device synchronized."""
    best = float("inf")
    for _ in range(repeat):
        sync(device)
        t = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t)
    return best


def peak_reset(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def peak_gib(device: str) -> float:
    """Peak device memory since the last reset (CUDA); on the CPU the process's peak RSS."""
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def gemm_flops(m: int, k: int, n: int, dtype, device: str, precision: str = "highest") -> float:
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        a = [torch.randn(m, k, device=device).to(dtype) for _ in range(3)]
        b = torch.randn(n, k, device=device).to(dtype)
        for x in a:
            x @ b.T
        t = timed(lambda: [x @ b.T for x in a], device, repeat=5 if device.startswith("cuda") else 2)
    finally:
        torch.set_float32_matmul_precision(old)
    return 3 * 2.0 * m * k * n / t


def load_text(path: str | None, limit_lines: int) -> list[str]:
    candidates = [path] if path else [".gpu-data/gutenberg.zip", "../shared/data/corpora/gutenberg.zip", "examples/sample.txt"]
    for p in candidates:
        if p and Path(p).exists():
            if p.endswith(".zip"):
                z = zipfile.ZipFile(p)
                lines: list[str] = []
                for n in sorted(z.namelist()):
                    if n.endswith(".txt"):
                        lines += z.read(n).decode("latin-1").splitlines()
            else:
                lines = Path(p).read_text(encoding="utf-8").splitlines()
            lines = [ln for ln in lines if ln.strip()]
            print(f"text: {p}: {len(lines):,} non-empty lines")
            return lines[:limit_lines]
    raise SystemExit("no text found; pass --text")


def row(**kw) -> None:
    ROWS.append(kw)
    print("  " + ", ".join(f"{k}={v:,.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items()), flush=True)


class _Identity:
    """Stand-in mechanism returning each input id (UNK as id 0): isolates the text work."""

    def __init__(self, vocabulary) -> None:
        self.vocabulary = vocabulary

    def sample_ids(self, ids, rng=None):
        return np.maximum(np.asarray(ids, dtype=np.int64), 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tokens", type=int, default=1 << 20)
    ap.add_argument("--cpu-tokens", type=int, default=16384)
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--brr-epsilon", type=float, default=1.0)
    ap.add_argument("--text", default=None)
    ap.add_argument("--text-lines", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--precision-queries", type=int, default=1 << 18)
    ap.add_argument("--big-vocab", type=int, default=1_000_000)
    ap.add_argument("--big-tokens", type=int, default=1 << 17)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test on CPU torch)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 avoids OpenMP spinning on a loaded machine)")
    args = ap.parse_args()
    dev = args.device
    if args.threads:
        torch.set_num_threads(args.threads)
    emb = deniable.load_embedding()
    brr_src = emb  # the bundled embedding maps to the bundled 256-bit codes
    if args.quick:
        from deniable.binary import BinaryEmbedding, load_default_binary_embedding

        args.tokens, args.cpu_tokens, args.text_lines, args.big_vocab = 2048, 512, 2000, 5000
        emb = emb.restrict(top_n=2000)
        full = load_default_binary_embedding()
        brr_src = BinaryEmbedding(full.words[:2000], full.codes[:2000], n_bits=full.n_bits)
    V, d = len(emb), emb.dim
    name = torch.cuda.get_device_name() if dev.startswith("cuda") else "CPU (torch)"
    print(f"device: {name}; torch {torch.__version__}; CPU cores: {os.cpu_count()}; embedding {V} x {d}; tokens {args.tokens:,}")

    # -- GEMM throughput at the search's shape --------------------------------------------------
    qb = 256 if args.quick else (8192 if dev.startswith("cuda") else 1024)
    flops = {
        "fp32": gemm_flops(qb, d, V, torch.float32, dev, "highest"),
        "tf32": gemm_flops(qb, d, V, torch.float32, dev, "high"),
        "bf16": gemm_flops(qb, d, V, torch.bfloat16, dev) if dev.startswith("cuda") else float("nan"),
        "fp16_brr": gemm_flops(qb, 256, V, torch.float16 if dev.startswith("cuda") else torch.float32, dev),
    }
    bound = flops["fp32"] / (2.0 * V * d)
    bound_brr = flops["fp16_brr"] / (2.0 * V * 256)
    print("GEMM GFLOP/s: " + ", ".join(f"{k} {v / 1e9:,.1f}" for k, v in flops.items()))
    print(f"bounds: Madlib (fp32) {bound:,.0f} words/s; BRR (fp16, 256 bits) {bound_brr:,.0f} words/s")

    # -- ids from real text ---------------------------------------------------------------------
    lines = load_text(args.text, args.text_lines)
    words = [w for ln in lines[:60000] for w in words_of(ln)]
    ids_all = emb.ids_of([lookup_key(w, lower=emb.uncased) for w in words])
    reps = -(-args.tokens // ids_all.size)
    ids = np.tile(ids_all, reps)[: args.tokens]
    print(f"ids: {ids.size:,} tokens from the text ({(ids < 0).mean():.1%} UNK)")

    # -- id path per mechanism ------------------------------------------------------------------
    print("\n[id path]")
    specs = [
        ("madlib", {}, args.epsilon),
        ("mahalanobis", {"lam": 0.5}, args.epsilon),
        ("vickrey", {}, args.epsilon),
        ("tem", {}, args.epsilon),
        ("brr", {}, args.brr_epsilon),
    ]
    id_wps: dict[str, float] = {}
    mechs = {}
    for mname, params, eps in specs:
        src = brr_src if mname == "brr" else emb
        cpu = deniable.get_mechanism(mname, src, epsilon=eps, **params)
        t0 = time.perf_counter()
        if hasattr(cpu, "precompute"):
            cpu.precompute()
        pre = time.perf_counter() - t0
        cids = ids[: args.cpu_tokens]
        cpu.sample_ids(cids[:512], rng=0)
        cpu_wps = cids.size / timed(lambda: cpu.sample_ids(cids, rng=1), "cpu", repeat=2)
        peak_reset(dev)
        mech = deniable.get_mechanism(mname, src, epsilon=eps, backend="torch", device=dev, **params)
        mechs[mname] = mech
        mech.sample_ids(ids[:65536], rng=0)  # warm-up (and TEM's device tables)
        t = timed(lambda: mech.sample_ids(ids, rng=2), dev)
        wps = ids.size / t
        tid = torch.from_numpy(ids).to(dev)
        g = torch_generator(3, dev)
        t_dev = timed(lambda: mech.sample_ids_tensor(tid, g), dev)
        id_wps[mname] = wps
        frac = wps / (bound_brr if mname == "brr" else bound) if mname != "tem" else float("nan")
        extra = {}
        stats = getattr(getattr(mech, "index", None), "stats", None)
        if stats and stats.get("queries"):
            extra["reranked"] = stats["reranked"] / stats["queries"]
        row(
            path="id",
            mechanism=mname,
            epsilon=eps,
            words_per_s=wps,
            device_resident_words_per_s=ids.size / t_dev,
            gemm_bound_fraction=frac,
            cpu_numpy_words_per_s=cpu_wps,
            speedup_vs_cpu=wps / cpu_wps,
            peak_gib=peak_gib(dev),
            cpu_precompute_s=pre,
            **extra,
        )

    # -- precisions: exactness and speed ------------------------------------------------------------
    print("\n[precision]")
    madlib = mechs["madlib"]
    g = torch_generator(5, dev)
    tid = torch.from_numpy(ids[: min(ids.size, args.precision_queries)]).to(dev)
    Q = madlib.points_tensor(tid) + madlib.sample_noise_tensor(tid.shape[0], g)
    exact = madlib.index.search_tensor(Q)
    sub = Q[: min(2048, Q.shape[0])].double()
    E64 = madlib.index.vectors.double()
    ref = torch.cdist(sub, E64, compute_mode="donot_use_mm_for_euclid_dist").argmin(dim=1)
    row(path="precision", check=f"fp32 exact vs float64 cdist ({sub.shape[0]} queries)", mismatches=int((exact[: sub.shape[0]] != ref).sum()))
    for precision in ("fp32", "tf32", "bf16"):
        for ex in (True, False):
            idx = TorchEuclideanIndex(emb.vectors, device=dev, precision=precision, exact=ex)
            idx.search_tensor(Q[:1024])
            idx.stats = {"queries": 0, "reranked": 0}
            t = timed(lambda: idx.search_tensor(Q), dev, repeat=2)  # noqa: F821 (ruff misreads the del below)
            got = idx.search_tensor(Q)
            row(
                path="precision",
                precision=precision,
                exact=ex,
                search_words_per_s=Q.shape[0] / t,
                mismatch_rate=float((got != exact).double().mean()),
                reranked=idx.stats["reranked"] / max(1, idx.stats["queries"]),
            )
            del idx

    # -- text path ---------------------------------------------------------------------------------
    print("\n[text path]")
    workers = args.workers if args.workers is not None else max(1, (os.cpu_count() or 2) - 1)
    n_words = sum(len(words_of(ln)) for ln in lines)
    batch = 20000
    batches = [lines[s : s + batch] for s in range(0, len(lines), batch)]
    for mname in ("madlib", "brr"):
        mech = mechs[mname]
        t = time.perf_counter()
        for b in batches:
            privatize_texts(mech, b, rng=1)
        serial = n_words / (time.perf_counter() - t)
        with ParallelPrivatizer(mech, workers=workers) as pp:
            pp.privatize_texts(batches[0], rng=0)  # start the workers
            sync(dev)
            t = time.perf_counter()
            for b in batches:
                pp.privatize_texts(b, rng=1)
            par = n_words / (time.perf_counter() - t)
        row(path="text", mechanism=mname, words=n_words, serial_words_per_s=serial, parallel_words_per_s=par, workers=workers,
            parallel_over_id_path=par / id_wps[mname], serial_over_id_path=serial / id_wps[mname])
    # the text work alone: a stand-in mechanism that samples nothing (output = input id)
    ident = _Identity(emb)
    t = time.perf_counter()
    for b in batches:
        privatize_texts(ident, b, rng=1)
    serial = n_words / (time.perf_counter() - t)
    with ParallelPrivatizer(ident, workers=workers) as pp:
        pp.privatize_texts(batches[0], rng=0)
        t = time.perf_counter()
        for b in batches:
            pp.privatize_texts(b, rng=1)
        par = n_words / (time.perf_counter() - t)
    row(path="text", mechanism="none (text work only)", words=n_words, serial_words_per_s=serial, parallel_words_per_s=par, workers=workers,
        us_per_word_serial=1e6 / serial)
    cpu = deniable.get_mechanism("madlib", emb, epsilon=args.epsilon)
    few = lines[:5000]
    nw = sum(len(words_of(ln)) for ln in few)
    t = time.perf_counter()
    privatize_texts(cpu, few, rng=1)
    row(path="text", mechanism="madlib (numpy CPU)", words=nw, serial_words_per_s=nw / (time.perf_counter() - t))

    # -- a 1M-word vocabulary ------------------------------------------------------------------------
    print("\n[large vocabulary]")
    del mechs, madlib, Q, exact, E64
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()
    Vb = args.big_vocab
    rng = np.random.default_rng(0)
    big_words = [f"w{i}" for i in range(Vb)]
    vecs = rng.standard_normal((Vb, d), dtype=np.float32)
    big = deniable.Embedding(big_words, vecs)
    del vecs
    bids = rng.integers(0, Vb, size=args.big_tokens)
    peak_reset(dev)
    m = deniable.get_mechanism("madlib", big, epsilon=args.epsilon, backend="torch", device=dev)
    m.sample_ids(bids[:4096], rng=0)
    t = timed(lambda: m.sample_ids(bids, rng=1), dev, repeat=2)
    bbound = flops["fp32"] / (2.0 * Vb * d)
    row(path="big", mechanism="madlib", vocabulary=Vb, words_per_s=bids.size / t, gemm_bound_fraction=bids.size / t / bbound, peak_gib=peak_gib(dev),
        reranked=m.index.stats["reranked"] / max(1, m.index.stats["queries"]))
    del m, big
    from deniable.binary import BinaryEmbedding

    bits = rng.random((Vb, 256)) < 0.5
    be = BinaryEmbedding.from_bits(big_words, bits)
    del bits
    peak_reset(dev)
    m = deniable.get_mechanism("brr", be, epsilon=args.brr_epsilon, backend="torch", device=dev)
    m.sample_ids(bids[:4096], rng=0)
    t = timed(lambda: m.sample_ids(bids, rng=1), dev, repeat=2)
    row(path="big", mechanism="brr", vocabulary=Vb, words_per_s=bids.size / t, gemm_bound_fraction=bids.size / t / (flops["fp16_brr"] / (2.0 * Vb * 256)),
        peak_gib=peak_gib(dev))

    # -- summary ---------------------------------------------------------------------------------------
    mad = id_wps["madlib"]
    print("\n[targets]")
    print(f"  madlib >= 1e6 words/s: {mad:,.0f} {'PASS' if mad >= 1e6 else 'FAIL'}")
    print(f"  madlib >= 30% of fp32 GEMM bound: {mad / bound:.1%} {'PASS' if mad / bound >= 0.3 else 'FAIL'}")
    print(f"  brr >= 3x madlib: {id_wps['brr'] / mad:.1f}x {'PASS' if id_wps['brr'] >= 3 * mad else 'FAIL'}")
    tx = next(r for r in ROWS if r.get("path") == "text" and r["mechanism"] == "madlib")
    print(f"  text path >= 30% of id path (madlib): {tx['parallel_over_id_path']:.1%} {'PASS' if tx['parallel_over_id_path'] >= 0.3 else 'FAIL'}")
    if args.json:
        meta = {"device": name, "torch": torch.__version__, "cpu_cores": os.cpu_count(), "gemm_flops": flops, "bound_madlib": bound, "bound_brr": bound_brr}
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": ROWS}, indent=1, default=float))


if __name__ == "__main__":
    main()
