"""Check the relative links of the README and of every Markdown page under docs/.

Sphinx (``make docs``) already fails on a broken link inside the site; this check also covers the
README, which is not part of the site, and runs without Sphinx. For every Markdown link or image
``[text](target)`` outside code, whose target is not a URL: the file must exist (relative to the
page), and an ``#anchor`` into a Markdown page (or the page itself) must name one of its headings,
slugged as GitHub and MyST do (lower case, punctuation removed, spaces to hyphens; repeated
headings get ``-1``, ``-2``). Exit status 1 with one line per broken link, 0 when all resolve.

Usage: ``python scripts/check_doc_links.py [FILE_OR_DIR ...]`` (default: README.md and docs/).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fence = [], None
    for i, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        out.append((i, line))
    return out


def slug(title: str) -> str:
    """The anchor GitHub and MyST give a heading."""
    title = re.sub(r"<[^>]+>", "", title)                     # inline HTML
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)  # links keep their text
    title = title.replace("`", "")
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown page (explicit ``(label)=`` targets included)."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if m is None:
            t = re.match(r"^\(([^)]+)\)=\s*$", line)
            if t:
                out.add(t.group(1))
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_file(path: Path) -> list[str]:
    """One message per broken relative link of the Markdown file ``path``."""
    problems = []
    cache: dict[Path, set[str]] = {}
    for n, line in _prose_lines(path.read_text(encoding="utf-8")):
        for m in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = m.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # http:, https:, mailto:, ...
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path.resolve()
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{n}"
            if not dest.exists():
                problems.append(f"{where}: link to a missing file: {target}")
                continue
            if anchor and dest.suffix == ".md":
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    problems.append(f"{where}: no heading for the anchor #{anchor} in {file_part or path.name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or [ROOT / "README.md", ROOT / "docs"]
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*.md"))})
    problems = [msg for f in files for msg in check_file(f.resolve())]
    for msg in problems:
        print(msg)
    print(f"{len(files)} Markdown files, {len(problems)} broken links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
