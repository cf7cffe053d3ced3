"""The cassette: one or more recorded ``operate()`` runs as plain JSON.

Validated by pydantic on load (unknown fields and unknown versions are
refused); nothing in a cassette is executed or imported. Shape (version 1)::

    {"format": "lionops-cassette", "version": 1, "lionops": "0.1.0",
     "redaction": {"patterns": [...], "replacement": "***"},
     "operations": [{
        "call":       normalized call: middle, provider, model, base_url,
                      endpoint options, call options, response schema,
                      tool schemas, keywords, the branch history before it;
        "exchanges":  the adapter's raw transport traffic, in order:
                      {"kind": "http", "request": {...}, "response": {...}}
                      or {"kind": "cli", "command": [...], "input": "...",
                      "lines": [...], "returncode": 0, "stderr": "..."};
        "tool_calls": one per action request: index, function, arguments,
                      decision (allowed | denied | invalid | rejected),
                      output or error;
        "trace":      the Trace JSON (lionops.trace);
        "outcome":    {"result": JSON, "error": {"type", "message"} | null}
     }]}

See docs/replay.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import LionopsError
from ..messages import atomic_write_text
from ..trace import Trace
from .redact import REPLACEMENT, Redactor

__all__ = [
    "CASSETTE_FORMAT", "CASSETTE_VERSION", "Cassette", "Operation", "CallRecord", "HttpExchange",
    "CliExchange", "Exchange", "HttpRequestRecord", "HttpResponseRecord", "ToolCallRecord",
    "ErrorRecord", "OutcomeRecord", "RedactionRecord", "CassetteError", "CassetteNotFoundError",
]

CASSETTE_FORMAT = "lionops-cassette"
#: Version of the cassette JSON; a cassette of another version is refused.
CASSETTE_VERSION = 1


class CassetteError(LionopsError, ValueError):
    """A cassette file is missing, not JSON, or not a valid cassette."""


class CassetteNotFoundError(CassetteError, FileNotFoundError):
    """No cassette at the path and the record mode does not record."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorRecord(_Record):
    """An exception as data: its class name and message."""

    type: str
    message: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> ErrorRecord:
        return cls(type=type(exc).__name__, message=str(exc))


class HttpRequestRecord(_Record):
    """A request: ``body`` when it was JSON, else ``text``; headers redacted."""

    method: str
    url: str
    headers: dict[str, str] = {}
    body: Any = None
    text: str | None = None


class HttpResponseRecord(_Record):
    """A response: ``body`` when it was JSON, else ``text`` (a server-sent-event stream)."""

    status: int
    headers: dict[str, str] = {}
    body: Any = None
    text: str | None = None


class HttpExchange(_Record):
    """One HTTP round trip of an API adapter; ``error`` when the transport
    failed (connection refused, timeout) and there is no response."""

    kind: Literal["http"] = "http"
    request: HttpRequestRecord
    response: HttpResponseRecord | None = None
    error: ErrorRecord | None = None


class CliExchange(_Record):
    """One CLI agent run (redacted).

    ``command``: the argv with the configured executable (``cli_command``)
    shown as the provider's executable name; ``input``: the text written to
    stdin (the prompt); ``lines``: stdout split at ``"\n"`` (joined with
    ``"\n"`` it is stdout exactly, so a final ``""`` means it ended with a
    newline); ``returncode``, the ``stderr`` tail, ``timed_out``; ``error``
    when the process could not start.
    """

    kind: Literal["cli"] = "cli"
    command: list[str]
    input: str | None = None
    lines: list[str] = []
    returncode: int | None = None
    stderr: str | None = None
    timed_out: bool = False
    error: ErrorRecord | None = None


Exchange = Annotated[HttpExchange | CliExchange, Field(discriminator="kind")]


class ToolCallRecord(_Record):
    """One action request as ``act()`` handled it (request order = ``index``).

    ``decision``: ``allowed`` (authorized and invoked: ``output``, or
    ``error`` when the tool raised), ``denied`` (the gate said no),
    ``invalid`` (unusable request) or ``rejected`` (unknown tool or bad
    arguments); only ``allowed`` calls reached the tool.
    """

    index: int
    function: str | None = None
    arguments: Any = None
    decision: Literal["allowed", "denied", "invalid", "rejected"]
    output: Any = None
    error: ErrorRecord | None = None


class CallRecord(_Record):
    """The normalized call: what was asked, of which model, with which schemas."""

    middle: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    endpoint: dict[str, Any] = {}
    options: dict[str, Any] = {}
    response_format: dict[str, Any] | None = None
    tool_schemas: list[dict[str, Any]] = []
    registered_tools: list[dict[str, Any]] = []
    keywords: dict[str, Any] = {}
    history: list[dict[str, Any]] = []


class OutcomeRecord(_Record):
    """What ``operate()`` gave back: the result as JSON, or the error it raised."""

    result: Any = None
    error: ErrorRecord | None = None


class Operation(_Record):
    """One recorded ``operate()`` run."""

    call: CallRecord
    exchanges: list[Exchange] = []
    tool_calls: list[ToolCallRecord] = []
    trace: dict[str, Any]
    outcome: OutcomeRecord = OutcomeRecord()

    @field_validator("trace")
    @classmethod
    def _trace_is_a_trace(cls, value: dict[str, Any]) -> dict[str, Any]:
        Trace.from_dict(value)  # raises ValueError/KeyError on a malformed trace
        return value

    def trace_obj(self) -> Trace:
        return Trace.from_dict(self.trace)

    def __repr__(self) -> str:
        trace = self.trace_obj()
        return (f"Operation(model={self.call.model!r}, path={' -> '.join(trace.states)}, "
                f"exchanges={len(self.exchanges)}, tool_calls={len(self.tool_calls)})")


class RedactionRecord(_Record):
    """The caller's extra secret patterns (applied again on replay) and the mark used."""

    patterns: list[str] = []
    replacement: str = REPLACEMENT


class Cassette(_Record):
    """A cassette: recorded ``operate()`` runs (see the module docstring)."""

    format: Literal["lionops-cassette"] = CASSETTE_FORMAT
    version: int = CASSETTE_VERSION
    lionops: str = ""
    redaction: RedactionRecord = RedactionRecord()
    operations: list[Operation] = []

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != CASSETTE_VERSION:
            raise ValueError(f"cassette version {value} is not supported (this lionops reads version {CASSETTE_VERSION})")
        return value

    @classmethod
    def loads(cls, text: str | bytes, *, source: str = "cassette") -> Cassette:
        """Parse and validate cassette JSON.

        Raises:
            CassetteError: not JSON, or not a valid cassette of this version.
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CassetteError(f"{source} is not JSON: {exc}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise CassetteError(f"{source} is not a valid lionops cassette:\n{exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read and validate the cassette at ``path``.

        Raises:
            CassetteNotFoundError: no file at ``path``.
            CassetteError: the file is not a valid cassette.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CassetteNotFoundError(f"no cassette at {p}") from None
        return cls.loads(text, source=str(p))

    def dumps(self, redactor: Redactor | None = None) -> str:
        """The cassette as indented JSON, passed once more through ``redactor``
        (default: a :class:`Redactor` with this cassette's patterns)."""
        redactor = redactor or Redactor(patterns=tuple(self.redaction.patterns))
        data = redactor.value(self.model_dump(mode="json"))
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | Path, redactor: Redactor | None = None) -> Path:
        """Write the redacted cassette to ``path`` atomically; returns the path."""
        return atomic_write_text(path, self.dumps(redactor))

    def __repr__(self) -> str:
        return f"Cassette(version={self.version}, operations={len(self.operations)})"
