"""``deniable precompute tem``: build TEM's neighbourhood cache ahead of time, with a progress bar."""

from __future__ import annotations

import time
from typing import Any

import click

from ..errors import DataError
from ._options import InputPath, embedding_limit_option, parse_params, positive_epsilon

_TEM_PARAMS = ("beta", "gamma", "precomputed_neighbors", "neighbors", "metric", "memory_bytes", "storage")


@click.group()
def precompute() -> None:
    """Precompute and cache mechanism tables (TEM, SanText, SanText+, CusText, kNN-TEM, 1-Diffractor)."""


@precompute.command("tem")
@click.option("-e", "--epsilon", type=float, required=True, callback=positive_epsilon, help="Privacy parameter epsilon > 0.")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="TEM parameter (repeatable): beta=0.001, gamma=..., precomputed_neighbors=128, neighbors=knn|radius, storage=auto|table|compact.",
)
@click.option(
    "--metric",
    type=click.Choice(["euclidean", "manhattan", "chebyshev", "angular"]),
    default=None,
    help="Metric of the guarantee [default: euclidean].",
)
@click.option("--embedding", "embedding_path", type=InputPath(), default=None, help="Embedding file (default: the bundled GloVe).")
@embedding_limit_option()
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Cache folder [default: $DENIABLE_CACHE_DIR or ~/.cache/deniable].",
)
@click.option("--rebuild", is_flag=True, help="Recompute even if the cache file exists.")
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress bar on stderr (default: when stderr is a terminal).")
def tem(
    epsilon: float,
    params: tuple[str, ...],
    metric: str | None,
    embedding_path: str | None,
    embedding_limit: int | None,
    cache_dir: str | None,
    rebuild: bool,
    show_progress: bool | None,
) -> None:
    """Build (or check) the cached neighbourhoods TEM samples from.

    The k-nearest lists (the default) do not depend on epsilon; epsilon and beta set gamma,
    which the summary uses to report how many words are table lookups at this epsilon.
    Above 8 million table entries (e.g. 62,000 words at precomputed_neighbors=128) the table is the compact one
    (neighbour ids only, memory-mapped), and its build is resumable: run the same command again
    after an interruption and it continues from its last checkpoint.
    """
    from ..embeddings import load_embedding
    from ..mechanisms.tem import TEM

    kw: dict[str, Any] = parse_params(params)
    unknown = sorted(set(kw) - set(_TEM_PARAMS) - TEM.deprecated_params)  # k: accepted, warns, not advertised
    if unknown:
        raise click.BadParameter(f"unknown TEM parameter(s) {', '.join(unknown)}; known: {', '.join(_TEM_PARAMS)}", param_hint="--param")
    if metric is not None:
        if "metric" in kw and kw["metric"] != metric:
            raise click.UsageError(f"--metric {metric} conflicts with --param metric={kw['metric']}")
        kw["metric"] = metric
    embedding = load_embedding(embedding_path, limit=embedding_limit, progress=show_progress)
    try:
        mech = TEM(embedding, epsilon=epsilon, cache_dir=cache_dir, **kw)
    except DataError:
        raise
    except (TypeError, ValueError) as exc:
        raise click.UsageError(f"invalid TEM parameters: {exc}") from None
    t0 = time.perf_counter()
    try:
        nb = mech.precompute(progress=show_progress, rebuild=rebuild)  # None: bar only on a terminal
    except ValueError as exc:  # e.g. radius neighbourhoods too large for this epsilon
        raise click.UsageError(str(exc)) from None
    elapsed = time.perf_counter() - t0
    summary = mech.sampler_summary()
    n = mech.n_words
    where = str(mech.cache_file) if mech.cache_file is not None else "(not cached)"
    if mech.cache_file is None:
        size = nb.nbytes
    elif mech.cache_file.is_dir():  # the compact table: a folder of .npy files
        size = sum(f.stat().st_size for f in mech.cache_file.iterdir())
    else:
        size = mech.cache_file.stat().st_size
    click.echo(f"cache: {where}")
    click.echo(f"table: {nb.kind}, {nb.n_rows} rows (vocabulary + UNK), {nb.nnz} entries, {size / 2**20:.1f} MiB, {elapsed:.1f} s")
    click.echo(f"TEM: epsilon={epsilon:g}, gamma={mech.gamma:.6g}, metric={nb.metric}, |W|={n}")
    click.echo(
        f"at this epsilon: {100 * summary['lookup_fraction']:.1f}% of words sample by table lookup only; "
        f"mean |L_w| among stored neighbours {summary['mean_listed']:.2f}"
    )


#: Mechanisms with an ε-independent table to precompute (besides TEM, which has its own command).
TABLE_MECHANISMS = ("santext", "santext_plus", "custext", "knn_tem", "diffractor")


def _table_command(name: str) -> None:
    @precompute.command(name, help=f"Build (or check) the cached tables {name} samples from (independent of epsilon).")
    @click.option("-e", "--epsilon", type=float, default=1.0, show_default=True, callback=positive_epsilon,
                  help="Any epsilon > 0 (the tables do not depend on it).")
    @click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help=f"{name} constructor parameter (repeatable).")
    @click.option("--embedding", "embedding_path", type=InputPath(), default=None, help="Embedding file (default: the bundled GloVe).")
    @embedding_limit_option()
    @click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                  help="Cache folder [default: $DENIABLE_CACHE_DIR or ~/.cache/deniable].")
    @click.option("--rebuild", is_flag=True, help="Recompute even if the cache file exists.")
    @click.option("--progress/--no-progress", "show_progress", default=None, help="Progress bar on stderr (default: when stderr is a terminal).")
    def command(epsilon: float, params: tuple[str, ...], embedding_path: str | None, embedding_limit: int | None, cache_dir: str | None,
                rebuild: bool, show_progress: bool | None) -> None:
        from ..embeddings import load_embedding
        from ..mechanisms import get_mechanism

        kw: dict[str, Any] = parse_params(params)
        embedding = load_embedding(embedding_path, limit=embedding_limit, progress=show_progress)
        try:
            mech = get_mechanism(name, embedding, epsilon=epsilon, cache_dir=cache_dir, **kw)
        except DataError:
            raise
        except (TypeError, ValueError) as exc:
            raise click.UsageError(f"invalid {name} parameters: {exc}") from None
        t0 = time.perf_counter()
        table_owner: Any = mech  # every TABLE_MECHANISMS class has precompute()
        table_owner.precompute(progress=show_progress, rebuild=rebuild)
        elapsed = time.perf_counter() - t0
        files = getattr(mech, "cache_files", None) or [getattr(mech, "cache_file", None)]
        files = [f for f in files if f is not None]
        click.echo(f"cache: {', '.join(str(f) for f in files) if files else '(not cached)'}")
        size = sum(f.stat().st_size for f in files if f.exists())
        click.echo(f"{name}: {mech.n_words} words, {size / 2**20:.1f} MiB on disk, {elapsed:.1f} s")


for _name in TABLE_MECHANISMS:
    _table_command(_name)
