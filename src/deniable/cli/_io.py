"""File handling shared by CLI commands: atomic outputs, checked text input, progress bars.

The file helpers live in :mod:`deniable._files` (the library uses them too); the progress bar is
CLI-only.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from .._files import atomic_output, decode_line, input_size, open_input

__all__ = ["atomic_output", "open_input", "decode_line", "progress", "input_size"]


def progress(total: int | None, *, desc: str, disable: bool | None = None, unit: str = "B") -> tqdm:
    """A progress bar on stderr (hidden when stderr is not a terminal unless forced)."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, unit_divisor=1024, file=sys.stderr, disable=disable, leave=False, dynamic_ncols=True)
