"""Generate the separator table that ``static/brr.js`` embeds (its tokenizer's character class).

Separators are the characters Python's ``re`` ``\\s`` matches in a str pattern (``str.isspace``)
and Unicode punctuation (category ``P*``) — exactly what :func:`deniable.text.tokenize.word_pattern`
and ``brr_runtime.word_pattern`` treat as separators. The JS runtime embeds the ranges instead
of using ``\\s`` and ``\\p{P}`` because those differ from Python's (``\\x1c``–``\\x1f``, ``\\x85``,
``\\ufeff``) and follow the browser's Unicode version. Regenerate after a Python upgrade:
``python -m deniable.web._tables src/deniable/web/static/brr.js`` rewrites the marked block.
"""

from __future__ import annotations

import sys
import unicodedata

BEGIN = "// BEGIN GENERATED SEPARATORS"
END = "// END GENERATED SEPARATORS"


def separator_ranges() -> list[tuple[int, int]]:
    """Inclusive code-point ranges of the separators, ascending."""
    ranges: list[list[int]] = []
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        if c.isspace() or unicodedata.category(c)[0] == "P":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    return [(a, b) for a, b in ranges]


def js_block() -> str:
    """The generated block: a JS string holding a regex character class body (``u`` flag)."""
    parts = []
    for a, b in separator_ranges():
        parts.append(f"\\\\u{{{a:x}}}" if a == b else f"\\\\u{{{a:x}}}-\\\\u{{{b:x}}}")
    lines = []
    line = ""
    for p in parts:
        if len(line) + len(p) > 96:
            lines.append(line)
            line = ""
        line += p
    lines.append(line)
    body = " +\n".join(f'  "{ln}"' for ln in lines)
    return (
        f"{BEGIN} (python -m deniable.web._tables; Unicode {unicodedata.unidata_version})\n"
        f"const SEPARATOR_CLASS =\n{body};\n{END}"
    )


def rewrite(path: str) -> bool:
    """Replace the marked block of ``path``; returns whether the file changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    new = text[:start] + js_block() + text[end:]
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


if __name__ == "__main__":  # pragma: no cover
    print("rewritten" if rewrite(sys.argv[1]) else "up to date")
