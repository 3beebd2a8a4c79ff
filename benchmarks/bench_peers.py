"""Throughput of deniable's mechanisms against public implementations, on the same input.

Each public implementation ("peer") lives in its own virtual environment, made by
``bash benchmarks/peers/setup_peers.sh`` (default folder ``benchmarks/peers/.venvs/``); it is
never imported here. This script

1. loads one embedding (the bundled GloVe subset, or ``--embedding``) and the input words (the
   first ``--words`` in-vocabulary words of the IMDb reviews at ``--data``; the bundled example
   texts, repeated, when that file is absent);
2. writes them to a temporary folder (``vectors.npy``, ``vocab.txt``, ``words.txt``);
3. for each peer environment found, starts ``benchmarks/peers/drive_<peer>.py`` with that
   environment's interpreter and, per mechanism pair, times the peer's mechanism there and
   deniable's matching mechanism here, in alternating rounds, on the same words with the same
   parameters.

Timing: process CPU time of the mechanism calls only (construction is reported separately), one
thread on both sides (OMP/MKL/OPENBLAS/NUMEXPR_NUM_THREADS=1, set before numpy loads). A first
untimed round of the peer runs until ``--budget`` CPU seconds pass (or all words are done); its
word count n is then used by every timed round of both sides. A deniable round repeats its call
on those n words until ``--min-cpu`` seconds pass. words/s = words / CPU seconds; the ratio is
deniable's over the peer's, of the medians and of the best rounds.

Usage:
    bash benchmarks/peers/setup_peers.sh                 # once
    python benchmarks/bench_peers.py [--rounds 3] [--budget 10] [--json OUT]

Without any peer environment it says where it looked and how to make one, and exits 0.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import csv  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import deniable  # noqa: E402
from deniable.text.tokenize import split_words  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS_DIR = HERE / "peers"
DEFAULT_VENVS = PEERS_DIR / ".venvs"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "classification" / "imdb_50k.csv.gz"
FALLBACK_TEXTS = (REPO / "examples" / "reviews.csv", REPO / "examples" / "sample.txt")
SETUP_COMMAND = "bash benchmarks/peers/setup_peers.sh"
PEERS = ("mldp", "pypantera")


@dataclass(frozen=True)
class Pair:
    """One peer mechanism and deniable's matching mechanism."""

    peer: str
    peer_mech: str
    deniable: str
    deniable_kw: tuple[str, ...]  # names of the shared parameters deniable's constructor takes
    fixed: dict[str, Any] = field(default_factory=dict)  # deniable-only fixed arguments
    note: str = ""

    def deniable_label(self, params: dict[str, Any]) -> str:
        args = [f"{k}={v}" for k, v in self.fixed.items()] + [f"{k}={params[k]}" for k in self.deniable_kw]
        return f"{self.deniable}({', '.join(args)})" if args else self.deniable


CUSTEXT_NOTE = "pypantera's output set of a word is its own K nearest words; deniable's are the authors' conservative mapping (sets of K words taken in turn, each word in one set)"
PYP_MHL_NOTE = "pypantera rescales the transformed noise direction to unit length; deniable (and mldp) do not"
MLDP_VICKREY_NOTE = "mldp chooses between the two nearest words other than the input with weights softmax(-[1, 0]*d) (k=2, t=[1, 0]); deniable uses the t rule of Xu et al. (t=0.75)"
MLDP_MHL_NOTE = "mldp divides the covariance by the variance of all its entries; deniable (and pypantera) scale it to trace d"
MLDP_TEM_NOTE = "mldp's gamma uses |W| instead of |W|-1 and is rounded to 0.1"
MLDP_TG_NOTE = "different mechanisms: mldp's is noise added to distances of a Poisson number of nearest words; deniable's knn_tem is TEM truncated at the k-th nearest distance"

PAIRS: tuple[Pair, ...] = (
    Pair("pypantera", "CMP", "madlib", ()),
    Pair("pypantera", "Mahalanobis", "mahalanobis", ("lam",), note=PYP_MHL_NOTE),
    Pair("pypantera", "VickreyCMP", "vickrey", ("t",), {"noise": "euclidean"}),
    Pair("pypantera", "VickreyMhl", "vickrey", ("t", "lam"), {"noise": "mahalanobis"}, note=PYP_MHL_NOTE),
    Pair("pypantera", "TEM", "tem", ("beta",)),
    Pair("pypantera", "SanText", "santext", ()),
    Pair("pypantera", "CusText", "custext", ("K",), note=CUSTEXT_NOTE),
    Pair("mldp", "MultivariateCalibrated:exact", "madlib", ()),
    Pair("mldp", "MultivariateCalibrated:faiss", "madlib", (), note="mldp searches an approximate FAISS IVF index; deniable's search is exact"),
    Pair("mldp", "Mahalanobis:exact", "mahalanobis", ("lam",), note=MLDP_MHL_NOTE),
    Pair("mldp", "Mahalanobis:faiss", "mahalanobis", ("lam",), note=MLDP_MHL_NOTE + "; approximate FAISS search"),
    Pair("mldp", "VickreyMechanism:exact", "vickrey", ("t",), {"noise": "euclidean"}, note=MLDP_VICKREY_NOTE),
    Pair("mldp", "VickreyMechanism:faiss", "vickrey", ("t",), {"noise": "euclidean"}, note=MLDP_VICKREY_NOTE + "; approximate FAISS search"),
    Pair("mldp", "TEM", "tem", ("beta",), note=MLDP_TEM_NOTE),
    Pair("mldp", "TruncatedGumbel:exact", "knn_tem", ("k",), note=MLDP_TG_NOTE),
    Pair("mldp", "TruncatedGumbel:faiss", "knn_tem", ("k",), note=MLDP_TG_NOTE + "; approximate FAISS search"),
)


def find_peers(venvs: Path, wanted: tuple[str, ...] = PEERS) -> tuple[dict[str, Path], list[Path]]:
    """The peers whose environment exists under ``venvs``: {peer: interpreter}, and every
    interpreter path looked for."""
    found, looked = {}, []
    for peer in wanted:
        python = venvs / peer / "bin" / "python"
        looked.append(python)
        if python.exists():
            found[peer] = python
    return found, looked


def no_peer_message(looked: list[Path], venvs: Path) -> str:
    """What to print when no peer environment exists."""
    lines = ["bench_peers: no peer environment found; looked for:"]
    lines += [f"  {p}" for p in looked]
    extra = "" if venvs == DEFAULT_VENVS else f" {venvs}"
    lines += ["Create them (one virtual environment per peer; deniable's environment is not touched) with:",
              f"  {SETUP_COMMAND}{extra}", "then run this script again. Nothing was measured."]
    return "\n".join(lines)


def _imdb_words(path: Path) -> Any:
    csv.field_size_limit(sys.maxsize)
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            yield from split_words(row["review"])[1::2]


def _fallback_words() -> list[str]:
    words: list[str] = []
    for path in FALLBACK_TEXTS:
        if path.exists():
            words.extend(split_words(path.read_text(encoding="utf-8"))[1::2])
    return words


def read_words(emb: deniable.Embedding, data: Path | None, n: int) -> tuple[list[str], str]:
    """The first ``n`` in-vocabulary words (lower-cased) of the IMDb reviews at ``data``, or of
    the bundled example texts repeated in order when ``data`` is None or absent; with a
    description of the source."""
    if n < 1:
        raise ValueError(f"--words must be >= 1, got {n}")
    vocab = set(emb.words)
    if data is not None and data.exists():
        words = []
        for w in _imdb_words(data):
            w = w.lower()
            if w in vocab:
                words.append(w)
                if len(words) == n:
                    break
        return words, f"first {len(words)} in-vocabulary words of {data.name}"
    base = [w.lower() for w in _fallback_words() if w.lower() in vocab]
    if not base:
        raise FileNotFoundError(f"no input text: {data} is absent and the bundled examples are missing; pass --data")
    words = [base[i % len(base)] for i in range(n)]
    return words, f"bundled example texts ({len(base)} in-vocabulary words, repeated to {n}; {data} not found)"


def write_inputs(folder: Path, emb: deniable.Embedding, words: list[str]) -> None:
    """Write the embedding and input words in the drivers' neutral format (see
    benchmarks/peers/_driver_common.py)."""
    bad = [w for w in emb.words if not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"vocabulary words with whitespace cannot be written one a line: {bad[:3]}")
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "vectors.npy", np.ascontiguousarray(emb.vectors, dtype=np.float32))
    (folder / "vocab.txt").write_text("\n".join(emb.words), encoding="utf-8")
    (folder / "words.txt").write_text("\n".join(words) + "\n", encoding="utf-8")


class Driver:
    """A peer's driver process (JSON lines on stdin/stdout; its stderr goes to ``log``)."""

    def __init__(self, peer: str, python: Path, inputs: Path, log: Path) -> None:
        self.peer, self.log = peer, log
        self._err = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        script = PEERS_DIR / f"drive_{peer}.py"
        self.proc = subprocess.Popen([str(python), str(script), str(inputs)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True, env=os.environ.copy())

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            tail = self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"{self.peer} driver exited (code {self.proc.poll()}); its stderr ends with:\n{tail}")
        return json.loads(line)

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self._err.close()


def deniable_round(mech: Any, emb: deniable.Embedding, words: list[str], seed: int, min_cpu: float) -> dict[str, Any]:
    """Words in, words out (``ids_of`` -> ``sample_ids`` -> words), repeated until ``min_cpu``
    CPU seconds pass; CPU and wall time of the calls."""
    rng = np.random.default_rng(seed)
    vocab = emb.words
    reps, c0, w0 = 0, time.process_time(), time.perf_counter()
    while True:
        out = [vocab[i] for i in mech.sample_ids(emb.ids_of(words), rng=rng)]
        reps += 1
        if time.process_time() - c0 >= min_cpu:
            break
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    unchanged = sum(a == b for a, b in zip(words, out)) / max(1, len(words))
    return {"n": len(words) * reps, "cpu_s": cpu, "wall_s": wall, "reps": reps, "unchanged": unchanged, "sample": out[:8]}


def _rates(rounds: list[dict[str, Any]]) -> dict[str, float]:
    r = [x["n"] / x["cpu_s"] for x in rounds if x["cpu_s"] > 0]
    return {"median_wps": statistics.median(r), "best_wps": max(r)} if r else {"median_wps": float("nan"), "best_wps": float("nan")}


PRECOMPUTED = frozenset({"tem", "santext", "custext", "knn_tem"})  # cached, epsilon-independent tables


def _deniable_mech(pair: Pair, params: dict[str, Any], emb: deniable.Embedding, cold: bool, mechs: dict[str, Any]) -> tuple[Any, dict[str, float]]:
    label = f"{pair.deniable_label(params)}@{params['epsilon']}"
    if label not in mechs:
        kw: dict[str, Any] = dict(pair.fixed) | {k: params[k] for k in pair.deniable_kw}
        if cold and pair.deniable in PRECOMPUTED:
            kw["cache_dir"] = False
        c0, w0 = time.process_time(), time.perf_counter()
        mech = deniable.get_mechanism(pair.deniable, emb, epsilon=params["epsilon"], **kw)
        mechs[label] = (mech, {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0})
    return mechs[label]


def run_pair(driver: Driver, pair: Pair, params: dict[str, Any], args: argparse.Namespace, emb: deniable.Embedding,
             words: list[str], mechs: dict[str, Any]) -> dict[str, Any]:
    """Set up both sides, size the input by the peer's budget, then alternate timed rounds."""
    rec: dict[str, Any] = {"peer": pair.peer, "peer_mechanism": pair.peer_mech, "epsilon": params["epsilon"],
                           "deniable_mechanism": pair.deniable_label(params), "note": pair.note}
    setup = driver.ask(cmd="setup", mech=pair.peer_mech, params=params)
    if "error" in setup:
        return rec | {"error": f"peer setup: {setup['error']}"}
    mech, rec["deniable_setup"] = _deniable_mech(pair, params, emb, args.cold, mechs)
    rec["peer_setup"] = setup
    cal = driver.ask(cmd="run", mech=pair.peer_mech, n=None, budget_s=args.budget, chunk=args.chunk, seed=10_000)
    if "error" in cal:
        return rec | {"error": f"peer run: {cal['error']}"}
    n = rec["words"] = cal["n"]
    rec["peer_first_round"] = cal
    subset = words[:n]
    first = deniable_round(mech, emb, subset, seed=10_000, min_cpu=1e-9)  # one call: per-epsilon tables are built here
    rec["deniable_first_call"] = {k: first[k] for k in ("cpu_s", "wall_s")}
    peer_rounds, den_rounds = [], []
    for r in range(args.rounds):
        p = driver.ask(cmd="run", mech=pair.peer_mech, n=n, chunk=args.chunk, seed=r)
        if "error" in p:
            return rec | {"error": f"peer run: {p['error']}"}
        peer_rounds.append(p)
        den_rounds.append(deniable_round(mech, emb, subset, seed=r, min_cpu=args.min_cpu))
    driver.ask(cmd="drop", mech=pair.peer_mech)
    pr, dr = _rates(peer_rounds), _rates(den_rounds)
    rec |= {"peer_rounds": peer_rounds, "deniable_rounds": den_rounds, "peer_rate": pr, "deniable_rate": dr,
            "ratio_median": dr["median_wps"] / pr["median_wps"], "ratio_best": dr["best_wps"] / pr["best_wps"]}
    return rec


def format_row(rec: dict[str, Any]) -> str:
    name = f"{rec['epsilon']:4g} {rec['peer']}:{rec['peer_mechanism']}"
    if "error" in rec:
        return f"{name:39s} vs {rec['deniable_mechanism']:36s} ERROR {rec['error']}"
    pr, dr = rec["peer_rate"], rec["deniable_rate"]
    unchanged_p = statistics.mean(x["unchanged"] for x in rec["peer_rounds"])
    unchanged_d = statistics.mean(x["unchanged"] for x in rec["deniable_rounds"])
    return (f"{name:39s} vs {rec['deniable_mechanism']:36s} {rec['words']:6d} {pr['median_wps']:12,.1f} {dr['median_wps']:13,.0f}"
            f" {rec['ratio_median']:11,.0f}x {rec['ratio_best']:9,.0f}x   {unchanged_p:5.1%} {unchanged_d:5.1%}"
            f" {rec['peer_setup']['wall_s']:8.1f} {rec['deniable_setup']['wall_s']:8.2f}")


HEADER = (f"{' eps peer mechanism':39s}    {'deniable mechanism':36s} {'words':>6s} {'peer w/s':>12s} {'deniable w/s':>13s}"
          f" {'ratio(med)':>12s} {'(best)':>10s}   {'unchanged p/d':>11s} {'setup s p/d (wall)':>17s}")


def markdown_table(record: dict[str, Any]) -> str:
    """The results of a ``--json`` record as a Markdown table (medians over the timed rounds)."""
    lines = ["| ε | peer mechanism | deniable mechanism | words | peer words/s | deniable words/s | ratio (median) | ratio (best) | unchanged peer / deniable |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in record["results"]:
        head = f"| {r['epsilon']:g} | {r['peer']} `{r['peer_mechanism']}` | `{r['deniable_mechanism']}` |"
        if "error" in r:
            lines.append(head + f" – | error: {r['error']} | | | | |")
            continue
        up = statistics.mean(x["unchanged"] for x in r["peer_rounds"])
        ud = statistics.mean(x["unchanged"] for x in r["deniable_rounds"])
        lines.append(head + f" {r['words']:,} | {r['peer_rate']['median_wps']:,.1f} | {r['deniable_rate']['median_wps']:,.0f} |"
                     f" {r['ratio_median']:,.0f}× | {r['ratio_best']:,.0f}× | {up:.1%} / {ud:.1%} |")
    if record["settings"].get("cold"):
        lines += ["", "| ε | peer mechanism | deniable mechanism | deniable set-up s | deniable first call s | peer set-up s |",
                  "|---:|---|---|---:|---:|---:|"]
        lines += [f"| {r['epsilon']:g} | {r['peer']} `{r['peer_mechanism']}` | `{r['deniable_mechanism']}` | {r['deniable_setup']['wall_s']:.1f} |"
                  f" {r['deniable_first_call']['wall_s']:.2f} | {r['peer_setup']['wall_s']:.1f} |" for r in record["results"] if "error" not in r]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Set-up: " + SETUP_COMMAND + " [VENV_DIR]")
    ap.add_argument("--venvs", type=Path, default=DEFAULT_VENVS, help="folder of the peer environments (default: %(default)s)")
    ap.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS, help="peers to run (default: all found)")
    ap.add_argument("--only", nargs="+", default=None, help="run only pairs whose 'peer:mechanism' or deniable name contains one of these")
    ap.add_argument("--embedding", type=Path, default=None, help="embedding file (default: the bundled GloVe subset)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="IMDb reviews .csv.gz with a 'review' column (default: %(default)s)")
    ap.add_argument("--words", type=int, default=2000, help="input words (default: %(default)s)")
    ap.add_argument("--epsilon", type=float, nargs="+", default=[10.0], help="one or more epsilons (both sides; default: %(default)s)")
    ap.add_argument("--lam", type=float, default=0.5, help="Mahalanobis lambda (both sides)")
    ap.add_argument("--t", type=float, default=0.75, help="Vickrey t (deniable, pypantera)")
    ap.add_argument("--beta", type=float, default=0.001, help="TEM beta")
    ap.add_argument("--K", type=int, default=20, help="CusText output-set size")
    ap.add_argument("--k", type=int, default=20, help="knn_tem list size")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per side (default: %(default)s)")
    ap.add_argument("--budget", type=float, default=10.0, help="CPU seconds of the peer's sizing round (default: %(default)s)")
    ap.add_argument("--chunk", type=int, default=4, help="words per peer call (pypantera: one text) (default: %(default)s)")
    ap.add_argument("--min-cpu", type=float, default=0.2, help="CPU seconds a deniable round lasts at least (default: %(default)s)")
    ap.add_argument("--cold", action="store_true", help="build deniable's epsilon-independent tables in memory (no disk cache), so its setup time includes them")
    ap.add_argument("--json", type=Path, default=None, help="write the full record here")
    ap.add_argument("--table", type=Path, default=None, help="only print the Markdown table of a --json record and exit")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.budget <= 0 or args.chunk < 1 or args.min_cpu <= 0:
        ap.error("--rounds and --chunk must be >= 1, --budget and --min-cpu > 0")
    return args


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "python": platform.python_version(),
            "numpy": np.__version__, "deniable": deniable.__version__,
            "threads": {v: os.environ[v] for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}}


def _selected(pair: Pair, only: list[str] | None) -> bool:
    return only is None or any(s in f"{pair.peer}:{pair.peer_mech}" or s == pair.deniable for s in only)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table is not None:
        print(markdown_table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    found, looked = find_peers(args.venvs, tuple(args.peers))
    if not found:
        print(no_peer_message(looked, args.venvs))
        return 0
    emb = deniable.load_embedding(args.embedding)
    words, source = read_words(emb, args.data, args.words)
    shared = {"lam": args.lam, "t": args.t, "beta": args.beta, "K": args.K, "k": args.k}
    info = machine()
    print(f"embedding: {len(emb)} words x {emb.dim} ({emb.source}); input: {source}")
    print(f"machine: {info['processor']}, {info['cpus']} cpus, load average {info['load_average'][0]:.2f}; one thread per side")
    print(f"parameters: epsilon {args.epsilon}, {shared}; rounds {args.rounds}, peer sizing budget {args.budget} s CPU, chunk {args.chunk}")
    records: list[dict[str, Any]] = []
    versions: dict[str, Any] = {}
    mechs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as tmp:
        folder = Path(tmp)
        write_inputs(folder, emb, words)
        for peer, python in found.items():
            pairs = [p for p in PAIRS if p.peer == peer and _selected(p, args.only)]
            if not pairs:
                continue
            driver = Driver(peer, python, folder, folder / f"{peer}.log")
            try:
                listing = driver.ask(cmd="list")
                versions[peer] = listing["versions"]
                print(f"\n{peer}: {listing['versions']}\n{HEADER}")
                for eps in args.epsilon:
                    for pair in pairs:
                        rec = run_pair(driver, pair, {"epsilon": eps} | shared, args, emb, words, mechs)
                        records.append(rec)
                        print(format_row(rec), flush=True)
            finally:
                driver.close()
    info["load_average_end"] = list(os.getloadavg())
    notes = {f"{r['peer']}:{r['peer_mechanism']}": r["note"] for r in records if r["note"]}  # one line per pair
    if notes:
        print("\nparameter and design differences:")
        for k, v in notes.items():
            print(f"  {k}: {v}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {"command": " ".join([Path(sys.argv[0]).name, *(sys.argv[1:] if argv is None else argv)]),
                  "machine": info, "peer_versions": versions, "input": {"source": source, "words": len(words)},
                  "embedding": {"source": emb.source, "words": len(emb), "dim": emb.dim},
                  "parameters": {"epsilon": args.epsilon} | shared,
                  "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("json", "table")},
                  "results": records}
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
