"""CLI run records: what a turn produced (the CLI errors are defined in :mod:`lionops.errors`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..._secrets import TEXT_MARK
from ...errors import CLIError, CLIProcessError, CLIResultError, CLIStreamError, CLITimeoutError  # noqa: F401 - re-exported: the CLI errors are defined in lionops.errors
from ...usage import Usage

#: What a secret is replaced with in CLI error text.
REDACTED = TEXT_MARK

#: Stop reasons that mean the answer was cut off at a token limit.
CUT_OFF_STOP_REASONS = frozenset({"max_tokens", "max_output_tokens", "model_context_window_exceeded"})


# ---------------------------------------------------------------- errors


# ---------------------------------------------------------------- run record


@dataclass(slots=True)
class CLIToolEvent:
    """A tool call the CLI made under its own permissions (provenance only).

    ``kind`` is ``"request"`` or ``"response"``; ``call_id`` pairs them;
    ``arguments`` is the tool input (requests); ``output`` the tool result
    (responses); ``is_error`` whether the CLI reported the result as an error.
    """

    kind: str
    call_id: str | None
    function: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    is_error: bool = False
    parent: str | None = None


@dataclass(slots=True)
class CLIRun:
    """What one CLI turn produced.

    Attributes:
        provider: the endpoint's provider name.
        pid: the child's process id (also its process-group id).
        returncode: exit status (negative: killed by that signal).
        text: the answer: the assistant text of the last turn (after the
            last CLI tool call), or the result event's text when no
            assistant text was seen; ``None`` when there is none.
        session_id: the CLI session/thread id.
        model: the model the CLI reported.
        usage: token counts ``{"input_tokens", "output_tokens",
            "cache_read_input_tokens", "cache_creation_input_tokens",
            "total_tokens"}`` (integers; only those reported).
        cost_usd: the CLI-reported cost in US dollars, when reported.
        duration_ms: the CLI-reported duration in milliseconds.
        num_turns: the CLI-reported number of agent turns.
        subtype: the final result subtype (``"success"``, ...).
        stop_reason: why the model stopped (``"end_turn"``, ``"max_tokens"``,
            ...), from the result event or the last assistant message.
        is_error: the final result reports failure.
        error_message: the failure text of the result, when failed.
        finished: a final result event was seen.
        tool_events: the CLI's own tool calls, in stream order.
        counts: ``lines`` (non-blank stdout lines), ``events``, ``noise``
            (non-JSON or non-object lines), ``blank``, ``recovered`` (lines
            rebuilt after a split), ``rate_limit_events``.
        corrupt: ``(line, preview)`` of the first unrecoverable line.
        oversized: ``(line, preview)`` of the first line longer than
            ``max_line_bytes`` (not decoded).
        stderr_tail: the last bytes of stderr, decoded, secrets redacted.
        warnings: non-fatal messages the CLI reported (reconnect notices,
            model metadata warnings, ...), each once, in stream order.
        stop_detail: the CLI's own words about a cut (``stop_reason``).
        tokens: the token usage as one :class:`~lionops.usage.Usage`, the same
            on every endpoint (input includes cache reads and writes), the
            CLI's own usage object kept as ``tokens.raw``.
    """

    provider: str
    pid: int | None = None
    returncode: int | None = None
    text: str | None = None
    session_id: str | None = None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    duration_ms: float | None = None
    num_turns: int | None = None
    subtype: str | None = None
    stop_reason: str | None = None
    is_error: bool = False
    error_message: str | None = None
    finished: bool = False
    tool_events: list[CLIToolEvent] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    corrupt: tuple[int, str] | None = None
    oversized: tuple[int, str] | None = None
    stderr_tail: str = ""
    warnings: list[str] = field(default_factory=list)
    stop_detail: str | None = None
    tokens: Usage = field(default_factory=Usage)

    @property
    def cut(self) -> bool:
        """The answer was cut off at a token limit (``stop_reason`` in :data:`CUT_OFF_STOP_REASONS`)."""
        return self.stop_reason in CUT_OFF_STOP_REASONS

    @property
    def ended_after_result(self) -> bool:
        """The CLI was stopped by a signal after its final result (it lingered)."""
        return self.finished and self.returncode is not None and self.returncode < 0

    def facts(self) -> dict[str, Any]:
        """JSON-compatible facts for message metadata and the trace (no secrets)."""
        out: dict[str, Any] = {
            "provider": self.provider, "session_id": self.session_id, "model": self.model,
            "exit_code": self.returncode, "subtype": self.subtype, "is_error": self.is_error,
            "num_turns": self.num_turns, "duration_ms": self.duration_ms,
            "cli_tool_calls": sum(1 for e in self.tool_events if e.kind == "request"),
            "stream": dict(self.counts),
            "stop_reason": self.stop_reason if self.cut else None,
            "warnings": list(self.warnings) or None,
            "ended_after_result": True if self.ended_after_result else None,
        }
        return {k: v for k, v in out.items() if v is not None}
