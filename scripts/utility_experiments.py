"""Downstream utility of privatized text: classifiers trained on privatized training text.

For each mechanism and ε, and each seed: privatize the training texts and the test texts (one
batch call each, independent generators), fit TF-IDF + L2 logistic regression
(:mod:`deniable.evaluation.utility`) on the privatized training texts, and score it on (a) the
clean test texts and (b) the privatized test texts. Also records the fraction of word tokens
the mechanism changed (1 − empirical N_w over tokens). Results are appended to a JSON-lines
file as they come (seeds are the outer loop, so a partial run has every configuration at the
first seeds), then summarized as Markdown tables (mean ± sd over seeds).

Data: SMS Spam Collection (fixed 80/20 split, permutation seed 0) and optionally a subsample of
IMDb's official train/test split. Embedding: the bundled default (``deniable.load_embedding()``).

Usage (the command behind docs/results/utility.md)::

    DENIABLE_CACHE_DIR=build/cache nohup .venv/bin/python scripts/utility_experiments.py \\
        --out build/utility/results.jsonl > build/utility/run.log 2>&1 &
    .venv/bin/python scripts/utility_experiments.py --summarize build/utility/results.jsonl
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

import deniable
from deniable._rng import spawn
from deniable.calibration import equivalent_epsilon
from deniable.evaluation.utility import (
    TextClassifier,
    classification_scores,
    privatize_dataset,
    words_changed,
)
from deniable.text import words_of

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "classification"
MADLIB_EPS = (5, 10, 15, 20, 25, 30)
TEM_EPS = (1, 2, 3, 5, 10)
MECH_ORDER = ("none", "madlib", "mahalanobis", "tem", "brr")


def read_csv(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(sys.maxsize)
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def load_sms() -> tuple[list[str], list[str], list[str], list[str]]:
    rows = read_csv(DATA / "sms_spam_collection.csv.gz")
    perm = np.random.default_rng(0).permutation(len(rows))
    n_train = round(0.8 * len(rows))
    tr, te = perm[:n_train], perm[n_train:]
    return ([rows[i]["text"] for i in tr], [rows[i]["label"] for i in tr], [rows[i]["text"] for i in te], [rows[i]["label"] for i in te])


def load_imdb(n_train: int, n_test: int) -> tuple[list[str], list[str], list[str], list[str]]:
    rows = read_csv(DATA / "imdb_50k.csv.gz")
    gen = np.random.default_rng(0)
    out = []
    for split, n in (("train", n_train), ("test", n_test)):
        idx = np.flatnonzero(np.array([r["split"] == split for r in rows]))
        pick = np.sort(gen.choice(idx, size=n, replace=False))
        out += [[rows[i]["review"] for i in pick], [rows[i]["sentiment"] for i in pick]]
    return out[0], out[1], out[2], out[3]


def configs(emb, mechanisms: list[str], madlib_eps=MADLIB_EPS, tem_eps=TEM_EPS) -> list[tuple[str, float, dict, object]]:
    """(name, ε, extra info, factory) in a fixed order."""
    MADLIB_EPS, TEM_EPS = madlib_eps, tem_eps
    out: list[tuple[str, float, dict, object]] = [("none", math.nan, {}, None)]
    if "madlib" in mechanisms:
        out += [("madlib", e, {}, (lambda e=e: deniable.Madlib(emb, epsilon=e))) for e in MADLIB_EPS]
    if "mahalanobis" in mechanisms:
        out += [("mahalanobis", e, {"lam": 0.5}, (lambda e=e: deniable.Mahalanobis(emb, epsilon=e, lam=0.5))) for e in MADLIB_EPS]
    if "tem" in mechanisms:
        out += [("tem", e, {"beta": 0.001}, (lambda e=e: deniable.TEM(emb, epsilon=e, beta=0.001))) for e in TEM_EPS]
    if "brr" in mechanisms:
        t = time.time()
        ratio = equivalent_epsilon(1.0, deniable.Madlib(emb, epsilon=1.0), deniable.BRR(epsilon=1.0), aggregate="avg")
        print(f"privacy ratio R(Madlib euclidean, BRR hamming), avg: {ratio:.6g} ({time.time() - t:.1f} s)", flush=True)
        out += [("brr", e * ratio, {"madlib_epsilon": e, "ratio": ratio}, (lambda e=e: deniable.BRR(epsilon=e * ratio))) for e in MADLIB_EPS]
    return out


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists() and out.stat().st_size and not args.resume:
        raise SystemExit(f"{out} exists: pass --resume to add the missing runs, or choose a new --out")
    if out.exists() and args.resume:
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["dataset"], r["mechanism"], r["epsilon"], r["seed"]))
    t0 = time.time()
    emb = deniable.load_embedding()
    print(f"embedding: {len(emb)} words, dim {emb.dim}, fingerprint {emb.fingerprint}", flush=True)
    mechs = args.mechanisms.split(",")
    floats = lambda s: tuple(float(x) for x in s.split(","))
    cfgs = configs(emb, mechs, floats(args.madlib_eps), floats(args.tem_eps))
    datasets = {}
    for name in args.datasets.split(","):
        datasets[name] = load_sms() if name == "sms" else load_imdb(args.imdb_train, args.imdb_test)
        tr, _, te, _ = datasets[name]
        n_words = sum(len(words_of(t)) for t in tr + te)
        print(f"{name}: {len(tr)} train / {len(te)} test texts, {n_words} words", flush=True)
    clf_kw = {"alpha": args.alpha, "tol": 1e-6}
    with out.open("a") as f:
        for dname, (xtr, ytr, xte, yte) in datasets.items():
            seeds = range(args.seeds if dname == "sms" else args.imdb_seeds)
            for seed in seeds:
                for ci, (mname, eps, info, factory) in enumerate(cfgs):
                    if mname == "none" and seed > 0:
                        continue  # deterministic
                    eps_key = None if math.isnan(eps) else float(eps)
                    if (dname, mname, eps_key, seed) in done:
                        continue
                    t = time.time()
                    rec = {"dataset": dname, "mechanism": mname, "epsilon": eps_key, "seed": seed, **info}
                    if factory is None:
                        clf = TextClassifier(**clf_kw).fit(xtr, ytr)
                        acc, f1 = classification_scores(yte, clf.predict(xte))
                        rec.update(acc_clean=acc, f1_clean=f1, acc_priv=acc, f1_priv=f1, changed_train=0.0, changed_test=0.0)
                    else:
                        mech = factory()
                        rec["repr"] = repr(mech)
                        g_tr, g_te = spawn(np.random.default_rng([seed, ci]), 2)
                        ptr = privatize_dataset(mech, xtr, rng=g_tr)
                        pte = privatize_dataset(mech, xte, rng=g_te)
                        t_priv = time.time() - t
                        c1, n1 = words_changed(xtr, ptr)
                        c2, n2 = words_changed(xte, pte)
                        clf = TextClassifier(**clf_kw).fit(ptr, ytr)
                        acc_c, f1_c = classification_scores(yte, clf.predict(xte))
                        acc_p, f1_p = classification_scores(yte, clf.predict(pte))
                        rec.update(acc_clean=acc_c, f1_clean=f1_c, acc_priv=acc_p, f1_priv=f1_p, changed_train=c1 / n1, changed_test=c2 / n2,
                                   words=n1 + n2, privatize_s=t_priv, example=[xte[0], pte[0]])
                    rec["seconds"] = time.time() - t
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    print(f"[{time.time() - t0:7.1f}s] {dname} {mname} eps={eps_key} seed={seed}: acc clean {rec['acc_clean']:.4f} "
                          f"priv {rec['acc_priv']:.4f}, changed {rec['changed_train']:.3f} ({rec['seconds']:.1f} s)", flush=True)
    print(f"total {time.time() - t0:.1f} s", flush=True)
    print(summarize(out))


def _ms(values: list[float], pct: bool = True) -> str:
    a = np.asarray(values, dtype=float) * (100 if pct else 1)
    if len(a) == 1:
        return f"{a[0]:.1f}"
    return f"{a.mean():.1f} ± {a.std(ddof=1):.1f}"


def summarize(path: Path) -> str:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        groups[(r["dataset"], r["mechanism"], r["epsilon"])].append(r)
    lines = []
    for dname in sorted({k[0] for k in groups}, key=lambda d: (d != "sms", d)):
        lines += [f"### {dname}", "",
                  "| mechanism | ε | seeds | words changed (train) % | acc. clean test % | macro-F1 clean test % | acc. privatized test % | macro-F1 privatized test % |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        keys = sorted((k for k in groups if k[0] == dname), key=lambda k: (MECH_ORDER.index(k[1]), k[2] or 0))
        for k in keys:
            rs = groups[k]
            eps = "—" if k[2] is None else f"{k[2]:.4g}" + (f" (≙ Madlib {rs[0]['madlib_epsilon']})" if "madlib_epsilon" in rs[0] else "")
            lines.append(f"| {k[1]} | {eps} | {len(rs)} | {_ms([r['changed_train'] for r in rs])} | {_ms([r['acc_clean'] for r in rs])} | "
                         f"{_ms([r['f1_clean'] for r in rs])} | {_ms([r['acc_priv'] for r in rs])} | {_ms([r['f1_priv'] for r in rs])} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="build/utility/results.jsonl")
    p.add_argument("--datasets", default="sms", help="comma list of sms, imdb")
    p.add_argument("--mechanisms", default="madlib,mahalanobis,tem,brr")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--madlib-eps", default=",".join(map(str, MADLIB_EPS)), help="ε of Madlib, Mahalanobis and (matched) BRR")
    p.add_argument("--tem-eps", default=",".join(map(str, TEM_EPS)))
    p.add_argument("--imdb-seeds", type=int, default=1)
    p.add_argument("--imdb-train", type=int, default=1000)
    p.add_argument("--imdb-test", type=int, default=500)
    p.add_argument("--alpha", type=float, default=1e-4)
    p.add_argument("--resume", action="store_true", help="skip (dataset, mechanism, ε, seed) already in --out")
    p.add_argument("--summarize", metavar="JSONL", help="only print the tables of a results file")
    args = p.parse_args(argv)
    if args.summarize:
        print(summarize(Path(args.summarize)))
        return
    print(f"machine: {platform.platform()}, python {platform.python_version()}, cpus {os.cpu_count()}, "
          f"numpy {np.__version__}, deniable {deniable.__version__}", flush=True)
    run(args)


if __name__ == "__main__":
    main()
