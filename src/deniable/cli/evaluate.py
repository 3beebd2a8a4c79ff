"""``deniable evaluate``: utility and attacks of a mechanism on a labelled data set, resumable."""

from __future__ import annotations

import csv
import functools
import gzip
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..errors import DataError
from ..mechanisms.registry import available_mechanisms
from ._io import atomic_output, progress
from ._options import InputPath, deprecated_alias, embedding_limit_option, epsilons_option, mechanism_name, parse_params
from ._targets import build_for_targets, check_targets
from .privatize import build_mechanism


def read_labelled(path: str, text_column: str, label_column: str, split_column: str | None) -> tuple[list[str], list[str], list[str] | None]:
    """Texts, labels (and split names) of a CSV (``.csv``/``.csv.gz``) or JSON-lines file."""
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", path=path)
    name = p.name.lower()
    opener = gzip.open if name.endswith(".gz") else open
    texts: list[str] = []
    labels: list[str] = []
    splits: list[str] = []
    need = [c for c in (text_column, label_column, split_column) if c]
    try:
        with opener(p, "rt", encoding="utf-8", newline="") as f:
            if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
                rows: Iterator[Any] = (json.loads(line) for line in f if line.strip())
                start = 1
            else:
                csv.field_size_limit(sys.maxsize)
                rows = csv.DictReader(f)
                start = 2
            for i, row in enumerate(rows, start=start):
                if not isinstance(row, dict):
                    raise DataError(f"line {i}: expected a JSON object", path=path)
                missing = [c for c in need if c not in row]
                if missing:
                    raise DataError(f"line {i}: missing column(s) {', '.join(missing)}; have {', '.join(map(str, row))}", path=path)
                texts.append(str(row[text_column]))
                labels.append(str(row[label_column]))
                if split_column:
                    splits.append(str(row[split_column]))
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=path) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON line: {exc.msg}", path=path) from None
    if len(set(labels)) < 2:
        raise DataError(f"need at least 2 distinct labels in column {label_column!r}, got {len(set(labels))}", path=path)
    return texts, labels, (splits if split_column else None)


def _split(texts, labels, splits, test_fraction: float, path: str):
    y = np.asarray(labels)
    if splits is not None:
        s = np.asarray(splits)
        tr, te = np.flatnonzero(s == "train"), np.flatnonzero(s == "test")
        if not tr.size or not te.size:
            raise DataError(f"the split column needs rows with 'train' and 'test', got {tr.size} and {te.size}", path=path)
    else:
        perm = np.random.default_rng(0).permutation(len(texts))
        n_test = max(1, int(round(test_fraction * len(texts))))
        te, tr = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    if tr.size < 2 or te.size < 2:
        raise DataError(f"need at least 2 training and 2 test texts, got {tr.size} and {te.size}", path=path)
    return [texts[i] for i in tr], y[tr], [texts[i] for i in te], y[te]


def _optional_epsilons(ctx: click.Context, param: click.Parameter, value: str | None) -> list[float] | None:
    return None if value is None else epsilons_option(ctx, param, value)


def _targets_option(ctx: click.Context, param: click.Parameter, value: str | None) -> list[float] | None:
    """``--max-nw`` as a list of probabilities strictly between 0 and 1."""
    if value is None:
        return None
    out = []
    for part in str(value).split(","):
        try:
            tau = float(part)
        except ValueError:
            raise click.BadParameter(f"must be numbers separated by commas, got {part.strip()!r}") from None
        check_targets(None, tau)  # a usage error (exit 2) unless 0 < tau < 1
        out.append(tau)
    if not out:
        raise click.BadParameter("give at least one target, e.g. 0.5")
    return out


def _mean_ci(values: list[float]) -> dict[str, Any]:
    import scipy.stats

    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return {"mean": float(v.mean()) if v.size else None, "ci95": None, "n": int(v.size)}
    half = float(scipy.stats.t.ppf(0.975, v.size - 1)) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return {"mean": float(v.mean()), "ci95": [float(v.mean() - half), float(v.mean() + half)], "n": int(v.size)}


METRICS = {
    "acc_clean": lambda r: r["acc_clean"],
    "acc_priv": lambda r: r["acc_priv"],
    "changed_train": lambda r: r["changed_train"],
    "inversion_top1": lambda r: r["inversion"]["top1"] if "inversion" in r else None,
    "inversion_top5": lambda r: r["inversion"]["topk"] if "inversion" in r else None,
    "inversion_rare_top1": lambda r: r["inversion"]["rare_top1"] if "inversion" in r else None,
    "inversion_exact_top1": lambda r: r["inversion_exact"]["top1"] if "inversion_exact" in r else None,
    "inversion_exact_expected_top1": lambda r: r["inversion_exact"]["expected_top1"] if "inversion_exact" in r else None,
    "mia_auc": lambda r: r["mia"]["auc"] if "mia" in r else None,
    "similarity": lambda r: r["similarity"]["mean"] if "similarity" in r else None,
}


def summarize_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and 95 % t-interval over seeds of each metric, per ε."""
    out = []
    for eps in sorted({r["epsilon"] for r in runs if r["epsilon"] is not None}):
        rs = [r for r in runs if r["epsilon"] == eps]
        row: dict[str, Any] = {"epsilon": eps, "seeds": len(rs)}
        for name, get in METRICS.items():
            vals = [v for v in (get(r) for r in rs) if v is not None and not (isinstance(v, float) and math.isnan(v))]
            if vals:
                row[name] = _mean_ci(vals)
        out.append(row)
    return out


def _plot(path: Path, summary: list[dict[str, Any]], baseline: dict[str, Any] | None, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels: list[tuple[list[tuple[str, str]], str]] = [
        ([("acc_clean", "clean test"), ("acc_priv", "privatized test")], "accuracy"),
        ([("inversion_top1", "top-1"), ("inversion_top5", "top-5"), ("inversion_exact_top1", "Bayes-optimal top-1")], "words recovered by inversion"),
        ([("mia_auc", "loss-threshold")], "membership inference AUC"),
        ([("similarity", "mean cosine")], "meaning kept (sentence similarity)"),
    ]
    # only what was measured (--attacks none leaves accuracy alone)
    panels = [p for p in panels if any(key in r for key, _ in p[0] for r in summary)] or panels[:1]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.8), squeeze=False)
    axes = axes[0]
    eps = [r["epsilon"] for r in summary]
    for ax, (series, ylabel) in zip(axes, panels):
        for key, label in series:
            pts = [(e, r[key]) for e, r in zip(eps, summary) if key in r]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ms = [p[1]["mean"] for p in pts]
            err = [[m - (p[1]["ci95"] or [m, m])[0] for m, p in zip(ms, pts)], [(p[1]["ci95"] or [m, m])[1] - m for m, p in zip(ms, pts)]]
            ax.errorbar(xs, ms, yerr=err, marker="o", capsize=3, label=label)
        if baseline is not None and ylabel == "accuracy":
            ax.axhline(baseline["acc_clean"], color="grey", ls="--", lw=1, label="no privacy")
        if baseline is not None and ylabel.startswith("membership") and "mia" in baseline:
            ax.axhline(baseline["mia"]["auc"], color="grey", ls="--", lw=1, label="no privacy")
        ax.set_xlabel("epsilon")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fig.suptitle(title + " (bars: 95% CI over seeds)", fontsize=9)
    fig.tight_layout()
    with atomic_output(path, mode="wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return True


@click.command("evaluate")
@click.argument("data", type=InputPath())
@click.option("-m", "--mechanism", required=True, callback=lambda ctx, param, value: mechanism_name(value),
              help=f"Mechanism name: {', '.join(available_mechanisms())}.")
@click.option("-e", "--epsilon", "epsilons", default=None, callback=_optional_epsilons,
              help="Epsilon, or comma-separated epsilons (e.g. 5,10,20); or give --max-nw.")
@click.option("--max-nw", "max_nws", default=None, metavar="P[,P...]", callback=_targets_option,
              help="Privacy targets instead of -e (e.g. 0.1,0.5,0.9): for each, the largest epsilon at which every vocabulary "
                   "word comes back unchanged with probability N_w <= P (shipped, cached or computed calibration) — the way to "
                   "compare mechanisms at matched privacy.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Mechanism parameter (repeatable), e.g. --param lam=0.5.")
@click.option("--embedding", "embedding_path", type=InputPath(), default=None, help="Embedding file (default: the bundled GloVe).")
@embedding_limit_option()
@click.option("--text-column", default="text", show_default=True)
@click.option("--label-column", default="label", show_default=True)
@click.option("--split-column", default=None, help="Column with 'train'/'test' (default: a random split, --test-fraction).")
@click.option("--test-fraction", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.2, show_default=True)
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Privatizations per epsilon (seeds 0..N-1).")
@click.option("--attacks", default="inversion,membership", show_default=True, help="Comma list of inversion, membership (or 'none').")
@click.option("--min-simulations", type=click.IntRange(min=1), default=200_000, show_default=True, help="Inversion adversary's simulated draws.")
@click.option("--exact-inversion/--no-exact-inversion", default=True, show_default=True,
              help="Also the Bayes-optimal inversion adversary where the mechanism has closed-form probabilities (TEM, SanText, "
                   "SanText+, CusText, kNN-TEM, 1-Diffractor, BRR with tiny codes); it costs (training vocabulary) x "
                   "(vocabulary) likelihoods per run.")
@click.option("--similarity", "similarity_n", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Meaning kept: mean sentence-embedding cosine between the first N test texts and their privatized versions "
                   "(all-MiniLM-L6-v2, offline; needs deniable[eval]). 0: off.")
@click.option("--device", default=None, metavar="DEVICE",
              help='Sample with the torch backend on DEVICE (cuda, cuda:N, cpu; pip install "deniable[torch]"): Madlib, Mahalanobis, '
                   "Vickrey, TEM, BRR — same distributions, exact search. Default: the numpy backend.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False), default=None, metavar="DIR", help="Output folder (results.json, results.png, runs/); required.")
@deprecated_alias("--out", "-o/--output", "out_dir", type=click.Path(file_okay=False))
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress bar (default: on a terminal).")
def evaluate(data, mechanism, epsilons, max_nws, params, embedding_path, embedding_limit, text_column, label_column, split_column, test_fraction, seeds, attacks, min_simulations,
             exact_inversion, similarity_n, device, out_dir, show_progress):
    """Evaluate a mechanism on a labelled data set: downstream accuracy, word inversion and
    membership inference (and, with --similarity, meaning kept), for each epsilon (or each
    --max-nw privacy target) and seed.

    DATA is a CSV (.csv, .csv.gz) or JSON-lines file with a text and a label column. Each
    (epsilon, seed) run is saved to OUT/runs/ as soon as it finishes; rerunning the same command
    skips the runs already there (resume). OUT/results.json holds every run and the mean with a
    95% interval over seeds; OUT/results.png plots them (needs deniable[plot]).
    """
    from ..evaluation.experiment import ATTACKS, evaluate_mechanism

    if out_dir is None:
        raise click.UsageError("Missing option '-o' / '--output' (the output folder)")
    wanted = [] if attacks.strip() == "none" else [a.strip() for a in attacks.split(",") if a.strip()]
    bad = sorted(set(wanted) - set(ATTACKS))
    if bad:
        raise click.BadParameter(f"unknown attack(s) {', '.join(bad)}; choose from {', '.join(ATTACKS)} or 'none'", param_hint="--attacks")
    if (epsilons is None) == (max_nws is None):
        raise click.UsageError("give -e/--epsilon EPS[,EPS...] or --max-nw P[,P...] (privacy targets), not both" if epsilons
                               else "give -e/--epsilon EPS[,EPS...] or --max-nw P[,P...] (largest allowed chance, 0 < P < 1, that a word comes back unchanged)")
    param_values = parse_params(params)
    sentence_model = _load_sentence_model() if similarity_n else None
    out = Path(out_dir)
    texts, labels, splits = read_labelled(data, text_column, label_column, split_column)
    xtr, ytr, xte, yte = _split(texts, labels, splits, test_fraction, data)
    targets: dict[float, list[float]] = {}  # ε -> the --max-nw targets that chose it
    build = build_mechanism if device is None else functools.partial(build_mechanism, device=device)
    if max_nws is not None:
        mechs = {}
        for tau, m in zip(max_nws, build_for_targets(build, mechanism, max_nws, param_values, embedding_path, embedding_limit, progress=show_progress, device=device)):
            mechs.setdefault(float(m.epsilon), m)
            targets.setdefault(float(m.epsilon), []).append(tau)
        epsilons = sorted(mechs)
    else:
        mechs = {e: build(mechanism, e, param_values, embedding_path, embedding_limit, progress=show_progress) for e in epsilons}
    runs_dir = out / "runs"  # created only once every mechanism (and target) is valid
    runs_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(None, 0)] + [(e, s) for e in epsilons for s in range(seeds)]
    config = {"data": str(data), "mechanism": mechanism, "params": param_values, "epsilons": epsilons, "seeds": seeds, "attacks": wanted,
              "n_train": len(xtr), "n_test": len(xte), "min_simulations": min_simulations}
    if targets:
        config["max_nw"] = max_nws
    if device is not None:  # provenance only: the same distributions, so runs are reused across backends
        config["device"] = device
    run_keys, with_exact = _reuse_keys(config, embedding_limit, similarity_n, exact_inversion and "inversion" in wanted, mechs)
    n_sim = min(similarity_n, len(xte))
    original_embeddings = None
    runs: list[dict[str, Any]] = []
    disable = None if show_progress is None else not show_progress
    with progress(len(jobs), desc="evaluate", disable=disable, unit="run") as bar:
        for eps, seed in jobs:
            path = runs_dir / ("baseline.json" if eps is None else f"{mechanism}_eps{eps:g}_seed{seed}.json")
            rec = _saved_run(path, {k: config[k] for k in run_keys})
            if rec is not None:
                runs.append(rec)
                bar.update(1)
                continue
            rec = evaluate_mechanism(
                mechs[eps] if eps is not None else None, xtr, ytr, xte, yte, rng=np.random.default_rng([seed, 7]),
                attacks=[a for a in wanted if eps is not None or a == "membership"], min_simulations=min_simulations,
                exact_inversion=bool(with_exact),
                samples=n_sim if eps is not None else 0,
            )
            if n_sim and eps is not None:
                if original_embeddings is None:
                    original_embeddings = sentence_model.encode(xte[:n_sim], batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
                from ..evaluation import similarity as similarity_mod

                sim = similarity_mod.semantic_similarity(xte[:n_sim], rec.pop("sample"), model=sentence_model, batch_size=32,
                                                         original_embeddings=original_embeddings)
                rec["similarity"] = {"mean": sim.mean, "ci95": list(sim.ci), "median": sim.median, "n": sim.n}
            rec.update(seed=seed, name=mechanism if eps is not None else "none", config={k: config[k] for k in run_keys})
            with atomic_output(path) as f:
                f.write(json.dumps(rec) + "\n")
            runs.append(rec)
            bar.update(1)
    _write_results(out, config, runs, targets, f"{mechanism} on {Path(data).name}", max_nws)


def _load_sentence_model() -> Any:
    """The sentence-embedding model of --similarity, or a usage error naming what is missing."""
    from ..evaluation import similarity as similarity_mod

    try:
        return similarity_mod.load_sentence_model()
    except ImportError as exc:
        raise click.UsageError(f"--similarity needs the sentence-embedding model: {exc}") from None


def _reuse_keys(config: dict[str, Any], embedding_limit: int | None, similarity_n: int, inversion: bool,
                mechs: dict[Any, Any]) -> tuple[tuple[str, ...], bool]:
    """Complete ``config`` and return the keys a saved run must match to be reused, and whether the
    Bayes-optimal inversion adversary runs (``inversion``: asked for, and the inversion attack is on)."""
    # what a saved run must have been computed with to be reused (similarity only when asked, so
    # runs saved without it stay valid for commands without it)
    run_keys: tuple[str, ...] = ("data", "mechanism", "params", "attacks", "n_train", "n_test")
    if embedding_limit is not None:  # a smaller vocabulary is another mechanism: its runs are not reused without it
        config["embedding_limit"] = embedding_limit
        run_keys += ("embedding_limit",)
    if similarity_n:
        config["similarity"] = similarity_n
        run_keys += ("similarity",)
    from ..evaluation.inversion import has_exact_probabilities

    with_exact = inversion and has_exact_probabilities(next(iter(mechs.values())))
    if with_exact:  # likewise: runs saved without the Bayes-optimal adversary are recomputed, not reused without it
        config["exact_inversion"] = True
        run_keys += ("exact_inversion",)
    return run_keys, with_exact


def _saved_run(path: Path, run_config: dict[str, Any]) -> dict[str, Any] | None:
    """The run saved at ``path`` when it was computed with ``run_config``, else None."""
    if not path.exists():
        return None
    try:
        rec = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return rec if rec is not None and rec.get("config") == run_config else None


def _write_results(out: Path, config: dict[str, Any], runs: list[dict[str, Any]], targets: dict[float, list[float]], name: str,
                   max_nws: list[float] | None) -> None:
    """Write OUT/results.json and OUT/results.png, and print one summary line per epsilon."""
    baseline = next((r for r in runs if r["epsilon"] is None), None)
    private = [r for r in runs if r["epsilon"] is not None]
    summary = summarize_runs(private)
    for row in summary:
        if row["epsilon"] in targets:
            row["max_nw"] = targets[row["epsilon"]]
    result = {"config": config, "baseline": baseline, "summary": summary, "runs": private}
    with atomic_output(out / "results.json") as f:
        f.write(json.dumps(result, indent=1) + "\n")
    title = name + (" at max N_w " + ", ".join(f"{t:g}" for t in max_nws or []) if targets else "")
    plotted = _plot(out / "results.png", summary, baseline, title)
    for row in summary:
        parts = ([f"max_nw={','.join(f'{t:g}' for t in row['max_nw'])}"] if "max_nw" in row else []) + [f"epsilon={row['epsilon']:g}"]
        for key in ("acc_clean", "acc_priv", "inversion_top1", "inversion_exact_top1", "mia_auc", "similarity"):
            if key in row:
                parts.append(f"{key}={row[key]['mean']:.4f}")
        click.echo("  ".join(parts))
    click.echo(f"wrote {out / 'results.json'}" + (f" and {out / 'results.png'}" if plotted else " (no plot: pip install \"deniable[plot]\")"), err=True)
