"""``deniable serve``: the HTTP JSON service and the ε explorer page (extra ``serve``)."""

from __future__ import annotations

import ipaddress
import os
import sys

import click

from ..service.config import API_KEY_ENV, ServiceConfig
from ._options import InputPath, embedding_limit_option


def _mechanism_names(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """Registered mechanism names from repeated and comma-separated values (empty: all)."""
    from ..mechanisms import available_mechanisms

    known = available_mechanisms()
    names = tuple(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise click.BadParameter(f"unknown mechanism(s) {', '.join(map(repr, unknown))}; registered mechanisms: {', '.join(known)}")
    return names


def _ledger_key() -> str | None:
    from .ledger import KEY_VARIABLE

    return os.environ.get(KEY_VARIABLE) or None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default; anything else needs a reason and an API key).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port to bind (0: any free port).")
@click.option("--api-key", envvar=API_KEY_ENV, default=None, help=f"Require this key (X-API-Key header or Bearer token) on every route but /healthz and the page; default ${API_KEY_ENV}.")
@click.option(
    "-m", "--mechanisms", "--mechanism", "mechanisms", multiple=True, metavar="NAME[,NAME...]", callback=_mechanism_names,
    help="Mechanisms to offer: any registered names (deniable.available_mechanisms()), repeatable or comma-separated; default: all of them.",
)
@click.option("--embedding", type=InputPath(), default=None, help="Embedding file (default: the bundled GloVe embedding).")
@embedding_limit_option(help="Use only the first N words of --embedding (the most frequent ones).")
@click.option("--bundle", type=InputPath(), default=None, help="BRR bundle (deniable export brr) for -m brr and the on-device mode (default: the bundled codes).")
@click.option("--max-texts", type=click.IntRange(min=1), default=ServiceConfig.max_texts, show_default=True, help="Most texts per request.")
@click.option("--max-text-chars", type=click.IntRange(min=1), default=ServiceConfig.max_text_chars, show_default=True, help="Longest text (characters).")
@click.option("--max-total-chars", type=click.IntRange(min=1), default=ServiceConfig.max_total_chars, show_default=True, help="Most characters per request.")
@click.option("--max-body-bytes", type=click.IntRange(min=1), default=ServiceConfig.max_body_bytes, show_default=True, help="Largest request body (413 above).")
@click.option("--max-cached", type=click.IntRange(min=1), default=ServiceConfig.max_cached, show_default=True, help="Mechanism instances (mechanism, parameters, epsilon) kept built.")
@click.option("--max-concurrent", type=click.IntRange(min=1), default=None, help="Privatizations running at once; others wait (default: the number of CPUs, at least 2).")
@click.option("--compute-targets", is_flag=True, help="Resolve max_n_w targets also without shipped calibration data (the first request computes it: minutes; then cached).")
@click.option("--secure", is_flag=True, help="Unseeded requests draw noise from ChaCha20 keyed from the OS (needs the secure extra).")
@click.option("--no-seeds", is_flag=True, help="Refuse the seed field (seeded output is predictable).")
@click.option("--no-page", is_flag=True, help="Do not serve the ε explorer page at /.")
@click.option("--preload/--no-preload", default=True, show_default=True, help="Load the embedding before accepting requests.")
@click.option("--ledger", "ledger_path", default=None, type=click.Path(dir_okay=False), metavar="PATH", help="Append one row per privatize request to this release ledger (SQLite; created when missing): dataset, the request's user keys, mechanism, epsilon, words per text; never text. User keys are stored as keyed hashes when $DENIABLE_LEDGER_KEY holds a secret. See docs/ledger.md.")
@click.option("--dataset", default="deniable-serve", show_default=True, metavar="NAME", help="With --ledger: the dataset name of the requests' releases.")
@click.option("--max-total", "max_total", default=None, type=click.FloatRange(min=0, min_open=True), metavar="X", help="With --ledger: refuse (403, no texts returned) a request that would take the dataset's or a user key's sum of epsilon past X.")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info", show_default=True)
def serve(host, port, api_key, mechanisms, embedding, embedding_limit, bundle, max_texts, max_text_chars, max_total_chars, max_body_bytes, max_cached, max_concurrent, compute_targets, secure, no_seeds, no_page, preload, log_level, ledger_path=None, dataset="deniable-serve", max_total=None) -> None:
    """Serve privatization over HTTP: POST /v1/privatize, GET /v1/mechanisms, /healthz, the
    OpenAPI spec at /openapi.json (docs at /docs) and the ε explorer page at /.

    Binds to 127.0.0.1 unless --host says otherwise. Every registered mechanism is offered
    (-m/--mechanisms picks some); GET /v1/mechanisms lists each with its parameters and which of
    them a request may set. Mechanisms are built once per (mechanism, parameters, ε) and shared
    by all requests. Responses hold the privatized texts and the
    guarantee; input-dependent counts and changed flags only when a request asks for them
    ("include"), and those stay with the texts' owner. See docs/service.md.
    """
    from .._optional import import_optional

    try:
        import_optional("fastapi", purpose="deniable serve")
        uvicorn = import_optional("uvicorn", purpose="deniable serve")
    except ImportError:
        raise click.ClickException('deniable serve needs the serve extra: pip install "deniable[serve]"') from None
    if embedding_limit is not None and embedding is None:
        raise click.BadParameter("needs --embedding", param_hint="--embedding-limit")
    if api_key is not None and len(api_key) < 8:
        raise click.BadParameter("the API key must have at least 8 characters", param_hint="--api-key")
    if not _is_loopback(host) and api_key is None:
        click.echo(f"warning: serving on {host} without an API key: anyone who can reach the port can use the service", err=True)
    if secure:
        import_optional("randomgen", purpose="--secure")
    if ledger_path is None and (max_total is not None or dataset != "deniable-serve"):
        raise click.BadParameter("applies to a ledger; add --ledger PATH", param_hint="--max-total" if max_total is not None else "--dataset")
    if not dataset.strip():
        raise click.BadParameter("needs a non-empty name", param_hint="--dataset")
    ledger_options = {} if ledger_path is None else {"ledger": ledger_path, "ledger_dataset": dataset, "max_total": max_total, "ledger_key": _ledger_key()}
    config = ServiceConfig(
        api_key=api_key,
        mechanisms=mechanisms or None,
        max_body_bytes=max_body_bytes,
        max_texts=max_texts,
        max_text_chars=max_text_chars,
        max_total_chars=max_total_chars,
        max_cached=max_cached,
        compute_targets=compute_targets,
        secure=secure,
        **({"max_concurrent": max_concurrent} if max_concurrent is not None else {}),
        allow_seed=not no_seeds,
        page=not no_page,
        **ledger_options,
    )
    from ..embeddings import load_embedding
    from ..service import MechanismPool, create_app

    emb = load_embedding(embedding, limit=embedding_limit, progress=None) if embedding is not None else None
    binary = None
    if bundle is not None:
        from ..binary import BinaryEmbedding

        binary = BinaryEmbedding.load(bundle)
    pool = MechanismPool(emb, binary, mechanisms=config.mechanisms, max_cached=config.max_cached, compute_targets=compute_targets)
    for name, why in pool.unavailable.items():
        click.echo(f"warning: {name} is not offered: {why}", err=True)
    if preload:
        if any(pool.specs[n].vocabulary == "embedding" for n in pool.names):
            pool.embedding()
        if any(pool.specs[n].vocabulary == "binary" for n in pool.names):
            pool.binary_embedding()
    app = create_app(config, pool=pool)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"deniable serve: http://{shown}:{port}/ (mechanisms: {', '.join(pool.names)}; API key {'required' if api_key else 'off'})", err=True)
    if ledger_path is not None:
        budget = "" if max_total is None else f", budget {max_total:g} per dataset and user key"
        click.echo(f"ledger: every privatize request is recorded in {ledger_path} (dataset {dataset!r}{budget})", err=True)
    sys.stderr.flush()
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug")
