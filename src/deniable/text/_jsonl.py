"""Exact-copy JSON Lines scanning for :mod:`deniable.text.io`: locate the text field of one JSON
object per line without re-serializing the other fields, and write a text back as a JSON string."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # not in typeshed
from typing import Any

from ..errors import DataError

_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (write it as a string or null)")


# Numbers are kept as their text (never converted: no overflow to inf, no digit limit).
_SCAN = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=_reject_constant).scan_once  # type: ignore[attr-defined]


def _skip_ws(s: str, i: int) -> int:
    """Index of the first non-whitespace character at or after ``i``."""
    m = _WS.match(s, i)
    return m.end() if m else i


def _json_kind(ch: str) -> str:
    return {'"': "a string", "{": "an object", "[": "an array", "t": "a boolean", "f": "a boolean", "n": "null"}.get(ch, "a number")


def _scan_object(line: str, column: str, path: str, n: int, others: set[str]) -> tuple[str, str, str]:
    """Validate one JSON object per line and locate the string value of ``column``: returns
    ``(prefix, value, suffix)`` where ``prefix + json_string(value) + suffix == line``."""

    def fail(msg: str, pos: int | None = None) -> DataError:
        where = "" if pos is None else f" at column {pos + 1}"
        return DataError(f"invalid JSON ({msg}{where})", path=path, line=n)

    s = line
    i = _skip_ws(s, 0)
    if s[i : i + 1] != "{":
        try:
            value, _ = _SCAN(s, i)
        except (StopIteration, ValueError):
            raise fail("expecting a JSON object", i) from None
        raise DataError(f"expected a JSON object per line, got {_json_kind(s[i])}", path=path, line=n)
    span: tuple[int, int, str] | None = None
    keys: list[str] = []
    i = _skip_ws(s, i + 1)
    if s[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if s[i : i + 1] != '"':
                raise fail("expecting a property name in double quotes", i)
            try:
                key, i = scanstring(s, i + 1, True)
            except ValueError as exc:
                raise fail(getattr(exc, "msg", str(exc)), getattr(exc, "pos", None)) from None
            i = _skip_ws(s, i)
            if s[i : i + 1] != ":":
                raise fail("expecting ':' after a property name", i)
            i = _skip_ws(s, i + 1)
            start = i
            try:
                value, i = _SCAN(s, i)
            except StopIteration:
                raise fail("expecting a value", start) from None
            except json.JSONDecodeError as exc:
                raise fail(exc.msg, exc.pos) from None
            except ValueError as exc:  # NaN / Infinity, or an over-deep nesting
                raise DataError(f"invalid JSON: {exc}", path=path, line=n) from None
            except RecursionError:
                raise fail("nested too deeply", start) from None
            if key == column:
                if span is not None:
                    raise DataError(f"field {column!r} appears twice in the object; keep one", path=path, line=n)
                if s[start] != '"':
                    raise DataError(f"field {column!r} is {_json_kind(s[start])}, expected a string", path=path, line=n)
                span = (start, i, value)
            else:
                keys.append(key)
            i = _skip_ws(s, i)
            c = s[i : i + 1]
            if c == ",":
                i = _skip_ws(s, i + 1)
                continue
            if c == "}":
                i += 1
                break
            raise fail("expecting ',' or '}'", i)
    end = _skip_ws(s, i)
    if end != len(s):
        raise fail("extra data after the object", end)
    if span is None:
        raise DataError(f"field {column!r} is missing (fields: {', '.join(map(repr, keys)) or 'none'}); choose one with --column", path=path, line=n)
    others.update(keys)
    start, stop, value = span
    return s[:start], value, s[stop:]


def _json_string_body(text: str) -> str:
    """``text`` as the inside of a JSON string (non-ASCII kept; lone surrogates escaped, since
    they cannot be written as UTF-8)."""
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    if _SURROGATE.search(body):
        body = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", body)
    return body
