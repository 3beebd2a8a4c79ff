"""Bounded soak test of ``deniable serve`` on the loopback address.

Starts ``deniable serve`` as a subprocess on 127.0.0.1 (a free port), builds every mechanism it
serves at two ε each, then sends POST /v1/privatize requests with ``concurrency`` in flight: a
warm-up phase (``warmup`` seconds), then the measured phase (``duration`` seconds, default 5
minutes). Requests mix every mechanism the server serves (every registered one the service can
build from a request, as ``GET /v1/mechanisms`` lists them), two ε each, 1 to 6 texts, case
policies, seeds, and the ``include`` options; about ``malformed`` (5 %) of them are malformed on
purpose (broken JSON, bytes that are not UTF-8, an unknown mechanism, a negative ε, wrong types,
an unknown ``include`` value, an unknown field).

Checks, per response:

* no server error (5xx) and no transport error;
* every well-formed request gets 200 with **its own** texts: request ``r`` carries ``r`` in its
  layout, one text per base-8 digit of ``r`` with 3 + digit words, so the number of texts and
  the number of words of each privatized text (layout is preserved; the words are replaced)
  decode back to ``r``; a response belonging to another request decodes to another number.
  Where the request asked for them, ``per_text``, ``summary`` and ``segments`` must agree too
  (``unknown`` = one per text, see below), and fields it did not ask for must be absent;
* each text holds one out-of-vocabulary marker word unique to its request (``zqx<r>q``): no
  marker may appear in any response (OOV words are never copied, and no request sees another's);
* every malformed request gets a 4xx JSON error.

And for the server process: resident memory (RSS, from /proc) at the start of the measured phase
against the end must grow by less than 10 %. Prints one JSON line with the counts, p50/p99
latency of the well-formed requests (in all and per mechanism), requests/s and RSS (start,
halfway, end, highest); exits 1 when a check fails. Loops are
bounded in count (``max_requests``) and time; the server is stopped at the end. Linux only (RSS).

Usage: python benchmarks/bench_service_soak.py [--duration 300] [--concurrency 16] [--warmup 30]
       [--malformed 0.05] [--embedding FILE --bundle FILE] [--words a,b,c]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HOST = "127.0.0.1"
BASE = 8  # digits of the request id, one text each
MIN_WORDS = 3  # words of a text = MIN_WORDS + digit
MARKER = re.compile(r"zqx[0-9]+q", re.IGNORECASE)
INPUT_DEPENDENT = ("summary", "per_text", "segments")
INCLUDES: tuple[tuple[str, ...], ...] = ((), ("summary",), ("segments",), ("summary", "segments"))
MALFORMED_KINDS = ("broken_json", "not_utf8", "unknown_mechanism", "negative_epsilon", "texts_not_a_list", "epsilon_a_string", "unknown_include", "unknown_field")
#: Common English words (all in the bundled embedding's vocabulary; checked at start-up).
WORDS = (
    "the", "of", "and", "to", "in", "for", "on", "with", "at", "by", "from", "about", "into", "over",
    "after", "city", "river", "station", "house", "street", "car", "train", "bus", "road", "park", "market",
    "school", "office", "doctor", "hospital", "family", "friend", "sister", "brother", "mother", "father",
    "child", "people", "money", "bank", "letter", "phone", "meeting", "morning", "evening", "night", "week",
    "month", "year", "summer", "winter", "time", "day", "water", "food", "music", "book", "paper", "story",
    "song", "game", "walk", "run", "call", "send", "meet", "bring", "take", "leave", "arrive", "stay",
    "talk", "write", "read", "play", "work", "help", "open", "close", "start", "finish", "buy", "pay",
    "small", "big", "new", "old", "good", "bad", "long", "short", "early", "late", "quiet", "busy", "warm",
    "cold", "red", "blue", "green", "black", "white",
)
SEPARATORS = (" ", " ", " ", ", ", "; ", " - ", ": ")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int | None:
    """Resident set size of process ``pid`` (Linux /proc), or None where unavailable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# -- the request id in the layout ----------------------------------------------------------------
def layout_of(rid: int) -> list[int]:
    """Words per text of request ``rid``: one text per base-8 digit (least significant first),
    ``MIN_WORDS + digit`` words each. A bijection: :func:`decode_layout` inverts it."""
    if rid < 0:
        raise ValueError(f"request ids are >= 0, got {rid}")
    digits = []
    while True:
        rid, d = divmod(rid, BASE)
        digits.append(d)
        if rid == 0:
            break
    return [MIN_WORDS + d for d in digits]


def decode_layout(counts: Sequence[int]) -> int | None:
    """The request id whose layout is ``counts``, or None when no request has this layout."""
    if not counts or any(not MIN_WORDS <= c < MIN_WORDS + BASE for c in counts):
        return None
    if len(counts) > 1 and counts[-1] == MIN_WORDS:  # a leading zero digit: no request has it
        return None
    return sum((c - MIN_WORDS) * BASE**j for j, c in enumerate(counts))


def marker(rid: int) -> str:
    return f"zqx{rid}q"


@dataclass
class Spec:
    """One request: its id, body (bytes) and what a correct answer looks like."""

    rid: int
    body: bytes
    malformed: str | None = None
    counts: list[int] = field(default_factory=list)
    include: tuple[str, ...] = ()
    mechanism: str = ""
    epsilon: float = 0.0


def make_spec(rid: int, *, seed: int, mechanisms: Sequence[tuple[str, float]], words: Sequence[str], malformed: float, kind: str | None = None) -> Spec:
    """Request ``rid`` (deterministic for a given ``seed``): malformed with probability
    ``malformed``, or always in the way ``kind`` (one of :data:`MALFORMED_KINDS`) names."""
    rng = np.random.default_rng([seed, rid])
    name, eps = mechanisms[int(rng.integers(len(mechanisms)))]
    counts = layout_of(rid)
    texts = []
    for c in counts:
        pos = int(rng.integers(c))  # where the text's out-of-vocabulary marker goes
        ws = [marker(rid) if i == pos else str(words[int(rng.integers(len(words)))]) for i in range(c)]
        if rng.random() < 0.3:
            ws[0] = ws[0].capitalize()
        seps = [SEPARATORS[int(rng.integers(len(SEPARATORS)))] for _ in range(c - 1)]
        texts.append(ws[0] + "".join(s + w for s, w in zip(seps, ws[1:])) + ("." if rng.random() < 0.5 else ""))
    include = INCLUDES[int(rng.integers(len(INCLUDES)))]
    body: dict[str, Any] = {"texts": texts, "mechanism": name, "epsilon": eps, "case": "lower" if rng.random() < 0.2 else "preserve"}
    if include:
        body["include"] = list(include)
    if rng.random() < 0.25:
        body["seed"] = int(rng.integers(2**31))
    spec = Spec(rid, b"", None, counts, include, name, eps)
    if rng.random() < malformed or kind is not None:
        kind = kind or MALFORMED_KINDS[int(rng.integers(len(MALFORMED_KINDS)))]
        spec.malformed = kind
        if kind == "broken_json":
            spec.body = json.dumps(body).encode()[:-7]
            return spec
        if kind == "not_utf8":
            spec.body = b'{"texts": ["caf\xe9 \xff\xfe"], "epsilon": 1.0}'
            return spec
        bad = dict(body)
        if kind == "unknown_mechanism":
            bad["mechanism"] = "laplace"
        elif kind == "negative_epsilon":
            bad["epsilon"] = -abs(eps)
        elif kind == "texts_not_a_list":
            bad["texts"] = len(texts)
        elif kind == "epsilon_a_string":
            bad["epsilon"] = str(eps)
        elif kind == "unknown_include":
            bad["include"] = ["summary", "everything"]
        else:
            bad["request_id"] = rid
        spec.body = json.dumps(bad).encode()
        return spec
    spec.body = json.dumps(body).encode()
    return spec


def check_response(spec: Spec, status: int, text: str) -> list[str]:
    """Problems with the answer ``status`` / ``text`` to request ``spec`` (empty: correct)."""
    from deniable.text.tokenize import words_of

    where = f"request {spec.rid}"
    if status >= 500:
        return [f"{where}: server error {status}: {text[:200]}"]
    if spec.malformed is not None:
        if not 400 <= status < 500:
            return [f"{where} ({spec.malformed}): expected a 4xx error, got {status}"]
        try:
            err = json.loads(text)["error"]
            ok = err["status"] == status and bool(err["message"])
        except (ValueError, KeyError, TypeError):
            ok = False
        return [] if ok else [f"{where} ({spec.malformed}): the {status} error is not the JSON error shape: {text[:200]}"]
    if status != 200:
        return [f"{where}: expected 200, got {status}: {text[:200]}"]
    problems = []
    found = MARKER.search(text)
    if found:
        problems.append(f"{where}: an out-of-vocabulary marker word is in the response ({found.group(0)})")
    try:
        body = json.loads(text)
        outs = body["texts"]
        counts = [len(words_of(t)) for t in outs]
    except (ValueError, KeyError, TypeError) as exc:
        return [*problems, f"{where}: unreadable response ({type(exc).__name__}): {text[:200]}"]
    got = decode_layout(counts)
    if got != spec.rid or counts != spec.counts:
        problems.append(f"{where}: the texts returned have the layout of request {got} ({counts} words per text; expected {spec.counts})")
    if body.get("mechanism") != spec.mechanism or body.get("epsilon") != spec.epsilon:
        problems.append(f"{where}: answered for {body.get('mechanism')} at epsilon {body.get('epsilon')}, asked {spec.mechanism} at {spec.epsilon}")
    asked = set(spec.include)
    for name in INPUT_DEPENDENT:
        wanted = ("segments" if name == "segments" else "summary") in asked
        if (name in body) != wanted:
            problems.append(f"{where}: field {name!r} {'missing' if wanted else 'returned without being asked for'}")
    if "summary" in asked and "summary" in body and "per_text" in body:
        n_texts = len(spec.counts)
        if [p.get("words") for p in body["per_text"]] != spec.counts:
            problems.append(f"{where}: per_text words {[p.get('words') for p in body['per_text']]} != {spec.counts}")
        s = body["summary"]
        if s.get("words") != sum(spec.counts) or s.get("unknown") != n_texts:
            problems.append(f"{where}: summary words/unknown {s.get('words')}/{s.get('unknown')}, expected {sum(spec.counts)}/{n_texts}")
    if "segments" in asked and "segments" in body:
        segs = body["segments"]
        if len(segs) != len(outs) or any("".join(p["text"] for p in seg) != t or sum(bool(p["word"]) for p in seg) != c for seg, t, c in zip(segs, outs, spec.counts)):
            problems.append(f"{where}: segments do not rebuild the request's texts")
    return problems


# -- the run ------------------------------------------------------------------------------------
@dataclass
class Tally:
    requests: int = 0
    well_formed: int = 0
    malformed: int = 0
    ok: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    failed_checks: int = 0
    malformed_4xx: int = 0
    latencies: list[float] = field(default_factory=list)
    by_mechanism: dict[str, list[float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(problem)


async def _phase(client: Any, first_rid: int, seconds: float, max_requests: int, concurrency: int, spec_of: Any, tally: Tally) -> int:
    """Send requests ``first_rid``, ``first_rid + 1``, ... with ``concurrency`` in flight until
    ``seconds`` have passed or ``max_requests`` were sent; returns the next unused id."""
    import httpx

    next_rid = first_rid
    end_rid = first_rid + max_requests
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal next_rid
        while next_rid < end_rid and time.perf_counter() < deadline:
            spec = spec_of(next_rid)
            next_rid += 1
            tally.requests += 1
            if spec.malformed is None:
                tally.well_formed += 1
            else:
                tally.malformed += 1
            t0 = time.perf_counter()
            try:
                r = await client.post("/v1/privatize", content=spec.body, headers={"content-type": "application/json"})
            except httpx.HTTPError as exc:
                tally.transport_errors += 1
                tally.note(f"request {spec.rid}: {type(exc).__name__}: {exc}")
                continue
            dt = time.perf_counter() - t0
            if r.status_code >= 500:
                tally.server_errors += 1
            problems = check_response(spec, r.status_code, r.text)
            if problems:
                tally.failed_checks += 1
                for p in problems:
                    tally.note(p)
            elif spec.malformed is None:
                tally.ok += 1
                tally.latencies.append(dt)
                tally.by_mechanism.setdefault(spec.mechanism, []).append(dt)
            else:
                tally.malformed_4xx += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return next_rid


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120.0, log: Path | None = None) -> None:
    """Wait until the server answers ``/healthz``; fail naming its exit status (and the end of its
    ``log``) if it exits first."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = f": {log.read_text(errors='replace')[-2000:]}" if log is not None else ""
            raise RuntimeError(f"the server exited with status {proc.returncode}{tail}")
        try:
            if httpx.get(url + "/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server did not answer /healthz within {timeout:.0f} s")


def soak(
    duration: float = 300.0,
    concurrency: int = 16,
    *,
    warmup: float = 30.0,
    malformed: float = 0.05,
    max_requests: int = 200_000,
    embedding: str | os.PathLike[str] | None = None,
    bundle: str | os.PathLike[str] | None = None,
    words: Sequence[str] | None = None,
    seed: int = 0,
    build_timeout: float = 600.0,
    max_rss_growth: float = 0.10,
) -> dict[str, Any]:
    """Run the soak test against a fresh ``deniable serve`` on 127.0.0.1; returns the summary.

    Parameters
    ----------
    duration
        Seconds of the measured phase (after the builds and ``warmup`` seconds of traffic).
    concurrency
        Requests in flight.
    malformed
        Share of requests malformed on purpose.
    max_requests
        Most requests sent in all (warm-up included); the run stops at this or at the time.
    embedding, bundle
        Passed to ``deniable serve --embedding`` / ``--bundle`` (default: the bundled ones).
    words
        In-vocabulary words the texts are made of (default :data:`WORDS`); checked at start-up.
    seed
        Seeds the request schedule (the same requests for the same seed).
    build_timeout
        Seconds allowed for building each mechanism on first use (neighbour tables and output
        sets are built then unless ``deniable precompute NAME`` cached them).
    max_rss_growth
        Largest RSS growth (measured phase, relative) that passes.

    Returns
    -------
    dict
        The JSON summary printed by the script; ``passed`` says whether every check held.
    """
    import httpx

    if not (duration > 0 and warmup >= 0 and 1 <= concurrency <= 256 and 0 <= malformed < 1 and max_requests >= 1):
        raise ValueError("need duration > 0, warmup >= 0, 1 <= concurrency <= 256, 0 <= malformed < 1 and max_requests >= 1")
    words = list(words or WORDS)
    port = free_port()
    url = f"http://{HOST}:{port}"
    cmd = [sys.executable, "-m", "deniable.cli.main", "serve", "--host", HOST, "--port", str(port), "--log-level", "warning", "--no-page"]
    if embedding is not None:
        cmd += ["--embedding", os.fspath(embedding)]
    if bundle is not None:
        cmd += ["--bundle", os.fspath(bundle)]
    with tempfile.TemporaryDirectory(prefix="deniable-soak-") as tmp:
        log = Path(tmp) / "server.log"
        with open(log, "w", encoding="utf-8") as log_file:  # a file, not a pipe: a full pipe would block the server
            proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            t_start = time.perf_counter()
            wait_healthy(url, proc, timeout=180.0, log=log)
            startup = time.perf_counter() - t_start
            info = httpx.get(url + "/v1/mechanisms", timeout=30.0).json()
            mechanisms: list[tuple[str, float]] = []
            for m in info["mechanisms"]:
                if not m.get("served", True):
                    continue
                grid = m["suggested_epsilons"]
                mid = len(grid) // 2
                mechanisms += [(m["name"], float(grid[max(0, mid - 1)])), (m["name"], float(grid[mid]))]
            mechanisms = list(dict.fromkeys(mechanisms))
            # every (mechanism, epsilon) built once, and the words checked against the vocabulary
            t0 = time.perf_counter()
            for name, eps in mechanisms:
                r = httpx.post(url + "/v1/privatize", json={"texts": [" ".join(words)], "mechanism": name, "epsilon": eps, "include": ["summary"]}, timeout=build_timeout)
                if r.status_code != 200:
                    raise RuntimeError(f"building {name} at epsilon {eps:g} failed: {r.status_code} {r.text[:300]}")
                if r.json()["summary"]["unknown"]:
                    raise ValueError(f"{r.json()['summary']['unknown']} of the request words are not in the served vocabulary; pass words=... from it")
            build_s = time.perf_counter() - t0

            def spec_of(rid: int) -> Spec:
                return make_spec(rid, seed=seed, mechanisms=mechanisms, words=words, malformed=malformed)

            async def run() -> dict[str, Any]:
                limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
                async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as client:
                    warm = Tally()
                    # one of each malformed kind first, so every error path has run before the baseline
                    for kind in MALFORMED_KINDS:
                        s = make_spec(max_requests, seed=seed, mechanisms=mechanisms, words=words, malformed=1.0, kind=kind)
                        r = await client.post("/v1/privatize", content=s.body, headers={"content-type": "application/json"})
                        for p in check_response(s, r.status_code, r.text):
                            warm.note(p)
                    rid = await _phase(client, 0, warmup, max_requests, concurrency, spec_of, warm)
                    rss_start = rss_bytes(proc.pid)
                    samples: list[tuple[float, int]] = []
                    stop = asyncio.Event()

                    async def sample() -> None:
                        while not stop.is_set():
                            v = rss_bytes(proc.pid)
                            if v is not None:
                                samples.append((time.perf_counter(), v))
                            try:
                                await asyncio.wait_for(stop.wait(), timeout=1.0)
                            except asyncio.TimeoutError:
                                pass

                    sampler = asyncio.create_task(sample())
                    main = Tally()
                    t = time.perf_counter()
                    await _phase(client, rid, duration, max(0, max_requests - rid), concurrency, spec_of, main)
                    wall = time.perf_counter() - t
                    stop.set()
                    await sampler
                    rss_end = rss_bytes(proc.pid)
                    half = t + wall / 2
                    mid = min(samples, key=lambda x: abs(x[0] - half))[1] if samples else None
                    return {"warm": warm, "main": main, "wall": wall, "rss_start": rss_start, "rss_mid": mid, "rss_end": rss_end, "rss_max": max((v for _, v in samples), default=None)}

            res = asyncio.run(run())
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    main, warm = res["main"], res["warm"]
    ms = np.asarray(main.latencies) * 1000.0
    start, end = res["rss_start"], res["rss_end"]
    growth = (end - start) / start if start and end else None
    mib = 1 << 20
    failures = list(warm.problems) + list(main.problems)
    passed = (
        main.ok > 0
        and main.server_errors == 0
        and main.transport_errors == 0
        and main.failed_checks == 0
        and warm.server_errors == 0
        and warm.failed_checks == 0
        and not warm.problems
        and growth is not None
        and growth < max_rss_growth
    )
    return {
        "benchmark": "service_soak",
        "host": HOST,
        "mechanisms": [f"{n}@{e:g}" for n, e in mechanisms],
        "concurrency": concurrency,
        "duration_s": round(res["wall"], 1),
        "warmup_s": warmup,
        "startup_s": round(startup, 1),
        "build_s": round(build_s, 1),
        "requests": main.requests,
        "well_formed": main.well_formed,
        "malformed": main.malformed,
        "ok": main.ok,
        "malformed_4xx": main.malformed_4xx,
        "server_errors": main.server_errors,
        "transport_errors": main.transport_errors,
        "failed_checks": main.failed_checks,
        "warmup_requests": warm.requests,
        "warmup_failed_checks": warm.failed_checks,
        "p50_ms": round(float(np.percentile(ms, 50)), 1) if ms.size else None,
        "p99_ms": round(float(np.percentile(ms, 99)), 1) if ms.size else None,
        "max_ms": round(float(ms.max()), 1) if ms.size else None,
        "requests_per_s": round(main.requests / res["wall"], 2) if res["wall"] else None,
        "latency_by_mechanism_ms": {
            name: {"n": len(v), "p50": round(float(np.percentile(v, 50)) * 1000, 1), "p99": round(float(np.percentile(v, 99)) * 1000, 1)} for name, v in sorted(main.by_mechanism.items())
        },
        "rss_start_mib": round(start / mib, 1) if start else None,
        "rss_mid_mib": round(res["rss_mid"] / mib, 1) if res["rss_mid"] else None,
        "rss_end_mib": round(end / mib, 1) if end else None,
        "rss_max_mib": round(res["rss_max"] / mib, 1) if res["rss_max"] else None,
        "rss_growth": round(growth, 4) if growth is not None else None,
        "passed": bool(passed),
        "failures": failures[:5],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of the measured phase (default 300)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=30.0, help="seconds of traffic before the RSS baseline (default 30)")
    ap.add_argument("--malformed", type=float, default=0.05, help="share of malformed requests (default 0.05)")
    ap.add_argument("--max-requests", type=int, default=200_000)
    ap.add_argument("--embedding", default=None, help="deniable serve --embedding (default: the bundled one)")
    ap.add_argument("--bundle", default=None, help="deniable serve --bundle (default: the bundled BRR codes)")
    ap.add_argument("--words", default=None, help="comma-separated in-vocabulary words the texts are made of")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    try:
        summary = soak(
            args.duration,
            args.concurrency,
            warmup=args.warmup,
            malformed=args.malformed,
            max_requests=args.max_requests,
            embedding=args.embedding,
            bundle=args.bundle,
            words=args.words.split(",") if args.words else None,
            seed=args.seed,
        )
    except ValueError as exc:
        ap.error(str(exc))
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
