"""The FastAPI application behind ``deniable serve``.

Routes: ``POST /v1/privatize``, ``GET /v1/mechanisms``, ``GET /v1/curves/{mechanism}`` (N_w vs
ε for the explorer's plot), ``GET /v1/bundles/brr`` (the BRR bundle for on-device use),
``GET /healthz``, ``GET /openapi.json``, ``GET /docs``, and the ε explorer page at ``/`` with its
files under ``/static``. Every error is JSON: ``{"error": {"status", "code", "message",
"details"}}``; user input never causes a 500.

Every registered mechanism is served (or listed with the reason it cannot be); its parameters,
and which of them a request may set, come from the registry (:mod:`.catalog`). A privatize
response holds only what the guarantee covers (the privatized texts and the guarantee) unless
the request's ``include`` asks for input-dependent data (counts, per-word changed flags), which
must stay with the texts' owner.

The pieces: :mod:`.models` (request and response models), :mod:`.handlers` (errors as JSON, the
body limit, the API key), :mod:`.routes` (the routes), :mod:`.privatization` (what they compute).
"""

from __future__ import annotations

from typing import Any

from .._optional import import_optional
from .config import INCLUDE_VALUES, ServiceConfig
from .pool import MechanismPool

__all__ = ["create_app", "INCLUDE_VALUES"]


def _imports() -> None:
    for module in ("fastapi", "pydantic"):
        import_optional(module, purpose='deniable serve (pip install "deniable[serve]")')


def create_app(
    config: ServiceConfig | None = None,
    *,
    pool: MechanismPool | None = None,
    embedding: Any = None,
    binary_embedding: Any = None,
) -> Any:
    """Build the FastAPI app.

    Parameters
    ----------
    config
        Limits, API key and the mechanisms offered (:class:`ServiceConfig`).
    pool
        A shared :class:`MechanismPool`; by default one over ``embedding`` /
        ``binary_embedding`` (``None``: the bundled defaults).

    Returns
    -------
    fastapi.FastAPI
        The application; run it with uvicorn (``deniable serve`` does).
    """
    _imports()  # one clear install hint when the serve extra is missing
    from fastapi import FastAPI

    import deniable

    from . import routes
    from .handlers import BodyLimit, auth_dependencies, install_error_handlers
    from .models import request_model
    from .privatization import ServiceState

    cfg = config or ServiceConfig()
    pool = pool or MechanismPool(embedding, binary_embedding, mechanisms=cfg.mechanisms, max_cached=cfg.max_cached, compute_targets=cfg.compute_targets)
    state = ServiceState.create(cfg, pool)
    auth = auth_dependencies(cfg)
    app = FastAPI(
        title="deniable",
        version=deniable.__version__,
        description="Word-level metric differential privacy for text as a service. Each privatized word is sampled by the "
        "mechanism; out-of-vocabulary words are privatized as the UNK point or dropped, never copied.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.pool = pool
    app.state.config = cfg
    install_error_handlers(app)
    routes.add_api_routes(app, state, request_model(cfg, state.served_specs, state.default), auth)
    routes.add_explorer_routes(app, state, auth)
    routes.add_docs_routes(app, auth)
    if cfg.page:
        routes.add_page_routes(app)
    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes)
    return app
