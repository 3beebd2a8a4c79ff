"""Sphinx configuration of the documentation site (``make docs``; warnings are errors).

The site's source root is ``docs/`` (the Markdown guides, tutorials, explanations and results
pages, read with MyST) and this file is its configuration: ``make docs`` runs
``sphinx-build -c docs/api docs build/docs``. The API reference (``api/api.rst``) is generated
from the docstrings with autodoc and napoleon.
"""

from __future__ import annotations

import re

project = "deniable"
author = "The deniable developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
root_doc = "index"
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# Markdown: GitHub-style heading anchors ("#choosing-ε") so that the pages' links work both on
# the site and when read in the repository; a link to a missing page or anchor is a warning,
# and warnings are errors.
myst_heading_anchors = 6
myst_enable_extensions = ["colon_fence", "deflist"]
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
html_theme = "furo"
html_title = "deniable"
# the raw records of the results pages (JSON lines, logs) are data, not pages
exclude_patterns = ["_build", "results/gpu_data", "results/evaluation_data/*/*"]
# a code block that its lexer cannot parse (e.g. JSON with "..." in it) is still shown, as plain text
suppress_warnings: list[str] = ["misc.highlighting_failure"]


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
