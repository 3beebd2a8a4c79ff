"""Browser assets: the ε explorer page and ``static/brr.js``, the ES-module runtime for BRR
bundles (privatizes in the page with ``crypto.getRandomValues``; see ``docs/browser.md``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["static_dir"]


def static_dir() -> Path:
    """The folder holding ``index.html``, ``explorer.js``, ``explorer.css`` and ``brr.js``."""
    return Path(__file__).resolve().parent / "static"
