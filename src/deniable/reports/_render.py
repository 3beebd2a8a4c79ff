"""The plots and the HTML page of a :class:`~deniable.reports.PrivacyReport` (one self-contained
file: CSS inline, plots as base64 PNG)."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

# -- plots ---------------------------------------------------------------------------------------


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_n_w(input_n_w: np.ndarray, vocab_n_w: np.ndarray | None, eps: float) -> bytes:
    fig = _figure(7.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    bins = np.linspace(0.0, 1.0, 26)
    if vocab_n_w is not None and vocab_n_w.size:
        ax.hist(vocab_n_w, bins=bins, density=True, alpha=0.45, color="#888888", label=f"vocabulary ({vocab_n_w.size} words)")
    if input_n_w.size:
        ax.hist(input_n_w, bins=bins, density=True, histtype="step", linewidth=2.0, color="#c0392b", label=f"this input ({input_n_w.size} distinct words)")
    ax.set_xlabel("N_w = Pr[M(w) = w]  (small is private)")
    ax.set_ylabel("density")
    ax.set_title(f"Chance a word comes back unchanged, epsilon = {eps:.4g}")
    ax.legend(loc="upper center")
    return _png(fig)


def plot_curve(rows: list[dict[str, Any]], eps: float, result: Any) -> bytes:
    fig = _figure(7.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    e = np.array([r["epsilon"] for r in rows])
    t = np.array([r["top1"] for r in rows])
    lo = np.array([r["top1_ci"][0] for r in rows])
    hi = np.array([r["top1_ci"][1] for r in rows])
    ax.fill_between(e, lo, hi, color="#2e86c1", alpha=0.2)
    ax.plot(e, t, "o-", color="#2e86c1", label="Bayes adversary top-1")
    ax.plot(e, [r["unchanged"] for r in rows], "s--", color="#7f8c8d", label="output read as is (unchanged)")
    ax.plot(e, [r["prior_top1"] for r in rows], ":", color="#27ae60", label="prior only")
    ax.axvline(eps, color="#c0392b", linewidth=1.5, label=f"this run: epsilon = {eps:.4g}")
    if result is not None:
        ax.errorbar([eps], [result.top1], yerr=[[result.top1 - result.top1_ci[0]], [result.top1_ci[1] - result.top1]], fmt="D", color="#c0392b", label="this output")
    ax.set_xscale("log")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("epsilon")
    ax.set_ylabel("recovered input words")
    ax.legend(fontsize="small", loc="best")
    return _png(fig)


# -- HTML ----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}th{background:#f3f3f3}
td.l,th.l{text-align:left}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.owner{background:#fdecea;border:2px solid #c0392b;padding:.7em 1em;font-weight:600}
.note{background:#fff8e1;border:1px solid #f0d98c;padding:.6em 1em}.warn{color:#a04000}
.stmt{background:#f4f8fb;border-left:4px solid #2e86c1;padding:.5em 1em}code{background:#f5f5f5;padding:0 .2em}
details pre{background:#f8f8f8;padding:1em;overflow:auto;font-size:.8em}
"""


def _num(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return html.escape(str(x))


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100.0 * float(x):.1f}%"


def _ci(c: Any) -> str:
    return "—" if not c or c[0] is None else f"[{_pct(c[0])}, {_pct(c[1])}]"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = ()) -> str:
    h = "".join(f"<th{' class=l' if i in left else ''}>{html.escape(c)}</th>" for i, c in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i in left else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def render_html(data: dict[str, Any], plots: dict[str, bytes], record_json: str) -> str:
    """The report page: ``data`` (the report's sections), its ``plots`` and the full JSON record."""
    e = html.escape
    m = data["mechanism"]
    title = f"Privacy report: {m['name']} at epsilon = {m['epsilon']:.4g}"
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title><style>{_CSS}</style></head><body>"]
    out.append(f"<h1>{e(title)}</h1>")
    out.append(f"<p class=owner>{e(data['notice'])} The report is input-dependent: it is not covered by the mechanism's guarantee.</p>")
    inputs = f"; input: {e(', '.join(data['inputs']))}" if data.get("inputs") else ""
    out.append(f"<p>deniable {e(str(data['deniable_version']))}, created {e(str(data['created']))}{inputs}.</p>")
    out += _mechanism_html(m)
    out += _run_html(data["run"], data["warnings"])
    out += _documents_html(data["documents"])
    out += _survival_html(data["survival"], plots)
    out += _attack_html(data["attack"], data["curve"], m["epsilon"], plots)
    if not plots:
        out.append(f"<p class=note>Plots {e(data['plots'])}. The tables hold every number.</p>")
    out.append("<h2>6. Examples</h2>")
    if data["examples"]:
        out.append(_table(["before", "after"], [[e(x["before"]), e(x["after"])] for x in data["examples"]], left=(0, 1)))
    out.append(f"<p>Examples {e(data['examples_note'])}.</p>")
    out.append("<details><summary>Full record (JSON)</summary><pre>")
    out.append(e(record_json))
    out.append(f"</pre></details><p>Report computed in {data['seconds']:.2f} s.</p></body></html>")
    return "\n".join(out)


def _mechanism_html(m: dict[str, Any]) -> list[str]:
    e = html.escape
    rows = [
        ["mechanism", f"<code>{e(m['repr'])}</code>"],
        ["epsilon", _num(m["epsilon"])],
        ["how epsilon was chosen", e(m["epsilon_how"])],
        ["metric d", e(m["guarantee"]["metric"])],
        ["domain", e(m["guarantee"]["domain"])],
        ["vocabulary", f"{m['vocabulary_size']:,} words"],
    ]
    return ["<h2>1. Mechanism, epsilon and guarantee</h2>", _table(["", ""], rows, left=(0, 1)), f"<p class=stmt><b>Guarantee.</b> {e(m['guarantee_words'])}</p>"]


def _run_html(run: dict[str, Any], warnings: list[str]) -> list[str]:
    e = html.escape
    out = ["<h2>2. Run and warnings</h2>", f"<p>{e(run['summary'])}; {run['documents']:,} documents.</p>"]
    if warnings:
        out.append("<ul>" + "".join(f"<li class=warn>warning: {e(w)}</li>" for w in warnings) + "</ul>")
    else:
        out.append("<p>No warnings: the share of words changed is between 5% and 95% and unknown words are few.</p>")
    return out


def _documents_html(doc: dict[str, Any]) -> list[str]:
    e = html.escape
    out = ["<h2>3. Per-document bounds</h2>", f"<p class=stmt><b>What the number means.</b> {e(doc['statement'])}</p>"]
    if "quantiles" not in doc:
        return [*out, "<p>No documents.</p>"]
    qs = list(doc["quantiles"])
    names = {"q0": "min", "q1": "max"}
    head = ["", *[names.get(q, f"{float(q[1:]) * 100:g}%") for q in qs]]
    out.append(_table(head, [
        ["B = ε·ℓ·P_d^max", *[_num(doc["quantiles"][q]) for q in qs]],
        ["typical ε·ℓ·P_d^avg", *[_num(doc["typical_quantiles"][q]) for q in qs]],
        ["words ℓ", *[_num(doc["length_quantiles"][q]) for q in qs]],
    ], left=(0,)))
    h = doc["histogram"]
    hist_rows = [[f"{_num(h['edges'][i])} – {_num(h['edges'][i + 1])}", str(c)] for i, c in enumerate(h["counts"])]
    out.append("<details><summary>Histogram of B over the documents</summary>" + _table(["B", "documents"], hist_rows) + "</details>")
    lg = doc["longest"]
    where = f"line {lg['line']}" if lg.get("line") is not None else f"document {lg['document']}"
    out.append(f"<p>Largest: {where}, {lg['words']} words, B = {_num(lg['bound'])}. One word at the largest distance: ε·P_d^max = {_num(doc['per_word_max'])}.</p>")
    return out


def _survival_html(sv: dict[str, Any], plots: dict[str, bytes]) -> list[str]:
    e = html.escape
    out = ["<h2>4. Words of this input most likely to survive</h2>"]
    out.append(f"<p>N_w = Pr[M(w) = w] at epsilon = {_num(sv['epsilon'])} ({e(sv['how'] or 'no estimate')}); {sv['distinct_words']:,} distinct input words.</p>")
    if sv["top"]:
        out.append(_table(["word", "N_w", "tokens in input", "unchanged in this output"],
                          [[e(t["word"]), _num(t["n_w"], 3), str(t["count"]), str(t["unchanged"])] for t in sv["top"]], left=(0,)))
    out.append(
        f"<p><b>Rare words</b> (seen once in the input): {sv['rare_words']:,}, of which <b>{sv['rare_unchanged']:,}</b> came through "
        f"unchanged in this output (expected from N_w: {_num(sv['rare_expected_unchanged'], 3)}). {e(sv['rare_statement'])}</p>"
    )
    if sv.get("rare_unchanged_words"):
        out.append(f"<p>Rare words unchanged (shown because examples were requested): {e(', '.join(sv['rare_unchanged_words']))}</p>")
    if sv.get("vocabulary_n_w_quantiles"):
        vq, iq = sv["vocabulary_n_w_quantiles"], sv["input_n_w_quantiles"]
        out.append(_table(["N_w", "median", "90%", "99%", "max"], [
            ["this input's words", *[_num(iq.get(k), 3) for k in ("q0.5", "q0.9", "q0.99", "q1")]],
            [f"vocabulary ({e(sv['vocabulary_n_w_from'])})", *[_num(vq.get(k), 3) for k in ("q0.5", "q0.9", "q0.99", "q1")]],
        ], left=(0,)))
    if "n_w" in plots:
        out.append(_img(plots["n_w"], "N_w of this input's words against the vocabulary's"))
    return out


def _attack_html(at: dict[str, Any], cv: dict[str, Any], epsilon: float, plots: dict[str, bytes]) -> list[str]:
    e = html.escape
    out = ["<h2>5. What an adversary recovers</h2>"]
    if "top1" in at:
        out.append(_table(["", "rate", f"{at['confidence']:.0%} interval"], [
            ["Bayes adversary, top-1", _pct(at["top1"]), _ci(at["top1_ci"])],
            [f"Bayes adversary, top-{at['k']}", _pct(at["topk"]), _ci(at["topk_ci"])],
            [f"rare words (≤ 5 occurrences, {at['n_rare']} tokens), top-1", _pct(at["rare_top1"]), _ci(at["rare_top1_ci"])],
            ["prior only (most frequent word)", _pct(at["prior_top1"]), ""],
            ["identity (output read as is)", _pct(at["unchanged"]), ""],
        ], left=(0,)))
        sims = f", {at['n_simulations']:,} simulations" if at.get("n_simulations") else ""
        out.append(f"<p>{at['n_tokens']:,} in-vocabulary tokens sampled uniformly from the {at['tokens_privatized']:,} privatized; method {e(at['method'])} ({e(at['method_why'])}{sims}); seed {at['seed']}.</p>")
    else:
        out.append("<p>No in-vocabulary tokens: nothing to attack.</p>")
    out.append(f"<p class=stmt>{e(at['statement'])}</p>")
    if cv["points"]:
        out.append("<h3>Recovery against epsilon</h3>")
        out.append(f"<p>{e(cv['note'])}.</p>")
        out.append(_table(["epsilon", "top-1", "interval", "unchanged", "prior only"], [
            [("<b>" if abs(r["epsilon"] - epsilon) < 1e-12 * epsilon else "") + _num(r["epsilon"]), _pct(r["top1"]), _ci(r["top1_ci"]), _pct(r["unchanged"]), _pct(r["prior_top1"])]
            for r in cv["points"]
        ]))
        if "curve" in plots:
            out.append(_img(plots["curve"], "recovery rate against epsilon, this run's epsilon marked"))
    elif cv.get("note"):
        out.append(f"<p>Recovery against epsilon: {e(cv['note'])}.</p>")
    return out
