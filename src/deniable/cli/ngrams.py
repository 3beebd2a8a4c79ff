"""``deniable ngrams``: count n-grams per user, release their distribution with DP, evaluate it.

    deniable ngrams count users.jsonl --public public.txt -n 3 --max-vocab 50000 -o counts.npz
    deniable ngrams release counts.npz -e 1 -d 1e-6 -o release.tsv            # formal (ε, δ)-DP Bayesian release
    deniable ngrams release counts.npz -e 1 -d 1e-6 --tune -o release.parquet # formal, (S, ρ) chosen privately
    deniable ngrams release counts.npz -e 1 --local-sensitivity -o paper.tsv  # the paper's calibration (not formal)
    deniable ngrams evaluate release.tsv --counts counts.npz --heldout heldout.npz --smoothing 1e-3

The vocabulary is built from the PUBLIC files only; private n-grams outside it are dropped and never
released. Outputs are written atomically with :func:`deniable.cli._io.atomic_output`; the counts
bundle must go to a file, a release may go to stdout as TSV (``-o -``), and ``--format`` must agree
with a ``.tsv``/``.parquet`` name (usage errors, exit 2). Bad input files exit 1 with one line.
Release files hold only data-independent metadata; a release that is not formally DP (the paper's
local-sensitivity calibrations behind ``--local-sensitivity``, ``-W paper-rule``, k-anonymity) prints one ``warning:`` line on
stderr. ``--diagnostics`` prints the data-dependent values (user count, local sensitivities, σ,
tuned (S, ρ)) on stderr: they are NOT privatized.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from typing import Any

import click
import numpy as np

from .._progress import progress_bar
from ..errors import DataError
from ._options import InputPath, positive_epsilon

# = deniable.ngrams.bounding.DEFAULT_MAX_NGRAMS_PER_USER (kept literal so the CLI starts without scipy; a test checks)
DEFAULT_MAX_NGRAMS_PER_USER = 50

MECHANISMS = ("bayesian", "laplace", "laplace-public", "k-anonymity")


def _positive(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is None:
        return value
    if not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"must be a finite number > 0, got {value}")
    return value


def _open_unit(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is None:
        return value
    if not (0 < value < 1):
        raise click.BadParameter(f"must be in (0, 1), got {value}")
    return value


def _unit(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is None:
        return value
    if not (0 <= value <= 1):
        raise click.BadParameter(f"must be in [0, 1], got {value}")
    return value


def _number_or_keyword(value: str | None, keywords: tuple[str, ...], expected: str) -> str | float | None:
    """``value`` as a finite number > 0, or one of ``keywords`` unchanged (None stays None)."""
    if value is None or value in keywords:
        return value
    try:
        v = float(value)
    except ValueError:
        raise click.BadParameter(f"must be {expected}, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise click.BadParameter(f"must be a finite number > 0, got {value}")
    return v


def _sensitivity(ctx: click.Context, param: click.Parameter, value: str | None) -> str | float | None:
    return _number_or_keyword(value, ("exact", "claim1"), "a number > 0 (>= the derived bound), or 'exact'/'claim1' with --local-sensitivity")


def _cap(ctx: click.Context, param: click.Parameter, value: str | None) -> str | float | None:
    return _number_or_keyword(value, ("paper-rule",), "a number > 0 or 'paper-rule'")


def _counts_output(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value == "-":
        raise click.BadParameter("a counts bundle is a binary .npz file and cannot go to stdout; give a file name such as counts.npz")
    if value.lower().endswith(".gz"):
        raise click.BadParameter(f"a counts bundle is already compressed; drop the .gz suffix from {value!r}")
    return value


def _bar(desc: str, total: int | None = None, unit: str = "it") -> Any:
    return progress_bar(total, desc, None, unit=unit)


@click.group(name="ngrams")
def ngrams() -> None:
    """Count, release with differential privacy, and evaluate n-gram distributions.

    Bayesian DP with a public prior (Ramadan, Withers & Orr), Laplace baselines and k-anonymity.
    Privacy is user level: one user's whole data.
    """


@ngrams.command()
@click.argument("private", type=InputPath(dir_okay=True, allow_dash=True))
@click.option("--public", "public", multiple=True, required=True, type=InputPath(), help="Public text (one text per line), JSONL or CSV; repeatable. The vocabulary comes only from these.")
@click.option("-n", "--order", "n", type=click.IntRange(min=1), default=3, show_default=True, help="n of the n-grams.")
@click.option("--max-vocab", type=click.IntRange(min=1), default=None, help="Keep the most frequent public n-grams only.")
@click.option("--min-public-count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--user-field", default="user", show_default=True, help="User id field of the private records.")
@click.option("--text-field", default="text", show_default=True, help="Text field (private records, and public JSONL/CSV).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default=None, help="Private input format (default: from the suffix, or for a --spark directory from its files). parquet needs --spark.")
@click.option("--no-lowercase", is_flag=True, help="Keep case (default: lower-case words).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), callback=_counts_output, help="Counts bundle (.npz; a file, not stdout).")
@click.option("--spark", "use_spark", is_flag=True, help='Count on Spark (pip install "deniable[spark]"; master local[*] unless --master): PRIVATE may be a Parquet/CSV/JSONL file or directory of part files. Same counts bundle.')
@click.option("--master", default=None, metavar="URL", help="Spark master URL (local[4], spark://host:7077, yarn, ...); implies --spark.")
def count(private: str, public: tuple[str, ...], n: int, max_vocab: int | None, min_public_count: int, user_field: str, text_field: str, fmt: str | None, no_lowercase: bool, output: str, use_spark: bool, master: str | None) -> None:
    """Count each user's n-grams of PRIVATE (JSONL/CSV with user and text fields) over a
    vocabulary taken from the --public files only.

    With --spark (or --master URL) the private records are counted on Spark
    (deniable.spark.files.count_ngrams_files): PRIVATE may also be Parquet or a directory of part
    files; the vocabulary is still built on the driver from --public, and the bundle is the one
    the single-machine count writes for the same rows.
    """
    from ..ngrams import build_vocabulary, count_public, count_users
    from ..ngrams.io import read_texts, read_user_texts, save_counts

    lowercase = not no_lowercase
    spark = use_spark or master is not None
    if spark:
        _check_spark_count(private, master)
    elif fmt == "parquet":
        raise click.BadParameter("parquet input is read with Spark; add --spark", param_hint="--format")
    elif private != "-" and os.path.isdir(private):
        raise click.BadParameter(f"{private} is a directory; directories of part files are read with --spark", param_hint="PRIVATE")

    def public_texts():
        bar = _bar("public texts", unit="text")
        try:
            for path in public:
                for text in read_texts(path, text_field=text_field):
                    bar.update(1)
                    yield text
        finally:
            bar.close()

    pub = count_public(public_texts(), n, lowercase=lowercase)
    try:
        vocab = build_vocabulary(pub, n=n, max_size=max_vocab, min_count=min_public_count, lowercase=lowercase)
    except ValueError:
        names = ", ".join(public)
        why = f"no {n}-gram occurs" + (f" at least {min_public_count} times" if min_public_count > 1 else "")
        raise DataError(f"the public vocabulary is empty: {why} in the --public text ({'empty file?' if not pub else 'too little text?'})", path=names) from None
    if spark:
        users = _count_spark(private, vocab, output, master, user_field, text_field, fmt)
    else:
        bar = _bar("private records", unit="rec")
        try:
            users = count_users(read_user_texts(private, user_field=user_field, text_field=text_field, fmt=fmt), vocab, progress=bar)
        finally:
            bar.close()
    if users.n_users == 0:  # unreachable for files (the reader rejects them); kept for safety
        raise DataError("no user records", path=private)
    if not spark:  # count_ngrams_files saved it already
        save_counts(output, users, vocab)
    click.echo(
        f"{users.n_users} users, {len(vocab)} public {n}-grams, {int(users.matrix.sum())} private n-gram tokens counted, "
        f"{users.dropped} dropped (not in the public vocabulary) -> {output}",
        err=True,
    )


def _check_spark_count(private: str, master: str | None) -> None:
    """Usage errors of ``count --spark`` (exit 2), before the public vocabulary is built."""
    from ._spark import check_master, check_pyspark

    check_master(master)
    if private == "-":
        raise click.BadParameter("--spark reads a file or a directory of part files, not stdin", param_hint="PRIVATE")
    check_pyspark()


def _count_spark(private: str, vocab, output: str, master: str | None, user_field: str, text_field: str, fmt: str | None):
    """:func:`deniable.spark.files.count_ngrams_files` in the Spark session of this run; saves
    the bundle and returns the counts."""
    from ..spark.files import count_ngrams_files
    from ._spark import SparkRun

    with SparkRun(master) as run:
        return run.job(count_ngrams_files, private, vocab, output, user_field=user_field, text_field=text_field, fmt=fmt, spark=run.session)


@ngrams.command()
@click.argument("counts", type=InputPath())
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True), help="Release file: .tsv, .tsv.gz or .parquet; '-' writes TSV to stdout.")
@click.option("-m", "--mechanism", type=click.Choice(MECHANISMS), default="bayesian", show_default=True)
@click.option("-e", "--epsilon", type=float, callback=positive_epsilon, default=None, help="Total epsilon (required except for k-anonymity).")
@click.option("-d", "--delta", type=float, callback=_open_unit, default=1e-6, show_default=True)
@click.option("-S", "S", type=float, callback=_positive, default=None, help="Decay weight slope S (Equation 5). Default: tuned privately when neither -S nor --rho is given (formal release), else 1.")
@click.option("--rho", type=float, callback=_unit, default=None, help="Private/public weighting rho. Default: tuned privately when neither -S nor --rho is given (formal release), else 0.5.")
@click.option("-C", "C", type=float, callback=_positive, default=1.0, show_default=True, help="Per-user clamp C (§3.1).")
@click.option("-k", "--max-ngrams-per-user", "max_ngrams", type=click.IntRange(min=1), default=DEFAULT_MAX_NGRAMS_PER_USER, show_default=True, help="Contribution bound enforced by the formal releases: at most this many distinct n-grams per user (a random subset).")
@click.option("--tune/--no-tune", default=None, help="Choose S and rho privately. Formal: on a noisy validation split at no extra budget (the default when neither -S nor --rho is given); with --local-sensitivity: Algorithm 2 (not formal).")
@click.option("--score", type=click.Choice(["mean", "expected"]), default="mean", show_default=True, help="Algorithm 2's tuning score with --local-sensitivity: the paper's (noiseless mean) or the expected score over noise draws.")
@click.option("--local-sensitivity", "local", is_flag=True, help="Reproduce the paper's local-sensitivity calibrations (NOT formal DP; a warning line says so).")
@click.option("--sensitivity", default=None, callback=_sensitivity, help="Formal: a number >= the derived global bound (more noise); default: the derived bound. With --local-sensitivity: 'exact' (default) or 'claim1'.")
@click.option("--calibration", type=click.Choice(["analytic", "classic"]), default="analytic", show_default=True, help="Gaussian calibration of the --local-sensitivity Bayesian modes.")
@click.option("-W", "W", default=None, callback=_cap, help="Laplace baselines: a per-user total cap (a number chosen without the private data: formal), or 'paper-rule' for max(1, users/1000) from the private user count (NOT formal DP). Default: the -k/-C bounds.")
@click.option("-K", "K", type=click.IntRange(min=1), default=50, show_default=True, help="k-anonymity threshold.")
@click.option("--sampler", type=click.Choice(["auto", "opendp", "numpy"]), default="auto", show_default=True, help="Noise sampler of the formal releases: OpenDP (exact, floating-point safe; 'auto' uses it when installed) or numpy.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "parquet"]), default=None, help="Output format (default: from the suffix; must agree with a .tsv/.parquet suffix).")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed (reproducible experiments only; OpenDP's noise comes from the OS's secure generator and is never seeded).")
@click.option("--diagnostics", "show_diagnostics", is_flag=True, help="Print data-dependent diagnostics (user count, local sensitivity, sigma) as JSON on stderr. NOT privatized: never publish them.")
def release(counts: str, output: str, mechanism: str, epsilon: float | None, delta: float, S: float | None, rho: float | None, C: float, max_ngrams: int, tune: bool | None, score: str, local: bool, sensitivity: str | float | None, calibration: str, W: float | str | None, K: int, sampler: str, fmt: str | None, seed: int | None, show_diagnostics: bool) -> None:
    """Release the n-gram distribution of a COUNTS bundle (user level).

    By default formal (epsilon, delta)-DP for any data: each user's contribution is bounded
    (-k distinct n-grams, counts clamped to -C), the bounded counts get noise for the derived
    global sensitivity, and the public prior is combined as post-processing. -m laplace and
    -m laplace-public are formal too. --local-sensitivity (the paper's calibrations), -W
    paper-rule and -m k-anonymity are NOT formal: a warning line says so. The release file holds
    only data-independent metadata.
    """
    from ..ngrams.io import load_counts, release_format, write_release

    try:
        fmt = release_format(output, fmt)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'-o' / '--output'") from None
    if epsilon is None and mechanism != "k-anonymity":
        raise click.UsageError("--epsilon is required for the DP mechanisms")
    if tune and mechanism != "bayesian":
        raise click.UsageError("--tune applies to the bayesian mechanism only")
    if W is not None and mechanism not in ("laplace", "laplace-public"):
        raise click.UsageError("-W applies to -m laplace and -m laplace-public only")
    if isinstance(sensitivity, str) and not local:
        raise click.UsageError(f"--sensitivity {sensitivity} is the paper's local sensitivity (NOT DP): add --local-sensitivity to reproduce the paper, or omit --sensitivity for the formal release")
    if local and mechanism in ("laplace", "laplace-public") and W is None:
        raise click.UsageError(f"-W is required for -m {mechanism} with --local-sensitivity: a per-user cap, or 'paper-rule' for max(1, users/1000) (data dependent: NOT formal DP)")
    if mechanism == "laplace-public" and sensitivity == "claim1":
        raise click.UsageError("--sensitivity claim1 applies to the bayesian mechanism only")
    if local and tune and sensitivity is not None and not isinstance(sensitivity, str):
        raise click.UsageError("--tune with --local-sensitivity needs --sensitivity exact or claim1 (computed per candidate)")
    bar = _bar("release", total=3, unit="step")
    caught: list[warnings.WarningMessage] = []
    try:
        users, vocab = load_counts(counts)
        if users.n_users == 0:
            raise DataError("the counts bundle has no users", path=counts)
        bar.update(1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rel = _release(
                users, vocab, mechanism, epsilon=epsilon if epsilon is not None else 1.0, delta=delta, S=S, rho=rho, C=C, max_ngrams=max_ngrams, tune=tune,
                score=score, local=local, sensitivity=sensitivity, calibration=calibration, W=W, K=K, sampler=sampler, seed=seed,
            )
        bar.update(1)
        write_release(output, rel, fmt=fmt)
        bar.update(1)
    except ValueError as exc:
        if isinstance(exc, DataError):
            raise
        raise click.UsageError(str(exc)) from None
    finally:
        bar.close()
    seen: set[str] = set()
    for w in caught:
        msg = str(w.message)
        if msg not in seen:
            seen.add(msg)
            click.echo(f"warning: {msg}", err=True)
    where = "stdout" if output == "-" else output
    eps = "none (not DP)" if rel.epsilon is None else f"{rel.epsilon:g}"
    # sigma is published only when it is data independent (formal DP); otherwise it is a diagnostic
    sigma = f", sigma={rel.sigma:.6g} ({rel.calibration})" if rel.formal_dp and rel.sigma is not None else ""
    scale = f", laplace_scale={rel.laplace_scale:.6g}" if rel.formal_dp and rel.laplace_scale is not None else ""
    noise = f", sampler={rel.sampler}" if rel.sampler else ""
    click.echo(f"{rel.mechanism}: epsilon={eps}, delta={rel.delta}{sigma}{scale}{noise}, formal_dp={rel.formal_dp}, {len(rel)} n-grams -> {where}", err=True)
    if show_diagnostics:
        click.echo("warning: the diagnostics below are computed from the private data and are NOT privatized; do not publish them", err=True)
        click.echo("diagnostics: " + json.dumps(rel.diagnostics_json(), sort_keys=True), err=True)


def _release(users, vocab, mechanism: str, *, epsilon: float, delta: float, S: float | None, rho: float | None, C: float, max_ngrams: int, tune: bool | None,
             score: str, local: bool, sensitivity: Any, calibration: str, W: Any, K: int, sampler: str, seed: int | None):
    """The release the options select: :func:`~deniable.ngrams.release_bayesian` or
    :func:`~deniable.ngrams.release_laplace` (formal), or a :mod:`deniable.ngrams.paper` function
    (NOT DP) only behind ``--local-sensitivity``, ``-W paper-rule`` or ``-m k-anonymity``. Records
    the vocabulary's n-gram order ``n`` (public) in every release. ``sensitivity`` and ``W`` are
    the parsed options (a number, a keyword or None); the functions refuse a keyword where it has
    no meaning, with a message that becomes the usage error."""
    from ..ngrams import paper, release_bayesian, release_laplace

    if mechanism == "k-anonymity":
        rel = paper.k_anonymity_not_dp(users, K=K)
    elif mechanism == "bayesian" and local:
        kw: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "C": C, "sensitivity": "exact" if sensitivity is None else sensitivity, "calibration": calibration}
        if tune:
            rel = paper.bayesian_tuned_not_dp(users, vocab, score=score, rng=seed, **kw)
        else:
            rel = paper.bayesian_not_dp(users, vocab, S=1.0 if S is None else S, rho=0.5 if rho is None else rho, rng=seed, **kw)
    elif mechanism == "bayesian":
        if tune is not None:  # --tune: chosen privately whatever -S/--rho say; --no-tune: the defaults of the missing ones
            S, rho = (None, None) if tune else (1.0 if S is None else S, 0.5 if rho is None else rho)
        rel = release_bayesian(users, vocab, epsilon=epsilon, delta=delta, C=C, max_ngrams_per_user=max_ngrams, S=S, rho=rho, sensitivity=sensitivity, sampler=sampler, rng=seed)
    elif mechanism == "laplace" and W == "paper-rule":
        rel = paper.laplace_not_dp(users, epsilon=epsilon, rng=seed)
    elif mechanism == "laplace-public" and (W == "paper-rule" or (local and not isinstance(sensitivity, float))):
        default = "exact" if local else 2.0  # the paper's local L1 sensitivity, or the global bound 2 with the paper's W
        rel = paper.laplace_public_not_dp(users, vocab, epsilon=epsilon, W=W, sensitivity=default if sensitivity is None else sensitivity, rng=seed)
    else:
        prior = vocab if mechanism == "laplace-public" else None
        rel = release_laplace(users, prior, epsilon=epsilon, W=W, C=C, max_ngrams_per_user=max_ngrams, sensitivity=sensitivity, sampler=sampler, rng=seed)
    return rel if "n" in rel.params else rel.with_params(n=int(vocab.n))


@ngrams.command()
@click.argument("release_file", metavar="RELEASE", type=InputPath())
@click.option("--counts", required=True, type=InputPath(), help="Private counts bundle: KL(private || release).")
@click.option("--heldout", type=InputPath(), default=None, help="Held-out counts bundle: n-gram LM perplexity (§4.6).")
@click.option("--smoothing", type=float, callback=_unit, default=0.0, show_default=True, help="Mix the release with uniform at this weight first.")
def evaluate(release_file: str, counts: str, heldout: str | None, smoothing: float) -> None:
    """KL divergence from the private distribution and held-out perplexity of a RELEASE (JSON on stdout).

    Values are JSON numbers; an infinite one (a release with probability 0 where the data has
    mass) is null, with a "note" field: compare mechanisms with the same --smoothing (e.g. 1e-3).
    """
    from ..ngrams.evaluate import kl_divergence, private_distribution, trigram_perplexity
    from ..ngrams.io import load_counts, read_release

    if smoothing >= 1:
        raise click.BadParameter("must be < 1", param_hint="--smoothing")
    keys, probs, meta = read_release(release_file)
    users, vocab = load_counts(counts)
    index = {k: i for i, k in enumerate(keys)}
    missing = [k for k in vocab.keys if k not in index]
    if missing or len(keys) != len(vocab.keys):  # also catches duplicated keys
        raise DataError(f"the release and the counts have different vocabularies ({len(missing)} counted n-grams not in the release)", path=release_file)
    q = probs[[index[k] for k in vocab.keys]]
    if not q.sum() > 0:
        raise DataError("the release gives probability 0 to every n-gram", path=release_file)
    p = private_distribution(users) if users.matrix.nnz else None
    if p is None:
        raise DataError("the private counts are all zero", path=counts)
    out: dict[str, object] = {"mechanism": meta.get("mechanism"), "epsilon": meta.get("epsilon"), "delta": meta.get("delta"), "formal_dp": meta.get("formal_dp"), "smoothing": smoothing}
    values = {"kl": kl_divergence(p, q, smoothing=smoothing)}
    if heldout is not None:
        test, test_vocab = load_counts(heldout)
        if tuple(test_vocab.keys) != tuple(vocab.keys):
            raise DataError("the held-out counts use a different vocabulary", path=heldout)
        t = np.asarray(test.matrix.sum(axis=0)).ravel()
        if not t.sum() > 0:
            raise DataError("the held-out counts are all zero", path=heldout)
        values["perplexity"] = trigram_perplexity(q, vocab.keys, t, smoothing=smoothing)
    # JSON numbers only: a non-finite value is null, and a note says why
    infinite = [k for k, v in values.items() if not math.isfinite(v)]
    out.update({k: (v if math.isfinite(v) else None) for k, v in values.items()})
    if infinite:
        out["note"] = (
            f"{' and '.join(infinite)} infinite (null): the release gives probability 0 to n-grams the data has; "
            "compare mechanisms with the same --smoothing > 0 (e.g. 1e-3)"
        )
    click.echo(json.dumps(out))
