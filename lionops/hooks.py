"""Tool hook points (ADR-0022 D4).

``act()`` emits ``TOOL_PRE`` before invoking a tool, then ``TOOL_POST`` on
success or ``TOOL_ERROR`` on an exception. Payloads carry ``function``,
``arguments`` (the validated arguments the tool receives), ``index``,
``call_id`` and ``branch``; ``TOOL_POST`` adds ``output``, ``duration_s`` and
``decision``, ``TOOL_ERROR`` adds ``error``, ``type`` and ``decision``, both
copied from the request's ``ActionRecord``, which is made before the hook
runs. Payload summaries of arguments and results are cut at 200 characters
by :mod:`lionops.text` (observability only; the invocation and result are
never truncated). A
handler that raises an ``Exception`` is logged and never changes the
operation's outcome; one that runs past ``Branch.observer_timeout`` is
abandoned and logged; a ``BaseException`` (a stray cancellation) propagates.
"""

from __future__ import annotations

import enum

# Truncation lives in lionops.text; these names stay importable from here.
from .text import SUMMARY_LIMIT, VERBOSE_ARGS_LIMIT, safe_str, summarize

__all__ = ["HookPoint", "SUMMARY_LIMIT", "VERBOSE_ARGS_LIMIT", "summarize", "safe_str"]


class HookPoint(str, enum.Enum):  # noqa: UP042 - str() keeps the Enum form, as a StrEnum would not
    """Where a tool hook fires."""

    TOOL_PRE = "tool_pre"
    TOOL_POST = "tool_post"
    TOOL_ERROR = "tool_error"
