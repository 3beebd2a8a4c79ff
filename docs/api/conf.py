"""Sphinx configuration of the API reference (``make docs``; warnings are errors)."""

from __future__ import annotations

import re

project = "deniable"
author = "The deniable developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes" sections as field lists: dataclass fields are documented once
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
# numpy's and click's own types are not documented here; a link that cannot resolve is not an error
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
suppress_warnings: list[str] = []


_LITERAL = re.compile(r"(``.*?``)")


def _escape_pipes(app, what, name, obj, options, lines):
    """Docstrings write |V| for a size and |x - y| for a distance, not reST substitutions:
    escape ``|`` outside inline literals (lines of grid tables start with ``|`` or ``+`` and
    are left alone)."""
    for i, line in enumerate(lines):
        if "|" not in line or line.lstrip().startswith(("|", "+")):
            continue
        parts = _LITERAL.split(line)
        lines[i] = "".join(p if p.startswith("``") else p.replace("|", r"\|") for p in parts)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_pipes)
