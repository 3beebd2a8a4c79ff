"""Readable terminal output: what the commands print on stderr, at most :data:`WIDTH` characters a
line (a long message continues on indented lines), so a run's summary reads at a glance."""

from __future__ import annotations

import textwrap

import click

__all__ = ["WIDTH", "wrap", "echo_wrapped"]

#: Longest line the commands print in their summaries and reports.
WIDTH = 120


def wrap(text: str, width: int = WIDTH, indent: str = "  ", *, sep: str | None = None) -> list[str]:
    """``text`` as lines of at most ``width`` characters, the continuation lines indented; words
    are never broken, so only a single word longer than a line (a long path) exceeds it. With
    ``sep`` (e.g. ``"; "``) each part after a separator starts a continuation line of its own."""
    parts = text.split(sep) if sep else [text]
    lines: list[str] = []
    for i, part in enumerate(parts):
        first = indent if i else ""
        lines += textwrap.wrap(part, width=width, initial_indent=first, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return lines or [""]


def echo_wrapped(text: str, *, err: bool = True) -> None:
    """Print ``text`` wrapped by :func:`wrap` (on stderr by default)."""
    for line in wrap(text):
        click.echo(line, err=err)
