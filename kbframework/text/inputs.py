"""Checks every edge applies to text from outside (HTTP, CLI, files): no NUL characters and
no lone surrogates (PostgreSQL cannot store either, and both are a sign of a crafted or
broken input), JSON nested at most ``MAX_JSON_DEPTH`` levels (deeper nesting exhausts the
parser's recursion), and strings that fit the column they are meant for.

Pure functions; the web layer (``kbframework.web.inputs``) and the CLI call them.
"""
from __future__ import annotations

import re
from typing import Any

from kbframework.errors import ValidationFailed

MAX_JSON_DEPTH = 64
_BAD = re.compile("[\x00\ud800-\udfff]")


class BadInput(ValidationFailed):
    """Input that no edge accepts; ``str(exc)`` is a message for a person. Each edge
    words it its own way (the HTTP layer answers ``invalid_characters``, the CLI a usage
    error), but one that slips through is still a clear 400."""

    status = 400
    code = "invalid_input"

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.where = where


def bad_char(text: str) -> str | None:
    """What is wrong with ``text`` (None: nothing)."""
    m = _BAD.search(text)
    if m is None:
        return None
    return "a NUL character" if m.group(0) == "\x00" else "a lone surrogate (not valid Unicode)"


def check_text(text: str, where: str) -> None:
    why = bad_char(text)
    if why:
        raise BadInput(f"{where} contains {why}; remove it and send the text again.", where)


def check_value(value: Any, where: str = "the request") -> None:
    """Every string (and key) anywhere inside a decoded JSON value."""
    stack = [(value, where)]
    while stack:
        v, w = stack.pop()
        if isinstance(v, str):
            check_text(v, w)
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str):
                    check_text(k, f"a field name in {w}")
                stack.append((x, f"'{k}'" if w == "the request" else f"{w}.{k}"))
        elif isinstance(v, list):
            stack.extend((x, w) for x in v)


def json_depth_ok(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON text ``raw`` nests arrays/objects at most ``limit`` deep (brackets
    inside strings do not count). Cheap when there are few brackets at all."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    depth, in_str, esc = 0, False, False
    for ch in raw.decode("utf-8", "replace"):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def fits(value: Any, name: str, max_chars: int, *, required: bool = False) -> str | None:
    """A string for a column of ``max_chars`` (None when absent and not required)."""
    if value is None or value == "":
        if required:
            raise BadInput(f"'{name}' is required.", name)
        return None
    if not isinstance(value, str):
        raise BadInput(f"'{name}' must be text.", name)
    check_text(value, f"'{name}'")
    if len(value) > max_chars:
        raise BadInput(f"'{name}' is too long (at most {max_chars} characters).", name)
    return value
