"""``deniable privatize``: privatize text files word by word, streaming, with bounded memory."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ..errors import DataError
from ..mechanisms.registry import available_mechanisms
from ..reports import RunRecorder, read_examples
from ..text.io import FORMATS, RecordWriter, batch_records, detect_format, read_records
from ..text.privatize import CASE_POLICIES, OOV_POLICIES, ObservedSampler
from ._io import atomic_output, input_size, progress
from ._options import InputPath, embedding_limit_option, mechanism_name, parse_params, workers_option
from ._output import echo_wrapped
from ._report import report_lines
from ._spark import check_master, check_pyspark
from ._targets import SurvivalTracker, build_targeted, summary_lines, target_options
from .ledger import KEY_VARIABLE, LedgerRun

_PIECE_CHARS = 1 << 20  # records longer than this are read and processed in pieces (bounded memory)
SPARK_FORMATS = ("parquet", "csv", "jsonl", "txt")  # = deniable.spark.files.TABLE_FORMATS (literal: --help without importing it; a test checks)


def _load_vocabulary(path: str | None, limit: int | None, progress: bool | None = None):
    """An :class:`Embedding`, or a :class:`BinaryEmbedding` for a BRR bundle (``deniable export brr``).
    ``progress``: a bar of the bytes read for text / word2vec files (None: when stderr is a terminal)."""
    from ..embeddings import load_embedding

    if path is not None:
        from ..brr_runtime import MAGIC

        with open(path, "rb") as f:
            if f.read(len(MAGIC)) == MAGIC:
                from ..binary import BinaryEmbedding

                if limit is not None:
                    raise click.BadParameter("--embedding-limit does not apply to a BRR bundle", param_hint="--embedding-limit")
                return BinaryEmbedding.load(path)
    return load_embedding(path, limit=limit, progress=progress)


def _known_parameters(cls) -> list[str]:
    sig = inspect.signature(cls.__init__)
    return [n for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY and n != "epsilon"]


def build_mechanism(
    name: str, epsilon: float, params: dict[str, Any], embedding_path: str | None, limit: int | None, *, progress: bool | None = None, device: str | None = None,
    vocabulary: Any = None,
):
    """Load the embedding and construct the mechanism (the torch backend on ``device`` when
    given), mapping errors to CLI exit codes. ``vocabulary``: one loaded before from the same
    ``embedding_path`` and ``limit`` (e.g. a probe's), used instead of reading the file again."""
    from ..binary import BinaryEmbedding
    from ..mechanisms.registry import get_mechanism, mechanism_class

    if name not in available_mechanisms():
        raise click.BadParameter(f"unknown mechanism {name!r}; known: {', '.join(available_mechanisms())}", param_hint="-m/--mechanism")
    cls: type = mechanism_class(name)
    backend: dict[str, Any] = {}
    if device is not None:
        from ..backends.torch_backend import torch_mechanism_class, torch_mechanisms

        if name not in torch_mechanisms():
            raise click.BadParameter(f"{name} has no torch backend (torch backends: {', '.join(torch_mechanisms())})", param_hint="--device")
        cls, backend = torch_mechanism_class(name), {"backend": "torch", "device": device}
    unknown = sorted(set(params) - set(_known_parameters(cls)))
    if unknown:
        raise click.BadParameter(
            f"unknown parameter(s) {', '.join(unknown)} for {name}; known: {', '.join(_known_parameters(cls)) or 'none'}", param_hint="--param"
        )
    if vocabulary is None:
        vocabulary = _load_vocabulary(embedding_path, limit, progress)
    if isinstance(vocabulary, BinaryEmbedding) and name != "brr":
        raise click.BadParameter(f"{embedding_path} is a BRR bundle; it works only with -m brr", param_hint="--embedding")
    try:
        mech = get_mechanism(name, vocabulary, epsilon=epsilon, **backend, **params)
    except DataError:
        raise
    except (TypeError, ValueError) as exc:
        raise click.UsageError(f"invalid parameters for mechanism {name!r}: {exc}") from None
    except (ImportError, RuntimeError) as exc:  # --device: torch missing, or no CUDA
        raise click.UsageError(str(exc)) from None
    mech.precompute(progress=progress)  # one-time tables (TEM), cached on disk; show progress
    return mech


def _fit_corpus(mechanism, path: str | None):
    """``mechanism`` fitted to the corpus file ``path`` (one text per line), or as is for None."""
    if path is None:
        return mechanism
    if not mechanism.fittable:
        raise click.BadParameter(f"{mechanism.name} has no fit step; --fit applies to santext_plus", param_hint="--fit")
    try:
        with open(path, encoding="utf-8") as lines:
            mechanism.fit(lines)
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=path) from None
    except ValueError as exc:
        raise click.UsageError(f"--fit {path}: {exc}") from None
    return mechanism


@contextlib.contextmanager
def _privatizer(mechanism, workers: int | str, chars: int | None) -> Iterator[Any]:
    """``--workers``: :meth:`ParallelPrivatizer.privatize_batches
    <deniable.backends.text.ParallelPrivatizer.privatize_batches>` in ``workers`` processes
    ("auto": :func:`~deniable.backends.text.auto_workers` of the input's ``chars`` and of what
    the workers can do; 1: in this process), each running the whole pipeline on its batches
    where forking is safe (else the text work only, this process sampling); the workers start
    now (before a progress bar's thread, which would rule out forking) and stop on exit. With
    :class:`~deniable.backends.text.BatchStreams` the output is the same for a seed whatever the
    number of workers. An input of :data:`~deniable.text._kernels.COMPILED_MIN_INPUT` characters
    or more loads the text path's compiled loops (numba) first, for all its batches."""
    from ..backends.text import ParallelPrivatizer, auto_workers, fork_refusal
    from ..text import load_compiled_loops

    load_compiled_loops(chars)  # before the workers fork, which share them
    serial_chars = 0
    if workers == "auto":
        workers, serial_chars = auto_workers(chars, whole=fork_refusal(mechanism) is None)
    pool = ParallelPrivatizer(mechanism, int(workers))
    try:
        if not serial_chars:
            pool.start()
        yield functools.partial(pool.privatize_batches, serial_chars=serial_chars)
    finally:
        pool.close()


def _process(
    mechanism, path: str, out, fmt: str, column: str, oov: str, case: str, streams: Any, stats: dict[str, int], bar, report: list | None,
    ledger_counts=None, pool=None,
) -> set[str]:
    """Privatize one input into ``out``, batch by batch (bounded memory: long records are
    processed in pieces, see :mod:`deniable.text.io`), batch ``i`` drawing from ``streams(i)``
    (a :class:`~deniable.backends.text.BatchStreams`), in ``pool``'s worker processes (what
    :func:`_privatizer` gives; None: in this process); returns the names of the other fields,
    copied unchanged."""
    if pool is None:
        from ..backends.text import ParallelPrivatizer

        pool = ParallelPrivatizer(mechanism, 1).privatize_batches
    # plain text whose records nobody counts: the lines of a block as one record (the same batches)
    joined = fmt == "txt" and report is None and ledger_counts is None
    reader = read_records(path, format=fmt, column=column, max_chars=_PIECE_CHARS, joined=joined)
    writer = RecordWriter(out, reader)
    shown = 0
    batches = pool(
        batch_records(iter(reader)), texts_of=lambda b: [r.text for r in b], rng=streams, oov=oov, case=case, stats=stats,
        counts=report is not None or ledger_counts is not None,
    )
    for batch, new, counts in batches:
        writer.write_batch(batch, new)
        if report is not None:
            _add_counts(report, batch, counts)
        if ledger_counts is not None:  # --ledger: words per record (and user keys), never the text
            ledger_counts.add(reader, batch, counts)
        pos = reader.file_position
        bar.update(pos - shown)
        shown = pos
        bar.set_postfix_str(f"{stats.get('records', 0) + reader.records} records", refresh=True)
    if reader.records == 0 and reader.header is None:
        raise DataError("input is empty; nothing to privatize", path=reader.name)
    writer.close()
    stats["records"] = stats.get("records", 0) + reader.records
    return reader.other_fields


def _add_counts(report: list, batch, counts) -> None:
    """Per-record counts of privatized words, the pieces of a long record summed."""
    for rec, c in zip(batch, counts):
        if not rec.first and report:
            report[-1] = (report[-1][0], report[-1][1] + c)
        else:
            report.append((rec.line, c))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("inputs", nargs=-1, required=True, type=InputPath(dir_okay=True, allow_dash=True))
@click.option("-o", "--output", default="-", show_default=True, type=click.Path(allow_dash=True), help="Output file ('-' = stdout); a folder when several inputs are given; with --spark, the output directory (written atomically, must not exist).")
@click.option("-m", "--mechanism", required=True, callback=lambda ctx, param, value: mechanism_name(value),
              help=f"Mechanism name: {', '.join(available_mechanisms())}.")
@target_options
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Mechanism parameter, repeatable (e.g. --param lam=0.5).")
@click.option("--exclude-outputs", "exclude_outputs", default=None, metavar="FILE", help="Words the mechanism may never output: 'profanity' (the shipped English list) or a file with one word per line (# comments). Inputs are unchanged; the guarantee holds over the remaining outputs (docs/explanation/excluded_outputs.md). Numpy backend only.")
@click.option("--fit", "fit_path", type=InputPath(), default=None, help="Corpus to fit the mechanism to (a text file, one text per line): santext_plus takes its sensitive words, the least frequent fraction w, from it. Not with --max-nw.")
@click.option("--embedding", "embedding_path", type=InputPath(), help="Embedding file (GloVe/word2vec/fastText text or binary, .npz), or a BRR bundle for -m brr; default: the bundled GloVe 840B 300d.")
@embedding_limit_option()
@click.option("--seed", type=click.IntRange(min=0), help="Seed for reproducible experiments (default: fresh OS entropy).")
@click.option("--secure", is_flag=True, help='Draw noise from ChaCha20 keyed by the OS (needs pip install "deniable[secure]"); not with --seed.')
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), help="Input format (default: from the file name, or for a --spark directory from its files; txt otherwise). parquet needs --spark.")
@click.option("--column", default="text", show_default=True, help="Field (jsonl) or column (csv) holding the text.")
@click.option("--oov", type=click.Choice(OOV_POLICIES), default="unk", show_default=True, help="Out-of-vocabulary words: privatize as UNK, drop, or keep verbatim (unsafe; warns).")
@click.option("--case", "case", type=click.Choice(CASE_POLICIES), default="preserve", show_default=True, help="Output words take the input words' case pattern (released as is), or stay lower-case.")
@click.option("--report", is_flag=True, help="Print details on stderr after the summary: the mechanism, its guarantee, how epsilon was chosen, per-document bounds and the input words most likely to come back unchanged, each figure explained. Input-dependent (it names input words): keep it with the text's owner, never release it with the output.")
@click.option("--privacy-report", "privacy_report", default=None, type=click.Path(dir_okay=False), metavar="PATH", help="Write a sign-off report of this run to PATH (HTML; JSON when PATH ends in .json): epsilon and guarantee, per-document bounds, the input words most likely to survive, an attack's recovery rate, warnings, plots. Input-dependent (it names input words): keep it with the text's owner, never release it with the output. Not with --spark.")
@click.option("--report-examples", "report_examples", default=0, type=click.IntRange(min=0), metavar="N", help="With --privacy-report: include the first N before/after records (they contain data; default none).")
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress bar on stderr (default: when stderr is a terminal).")
@workers_option()
@click.option("--device", default=None, metavar="DEVICE", help='Sample with the torch backend on DEVICE (cuda, cuda:N, cpu; pip install "deniable[torch]"), tokenizing in worker processes. Default: the numpy backend.')
@click.option("--spark", "use_spark", is_flag=True, help='Run on Spark (pip install "deniable[spark]"; master local[*] unless --master): INPUT is one Parquet/CSV/JSONL/txt file or directory of part files, -o the output directory.')
@click.option("--master", default=None, metavar="URL", help="Spark master URL (local[4], spark://host:7077, yarn, ...); implies --spark.")
@click.option("--key", "key", default=None, metavar="COLUMN", help="With --spark: the row key column (unique per row), so that with --seed each row's output depends only on (seed, column, release id, key). Default: every row gets independent randomness under a fresh secret per run; --seed needs --key.")
@click.option("--release-id", "release_id", default=None, metavar="NAME", help="With --spark: the release identity mixed into every row's randomness; give each table privatized with one --seed its own, so rows with equal keys in two tables do not share noise.")
@click.option("--content-keys", "content_keys", is_flag=True, help="With --spark: key each row by its text (unsafe; warns): identical texts get identical outputs, which shows they were equal. Not with --key.")
@click.option("--output-format", "output_format", type=click.Choice(SPARK_FORMATS), default=None, help="With --spark: output format (default: the input's).")
@click.option("--ledger", "ledger_path", default=None, type=click.Path(dir_okay=False), metavar="PATH", help=f"Append one row per input to this release ledger (SQLite; created when missing) after the run: dataset, user keys, mechanism, epsilon, words per record, output; never text. User keys are stored as given, or as keyed hashes when ${KEY_VARIABLE} holds a secret. See docs/ledger.md and 'deniable ledger show'.")
@click.option("--dataset", default=None, metavar="NAME", help="With --ledger: the dataset's name in the ledger (default: a hash of the input file's bytes; required for stdin).")
@click.option("--max-total", "max_total", default=None, type=click.FloatRange(min=0, min_open=True), metavar="X", help="With --ledger: refuse (exit 1, no output written) a release that would take its dataset's or a user key's sum of epsilon past X. Needs -o FILE.")
@click.option("--user-column", "user_column", default=None, metavar="COL", help="With --ledger: the jsonl field or csv column holding each record's user key; the ledger keeps totals per user key.")
@click.option("--max-words-per-user", "max_words_per_user", default=None, type=click.IntRange(min=1), metavar="N", help="With --spark, --ledger and --user-column: privatize at most N words per user key in this release (the first N, rows ordered by --key, else by position); the rest are replaced by [UNK] (or dropped: --over-cap drop). The ledger records the words privatized.")
@click.option("--over-cap", "over_cap", default=None, type=click.Choice(("unk", "drop")), help="With --max-words-per-user: words over the cap become [UNK] (default) or are dropped.")
def privatize(inputs, output, mechanism, epsilon, params, embedding_path, embedding_limit, seed, secure, fmt, column, oov, case, report, show_progress, max_nw, device, use_spark, master, key, release_id, content_keys, output_format, fit_path=None, ledger_path=None, dataset=None, max_total=None, user_column=None, privacy_report=None, report_examples=0, exclude_outputs=None, max_words_per_user=None, over_cap=None, workers="auto"):
    """Privatize INPUT files (or - for stdin) word by word.

    Each word is replaced by a word sampled by the mechanism; whitespace and punctuation pass
    through, so the layout is kept (and released). Out-of-vocabulary words are privatized as the
    UNK point by default and never copied to the output unless --oov keep is given. In jsonl and
    csv input only --column is privatized: other fields are copied unchanged (a note on stderr
    names them). Output is written atomically: a file appears only when complete.

    With --spark (or --master URL) INPUT is one file or directory of Parquet, CSV, JSONL or txt
    part files, read and privatized by Spark (deniable.spark.files.privatize_files); the output
    is a directory of part files. With --seed and --key each row's output depends only on the
    seed, the column and its key, whatever the partitioning.

    \b
    Example:
      deniable privatize reviews.txt -o reviews.private.txt -m tem --max-nw 0.5
      deniable privatize reviews.txt -o reviews.private.txt -m madlib -e 15 --seed 0
      deniable privatize data.jsonl --column body -m mahalanobis -e 10 --param lam=0.5
      deniable privatize tickets/ -o tickets_private/ --spark --key id --column body -m madlib -e 10
    """
    param_values = _mechanism_params(params, exclude_outputs, device)
    book = LedgerRun.from_options(ledger_path, dataset, max_total, user_column, inputs=inputs, output=output, column=column, fmt=fmt, spark=use_spark or master is not None)
    if fit_path is not None and max_nw is not None:
        raise click.BadParameter("--max-nw chooses epsilon for the unfitted mechanism; with --fit give -e", param_hint="--fit")
    if report_examples and privacy_report is None:
        raise click.BadParameter("applies with --privacy-report PATH", param_hint="--report-examples")
    if privacy_report is not None and (use_spark or master is not None):
        raise click.BadParameter("--privacy-report is not available with --spark; run it on a sample without --spark", param_hint="--privacy-report")
    if use_spark or master is not None:
        _check_spark_usage(inputs, output, master, secure, report, device, fmt)
        _check_spark_keys(seed, key, release_id, content_keys, book, max_words_per_user, over_cap)
        mech = _fit_corpus(build_targeted(build_mechanism, mechanism, epsilon, max_nw, param_values, embedding_path, embedding_limit, progress=show_progress), fit_path)
        _privatize_spark(mech, inputs[0], output, master, fmt, output_format, column, key, seed, oov, case, release_id, content_keys, book=book, max_words_per_user=max_words_per_user, over_cap=over_cap)
        return
    for name, value in (("--key", key), ("--release-id", release_id), ("--content-keys", content_keys or None), ("--output-format", output_format), ("--max-words-per-user", max_words_per_user), ("--over-cap", over_cap)):
        if value is not None:
            raise click.BadParameter(f"{name} applies to Spark runs only; add --spark", param_hint=name)
    targets = _local_targets(inputs, output, fmt)
    if secure and seed is not None:
        raise click.BadParameter("--secure draws fresh OS entropy; it cannot be combined with --seed", param_hint="--secure")
    from ..text import load_compiled_loops

    total = _input_chars(inputs)
    load_compiled_loops(total, wait=False)  # a large input: loaded meanwhile the mechanism is built
    build = build_mechanism if device is None else (lambda *a, **k: build_mechanism(*a, device=device, **k))
    mech = _fit_corpus(build_targeted(build, mechanism, epsilon, max_nw, param_values, embedding_path, embedding_limit, progress=show_progress, device=device), fit_path)
    _privatize_local(
        mech, inputs, targets, fmt=fmt, column=column, oov=oov, case=case, rng="secure" if secure else seed, seed=seed, report=report, privacy_report=privacy_report,
        report_examples=report_examples, book=book, show_progress=show_progress, workers=workers, total=total,
    )


def _mechanism_params(params: tuple[str, ...], exclude_outputs: str | None, device: str | None) -> dict[str, Any]:
    """``--param`` values, with ``--exclude-outputs`` added (usage errors: exit 2)."""
    param_values = parse_params(params)
    if exclude_outputs is not None:
        if param_values.get("exclude_outputs", exclude_outputs) != exclude_outputs:
            raise click.BadParameter("given both as --exclude-outputs and --param exclude_outputs=...; give it once", param_hint="--exclude-outputs")
        if device is not None:
            raise click.BadParameter("excluded outputs are supported by the numpy backend; drop --device", param_hint="--exclude-outputs")
        param_values["exclude_outputs"] = exclude_outputs
    return param_values


def _local_targets(inputs: tuple[str, ...], output: str, fmt: str | None) -> list[str]:
    """The output of each input of a run without Spark (usage errors: exit 2)."""
    if fmt == "parquet":
        raise click.BadParameter("parquet input is read with Spark; add --spark", param_hint="--format")
    dirs = [p for p in inputs if p != "-" and Path(p).is_dir()]
    if dirs:
        raise click.BadParameter(f"{dirs[0]} is a directory; directories of part files are read with --spark", param_hint="INPUTS")
    if output != "-" and (len(inputs) > 1 or Path(output).is_dir()):
        if not Path(output).is_dir():
            raise click.BadParameter("with several inputs, -o must be an existing folder", param_hint="-o/--output")
        names = [Path(p).name for p in inputs]
        if "-" in inputs or len(set(names)) != len(names):
            raise click.BadParameter("with -o FOLDER, inputs must be files with distinct names", param_hint="INPUTS")
    if inputs.count("-") > 1:
        raise click.BadParameter("stdin ('-') can be read only once", param_hint="INPUTS")
    if output != "-" and (len(inputs) > 1 or Path(output).is_dir()):
        return [str(Path(output) / Path(p).name) for p in inputs]
    return ["-"] * len(inputs) if output == "-" else [output]


def _privatize_local(
    mech, inputs: tuple[str, ...], targets: list[str], *, fmt: str | None, column: str, oov: str, case: str, rng: Any, seed: int | None, report: bool,
    privacy_report: str | None, report_examples: int, book: Any, show_progress: bool | None, workers: int | str, total: int | None,
) -> None:
    """Privatize each input into its target (one random stream per batch, spawned from ``rng``:
    input ``j``'s batch ``i`` draws from stream ``(j, i)``, whatever the number of workers), then
    print the summary and the reports."""
    import warnings

    from ..backends.text import BatchStreams
    from ..errors import PrivacyWarning

    tracker = SurvivalTracker(mech) if report else None
    recorder = RunRecorder(mech, rng=seed or 0) if privacy_report is not None else None
    observers = [o.observe for o in (tracker, recorder) if o is not None]
    sampler = ObservedSampler(mech, *observers) if observers else mech  # counts what is privatized; mech itself unchanged
    streams = BatchStreams(rng)
    if book is not None:
        book.precheck(mech, inputs)  # a dataset already at its budget: refused before the run
    stats: dict[str, int] = {}
    docs: list | None = [] if report or privacy_report is not None else None
    disable = None if show_progress is None else not show_progress
    with _privatizer(sampler, workers, total) as pool, progress(total, desc="privatize", disable=disable) as bar, warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # reported once below, as one line
        for j, (path, target) in enumerate(zip(inputs, targets)):
            kind = fmt or ("txt" if path == "-" else detect_format(path))
            counts = book.tally() if book is not None else None
            with atomic_output(target) as out:
                others = _process(sampler, path, out, kind, column, oov, case, streams.child(j), stats, bar, docs, counts, pool)
                if book is not None:  # check and append before the output is committed: a refusal leaves none
                    book.commit(mech, path, counts, target)
            if others:
                echo_wrapped(f"note: {path}: only {column!r} was privatized; other fields copied unchanged: {', '.join(sorted(others))}")
    if oov == "keep" and stats.get("unknown"):
        echo_wrapped(f"warning: --oov keep copied {stats['unknown']} out-of-vocabulary word(s) verbatim, without privacy")
    for line in summary_lines(mech, stats, oov):
        click.echo(line, err=True)
    if book is not None:
        book.report()  # the releases recorded in the ledger, one line each
    if report and docs is not None:
        for line in report_lines(mech, docs, stats, oov) + (tracker.lines() if tracker is not None else []):
            click.echo(line, err=True)
    if recorder is not None and privacy_report is not None:  # --privacy-report: after the run, from what the recorder saw
        examples, note = read_examples(inputs, targets, report_examples, fmt=fmt, column=column) if report_examples else ([], None)
        recorder.report(stats=stats, lengths=[n for _, n in docs or []], lines=[ln for ln, _ in docs or []], oov=oov, examples=examples,
                        examples_note=note, seed=seed, inputs=list(inputs)).write(privacy_report)
        echo_wrapped(f"privacy report: {privacy_report} (input-dependent: keep it with the text's owner)")


def _input_chars(inputs: tuple[str, ...]) -> int | None:
    """The inputs' size (bytes of the files that have one; None: none has, e.g. stdin)."""
    return sum(s for s in (input_size(p) for p in inputs) if s) or None


def _check_spark_usage(inputs: tuple[str, ...], output: str, master: str | None, secure: bool, report: bool, device: str | None, fmt: str | None) -> None:
    """Usage errors of a Spark run (exit 2), before anything is loaded."""
    check_master(master)
    if device is not None:
        raise click.BadParameter("--device (the torch backend) and --spark cannot be combined; Spark executors sample with the numpy backend", param_hint="--device")
    if secure:
        raise click.BadParameter("--secure does not apply with --spark: without --seed each Spark run draws a fresh 128-bit secret seed", param_hint="--secure")
    if report:
        raise click.BadParameter("--report is not available with --spark (the words are counted on the executors); run it on a sample without --spark", param_hint="--report")
    if len(inputs) != 1 or inputs[0] == "-":
        raise click.BadParameter("--spark reads one INPUT: a file or a directory of part files (not stdin)", param_hint="INPUTS")
    if output == "-":
        raise click.BadParameter("--spark writes a directory of part files; give it with -o DIR", param_hint="-o/--output")
    if Path(output).exists():
        raise click.BadParameter(f"{output} already exists; Spark writes a new directory: remove it or choose another name", param_hint="-o/--output")
    check_pyspark()


def _check_spark_keys(seed: int | None, key: str | None, release_id: str | None, content_keys: bool, book: Any = None, max_words_per_user: int | None = None, over_cap: str | None = None) -> None:
    """Usage errors of the row keys of a Spark run (exit 2): the rule of
    :func:`deniable.integrations.keyed.resolve_randomness`; and of the per-user cap (it needs the
    user keys of --ledger's --user-column)."""
    if over_cap is not None and max_words_per_user is None:
        raise click.BadParameter("applies with --max-words-per-user N", param_hint="--over-cap")
    if max_words_per_user is not None and (book is None or book.user_column is None):
        raise click.BadParameter("caps the words of each user key: add --ledger PATH --dataset NAME --user-column COL", param_hint="--max-words-per-user")
    if content_keys and key is not None:
        raise click.BadParameter("--content-keys keys each row by its text; it cannot be combined with --key COLUMN", param_hint="--content-keys")
    if seed is not None and key is None and not content_keys:
        raise click.BadParameter(
            "--seed with --spark needs --key COLUMN (a unique id per row) to reproduce a run; without a key, rows at the same "
            "position of two runs with one seed would share their noise. Drop --seed for fresh randomness",
            param_hint="--seed",
        )
    if release_id is not None and not release_id:
        raise click.BadParameter("needs a non-empty name", param_hint="--release-id")


def _privatize_spark(
    mech, source: str, output: str, master: str | None, fmt: str | None, output_format: str | None, column: str, key: str | None, seed: int | None, oov: str, case: str,
    release_id: str | None = None, content_keys: bool = False, *, book: Any = None, max_words_per_user: int | None = None, over_cap: str | None = None,
) -> None:
    """``deniable privatize --spark``: :func:`deniable.spark.files.privatize_files` on the
    mechanism built (and its ε resolved from ``--max-nw``) on the driver; with ``--ledger`` the
    job records the release (per-user totals computed on the cluster) before writing, and a
    release over ``--max-total`` leaves no output (exit 1)."""
    import warnings

    from ..errors import PrivacyWarning
    from ..ledger import BudgetExceeded
    from ..spark.files import detect_table_format, privatize_files
    from ._spark import SparkRun

    kind = detect_table_format(source, fmt)
    bounds: dict[str, Any] = {} if max_words_per_user is None else {"max_words_per_user": max_words_per_user, "over_cap": over_cap or "unk"}
    if book is not None:
        bounds.update(book.spark_options(mech, output))  # a dataset already at its budget: refused before the job
    with SparkRun(master) as run, warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # --content-keys: reported below, as one line
        try:
            done = run.job(
                privatize_files, source, output, mech, column=column, fmt=kind, output_format=output_format, spark=run.session,
                key=key, rng=seed, release_id=release_id, content_keys=content_keys, oov=oov, case=case, **bounds,
            )
        except BudgetExceeded as exc:
            raise click.ClickException(f"{exc}; the output was not written ({output})") from None
        where = run.session.sparkContext.master
    if book is not None:
        book.spark_recorded(output)
    others = [c for c in done["columns"] if c != column]
    if others:
        click.echo(f"note: {source}: only {column!r} was privatized; other fields copied unchanged: {', '.join(sorted(others))}", err=True)
    if oov == "keep":
        click.echo("warning: --oov keep copies out-of-vocabulary words verbatim, without privacy", err=True)
    if content_keys:
        click.echo("warning: --content-keys: identical texts got identical outputs, which shows which rows were equal; each text keeps its guarantee, the table as a whole does not", err=True)
    if key is not None:
        keyed = f"rows keyed by {key!r}" + (f", release {release_id!r}" if release_id else "")
    elif content_keys:
        keyed = "rows keyed by their text (identical texts, identical outputs)"
    else:
        keyed = "every row drawn independently (a fresh secret for this run)"
    eps = f"epsilon={float(mech.epsilon):.4g}"
    choice = mech.epsilon_choice
    click.echo(f"{mech.name} {eps}: column {column!r} privatized on Spark ({where}), {keyed} -> {output} ({done['format']})", err=True)
    if choice is not None:
        click.echo(f"epsilon {choice}", err=True)
