"""Scale benchmark: the four seed mechanisms on large synthetic vocabularies.

For each vocabulary size V (default 34K and 200K; ``--full`` adds 1M) and each of Madlib,
Mahalanobis, TEM and BRR, a fresh subprocess (so peak RSS does not mix between configurations)
generates a seeded synthetic vocabulary (V × 300 float32, standard normal; BRR: random 256-bit
codes), builds the mechanism and reports:

* build time and peak RSS after building (``resource.getrusage`` high-water mark), also as a
  multiple of the float32 vectors and against the issue's target 1.5 × vectors + 0.5 GB;
* words/s of ``sample_ids`` and its fraction of the GEMM bound measured in the same process:
  words/s of a float32 matmul of a query batch against the whole vocabulary (what the exact
  1-NN scan costs at least);
* TEM: the ε-independent neighbour-table precompute (k = 128). Up to ``--tem-full-max`` words
  the table is built and sampling measured; above, the rate is measured on a slice of rows
  and the ETA of the full build printed (sampling then is not measured).

The machine is shared: the load average (``uptime``) is printed with the table; compare ratios,
not absolute numbers, across runs.

With ``--tem-resume SECONDS`` the real whole-table build above ``--tem-full-max`` is started,
killed with SIGKILL after SECONDS, and started again twice: each run must resume from the last
checkpoint (the rows it reports only grow), which gives the build rate and the ETA of the whole
table from a run that was itself interrupted.

Usage: python benchmarks/bench_scale.py [--sizes 34000,200000] [--full] [--mechanisms ...] [--tem-resume 120] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DIM = 300
N_BITS = 256
TEM_K = 128


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB


def _status_gb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e9
    return float("nan")


def _rss_now_gb() -> float:
    return _status_gb("VmRSS")


def _reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux ≥ 4.0), so the next
    reading is the peak of one phase, not of the data generation before it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _gemm_bound(vectors: np.ndarray, n_queries: int, rng: np.random.Generator, repeat: int = 3) -> float:
    """Words/s of a float32 matmul of ``n_queries`` queries against every vocabulary vector, in
    the same 64 MiB score blocks the exact index uses."""
    V, d = vectors.shape
    q = rng.standard_normal((min(n_queries, 256), d), dtype=np.float32)
    vb = max(1, min(V, (64 << 20) // (4 * q.shape[0])))
    buf = np.empty(q.shape[0] * vb, dtype=np.float32)
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        for v0 in range(0, V, vb):
            w = min(vb, V - v0)
            np.matmul(q, vectors[v0 : v0 + w].T, out=buf[: q.shape[0] * w].reshape(q.shape[0], w))
        best = min(best, time.perf_counter() - t)
    return q.shape[0] / best


def _one(mech: str, V: int, n_words: int, tem_full_max: int, tem_slice: int) -> dict:
    """Runs in a fresh process: one mechanism at one vocabulary size."""
    import deniable

    rng = np.random.default_rng(V)
    words = [f"w{i}" for i in range(V)]
    res: dict = {"mechanism": mech, "V": V, "dim": DIM, "vectors_gb": V * DIM * 4 / 1e9}
    if mech == "brr":
        # the real path: a V x 300 float32 embedding binarized (ITQ, the default) to 256-bit codes
        vec = rng.standard_normal((V, DIM), dtype=np.float32)
        emb = deniable.Embedding(words, vec)
        del vec
        res["rss_vectors_gb"] = _rss_now_gb()
        _reset_peak()
        t = time.perf_counter()
        from deniable.binary import binarize

        data = binarize(emb, n_bits=N_BITS)
        res["binarize_s"] = time.perf_counter() - t
        res["rss_binarize_peak_gb"] = _status_gb("VmHWM")
        del emb
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            res["bundle_mb"] = data.save(os.path.join(tmp, "brr.bin")).stat().st_size / 1e6
        res["codes_gb"] = V * N_BITS / 8 / 1e9
    else:
        vec = rng.standard_normal((V, DIM), dtype=np.float32)
        data = deniable.Embedding(words, vec)
        del vec
    res["rss_data_gb"] = _rss_now_gb()
    _reset_peak()
    t = time.perf_counter()
    if mech == "madlib":
        m = deniable.Madlib(data, epsilon=10.0)
    elif mech == "mahalanobis":
        m = deniable.Mahalanobis(data, epsilon=10.0, lam=0.5)
    elif mech == "tem":
        m = deniable.TEM(data, epsilon=10.0, precomputed_neighbors=TEM_K, cache_dir=False)  # storage "auto": compact above 62K words
        res["tem_storage"] = m.storage
    elif mech == "brr":
        m = deniable.BRR(data, epsilon=10.0)
    else:
        raise ValueError(mech)
    res["build_s"] = time.perf_counter() - t
    sample_rows = V
    if mech == "tem":
        from deniable.neighbors.neighborhoods import KnnIds, build_knn_ids, knn_neighborhoods

        vectors = data.vectors
        if tem_full_max >= V:
            t = time.perf_counter()
            m.precompute()
            res["precompute_s"] = time.perf_counter() - t
            res["precompute_rows_per_s"] = (V + 1) / res["precompute_s"]
            res["precompute_eta_s"] = None
        else:
            rows = min(tem_slice, V)
            t = time.perf_counter()
            if m.storage == "compact":
                part = build_knn_ids(vectors[:rows], vectors, TEM_K)
            else:
                part = knn_neighborhoods(vectors[:rows], vectors, TEM_K)
            dt = time.perf_counter() - t
            res["precompute_rows_per_s"] = rows / dt
            res["precompute_s"] = None
            res["precompute_eta_s"] = (V + 1) / res["precompute_rows_per_s"]
            res["precompute_slice_rows"] = rows
            if m.storage == "compact":
                # Sampling cost does not depend on which rows a table holds: a compact table
                # whose first `rows` rows are the real ones just computed (the rest zero pages,
                # never touched) lets the tokens below, drawn from those rows, be sampled exactly.
                ids_all = np.zeros((V + 1, TEM_K), dtype=np.int32)
                bound_all = np.zeros(V + 1)
                ids_all[:rows] = part.ids
                bound_all[:rows] = part.bound
                m._nb = KnnIds(ids=ids_all, bound=bound_all, param=float(TEM_K), metric="euclidean", n_vocab=V)
                sample_rows = rows
                res["sampled_from_slice_rows"] = rows
    res["rss_build_gb"] = _status_gb("VmHWM")  # peak while building (data included)
    res["rss_held_gb"] = _rss_now_gb()
    _reset_peak()
    ids = rng.integers(0, sample_rows, n_words)
    # Three rounds, each timing the mechanism and then the GEMM bound; the best of each is kept,
    # so a load spike on this shared machine does not land on one side of the ratio only.
    res["words_per_s"] = None
    res["gemm_bound_words_per_s"] = None
    rounds = 3
    if mech != "tem" or tem_full_max >= V or sample_rows < V:
        m.sample_ids(ids[: min(256, n_words)], rng=1)  # warm-up (and TEM's lazy tables)
        best = 0.0
        for i in range(rounds):
            t = time.perf_counter()
            m.sample_ids(ids, rng=2 + i)
            best = max(best, n_words / (time.perf_counter() - t))
            if mech != "brr":
                res["gemm_bound_words_per_s"] = max(res["gemm_bound_words_per_s"] or 0.0, _gemm_bound(data.vectors, n_words, rng, repeat=1))
        res["words_per_s"] = best
    res["rss_sample_gb"] = _status_gb("VmHWM")
    res["rss_process_peak_gb"] = _peak_gb()
    if mech != "brr":
        res["gemm_bound_words_per_s"] = max(res["gemm_bound_words_per_s"] or 0.0, _gemm_bound(data.vectors, n_words, rng))
    else:
        # exact Hamming scan: code bytes read per second, against a plain read of the codes
        codes = data.codes
        dst = np.empty_like(codes)
        best = np.inf
        for _ in range(5):
            t = time.perf_counter()
            np.copyto(dst, codes)
            best = min(best, time.perf_counter() - t)
        res["read_gb_per_s"] = codes.nbytes / best / 1e9  # memcpy: the codes read (and written) once
        del dst
        res["scan_gb_per_s"] = res["words_per_s"] * codes.nbytes / 1e9
    return res


def _build_tem_child(V: int, directory: str) -> None:
    """Child of ``--tem-resume``: the real resumable build of TEM's whole compact table for the
    synthetic V-word vocabulary, cached in ``directory`` (killed by the parent)."""
    import deniable

    rng = np.random.default_rng(V)
    data = deniable.Embedding([f"w{i}" for i in range(V)], rng.standard_normal((V, DIM), dtype=np.float32))
    m = deniable.TEM(data, epsilon=10.0, precomputed_neighbors=TEM_K, cache_dir=directory, storage="compact")
    print(f"start {time.time()}", flush=True)
    m.precompute(progress=None)  # None: the "resuming ... at row N" note, no bar (stderr is a pipe)


def _tem_resume(V: int, seconds: float, runs: int) -> dict:
    """Start the whole-table build, SIGKILL it after ``seconds`` of building, start it again, …:
    each run must continue from the previous run's checkpoint. Returns rows done after each run,
    the build rate of each run and the ETA of the whole table."""
    import signal
    import tempfile

    out: dict = {"V": V, "kill_after_s": seconds, "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-tem-resume-") as tmp:
        done_file = None
        prev = 0
        for _ in range(runs):
            p = subprocess.Popen(
                [sys.executable, __file__, "--build-tem", str(V), tmp], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            line = p.stdout.readline() if p.stdout else ""
            t0 = float(line.split()[1]) if line.startswith("start") else time.time()
            time.sleep(max(0.0, t0 + seconds - time.time()))
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    hwm = next((int(x.split()[1]) * 1024 / 1e9 for x in f if x.startswith("VmHWM:")), float("nan"))
            except OSError:
                hwm = float("nan")
            p.send_signal(signal.SIGKILL)
            _, err = p.communicate()
            t1 = time.time()
            if done_file is None:
                parts = [d for d in os.listdir(tmp) if d.endswith(".partial")]
                done_file = os.path.join(tmp, parts[0], "done") if parts else None
            done = int(Path(done_file).read_text()) if done_file and os.path.exists(done_file) else 0
            resumed_at = None
            for ln in err.splitlines():
                if "resuming the k-nearest table" in ln:
                    resumed_at = int(ln.split("at row ")[1].split()[0])
            out["runs"].append(
                {"rows_done": done, "resumed_at_row": resumed_at, "rows_per_s": (done - prev) / (t1 - t0), "peak_rss_gb": hwm}
            )
            prev = done
    rate = out["runs"][-1]["rows_per_s"]
    out["eta_s"] = (V + 1) / rate if rate > 0 else None
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _table(rows: list[dict]) -> str:
    head = (
        "| mechanism | V | vectors GB | RSS data GB | build s | peak RSS build GB | RSS held GB | peak ÷ vectors | target GB | words/s | GEMM bound words/s | "
        "fraction | TEM precompute rows/s | TEM precompute (ETA) s | peak RSS sampling GB |"
    )
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['mechanism']} | {r['V']:,} | error: {r['error']} |")
            continue
        base = r.get("codes_gb", r["vectors_gb"])
        target = 1.5 * base + 0.5
        # Madlib/Mahalanobis: sampling against the bound; TEM: the all-pairs precompute (rows/s)
        speed = r.get("precompute_rows_per_s") if r["mechanism"] == "tem" else r["words_per_s"]
        frac = speed / r["gemm_bound_words_per_s"] if speed and r["gemm_bound_words_per_s"] else None
        pre = r.get("precompute_s")
        eta = r.get("precompute_eta_s")
        pre_txt = _fmt(pre, ".1f") if pre is not None else (f"({eta:,.0f})" if eta is not None else "—")
        out.append(
            f"| {r['mechanism']} | {r['V']:,} | {base:.3f} | {r['rss_data_gb']:.2f} | {r['build_s']:.2f} | {r['rss_build_gb']:.2f} | {r.get('rss_held_gb', float('nan')):.2f} | "
            f"{r['rss_build_gb'] / base:.1f} | {target:.2f} | {_fmt(r['words_per_s'], ',.0f')} | "
            f"{_fmt(r['gemm_bound_words_per_s'], ',.0f')} | {_fmt(frac, '.2f')} | "
            f"{_fmt(r.get('precompute_rows_per_s'), ',.0f')} | {pre_txt} | {r['rss_sample_gb']:.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="34000,200000", help="comma-separated vocabulary sizes")
    ap.add_argument("--full", action="store_true", help="add V = 1,000,000")
    ap.add_argument("--mechanisms", default="madlib,mahalanobis,tem,brr")
    ap.add_argument("--words", type=int, default=0, help="tokens sampled per configuration (default: scaled to V)")
    ap.add_argument("--tem-full-max", type=int, default=50_000, help="build TEM's whole table up to this V")
    ap.add_argument("--tem-slice", type=int, default=2000, help="rows timed for the TEM precompute rate above it")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    ap.add_argument(
        "--tem-resume",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="for sizes above --tem-full-max: build TEM's whole compact table, SIGKILL it after SECONDS, "
        "run it again (twice), and report the rows each run added and the ETA",
    )
    ap.add_argument("--one", nargs=2, metavar=("MECH", "V"), help=argparse.SUPPRESS)
    ap.add_argument("--build-tem", nargs=2, metavar=("V", "DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.build_tem:
        _build_tem_child(int(a.build_tem[0]), a.build_tem[1])
        return
    if a.one:
        V = int(a.one[1])
        n = a.words or int(np.clip(200_000_000 // V, 1000, 8192))
        print(json.dumps(_one(a.one[0], V, n, a.tem_full_max, a.tem_slice)))
        return
    sizes = [int(s) for s in a.sizes.split(",") if s]
    if a.full and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    rows = []
    for V in sizes:
        for mech in a.mechanisms.split(","):
            cmd = [sys.executable, __file__, "--one", mech, str(V), "--words", str(a.words), "--tem-full-max", str(a.tem_full_max), "--tem-slice", str(a.tem_slice)]
            p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if p.returncode != 0:
                rows.append({"mechanism": mech, "V": V, "error": (p.stderr.strip().splitlines() or ["?"])[-1]})
            else:
                rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            if not a.json:
                print(_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    resumes = []
    if a.tem_resume > 0:
        for V in sizes:
            if a.tem_full_max < V:
                resumes.append(_tem_resume(V, a.tem_resume, 3))
                if not a.json:
                    print(json.dumps(resumes[-1]), file=sys.stderr, flush=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    if a.json:
        print(json.dumps({"uptime": load, "cpus": os.cpu_count(), "results": rows, "tem_resume": resumes}, indent=1))
    else:
        print(f"machine: {os.cpu_count()} CPUs; uptime: {load}")
        print(_table(rows))
        for r in rows:
            if r.get("mechanism") == "brr" and "binarize_s" in r:
                vec_gb = r["V"] * DIM * 4 / 1e9
                print(
                    f"\nBRR at V = {r['V']:,}: ITQ binarize of the {vec_gb:.2f} GB float32 vectors {r['binarize_s']:.1f} s, "
                    f"peak RSS {r['rss_binarize_peak_gb']:.2f} GB (target 1.5 x vectors + 0.5 = {1.5 * vec_gb + 0.5:.2f} GB); "
                    f"bundle {r['bundle_mb']:.1f} MB; exact Hamming search {r['words_per_s']:,.0f} words/s = "
                    f"{r['scan_gb_per_s']:.1f} GB/s of codes per query (memcpy of the codes: {r['read_gb_per_s']:.1f} GB/s; the search reads each block of codes once for a batch of queries)"
                )
        for r in resumes:
            print(f"\nTEM whole-table build at V = {r['V']:,}, killed (SIGKILL) every {r['kill_after_s']:g} s and restarted:")
            for i, run in enumerate(r["runs"], 1):
                print(
                    f"  run {i}: resumed at row {run['resumed_at_row'] if run['resumed_at_row'] is not None else 0:,}, "
                    f"rows done {run['rows_done']:,}, {run['rows_per_s']:,.0f} rows/s, peak RSS {run['peak_rss_gb']:.2f} GB"
                )
            if r["eta_s"]:
                print(f"  ETA of the whole table at the last run's rate: {r['eta_s'] / 3600:.1f} h")


if __name__ == "__main__":
    main()
