"""``deniable export brr`` (on-device bundle) and ``deniable privacy-ratio`` (BRR paper §5)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import DataError
from ._options import InputPath, cli_spelling, embedding_limit_option, parse_params, positive_epsilon
from ._output import echo_wrapped

__all__ = ["export", "privacy_ratio"]


@click.group()
def export() -> None:
    """Export a self-contained file for on-device privatization."""


def _reject_dash(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None and str(value) == "-":
        raise click.BadParameter("a binary bundle cannot be written to stdout; give a file name, e.g. -o vocab.brr")
    if value is not None:
        folder = value.parent if str(value.parent) else Path(".")
        if not folder.is_dir():
            raise click.BadParameter(f"{value}: the folder {folder} does not exist")
    return value


@export.command("brr")
@click.option("-o", "--output", "output", required=True, callback=_reject_dash, type=click.Path(dir_okay=False, writable=True, allow_dash=False, path_type=Path), help="Bundle file to write (not '-': the bundle is binary).")
@click.option("--embedding", "embedding_path", type=InputPath(path_type=Path), default=None, help="Embedding file to binarize (default: the bundled GloVe embedding).")
@click.option("--bits", "n_bits", type=click.IntRange(1, 65535), default=256, show_default=True, help="Code length in bits.")
@click.option("--method", type=click.Choice(["autoencoder", "itq", "random-projection"]), default=None, help="Binarizer (default: the best one on the default embedding).")
@embedding_limit_option()
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the binarizer's initialization.")
def export_brr(output: Path, embedding_path: Path | None, n_bits: int, method: str | None, embedding_limit: int | None, seed: int) -> None:
    """Write a BRR bundle: versioned header, packed codes, UTF-8 vocabulary, UNK code, checksum.

    The file is everything `brr_runtime.py` (numpy only) needs to privatize text on a device.
    Byte layout: docs/bundle_format.md.
    """
    from importlib import resources

    from ..binary import DEFAULT_BINARY_FILE, DEFAULT_METHOD, BinaryEmbedding, binarize
    from ..embeddings import load_embedding
    from ._io import atomic_output

    limit = embedding_limit
    if embedding_path is None and limit is None and n_bits == 256 and method in (None, DEFAULT_METHOD) and seed == 0:
        ref = resources.files("deniable.binary") / "data" / DEFAULT_BINARY_FILE
        data = ref.read_bytes()
        be = BinaryEmbedding.from_bytes(data, source=str(ref))  # validated before it is written
    else:
        emb = load_embedding(embedding_path, limit=limit, progress=None)
        name = method or DEFAULT_METHOD
        _check_binarizable(len(emb), emb.dim, n_bits, name, limit=limit, source=str(embedding_path or "the bundled embedding"))
        click.echo(f"binarizing {len(emb)} words x {emb.dim} dims -> {n_bits} bits ({name}) ...", err=True)
        try:
            be = binarize(emb, n_bits=n_bits, method=method, rng=seed)
        except ValueError as exc:  # anything the pre-checks above missed: still one line
            raise click.UsageError(str(exc)) from None
        data = be.to_bytes()
    with atomic_output(output, mode="wb") as f:
        f.write(data)
    size = output.stat().st_size
    float32 = len(be) * 4 * _dim_of(be)
    extra = f" ({100.0 * size / float32:.2f} % of the float32 embedding)" if float32 else ""
    click.echo(f"wrote {output}: {len(be)} words x {be.n_bits} bits, {size} bytes{extra}, fingerprint {be.fingerprint}", err=True)


def _check_binarizable(n_words: int, dim: int, n_bits: int, method: str, *, limit: int | None, source: str) -> None:
    """Usage error (exit 2) or data error (exit 1), one line, when ``method`` cannot fit
    ``n_bits`` on ``n_words`` x ``dim`` vectors."""
    from ..binary import BINARIZERS

    if n_words < 2:
        if limit is not None:
            raise click.BadParameter(f"binarizing needs at least 2 words, got --embedding-limit {limit}", param_hint="--embedding-limit")
        raise click.ClickException(f"{source}: has {n_words} word; binarizing needs at least 2")
    cap = BINARIZERS[method].max_bits(n_words, dim)
    if cap is not None and n_bits > cap:
        more = " or raise --embedding-limit" if limit is not None and n_words < dim else ""
        raise click.BadParameter(
            f"{'ITQ' if method == 'itq' else method} needs --bits <= min(words, dimension) = {cap} ({n_words} words x {dim} dims), got {n_bits}; "
            f"use --bits {cap}{more}, or --method random-projection / autoencoder",
            param_hint="--bits",
        )


def _dim_of(be: object) -> int:
    meta = getattr(be, "metadata", {}) or {}
    return int(meta.get("source_dim", 0) or 0)


def _mechanism_names() -> list[str]:
    from ..mechanisms.registry import available_mechanisms

    return available_mechanisms()


# parameters that change a mechanism's metric (the only thing the privacy ratio depends on)
_RATIO_PARAMS = {"lam": "mahalanobis", "metric": "tem", "n_bits": "brr", "method": "brr"}


@click.command("privacy-ratio")
@click.argument("mechanism_a", type=click.Choice(_mechanism_names()))
@click.argument("mechanism_b", type=click.Choice(_mechanism_names()))
@click.option("-e", "--epsilon", "epsilons", type=float, multiple=True, callback=positive_epsilon, help="Epsilon(s) of mechanism A to translate (repeatable).")
@click.option("--aggregate", type=click.Choice(["avg", "max", "both"]), default="avg", show_default=True, help="P_d^avg (the paper's choice), P_d^max, or both.")
@click.option("--embedding", "embedding_path", type=InputPath(path_type=Path), default=None, help="Embedding file (default: bundled GloVe).")
@click.option("--binary", "binary_path", type=InputPath(path_type=Path), default=None, help="BRR bundle for 'brr' (default: the bundled codes).")
@embedding_limit_option(min_words=2, help="Use only the first N words of the embedding (faster).")
@click.option("--lam", type=float, default=None, help="Mahalanobis lambda (same as --param lam=...)  [default: 0.5]")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help=f"Parameter of the metric (repeatable): {', '.join(f'{k} ({m})' for k, m in _RATIO_PARAMS.items())}.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress on stderr: a bar on a terminal, else a line every 30 s (default); --progress forces the bar.")
def privacy_ratio(mechanism_a: str, mechanism_b: str, epsilons: tuple[float, ...], aggregate: str, embedding_path: Path | None, binary_path: Path | None, embedding_limit: int | None, lam: float | None, params: tuple[str, ...], as_json: bool, show_progress: bool | None = None) -> None:
    """Privacy ratio R = P_A / P_B between two mechanisms' metrics, and the epsilon of B
    matching each given epsilon of A: eps_B = R * eps_A (BRR paper Definition 5.1).

    P_d^avg / P_d^max are the mean / max of each mechanism's guarantee metric over all ordered
    pairs of the vocabulary, computed exactly.

    Caveat: equal formal privacy is not equal observed change. The ratio matches the scale of
    the two metrics, not how often words come back unchanged: at "matched" epsilons two
    mechanisms can keep very different shares of words. To compare what an observer sees, fix
    the chance N_w that a word survives instead: -m NAME --max-nw P in `deniable privatize`, or
    docs/results/privacy_targets.md.

    Example: deniable privacy-ratio madlib brr -e 5 -e 10 -e 20
    """
    from ..calibration.privacy_ratio import mechanism_metric_stats

    limit = embedding_limit
    kw = parse_params(params)
    names = tuple(dict.fromkeys((mechanism_a, mechanism_b)))
    unknown = sorted(k for k in kw if _RATIO_PARAMS.get(k) not in names)
    if unknown:
        known = [f"{k} ({m})" for k, m in _RATIO_PARAMS.items() if m in names]
        raise click.BadParameter(
            f"unknown parameter(s) {', '.join(unknown)} for {' and '.join(names)}; known: {', '.join(known) or 'none'}",
            param_hint="--param",
        )
    if lam is not None:
        if "lam" in kw and kw["lam"] != lam:
            raise click.UsageError(f"--lam {lam:g} conflicts with --param lam={kw['lam']}")
        kw["lam"] = lam
    if "lam" in kw and (isinstance(kw["lam"], bool) or not isinstance(kw["lam"], (int, float)) or not 0 <= kw["lam"] <= 1):
        raise click.BadParameter(f"lam must be in [0, 1], got {kw['lam']}", param_hint="--lam")
    if binary_path is not None and ("n_bits" in kw or "method" in kw):
        raise click.UsageError("--param n_bits/method binarize --embedding; they do not apply to the codes of --binary")
    mechs = {}
    for name in names:
        own = {k: v for k, v in kw.items() if _RATIO_PARAMS[k] == name}
        try:
            mechs[name] = _build(name, embedding_path, binary_path, limit, own, progress=show_progress)
        except DataError:
            raise
        except (TypeError, ValueError) as exc:
            hint = ""
            if name == "brr" and binary_path is None:
                hint = "; or pass --binary codes.brr made by `deniable export brr --embedding FILE --bits N -o codes.brr`"
            raise click.UsageError(f"{name}: {cli_spelling(str(exc))}{hint}") from None
    stats = {}
    for name, m in mechs.items():
        try:
            stats[name] = mechanism_metric_stats(m, progress=show_progress)
        except ValueError as exc:  # a metric that is infinite between some words has no scale
            raise click.UsageError(f"{name}: {cli_spelling(str(exc))}") from None
    sa, sb = stats[mechanism_a], stats[mechanism_b]
    aggs = ["avg", "max"] if aggregate == "both" else [aggregate]
    result = {
        "mechanism_a": {"name": mechanism_a, "metric": sa.metric, "n_words": sa.n, "P_avg": sa.avg, "P_max": sa.max},
        "mechanism_b": {"name": mechanism_b, "metric": sb.metric, "n_words": sb.n, "P_avg": sb.avg, "P_max": sb.max},
        "params": kw,
        "ratio": {},
        "epsilon_b": {},
    }
    for agg in aggs:
        pb = sb.aggregate(agg)
        if not pb > 0:
            raise click.ClickException(f"P_{agg} of {mechanism_b} is 0 (all its points coincide); no epsilon matches")
        r = sa.aggregate(agg) / pb
        result["ratio"][agg] = r
        result["epsilon_b"][agg] = {f"{e:g}": r * e for e in epsilons}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for tag, s in (("A", sa), ("B", sb)):
        name = mechanism_a if tag == "A" else mechanism_b
        click.echo(f"{tag}: {name:<12} metric={s.metric:<10} words={s.n:<7} P_avg={s.avg:.6g}  P_max={s.max:.6g}")
    for agg in aggs:
        r = result["ratio"][agg]
        click.echo(f"R_{agg} = P_{agg}(A) / P_{agg}(B) = {r:.6g}")
        for e in epsilons:
            click.echo(f"  epsilon_A = {e:g}  ->  epsilon_B = {r * e:.6g}  ({agg})")
    echo_wrapped(
        "note: equal formal privacy is not equal observed change: at these epsilons the two mechanisms can keep very "
        "different shares of words unchanged; compare N_w with --max-nw (docs/results/privacy_targets.md)"
    )


def _build(name: str, embedding_path: Path | None, binary_path: Path | None, limit: int | None, params: dict, *, progress: bool | None = None):
    from ..embeddings import load_embedding
    from ..mechanisms import get_mechanism

    if name == "brr" and binary_path is not None:
        from ..binary import BinaryEmbedding
        from ..mechanisms.brr import BRR

        be = BinaryEmbedding.load(binary_path)
        if limit is not None:
            be = be.restrict(top_n=limit)
        return BRR(be, epsilon=1.0, index="exact")
    emb = load_embedding(embedding_path, limit=limit, progress=progress)
    if name == "brr":
        from ..binary import load_default_binary_embedding
        from ..mechanisms.brr import BRR

        default = load_default_binary_embedding()
        if embedding_path is None and limit is not None and not params:
            return BRR(default.restrict(top_n=limit), epsilon=1.0, index="exact")
        return BRR(emb, epsilon=1.0, index="exact", **params)
    return get_mechanism(name, emb, epsilon=1.0, **params)
