"""Word lists shipped with the package for output filtering (no download).

``"profanity"``: English profanity and slurs (``deniable/text/data/profanity_en.txt``), for
``exclude_outputs="profanity"`` on any mechanism (docs/explanation/excluded_outputs.md).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["WORD_LISTS", "word_list"]

#: Names of the shipped lists -> their file under ``deniable/text/data``.
WORD_LISTS = {"profanity": "profanity_en.txt"}


@cache
def word_list(name: str) -> tuple[str, ...]:
    """The words of a shipped list (lines that are not empty or ``#`` comments, stripped).
    Raises ``ValueError`` naming the shipped lists for an unknown name."""
    if name not in WORD_LISTS:
        raise ValueError(f"unknown word list {name!r}; shipped lists: {', '.join(sorted(WORD_LISTS))}")
    text = resources.files("deniable.text").joinpath(f"data/{WORD_LISTS[name]}").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
