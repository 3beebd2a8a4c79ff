"""Bounded loopback load test of ``deniable serve``.

Starts ``deniable serve`` as a subprocess on 127.0.0.1 (a free port), waits for /healthz, warms
the mechanism, then sends ``--requests`` POST /v1/privatize calls (default 2,000) with at most
``--concurrency`` in flight (default 16), stopping early at ``--max-seconds``. Prints p50/p90/p99
latency, requests/s, words/s, the error count, and as reference the words/s of the same texts
privatized in-process by the library (one call per text, measured in the same run), so the ratio
shows the HTTP overhead. Traffic goes to the loopback address only; the server is stopped at the
end. The load generator shares the machine's cores with the server.

Usage: python benchmarks/bench_service.py [--requests 2000] [--concurrency 16] [--mechanism madlib] [--epsilon 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

import numpy as np
from bench_service_soak import wait_healthy

TEXTS = [
    "Meet me at the station tomorrow at noon, I will bring the documents.",
    "My doctor said the results from the hospital should arrive next week.",
    "Please call my sister before the train leaves for the city.",
    "We walked along the river and talked about money and the new house.",
    "The meeting with the bank was moved to Friday afternoon.",
    "She sent the letter to her friend in Paris last summer.",
    "Our flight was delayed, so we stayed in a small hotel near the airport.",
    "He paid for the car with cash and drove home through the rain.",
]
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


async def load(url: str, n: int, concurrency: int, body_of, max_seconds: float) -> tuple[list[float], int, float, list[str]]:
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    next_i = 0
    start = time.perf_counter()
    deadline = start + max_seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:

        async def worker() -> None:
            nonlocal next_i
            while next_i < n and time.perf_counter() < deadline:
                i = next_i
                next_i += 1
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/privatize", json=body_of(i))
                    ok = r.status_code == 200
                    if not ok:
                        errors.append(f"{r.status_code}: {r.text[:200]}")
                except httpx.HTTPError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, next_i, time.perf_counter() - start, errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16)
    from deniable import available_mechanisms

    ap.add_argument("--mechanism", default="madlib", choices=available_mechanisms(), help="any registered mechanism (default madlib)")
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--texts-per-request", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=300.0, help="stop sending after this long")
    args = ap.parse_args()
    if not (1 <= args.requests <= 100_000 and 1 <= args.concurrency <= 256):
        ap.error("--requests must be in [1, 100000] and --concurrency in [1, 256]")

    from deniable.service.pool import MechanismPool, privatize_detailed
    from deniable.text.tokenize import words_of

    k = args.texts_per_request

    def texts_of(i: int) -> list[str]:
        return [TEXTS[(i + j) % len(TEXTS)] for j in range(k)]

    def body_of(i: int) -> dict:
        return {"texts": texts_of(i), "mechanism": args.mechanism, "epsilon": args.epsilon}

    # reference: the library in this process, one call per request's texts
    pool = MechanismPool(mechanisms=(args.mechanism,))
    mech = pool.get(args.mechanism, {}, epsilon=args.epsilon)
    privatize_detailed(mech, texts_of(0))
    ref_n = min(args.requests, 400)
    t0 = time.perf_counter()
    ref_words = 0
    for i in range(ref_n):
        ref_words += privatize_detailed(mech, texts_of(i))["words"]
    ref_s = time.perf_counter() - t0
    ref_wps = ref_words / ref_s
    del pool, mech

    port = free_port()
    url = f"http://{HOST}:{port}"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "deniable.cli.main", "serve", "--host", HOST, "--port", str(port), "-m", args.mechanism, "--log-level", "warning", "--no-page"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.perf_counter()
        wait_healthy(url, proc)
        startup = time.perf_counter() - t0
        import httpx

        warm = httpx.post(url + "/v1/privatize", json={**body_of(0), "include": ["summary"]}, timeout=120.0)  # builds the mechanism
        if warm.status_code != 200:
            raise RuntimeError(f"warm-up request failed: {warm.status_code} {warm.text[:300]}")
        words_per_request = float(np.mean([warm.json()["summary"]["words"]]))
        lat, sent, wall, errors = asyncio.run(load(url, args.requests, args.concurrency, body_of, args.max_seconds))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    ms = np.asarray(lat) * 1000.0
    done = len(lat)
    words = sum(len(words_of(" ".join(texts_of(i)))) for i in range(done))
    print(f"deniable serve load test: {args.mechanism} epsilon={args.epsilon:g}, {k} text(s) (~{words_per_request:.0f} words) per request, loopback {HOST}")
    print(f"  server startup to healthy: {startup:.1f} s")
    print(f"  requests: {sent} sent, {done} ok, {len(errors)} errors, concurrency {args.concurrency}, {wall:.1f} s")
    if done:
        print(f"  latency ms: p50 {np.percentile(ms, 50):.1f}  p90 {np.percentile(ms, 90):.1f}  p99 {np.percentile(ms, 99):.1f}  max {ms.max():.1f}")
        print(f"  throughput: {done / wall:.1f} requests/s, {words / wall:,.0f} words/s")
        print(f"  reference (library in-process, one call per request, sequential): {ref_wps:,.0f} words/s; service/reference = {words / wall / ref_wps:.2f}")
    for e in errors[:5]:
        print(f"  error: {e}")
    return 0 if not errors and sent == args.requests else 1


if __name__ == "__main__":
    sys.exit(main())
