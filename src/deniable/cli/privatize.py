"""``deniable privatize``: privatize text files word by word, streaming, with bounded memory."""

from __future__ import annotations

import csv
import inspect
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import numpy as np

from .._rng import as_generator
from ..errors import DataError
from ..text.privatize import CASE_POLICIES, OOV_POLICIES, privatize_texts
from ._io import atomic_output, decode_line, input_size, open_input, progress

FORMATS = ("txt", "jsonl", "csv")
_BATCH_CHARS = 1 << 20  # privatize about 1 MiB of text per mechanism call


def _positive_epsilon(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if value is None:
        return value
    if not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"epsilon must be a finite number > 0, got {value}")
    return value


def parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    """``("lam=0.5", "metric=angular")`` -> ``{"lam": 0.5, "metric": "angular"}`` (JSON values, else strings)."""
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _detect_format(path: str) -> str:
    p = Path(path)
    suffix = (Path(p.stem).suffix if p.suffix == ".gz" else p.suffix).lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv",):
        return "csv"
    return "txt"


def _load_vocabulary(path: str | None, limit: int | None):
    """An :class:`Embedding`, or a :class:`BinaryEmbedding` for a BRR bundle (``deniable export brr``)."""
    from ..embeddings import load_embedding

    if path is not None:
        from ..brr_runtime import MAGIC

        with open(path, "rb") as f:
            if f.read(len(MAGIC)) == MAGIC:
                from ..binary import BinaryEmbedding

                if limit is not None:
                    raise click.BadParameter("--limit does not apply to a BRR bundle", param_hint="--limit")
                return BinaryEmbedding.load(path)
    return load_embedding(path, limit=limit)


def _known_parameters(cls) -> list[str]:
    sig = inspect.signature(cls.__init__)
    return [n for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY and n != "epsilon"]


def build_mechanism(name: str, epsilon: float, params: dict[str, Any], embedding_path: str | None, limit: int | None, *, progress: bool | None = None):
    """Load the embedding and construct the mechanism, mapping errors to CLI exit codes."""
    from ..binary import BinaryEmbedding
    from ..mechanisms.registry import _resolve, available_mechanisms, get_mechanism

    if name not in available_mechanisms():
        raise click.BadParameter(f"unknown mechanism {name!r}; known: {', '.join(available_mechanisms())}", param_hint="-m/--mechanism")
    cls = _resolve(name)
    unknown = sorted(set(params) - set(_known_parameters(cls)))
    if unknown:
        raise click.BadParameter(
            f"unknown parameter(s) {', '.join(unknown)} for {name}; known: {', '.join(_known_parameters(cls)) or 'none'}", param_hint="--param"
        )
    vocabulary = _load_vocabulary(embedding_path, limit)
    if isinstance(vocabulary, BinaryEmbedding) and name != "brr":
        raise click.BadParameter(f"{embedding_path} is a BRR bundle; it works only with -m brr", param_hint="--embedding")
    try:
        mech = get_mechanism(name, vocabulary, epsilon=epsilon, **params)
    except DataError:
        raise
    except (TypeError, ValueError) as exc:
        raise click.UsageError(f"invalid parameters for mechanism {name!r}: {exc}") from None
    if hasattr(mech, "precompute"):  # one-time tables (TEM), cached on disk; show progress
        mech.precompute(progress=progress)
    return mech


# -- record readers: each yields (line_number, text, rebuild) where rebuild(new_text) -> output line --


_BOM = b"\xef\xbb\xbf"


def _raw_lines(f, bar) -> Iterator[tuple[int, bytes]]:
    """Numbered raw lines; a UTF-8 byte-order mark on the first line is dropped (it would
    otherwise become part of the first word)."""
    for n, raw in enumerate(f, start=1):
        bar.update(len(raw))
        yield n, (raw[3:] if n == 1 and raw.startswith(_BOM) else raw)


def _read_txt(f, path: str, bar) -> Iterator[tuple[int, str, Any]]:
    for n, raw in _raw_lines(f, bar):
        yield n, decode_line(raw, path=path, line=n), None


def _read_jsonl(f, path: str, bar, column: str, others: set[str]) -> Iterator[tuple[int, str, Any]]:
    for n, raw in _raw_lines(f, bar):
        line = decode_line(raw, path=path, line=n)
        if not line.strip():
            yield n, "", ("blank", line)
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg} at column {exc.colno})", path=path, line=n) from None
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object per line, got {type(obj).__name__}", path=path, line=n)
        if column not in obj:
            raise DataError(f"field {column!r} is missing (fields: {', '.join(map(str, obj)) or 'none'}); choose one with --column", path=path, line=n)
        if not isinstance(obj[column], str):
            raise DataError(f"field {column!r} is {type(obj[column]).__name__}, expected a string", path=path, line=n)
        others.update(k for k in obj if k != column)
        yield n, obj[column], ("json", obj)


def _csv_lines(f, path: str, bar) -> Iterator[str]:
    for n, raw in _raw_lines(f, bar):
        yield decode_line(raw, path=path, line=n)


def _read_csv(f, path: str, bar, column: str, header_out: list[list[str]], others: set[str]) -> Iterator[tuple[int, str, Any]]:
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(_csv_lines(f, path, bar), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise DataError(f"invalid CSV header ({exc})", path=path, line=1) from None
    if column not in header:
        raise DataError(f"no column {column!r} in the CSV header (columns: {', '.join(header)}); choose one with --column", path=path, line=1)
    col = header.index(column)
    header_out.append(header)
    others.update(h for h in header if h != column)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(f"invalid CSV ({exc})", path=path, line=reader.line_num) from None
        if len(row) != len(header):
            raise DataError(f"{len(row)} fields, the header has {len(header)}", path=path, line=reader.line_num)
        yield reader.line_num, row[col], ("csv", row, col)


def _batches(records: Iterator[tuple[int, str, Any]]) -> Iterator[list[tuple[int, str, Any]]]:
    batch: list[tuple[int, str, Any]] = []
    chars = 0
    for rec in records:
        batch.append(rec)
        chars += len(rec[1])
        if chars >= _BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def _process(
    mechanism, path: str, out, fmt: str, column: str, oov: str, case: str, gen: np.random.Generator, stats: dict[str, int], bar, report: list | None
) -> set[str]:
    """Privatize one input into ``out``; returns the names of other fields copied unchanged."""
    others: set[str] = set()
    with open_input(path) as f:
        header: list[list[str]] = []
        if fmt == "txt":
            records = _read_txt(f, path, bar)
        elif fmt == "jsonl":
            records = _read_jsonl(f, path, bar, column, others)
        else:
            records = _read_csv(f, path, bar, column, header, others)
        writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
        seen = 0
        for batch in _batches(records):
            if writer is not None and seen == 0:
                writer.writerow(header[0])
            seen += len(batch)
            texts = [t for _, t, _ in batch]
            counts: list[int] | None = [] if report is not None else None
            new = privatize_texts(mechanism, texts, rng=gen, oov=oov, case=case, stats=stats, privatized_per_text=counts)
            if report is not None:
                report.extend(zip([ln for ln, _, _ in batch], counts))
            for (_, _, extra), text in zip(batch, new):
                if fmt == "txt":
                    out.write(text)
                elif fmt == "jsonl":
                    if extra[0] == "blank":
                        out.write(extra[1])
                    else:
                        obj = extra[1]
                        obj[column] = text
                        out.write(json.dumps(obj, ensure_ascii=False) + "\n")
                else:
                    row = extra[1]
                    row[extra[2]] = text
                    writer.writerow(row)
        if seen == 0 and not (fmt == "csv" and header):
            raise DataError("input is empty; nothing to privatize", path="<stdin>" if path == "-" else path)
        if writer is not None and seen == 0:
            writer.writerow(header[0])
        stats["records"] = stats.get("records", 0) + seen
    return others


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-o", "--output", default="-", show_default=True, type=click.Path(allow_dash=True), help="Output file ('-' = stdout); a folder when several inputs are given.")
@click.option("-m", "--mechanism", required=True, help="Mechanism name: madlib, mahalanobis, tem, brr.")
@click.option("-e", "--epsilon", required=True, type=float, callback=_positive_epsilon, help="Privacy parameter epsilon > 0 (per unit of the mechanism's metric).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Mechanism parameter, repeatable (e.g. --param lam=0.5).")
@click.option("--embedding", "embedding_path", type=click.Path(exists=True, dir_okay=False), help="Embedding file (GloVe/word2vec/fastText text or binary, .npz), or a BRR bundle for -m brr; default: the bundled GloVe 840B 300d.")
@click.option("--limit", "--embedding-limit", "embedding_limit", type=click.IntRange(min=1), help="Use only the first N words of the embedding.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed for reproducible experiments (default: fresh OS entropy).")
@click.option("--secure", is_flag=True, help='Draw noise from ChaCha20 keyed by the OS (needs pip install "deniable[secure]"); not with --seed.')
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Input format (default: from the file name; txt otherwise).")
@click.option("--column", default="text", show_default=True, help="Field (jsonl) or column (csv) holding the text.")
@click.option("--oov", type=click.Choice(OOV_POLICIES), default="unk", show_default=True, help="Out-of-vocabulary words: privatize as UNK, drop, or keep verbatim (unsafe; warns).")
@click.option("--case", "case", type=click.Choice(CASE_POLICIES), default="preserve", show_default=True, help="Output words take the input words' case pattern (released as is), or stay lower-case.")
@click.option("--report", is_flag=True, help="Print the per-document privacy guarantee summary to stderr.")
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress bar on stderr (default: when stderr is a terminal).")
def privatize(inputs, output, mechanism, epsilon, params, embedding_path, embedding_limit, seed, secure, fmt, column, oov, case, report, show_progress):
    """Privatize INPUT files (or - for stdin) word by word.

    Each word is replaced by a word sampled by the mechanism; whitespace and punctuation pass
    through, so the layout is kept (and released). Out-of-vocabulary words are privatized as the
    UNK point by default and never copied to the output unless --oov keep is given. In jsonl and
    csv input only --column is privatized: other fields are copied unchanged (a note on stderr
    names them). Output is written atomically: a file appears only when complete.

    \b
    Example:
      deniable privatize reviews.txt -o reviews.private.txt -m madlib -e 15 --seed 0
      deniable privatize data.jsonl --column body -m mahalanobis -e 10 --param lam=0.5
    """
    import warnings

    from ..errors import PrivacyWarning

    param_values = parse_params(params)
    if output != "-" and (len(inputs) > 1 or Path(output).is_dir()):
        if not Path(output).is_dir():
            raise click.BadParameter("with several inputs, -o must be an existing folder", param_hint="-o/--output")
        names = [Path(p).name for p in inputs]
        if "-" in inputs or len(set(names)) != len(names):
            raise click.BadParameter("with -o FOLDER, inputs must be files with distinct names", param_hint="INPUTS")
        targets = [str(Path(output) / n) for n in names]
    elif output == "-":
        targets = ["-"] * len(inputs)
    else:
        targets = [output]
    if inputs.count("-") > 1:
        raise click.BadParameter("stdin ('-') can be read only once", param_hint="INPUTS")

    mech = build_mechanism(mechanism, epsilon, param_values, embedding_path, embedding_limit, progress=show_progress)
    if secure and seed is not None:
        raise click.BadParameter("--secure draws fresh OS entropy; it cannot be combined with --seed", param_hint="--secure")
    gen = as_generator("secure" if secure else seed)
    stats: dict[str, int] = {}
    docs: list | None = [] if report else None
    total = sum(s for s in (input_size(p) for p in inputs) if s) or None
    disable = None if show_progress is None else not show_progress
    with progress(total, desc="privatize", disable=disable) as bar, warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # reported once below, as one line
        for path, target in zip(inputs, targets):
            kind = fmt or ("txt" if path == "-" else _detect_format(path))
            with atomic_output(target) as out:
                others = _process(mech, path, out, kind, column, oov, case, gen, stats, bar, docs)
            if others:
                click.echo(f"note: {path}: only {column!r} was privatized; other fields copied unchanged: {', '.join(sorted(others))}", err=True)
    if oov == "keep" and stats.get("unknown"):
        click.echo(f"warning: --oov keep copied {stats['unknown']} out-of-vocabulary word(s) verbatim, without privacy", err=True)
    if docs is not None:
        _print_report(mech, docs, stats, oov)


def _print_report(mech, docs: list[tuple[int, int]], stats: dict[str, int], oov: str) -> None:
    """Per-document guarantees: ε·ℓ·P_d^max against any other document of the same length and
    layout (docs/calibration.md). ℓ counts the words the mechanism privatized (UNK included;
    dropped or kept unknown words are not privatized and carry no guarantee)."""
    from ..calibration.document import document_guarantee

    click.echo(f"mechanism: {mech!r}", err=True)
    click.echo(f"guarantee: {mech.guarantee}", err=True)
    click.echo(
        f"records: {stats.get('records', 0)}, words: {stats.get('words', 0)}, out-of-vocabulary: {stats.get('unknown', 0)} (oov={oov})",
        err=True,
    )
    if not docs:
        return
    lengths = np.fromiter((n for _, n in docs), dtype=np.int64, count=len(docs))
    # "any other document" may contain unknown words, privatized as UNK: include UNK in P_d^max
    g = document_guarantee(mech, [-1] if oov == "unk" else [0])
    worst = mech.epsilon * lengths * g.p_max
    typical = mech.epsilon * lengths * g.p_avg
    k = int(np.argmax(lengths))
    click.echo(f"metric over the vocabulary: P_d^max = {g.p_max:.4g}, P_d^avg = {g.p_avg:.4g} (d = {g.metric})", err=True)
    click.echo(
        f"per document (epsilon*l*P_d^max, against any other document of the same length and layout): median {np.median(worst):.4g}, "
        f"max {worst.max():.4g} (line {docs[k][0]}, {lengths[k]} words); typical epsilon*l*P_d^avg: median {np.median(typical):.4g}",
        err=True,
    )
    if oov == "keep" and stats.get("unknown"):
        click.echo(f"warning: {stats['unknown']} unknown word(s) were copied verbatim and are not covered by any guarantee", err=True)
