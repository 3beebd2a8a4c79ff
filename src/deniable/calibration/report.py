"""Calibration runs and their reports: a JSON record and a self-contained HTML page.

:func:`run_calibration` measures one mechanism at several ε (plausible-deniability statistics,
:mod:`deniable.calibration.plausible`) and samples example replacements for a few words (the
Madlib paper's Table 1), returning a JSON-ready dict that holds every number together with the
exact parameters, embedding fingerprint, package version and seed needed to reproduce it.
:func:`render_html` turns that dict into one HTML file with the plots embedded as base64 PNG
data URIs (Madlib paper Fig. 2 histograms; Mahalanobis paper Fig. 2–5 percentile curves); without
matplotlib it still renders every table and says how to get the plots.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator, spawn
from .._validation import check_int
from .plausible import select_words
from .sweep import SUMMARY_KEYS, sweep_epsilons

__all__ = ["run_calibration", "example_replacements", "render_html", "write_html", "FORMAT"]

FORMAT = "deniable-calibration/1"


def example_replacements(
    factory: Callable[[float], Any],
    words: Sequence[str],
    epsilons: Sequence[float],
    *,
    n: int = 5,
    rng: RNGLike = None,
) -> dict[str, dict[str, list[str]]]:
    """``n`` sampled outputs M(w) for each word and ε (Madlib paper Table 1):
    ``{str(ε): {word: [outputs...]}}``. Words must be in the vocabulary. ``rng``: None, int seed,
    SeedSequence or Generator."""
    n = check_int("n", n, minimum=1)
    gen = as_generator(rng)
    out: dict[str, dict[str, list[str]]] = {}
    for e in epsilons:
        mech = factory(e)
        ids = np.asarray([mech.id_of(w) for w in words], dtype=np.int64)
        sampled = mech.sample_ids(np.repeat(ids, n), rng=gen).reshape(len(words), n)
        vocab = mech.vocabulary.words
        out[f"{float(e):g}"] = {w: [vocab[j] for j in row.tolist()] for w, row in zip(words, sampled)}
    return out


def run_calibration(
    mechanism: str,
    epsilons: Sequence[float],
    *,
    params: dict[str, Any] | None = None,
    embedding: Any = None,
    embedding_path: str | None = None,
    words: int | Sequence[str] = 200,
    draws: int = 1000,
    eta: float = 0.01,
    confidence: float = 0.95,
    method: str = "auto",
    seed: int | None = None,
    examples: Sequence[str] | None = None,
    n_examples: int = 5,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Measure ``mechanism`` (a registry name) at each ε and return the JSON-ready record.

    ``embedding`` is an :class:`~deniable.Embedding` (default: loaded from ``embedding_path``,
    or the bundled default). ``seed`` None draws a fresh seed and records it. ``examples`` are
    words for the replacement table (default: 3 of the measured words, from dense to sparse).
    Re-running with the recorded ``parameters`` gives identical numbers.
    """
    from .._version import __version__
    from ..embeddings import load_embedding
    from ..mechanisms.registry import get_mechanism

    params = dict(params or {})
    if embedding is None:
        embedding = load_embedding(embedding_path)
    if seed is None:
        seed = int(as_generator(None).integers(2**63))
    seed = check_int("seed", seed, minimum=0)
    eps = [float(e) for e in epsilons]

    def factory(e: float) -> Any:
        return get_mechanism(mechanism, embedding, epsilon=e, **params)

    # one independent stream each for the sweep, the word sample and the examples, all from `seed`
    g_sweep, g_words, g_examples = spawn(seed, 3)
    first = factory(eps[0])
    if isinstance(words, (int, np.integer)) and not isinstance(words, bool):
        word_ids = select_words(first, int(words), rng=g_words)
        word_list = [first.vocabulary.words[i] for i in word_ids.tolist()]
    else:
        word_list = list(words)  # type: ignore[arg-type]  # a sequence of words here
    sweep = sweep_epsilons(
        factory, eps, word_list, draws=draws, eta=eta, rng=g_sweep, method=method,
        confidence=confidence, progress=progress,
    )
    if examples is None:
        r0 = sweep.results[0]
        order = np.argsort(-r0.n_w, kind="stable") if len(r0) else np.zeros(0, int)
        picks = sorted({int(order[0]), int(order[len(order) // 2]), int(order[-1])}) if len(order) else []
        examples = [str(r0.word[i]) for i in picks]
    ex = example_replacements(factory, list(examples), eps, n=n_examples, rng=g_examples)
    return {
        "format": FORMAT,
        "deniable_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "parameters": {
            "mechanism": mechanism,
            "epsilons": eps,
            "params": params,
            "embedding": None if embedding_path is None else os.fspath(embedding_path),
            "embedding_fingerprint": getattr(embedding, "fingerprint", None),
            "embedding_size": [len(embedding), int(getattr(embedding, "dim", 0))],
            "words": words if isinstance(words, (int, np.integer)) else list(words),
            "draws": draws,
            "eta": eta,
            "confidence": confidence,
            "method": method,
            "seed": seed,
            "examples": list(examples),
            "n_examples": n_examples,
        },
        "guarantee": str(first.guarantee),
        "repr": repr(first),
        "sweeps": [sweep.to_dict()],
        "examples": ex,
    }


# -- HTML --------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.note{background:#fff8e1;border:1px solid #f0d98c;padding:.6em 1em}code{background:#f5f5f5;padding:0 .2em}
details pre{background:#f8f8f8;padding:1em;overflow:auto;font-size:.8em}
"""


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _num(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "∞" if isinstance(x, float) and x > 0 else "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return html.escape(str(x))


def _summary_table(sweep: dict[str, Any]) -> str:
    heads = ["ε"] + [k for k in SUMMARY_KEYS if k != "n_words"]
    rows = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr>"]
    for s in sweep["summaries"]:
        rows.append("<tr>" + f"<td>{_num(s['epsilon'])}</td>" + "".join(f"<td>{_num(s[k])}</td>" for k in heads[1:]) + "</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _examples_table(examples: dict[str, dict[str, list[str]]]) -> str:
    if not examples:
        return "<p>No example words.</p>"
    eps = list(examples)
    words = list(next(iter(examples.values())))
    rows = ["<tr><th>ε</th>" + "".join(f"<th class=l>w = {html.escape(w)}</th>" for w in words) + "</tr>"]
    for e in eps:
        cells = "".join(f"<td class=l>{html.escape(', '.join(examples[e][w]))}</td>" for w in words)
        rows.append(f"<tr><td>{html.escape(e)}</td>{cells}</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _worst_words(sweep: dict[str, Any], k: int = 10) -> str:
    parts = []
    for res in sweep["results"]:
        c = res["columns"]
        n_w = np.asarray(c["n_w"], dtype=np.float64)
        order = np.argsort(-n_w, kind="stable")[:k]
        items = ", ".join(
            f"{html.escape(str(c['word'][i]))} (N_w={n_w[i]:.3g}, S_w={c['s_w'][i]})" for i in order.tolist()
        )
        parts.append(f"<tr><td>{_num(res['epsilon'])}</td><td class=l>{items}</td></tr>")
    return "<table><tr><th>ε</th><th class=l>words most often returned unchanged</th></tr>" + "".join(parts) + "</table>"


def render_html(data: dict[str, Any], *, plots: bool = True) -> str:
    """A self-contained HTML page for a :func:`run_calibration` record (plots embedded as PNG
    data URIs when matplotlib is installed and ``plots``)."""
    from .plots import matplotlib_available, plot_histograms, plot_percentiles

    p = data["parameters"]
    title = f"deniable calibration: {p['mechanism']} at ε ∈ {{{', '.join(f'{e:g}' for e in p['epsilons'])}}}"
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"]
    out.append(f"<h1>{html.escape(title)}</h1>")
    out.append(f"<p><b>Guarantee</b>: {html.escape(data.get('guarantee', ''))}</p>")
    out.append(f"<p><b>Mechanism</b>: <code>{html.escape(data.get('repr', ''))}</code></p>")
    rows = "".join(f"<tr><th class=l>{html.escape(k)}</th><td class=l>{html.escape(json.dumps(v))}</td></tr>" for k, v in p.items())
    out.append(f"<h2>Parameters (reproducible)</h2><table>{rows}</table>")
    out.append(f"<p>deniable {html.escape(str(data.get('deniable_version')))}, created {html.escape(str(data.get('created')))}.</p>")
    out.append(
        "<p><b>N_w</b> = Pr[M(w) = w], the probability that a word is released unchanged (small is private). "
        f"<b>S_w</b> = the effective support: the fewest outputs holding ≥ 1 − η = {1 - p['eta']:g} of M(w)'s probability "
        "(large is private; Madlib paper §3.2). Choose ε by worst-case targets: the largest ε whose worst N_w and S_w are "
        "acceptable (Madlib paper §4.1); <code>get_mechanism(name, max_n_w=...)</code> does this for N_w.</p>"
    )
    for sweep in data["sweeps"]:
        methods = sorted({r["method"] for r in sweep["results"]})
        out.append(f"<h2>Summary across words — {html.escape(sweep['mechanism'])}</h2>")
        note = "exact (from the mechanism's probabilities)" if methods == ["exact"] else (
            f"sampled, {p['draws']} draws per word; N_w with Wilson {p['confidence']:g} intervals, S_w with a DKW lower bound "
            "(per-word intervals in the JSON); a sampled S_w cannot exceed the number of draws"
        )
        out.append(f"<p>Statistics are {html.escape(note)}. N_w is a probability; S_w a count. Worst case = max N_w, min S_w.</p>")
        out.append(_summary_table(sweep))
    have_plots = plots and matplotlib_available()
    out.append("<h2>Distributions across words (Madlib paper Fig. 2) and percentiles against ε (Mahalanobis paper Fig. 2–5)</h2>")
    if have_plots:
        for sweep in data["sweeps"]:
            out.append(_img(plot_histograms(sweep, "n_w"), "histograms of N_w"))
            out.append(_img(plot_histograms(sweep, "s_w"), "histograms of S_w"))
        out.append(_img(plot_percentiles(data["sweeps"], "n_w"), "percentiles of N_w against epsilon"))
        out.append(_img(plot_percentiles(data["sweeps"], "s_w"), "percentiles of S_w against epsilon"))
    else:
        out.append('<p class=note>Plots need matplotlib: <code>pip install "deniable[plot]"</code>. The tables above and below hold every number.</p>')
    out.append("<h2>Example replacements at increasing ε (Madlib paper Table 1)</h2>")
    out.append(_examples_table(data.get("examples") or {}))
    for sweep in data["sweeps"]:
        out.append("<h2>Worst words</h2>")
        out.append(_worst_words(sweep))
    out.append("<details><summary>Full record (JSON)</summary><pre>")
    out.append(html.escape(json.dumps(data, indent=1, allow_nan=False)))
    out.append("</pre></details></body></html>")
    return "\n".join(out)


def write_html(data: dict[str, Any], path: str | os.PathLike[str], *, plots: bool = True) -> None:
    """Write :func:`render_html` atomically to ``path``."""
    from .._files import atomic_output

    text = render_html(data, plots=plots)
    with atomic_output(path) as f:
        f.write(text)
