"""CLI agent endpoints: one turn through a subprocess that streams JSON lines.

``iModel(provider="claude_code", cli_command=[...], model=..., timeout=...)``
builds a :class:`ClaudeCodeEndpoint`; ``provider="codex"`` a
:class:`CodexEndpoint`. Both are CLI-backed (``is_cli`` is true), so
``prepare_operate_kw`` selects ``RunParam`` and the coordinator selects
``run_and_collect`` (ADR-0022 D1/D3).

One run (:meth:`CLIEndpoint.run`):

1. starts ``cli_command`` plus the provider's arguments with
   ``anyio.open_process`` in a new session (so its whole process group can be
   killed), writes the prompt to its stdin and closes it;
2. reads stdout incrementally, splits it into lines (a line may arrive in
   several reads), skips blank lines and non-JSON noise, repairs a JSON line
   split by an injected event (field report C16), hands each raw chunk to an
   optional sink (stream persistence) and each event to the provider's
   collector;
3. keeps the last ``stderr_tail`` bytes of stderr;
4. returns a :class:`CLIRun` or raises a :class:`CLIError` subclass carrying
   the stderr tail (secrets from ``env`` redacted).

Whatever happens (success, error, timeout, cancellation), the process group
is terminated (SIGTERM, then SIGKILL after ``kill_grace`` seconds) and the
child is reaped before :meth:`CLIEndpoint.run` returns or raises.

Steps 1 and 3 (the process) are :meth:`CLIEndpoint.spawn`. When
:data:`CLI_TRANSPORT` is set, :meth:`CLIEndpoint.run` calls it instead:
record and replay (:mod:`lionops.replay`) capture a run there, or serve a
recorded one with no subprocess; the decoding, collecting, sink and error
checks of step 2 and 4 run the same either way.

The CLI's own tool calls (``tool_use``/``tool_result``, Codex command and
MCP items) are reported as :class:`CLIToolEvent` for provenance; nothing here
executes a tool.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
import anyio.abc
import anyio.to_thread

from ..errors import ConfigurationError, LionopsError
from ..hooks import summarize

__all__ = [
    "CLIEndpoint",
    "ClaudeCodeEndpoint",
    "CodexEndpoint",
    "GeminiEndpoint",
    "CLIRun",
    "CLIToolEvent",
    "CLIError",
    "CLIProcessError",
    "CLITimeoutError",
    "CLIStreamError",
    "CLIResultError",
    "LineDecoder",
    "ClaudeStreamCollector",
    "CodexStreamCollector",
    "GeminiStreamCollector",
    "CUT_OFF_STOP_REASONS",
    "argv_secrets",
    "CLIStdout",
    "CLIExit",
    "CLITransport",
    "CLI_TRANSPORT",
]

#: Environment variable names whose values are redacted from errors and logs.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)
#: Redaction marker.
REDACTED = "[redacted]"

#: Stop reasons that mean the answer was cut off at a token limit (C12).
CUT_OFF_STOP_REASONS = frozenset({"max_tokens", "max_output_tokens", "model_context_window_exceeded"})


# ---------------------------------------------------------------- errors


class CLIError(LionopsError, RuntimeError):
    """A CLI turn failed. The message says why and ends with the stderr tail.

    Attributes:
        provider: ``"claude_code"``, ``"codex"``, ...
        returncode: the exit status (negative: killed by that signal), or
            ``None`` when the process had not exited on its own.
        stderr_tail: the last bytes of stderr, decoded, secrets redacted.
        stream_path: the persisted JSONL stream of the run, when persisted
            (set by ``run_and_collect``).
        run: the partial :class:`CLIRun` (events seen before the failure).
    """

    def __init__(self, message: str, *, provider: str | None = None, returncode: int | None = None,
                 stderr_tail: str = "", run: CLIRun | None = None) -> None:
        self.provider = provider
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.stream_path: str | None = None
        self.run = run
        self.summary = message
        super().__init__(message)

    def __str__(self) -> str:
        text = self.summary
        if self.stream_path:
            text += f" (stream: {self.stream_path})"
        tail = self.stderr_tail.strip()
        text += f"; stderr tail: {tail!r}" if tail else "; stderr was empty"
        return text


class CLIProcessError(CLIError):
    """The CLI could not start, exited non-zero, was killed by a signal, or
    exited without a final result event (a crash mid-stream)."""


class CLITimeoutError(CLIError, TimeoutError):
    """The CLI ran past ``timeout`` seconds; its process group was killed."""


class CLIStreamError(CLIError):
    """The stdout stream is corrupt: a JSON line could not be decoded nor
    repaired (field report C16). ``line`` is its 1-based stdout line number,
    ``preview`` its first 120 characters."""

    def __init__(self, message: str, *, line: int | None = None, preview: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.line = line
        self.preview = preview


class CLIResultError(CLIError):
    """The CLI's final result reports failure (``is_error: true``, Codex
    ``turn.failed``), whatever the exit code (field report C18).

    ``subtype`` is the result subtype (``"error_max_turns"``,
    ``"error_during_execution"``, ``"turn.failed"``, ...); the message is
    never empty.
    """

    def __init__(self, message: str, *, subtype: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.subtype = subtype


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


# ---------------------------------------------------------------- line decoding


def _preview(text: str, limit: int = 120) -> str:
    return summarize(text, limit)


class LineDecoder:
    """Splits a byte stream into JSON events, line by line.

    ``feed(chunk)`` returns the events completed by ``chunk``; ``close()``
    those left at the end. A line may arrive in any number of reads. Blank
    lines are skipped; a line that does not start with ``{`` or that decodes
    to a non-object is noise (counted, ignored).

    A line that starts with ``{`` but is not valid JSON is repaired when it
    is an event cut by another complete event written into it (field report
    C16: ``<head of A>{"type":"rate_limit_event",...}\\n<rest of A>\\n``):
    the embedded event is emitted, the head waits, and is joined with the
    following line(s) (at most :attr:`max_joins`). A line that cannot be
    repaired is recorded in :attr:`corrupt` as ``(line number, preview)``;
    decoding goes on so the rest of the stream is still read and persisted,
    and the caller turns the record into :class:`CLIStreamError`. Nothing is
    dropped silently.

    The work per line is bounded: a line longer than ``max_line_bytes`` is
    not kept (its bytes are skipped up to the next newline, so memory stays
    bounded even when no newline ever comes) and is recorded in
    :attr:`oversized` as ``(line number, preview)``; a broken line is
    searched for an embedded event from at most ``max_repair_scans`` of its
    ``{"type":`` markers (the last ones), so a line made of many markers
    costs at most that many parses. JSON nested too deeply for the decoder
    is treated as undecodable, never as a crash.
    """

    max_joins: ClassVar[int] = 3
    _EMBEDDED = re.compile(r'\{\s*"type"\s*:')

    def __init__(self, *, max_line_bytes: int = 64 * 1024 * 1024, max_repair_scans: int = 16) -> None:
        if max_line_bytes < 1 or max_repair_scans < 0:
            raise ValueError("max_line_bytes must be positive and max_repair_scans not negative")
        self.max_line_bytes = max_line_bytes
        self.max_repair_scans = max_repair_scans
        self._buf = bytearray()
        self._line = 0
        self._pending: str | None = None
        self._pending_line = 0
        self._joins = 0
        self._skipping = False
        self.corrupt: tuple[int, str] | None = None
        self.oversized: tuple[int, str] | None = None
        self.counts: dict[str, int] = {"lines": 0, "events": 0, "noise": 0, "blank": 0, "recovered": 0}

    @property
    def buffered(self) -> int:
        """Bytes held for a line not yet complete (the next ``feed`` may decode them)."""
        return len(self._buf) + (len(self._pending) if self._pending is not None else 0)

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Events completed by ``chunk`` (bytes of stdout, any split)."""
        out: list[dict[str, Any]] = []
        if self._skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return out
            self._skipping = False
            chunk = chunk[nl + 1:]
        # Only the new bytes are searched for a newline, so a long line that
        # arrives in many small reads costs linear time.
        start = len(self._buf)
        self._buf.extend(chunk)
        begin = 0
        while True:
            nl = self._buf.find(b"\n", max(begin, start))
            if nl < 0:
                break
            raw = bytes(self._buf[begin:nl])
            begin = nl + 1
            self._line += 1
            if len(raw) > self.max_line_bytes:
                self._too_long(raw)
            else:
                self._take(raw.decode("utf-8", errors="replace"), out)
        if begin:
            del self._buf[:begin]
        if len(self._buf) > self.max_line_bytes:
            # A line that outgrew the bound before its newline arrived.
            self._line += 1
            self._too_long(bytes(self._buf[:240]))
            self._buf.clear()
            self._skipping = True
        return out

    def close(self) -> list[dict[str, Any]]:
        """Events of a final line without a newline; records an unfinished repair as corrupt."""
        out: list[dict[str, Any]] = []
        if self._buf:
            raw = bytes(self._buf)
            self._buf.clear()
            self._line += 1
            self._take(raw.decode("utf-8", errors="replace"), out)
        if self._pending is not None:
            self._mark_corrupt(self._pending_line, self._pending)
        return out

    # -- internals

    def _too_long(self, head: bytes) -> None:
        self.counts["oversized"] = self.counts.get("oversized", 0) + 1
        if self.oversized is None:
            self.oversized = (self._line, _preview(head[:240].decode("utf-8", errors="replace")))

    def _emit(self, obj: Any, out: list[dict[str, Any]]) -> None:
        if isinstance(obj, dict):
            self.counts["events"] += 1
            out.append(obj)
        else:
            self.counts["noise"] += 1

    def _mark_corrupt(self, line: int, text: str) -> None:
        if self.corrupt is None:
            self.corrupt = (line, _preview(text))
        self._pending = None
        self._joins = 0

    def _split_embedded(self, text: str) -> tuple[str, dict[str, Any]] | None:
        """``(head, event)`` when ``text`` ends with a complete event object
        that starts after position 0, else ``None`` (at most
        ``max_repair_scans`` markers, the last ones, are tried)."""
        decoder = json.JSONDecoder()
        starts = [m.start() for m in self._EMBEDDED.finditer(text) if m.start() > 0]
        for start in reversed(starts[len(starts) - self.max_repair_scans:] if self.max_repair_scans else []):
            try:
                obj, end = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):
                continue
            if end == len(text) and isinstance(obj, dict):
                return text[:start], obj
        return None

    @staticmethod
    def _loads(text: str) -> tuple[bool, Any]:
        try:
            return True, json.loads(text)
        except (ValueError, RecursionError):
            return False, None

    def _take(self, line: str, out: list[dict[str, Any]]) -> None:
        text = line.strip()
        if not text:
            self.counts["blank"] += 1
            return
        self.counts["lines"] += 1
        if self._pending is not None:
            self._continue(text, out)
            return
        if not text.startswith("{"):
            self.counts["noise"] += 1
            return
        ok, obj = self._loads(text)
        if ok:
            self._emit(obj, out)
            return
        self._hold(text, self._line, out)

    def _hold(self, text: str, line: int, out: list[dict[str, Any]]) -> None:
        """Keep the head of a broken line, emitting an event embedded at its end."""
        split = self._split_embedded(text)
        if split is not None:
            head, embedded = split
            self._emit(embedded, out)
            text = head
        self._pending = text
        self._pending_line = line

    def _continue(self, text: str, out: list[dict[str, Any]]) -> None:
        assert self._pending is not None
        joined = self._pending + text
        ok, obj = self._loads(joined)
        if ok:
            self.counts["recovered"] += 1
            self._pending = None
            self._joins = 0
            self._emit(obj, out)
            return
        self._joins += 1
        alone_ok, alone = self._loads(text) if text.startswith("{") else (False, None)
        if alone_ok or self._joins >= self.max_joins:
            # The held head is not continued by this line: it is corrupt.
            self._mark_corrupt(self._pending_line, self._pending)
            if alone_ok:
                self._emit(alone, out)
            elif text.startswith("{"):
                self._hold(text, self._line, out)
            return
        self._hold(joined, self._pending_line, out)


# ---------------------------------------------------------------- collectors


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any, mapping: Mapping[str, str], *, cached_in_input: str | None = None,
           keep_extra: bool = False) -> dict[str, int]:
    """Token counts renamed by ``mapping``; ``total_tokens`` is input plus output.

    ``input_tokens`` never includes cache reads (they are
    ``cache_read_input_tokens``), so adding the two never counts a token
    twice: when the CLI's input count includes its cached count
    (``cached_in_input`` names that field), the cached part is taken out.
    With ``keep_extra``, other integer fields are kept under their own names.
    """
    out: dict[str, int] = {}
    if not isinstance(raw, Mapping):
        return out
    for src, dst in mapping.items():
        value = _int(raw.get(src))
        if value is not None:
            out[dst] = value
    if cached_in_input is not None and "input_tokens" in out:
        cached = _int(raw.get(cached_in_input)) or 0
        out["input_tokens"] = max(out["input_tokens"] - cached, 0)
    if keep_extra:
        for key, value in raw.items():
            if isinstance(key, str) and key not in mapping and _int(value) is not None:
                out.setdefault(key, value)
    if "input_tokens" in out or "output_tokens" in out:
        out["total_tokens"] = out.get("input_tokens", 0) + out.get("output_tokens", 0)
    return out


def _distinct(messages: Sequence[str], without: str | None = None) -> list[str]:
    """``messages`` without repeats (first occurrence kept) and without ``without``."""
    seen: list[str] = []
    for message in messages:
        if message and message != without and message not in seen:
            seen.append(message)
    return seen


class _Collector:
    """Folds a provider's events into a :class:`CLIRun`; ``on_tool`` sees CLI tool calls.

    Answer text is kept as segments ``(message key, text)`` since the last
    CLI tool request; the answer is the exact concatenation of the segments
    of the last message that has text (text the CLI did not print is never
    inserted).
    """

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        self.run = run
        self.on_tool = on_tool
        self._segments: list[tuple[Any, str]] = []
        self._result_text: str | None = None
        self._anonymous = 0

    def _key(self, key: Any) -> Any:
        if key is None:
            self._anonymous += 1
            return ("anonymous", self._anonymous)
        return key

    def _text(self, key: Any, text: str) -> None:
        self._segments.append((key, text))

    def _tool(self, event: CLIToolEvent) -> None:
        self.run.tool_events.append(event)
        if event.kind == "request":
            # Text before a CLI tool call is preamble, not the answer.
            self._segments.clear()
        if self.on_tool is not None:
            self.on_tool(event)

    def _answer(self) -> str:
        with_text = [key for key, text in self._segments if text]
        if not with_text:
            return ""
        last = with_text[-1]
        return "".join(text for key, text in self._segments if key == last)

    def finish(self) -> None:
        text = self._answer()
        if not text.strip() and self._result_text:
            text = self._result_text
        self.run.text = text if text.strip() else None

    def handle(self, event: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


#: Claude Code's words when the model kept hitting its output limit.
_CLAUDE_OUTPUT_LIMIT = re.compile(r"response exceeded the \d+ output token maximum")


class ClaudeStreamCollector(_Collector):
    """Claude Code ``--output-format stream-json`` events.

    ``system``/``init`` gives the session and model; ``assistant`` messages
    give text blocks (top level only, not sub-agents) and ``tool_use``
    blocks; ``user`` messages give ``tool_result`` blocks; ``result`` ends
    the turn with usage, cost, and ``is_error``/``subtype`` (a failed result
    saying the response exceeded the output token maximum is a cut,
    ``stop_reason`` ``"max_tokens"``); ``rate_limit_event``, ``stream_event`` and unknown types are ignored.
    Several ``assistant`` events sharing one ``message.id`` are one message:
    its text is the exact concatenation of their text blocks.
    """

    _USAGE = {
        "input_tokens": "input_tokens", "output_tokens": "output_tokens",
        "cache_read_input_tokens": "cache_read_input_tokens",
        "cache_creation_input_tokens": "cache_creation_input_tokens",
    }

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        super().__init__(run, on_tool)
        self._names: dict[str, tuple[str | None, dict[str, Any]]] = {}

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self.run.session_id = event.get("session_id") or self.run.session_id
            self.run.model = event.get("model") or self.run.model
        elif kind == "assistant":
            self._assistant(event)
        elif kind == "user":
            self._user(event)
        elif kind == "result":
            self._result(event)
        elif kind == "rate_limit_event":
            self.run.counts["rate_limit_events"] = self.run.counts.get("rate_limit_events", 0) + 1

    def _blocks(self, event: dict[str, Any]) -> list[Any]:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return content if isinstance(content, list) else []

    def _assistant(self, event: dict[str, Any]) -> None:
        parent = event.get("parent_tool_use_id")
        message = event.get("message")
        if isinstance(message, dict) and message.get("model") == "<synthetic>":
            return  # the CLI's own notice (an API error's text), not the model's
        key = self._key(message.get("id") if isinstance(message, dict) else None)
        if parent is None and isinstance(message, dict):
            # The stop reason of the latest top-level message (null while the
            # CLI streams); the result event, when it carries one, has the last word.
            reason = message.get("stop_reason")
            self.run.stop_reason = reason if isinstance(reason, str) else None
        for block in self._blocks(event):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and parent is None and isinstance(block.get("text"), str):
                self._text(key, block["text"])
            elif block.get("type") in ("tool_use", "server_tool_use"):
                args = block.get("input") if isinstance(block.get("input"), dict) else {}
                call_id = block.get("id")
                self._names[str(call_id)] = (block.get("name"), args)
                self._tool(CLIToolEvent("request", call_id, block.get("name"), args, parent=parent))

    def _user(self, event: dict[str, Any]) -> None:
        for block in self._blocks(event):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                name, args = self._names.get(str(call_id), (None, {}))
                self._tool(CLIToolEvent(
                    "response", call_id, name, args, output=block.get("content"),
                    is_error=bool(block.get("is_error")), parent=event.get("parent_tool_use_id"),
                ))

    def _result(self, event: dict[str, Any]) -> None:
        run = self.run
        run.finished = True
        run.subtype = event.get("subtype")
        run.is_error = bool(event.get("is_error")) or (
            isinstance(run.subtype, str) and run.subtype.startswith("error")
        )
        run.session_id = event.get("session_id") or run.session_id
        run.usage = _usage(event.get("usage"), self._USAGE)
        cost = event.get("total_cost_usd")
        run.cost_usd = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
        duration = event.get("duration_ms")
        run.duration_ms = duration if isinstance(duration, (int, float)) else None
        run.num_turns = _int(event.get("num_turns"))
        if isinstance(event.get("stop_reason"), str):
            run.stop_reason = event["stop_reason"]
        result = event.get("result")
        if run.is_error and isinstance(result, str) and _CLAUDE_OUTPUT_LIMIT.search(result):
            # The CLI asked the model to resume after each cut, and gave up: a cut, not an error.
            run.is_error = False
            run.stop_reason, run.stop_detail = "max_tokens", result.strip()
        elif run.is_error:
            run.error_message = _failure_message(run.subtype, result, event.get("errors"),
                                                 event.get("api_error_status"))
        elif isinstance(result, str):
            self._result_text = result


def _failure_message(subtype: Any, result: Any, errors: Any, status: Any = None) -> str:
    """A non-empty description of a failed result (C18); a reason is said once."""
    parts: list[str] = []
    if isinstance(result, str) and result.strip():
        parts.append(result.strip())
    if isinstance(errors, list):
        parts.extend(str(e) if not isinstance(e, dict) else str(e.get("message") or e) for e in errors if e)
    elif isinstance(errors, str) and errors.strip():
        parts.append(errors.strip())
    if status is not None:
        parts.append(f"API error status {status}")
    parts = _distinct(parts)
    if not parts:
        parts.append(f"the CLI reported {subtype or 'an error'} with no error message")
    return "; ".join(parts)


#: Codex's words for a response that ended at the output limit, and for a
#: context window that ran out (``turn.failed`` messages of ``codex exec``).
_CODEX_INCOMPLETE = re.compile(r"Incomplete response returned, reason: ([A-Za-z_]+)")
_CODEX_CONTEXT = re.compile(r"ran out of room in the model's context window|context_length_exceeded", re.IGNORECASE)


class CodexStreamCollector(_Collector):
    """Codex ``exec --json`` events.

    ``thread.started`` gives the thread id; ``item.completed`` with an
    ``agent_message`` gives text (the answer is the last one, or the last
    whose ``phase`` is ``final_answer`` when the CLI marks phases: the
    others are commentary); ``command_execution``, ``mcp_tool_call``,
    ``file_change`` and ``web_search`` items are CLI tool calls (a request
    and a response each); ``turn.completed`` ends the turn with usage;
    ``turn.failed`` ends it failed: its message is the one fatal reason, and
    the other ``error`` events and ``error`` items (reconnect notices, model
    metadata warnings) are kept as :attr:`CLIRun.warnings`. A ``turn.failed``
    that says the response was incomplete at ``max_output_tokens``, or that
    the context window ran out, is a cut (``stop_reason``
    ``"max_output_tokens"`` / ``"model_context_window_exceeded"``), not an
    error. Other events (``reasoning``, ``todo_list``, ``item.started``, ...)
    are ignored.
    """

    _USAGE = {
        "input_tokens": "input_tokens", "output_tokens": "output_tokens",
        "cached_input_tokens": "cache_read_input_tokens",
        "cache_write_input_tokens": "cache_creation_input_tokens",
    }
    _TOOL_ARGS: ClassVar[dict[str, tuple[str, ...]]] = {
        "command_execution": ("command", "cwd"),
        "file_change": ("changes",),
        "web_search": ("query",),
    }

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        super().__init__(run, on_tool)
        self._errors: list[str] = []
        self._final: set[Any] = set()

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        run = self.run
        if kind == "thread.started":
            run.session_id = event.get("thread_id") or run.session_id
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            self._item(event["item"])
        elif kind == "turn.completed":
            run.finished = True
            run.subtype = "success"
            run.usage = _usage(event.get("usage"), self._USAGE, cached_in_input="cached_input_tokens",
                               keep_extra=True)
            run.num_turns = (run.num_turns or 0) + 1
            run.warnings = _distinct(self._errors)
        elif kind == "turn.failed":
            self._failed(event)
        elif kind == "error":
            message = event.get("message")
            if isinstance(message, str) and message:
                self._errors.append(message)

    def _failed(self, event: dict[str, Any]) -> None:
        run = self.run
        run.finished = True
        run.subtype = "turn.failed"
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if not isinstance(message, str) or not message.strip():
            message = self._errors[-1] if self._errors else None
        fatal = message.strip() if isinstance(message, str) else None
        run.warnings = _distinct(self._errors, without=fatal)
        incomplete = _CODEX_INCOMPLETE.search(fatal or "")
        if incomplete is not None and incomplete.group(1) == "max_output_tokens":
            run.stop_reason, run.stop_detail = "max_output_tokens", fatal
        elif fatal is not None and _CODEX_CONTEXT.search(fatal):
            run.stop_reason, run.stop_detail = "model_context_window_exceeded", fatal
        else:
            run.is_error = True
            run.error_message = _failure_message("turn.failed", fatal, None)

    def _answer(self) -> str:
        final = [text for key, text in self._segments if key in self._final and text]
        return final[-1] if final else super()._answer()

    def _item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "agent_message" and isinstance(item.get("text"), str):
            key = self._key(item.get("id"))
            if item.get("phase") == "final_answer":
                self._final.add(key)
            self._text(key, item["text"])
            return
        if kind == "error" and isinstance(item.get("message"), str):
            self._errors.append(item["message"])
            return
        if kind == "mcp_tool_call":
            name = f"{item.get('server')}.{item.get('tool')}"
            args = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
            output = item.get("result") if item.get("error") is None else item.get("error")
        elif kind in self._TOOL_ARGS:
            name = kind
            args = {k: item[k] for k in self._TOOL_ARGS[kind] if k in item}
            output = {k: item[k] for k in ("aggregated_output", "exit_code", "status") if k in item}
        else:
            return
        failed = item.get("status") == "failed" or item.get("error") is not None or (
            isinstance(item.get("exit_code"), int) and item["exit_code"] != 0
        )
        call_id = item.get("id")
        self._tool(CLIToolEvent("request", call_id, name, args))
        self._tool(CLIToolEvent("response", call_id, name, args, output=output, is_error=failed))


class GeminiStreamCollector(_Collector):
    """Gemini CLI ``-o stream-json`` events.

    ``init`` gives the session and model; ``message`` with role
    ``assistant`` gives text (``delta: true`` pieces are concatenated as
    printed; role ``user`` is the CLI's echo of the prompt and ignored);
    ``tool_use`` / ``tool_result`` are CLI tool calls (paired by
    ``tool_id``); ``error`` events are kept (their messages become
    :attr:`CLIRun.warnings`, or the failure reason when the result has
    none); ``result`` ends the turn: ``status`` ``"error"`` is a failure
    whatever the exit code, and ``stats`` gives usage (``input`` is the
    uncached input, ``cached`` the cache reads) and the duration.

    The CLI reports no finish reason: a reply cut at the output limit ends
    as ``status: "success"`` with partial text. The endpoint therefore says
    ``reports_cuts = False``, and ``run_and_collect`` treats an answer that
    ends inside a JSON value as a cut (docs/cli.md).
    """

    _USAGE = {"input": "input_tokens", "output_tokens": "output_tokens", "cached": "cache_read_input_tokens"}

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        super().__init__(run, on_tool)
        self._names: dict[str, tuple[str | None, dict[str, Any]]] = {}
        self._errors: list[str] = []
        self._message = 0

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        run = self.run
        if kind == "init":
            run.session_id = event.get("session_id") or run.session_id
            run.model = event.get("model") or run.model
        elif kind == "message":
            if event.get("role") == "assistant" and isinstance(event.get("content"), str):
                if not event.get("delta"):
                    self._message += 1  # a whole message starts a new one
                self._text(("message", self._message), event["content"])
        elif kind == "tool_use":
            call_id = event.get("tool_id")
            args = event.get("parameters") if isinstance(event.get("parameters"), dict) else {}
            self._names[str(call_id)] = (event.get("tool_name"), args)
            self._tool(CLIToolEvent("request", call_id, event.get("tool_name"), args))
            self._message += 1
        elif kind == "tool_result":
            call_id = event.get("tool_id")
            name, args = self._names.get(str(call_id), (None, {}))
            error = event.get("error")
            output = event.get("output") if error is None else {"output": event.get("output"), "error": error}
            self._tool(CLIToolEvent("response", call_id, name, args, output=output,
                                    is_error=event.get("status") == "error" or error is not None))
        elif kind == "error":
            message = event.get("message")
            if isinstance(message, str) and message.strip():
                self._errors.append(message.strip())
        elif kind == "result":
            self._result(event)

    def _result(self, event: dict[str, Any]) -> None:
        run = self.run
        run.finished = True
        status = event.get("status")
        run.subtype = status if isinstance(status, str) else None
        stats = event.get("stats") if isinstance(event.get("stats"), dict) else {}
        run.usage = _usage(stats, self._USAGE)
        tool_calls = _int(stats.get("tool_calls"))
        if tool_calls is not None:
            run.usage["tool_calls"] = tool_calls
        duration = stats.get("duration_ms")
        run.duration_ms = duration if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
        if status == "success":
            run.warnings = _distinct(self._errors)
            return
        run.is_error = True
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        fatal = message.strip() if isinstance(message, str) and message.strip() else (
            self._errors[-1] if self._errors else None)
        run.warnings = _distinct(self._errors, without=fatal)
        run.error_message = _failure_message(status, fatal, None)


# ---------------------------------------------------------------- process handling


class _Tail:
    """The last ``limit`` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data.extend(chunk)
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_running(pgid: int) -> bool:
    """True while a non-zombie process of group ``pgid`` exists (Linux ``/proc``;
    elsewhere: while the group can be signalled)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


Sink = Callable[[bytes], Awaitable[None]]


#: Decoding work above this many buffered bytes runs in a worker thread, so a
#: huge line never holds the event loop while it is parsed.
OFFLOAD_BYTES = 1024 * 1024


class CLIStdout:
    """Where a run's stdout goes: ``await feed(chunk)`` for each chunk as it
    arrives (the sink first, then the decoder and collector), ``end()`` once
    stdout reached its end (not called when the run was cut short).
    ``finished`` turns true once the final result event was handled;
    ``turn_over`` is set then, or when a line outgrew ``max_line_bytes``
    (the turn is over either way: the process is stopped)."""

    __slots__ = ("_decoder", "_collector", "_sink", "turn_over")

    def __init__(self, decoder: LineDecoder, collector: _Collector, sink: Sink | None) -> None:
        self._decoder = decoder
        self._collector = collector
        self._sink = sink
        self.turn_over = anyio.Event()

    @property
    def finished(self) -> bool:
        return self._collector.run.finished

    async def feed(self, chunk: bytes) -> None:
        if self._sink is not None:
            await self._sink(chunk)
        if self._decoder.buffered + len(chunk) > OFFLOAD_BYTES:
            events = await anyio.to_thread.run_sync(self._decoder.feed, chunk)
        else:
            events = self._decoder.feed(chunk)
        self._handle(events)

    def _handle(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self._collector.handle(event)
        if (self.finished or self._decoder.oversized is not None) and not self.turn_over.is_set():
            self.turn_over.set()

    def end(self) -> None:
        self._handle(self._decoder.close())


@dataclass(slots=True)
class CLIExit:
    """How a CLI process ended.

    Attributes:
        returncode: exit status (negative: killed by that signal); ``None``
            when it did not start or had not exited on its own.
        stderr: the last ``stderr_tail`` bytes of stderr, decoded (not yet redacted).
        timed_out: the run was stopped at ``timeout``.
        pid: the child's process id, when one was started.
        start_error: why the process could not start (``OSError`` text).
    """

    returncode: int | None = None
    stderr: str = ""
    timed_out: bool = False
    pid: int | None = None
    start_error: str | None = None


#: ``await transport(endpoint, argv, stdin, stdout) -> CLIExit``: one CLI run.
CLITransport = Callable[["CLIEndpoint", list[str], str, CLIStdout], Awaitable[CLIExit]]

#: When set, :meth:`CLIEndpoint.run` hands the run to this transport instead
#: of :meth:`CLIEndpoint.spawn` (record and replay install theirs here).
CLI_TRANSPORT: ContextVar[CLITransport | None] = ContextVar("lionops_cli_transport", default=None)


class CLIEndpoint:
    """A CLI agent that runs one turn and streams JSON lines on stdout.

    Args:
        provider: the provider name (set by ``iModel``).
        model: passed to the CLI (``--model``/``-m``) when not ``None``.
        cli_command: the executable and its leading arguments, a list or a
            shell-like string (default: the provider's executable name).
            Provider arguments are appended, then ``args``.
        timeout: seconds for the whole run (``None``: no limit); past it the
            process group is killed and :class:`CLITimeoutError` raised.
        env: variables set on top of the inherited environment. Values of
            names containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL or
            AUTH are redacted from errors and never shown by ``repr``.
        inherit_env: start from this process's environment (default); when
            false the CLI sees ``env`` only.
        cwd: the working directory of the CLI.
        args: extra arguments appended after the provider's.
        system: text sent as the system prompt addition (Claude Code
            ``--append-system-prompt``; Codex: prefixed to the prompt).
        kill_grace: seconds between SIGTERM and SIGKILL of the group.
        linger: seconds to wait, after the CLI exited, for descendants that
            still hold its pipes; they are killed after that.
        stderr_tail: how many trailing bytes of stderr errors carry.
        max_line_bytes: the longest stdout line decoded; a longer one is
            skipped (memory stays bounded) and fails the turn with
            :class:`CLIStreamError`.
        max_repair_scans: how many ``{"type":`` markers of a broken line
            are tried when looking for an event written into it.
        base_url, api_key, home: the server preset (docs/cli.md): point the
            CLI at ``base_url`` with ``api_key``, non-interactive, with its
            state in ``home`` (default: a private temporary folder made on
            the first run). What each provider sets is in its class
            docstring; ``env`` and ``args`` given here come after it.

    Secrets are redacted from errors, logs and recordings: values of
    secret-named ``env`` variables, and in ``args`` the value of a flag
    naming a key, token, secret, password or auth (``--api-key V``,
    ``--api-key=V``, ``-k V``) and of a ``NAME=VALUE`` argument whose name
    does.
    """

    is_cli: ClassVar[bool] = True
    #: The CLI says when the answer was cut off at a token limit.
    reports_cuts: ClassVar[bool] = True
    default_executable: ClassVar[str] = ""
    collector_class: ClassVar[type[_Collector]] = _Collector

    def __init__(
        self,
        provider: str | None = None,
        model: str | None = None,
        *,
        cli_command: str | Sequence[str] | None = None,
        timeout: float | None = 600.0,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        system: str | None = None,
        kill_grace: float = 2.0,
        linger: float = 2.0,
        stderr_tail: int = 4096,
        max_line_bytes: int = 64 * 1024 * 1024,
        max_repair_scans: int = 16,
        base_url: str | None = None,
        api_key: str | None = None,
        home: str | os.PathLike[str] | None = None,
    ) -> None:
        if cli_command is None:
            cli_command = [self.default_executable]
        elif isinstance(cli_command, str):
            cli_command = shlex.split(cli_command)
        if not cli_command:
            raise ValueError("cli_command must name an executable")
        self.provider = provider or self.default_executable
        self.model = model
        self.cli_command = [str(c) for c in cli_command]
        self.timeout = timeout
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.args = [str(a) for a in args]
        self.system = system
        self.kill_grace = kill_grace
        self.linger = linger
        self.stderr_tail = stderr_tail
        LineDecoder(max_line_bytes=max_line_bytes, max_repair_scans=max_repair_scans)  # validates
        self.max_line_bytes = max_line_bytes
        self.max_repair_scans = max_repair_scans
        self.base_url = base_url
        self.home = os.fspath(home) if home is not None else None
        if base_url is not None:
            preset_env, preset_args = self.preset(base_url, api_key)
            self.env = {**preset_env, **self.env}
            self.args = [*preset_args, *self.args]
        elif api_key is not None:
            raise ValueError("api_key= is part of the server preset: give base_url= too, or pass the key in env=")

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r}, "
            f"cli_command={self.cli_command[:1]!r}..., timeout={self.timeout!r}, env_keys={sorted(self.env)})"
        )

    # -- provider specifics

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        """The full command line (the prompt goes to stdin); ``system`` overrides ``self.system``."""
        raise NotImplementedError

    def stdin_text(self, prompt: str, system: str | None = None) -> str:
        """What is written to the CLI's stdin for ``prompt``."""
        return prompt

    def _extra(self, options: Mapping[str, Any] | None) -> list[str]:
        return self.args + [str(a) for a in (options or {}).get("cli_args", ())]

    # -- running

    # -- the server preset

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        """``(env, args)`` pointing the CLI at ``base_url`` (see the class docstring)."""
        raise ConfigurationError(f"{type(self).__name__} has no server preset")

    def state_dir(self) -> str:
        """The CLI's private state folder of the preset (``home``, else a
        temporary folder made once per endpoint)."""
        if self.home is None:
            self.home = tempfile.mkdtemp(prefix=f"lionops-{self.provider}-")
        os.makedirs(self.home, exist_ok=True)
        return self.home

    def prepare(self) -> None:
        """Files the CLI needs before it starts (called by :meth:`spawn` only)."""

    # -- running

    def secrets(self, argv: Sequence[str] = ()) -> list[str]:
        """Secret values of ``env``, ``args`` and ``argv``, longest first."""
        found = [v for k, v in self.env.items() if v and _SECRET_NAME.search(k)]
        found += argv_secrets(self.args) + argv_secrets(argv)
        return sorted({v for v in found if len(v) >= 4}, key=len, reverse=True)

    def redact(self, text: str, mark: str = REDACTED, argv: Sequence[str] = ()) -> str:
        """``text`` with the secrets of ``env``, ``args`` and ``argv`` replaced by ``mark``."""
        for value in self.secrets(argv):
            text = text.replace(value, mark)
        return text

    def scrub(self, text: str) -> str:
        """``text`` with secret ``env`` values replaced by ``***`` (the mark of cassettes)."""
        return self.redact(text, "***")

    def _environ(self) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env)
        if self.base_url is not None:
            env.update(self.state_env())
        return env

    def state_env(self) -> dict[str, str]:
        """Variables naming the preset's state folder (set at spawn time)."""
        return {}

    def _error(self, cls: type[CLIError], message: str, run: CLIRun, argv: Sequence[str] = (),
               **kw: Any) -> CLIError:
        return cls(self.redact(message, argv=argv), provider=self.provider, returncode=run.returncode,
                   stderr_tail=self.redact(run.stderr_tail, argv=argv), run=run, **kw)

    async def run(
        self,
        prompt: str,
        *,
        system: str | None = None,
        options: Mapping[str, Any] | None = None,
        sink: Sink | None = None,
        on_tool: Callable[[CLIToolEvent], None] | None = None,
    ) -> CLIRun:
        """Run one turn for ``prompt`` and return what it produced.

        ``system`` (default: the endpoint's ``system``) is the system prompt
        addition. ``sink`` is awaited with every raw stdout chunk as it
        arrives (before it is decoded); ``on_tool`` is called with each CLI
        tool event.
        ``options`` are per-call model options (``cli_args``: extra argv).

        Raises:
            CLIProcessError: the CLI could not start, exited non-zero, was
                killed, or ended without a final result event.
            CLITimeoutError: it ran past ``timeout`` seconds.
            CLIStreamError: a stdout line was corrupt and not repairable.
            CLIResultError: the final result reports an error (``is_error``).
        """
        run = CLIRun(provider=self.provider)
        collector = self.collector_class(run, on_tool)
        decoder = LineDecoder(max_line_bytes=self.max_line_bytes, max_repair_scans=self.max_repair_scans)
        system = system if system is not None else self.system
        argv = self.argv(options, system)
        stdout = CLIStdout(decoder, collector, sink)
        transport = CLI_TRANSPORT.get()
        stdin = self.stdin_text(prompt, system)
        if transport is None:
            done = await self.spawn(argv, stdin, stdout)
        else:
            done = await transport(self, argv, stdin, stdout)
        run.pid, run.returncode = done.pid, done.returncode
        run.stderr_tail = self.redact(done.stderr, argv=argv)
        if done.start_error is not None:
            raise self._error(CLIProcessError, f"{self.provider}: could not start {argv[0]!r}: {done.start_error}",
                              run, argv)
        collector.finish()
        run.counts.update(decoder.counts)
        run.corrupt = decoder.corrupt
        run.oversized = decoder.oversized
        run.warnings = [self.redact(w, argv=argv) for w in run.warnings]
        self._check(run, done.timed_out, argv)
        return run

    async def spawn(self, argv: list[str], stdin: str, stdout: CLIStdout) -> CLIExit:
        """Run ``argv`` as a subprocess: write ``stdin`` to it, hand its stdout
        to ``stdout`` as it arrives, keep the stderr tail, stop it at
        ``timeout``, and terminate its process group and reap it whatever
        happens. A start failure is returned (``start_error``), not raised;
        a failing sink raises its own exception."""
        try:
            self.prepare()
            # Shielded: a cancellation landing while the child is being spawned
            # (trio spawns in a worker thread) must not lose the process handle.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    cwd=self.cwd, env=self._environ(), start_new_session=True,
                )
        except OSError as exc:
            return CLIExit(start_error=str(exc))
        tail = _Tail(self.stderr_tail)
        try:
            with anyio.move_on_after(self.timeout) as deadline:
                try:
                    await self._pump(process, stdin, stdout, tail)
                except BaseExceptionGroup as group:
                    # A failing sink (disk full, ...) surfaces as itself.
                    if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
                        raise group.exceptions[0] from None
                    raise
        finally:
            await self._terminate(process)
        return CLIExit(returncode=process.returncode, stderr=tail.text(), timed_out=deadline.cancelled_caught,
                       pid=process.pid)

    async def _pump(self, process: anyio.abc.Process, stdin: str, stdout: CLIStdout, tail: _Tail) -> None:
        stdout_done = anyio.Event()
        stderr_done = anyio.Event()
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None

        async def feed() -> None:
            try:
                await process.stdin.send(stdin.encode("utf-8"))  # type: ignore[union-attr]
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the CLI exited without reading; its exit status tells why
            finally:
                with anyio.CancelScope(shield=True):
                    await process.stdin.aclose()  # type: ignore[union-attr]

        async def drain_stderr() -> None:
            try:
                async for chunk in process.stderr:  # type: ignore[union-attr]
                    tail.add(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                stderr_done.set()

        async def reap(scope: anyio.CancelScope) -> None:
            # After the CLI exits, descendants holding its pipes get `linger`
            # seconds, then the group is killed so the pipes close.
            await process.wait()
            with anyio.move_on_after(self.linger):
                await stdout_done.wait()
            _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(self.linger):
                await stderr_done.wait()
            scope.cancel()

        async def end_after_result(scope: anyio.CancelScope) -> None:
            # A final result (or a fatal oversized line) ends the turn: the CLI
            # gets `linger` seconds to exit by itself, then its group is stopped
            # (it may keep running, or keep stdout open, after its result).
            await stdout.turn_over.wait()
            with anyio.move_on_after(self.linger):
                await process.wait()
            if process.returncode is None:
                _signal_group(process.pid, signal.SIGTERM)
                with anyio.move_on_after(self.kill_grace):
                    await process.wait()
            _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(self.linger):
                await stdout_done.wait()
            with anyio.move_on_after(self.linger):
                await stderr_done.wait()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            tg.start_soon(drain_stderr)
            tg.start_soon(reap, tg.cancel_scope)
            tg.start_soon(end_after_result, tg.cancel_scope)
            try:
                async for chunk in process.stdout:
                    await stdout.feed(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            stdout.end()
            stdout_done.set()

    async def _terminate(self, process: anyio.abc.Process) -> None:
        """SIGTERM the group, SIGKILL it after ``kill_grace``, reap the child (shielded)."""
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                _signal_group(process.pid, signal.SIGTERM)
                with anyio.move_on_after(self.kill_grace):
                    await process.wait()
            # Descendants that outlived the CLI die with the group.
            _signal_group(process.pid, signal.SIGKILL)
            if process.returncode is None:
                await process.wait()
            # SIGKILL is delivered asynchronously: wait (bounded) until no
            # member of the group runs any more.
            with anyio.move_on_after(max(self.kill_grace, 1.0)):
                while _group_running(process.pid):
                    await anyio.sleep(0.005)
            await process.aclose()

    def _check(self, run: CLIRun, timed_out: bool, argv: Sequence[str] = ()) -> None:
        name = self.provider
        if timed_out:
            raise self._error(CLITimeoutError, f"{name}: no result within {self.timeout} s; process group killed", run, argv)
        if run.is_error:
            raise self._error(
                CLIResultError,
                f"{name}: the CLI reported failure ({run.subtype}): {run.error_message}; "
                f"it {_describe_exit(run.returncode)}",
                run, argv, subtype=run.subtype,
            )
        if run.oversized is not None:
            line, preview = run.oversized
            raise self._error(
                CLIStreamError,
                f"{name}: stdout line {line} is longer than max_line_bytes ({self.max_line_bytes}) and was "
                f"not decoded: {preview!r}",
                run, argv, line=line, preview=preview,
            )
        if run.returncode != 0 and not run.ended_after_result and not (run.finished and run.cut):
            raise self._error(CLIProcessError, f"{name}: the CLI {_describe_exit(run.returncode)}", run, argv)
        if run.corrupt is not None:
            line, preview = run.corrupt
            raise self._error(
                CLIStreamError,
                f"{name}: stdout line {line} is corrupt JSON and could not be repaired: {preview!r}",
                run, argv, line=line, preview=preview,
            )
        if not run.finished:
            raise self._error(
                CLIProcessError, f"{name}: the stream ended without a final result event (exit status 0)", run, argv,
            )


class ClaudeCodeEndpoint(CLIEndpoint):
    """Claude Code: ``claude -p --output-format stream-json --verbose``, prompt on stdin.

    Adds ``--model MODEL`` and ``--append-system-prompt SYSTEM`` when set.

    Server preset (``base_url=``, ``api_key=``, ``home=``): ``ANTHROPIC_BASE_URL``,
    ``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
    ``DISABLE_AUTOUPDATER=1``, and ``HOME`` when ``home`` is given (the CLI
    keeps its state under ``$HOME/.claude``).
    """

    default_executable = "claude"
    collector_class = ClaudeStreamCollector

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        argv = [*self.cli_command, "-p", "--output-format", "stream-json", "--verbose"]
        if self.model:
            argv += ["--model", self.model]
        if system:
            argv += ["--append-system-prompt", system]
        return argv + self._extra(options)

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        env = {"ANTHROPIC_BASE_URL": base_url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1"}
        if api_key is not None:
            env["ANTHROPIC_API_KEY"] = api_key
        return env, []

    def state_env(self) -> dict[str, str]:
        return {"HOME": self.home} if self.home is not None else {}


#: The variable the Codex preset passes the key in (named by ``env_key``).
CODEX_KEY_ENV = "LIONOPS_CODEX_API_KEY"


class CodexEndpoint(CLIEndpoint):
    """Codex: ``codex exec --json [-m MODEL] -``, prompt on stdin.

    Server preset (``base_url=`` the Responses API base, e.g.
    ``http://127.0.0.1:8000/v1``; ``api_key=``; ``home=``): a custom model
    provider ``lionops`` (``wire_api="responses"``, no request retries, one
    stream retry) whose key is read from ``LIONOPS_CODEX_API_KEY``;
    ``--skip-git-repo-check --ephemeral``, analytics and web search off, and
    ``--disable plugins`` (without it the CLI looks up plugin hosts in DNS);
    ``CODEX_HOME`` is the state folder.
    """

    default_executable = "codex"
    collector_class = CodexStreamCollector

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        argv = [*self.cli_command, "exec", "--json"]
        if self.model:
            argv += ["-m", self.model]
        return argv + self._extra(options) + ["-"]

    def stdin_text(self, prompt: str, system: str | None = None) -> str:
        return f"{system}\n\n{prompt}" if system else prompt

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        provider = (
            f'{{name="lionops", base_url={json.dumps(base_url)}, env_key="{CODEX_KEY_ENV}", '
            'wire_api="responses", request_max_retries=0, stream_max_retries=1}'
        )
        args = ["--skip-git-repo-check", "--ephemeral", "-c", "model_provider=lionops",
                "-c", f"model_providers.lionops={provider}", "-c", "analytics.enabled=false",
                "-c", "web_search=disabled", "--disable", "plugins"]
        return {CODEX_KEY_ENV: api_key if api_key is not None else "unused"}, args

    def state_env(self) -> dict[str, str]:
        return {"CODEX_HOME": self.state_dir()}


#: The settings the Gemini preset writes to ``$GEMINI_CLI_HOME/.gemini/settings.json``
#: (``general.maxAttempts`` is the endpoint's ``max_attempts``).
GEMINI_SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"maxAttempts": 1},
}


class GeminiEndpoint(CLIEndpoint):
    """Gemini CLI: ``gemini -p "" -o stream-json [-m MODEL] --skip-trust``, prompt on stdin.

    The system text is put before the prompt (the CLI has no flag that adds
    to its system prompt). The CLI reports no finish reason, so a reply cut
    at the output limit cannot be told from a whole one (``reports_cuts``
    is false; see :class:`GeminiStreamCollector`).

    Server preset (``base_url=`` the server root, e.g.
    ``http://127.0.0.1:8000``; ``api_key=``; ``home=``;
    ``max_attempts=1``): ``GEMINI_CLI_HOME`` is the state folder, where
    ``.gemini/settings.json`` is written (when absent) with API-key auth,
    usage statistics and telemetry off and ``general.maxAttempts``
    (:data:`GEMINI_SETTINGS`): without that file the CLI rejects the base
    URL. ``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_API_KEY`` and ``TMPDIR`` (a
    folder in the state folder: the CLI writes error reports there) are set.
    One attempt is the default because the CLI keeps a failed attempt's
    text in the stream, unmarked, when it retries.
    """

    default_executable = "gemini"
    collector_class = GeminiStreamCollector
    reports_cuts: ClassVar[bool] = False

    def __init__(self, provider: str | None = None, model: str | None = None, *, max_attempts: int = 1,
                 **options: Any) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.max_attempts = max_attempts
        super().__init__(provider, model, **options)

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        argv = [*self.cli_command, "-p", "", "-o", "stream-json"]
        if self.model:
            argv += ["-m", self.model]
        return argv + ["--skip-trust"] + self._extra(options)

    def stdin_text(self, prompt: str, system: str | None = None) -> str:
        return f"{system}\n\n{prompt}" if system else prompt

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        return {"GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_API_KEY": api_key if api_key is not None else "unused"}, []

    def state_env(self) -> dict[str, str]:
        home = self.state_dir()
        return {"GEMINI_CLI_HOME": home, "TMPDIR": os.path.join(home, "tmp")}

    def prepare(self) -> None:
        if self.base_url is None:
            return
        home = self.state_dir()
        os.makedirs(os.path.join(home, "tmp"), exist_ok=True)
        settings = os.path.join(home, ".gemini", "settings.json")
        if not os.path.exists(settings):
            os.makedirs(os.path.dirname(settings), exist_ok=True)
            data = json.loads(json.dumps(GEMINI_SETTINGS))
            data["general"]["maxAttempts"] = self.max_attempts
            with open(settings, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2)


# ---------------------------------------------------------------- argv secrets

_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "credential",
                           "credentials", "auth"})
_NAME_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.+)$", re.DOTALL)


def _secret_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    if last == "env_key":  # names a variable, holds no secret
        return False
    return any(word in _SECRET_WORDS for word in re.split(r"[-_]", last))


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """Secret values in a command line: the value of a flag naming a key,
    token, secret, password or auth (``--api-key V``, ``--api-key=V``,
    ``-k V``), and of a ``NAME=VALUE`` argument whose name does (quotes
    around the value removed too)."""
    found: list[str] = []
    take_next = False
    for arg in argv:
        arg = str(arg)
        if take_next:
            found.append(arg)
            take_next = False
            continue
        if arg.startswith("-") and len(arg) > 1:
            flag, eq, value = arg.partition("=")
            name = flag.lstrip("-")
            if name == "k" or (flag.startswith("--") and _secret_name(name)):
                if eq:
                    found.append(value)
                else:
                    take_next = True
            continue
        match = _NAME_VALUE.match(arg)
        if match and _secret_name(match.group(1)):
            found.append(match.group(2))
    out: list[str] = []
    for value in found:
        out.append(value)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            out.append(value[1:-1])
    return [v for v in out if len(v) >= 4]
