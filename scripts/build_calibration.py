"""Build the shipped ε calibrations (src/deniable/calibration/data/*.npz) and the data behind
docs/results/privacy_targets.md.

For each mechanism with default parameters on the bundled embedding: per-word N_w over the
default ε grid (deniable.calibration.targets), every vocabulary word where the estimator allows
(TEM: exact kernel; Madlib/Mahalanobis: radial, exact in the noise radius: every word screened
with 4 directions, the 600 riskiest, the 1 % most isolated and 300 random words refined with
128), isolated + random words for BRR (flips: nested randomized-response draws, every ε at once); S_w quantiles from a stratified-sample sweep.
With ``--study`` also Mahalanobis at λ ∈ {0.25, 0.5, 0.75, 1} (rare-word exposure study), saved
under build/calibration/.

    python scripts/build_calibration.py                            # CPU only
    python scripts/build_calibration.py --backend torch            # radial part on a GPU
    python scripts/build_calibration.py --mechanisms tem            # one mechanism

Results are deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import deniable  # noqa: E402
from deniable.calibration.plausible import plausible_deniability, select_words  # noqa: E402
from deniable.calibration.targets import compute_calibration  # noqa: E402


def s_w_sweep(factory, cal, *, words: int, draws: int, eta: float, seed: int, sampler=None) -> dict:
    """S_w quantiles (5th, 50th percentile, min) over a density-stratified word sample at the
    grid ε where the median word's N_w goes from 0.01 to 0.99 (6 points)."""
    med = cal.quantile(0.5)
    lo = int(np.searchsorted(med, 0.01))
    hi = int(min(np.searchsorted(med, 0.99), med.size - 1))
    idx = np.unique(np.linspace(max(lo - 1, 0), hi, 6).round().astype(int))
    ids = select_words(factory(1.0), words, rng=seed)
    out = {"epsilons": [], "p5": [], "p50": [], "min": [], "n_words": int(ids.size), "eta": eta, "draws": draws}
    for j in idx:
        e = float(cal.epsilons[j])
        pd = plausible_deniability((sampler or factory)(e), ids, draws=draws, eta=eta, rng=seed + int(j))
        s = np.asarray(pd.s_w, dtype=float)
        out["epsilons"].append(e)
        out["p5"].append(float(np.quantile(s, 0.05)))
        out["p50"].append(float(np.median(s)))
        out["min"].append(float(s.min()))
        out["method"] = pd.method
    return out


def resample_quantiles(name: str, path: Path, emb, *, words: int, directions: int, seed: int) -> None:
    """Median / 99th-percentile columns of a radial calibration from a fresh random sample of
    ``words`` words with ``directions`` directions each (files built before the random refined
    words were recorded as the sample); the words-changed mean keeps every word's estimate."""
    from deniable.calibration.estimators import _radial_curves, _radial_directions
    from deniable.calibration.record import Calibration

    cal = Calibration.load(path, source="shipped calibration")
    mech = deniable.get_mechanism(name, emb, epsilon=1.0, **({} if not cal.params else {k: v for k, v in cal.params.items() if k == "lam"}))
    gen = np.random.default_rng(seed + 7)
    ids = np.sort(gen.choice(len(emb), size=words, replace=False))
    n_w, _ = _radial_curves(mech, ids, cal.epsilons, _radial_directions(mech, directions, gen), cal.confidence, None, "numpy")
    mean = cal.n_w.mean(axis=0)
    cal.columns = {"q0.5": np.median(n_w, axis=0), "q0.99": np.quantile(n_w, 0.99, axis=0), "mean": mean}
    cal.meta["quantiles_from"] = f"{words} random words, {directions} directions (seed {seed + 7}); mean over all words"
    cal.save(path, compact=True)
    print(f"{path}: quantile columns from {words} random words", flush=True)


def refine_shipped(name: str, path: Path, emb, *, directions: int, seed: int) -> None:
    """Refine the screened-only words that are among the 3 highest at some grid ε (files built
    before the compute step did this itself)."""
    from deniable.calibration.estimators import _radial_directions, refine_worst
    from deniable.calibration.record import Calibration

    cal = Calibration.load(path, source="shipped calibration")
    mech = deniable.get_mechanism(name, emb, epsilon=1.0, **{k: v for k, v in cal.params.items() if k == "lam"})
    gen = np.random.default_rng(seed + 11)
    ref = np.asarray(cal.meta.get("refined_ids", []), dtype=np.int64)
    n_w, up = cal.n_w.copy(), cal.n_w_upper.copy()
    if cal.exact_worst is not None:  # the exact worst values (the arrays hold them rounded up)
        w_up, w_idx = cal.exact_worst
        up[w_idx, np.arange(up.shape[1])] = w_up
    new_ref = refine_worst(mech, cal.epsilons, n_w, up, ref, _radial_directions(mech, directions, gen), cal.confidence)
    cal.n_w, cal.n_w_upper, cal.exact_worst = n_w, np.maximum(up, n_w), None
    cal.meta["refined_ids"] = new_ref.tolist()
    cal.meta["refined"] = int(new_ref.size)
    cal.coverage = cal.coverage.replace("; the other words", ", and the top 3 at every grid epsilon; the other words")
    cal.coverage = cal.coverage.replace(f"({ref.size} refined", f"({new_ref.size} refined")
    cal.save(path, compact=True)
    print(f"{path}: refined {new_ref.size - ref.size} more words", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mechanisms", default="tem,madlib,mahalanobis,brr")
    ap.add_argument("--out", default=str(ROOT / "src/deniable/calibration/data"))
    ap.add_argument("--backend", default="numpy", choices=["numpy", "torch"])
    ap.add_argument("--directions", type=int, default=128)
    ap.add_argument("--draws", type=int, default=100, help="BRR: random bit orders per word (flips estimator: every epsilon at once)")
    ap.add_argument("--brr-isolated", type=int, default=100)
    ap.add_argument("--brr-sample", type=int, default=300)
    ap.add_argument("--brr-screen", type=int, default=8, help="BRR: draws screening every word (0: isolated + random words only)")
    ap.add_argument("--screen", type=int, default=4, help="radial: screening directions for every word")
    ap.add_argument("--refine", type=int, default=600, help="radial: highest-screened words refined")
    ap.add_argument("--isolated", type=int, default=0, help="radial: most isolated words refined (per ranking; the 1%% most isolated by nearest-neighbour distance always are)")
    ap.add_argument("--sample", type=int, default=300, help="radial: random words refined")
    ap.add_argument("--sw-words", type=int, default=100)
    ap.add_argument("--sw-draws", type=int, default=100)
    ap.add_argument("--study", action="store_true", help="also Mahalanobis at lam 0.25, 0.5, 0.75, 1 (build/calibration/)")
    ap.add_argument("--study-directions", type=int, default=64)
    ap.add_argument("--study-out", default=str(ROOT / "build" / "calibration"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--refine-worst", default="", help="comma-separated shipped radial calibrations to refine at their worst words")
    ap.add_argument("--resample", default="", help="comma-separated shipped radial calibrations whose median/p99 columns to recompute")
    args = ap.parse_args()

    emb = deniable.load_embedding()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # the 1 % most isolated words (Euclidean nearest-neighbour distance), measured for every
    # mechanism so the rare-word study compares the same words
    from deniable.calibration.plausible import _knn_dists

    cached = ROOT / "build" / "calibration" / f"isolated_1pct_{emb.fingerprint}.npy"
    if cached.is_file():
        iso = np.load(cached)
    else:
        nn = _knn_dists(deniable.Madlib(emb, epsilon=1.0), np.arange(len(emb)), 1)[:, 0]
        iso = np.argsort(-nn, kind="stable")[: len(emb) // 100]
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.save(cached, iso)

    for name in [m for m in args.refine_worst.split(",") if m]:
        refine_shipped(name, out / f"{name}.npz", emb, directions=args.directions, seed=args.seed)
    for name in [m for m in args.resample.split(",") if m]:
        resample_quantiles(name, out / f"{name}.npz", emb, words=args.sample, directions=64, seed=args.seed)
    jobs = []
    for name in [m for m in args.mechanisms.split(",") if m and m != "none"]:
        jobs.append((name, {}, out / f"{name}.npz"))
    if args.study:
        study = Path(args.study_out)
        study.mkdir(parents=True, exist_ok=True)
        for lam in (0.25, 0.75, 1.0):
            jobs.append(("mahalanobis", {"lam": lam}, study / f"mahalanobis_lam{lam:g}.npz"))
    summary = {}
    for name, params, path in jobs:
        t0 = time.perf_counter()

        def factory(e, name=name, params=params):
            return deniable.get_mechanism(name, emb, epsilon=e, **params)

        sampler = None
        if name == "brr" and args.backend == "torch":
            def sampler(e):
                return deniable.get_mechanism("brr", emb, epsilon=e, backend="torch")
        kw = dict(directions=args.directions, rng=args.seed, progress=False, backend=args.backend)
        if name == "brr":
            kw.update(words="auto" if args.brr_screen else args.brr_sample, isolated=args.brr_isolated, sample=args.brr_sample,
                      draws=args.draws, extra=iso, sampler=sampler, screen=args.brr_screen, refine=args.refine)
        elif params:  # the study: the 1 % most isolated words and a random sample, no screening
            kw.update(words=args.sample, isolated=0, extra=iso, screen=0, directions=args.study_directions)
        elif name == "tem":
            kw.update(words="all")
        else:
            kw.update(words="auto", screen=args.screen, refine=args.refine, isolated=args.isolated, sample=args.sample, extra=iso)
        cal = compute_calibration(factory, **kw)
        t1 = time.perf_counter()
        if not params:
            cal.s_w = s_w_sweep(factory, cal, words=args.sw_words, draws=args.sw_draws, eta=0.01, seed=args.seed, sampler=sampler)
        cal.meta["build_seconds"] = round(t1 - t0, 1)
        cal.meta["s_w_seconds"] = round(time.perf_counter() - t1, 1)
        cal.meta["isolated_1pct"] = iso.tolist()
        cal.save(path, compact=True)
        summary[f"{name}{params}"] = {"seconds": cal.meta["build_seconds"], "coverage": cal.coverage, "table": cal.table(),
                                      "bytes": path.stat().st_size}
        print(json.dumps({f"{name}{params}": summary[f"{name}{params}"]}, default=str), flush=True)


if __name__ == "__main__":
    main()
