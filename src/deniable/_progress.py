"""One progress convention for every long computation in deniable.

Every function that may run for long takes ``progress``:

* ``None`` (the default): a bar on stderr when stderr is a terminal; otherwise, when the work
  lasts, one plain line every :data:`LOG_INTERVAL` seconds (done / total, rate, ETA), so a job
  run by a scheduler, in a container or with stderr redirected to a log is never silent for
  minutes and writes no bar redraws into the log;
* ``True``: the bar, even without a terminal;
* ``False``: nothing;
* a callable: called as ``progress(done, total)`` after each update (``total`` may be None).

:func:`progress_bar` resolves it to an object with ``update(n)`` and ``close()`` (also a context
manager).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LOG_INTERVAL", "ProgressLike", "progress_bar", "check_progress"]

#: Seconds between two plain progress lines when stderr is not a terminal.
LOG_INTERVAL = 30.0

ProgressLike = bool | Callable[[int, int | None], Any] | None


def check_progress(progress: Any) -> ProgressLike:
    """Validate ``progress`` (None, a bool or a callable)."""
    if progress is None or isinstance(progress, bool) or callable(progress):
        return progress
    raise TypeError(f"progress must be None, True, False or a callable (done, total), got {type(progress).__name__} {progress!r}")


class _Silent:
    postfix = ""

    def update(self, n: float = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Extra words shown after the counts (as tqdm's)."""
        self.postfix = s

    def close(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Callback(_Silent):
    def __init__(self, fn: Callable[[int, int | None], Any], total: int | None) -> None:
        self.fn, self.total, self.done = fn, total, 0

    def update(self, n: float = 1) -> None:
        self.done += int(n)
        self.fn(self.done, self.total)


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _Lines(_Silent):
    """Plain lines on a stream that is not a terminal: the first after ``interval`` seconds,
    then every ``interval`` seconds, and a last one on close if any was written."""

    def __init__(self, total: int | None, desc: str, unit: str, stream: Any, interval: float, clock: Callable[[], float]) -> None:
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.interval, self.clock = interval, clock
        self.start = self.last = clock()
        self.done = 0
        self.wrote = False

    def _amount(self, n: float, rate: bool = False) -> str:
        if self.unit == "B":
            return f"{n / 2**20:,.1f} MiB"
        return f"{n:,.3g} {self.unit}s" if rate and n < 100 else f"{n:,.0f} {self.unit}s"

    def _line(self) -> str:
        elapsed = max(self.clock() - self.start, 1e-9)
        rate = self.done / elapsed
        speed = f"{self._amount(rate, rate=True)}/s"
        if self.total:
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            pct = 100.0 * self.done / self.total
            left = _duration(eta) if eta != float("inf") else "?"
            return (f"{self.desc}: {self._amount(self.done)} of {self._amount(self.total)} ({pct:.0f}%){self._extra()}, {speed}, "
                    f"elapsed {_duration(elapsed)}, ETA {left}")
        return f"{self.desc}: {self._amount(self.done)}{self._extra()}, {speed}, elapsed {_duration(elapsed)}"

    def _extra(self) -> str:
        return f", {self.postfix}" if self.postfix else ""

    def update(self, n: float = 1) -> None:
        self.done += int(n)
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            self.wrote = True
            print(self._line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.wrote:
            print(self._line() + " - done", file=self.stream, flush=True)
            self.wrote = False


def progress_bar(
    total: int | None,
    desc: str,
    progress: ProgressLike = None,
    *,
    unit: str = "word",
    stream: Any = None,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    **tqdm_kwargs: Any,
) -> Any:
    """The progress reporter for ``progress`` (see the module docstring): an object with
    ``update(n)`` and ``close()``. ``tqdm_kwargs`` go to the bar (e.g. ``unit_scale=True``)."""
    progress = check_progress(progress)
    stream = sys.stderr if stream is None else stream
    interval = LOG_INTERVAL if interval is None else interval
    if progress is False:
        return _Silent()
    if callable(progress) and not isinstance(progress, bool):
        return _Callback(progress, total)
    is_tty = bool(getattr(stream, "isatty", lambda: False)())
    if progress is None and not is_tty:
        return _Lines(total, desc, unit, stream, interval, clock)
    from tqdm.auto import tqdm

    tqdm_kwargs.setdefault("leave", False)
    tqdm_kwargs.setdefault("dynamic_ncols", True)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=False, **tqdm_kwargs)
