"""Full-scale comparison of every registered mechanism at matched privacy: utility, word
inversion, membership inference and (blogs) authorship attribution, with seeds.

Units of work are (dataset, mechanism, privacy level, seed). A *level* is a Madlib ε; every other
mechanism runs at the ε the privacy ratio (BRR paper Definition 5.1, P_d^avg) matches to it,
``ε_M = R(Madlib, M) · level`` (R from ``--ratios``, a JSON ``{name: R}`` made by
``--compute-ratios``; TEM and SanText share Madlib's metric, so R = 1). Each unit appends one JSON
line to ``OUT/results.jsonl`` when done; a rerun skips the units already there (resume).

Per classification unit: privatize the training and the test texts (one batch each, independent
generators; the word ids going in and out are recorded by a thin proxy around the mechanism),
fit TF-IDF + logistic regression on the privatized training texts, score it on clean and on
privatized test texts; loss-threshold membership inference against that model (members: the
clean training texts, non-members: the clean test texts); word inversion of the test tokens by
the adversary who simulated the mechanism on the training tokens (their frequencies are its
prior). Per authorship unit: privatize one held-out post per blogger and rank 3,000 authors by
their clean-post profiles. ``--samples N`` also stores the first N privatized test texts per unit
(``OUT/samples_<dataset>.jsonl``) for the sentence-similarity step (``--similarity``).

Usage::

    DENIABLE_CACHE_DIR=build/cache python scripts/evaluation_experiments.py --compute-ratios build/eval/ratios.json
    DENIABLE_CACHE_DIR=build/cache nice -n 10 python scripts/evaluation_experiments.py \\
        --datasets sms --levels 2,10,20 --seeds 3 --ratios build/eval/ratios.json --out build/eval
    python scripts/evaluation_experiments.py --summarize build/eval   # Markdown tables + plots
    python scripts/evaluation_experiments.py --summarize build/eval/sms,build/eval/imdb \\
        --update-doc docs/results/evaluation.md   # the results page's tables, plots and record list; prose untouched

The page's units are recorded in docs/results/evaluation_data/ (committed: ``--out`` there).
Not every row of the page has a committed record, so ``--update-doc`` merges into the page's
tables (rows with no unit in the folders stay; new seeds of a one-seed row combine with it) and
writes, under the page's "## Raw records" heading, which rows rest on committed records.
The page-writing part writes tables and lists only: no dates, machines or run history (the
machine and load of the measurements belong in the page's hand-written provenance line).
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
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "shared" / "data"
LEVELS = (2.0, 10.0, 20.0)
MECH_ORDER = ("none", "madlib", "mahalanobis", "vickrey", "tem", "brr", "santext", "santext_plus", "custext", "truncated_gumbel", "diffractor")
#: Mechanisms bound by an exact nearest-neighbour search per word (run after the others).
SLOW = {"madlib": 2, "mahalanobis": 2, "vickrey": 2}
DATASETS = ("sms", "imdb", "movies", "blogs")


# -- data ---------------------------------------------------------------------------------------
def _read_csv(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(sys.maxsize)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def load_dataset(name: str, data: Path, limit: int | None = None):
    """(train texts, train labels, test texts, test labels)."""
    if name == "sms":
        rows = _read_csv(data / "classification" / "sms_spam_collection.csv.gz")
        perm = np.random.default_rng(0).permutation(len(rows))
        n_train = round(0.8 * len(rows))
        tr, te = perm[:n_train], perm[n_train:]
        out = ([rows[i]["text"] for i in tr], [rows[i]["label"] for i in tr], [rows[i]["text"] for i in te], [rows[i]["label"] for i in te])
    elif name == "imdb":
        rows = _read_csv(data / "classification" / "imdb_50k.csv.gz")
        tr = [r for r in rows if r["split"] == "train"]
        te = [r for r in rows if r["split"] == "test"]
        out = ([r["review"] for r in tr], [r["sentiment"] for r in tr], [r["review"] for r in te], [r["sentiment"] for r in te])
    elif name == "movies":
        # Pang & Lee's sentence polarity v2.0 (NLTK movie_reviews): 1,000 pos + 1,000 neg reviews,
        # no official split: a fixed 80/20 split (permutation seed 0), as for SMS
        import zipfile

        with zipfile.ZipFile(data / "corpora" / "movie_reviews.zip") as z:
            names = sorted(n for n in z.namelist() if n.endswith(".txt") and n.split("/")[1] in ("pos", "neg"))
            rows = [{"text": z.read(n).decode("utf-8"), "label": n.split("/")[1]} for n in names]
        perm = np.random.default_rng(0).permutation(len(rows))
        n_train = round(0.8 * len(rows))
        tr, te = perm[:n_train], perm[n_train:]
        out = ([rows[i]["text"] for i in tr], [rows[i]["label"] for i in tr], [rows[i]["text"] for i in te], [rows[i]["label"] for i in te])
    else:
        raise SystemExit(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if limit:
        g = np.random.default_rng(1)
        a = np.sort(g.choice(len(out[0]), min(limit, len(out[0])), replace=False))
        b = np.sort(g.choice(len(out[2]), min(limit, len(out[2])), replace=False))
        out = ([out[0][i] for i in a], [out[1][i] for i in a], [out[2][i] for i in b], [out[3][i] for i in b])
    return out


def load_blogs(data: Path, limit_users: int | None = None):
    """(train texts, train authors, test texts, test authors): one held-out post per blogger with
    at least 2 non-empty posts (seed 0); the rest is the attacker's clean training data."""
    from deniable.evaluation import split_by_author
    from deniable.text import words_of

    rows = _read_csv(data / "users" / "blog_authorship_3k_users.csv.gz")
    rows = [r for r in rows if words_of(r["text"])]
    if limit_users:
        keep = set(sorted({r["user_id"] for r in rows})[:limit_users])
        rows = [r for r in rows if r["user_id"] in keep]
    texts = [r["text"] for r in rows]
    authors = np.array([int(r["user_id"]) for r in rows])
    tr, te = split_by_author(authors, test_per_author=1, min_texts=2, rng=0)
    return [texts[i] for i in tr], authors[tr], [texts[i] for i in te], authors[te]


# -- mechanisms ---------------------------------------------------------------------------------
def compute_ratios(path: Path) -> None:
    import deniable
    from deniable.calibration import equivalent_epsilon

    emb = deniable.load_embedding()
    ref = deniable.Madlib(emb, epsilon=1.0)
    out: dict[str, float | None] = {"madlib": 1.0}
    for name in deniable.available_mechanisms():
        if name == "madlib":
            continue
        t = time.time()
        try:
            out[name] = float(equivalent_epsilon(1.0, ref, deniable.get_mechanism(name, emb, epsilon=1.0), aggregate="avg"))
        except Exception as exc:  # a mechanism whose metric has no finite privacy ratio
            out[name] = None
            print(f"{name}: no privacy ratio ({type(exc).__name__}: {exc})", flush=True)
        print(f"R(madlib, {name}) = {out[name]} ({time.time() - t:.1f} s)", flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


#: Mechanisms whose numpy sampler takes ``index=`` ("exact" or "exact-bf16": the same nearest
#: neighbour, so the same outputs for a seed; see deniable.neighbors.bf16).
INDEXED = ("madlib", "mahalanobis", "vickrey")


def build_mechanism(name: str, epsilon: float, device: str | None = None, index: str = "exact") -> Any:
    """Mechanism ``name`` at ``epsilon``; with a ``device`` ("cuda", or "cpu" in tests) the
    library's torch backend where the mechanism has one (Madlib, Mahalanobis, Vickrey, BRR, TEM:
    same distributions, exact search, see docs/gpu.md), the numpy one otherwise; ``index`` is
    the numpy Madlib / Mahalanobis / Vickrey search (``"exact-bf16"``: same outputs, faster on
    CPUs with bfloat16 matrix units)."""
    import deniable

    if device is not None:
        from deniable.backends.torch_backend import torch_mechanisms

        if name in torch_mechanisms():
            return deniable.get_mechanism(name, epsilon=epsilon, backend="torch", device=device)
    if index != "exact" and name in INDEXED:
        return deniable.get_mechanism(name, epsilon=epsilon, index=index)
    return deniable.get_mechanism(name, epsilon=epsilon)


def _fitted(mech: Any, train_texts: Any) -> Any:
    """``mech`` fitted on the training texts where it learns from a corpus (SanText+ chooses its
    sensitive words as the rarest of the corpus it privatizes, as its authors do)."""
    return mech.fit(train_texts) if getattr(mech, "fittable", False) else mech


def _device(args: argparse.Namespace) -> str | None:
    return "cuda" if getattr(args, "gpu", False) else None


def _index(args: argparse.Namespace) -> str:
    return getattr(args, "index", None) or "exact"


# -- units --------------------------------------------------------------------------------------
_CACHE: dict = {}


def _data(args, name):
    if name not in _CACHE:
        _CACHE[name] = load_blogs(Path(args.data), args.limit_users) if name == "blogs" else load_dataset(name, Path(args.data), args.limit)
    return _CACHE[name]


def run_classification_unit(args, dname, mname, level, eps, seed) -> dict:
    from deniable.evaluation import TextClassifier
    from deniable.evaluation.experiment import evaluate_mechanism

    xtr, ytr, xte, yte = _data(args, dname)
    mech = None if mname == "none" else _fitted(build_mechanism(mname, eps, _device(args), _index(args)), xtr)
    rec = {"dataset": dname, "mechanism": mname, "level": level, "epsilon": eps, "seed": seed, "repr": "none" if mech is None else repr(mech),
           "load_before": os.getloadavg()[0]}
    if args.max_nw and mech is not None:
        rec["max_n_w"] = level  # the level is a worst-case N_w target, not a Madlib ε
    cpu0 = time.process_time()
    res = evaluate_mechanism(mech, xtr, ytr, xte, yte, rng=np.random.default_rng([seed, 12, int(round(level * 1000))]),
                             classifier=TextClassifier(alpha=args.alpha, tol=1e-6), min_simulations=args.min_simulations, samples=args.samples,
                             audit_classifier=TextClassifier(alpha=args.audit_alpha, tol=1e-6) if args.audit_alpha else None,
                             exact_inversion=False)  # once per cell, not per seed: --exact-inversion
    res.pop("mechanism", None)
    res.pop("epsilon", None)
    rec.update(res)
    rec["cpu_s"] = time.process_time() - cpu0  # CPU seconds of this process (all its threads)
    rec["load_after"] = os.getloadavg()[0]
    return rec


def run_authorship_unit(args, mname, level, eps, seed) -> dict:
    from deniable.evaluation import AuthorProfiles, authorship_attack

    xtr, atr, xte, ate = _data(args, "blogs")
    if "profiles" not in _CACHE:
        t = time.time()
        _CACHE["profiles"] = AuthorProfiles().fit(xtr, atr)
        _CACHE["profiles_s"] = time.time() - t
    t0 = time.time()
    mech = None if mname == "none" else _fitted(build_mechanism(mname, eps, _device(args), _index(args)), xtr)
    res = authorship_attack(mech, xtr, atr, xte, ate, model=_CACHE["profiles"], rng=np.random.default_rng([seed, 34, int(round(level * 1000))]), ks=(1, 10))
    rec = {"dataset": "blogs", "mechanism": mname, "level": level, "epsilon": eps, "seed": seed, "repr": "none" if mech is None else repr(mech)}
    rec["authorship"] = {"top1": res.topk[1], "top1_ci": res.topk_ci[1], "top10": res.topk[10], "top10_ci": res.topk_ci[10],
                         "chance1": res.chance[1], "chance10": res.chance[10], "n_test": res.n_test, "n_authors": res.n_authors}
    rec["seconds"] = time.time() - t0
    rec["profiles_s"] = _CACHE.get("profiles_s")
    return rec


def _worker(payload):
    args, unit = payload
    try:
        if unit[0] == "blogs":
            return run_authorship_unit(args, *unit[1:])
        return run_classification_unit(args, *unit)
    except Exception as exc:  # report and go on: one failing mechanism must not stop the grid
        import traceback

        return {"error": f"{type(exc).__name__}: {exc}", "unit": list(unit), "traceback": traceback.format_exc()}


def units(args, ratios: dict) -> list[tuple]:
    import deniable

    mechs = args.mechanisms.split(",") if args.mechanisms else deniable.available_mechanisms()
    levels = [float(x) for x in args.levels.split(",")]
    seeds = [int(x) for x in args.seed_list.split(",")] if getattr(args, "seed_list", "") else list(range(args.seeds))
    baseline = 0 in seeds and not getattr(args, "no_baseline", False)  # the non-private unit is seed 0's
    out = []
    if args.max_nw:  # levels are worst-case N_w targets; each mechanism at the ε its calibration picks
        taus = [float(x) for x in args.max_nw.split(",")]
        eps, infeasible = {}, {}
        for m in mechs:
            for t in taus:
                try:
                    eps[m, t] = nw_epsilon(m, t)
                except ValueError as exc:  # no ε meets the target (e.g. SanText+ keeps 1 − p of its frequent words)
                    infeasible[f"{m} {t:g}"] = str(exc)
                    print(f"skipping {m} at max N_w {t:g}: {exc}", flush=True)
        if infeasible and getattr(args, "out", None):
            path = Path(args.out) / "infeasible.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            old = json.loads(path.read_text()) if path.exists() else {}
            path.write_text(json.dumps({**old, **infeasible}, indent=1, sort_keys=True))
        for dname in args.datasets.split(","):
            out += [(dname, "none", 0.0, None, 0)] if baseline else []
            out += [(dname, m, t, eps[m, t], seed) for seed in seeds for t in taus for m in mechs if (m, t) in eps]
        return out
    for dname in args.datasets.split(","):
        out += [(dname, "none", 0.0, None, 0)] if baseline else []
        for seed in seeds:
            for level in levels:
                for m in mechs:
                    if m not in ratios and m != "madlib":
                        raise SystemExit(f"no privacy ratio for {m!r} in --ratios; run --compute-ratios first")
                    r = 1.0 if m == "madlib" else ratios[m]
                    if r is None:  # no finite ratio: run at the level's ε ("same ε", not a match)
                        r = 1.0
                    out.append((dname, m, level, float(r * level), seed))
    return out


def nw_epsilon(name: str, max_n_w: float) -> float:
    """The largest ε at which no vocabulary word of the bundled embedding comes back unchanged
    with probability above ``max_n_w`` (the ε-selection work's target: shipped calibrations for
    Madlib, Mahalanobis, TEM and BRR; computed once and cached for the other mechanisms)."""
    from deniable.calibration.targets import mechanism_for_target

    return float(mechanism_for_target(name, max_n_w=max_n_w, progress=True).epsilon)


def _mech_rank(m: str) -> int:
    return MECH_ORDER.index(m) if m in MECH_ORDER else len(MECH_ORDER)


def _dataset_rank(d: str) -> int:
    return DATASETS.index(d) if d in DATASETS else len(DATASETS)


def _key(r: dict) -> tuple:
    return (r["dataset"], r["mechanism"], float(r["level"]), int(r["seed"]))


def run(args) -> None:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    res_path = out_dir / "results.jsonl"
    done = set()
    if res_path.exists():
        for line in res_path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if "error" not in r:
                    done.add(_key(r))
    if args.gpu and _index(args) != "exact":
        raise SystemExit("--index applies to the numpy samplers; --gpu uses the torch backend's own exact search: pass one of them")
    if args.gpu:  # fail here, not once per unit
        from deniable.backends.torch_backend import resolve_device

        try:
            resolve_device("cuda")
        except (ImportError, RuntimeError) as exc:
            raise SystemExit(f"--gpu: {exc}") from None
    ratios = json.loads(Path(args.ratios).read_text()) if args.ratios else {"madlib": 1.0, "tem": 1.0}
    todo = [u for u in units(args, ratios) if (u[0], u[1], float(u[2]), int(u[4])) not in done]
    # heaviest first so the pool stays busy at the end
    # fast mechanisms over every seed first (a partial run still covers their whole grid)
    mech_rank = {m: i for i, m in enumerate(args.mechanisms.split(","))} if args.mechanisms else {}
    todo.sort(key=lambda u: (SLOW.get(u[1], 0), u[4], u[2], mech_rank.get(u[1], 0)))
    print(f"{len(done)} units done, {len(todo)} to run; machine {platform.platform()}, cpus {os.cpu_count()}, jobs {args.jobs}, gpu {args.gpu}", flush=True)
    from tqdm import tqdm

    t0 = time.time()
    _warm_caches({u[1] for u in todo if u[1] != "none"})
    print(f"caches ready ({time.time() - t0:.1f} s)", flush=True)
    if args.jobs > 1:  # one BLAS thread per worker process (spawned workers inherit the environment)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"
    payloads = [(args, u) for u in todo]
    with res_path.open("a") as f:
        if args.jobs > 1:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            with ctx.Pool(args.jobs, maxtasksperchild=None) as pool:
                it = pool.imap_unordered(_worker, payloads)
                for rec in tqdm(it, total=len(payloads), desc="units", file=sys.stdout, mininterval=5):
                    _emit(f, rec, t0)
        else:
            for p in tqdm(payloads, desc="units", file=sys.stdout, mininterval=5):
                _emit(f, _worker(p), t0)
    print(f"total {time.time() - t0:.1f} s", flush=True)


def _warm_caches(names) -> None:
    """Build each mechanism's disk-cached tables once (TEM neighbourhoods, ...) before the
    workers start, so they load instead of all building them at once."""
    import deniable

    emb = deniable.load_embedding()
    for name in sorted(names):
        mech = deniable.get_mechanism(name, emb, epsilon=1.0)
        if hasattr(mech, "precompute"):
            mech.precompute()
        mech.sample_ids(np.arange(10), rng=0)


def _emit(f, rec: dict, t0: float) -> None:
    f.write(json.dumps(rec) + "\n")
    f.flush()
    if "error" in rec:
        print(f"[{time.time() - t0:7.1f}s] ERROR {rec['unit']}: {rec['error']}", flush=True)
        return
    extra = ""
    if "inversion" in rec:
        extra = f" inv top1 {rec['inversion']['top1']:.3f}"
    if "mia" in rec:
        extra += f" mia {rec['mia']['auc']:.3f}"
    if "authorship" in rec:
        extra = f" auth top1 {rec['authorship']['top1']:.4f} top10 {rec['authorship']['top10']:.4f}"
    acc = f" acc {rec['acc_clean']:.4f}/{rec['acc_priv']:.4f}" if "acc_clean" in rec else ""
    print(f"[{time.time() - t0:7.1f}s] {rec['dataset']} {rec['mechanism']} L={rec['level']} eps={rec['epsilon']} seed={rec['seed']}:{acc}{extra} ({rec['seconds']:.1f} s)", flush=True)


# -- the Bayes-optimal inversion adversary (closed-form mechanisms) -----------------------------
def exact_inversion(args) -> None:
    """For every (data set, mechanism, level) of the grid that ``args`` selects whose mechanism has
    closed-form probabilities: the Bayes-optimal adversary (prior = training-token frequencies)
    on the test tokens, ``inversion_attack(method="exact")``, one line per cell in
    ``OUT/exact_inversion.jsonl`` (resumable). Its expected rates are exact and depend on ε only,
    not on a unit's seed, so one line per cell serves every seed of the grid."""
    import deniable
    from deniable.evaluation import inversion_attack, token_ids
    from deniable.evaluation.inversion import has_exact_probabilities

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "exact_inversion.jsonl"
    # a cell is done when it ran at the same ε (new --ratios or calibrations: computed again)
    done = {(x["dataset"], x["mechanism"], float(x["level"]), round(float(x["epsilon"]), 12))
            for x in (json.loads(line) for line in (path.read_text().splitlines() if path.exists() else []) if line.strip())}
    ratios = json.loads(Path(args.ratios).read_text()) if args.ratios else {"madlib": 1.0, "tem": 1.0}
    cells = sorted({(d, m, float(lv), e) for d, m, lv, e, _ in units(args, ratios) if m != "none" and d != "blogs"}, key=lambda c: (c[0], c[2], c[1]))
    from tqdm import tqdm

    with path.open("a") as f:
        for d, m, level, eps in tqdm(cells, desc="exact inversion", file=sys.stdout, mininterval=5):
            if (d, m, level, round(float(eps), 12)) in done:
                continue
            mech = deniable.get_mechanism(m, epsilon=eps)
            if not has_exact_probabilities(mech):
                continue
            t = time.time()
            xtr, _, xte, _ = _data(args, d)
            mech = _fitted(mech, xtr)
            x_tr, x_te = token_ids(mech, xtr), token_ids(mech, xte)
            prior = np.bincount(x_tr[x_tr >= 0], minlength=mech.n_words).astype(np.float64)
            inv = inversion_attack(mech, x_te, prior=prior, method="exact", k=5, rng=np.random.default_rng([13, int(round(level * 1000))]))
            rec = {"dataset": d, "mechanism": m, "level": level, "epsilon": eps, "inversion_exact": {
                k: v for k, v in inv.as_dict().items() if k not in ("mechanism", "extra")}, "seconds": time.time() - t}
            if args.max_nw:
                rec["max_n_w"] = level
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(f"{d} {m} L={level:g} eps={eps:.4g}: exact top-1 {inv.top1:.4f} (expected {inv.expected_top1:.4f}) ({rec['seconds']:.0f} s)", flush=True)


# -- similarity (needs deniable[eval]) ----------------------------------------------------------
def similarity(args) -> None:
    from deniable.evaluation import semantic_similarity
    from deniable.evaluation.similarity import load_sentence_model

    out_dir = Path(args.out)
    res_path = out_dir / "results.jsonl"
    sim_path = out_dir / "similarity.jsonl"
    done = set()
    if sim_path.exists():
        done = {_key(json.loads(line)) for line in sim_path.read_text().splitlines() if line.strip()}
    recs = [json.loads(line) for line in res_path.read_text().splitlines() if line.strip()]
    recs = [r for r in recs if "sample" in r and _key(r) not in done]
    model = load_sentence_model(args.similarity_model)
    originals: dict = {}
    from tqdm import tqdm

    with sim_path.open("a") as f:
        for r in tqdm(recs, desc="similarity", file=sys.stdout, mininterval=5):
            d = r["dataset"]
            if d not in originals:
                originals[d] = _data(args, d)[2]
            n = min(len(r["sample"]), args.similarity_n)
            if (d, n) not in originals:
                originals[(d, n)] = model.encode(originals[d][:n], batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
            t = time.time()
            res = semantic_similarity(originals[d][:n], r["sample"][:n], model=model, batch_size=32, original_embeddings=originals[(d, n)])
            f.write(json.dumps({"dataset": d, "mechanism": r["mechanism"], "level": r["level"], "epsilon": r["epsilon"], "seed": r["seed"],
                                "similarity": res.mean, "similarity_ci": res.ci, "n": res.n, "seconds": time.time() - t}) + "\n")
            f.flush()


# -- summary ------------------------------------------------------------------------------------
def _ci95(values) -> str:
    v = np.asarray([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], dtype=float)
    if v.size == 0:
        return "—"
    if v.size == 1:
        return f"{v[0]:.1f}"
    import scipy.stats

    half = float(scipy.stats.t.ppf(0.975, v.size - 1)) * v.std(ddof=1) / math.sqrt(v.size)
    return f"{v.mean():.1f} ± {half:.1f}"


def summarize(out_dirs: Path | list[Path], plots: bool = True, plot_dir: Path | None = None, plot_prefix: str = "privacy_utility_",
              page: Path | None = None, keep_page: Path | None = None) -> str:
    """Markdown tables (mean ± 95 % t-half-width over seeds) of one or more result folders;
    a unit present in several folders counts once. Plots go to ``plot_dir`` (default: the first
    folder) as ``<plot_prefix><data set>.png`` (``..._nw.png`` for N_w targets).

    With ``page`` (a results page, e.g. docs/results/evaluation.md), the one-seed rows of its
    tables count as seed-0 units (:func:`page_records`) where no folder has that unit, so new
    seeds of a cell whose first seed has no raw record combine with it; the page's other rows
    count as present in the missing-units list (:func:`update_doc` keeps them), and the "raw
    records" section (:func:`records_provenance`, when the folders hold any unit) says which rows
    rest on records of the folders: summarize every committed folder for the page's list. With ``keep_page``
    (a folder) the read-back records that were combined are also appended to its
    ``results.jsonl`` / ``similarity.jsonl`` (:func:`save_page_records`): once the page shows the
    combined row, its seed-0 values can no longer be read back, and that folder keeps them."""
    dirs = [Path(d) for d in (out_dirs if isinstance(out_dirs, list) else [out_dirs])]
    recs, seen = [], set()
    sims: dict = defaultdict(list)
    infeasible: dict = {}  # "mechanism target" -> why no ε meets it (--max-nw)
    exact: dict = {}  # (data set, mechanism, level) -> the Bayes-optimal adversary (--exact-inversion)
    for out_dir in dirs:
        res_path = out_dir / "results.jsonl"  # a folder may hold only exact_inversion.jsonl
        for line in res_path.read_text().splitlines() if res_path.exists() else []:
            r = json.loads(line) if line.strip() else {"error": "blank"}
            if "error" not in r and _key(r) not in seen:
                seen.add(_key(r))
                recs.append(r)
        if (out_dir / "infeasible.json").exists():
            infeasible.update(json.loads((out_dir / "infeasible.json").read_text()))
        if (out_dir / "exact_inversion.jsonl").exists():
            for line in (out_dir / "exact_inversion.jsonl").read_text().splitlines():
                if line.strip():
                    x = json.loads(line)
                    exact[(x["dataset"], x["mechanism"], float(x["level"]))] = x["inversion_exact"]  # the latest line of a cell
        if (out_dir / "similarity.jsonl").exists():
            for line in (out_dir / "similarity.jsonl").read_text().splitlines():
                s = json.loads(line)
                sims[(s["dataset"], s["mechanism"], float(s["level"]))].append(s["similarity"])
    page_cells: dict = {}  # (data set, mechanism, level, N_w-matched) -> seeds of a page row
    if page is not None:
        one_seed, page_cells = page_records(page.read_text(encoding="utf-8").split("\n"))
        new_seeds: dict = defaultdict(set)
        for r in recs:
            new_seeds[(*_key(r)[:3], "max_n_w" in r)].add(int(r["seed"]))
        for (d, m, lv, nw), n in page_cells.items():  # a several-seed row: its seeds are not on the page
            got = new_seeds.get((d, m, lv, nw), set())
            if n > 1 and got and not set(range(n)) <= got:
                print(f"kept the page's {n}-seed row of {d} {m} {lv:g}{' (N_w)' if nw else ''}: new seeds {sorted(got)} "
                      "cannot be combined with it (its per-seed values are not on the page)", file=sys.stderr)
                recs = [r for r in recs if not (_key(r)[:3] == (d, m, lv) and ("max_n_w" in r) == nw)]
        new_cells = {_key(r)[:3] for r in recs}
        combined = []
        for r in one_seed:
            if _key(r) not in seen and _key(r)[:3] in new_cells:  # only where it combines with new seeds
                seen.add(_key(r))
                combined.append(dict(r))
                recs.append(r)
                if "similarity" in r:
                    sims[_key(r)[:3]].append(r.pop("similarity"))
        if keep_page is not None and combined:
            save_page_records(Path(keep_page), combined)
    out_dir = dirs[0]
    groups: dict = defaultdict(list)
    for r in recs:
        groups[(r["dataset"], r["mechanism"], float(r["level"]))].append(r)
    order = _mech_rank
    lines = []
    is_nw = lambda k: any("max_n_w" in r for r in groups[k])  # matched by an N_w target (--max-nw)
    tables = [(d, nw) for d in DATASETS for nw in (False, True)
              if any(k[0] == d and k[1] != "none" and is_nw(k) == nw for k in groups) or (not nw and (d, "none", 0.0) in groups)]
    for d, nw in tables:
        keys = sorted((k for k in groups if k[0] == d and (k[1] == "none" or is_nw(k) == nw)), key=lambda k: (k[2], order(k[1])))
        lines += [f"### {d}" + (" — matched by a worst-case N_w target" if nw else ""), ""]
        level_col = "max N_w target" if nw else "level (Madlib ε)"
        if d == "blogs":
            lines += [f"| {level_col} | mechanism | ε | seeds | top-1 % | top-10 % |", "|---:|---|---:|---:|---:|---:|"]
            for k in keys:
                rs = groups[k]
                lines.append(f"| {k[2]:g} | {k[1]} | {rs[0]['epsilon'] or 0:.4g} | {len(rs)} | {_ci95([100 * r['authorship']['top1'] for r in rs])} | "
                             f"{_ci95([100 * r['authorship']['top10'] for r in rs])} |")
        else:
            has_audit = any("mia_audit" in r for k in keys for r in groups[k])
            lines += [f"| {level_col} | mechanism | ε | seeds | words changed % | acc. clean test % | acc. privatized test % | "
                      "read as is % | inversion top-1 % | top-5 % | rare top-1 % | MIA AUC % |" + (" MIA AUC audit model % |" if has_audit else "") + " similarity % |",
                      "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if has_audit else "") + "---:|"]
            for k in keys:
                rs = groups[k]
                inv = [r.get("inversion") for r in rs]
                get = lambda name: [100 * i[name] for i in inv if i] if any(inv) else []
                mia = _ci95([r["mia"]["auc"] * 100 for r in rs])
                audit = _ci95([r["mia_audit"]["auc"] * 100 for r in rs if "mia_audit" in r])
                audit_cell = f" {audit} |" if has_audit else ""
                sim = sims.get(k, [])
                lines.append(
                    f"| {k[2]:g} | {k[1]} | {rs[0]['epsilon'] or 0:.4g} | {len(rs)} | {_ci95([100 * r['changed_train'] for r in rs])} | "
                    f"{_ci95([100 * r['acc_clean'] for r in rs])} | {_ci95([100 * r['acc_priv'] for r in rs])} | {_ci95(get('unchanged'))} | {_ci95(get('top1'))} | "
                    f"{_ci95(get('topk'))} | {_ci95(get('rare_top1'))} | {mia} |{audit_cell} {_ci95([100 * s for s in sim]) if sim else '—'} |"
                )
        if nw and infeasible:
            lines += ["", "No ε meets these targets (so they have no row): " + "; ".join(
                f"{k.split()[0]} at {k.split()[1]} ({v.split('(', 1)[1].split(')')[0] if '(' in v else v})" for k, v in sorted(infeasible.items())) + "."]
        lines.append("")
    for r in recs:  # units run since evaluate_mechanism adds the exact adversary itself
        if "inversion_exact" in r:
            exact.setdefault((r["dataset"], r["mechanism"], float(r["level"])), r["inversion_exact"])
    lines += exact_inversion_table(exact, groups, order)
    if page is not None and any(not r.get("from_page") for r in recs):  # a list relative to no records would be empty
        lines += records_provenance(tables, groups, page_cells, exact)
    present = recs + [{"dataset": d, "mechanism": m, "level": lv, "seed": i}
                      for (d, m, lv, nw), n in page_cells.items() if not nw for i in range(n)]
    lines += missing_units(present)
    lines += ["### time per unit (median over units; seconds)", "",
              "| data set | mechanism | units | wall | CPU | privatizing | fit + tokenizing | inversion | MIA | load avg |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    med = lambda rs, key: f"{np.median([r[key] for r in rs]):.0f}" if all(key in r for r in rs) else "—"
    by_dm: dict = defaultdict(list)
    for r in recs:
        by_dm[(r["dataset"], r["mechanism"])].append(r)
    for (d, m) in sorted(by_dm, key=lambda k: (_dataset_rank(k[0]), order(k[1]))):
        rs = by_dm[(d, m)]
        load = f"{np.median([r['load_before'] for r in rs]):.1f}" if all("load_before" in r for r in rs) else "—"
        lines.append(f"| {d} | {m} | {len(rs)} | {med(rs, 'seconds')} | {med(rs, 'cpu_s')} | {med(rs, 'privatize_s')} | {med(rs, 'fit_s')} | "
                     f"{med(rs, 'inversion_s')} | {med(rs, 'mia_s')} | {load} |")
    lines.append("")
    text = "\n".join(lines)
    if plots:
        _plots(plot_dir or out_dir, {d: rows for d, rows in _summary_tables(text).items() if _section_dataset(d)}, plot_prefix)
    return text


def records_provenance(tables: list[tuple[str, bool]], groups: dict, page_cells: dict, exact: dict) -> list[str]:
    """Markdown: per grid table of the page after the merge, which rows rest on raw records of
    the summarized folders (every seed), which only partly (some seeds read back from the page's
    one-seed rows, ``"from_page"``), and which on none (the page is their only record); and how
    many Bayes-optimal cells have a record. ``tables``: the (data set, N_w-matched) grids of the
    summary; ``groups``: its units per (data set, mechanism, level); ``page_cells``: the seed
    count of every page row (:func:`page_records`); ``exact``: the Bayes-optimal cells found."""
    lines = ["### raw records", "", "```"]
    for d, nw in sorted({*tables, *((k[0], k[3]) for k in page_cells)}, key=lambda t: (_dataset_rank(t[0]), t[1])):
        rows = {(m, lv) for (dd, m, lv, w) in page_cells if dd == d and w == nw}
        rows |= {(k[1], k[2]) for k, rs in groups.items() if k[0] == d and (k[1] == "none" or any(("max_n_w" in r) == nw for r in rs))}
        kinds: dict[str, list[tuple[str, float]]] = {"raw": [], "part": [], "none": []}
        for m, lv in rows:
            rs = [r for r in groups.get((d, m, lv), []) if m == "none" or ("max_n_w" in r) == nw]
            on_page = page_cells.get((d, m, lv, nw), page_cells.get((d, m, lv, not nw), 0) if m == "none" else 0)
            from_folder = [r for r in rs if not r.get("from_page")]
            if not rs or len(rs) < on_page or not from_folder:  # the page's row stays, or only read-back values
                kinds["none"].append((m, lv))
            else:
                kinds["raw" if len(from_folder) == len(rs) else "part"].append((m, lv))

        def listing(cells: list[tuple[str, float]]) -> str:
            by_m: dict[str, list[float]] = defaultdict(list)
            for m, lv in cells:
                by_m[m].append(lv)
            return "; ".join(f"{m} {', '.join(f'{x:g}' for x in sorted(v))}" for m, v in sorted(by_m.items(), key=lambda kv: _mech_rank(kv[0])))

        name = d + (" (N_w targets)" if nw else "")
        lines.append(f"{name}: {len(rows)} rows; {len(kinds['raw'])} from raw records, {len(kinds['part'])} partly, {len(kinds['none'])} without a raw record")
        if kinds["raw"]:
            lines.append(f"  every seed from raw records: {listing(kinds['raw'])}")
        if kinds["part"]:
            lines.append(f"  some seeds from raw records, the others read back from this page: {listing(kinds['part'])}")
    lines.append(f"Bayes-optimal inversion: {len(exact)} cells with a raw record (exact_inversion.jsonl or a unit's inversion_exact); "
                 "the page's other rows have none")
    return [*lines, "```", ""]


def _summary_sections(summary: str) -> dict[str, str]:
    """``summarize``'s output as section name -> its body."""
    import re

    return dict(re.findall(r"### ([^\n]+)\n\n(.*?)(?=\n### |\Z)", summary, re.S))


def _summary_tables(summary: str) -> dict[str, list[str]]:
    """``summarize``'s output as section name -> its table rows."""
    return {name: [r for r in body.strip().split("\n") if r.startswith("|")] for name, body in _summary_sections(summary).items()}


# -- the results page as a record -------------------------------------------------------------
def _row_cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _value(cell: str) -> tuple[float, float | None] | None:
    """A table cell "x", "x ± h" or "—" as (x, h) (h None for one seed), None for "—"."""
    if cell in ("—", ""):
        return None
    mean, _, half = cell.partition(" ± ")
    return float(mean), (float(half) if half else None)


def _table_span(lines: list[str], i: int) -> tuple[int, int] | None:
    """Line range [j, e) of the first Markdown table under the heading at line ``i`` (before the
    next "## " heading), None when there is none."""
    nxt = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
    j = next((k for k in range(i + 1, nxt) if lines[k].startswith("|")), None)
    if j is None:
        return None
    e = j
    while e < len(lines) and lines[e].startswith("|"):
        e += 1
    return j, e


def _page_tables(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Summary section name -> line range of its table on the page (sections that have one)."""
    out = {}
    for prefix, name in DOC_SECTIONS.items():
        i = next((k for k, line in enumerate(lines) if line.startswith(prefix)), None)
        span = None if i is None else _table_span(lines, i)
        if span is not None:
            out[name] = span
    return out


def _section_dataset(name: str) -> tuple[str, bool] | None:
    """("imdb", True) for "imdb — matched by a worst-case N_w target"; None for the tables that
    are not one data set's grid (Bayes-optimal adversary, time per unit)."""
    d, _, rest = name.partition(" — ")
    return (d, bool(rest)) if d in DATASETS else None


def page_records(lines: list[str]) -> tuple[list[dict], dict]:
    """The results page's grid tables read back: a unit record (seed 0, ``"from_page": True``,
    values to the page's 0.1-point rounding) for every one-seed row, and the seed count of every
    row, keyed (data set, mechanism, level, N_w-matched). A row with several seeds cannot be split
    into its seeds: it only counts as present. This is how cells without a committed raw record
    combine with new seeds."""
    recs, cells = [], {}
    for name, (j, e) in _page_tables(lines).items():
        ds = _section_dataset(name)
        if ds is None:
            continue
        d, nw = ds
        head = _row_cells(lines[j])
        col = {h: i for i, h in enumerate(head)}
        for row in lines[j + 2 : e]:
            c = _row_cells(row)
            level, mech, n = float(c[0]), c[1], int(c[col["seeds"]])
            cells[d, mech, level, nw] = n
            if n != 1:
                continue
            def v(h: str, c: list[str] = c) -> float | None:  # a percentage cell as a fraction
                x = _value(c[col[h]]) if h in col else None
                return None if x is None else x[0] / 100

            eps = float(c[col["ε"]])
            r: dict[str, Any] = {"dataset": d, "mechanism": mech, "level": level, "epsilon": eps if mech != "none" else None, "seed": 0, "from_page": True}
            if nw and mech != "none":
                r["max_n_w"] = level
            if d == "blogs":
                r["authorship"] = {"top1": v("top-1 %"), "top10": v("top-10 %")}
            else:
                r.update(changed_train=v("words changed %"), acc_clean=v("acc. clean test %"), acc_priv=v("acc. privatized test %"),
                         mia={"auc": v("MIA AUC %")})
                r["inversion"] = None if v("inversion top-1 %") is None else {
                    "unchanged": v("read as is %"), "top1": v("inversion top-1 %"), "topk": v("top-5 %"), "rare_top1": v("rare top-1 %")}
                if v("MIA AUC audit model %") is not None:
                    r["mia_audit"] = {"auc": v("MIA AUC audit model %")}
                if v("similarity %") is not None:
                    r["similarity"] = v("similarity %")
            recs.append(r)
    return recs, cells


def save_page_records(folder: Path, records: list[dict]) -> None:
    """Append read-back page records (:func:`page_records`) to ``folder/results.jsonl`` and their
    similarity to ``folder/similarity.jsonl``, skipping units already there."""
    folder.mkdir(parents=True, exist_ok=True)
    res, sim = folder / "results.jsonl", folder / "similarity.jsonl"
    have = {_key(json.loads(x)) for x in (res.read_text().splitlines() if res.exists() else []) if x.strip()}
    new = [r for r in records if _key(r) not in have]
    with res.open("a") as f:
        for r in new:
            f.write(json.dumps({k: v for k, v in r.items() if k != "similarity"}) + "\n")
    with sim.open("a") as f:
        for r in new:
            if r.get("similarity") is not None:
                f.write(json.dumps({k: r[k] for k in ("dataset", "mechanism", "level", "epsilon", "seed")} | {"similarity": r["similarity"]}) + "\n")
    if new:
        print(f"saved {len(new)} seed-0 record(s) read back from the page to {res} (keep that folder in --summarize)", file=sys.stderr)


def _row_key(name: str, row: str) -> tuple:
    """A table row's identity: (level, mechanism) in a grid table, (data set, level, mechanism)
    in the Bayes-optimal one, (data set, mechanism) in the time table."""
    c = _row_cells(row)
    if _section_dataset(name) is not None:
        return (float(c[0]), c[1])
    if name.startswith("Bayes-optimal"):
        return (c[0], float(c[1]), c[2])
    return (c[0], c[1])


def _row_order(name: str, key: tuple) -> tuple:
    """The order ``summarize`` writes a table's rows in, for a :func:`_row_key`."""
    if _section_dataset(name) is not None:
        return (key[0], _mech_rank(key[1]))
    if name.startswith("Bayes-optimal"):
        return (_dataset_rank(key[0]), key[1] < 1, key[1], _mech_rank(key[2]))
    return (_dataset_rank(key[0]), _mech_rank(key[1]))


def merge_rows(name: str, page_rows: list[str], new_rows: list[str]) -> list[str]:
    """Table ``name``: the page's rows with those of ``new_rows`` (header and separator first)
    replacing the rows they share a key with (:func:`_row_key`), in the summary's order.

    Kept page rows are re-laid to the new header by column name ("—" in a column they lack), so
    an added column (e.g. the audit model's) cannot shift their cells. A grid row is never
    replaced by one over fewer seeds (the page row is kept, with a warning): the page may be the
    only record of its seeds. The time table keeps the page's row where both have one: its
    medians cover units that have no committed raw record."""
    head = (new_rows or page_rows)[:2]
    if page_rows and head[0] != page_rows[0]:
        old_col = {h: i for i, h in enumerate(_row_cells(page_rows[0]))}
        relaid = []
        for r in page_rows[2:]:
            c = _row_cells(r)
            relaid.append("| " + " | ".join(c[old_col[h]] if h in old_col else "—" for h in _row_cells(head[0])) + " |")
        page_rows = page_rows[:2] + relaid
    seeds = _row_cells(head[0]).index("seeds") if "seeds" in _row_cells(head[0]) else None
    rows = {_row_key(name, r): r for r in page_rows[2:]}
    for r in new_rows[2:]:
        k = _row_key(name, r)
        if k in rows and name.startswith("time per unit"):
            continue
        if k in rows and seeds is not None and int(_row_cells(r)[seeds]) < int(_row_cells(rows[k])[seeds]):
            print(f"kept the page's row {rows[k]!r}: the new one is over fewer seeds", file=sys.stderr)
            continue
        rows[k] = r
    return head + [rows[k] for k in sorted(rows, key=lambda k: _row_order(name, k))]


#: Headings of docs/results/evaluation.md (prefixes) -> the summary section whose table follows them.
DOC_SECTIONS = {
    "## SMS Spam Collection": "sms",
    "## IMDb": "imdb",
    "## Movie reviews": "movies",
    "## Authorship attribution": "blogs",
    "## Matched by a worst-case N_w target (SMS": "sms — matched by a worst-case N_w target",
    "## Matched by a worst-case N_w target (movie": "movies — matched by a worst-case N_w target",
    "## Matched by a worst-case N_w target (IMDb": "imdb — matched by a worst-case N_w target",
    "## The Bayes-optimal inversion adversary": "Bayes-optimal inversion (mechanisms with closed-form probabilities)",
    "## Time per unit": "time per unit (median over units; seconds)",
}


def update_doc(doc: Path, summary: str, merge: bool = True, plot_prefix: str | None = None) -> list[str]:
    """Update, in the Markdown results page ``doc``, the first table after each heading of
    :data:`DOC_SECTIONS` from the matching table of ``summary`` (``summarize``'s output, best made
    with ``page=doc``) and replace the code block after "## What is missing" by the missing-units
    list and the one after "## Raw records" (when the page has that heading) by the list of rows
    with and without raw records; the prose is left alone. With ``merge`` (the default) a row of the page that the summary
    has no row for is kept (:func:`merge_rows`): the page is the record of units whose raw results
    are not committed; ``merge=False`` replaces each table whole. With ``plot_prefix``, the privacy–utility
    figures of the updated tables go beside the page as ``<plot_prefix><data set>[_nw].png``.
    Returns what was replaced and what was skipped (a section without results). A heading the page
    lacks is an error: the page and the script disagree."""
    sections = _summary_sections(summary)
    lines = doc.read_text(encoding="utf-8").split("\n")
    check_doc(doc, lines)
    report = []

    def heading(prefix: str) -> int:
        return next(k for k, line in enumerate(lines) if line.startswith(prefix))

    for prefix, name in DOC_SECTIONS.items():
        i = heading(prefix)
        if name not in sections:
            report.append(f"skipped {prefix!r}: no results for {name!r}")
            continue
        span = _table_span(lines, i)
        if span is None:
            raise SystemExit(f"{doc}:{i + 1}: no table under {lines[i]!r} to replace")
        j, e = span
        new_rows = [row for row in sections[name].strip().split("\n") if row.startswith("|")]
        try:
            lines[j:e] = merge_rows(name, lines[j:e], new_rows) if merge else new_rows
        except (ValueError, IndexError) as exc:  # a page row that is not one of this table's
            raise SystemExit(f"{doc}:{j + 1}: cannot merge the table under {lines[i]!r} ({exc}); "
                             "fix its rows or replace it whole (merge=False)") from None
        report.append(f"table under {lines[i]!r}")
    for section, title in (("missing units", "## What is missing"), ("raw records", "## Raw records")):
        if section not in sections:
            continue
        if section == "raw records" and not any(line.startswith(title) for line in lines):
            report.append(f"skipped the raw-records list: the page has no {title!r} heading")
            continue
        i = heading(title)
        nxt = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
        j = next((k for k in range(i, nxt) if lines[k] == "```"), None)
        e = next((k for k in range(j + 1, nxt) if lines[k] == "```"), None) if j is not None else None
        if e is None:
            raise SystemExit(f"{doc}:{i + 1}: no ``` block under {lines[i]!r} to replace")
        lines[j : e + 1] = sections[section].strip().split("\n")
        report.append(section)
    if plot_prefix is not None:
        _plots(doc.parent, {name: lines[j:e] for name, (j, e) in _page_tables(lines).items() if _section_dataset(name)}, plot_prefix)
    import shutil

    tmp = doc.with_name(doc.name + ".tmp")
    tmp.write_text("\n".join(lines), encoding="utf-8")
    shutil.copymode(doc, tmp)
    os.replace(tmp, doc)
    return report


def check_doc(doc: Path, lines: list[str] | None = None) -> None:
    """Exit naming the first heading of :data:`DOC_SECTIONS` (or "## What is missing") that the
    results page ``doc`` (its ``lines`` when already read) lacks: checked before anything (plots
    included) is written."""
    if lines is None:
        lines = doc.read_text(encoding="utf-8").split("\n")
    for prefix in [*DOC_SECTIONS, "## What is missing"]:
        if not any(line.startswith(prefix) for line in lines):
            raise SystemExit(f"{doc}: no heading starting with {prefix!r}; add it or change DOC_SECTIONS in {Path(__file__).name}")


def exact_inversion_table(exact: dict, groups: dict, order) -> list[str]:
    """Markdown: the Bayes-optimal adversary per cell next to the sampled one of the units."""
    if not exact:
        return []
    lines = ["### Bayes-optimal inversion (mechanisms with closed-form probabilities)", "",
             "| data set | level | mechanism | ε | expected top-1 % | measured top-1 % (95 % Wilson) | top-5 % | rare top-1 % | "
             "read as is % | prior only % | sampled adversary top-1 % |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in sorted(exact, key=lambda k: _row_order("Bayes-optimal", (k[0], k[2], k[1]))):
        x = exact[k]
        # the sampled adversary of units at this cell's ε only (a recalibrated N_w target can move ε)
        inv = [r["inversion"] for r in groups.get(k, []) if r.get("inversion") and math.isclose(float(r.get("epsilon") or 0), float(x["epsilon"]), rel_tol=1e-6)]
        lo, hi = x["top1_ci"]
        # "read as is": the identity guess on the same privatization as the measured column
        lines.append(f"| {k[0]} | {k[2]:g} | {k[1]} | {x['epsilon']:.4g} | {100 * x['expected_top1']:.1f} | {100 * x['top1']:.1f} "
                     f"({100 * lo:.1f}–{100 * hi:.1f}) | {100 * x['topk']:.1f} | {100 * x['rare_top1']:.1f} | "
                     f"{100 * x['unchanged']:.1f} | {100 * x['prior_top1']:.1f} | {_ci95([100 * i['top1'] for i in inv])} |")
    return lines + [""]


def missing_units(recs: list[dict], seeds: int = 3) -> list[str]:
    """Markdown list of the ratio-matched grid units (every registered mechanism × levels 2/10/20
    × seeds 0..seeds-1, authorship on the blogs included) that no folder has, per data set present.
    A unit recorded under a deprecated alias counts for the mechanism's current name (e.g.
    ``truncated_gumbel`` for ``knn_tem``: the same mechanism)."""
    import deniable
    from deniable.mechanisms.registry import current_mechanism_name

    def current(m: str) -> str:
        try:
            return current_mechanism_name(m)
        except ValueError:  # "none" (the baseline) or a mechanism no longer registered
            return m

    have = {(d, current(m), lv, seed) for d, m, lv, seed in (_key(r) for r in recs if "max_n_w" not in r)}
    lines = ["### missing units", "", "```"]
    for d in [x for x in DATASETS if any(k[0] == x for k in have)]:
        gaps, n_missing = {}, 0
        for m in deniable.available_mechanisms():
            cells = []
            for level in LEVELS:
                absent = [s for s in range(seeds) if (d, m, level, s) not in have]
                n_missing += len(absent)
                if len(absent) == seeds:
                    cells.append(f"L{level:g}: all")
                elif absent:
                    cells.append(f"L{level:g}: seed " + ",".join(map(str, absent)))
            if cells:
                gaps[m] = cells
        total = len(deniable.available_mechanisms()) * len(LEVELS) * seeds
        lines.append(f"{d}: {n_missing} of {total} units missing")
        lines += [f"  {m}: " + "; ".join(cells) for m, cells in gaps.items()]
    return [*lines, "```", ""]


def _plots(out_dir: Path, tables: dict[str, list[str]], prefix: str = "privacy_utility_") -> None:
    """One privacy–utility figure per grid table (``tables``: section name -> the table's rows,
    header first): clean-test accuracy against inversion top-1 and MIA AUC, bars the table's 95 %
    intervals. A data set's privacy-ratio table goes to ``<prefix><data set>.png``, its N_w-target
    table to ``<prefix><data set>_nw.png``; the authorship table has no figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for name, rows in tables.items():
        section = _section_dataset(name)
        if section is None or section[0] == "blogs" or len(rows) < 3:
            continue
        d, nw = section
        col = {h: i for i, h in enumerate(_row_cells(rows[0]))}
        cells = [_row_cells(r) for r in rows[2:]]
        fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
        base = next((c for c in cells if c[1] == "none"), None)
        for m in [x for x in MECH_ORDER if x != "none"] + sorted({c[1] for c in cells} - set(MECH_ORDER)):
            ks = sorted((c for c in cells if c[1] == m), key=lambda c: float(c[0]))
            if not ks:
                continue
            for j, (xcol, title) in enumerate((("inversion top-1 %", "inversion top-1 (%)"), ("MIA AUC %", "MIA AUC (%)"))):
                pts = [(_value(c[col[xcol]]), _value(c[col["acc. clean test %"]]), c[0]) for c in ks]
                pts = [(x[0], y[0], y[1] or 0.0, lv) for x, y, lv in pts if x is not None and y is not None]
                ax[j].errorbar([q[0] for q in pts], [q[1] for q in pts], yerr=[q[2] for q in pts],
                               marker="os^vD<>pPX*"[MECH_ORDER.index(m) % 11 if m in MECH_ORDER else 0], capsize=3, label=m)
                for x, y, _, lv in pts:
                    ax[j].annotate(lv, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
                ax[j].set_xlabel(title + " — privacy risk →")
                ax[j].set_ylabel("accuracy on clean test text (%)")
        if base:
            for j in range(2):
                ax[j].axhline(_value(base[col["acc. clean test %"]])[0], color="grey", ls="--", lw=1, label="no privacy")
            ax[1].axvline(_value(base[col["MIA AUC %"]])[0], color="grey", ls=":", lw=1, label="MIA AUC without privacy")
        ax[0].legend(fontsize=7)
        label = "max N_w target τ" if nw else "privacy level = Madlib ε"
        fig.suptitle(f"{d}: utility vs attack success (labels: {label}; bars: 95% CI over seeds)")
        fig.tight_layout()
        fig.savefig(out_dir / f"{prefix}{d}{'_nw' if nw else ''}.png", dpi=110)
        plt.close(fig)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="build/eval")
    p.add_argument("--data", default=str(DATA), help="the shared data folder")
    p.add_argument("--datasets", default="sms", help="comma list of sms, imdb, movies, blogs")
    p.add_argument("--mechanisms", default="", help="comma list (default: every registered mechanism)")
    p.add_argument("--levels", default=",".join(f"{x:g}" for x in LEVELS), help="privacy levels as Madlib epsilons")
    p.add_argument("--seeds", type=int, default=3, help="run seeds 0 .. SEEDS-1")
    p.add_argument("--no-baseline", action="store_true", help="skip the non-private unit (when it is already recorded)")
    p.add_argument("--seed-list", default="", metavar="S[,S...]",
                   help="run exactly these seeds instead (e.g. 1,2 to add seeds to a grid whose seed 0 ran elsewhere; "
                        "the non-private baseline runs only when 0 is in the list)")
    p.add_argument("--max-nw", default="", metavar="TAUS",
                   help="match by N_w instead: comma list of worst-case N_w targets; every mechanism runs at the largest ε "
                        "at which no word comes back unchanged with probability above the target (replaces --levels/--ratios)")
    p.add_argument("--ratios", default="", help="JSON {mechanism: privacy ratio vs Madlib}")
    p.add_argument("--compute-ratios", metavar="JSON", help="compute the privacy ratios and exit")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--gpu", action="store_true",
                   help="sample on CUDA with the library's torch backend where a mechanism has one "
                        "(Madlib, Mahalanobis, Vickrey, BRR, TEM; pip install 'deniable[torch]' with a CUDA build)")
    p.add_argument("--index", choices=("exact", "exact-bf16"), default="exact",
                   help="nearest-neighbour search of the numpy Madlib / Mahalanobis / Vickrey: exact-bf16 gives the same "
                        "outputs for a seed through a certified bfloat16 product (needs torch; ~3x faster on CPUs with AMX)")
    p.add_argument("--limit", type=int, default=None, help="subsample train and test to this many texts (smoke runs)")
    p.add_argument("--limit-users", type=int, default=None)
    p.add_argument("--alpha", type=float, default=1e-4)
    p.add_argument("--audit-alpha", type=float, default=0.0, help="L2 penalty of a second, barely regularized membership-audit model (0: none)")
    p.add_argument("--min-simulations", type=int, default=1_000_000)
    p.add_argument("--samples", type=int, default=0, help="store this many privatized test texts per unit")
    p.add_argument("--similarity", action="store_true", help="compute sentence similarity of the stored samples")
    p.add_argument("--similarity-n", type=int, default=500)
    p.add_argument("--similarity-model", default=None)
    p.add_argument("--summarize", metavar="DIR[,DIR...]")
    p.add_argument("--update-doc", metavar="MD",
                   help="with --summarize: write the tables, the missing-units list and the list of rows with raw records into this "
                        "results page (e.g. docs/results/evaluation.md, after its fixed headings; prose untouched) and the plots "
                        "beside it as evaluation_<data set>[_nw].png")
    p.add_argument("--exact-inversion", action="store_true",
                   help="the Bayes-optimal inversion adversary for the selected cells whose mechanism has closed-form probabilities")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if args.compute_ratios:
        compute_ratios(Path(args.compute_ratios))
    elif args.summarize:
        dirs = [Path(d) for d in args.summarize.split(",")]
        if args.update_doc:
            doc = Path(args.update_doc)
            if not doc.is_file():
                p.error(f"--update-doc {doc}: no such file")
            check_doc(doc)  # before the plots are written beside it
            # the read-back seed-0 records of merged one-seed rows go to a DIR named from_page, else the first DIR
            keep = next((d for d in dirs if d.name == "from_page"), dirs[0])
            print("\n".join(update_doc(doc, summarize(dirs, plots=False, page=doc, keep_page=keep), plot_prefix="evaluation_")))
        else:
            print(summarize(dirs))
    elif args.update_doc:
        p.error("--update-doc needs --summarize DIR[,DIR...]")
    elif args.similarity:
        similarity(args)
    elif args.exact_inversion:
        exact_inversion(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
