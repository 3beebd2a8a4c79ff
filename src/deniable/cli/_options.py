"""Option parsing shared by the subcommands: ``--param KEY=VALUE``, ε values, the mechanisms'
parameter names, and the command line's spelling of library messages."""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

import click

from ..mechanisms import mechanism_class
from ..mechanisms.registry import current_mechanism_name

__all__ = [
    "parse_param",
    "parse_params",
    "check_epsilon",
    "positive_epsilon",
    "epsilon_list",
    "epsilons_option",
    "known_params",
    "cli_spelling",
    "mechanism_name",
]


def mechanism_name(name: str, *, param_hint: str = "-m/--mechanism") -> str:
    """The current registered name for ``-m NAME``: a deprecated alias prints one warning line on
    stderr and gives the new name; an unknown name is a usage error listing the known ones."""
    try:
        current = current_mechanism_name(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from None
    if current != name:
        click.echo(f"warning: mechanism {name!r} was renamed {current!r}; using {current!r} (see docs/mechanisms/{current}.md)", err=True)
    return current


def parse_param(text: str) -> tuple[str, Any]:
    """``k=v`` with v parsed as int, float, true/false/none, else kept as a string
    (``calibrate``, ``privacy-ratio``)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not key.isidentifier():
        raise click.BadParameter(f"expected KEY=VALUE, got {text!r}", param_hint="--param")
    raw = raw.strip()
    low = raw.lower()
    if low in ("true", "false"):
        return key, low == "true"
    if low in ("none", "null"):
        return key, None
    for conv in (int, float):
        try:
            return key, conv(raw)
        except ValueError:
            pass
    return key, raw


def parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    """``("lam=0.5", "metric=angular")`` -> ``{"lam": 0.5, "metric": "angular"}`` (JSON values,
    else strings; ``-`` in keys becomes ``_``) (``privatize``, ``precompute``, ``evaluate``)."""
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def check_epsilon(value: float, param_hint: str | None = None) -> float:
    """``value`` if it is a finite number > 0, else a usage error (exit 2)."""
    if not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"epsilon must be a finite number > 0, got {value}", param_hint=param_hint)
    return value


def positive_epsilon(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Click callback of an ``-e/--epsilon`` option: a finite number > 0 (or absent)."""
    return None if value is None else check_epsilon(value)


def epsilon_list(text: str, param_hint: str | None = None) -> list[float]:
    """Comma-separated ε values, each a finite number > 0."""
    try:
        eps = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}", param_hint=param_hint) from None
    if not eps or not all(math.isfinite(e) and e > 0 for e in eps):
        raise click.BadParameter(f"every epsilon must be a finite number > 0, got {text!r}", param_hint=param_hint)
    return eps


def epsilons_option(ctx: click.Context, param: click.Parameter, value: str) -> list[float]:
    """Click callback of a comma-separated ε list option."""
    return epsilon_list(value)


def known_params(mechanism: str) -> list[str] | None:
    """Keyword parameters the mechanism's constructor takes besides epsilon (None if it takes
    ``**kwargs``)."""
    sig = inspect.signature(mechanism_class(mechanism).__init__)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return [n for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY and n != "epsilon"]


def cli_spelling(message: str) -> str:
    """A binarizer message with the command line's spelling of its parameters."""
    return message.replace("use n_bits <= ", "use --param n_bits=").replace(
        "method='random-projection' or 'autoencoder' (no such limit)", "--param method=random-projection (no such limit)"
    )
