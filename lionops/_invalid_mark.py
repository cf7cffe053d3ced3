"""The invalid mark of an action request, read one way everywhere (ADR-0022 D4).

A request may carry a mark saying it must not run: the parse sets one on
requests recovered from repaired JSON, a Middle on a native tool call whose
arguments could not be decoded, a caller on its own requests. The rule fails
closed: only a missing, ``None`` or ``False`` mark leaves a request valid.
"""

from __future__ import annotations

from typing import Any

__all__ = ["invalid_reason"]


def invalid_reason(mark: Any) -> str | None:
    """The reason a request is marked invalid, or ``None`` when it is not.

    Any mark but ``None`` or ``False`` (``True``, a number, an empty or blank
    string, an object) keeps the request from running, with a reason in
    words; a non-blank string is the reason itself.
    """
    if mark is None or mark is False:
        return None
    if isinstance(mark, str) and mark.strip():
        return mark
    return f"request marked invalid ({type(mark).__name__} {repr(mark)[:80]})"
