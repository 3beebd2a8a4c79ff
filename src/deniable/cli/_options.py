"""Option parsing shared by the subcommands: ``--param KEY=VALUE``, ε values, the mechanisms'
parameter names, and the command line's spelling of library messages."""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
from collections.abc import Callable
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
    "InputPath",
    "embedding_limit_option",
    "deprecated_alias",
    "workers_option",
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
    """One ``--param KEY=VALUE`` (the grammar every command shares): KEY a Python identifier
    (``-`` read as ``_``); VALUE ``true``/``false`` (any case) as a bool, ``none``/``null`` as
    None, else JSON where it parses (``3``, ``0.5``, ``1e-3``, ``[1, 2]``, ``"quoted"``), else
    the text itself (``metric=angular``). A malformed item is a usage error (exit 2)."""
    key, sep, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key.isidentifier():
        raise click.BadParameter(f"expected KEY=VALUE (e.g. lam=0.5), got {text!r}", param_hint="--param")
    raw = raw.strip()
    low = raw.lower()
    if low in ("true", "false"):
        return key, low == "true"
    if low in ("none", "null"):
        return key, None
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def parse_params(values: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``("lam=0.5", "metric=angular")`` -> ``{"lam": 0.5, "metric": "angular"}``, each item by
    :func:`parse_param`; one key given twice with different values is a usage error."""
    out: dict[str, Any] = {}
    for item in values:
        key, value = parse_param(item)
        if key in out and out[key] != value:
            raise click.BadParameter(f"{key} given twice ({out[key]!r} and {value!r}); give it once", param_hint="--param")
        out[key] = value
    return out


def check_epsilon(value: float, param_hint: str | None = "-e/--epsilon") -> float:
    """``value`` if it is a finite number > 0, else a usage error (exit 2): the one ε check of
    every command."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"epsilon must be a finite number > 0, got {value:g}" if isinstance(value, (int, float)) else
                                 f"epsilon must be a finite number > 0, got {value!r}", param_hint=param_hint)
    return float(value)


def positive_epsilon(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback of an ``-e/--epsilon`` option: a finite number > 0 (or absent); a
    ``multiple=True`` option gives a tuple, each checked."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(check_epsilon(v) for v in value)
    return check_epsilon(value)


def epsilon_list(text: str, param_hint: str | None = None) -> list[float]:
    """Comma-separated ε values, each a finite number > 0."""
    try:
        eps = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}", param_hint=param_hint) from None
    if not eps:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}", param_hint=param_hint)
    return [check_epsilon(e, param_hint) for e in eps]


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


class InputPath(click.Path):
    """A ``click.Path`` for a file the command reads: a missing, unreadable or (unless
    ``dir_okay``) directory path is a data error, exit 1 with one line ``PATH: problem``, as
    every other unreadable input is; ``-`` passes when ``allow_dash``."""

    def __init__(self, *, dir_okay: bool = False, allow_dash: bool = False, path_type: Any = None) -> None:
        super().__init__(exists=False, file_okay=True, dir_okay=True, allow_dash=allow_dash, path_type=path_type)
        self.input_dir_okay = dir_okay

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        path = os.fsdecode(rv) if isinstance(rv, bytes) else str(rv)
        if self.allow_dash and path == "-":
            return rv
        problem = None
        if not os.path.exists(path):
            problem = "file not found"
        elif os.path.isdir(path) and not self.input_dir_okay:
            problem = "is a directory; give a file"
        elif not os.access(path, os.R_OK):
            problem = "not readable (permission denied)"
        if problem is not None:
            raise click.ClickException(f"{path}: {problem}")  # exit 1: a data error, not a usage error
        return rv


def deprecated_alias(old: str, new: str, dest: str, **option: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: a hidden option ``old`` (e.g. ``--out``) that gives its value to the command's
    parameter ``dest`` (the one of option ``new``) with a ``warning:`` line naming ``new``.
    Both given with different values is a usage error. Flag aliases pass ``is_flag=True``."""
    hidden = f"_deprecated_{dest}_{old.lstrip('-').replace('-', '_')}"

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden, None)
            if value is not None and value is not False:
                click.echo(f"warning: {old} is deprecated; use {new}", err=True)
                if kwargs.get(dest) not in (None, False, value):
                    raise click.UsageError(f"{old} (deprecated) and {new} give different values; give {new} only")
                kwargs[dest] = value
            return f(*args, **kwargs)

        option.setdefault("default", None)
        return click.option(old, hidden, hidden=True, **option)(command)

    return decorate


def embedding_limit_option(min_words: int = 1, help: str = "Use only the first N words of the embedding (the most frequent ones).") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--embedding-limit N`` (the command receives ``embedding_limit``: an int >= ``min_words``
    or None), with ``--limit`` as its hidden deprecated alias."""
    kind = click.IntRange(min=min_words)

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        f = deprecated_alias("--limit", "--embedding-limit", "embedding_limit", type=kind, metavar="N")(f)
        return click.option("--embedding-limit", "embedding_limit", type=kind, default=None, metavar="N", help=help)(f)

    return decorate


class Workers(click.ParamType):
    """``auto`` or a whole number >= 1 (``--workers``)."""

    name = "workers"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            self.fail(f"expected 'auto' or a whole number >= 1, got {value!r}", param, ctx)
        return n


def workers_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--workers N|auto`` (the command receives ``workers``: an int >= 1 or ``"auto"``)."""
    return click.option(
        "--workers", "workers", type=Workers(), default="auto", show_default=True, metavar="N|auto",
        help="Processes privatizing whole batches (tokenize, look up, sample, rebuild): this one, which also reads and writes, and N-1 "
        "forked workers (with --device, or where forking is unsafe, N worker processes do the text work and this process samples). "
        "auto: one per CPU core on a machine with 4 cores or more, for inputs of 4 MB or more (when this process samples: one per core "
        "but one, from 32 MB), else 1; 1: everything in this process. The output is the same for a seed whatever N.",
    )
