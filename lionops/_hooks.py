"""Tool hook points (ADR-0022 D4).

``act()`` emits ``TOOL_PRE`` before invoking a tool, then ``TOOL_POST`` on
success or ``TOOL_ERROR`` on an exception. Payloads carry ``function``,
``arguments`` (the validated arguments the tool receives), ``index``,
``call_id`` and ``branch``; ``TOOL_POST`` adds ``output``, ``duration_s`` and
``decision``, ``TOOL_ERROR`` adds ``error``, ``type`` and ``decision``, both
copied from the request's ``ActionRecord``, which is made before the hook
runs. Payload summaries of arguments and results are cut at 200 characters
by :mod:`lionops._text` (observability only; the invocation and result are
never truncated). A
handler that raises an ``Exception`` is logged and never changes the
operation's outcome; one that runs past ``Branch.observer_timeout`` is
abandoned and logged; a ``BaseException`` (a stray cancellation) propagates.
"""

from __future__ import annotations

import enum
import inspect
from typing import Any

from .errors import ConfigurationError, GateSignatureError, did_you_mean

__all__ = ["HookPoint", "check_one_argument"]


class HookPoint(str, enum.Enum):  # noqa: UP042 - str() keeps the Enum form, as a StrEnum would not
    """Where a tool hook fires."""

    TOOL_PRE = "tool_pre"
    TOOL_POST = "tool_post"
    TOOL_ERROR = "tool_error"

    @classmethod
    def _missing_(cls, value: Any) -> None:
        """An unknown hook point (``branch.on("tool_pr", ...)``) is a
        :class:`~lionops.errors.ConfigurationError` naming the closest points."""
        known = [p.value for p in cls]
        raise ConfigurationError(f"unknown hook point {value!r}{did_you_mean(value, known)}; known: {known}")


def check_one_argument(fn: Any, what: str, example: str) -> None:
    """Refuse ``fn`` (a gate check, hook handler or ``writeback``) with a
    :class:`~lionops.errors.GateSignatureError` unless it can be called with one
    positional argument, as lionops calls it. A callable whose signature
    cannot be read (some built-ins) is taken as it is; one that is not callable
    at all is refused."""
    if not callable(fn):
        raise GateSignatureError(f"{what} must be callable, got {type(fn).__name__}; lionops calls it as {example}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None)
    except TypeError as exc:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise GateSignatureError(
            f"{what} {name}{signature} cannot be called with one argument ({exc}); "
            f"lionops calls it as {example}"
        ) from None
