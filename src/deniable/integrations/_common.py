"""Shared helpers of the adapters: optional imports with the right extra, mechanism specs."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["require", "as_mechanism", "for_workers"]

_EXTRA = {"pandas": "pandas", "sklearn": "sklearn", "datasets": "datasets", "pyspark": "spark"}


def require(module: str, *, purpose: str) -> ModuleType:
    """Import ``module`` or raise ``ImportError`` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        root = module.split(".")[0]
        extra = _EXTRA.get(root, root)
        raise ImportError(f"{root} is needed for {purpose} but is not installed; install it with: pip install \"deniable[{extra}]\"") from exc


def as_mechanism(mechanism: Any, *, epsilon: float | None = None, embedding: Any = None, params: dict[str, Any] | None = None) -> Any:
    """A :class:`~deniable.mechanisms.base.Mechanism` from an instance or a registry name.

    With a name, ``epsilon`` (or the privacy target ``max_n_w`` in ``params``) is required and ``embedding`` (an object or a file path; default
    the bundled one) and ``params`` go to :func:`deniable.get_mechanism`. With an instance,
    ``epsilon``, ``embedding`` and ``params`` must be left out (they are fixed in it).
    """
    from ..mechanisms.base import Mechanism

    params = dict(params or {})
    if isinstance(mechanism, Mechanism):
        given = [n for n, v in (("epsilon", epsilon), ("embedding", embedding)) if v is not None] + sorted(params)
        if given:
            raise TypeError(
                f"{', '.join(given)} cannot be combined with a Mechanism instance ({type(mechanism).__name__}); "
                "they are fixed when it is built — pass a mechanism name instead, or build it with these values"
            )
        return mechanism
    if not isinstance(mechanism, str):
        raise TypeError(f"mechanism must be a registered name (such as 'madlib') or a deniable Mechanism, got {type(mechanism).__name__}")
    if epsilon is None and params.get("max_n_w") is None:
        raise TypeError(f"epsilon is required with a mechanism name ({mechanism!r}) (or max_n_w, a privacy target that chooses it)")
    if params.get("max_n_w", 0) is None:
        del params["max_n_w"]
    from ..mechanisms.registry import get_mechanism

    if isinstance(embedding, (str, bytes)) or hasattr(embedding, "__fspath__"):
        from ..embeddings import load_embedding

        embedding = load_embedding(embedding)
    mech = get_mechanism(mechanism, embedding, epsilon=epsilon, **params)
    mech.precompute()  # one-time tables (TEM), cached on disk; a no-op without tables
    return mech


def for_workers(mechanism: Any) -> Any:
    """Build the mechanism's one-time tables (TEM's neighbourhoods) here, before it is shipped,
    so that workers receive them instead of each building its own."""
    mechanism.precompute(progress=False)
    return mechanism
