"""One bounded loader for every piece of foreign JSON lionops reads (error
and answer bodies, stream events, tool-call arguments, CLI events,
cassettes, traces, payloads): depth and size are checked before decoding,
so hostile nesting is a typed :class:`~lionops.errors.JSONLimitError` (a
``ValueError``), never a ``RecursionError`` here or in whatever walks the
value later (validation, redaction, copies)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from .errors import JSONLimitError

__all__ = ["MAX_JSON_DEPTH", "loads", "check_text", "check_value"]

#: Deepest nesting of objects and lists accepted in foreign JSON.
MAX_JSON_DEPTH = 256

#: One decoder of each kind (``json.loads`` given ``strict=`` builds a new one per call).
_STRICT = json.JSONDecoder()
_LAX = json.JSONDecoder(strict=False)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _too_deep(found: int, maximum: int, what: str) -> JSONLimitError:
    return JSONLimitError(f"{what} is nested deeper than {maximum} levels", limit="depth", found=found,
                          maximum=maximum)


def check_text(text: str | bytes | bytearray, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int | None = None,
               what: str = "JSON") -> str | bytes | bytearray:
    """``text`` unchanged when its JSON can nest at most ``max_depth`` levels
    and it has at most ``max_chars`` characters; else :class:`JSONLimitError`.
    Brackets inside strings are not counted; the scan never recurses."""
    if max_chars is not None and len(text) > max_chars:
        raise JSONLimitError(f"{what} has {len(text)} characters (at most {max_chars})", limit="size",
                             found=len(text), maximum=max_chars)
    if len(text) <= max_depth:  # each level takes a character: cannot nest deeper (most stream events)
        return text
    if isinstance(text, (bytes, bytearray)):
        opens = text.count(b"[") + text.count(b"{")
    else:
        opens = text.count("[") + text.count("{")
    if opens <= max_depth:  # cannot nest deeper: the usual case costs two counts
        return text
    plain = text.decode("utf-8", errors="replace") if isinstance(text, (bytes, bytearray)) else text
    depth = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", plain)):
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                raise _too_deep(depth, max_depth, what)
        elif depth:
            depth -= 1
    return text


def loads(text: str | bytes | bytearray, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int | None = None,
          strict: bool = True, what: str = "JSON") -> Any:
    """``json.loads(text)`` within the bounds (see :func:`check_text`).

    Raises:
        JSONLimitError: past a bound (a ``ValueError``).
        ValueError: not JSON (``json.JSONDecodeError``, ``UnicodeDecodeError``).
    """
    check_text(text, max_depth=max_depth, max_chars=max_chars, what=what)
    try:
        if type(text) is str and not text.startswith("\ufeff"):  # what json.loads refuses is left to it
            return (_STRICT if strict else _LAX).decode(text)
        return json.loads(text, strict=strict)
    except RecursionError:  # a bound above the interpreter's recursion limit
        raise _too_deep(max_depth + 1, max_depth, what) from None


def check_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH, what: str = "JSON") -> Any:
    """``value`` (already decoded, e.g. by an HTTP library) unchanged when its
    dicts and lists nest at most ``max_depth`` levels; iterative."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if level > max_depth:
            raise _too_deep(level, max_depth, what)
        stack.extend((child, level + 1) for child in children)
    return value
