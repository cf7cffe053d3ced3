"""Tool hook points (ADR-0022 D4).

``act()`` emits ``TOOL_PRE`` before invoking a tool, then ``TOOL_POST`` on
success or ``TOOL_ERROR`` on an exception. Payloads carry ``function``,
``arguments`` (the validated arguments the tool receives), ``index``,
``call_id`` and ``branch``; ``TOOL_POST`` adds ``output``, ``duration_s`` and
``decision``, ``TOOL_ERROR`` adds ``error``, ``type`` and ``decision``, both
copied from the request's ``ActionRecord``, which is made before the hook
runs. Payload summaries of arguments and results are cut at 200 characters
(observability only; the invocation and result are never truncated). A
handler that raises an ``Exception`` is logged and never changes the
operation's outcome; one that runs past ``Branch.observer_timeout`` is
abandoned and logged; a ``BaseException`` (a stray cancellation) propagates.
"""

from __future__ import annotations

import enum

__all__ = ["HookPoint", "SUMMARY_LIMIT", "VERBOSE_ARGS_LIMIT", "summarize", "safe_str"]

#: ADR-0022 D4: hook payload summaries are cut at 200 characters.
SUMMARY_LIMIT = 200
#: ADR-0022 D4: verbose debug logging cuts its argument preview at 50 characters.
VERBOSE_ARGS_LIMIT = 50


class HookPoint(str, enum.Enum):
    """Where a tool hook fires."""

    TOOL_PRE = "tool_pre"
    TOOL_POST = "tool_post"
    TOOL_ERROR = "tool_error"


def safe_str(value: object) -> str:
    """``str(value)``, or ``<unprintable TypeName>`` when its ``__str__``
    raises: error payloads and observer logs never fail on a hostile value."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001
        return f"<unprintable {type(value).__name__}>"


def summarize(value: object, limit: int = SUMMARY_LIMIT, *, use_repr: bool = False) -> str:
    """``str(value)`` (``repr`` with ``use_repr``) cut to ``limit`` characters,
    with ``...`` when cut. The one truncation helper of lionops: hook payloads,
    error previews and divergence reports all use it."""
    if use_repr:
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001
            text = f"<unprintable {type(value).__name__}>"
    else:
        text = safe_str(value)
    return text if len(text) <= limit else text[:limit] + "..."
