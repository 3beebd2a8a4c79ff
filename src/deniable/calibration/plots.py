"""Plots of plausible-deniability statistics (matplotlib, an optional extra: ``deniable[plot]``).

* :func:`plot_histograms`: histograms of N_w or S_w across words, one panel per ε (Madlib paper
  Fig. 2).
* :func:`plot_percentiles`: 5th/50th/95th percentiles of N_w or S_w against ε, one colour per
  mechanism (Mahalanobis paper Fig. 2–5).

Both take the JSON-ready sweep dicts of :meth:`deniable.calibration.sweep.Sweep.to_dict` (so a
report can be re-drawn from its JSON) or :class:`~deniable.calibration.sweep.Sweep` objects,
draw on a backend-free :class:`matplotlib.figure.Figure` (no pyplot, no global state) and return
PNG bytes (also written to ``path`` when given).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._optional import import_optional

__all__ = ["plot_histograms", "plot_percentiles", "matplotlib_available", "STAT_LABELS"]

STAT_LABELS = {
    "n_w": "N_w = Pr[M(w) = w]",
    "s_w": "S_w (effective support, words)",
    "n_distinct": "distinct outputs in the draws",
}


def matplotlib_available() -> bool:
    try:
        import_optional("matplotlib", purpose="calibration plots")
    except ImportError:
        return False
    return True


def _figure(width: float, height: float) -> Any:
    import_optional("matplotlib", purpose="calibration plots")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Any, path: str | os.PathLike[str] | None) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = buf.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def _as_dict(sweep: Any) -> dict[str, Any]:
    return sweep.to_dict() if hasattr(sweep, "to_dict") else sweep


def _column(result: dict[str, Any], stat: str) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in result["columns"][stat]], dtype=np.float64)


def _label(sweep: dict[str, Any]) -> str:
    params = sweep.get("params") or {}
    shown = {k: v for k, v in params.items() if k not in ("index", "batch_size")}
    extra = ", ".join(f"{k}={v}" for k, v in shown.items())
    return f"{sweep['mechanism']}({extra})" if extra else str(sweep["mechanism"])


def plot_histograms(sweep: Any, stat: str = "n_w", *, path: str | os.PathLike[str] | None = None, bins: int = 30) -> bytes:
    """Histogram of ``stat`` (``"n_w"``, ``"s_w"`` or ``"n_distinct"``) across words, one panel
    per ε, in the style of the Madlib paper's Fig. 2. Returns PNG bytes."""
    if stat not in STAT_LABELS:
        raise ValueError(f"stat must be one of {', '.join(STAT_LABELS)}, got {stat!r}")
    sw = _as_dict(sweep)
    results = sw["results"]
    n = len(results)
    cols = min(n, 4)
    rows = -(-n // cols)
    fig = _figure(3.2 * cols, 2.6 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    for ax, res in zip(axes.ravel(), results):
        v = _column(res, stat)
        v = v[np.isfinite(v)]
        ax.hist(v, bins=bins, color="#3b6ea5" if stat == "n_w" else "#b5542d", edgecolor="white", linewidth=0.4)
        worst = v.max() if stat == "n_w" else v.min()
        ax.axvline(worst, color="black", linestyle=":", linewidth=1)
        ax.set_title(f"ε = {res['epsilon']:g}  (worst {worst:.3g})", fontsize=9)
        ax.set_xlabel(STAT_LABELS[stat], fontsize=8)
        ax.set_ylabel("words", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{STAT_LABELS[stat]} across {len(results[0]['columns']['word'])} words — {_label(sw)}", fontsize=10)
    return _png(fig, path)


def plot_percentiles(sweeps: Sequence[Any] | Any, stat: str = "n_w", *, path: str | os.PathLike[str] | None = None) -> bytes:
    """5th, 50th and 95th percentiles of ``stat`` across words against ε (log scale), one
    colour per mechanism (Mahalanobis paper Fig. 2–5). Returns PNG bytes."""
    if stat not in STAT_LABELS:
        raise ValueError(f"stat must be one of {', '.join(STAT_LABELS)}, got {stat!r}")
    if not isinstance(sweeps, (list, tuple)):
        sweeps = [sweeps]
    from matplotlib.lines import Line2D

    fig = _figure(8.0, 4.2)
    ax = fig.subplots()
    colours = ["#3b6ea5", "#b5542d", "#4a8c3a", "#7a4e9c", "#c79a1c", "#333333", "#1b9e9e", "#d4477a"]
    styles: dict[int, Any] = {5: ":", 50: "-", 95: "--"}
    handles = []
    for i, sweep in enumerate(sweeps):
        sw = _as_dict(sweep)
        colour = colours[i % len(colours)]
        eps = np.asarray([r["epsilon"] for r in sw["results"]], dtype=np.float64)
        order = np.argsort(eps)
        pct = np.asarray([np.nanpercentile(_column(r, stat), [5, 50, 95]) for r in sw["results"]])[order]
        for j, q in enumerate((5, 50, 95)):
            ax.plot(eps[order], pct[:, j], styles[q], marker="o", markersize=3, color=colour)
        handles.append(Line2D([], [], color=colour, label=_label(sw)))
    handles += [Line2D([], [], color="black", linestyle=styles[q], label=f"{q}th percentile") for q in (5, 50, 95)]
    ax.set_xscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel(STAT_LABELS[stat])
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(f"Percentiles of {STAT_LABELS[stat]} against ε", fontsize=10)
    return _png(fig, path)
