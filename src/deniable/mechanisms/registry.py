"""Mechanisms by name: ``get_mechanism("madlib" | "mahalanobis" | "tem" | "brr", ...)``.

The built-in mechanisms are registered as ``"module:Class"`` paths, imported on first use; a new
mechanism registers its class with the :func:`register` decorator where it is defined
(docs/tutorials/add_mechanism.md), or with :func:`register_mechanism`."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from .base import Mechanism

__all__ = ["get_mechanism", "register", "register_mechanism", "available_mechanisms", "mechanism_class", "mechanism_parameters"]

M = TypeVar("M", bound=type[Mechanism])

# Extension points filled by layers above this one (docs/architecture.md): the package root
# connects calibration.targets.mechanism_for_target (ε from a privacy target) and the torch
# backend's builder, so that this module never imports them.
_TARGET_RESOLVER: Callable[..., Mechanism] | None = None
_BACKENDS: dict[str, Callable[..., Mechanism]] = {}


def _connect(*, target_resolver: Callable[..., Mechanism], backends: dict[str, Callable[..., Mechanism]]) -> None:
    """Connect the higher layers' builders (called once, by ``deniable/__init__.py``; a second
    call raises, so nothing after the composition root can change them)."""
    global _TARGET_RESOLVER
    if _TARGET_RESOLVER is not None:
        raise RuntimeError("the mechanism registry is already connected (only deniable/__init__.py connects it, once)")
    _TARGET_RESOLVER = target_resolver
    _BACKENDS.update(backends)


def _connected(what: Any) -> Any:
    if what is None:  # pragma: no cover - deniable/__init__.py always connects them
        raise RuntimeError("deniable is not fully imported; import deniable before building mechanisms")
    return what

# name -> "module:Class" (imported on first use, so the core import stays light) or a class
_REGISTRY: dict[str, Any] = {
    "madlib": "deniable.mechanisms.madlib:Madlib",
    "mahalanobis": "deniable.mechanisms.mahalanobis:Mahalanobis",
    "tem": "deniable.mechanisms.tem:TEM",
    "brr": "deniable.mechanisms.brr:BRR",
    "santext": "deniable.mechanisms.santext:SanText",
    "santext_plus": "deniable.mechanisms.santext:SanTextPlus",
    "custext": "deniable.mechanisms.custext:CusText",
    "vickrey": "deniable.mechanisms.vickrey:Vickrey",
    "diffractor": "deniable.mechanisms.diffractor:Diffractor",
    "knn_tem": "deniable.mechanisms.knn_tem:KnnTEM",
    "truncated_gumbel": "deniable.mechanisms.truncated_gumbel:TruncatedGumbel",  # deprecated alias of knn_tem
}
#: Deprecated names (still built, with a DeprecationWarning from their class) -> the current name;
#: not listed by :func:`available_mechanisms`.
_DEPRECATED: dict[str, str] = {"truncated_gumbel": "knn_tem"}


def register_mechanism(name: str, cls: type[Mechanism] | str, *, replace: bool = False) -> None:
    """Register a mechanism class (or a ``"module:Class"`` path) under ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"mechanism name must be a non-empty string, got {name!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"a mechanism named {name!r} is already registered; pass replace=True to override it")
    _REGISTRY[name] = cls
    _DEPRECATED.pop(name, None)


def register(name: str, *, replace: bool = False) -> Callable[[M], M]:
    """Class decorator: register the decorated :class:`~deniable.mechanisms.base.Mechanism`
    subclass under ``name`` (as :func:`register_mechanism` does) and return it unchanged, so
    that :func:`get_mechanism`, the CLI and the service offer it::

        @register("my_mechanism")
        class MyMechanism(Mechanism):
            name = "my_mechanism"
            ...

    Raises ``ValueError`` when ``name`` is empty or taken (``replace=True`` overrides a
    registration) or when the class's ``name`` attribute (what calibrations and the ledger
    record) is not ``name``; ``TypeError`` when the decorated object is not a Mechanism
    subclass."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"mechanism name must be a non-empty string, got {name!r}")

    def decorate(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
            raise TypeError(f"@register({name!r}) decorates a subclass of deniable.Mechanism, got {cls!r}")
        if cls.name != name:
            raise ValueError(
                f"{cls.__name__}.name is {cls.name!r} but it is registered as {name!r}; set name = {name!r} on the class "
                "(calibrations and the ledger record it), or use register_mechanism for an alias"
            )
        register_mechanism(name, cls, replace=replace)
        return cls

    return decorate


def available_mechanisms() -> list[str]:
    """Names accepted by :func:`get_mechanism` (deprecated aliases, still accepted, are not listed)."""
    return sorted(n for n in _REGISTRY if n not in _DEPRECATED)


def current_mechanism_name(name: str) -> str:
    """The name ``name`` is registered under now: itself, or the new name of a deprecated alias
    (e.g. ``"truncated_gumbel"`` -> ``"knn_tem"``). Raises ``ValueError`` for an unknown name."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown mechanism {name!r}; known mechanisms: {', '.join(available_mechanisms())}")
    return _DEPRECATED.get(name, name)


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name`` (imported on first use).

    Raises ``ValueError`` naming the known mechanisms for an unknown name."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown mechanism {name!r}; known mechanisms: {', '.join(available_mechanisms())}")
    return _resolve(name)


def mechanism_parameters(name: str) -> dict[str, inspect.Parameter]:
    """The constructor parameters of the mechanism registered under ``name``, in order and
    without ``self``: the vocabulary it works on, ``epsilon``, then its own parameters, each an
    :class:`inspect.Parameter` with its ``default`` (``Parameter.empty`` when required) and its
    ``annotation`` (as written in the source, often a string). A constructor that only forwards
    ``*args, **kwargs`` (an alias subclass) is read from the nearest base class that names its
    parameters. Raises ``ValueError`` for an unknown name, like :func:`mechanism_class`."""
    for klass in mechanism_class(name).__mro__:
        if "__init__" in vars(klass):
            params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]
            if any(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
                return {p.name: p for p in params}
    return {}


def _resolve(name: str) -> type[Mechanism]:
    entry = _REGISTRY[name]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
        _REGISTRY[name] = entry
    return entry


def get_mechanism(
    name: str,
    embedding: Any = None,
    *,
    epsilon: float | None = None,
    max_n_w: float | None = None,
    backend: str = "numpy",
    device: str | None = None,
    **params: Any,
) -> Mechanism:
    """Build a mechanism by name.

    Parameters
    ----------
    name
        One of :func:`available_mechanisms`.
    embedding
        The embedding to work on; ``None`` uses the bundled default
        (:func:`deniable.load_embedding`).
    epsilon
        Privacy parameter ε > 0. Give either ``epsilon`` or ``max_n_w``.
    max_n_w
        Privacy target instead of ε, in (0, 1): the mechanism is built at the largest ε (on a
        grid 10 % apart) at which every vocabulary word w has N_w = Pr[M(w) = w] ≤ ``max_n_w``,
        with 95 % confidence where N_w is estimated (docs/calibration.md, "Privacy targets").
        Resolves from the shipped calibration for the bundled embedding (well under 2 s), else
        from a calibration computed once and cached. ``mechanism.epsilon_choice`` and
        ``mechanism.guarantee`` say how ε was chosen.
    backend
        ``"numpy"`` (default) or ``"torch"`` (``pip install "deniable[torch]"``; Madlib,
        Mahalanobis, TEM and BRR sampled on ``device``, same guarantee; see ``docs/gpu.md``).
    device
        For ``backend="torch"``: ``"cuda"`` (default), ``"cuda:N"`` or ``"cpu"``.
    **params
        Mechanism-specific keyword parameters (e.g. ``lam`` for ``"mahalanobis"``).
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown mechanism {name!r}; known mechanisms: {', '.join(available_mechanisms())}")
    if epsilon is None or max_n_w is not None:
        resolve = _connected(_TARGET_RESOLVER)
        return resolve(name, embedding, epsilon=epsilon, max_n_w=max_n_w, backend=backend, device=device, **params)
    if backend == "torch":
        build = _connected(_BACKENDS.get("torch"))
        return build(name, embedding, epsilon=epsilon, device=device or "cuda", **params)
    if backend != "numpy":
        raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    if device not in (None, "cpu"):
        raise ValueError(f"device={device!r} needs backend='torch' (the numpy backend runs on the CPU)")
    cls = _resolve(name)
    if embedding is None:
        from ..embeddings import load_embedding

        embedding = load_embedding()
    return cls(embedding, epsilon=epsilon, **params)
