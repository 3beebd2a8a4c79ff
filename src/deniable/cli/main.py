"""The ``deniable`` command line.

Subcommands are imported only when used, so ``deniable --help`` stays fast. Exit status: 0 on
success, 2 on usage errors (bad options or parameter values), 1 on data errors (unreadable or
malformed input), each reported as one line on stderr.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any

import click

from ..errors import DataError

# name -> ("module:attribute", short help)
COMMANDS: dict[str, tuple[str, str]] = {
    "privatize": ("deniable.cli.privatize:privatize", "Privatize text files word by word with a metric-DP mechanism."),
    "precompute": ("deniable.cli.tem:precompute", "Precompute and cache mechanism tables (TEM neighbourhoods)."),
    "export": ("deniable.cli.brr:export", "Export an on-device bundle (BRR)."),
    "privacy-ratio": ("deniable.cli.brr:privacy_ratio", "Privacy ratio between metrics; equivalent epsilons."),
    "calibrate": ("deniable.cli.calibrate:calibrate", "Plausible-deniability statistics and an epsilon report."),
    "ngrams": ("deniable.cli.ngrams:ngrams", "Count, release with DP, and evaluate n-gram distributions."),
    "serve": ("deniable.cli.serve:serve", "Serve privatization over HTTP and the epsilon explorer page."),
}


class LazyGroup(click.Group):
    """A group whose subcommands load on first use; data errors become exit status 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_) for name, (_, help_) in COMMANDS.items()])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DataError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise click.ClickException(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)) from None
        except (ValueError, TypeError, ImportError) as exc:
            # One readable line instead of a traceback; DENIABLE_DEBUG=1 shows the traceback.
            if os.environ.get("DENIABLE_DEBUG") == "1":
                raise
            raise click.ClickException(str(exc)) from None


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings reach CLI users as one line, without source locations."""
    print(f"warning: {message}", file=sys.stderr if file is None else file)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="deniable", prog_name="deniable", message="%(prog)s %(version)s")
def cli() -> None:
    """deniable: plausible deniability for every word of a text.

    Word-level metric differential privacy (Madlib, Mahalanobis, TEM, BRR) and DP release of
    n-gram statistics. Run `deniable COMMAND --help` for each command.
    """


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    warnings.showwarning = _one_line_warning
    cli.main(args=argv, prog_name="deniable")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
