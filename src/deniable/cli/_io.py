"""File handling shared by CLI commands: atomic outputs, checked text input, progress.

The file helpers live in :mod:`deniable._files` and progress in :mod:`deniable._progress` (the
library uses them too).
"""

from __future__ import annotations

from typing import Any

from .._files import atomic_output, decode_line, input_size, open_input
from .._progress import progress_bar

__all__ = ["atomic_output", "open_input", "decode_line", "progress", "input_size"]


def progress(total: int | None, *, desc: str, disable: bool | None = None, unit: str = "B") -> Any:
    """Progress on stderr: a bar on a terminal, else a plain line every 30 s (``disable=True``:
    nothing; ``False``: the bar, forced)."""
    return progress_bar(total, desc, None if disable is None else not disable, unit=unit, unit_scale=True, unit_divisor=1024)
