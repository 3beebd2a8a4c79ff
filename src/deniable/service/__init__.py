"""``deniable serve``: word-level privatization as an HTTP JSON service (extra ``serve``).

:func:`create_app` builds the FastAPI application (imported lazily: ``import deniable.service``
needs no web framework); :class:`ServiceConfig` holds its limits; :class:`MechanismPool` shares
mechanisms across requests; :func:`mechanism_spec` says what the service offers of a registered
mechanism (its parameters, which a request may set). See ``docs/service.md``.
"""

from __future__ import annotations

from typing import Any

from .catalog import MechanismSpec, ParamSpec, mechanism_spec
from .config import API_KEY_ENV, ServiceConfig
from .pool import MechanismPool, PoolError, privatize_detailed

__all__ = ["create_app", "ServiceConfig", "MechanismPool", "PoolError", "privatize_detailed", "API_KEY_ENV", "mechanism_spec", "MechanismSpec", "ParamSpec"]


def create_app(config: ServiceConfig | None = None, **kwargs: Any) -> Any:
    """Build the FastAPI app (see :func:`deniable.service.app.create_app`)."""
    from .app import create_app as _create

    return _create(config, **kwargs)
