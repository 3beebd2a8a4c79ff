"""The ``deniable`` command line.

Subcommands are imported only when used, so ``deniable --help`` stays fast. Exit status: 0 on
success, 2 on usage errors (bad options or parameter values), 1 on data errors (unreadable or
malformed input), each reported as one line on stderr.
"""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import threading
import warnings
from typing import Any

import click

from ..errors import DataError

_NoArgsIsHelp = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2

# name -> ("module:attribute", short help)
COMMANDS: dict[str, tuple[str, str]] = {
    "privatize": ("deniable.cli.privatize:privatize", "Privatize text files word by word with a metric-DP mechanism."),
    "precompute": ("deniable.cli.tem:precompute", "Precompute and cache mechanism tables (TEM, SanText(+), CusText, kNN-TEM, 1-Diffractor)."),
    "export": ("deniable.cli.brr:export", "Export an on-device bundle (BRR)."),
    "privacy-ratio": ("deniable.cli.brr:privacy_ratio", "Privacy ratio between metrics; equivalent epsilons."),
    "calibrate": ("deniable.cli.calibrate:calibrate", "Plausible-deniability statistics and an epsilon report."),
    "ngrams": ("deniable.cli.ngrams:ngrams", "Count, release with DP, and evaluate n-gram distributions."),
    "serve": ("deniable.cli.serve:serve", "Serve privatization over HTTP and the epsilon explorer page."),
    "evaluate": ("deniable.cli.evaluate:evaluate", "Utility and attacks (inversion, membership) of a mechanism on labelled data."),
    "ledger": ("deniable.cli.ledger:ledger", "Totals of a release ledger (privatize --ledger) per dataset and per user key."),
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

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """Click's entry, but every error is one line: usage errors (exit 2) as ``Error: ...
        (see 'deniable CMD --help')`` instead of click's usage banner, other errors (exit 1) as
        ``Error: ...``."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NoArgsIsHelp as exc:  # a group without its subcommand: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            path = exc.ctx.command_path if exc.ctx is not None else (prog_name or "deniable")
            click.echo(f"Error: {_one_line(exc.format_message())} (see '{path} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"Error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DataError as exc:
            raise click.ClickException(str(exc)) from None
        except BrokenPipeError:  # `deniable ... | head`: the reader left; stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except OSError as exc:
            raise click.ClickException(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)) from None
        except (ValueError, TypeError, ImportError) as exc:
            # One readable line instead of a traceback; DENIABLE_DEBUG=1 shows the traceback.
            if os.environ.get("DENIABLE_DEBUG") == "1":
                raise
            raise click.ClickException(str(exc)) from None


def _one_line(message: str) -> str:
    return " ".join(message.split("\n")).strip()


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM/SIGHUP so that ``with`` blocks clean up (atomic
    outputs remove their temporary file) before the process ends by the same signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: Any) -> None:
    for s in _SIGNALS:  # a second signal must not interrupt the clean-up
        signal.signal(s, signal.SIG_IGN)
    raise Terminated(signum)


_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings reach CLI users as one line, without source locations."""
    print(f"warning: {message}", file=sys.stderr if file is None else file)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="deniable", prog_name="deniable", message="%(prog)s %(version)s")
def cli() -> None:
    """deniable: plausible deniability for every word of a text.

    Word-level metric differential privacy (MECHANISMS) and DP release of n-gram statistics.
    Run `deniable COMMAND --help` for each command.
    """


def _mechanism_list() -> str:
    from ..mechanisms.registry import available_mechanisms

    return ", ".join(available_mechanisms())


cli.help = (cli.help or "").replace("MECHANISMS", _mechanism_list())


def main(argv: list[str] | None = None) -> None:
    """Console entry point. SIGTERM and SIGHUP end the run like Ctrl-C does: temporary files are
    removed, so an output path holds either nothing new or the complete result; the process then
    ends by that signal."""
    warnings.showwarning = _one_line_warning
    previous = {s: signal.signal(s, _on_signal) for s in _SIGNALS}
    try:
        cli.main(args=argv, prog_name="deniable")
    except Terminated as exc:
        for s, handler in previous.items():
            signal.signal(s, handler if exc.signum != s else signal.SIG_DFL)
        os.kill(os.getpid(), exc.signum)
        sys.exit(128 + exc.signum)  # pragma: no cover - reached only if the signal is blocked
    except SystemExit as exc:
        text = sys.modules.get("deniable.text")
        if text is not None:  # an error may end the command while the compiled loops load in the background
            text.load_compiled_loops(None)  # (waits for that)
        if argv is None and "llvmlite" in sys.modules and threading.active_count() == 1:
            _exit_now(exc.code)
        raise


def _exit_now(code: Any) -> None:
    """End the process as ``sys.exit(code)`` would, without the interpreter's tear-down: after the
    text path's compiled loops ran, freeing their LLVM objects takes about 0.15 s, for nothing
    the operating system does not free. Only when the command has finished (its outputs closed
    and renamed into place) and no other thread runs; exit handlers still run and the standard
    streams are flushed."""
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    status = code or 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120  # as the interpreter does when flushing stdout fails
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    main()
