"""What the service offers of each registered mechanism, read from the registry (no web framework).

For every name of :func:`~deniable.mechanisms.registry.available_mechanisms`, the constructor's
signature (:func:`~deniable.mechanisms.registry.mechanism_parameters`) and the class docstring
give a :class:`MechanismSpec`:

* **the vocabulary** it works on: an :class:`~deniable.embeddings.Embedding` (subclasses of
  :class:`~deniable.mechanisms.base.EmbeddingMechanism`) or binary codes (a first parameter
  named ``binary_embedding``, as BRR's). A mechanism that needs anything else, or has a
  required parameter besides ε, cannot be built from a request: it is listed with the reason;
* **its parameters**: those whose annotation admits only JSON scalars (numbers, strings,
  booleans, null), with type, default and the docstring's description. Parameters that take
  objects (search indexes, metric callables, cache folders, word lists) are never request
  parameters and are not listed;
* **which of them a request may set**: the real-valued ones (``float`` or ``float | None``),
  e.g. Mahalanobis' λ, TEM's β and γ, SanText+'s p, Vickrey's t. Integer and string parameters
  (neighbour counts, output-set sizes, code lengths, batch and memory sizes, metric and index
  names, storage) choose what is precomputed over the whole vocabulary or how the work runs:
  one request could start minutes of pre-processing, write cache files or allocate without
  bound, so they stay at their defaults, as do the real-valued :data:`FIXED_PARAMS`;
* **what it is served without**: a mechanism with a ``fit`` method (SanText+'s sensitive-word
  set from a corpus) is served unfitted, since a request carries no corpus; its ``notes`` say so.
"""

from __future__ import annotations

import inspect
import math
import re
import threading
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import PoolError

if TYPE_CHECKING:
    from ..mechanisms.base import Mechanism

__all__ = ["FIXED_PARAMS", "UNFITTED", "ParamSpec", "MechanismSpec", "mechanism_spec", "normalize_params", "without_defaults"]

#: Real-valued parameters a request may not set either, with the reason (by parameter name).
FIXED_PARAMS: dict[str, str] = {
    "w": "it sizes the sensitive-word set that fit(corpus) chooses, and the service serves SanText+ unfitted "
    "(every word sensitive); a set chosen per request would also build neighbour lists over the whole vocabulary",
}
#: What a mechanism with a ``fit`` method is served as.
UNFITTED = "served unfitted (a request carries no corpus to fit): see the mechanism's documentation for its behaviour before fit"
#: Why integer and string parameters are not request parameters.
STRUCTURAL = "integer and string parameters choose what is precomputed over the vocabulary or how the work runs, so they stay at the server's defaults"

_SCALAR_NAMES = {"bool": "boolean", "int": "integer", "float": "number", "str": "string", "None": "null"}
_SCALAR_TYPES: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


@dataclass(frozen=True)
class ParamSpec:
    """One constructor parameter with a JSON-scalar type."""

    name: str
    type: str  # "number", "integer", "string" or "boolean"
    nullable: bool
    default: Any
    description: str
    settable: bool  # a request may set it
    fixed_because: str | None = None  # why not, when it is not

    def info(self) -> dict[str, Any]:
        """The parameter as ``GET /v1/mechanisms`` lists it."""
        return {"name": self.name, "type": self.type, "nullable": self.nullable, "default": self.default, "description": self.description, "settable": self.settable}


@dataclass(frozen=True)
class MechanismSpec:
    """What the service knows of one registered mechanism (see the module docstring)."""

    name: str
    description: str
    vocabulary: str | None  # "embedding", "binary", or None when it cannot be served
    params: tuple[ParamSpec, ...]
    excluded: str | None = None  # why it cannot be served from a request (None: it can)
    shared_index: str | None = None  # default ``index`` spec when the constructor accepts an index object
    notes: str | None = None  # how it is served, where that differs from the library's full use

    @property
    def settable(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.settable)

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


def _json_types(annotation: Any) -> tuple[str, ...] | None:
    """JSON types an annotation admits, or None when it admits anything else (or has none)."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        optional = re.fullmatch(r"(?:typing\.)?Optional\[(\w+)\]", text)
        names = [_SCALAR_NAMES.get(p) for p in ([optional.group(1), "None"] if optional else text.split("|"))]
    else:
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        names = [_SCALAR_TYPES.get(a) for a in (typing.get_args(annotation) if union else (annotation,))]
    if not names or None in names:
        return None
    return tuple(dict.fromkeys(n for n in names if n is not None))


def _plain(text: str) -> str:
    """Docstring text without reStructuredText markup, on one line."""
    text = re.sub(r":\w+:`~[\w.]*?(\w+)`", r"\1", text)
    text = re.sub(r":\w+:`([^`]+)`", r"\1", text)
    return " ".join(text.replace("``", "").split())


def _parameter_entries(doc: str) -> list[tuple[list[str], str]]:
    """``([names], description)`` of each entry of a numpydoc "Parameters" section."""
    lines = inspect.cleandoc(doc).splitlines()
    rule = [bool(line.strip()) and set(line.strip()) == {"-"} for line in lines] + [False]
    start = next((i for i in range(len(lines)) if lines[i].strip() == "Parameters" and rule[i + 1]), None)
    if start is None:
        return []
    entries: list[tuple[list[str], list[str]]] = []
    for i in range(start + 2, len(lines)):
        line = lines[i]
        if rule[i + 1] and line.strip():
            break  # the next section
        if line.strip() and not line[0].isspace():
            entries.append(([n.strip() for n in line.split(":")[0].split(",")], []))
        elif line.strip() and entries:
            entries[-1][1].append(line.strip())
    return [(names, _plain(" ".join(text))) for names, text in entries]


def _descriptions(cls: type) -> dict[str, str]:
    """Parameter descriptions from the docstrings of ``cls`` and its bases (a subclass's
    "As for ..." keeps the base's wording)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = klass.__dict__.get("__doc__")
        for names, text in _parameter_entries(doc) if isinstance(doc, str) else []:
            if not text.startswith("As for"):
                out.update(dict.fromkeys(names, text))
    return out


def _param_spec(p: inspect.Parameter, description: str) -> ParamSpec | None:
    kinds = _json_types(p.annotation)
    if kinds is None or p.default is inspect.Parameter.empty or _SCALAR_TYPES.get(type(p.default)) is None:
        return None
    nullable = "null" in kinds
    kind = " | ".join(k for k in kinds if k != "null") or "null"
    why = None
    if kind != "number":
        why = STRUCTURAL
    elif p.name in FIXED_PARAMS:
        why = FIXED_PARAMS[p.name]
    return ParamSpec(p.name, kind, nullable, p.default, description, why is None, why)


def _vocabulary(cls: type, first: inspect.Parameter | None) -> str | None:
    from ..mechanisms.base import EmbeddingMechanism

    if issubclass(cls, EmbeddingMechanism):
        return "embedding"
    return "binary" if first is not None and first.name == "binary_embedding" else None


def _build_spec(name: str, cls: type[Mechanism]) -> MechanismSpec:
    from ..mechanisms.registry import mechanism_parameters

    signature = list(mechanism_parameters(name).values())
    first = signature[0] if signature and signature[0].kind is not inspect.Parameter.KEYWORD_ONLY else None
    rest = signature[1:] if first is not None else signature
    texts = _descriptions(cls)
    params = tuple(s for p in rest if p.name != "epsilon" and p.name not in cls.deprecated_params and (s := _param_spec(p, texts.get(p.name, ""))) is not None)
    vocabulary = _vocabulary(cls, first)
    excluded = None
    if vocabulary is None:
        excluded = f"it works on {first.name if first is not None else 'no vocabulary'!r}, which the service cannot supply"
    required = [p.name for p in rest if p.default is inspect.Parameter.empty and p.name != "epsilon" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if required:
        excluded = f"it needs {', '.join(required)} (no default), which a request cannot supply"
    index = next((p for p in rest if p.name == "index"), None)
    shared = None
    if index is not None and isinstance(index.default, str) and _json_types(index.annotation) is None:
        shared = index.default  # the constructor accepts an index object: one per vocabulary can serve every ε
    doc = inspect.getdoc(cls) or name
    notes = UNFITTED if cls.fittable else None
    return MechanismSpec(name, _plain(doc.split("\n\n")[0]), vocabulary, params, excluded, shared, notes)


_lock = threading.Lock()
_specs: dict[tuple[str, type], MechanismSpec] = {}


def mechanism_spec(name: str) -> MechanismSpec:
    """The :class:`MechanismSpec` of the mechanism registered as ``name`` (read once per class).

    Raises :class:`PoolError` (``unknown_mechanism``) for a name the registry does not know."""
    from ..mechanisms.registry import available_mechanisms, mechanism_class

    if name not in available_mechanisms():
        raise PoolError(f"unknown mechanism {name!r}; registered mechanisms: {', '.join(available_mechanisms())}", code="unknown_mechanism")
    try:
        cls = mechanism_class(name)
    except ImportError as exc:  # a module with a missing optional dependency
        return MechanismSpec(name, name, None, (), excluded=f"it cannot be imported here: {exc}")
    with _lock:
        spec = _specs.get((name, cls))
    if spec is None:
        spec = _build_spec(name, cls)
        with _lock:
            _specs[(name, cls)] = spec
    return spec


def _bad_names(spec: MechanismSpec, bad: list[str]) -> PoolError:
    valid = ", ".join(spec.settable) or "none"
    fixed = [spec.param(k) for k in bad]
    why = "; ".join(f"{p.name} is fixed at {p.default!r}: {p.fixed_because}" for p in fixed if p is not None)
    unknown = [k for k, p in zip(bad, fixed) if p is None]
    head = f"params: {spec.name} has no request parameter {', '.join(map(repr, unknown))}" if unknown else f"params: {spec.name}'s {', '.join(bad)} cannot be set by a request"
    return PoolError(f"{head}{f' ({why})' if why else ''}; valid parameters of {spec.name}: {valid}")


def normalize_params(spec: MechanismSpec, params: dict[str, Any]) -> dict[str, float]:
    """``params`` checked against ``spec``: only settable parameters, each a finite number (or
    null where the parameter is optional: left at its default, and left out). Returns the given
    values as floats. Raises :class:`PoolError` naming the parameter and the valid ones."""
    bad = sorted(k for k in params if k not in spec.settable)
    if bad:
        raise _bad_names(spec, bad)
    out: dict[str, float] = {}
    for k in sorted(params):
        p, v = spec.param(k), params[k]
        assert p is not None
        if v is None and p.nullable:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise PoolError(f"params.{k}: {spec.name}'s {k} must be a finite number{' or null' if p.nullable else ''}, got {v!r}")
        out[k] = float(v)
    return out


def without_defaults(spec: MechanismSpec, params: dict[str, float]) -> dict[str, float]:
    """``params`` without the values equal to the constructor's default (they build the same
    mechanism, so ``{"lam": 0.5}`` and ``{}`` can share one instance)."""
    defaults = spec.defaults()
    return {k: v for k, v in params.items() if defaults.get(k) is None or float(defaults[k]) != v}
