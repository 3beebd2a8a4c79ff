"""``deniable calibrate``: plausible-deniability statistics at several ε, with reports."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from ..mechanisms import available_mechanisms
from ._options import InputPath, cli_spelling, deprecated_alias, embedding_limit_option, epsilon_list, known_params, mechanism_name, parse_param, parse_params

__all__ = ["calibrate", "parse_param"]


def _check_output_path(path: str | None, option: str, *, dash: bool) -> None:
    """Reject an output path that cannot be written before any computing (exit 2)."""
    if path is None or (dash and path == "-"):
        return
    if path == "-":
        raise click.BadParameter("cannot write to stdout; give a file name", param_hint=option)
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise click.BadParameter(f"{path} is a directory; give a file name", param_hint=option)
    if not folder.is_dir():
        raise click.BadParameter(f"{path}: the folder {folder} does not exist", param_hint=option)
    if not os.access(folder, os.W_OK):
        raise click.BadParameter(f"{path}: the folder {folder} is not writable", param_hint=option)


def _per_epsilon_params(data: dict[str, Any]) -> None:
    """A parameter derived from ε (TEM's γ) differs per ε: record the list, one value per ε, in
    ``sweeps[].params`` instead of the first ε's value alone (each ``results[].params`` keeps its own)."""
    for sweep in data.get("sweeps", []):
        results = sweep.get("results") or []
        if len(results) < 2:
            continue
        for key in list(sweep.get("params", {})):
            values = [r.get("params", {}).get(key) for r in results]
            if any(v != values[0] for v in values[1:]):
                sweep["params"][key] = values


def _friendly(message: str, *, n_words_asked: int | None) -> str:
    """CLI spellings in messages from the library."""
    message = cli_spelling(message.replace("use method='sample'", "use --method sample (or auto)"))
    if message.startswith("words is empty"):
        why = "the selection kept no vocabulary word"
        if n_words_asked is not None:
            why += f" (asked for --words {n_words_asked}; the embedding may have fewer words after filtering)"
        message = f"nothing to measure: {why}; use a larger --embedding / --embedding-limit, or name words with --word"
    return message


@click.command(name="calibrate")
@click.option("-m", "--mechanism", required=True, callback=lambda ctx, param, value: mechanism_name(value),
              help=f"Mechanism name: {', '.join(available_mechanisms())}.")
@click.option("--epsilons", "-e", "epsilons_text", default="1,5,10,20", show_default=True, help="Comma-separated ε values.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Mechanism parameter, repeatable (e.g. --param lam=0.5).")
@click.option("--embedding", type=InputPath(), default=None, help="Embedding file (default: the bundled GloVe subset).")
@embedding_limit_option()
@click.option("--words", "n_words", type=click.IntRange(min=1), default=200, show_default=True, help="Words measured: a sample stratified by neighbourhood density.")
@click.option("--word", "word_list", multiple=True, help="Measure these words instead of a sample (repeatable).")
@click.option("--draws", type=click.IntRange(min=1), default=1000, show_default=True, help="Samples per word (when probabilities are not exact).")
@click.option("--eta", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.01, show_default=True, help="η of the effective support S_w.")
@click.option("--confidence", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.95, show_default=True, help="Level of the intervals of sampled statistics.")
@click.option("--method", type=click.Choice(["auto", "exact", "sample"]), default="auto", show_default=True, help="Exact probabilities when available (auto), or force one.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Random seed (default: fresh, recorded in the JSON).")
@click.option("--examples", "examples_text", default=None, help="Comma-separated words for the example-replacement table.")
@click.option("--html-report", "report_path", type=click.Path(dir_okay=False), default=None, metavar="PATH", help="Write a self-contained HTML report to PATH.")
@deprecated_alias("--report", "--html-report", "report_path", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None, metavar="PATH", help="Write every number and the parameters as JSON to PATH ('-' for stdout).")
@deprecated_alias("--json", "-o/--output", "json_path", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress on stderr: a bar on a terminal, else a line every 30 s (default); --progress forces the bar.")
@click.option("--max-nw", "max_nw", type=float, default=None, metavar="P", help="Instead of a sweep: the largest epsilon at which every word has N_w <= P (0 < P < 1), with the per-mechanism table; from the shipped or a cached calibration, else computed once and cached.")
def calibrate(
    mechanism: str,
    epsilons_text: str,
    params: tuple[str, ...],
    embedding: str | None,
    embedding_limit: int | None,
    n_words: int,
    word_list: tuple[str, ...],
    draws: int,
    eta: float,
    confidence: float,
    method: str,
    seed: int | None,
    examples_text: str | None,
    report_path: str | None,
    json_path: str | None,
    show_progress: bool | None,
    max_nw: float | None = None,
) -> None:
    """Measure plausible-deniability statistics N_w and S_w of a mechanism at several ε.

    Prints a summary table (mean, 5/50/95th percentiles and worst case across words, Madlib
    paper §3-4) and optionally writes an HTML report (--html-report) and a JSON record (-o) that
    re-runs to the same numbers from its recorded parameters and seed.
    """
    limit = embedding_limit
    from ..calibration.report import run_calibration, write_html
    from ..embeddings import load_embedding
    from ..errors import DataError
    from ._io import atomic_output

    if mechanism not in available_mechanisms():
        raise click.BadParameter(f"unknown mechanism {mechanism!r}; known: {', '.join(available_mechanisms())}", param_hint="-m")
    eps = epsilon_list(epsilons_text, "--epsilons")
    kw = parse_params(params)
    known = known_params(mechanism)
    unknown = sorted(set(kw) - set(known)) if known is not None else []
    if unknown:
        raise click.BadParameter(
            f"unknown {mechanism} parameter(s) {', '.join(unknown)}; known: {', '.join(known or []) or 'none'}", param_hint="--param"
        )
    _check_output_path(json_path, "-o/--output", dash=True)
    _check_output_path(report_path, "--html-report", dash=False)
    if max_nw is not None:
        _target(mechanism, max_nw, kw, embedding, limit, json_path, show_progress)
        return
    examples = [w.strip() for w in examples_text.split(",") if w.strip()] if examples_text else None
    words: Any = list(word_list) if word_list else n_words
    emb = load_embedding(embedding, limit=limit, progress=show_progress)
    total = len(eps) * (len(word_list) if word_list else min(n_words, len(emb)))
    from .._progress import progress_bar

    bar = progress_bar(total, "calibrate", show_progress)
    try:
        data = run_calibration(
            mechanism, eps, params=kw, embedding=emb, embedding_path=embedding, words=words, draws=draws, eta=eta,
            confidence=confidence, method=method, seed=seed, examples=examples, progress=bar.update,
        )
    except DataError:
        raise
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise click.UsageError(_friendly(str(exc), n_words_asked=None if word_list else n_words)) from None
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0]) if exc.args else str(exc)) from None
    finally:
        bar.close()
    data["parameters"]["limit"] = limit
    _per_epsilon_params(data)

    _echo_summary(data, draws, eta, to_err=json_path == "-")  # keep stdout pure JSON
    if json_path is not None:
        with atomic_output(json_path) as f:
            json.dump(data, f, indent=1, allow_nan=False)
            f.write("\n")
    if report_path is not None:
        write_html(data, report_path)
        click.echo(f"report: {report_path}", err=True)


def _echo_summary(data: dict[str, Any], draws: int, eta: float, *, to_err: bool) -> None:
    """Print the sweep's one-line header and its per-epsilon N_w / S_w table."""
    sweep = data["sweeps"][0]
    method_used = sorted({r["method"] for r in sweep["results"]})
    click.echo(f"{data['repr']}", err=to_err)
    click.echo(f"{int(sweep['summaries'][0]['n_words'])} words, {'exact' if method_used == ['exact'] else f'{draws} draws per word'}, eta={eta:g}, seed={data['parameters']['seed']}", err=to_err)
    click.echo(f"{'epsilon':>8} {'N_w mean':>9} {'N_w p95':>8} {'N_w max':>8} {'S_w mean':>9} {'S_w p5':>7} {'S_w min':>8}", err=to_err)
    for s in sweep["summaries"]:
        click.echo(
            f"{s['epsilon']:>8g} {s['n_w_mean']:>9.4f} {s['n_w_p95']:>8.4f} {s['n_w_max']:>8.4f} "
            f"{s['s_w_mean']:>9.2f} {s['s_w_p5']:>7.1f} {s['s_w_min']:>8.0f}",
            err=to_err,
        )


def _target(mechanism: str, max_nw: float, kw: dict[str, Any], embedding: str | None, limit: int | None, json_path: str | None,
            show_progress: bool | None) -> None:
    """``calibrate --max-nw P``: the chosen ε, how it was chosen, and the 0.9 / 0.5 / 0.1 table."""
    from ..calibration.targets import choose_epsilon
    from ..embeddings import load_embedding
    from ..mechanisms import get_mechanism
    from ._io import atomic_output
    from ._output import wrap
    from ._targets import check_targets

    check_targets(None, max_nw)
    emb = load_embedding(embedding, limit=limit, progress=show_progress)

    def factory(e: float) -> Any:
        return get_mechanism(mechanism, emb, epsilon=e, **kw)

    try:
        choice, cal = choose_epsilon(factory, max_nw, progress=show_progress)
    except (TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    to_err = json_path == "-"
    click.echo(f"{mechanism}: epsilon = {choice.epsilon:.6g}", err=to_err)
    for line in wrap(f"epsilon {choice}"):
        click.echo(line, err=to_err)
    click.echo(f"{'max N_w':>8} {'epsilon':>9} {'median N_w':>11} {'worst N_w':>10} {'changed':>8}  worst word", err=to_err)
    rows = cal.table(sorted({0.9, 0.5, 0.1, max_nw}, reverse=True))
    for r in rows:
        if r.get("epsilon") is None:
            click.echo(f"{r['max_n_w']:>8g} {'none':>9}", err=to_err)
            continue
        click.echo(
            f"{r['max_n_w']:>8g} {r['epsilon']:>9.4g} {r['median_n_w']:>11.3g} {r['worst_n_w_upper']:>10.3f} {r['changed']:>8.1%}  {r['worst_word']}",
            err=to_err,
        )
    if json_path is not None:
        with atomic_output(json_path) as f:
            json.dump({"mechanism": mechanism, "params": cal.params, "fingerprint": cal.fingerprint, "choice": choice.to_dict(),
                       "table": rows, "estimator": cal.estimator, "coverage": cal.coverage}, f, indent=1, allow_nan=False)
            f.write("\n")
