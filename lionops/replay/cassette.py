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
                      decision (allowed | denied | invalid | rejected |
                      not_reached), output or error; it must agree with
                      the trace's own ``actions`` (else the file is refused);
        "trace":      the Trace JSON (lionops.trace);
        "outcome":    {"result": JSON, "error": {"type", "message"} | null}
     }],
     "runs": [{                          (only when a Branch.run() was recorded)
        "first":      the operation of its first round,
        "rounds":     how many operations (one per round) it spans,
        "max_rounds": the run's max_rounds,
        "trace":      the run machine's own Trace JSON (states/run.toml),
        "outcome":    as an operation's
     }]}

An operation whose call has ``resume`` is a ``Branch.resume()`` (or the
first round of a ``Branch.resume_run()``): the decisions it was given, in
request order. A run must add up: its rounds within the operations, no two
runs sharing one, its trace a valid run of as many rounds, and its
transitions agreeing with the rounds' traces (a round that acted on a tool
call never ends the run at ``answered``; ``deferred`` only after a deferred
round); else the file is refused.

See docs/replay.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .._files import atomic_write_text
from .._json import loads as bounded_json
from .._redact import MAX_PATTERNS, REPLACEMENT, Redactor, pattern_problem
from ..engine.definition import run_definition
from ..errors import CassetteError, CassetteNotFoundError, JSONLimitError
from ..run import RUN_TRACE_FORMAT, RunTrace
from ..trace import Trace

__all__ = [
    "CASSETTE_FORMAT", "CASSETTE_VERSION", "Cassette", "Operation", "CallRecord", "HttpExchange",
    "CliExchange", "Exchange", "HttpRequestRecord", "HttpResponseRecord", "ToolCallRecord",
    "ErrorRecord", "OutcomeRecord", "RedactionRecord", "CassetteError", "CassetteNotFoundError",
    "MAX_CASSETTE_DEPTH", "DecisionRecord", "RunRecord",
]

CASSETTE_FORMAT: Literal["lionops-cassette"] = "lionops-cassette"
#: Version of the cassette JSON; a cassette of another version is refused.
CASSETTE_VERSION = 1
#: A cassette nested deeper than this (objects and lists) is refused.
MAX_CASSETTE_DEPTH = 256
#: Integers in a cassette (indices, exit statuses) stay within 64 bits.
_INT64 = 2**63


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

    status: int = Field(ge=100, le=599)
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
    returncode: int | None = Field(default=None, ge=-_INT64, lt=_INT64)
    stderr: str | None = None
    timed_out: bool = False
    error: ErrorRecord | None = None


Exchange = Annotated[HttpExchange | CliExchange, Field(discriminator="kind")]


class ToolCallRecord(_Record):
    """One action request as ``act()`` handled it (request order = ``index``).

    ``decision``: ``allowed`` (authorized and invoked: ``output``, or
    ``error`` when the tool raised), ``denied`` (the gate said no),
    ``invalid`` (unusable request), ``rejected`` (unknown tool or bad
    arguments) or ``not_reached`` (handed to an ``act()`` that raised
    before deciding it); only ``allowed`` calls reached the tool.
    """

    index: int = Field(ge=-1, lt=_INT64)
    function: str | None = None
    arguments: Any = None
    decision: Literal["allowed", "denied", "invalid", "rejected", "not_reached"]
    output: Any = None
    error: ErrorRecord | None = None


class DecisionRecord(_Record):
    """One decision a resumed operation was given (``Branch.resume()``)."""

    call_id: str
    function: str | None = None
    index: int = Field(ge=-1, lt=_INT64)
    decision: Literal["approved", "denied"]
    by: str
    reason: str | None = None


class CallRecord(_Record):
    """The normalized call: what was asked, of which model, with which schemas;
    for a resumed operation, the decisions it was given (``resume``)."""

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
    resume: list[DecisionRecord] | None = None


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
        Trace.from_dict(value)  # ValueError, reported as a validation error
        return value

    @model_validator(mode="after")
    def _one_record_per_request(self) -> Operation:
        indices = [c.index for c in self.tool_calls if c.index >= 0]
        if len(set(indices)) != len(indices):
            raise ValueError("tool_calls: two records of one request index")
        problem = _contradiction(self)
        if problem is not None:
            raise ValueError(f"the operation contradicts itself: {problem}")
        return self

    def trace_obj(self) -> Trace:
        return Trace.from_dict(self.trace)

    def __repr__(self) -> str:
        trace = self.trace_obj()
        return (f"Operation(model={self.call.model!r}, path={' -> '.join(trace.states)}, "
                f"exchanges={len(self.exchanges)}, tool_calls={len(self.tool_calls)})")


class RunRecord(_Record):
    """One recorded ``Branch.run()``: the operations of its rounds and the run machine's trace."""

    first: int = Field(ge=0, lt=_INT64)
    rounds: int = Field(ge=0, lt=_INT64)
    max_rounds: int = Field(ge=1, lt=_INT64)
    trace: dict[str, Any]
    outcome: OutcomeRecord = OutcomeRecord()

    @field_validator("trace")
    @classmethod
    def _trace_is_a_run(cls, value: dict[str, Any]) -> dict[str, Any]:
        Trace.from_dict(value, run_definition())  # ValueError, reported as a validation error
        return value

    def trace_obj(self) -> Trace:
        return Trace.from_dict(self.trace, run_definition())

    def run_trace(self, operations: list[Operation]) -> RunTrace:
        """The recorded :class:`~lionops.run.RunTrace`: this trace and its rounds' (checked as ``from_dict`` checks)."""
        rounds = [op.trace for op in operations[self.first:self.first + self.rounds]]
        return RunTrace.from_dict({"format": RUN_TRACE_FORMAT, "exit": self.trace_obj().exit, "run": self.trace,
                                   "rounds": rounds})

    def __repr__(self) -> str:
        return f"RunRecord(first={self.first}, rounds={self.rounds}, exit={self.trace_obj().exit!r})"


class RedactionRecord(_Record):
    """The caller's extra secret patterns (applied again on replay) and the mark used."""

    patterns: list[str] = Field(default=[], max_length=MAX_PATTERNS)
    replacement: str = REPLACEMENT

    @field_validator("patterns")
    @classmethod
    def _bounded_patterns(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Patterns read from a file (:meth:`Cassette.loads`) must pass
        :func:`~lionops.replay.pattern_problem`, unless the caller
        vouches for them in code (``trusted_patterns``)."""
        context = info.context
        if context is None:  # built in code: the caller's own patterns
            return value
        trusted = context.get("trusted_patterns", ())
        for i, pattern in enumerate(value):
            problem = None if pattern in trusted else pattern_problem(pattern)
            if problem is not None:
                raise ValueError(f"redaction pattern {i} {pattern[:60]!r} is refused: {problem}")
        return value


class Cassette(_Record):
    """A cassette: recorded ``operate()`` runs (see the module docstring)."""

    format: Literal["lionops-cassette"] = CASSETTE_FORMAT
    version: int = CASSETTE_VERSION
    lionops: str = ""
    redaction: RedactionRecord = RedactionRecord()
    operations: list[Operation] = []
    runs: list[RunRecord] = []

    @model_validator(mode="after")
    def _runs_add_up(self) -> Cassette:
        taken: set[int] = set()
        for i, run in enumerate(self.runs):
            span = range(run.first, run.first + run.rounds)
            if span.stop > len(self.operations):
                raise ValueError(f"run {i} spans operations {span.start}..{span.stop - 1}, "
                                 f"the cassette has {len(self.operations)}")
            if taken & set(span):
                raise ValueError(f"run {i} shares an operation with another run")
            taken |= set(span)
            problem = _run_contradiction(run, self.operations)
            if problem is not None:
                raise ValueError(f"run {i} contradicts its rounds: {problem}")
        return self

    def run_at(self, operation: int) -> RunRecord | None:
        """The recorded run whose first round is ``operation``, if any."""
        return next((r for r in self.runs if r.first == operation), None)

    @model_validator(mode="before")
    @classmethod
    def _says_what_it_is(cls, data: Any, info: ValidationInfo) -> Any:
        """A file must say it is a cassette, and of which version."""
        if info.context is not None and isinstance(data, dict):
            missing = [key for key in ("format", "version") if key not in data]
            if missing:
                raise ValueError(f"no {' and no '.join(repr(k) for k in missing)}: not a lionops cassette")
        return data

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != CASSETTE_VERSION:
            raise ValueError(
                f"cassette version {value} is not supported (this lionops reads version {CASSETTE_VERSION})")
        return value

    @classmethod
    def loads(cls, text: str | bytes, *, source: str = "cassette", trusted_patterns: Iterable[str] = ()) -> Cassette:
        """Parse and validate cassette JSON.

        Redaction patterns in it are untrusted: each must pass
        :func:`~lionops.replay.pattern_problem`, except those in
        ``trusted_patterns`` (the caller's own, given in code).

        Raises:
            CassetteError: not JSON, nested deeper than
                :data:`MAX_CASSETTE_DEPTH`, or not a valid cassette of this version.
        """
        try:
            data = bounded_json(text, max_depth=MAX_CASSETTE_DEPTH)
        except JSONLimitError as exc:
            raise CassetteError(f"{source} is not a valid lionops cassette: nested too deep to read "
                                f"(more than {exc.maximum} levels deep)") from None
        except ValueError as exc:  # also UnicodeDecodeError, and integers past the digit limit
            raise CassetteError(f"{source} is not JSON: {exc}") from None
        depth = _depth(data)
        if depth > MAX_CASSETTE_DEPTH:
            raise CassetteError(f"{source} is not a valid lionops cassette: nested {depth} levels deep "
                                f"(at most {MAX_CASSETTE_DEPTH})")
        context = {"trusted_patterns": frozenset(p for p in trusted_patterns if isinstance(p, str))}
        try:
            return cls.model_validate(data, context=context)
        except ValidationError as exc:
            problems = [_problem(e) for e in exc.errors(include_url=False, include_input=False)]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise CassetteError(f"{source} is not a valid lionops cassette: {problems[0]}{more}", problems) from None
        except RecursionError:
            raise CassetteError(f"{source} is not a valid lionops cassette: nested too deep to validate") from None

    @classmethod
    def load(cls, path: str | Path, *, trusted_patterns: Iterable[str] = ()) -> Cassette:
        """Read and validate the cassette at ``path`` (see :meth:`loads`).

        Raises:
            CassetteNotFoundError: no file at ``path``.
            CassetteError: the file cannot be read or is not a valid cassette.
        """
        p = Path(path)
        try:
            text = p.read_bytes()
        except FileNotFoundError:
            raise CassetteNotFoundError(f"no cassette at {p}") from None
        except OSError as exc:
            raise CassetteError(f"cannot read cassette {p}: {exc.strerror or type(exc).__name__}") from None
        return cls.loads(text, source=str(p), trusted_patterns=trusted_patterns)

    def dumps(self, redactor: Redactor | None = None) -> str:
        """The cassette as indented JSON, passed once more through ``redactor``
        (default: a :class:`Redactor` with this cassette's patterns)."""
        redactor = redactor or Redactor(patterns=tuple(self.redaction.patterns))
        # a cassette without runs keeps the shape it had before runs were recorded
        data = redactor.value(self.model_dump(mode="json", exclude={"runs"} if not self.runs else None))
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | Path, redactor: Redactor | None = None) -> Path:
        """Write the redacted cassette to ``path`` atomically; returns the path."""
        return atomic_write_text(path, self.dumps(redactor))

    def __repr__(self) -> str:
        return f"Cassette(version={self.version}, operations={len(self.operations)})"


def _depth(data: Any) -> int:
    """How deep objects and lists nest in parsed JSON (iterative: never recurses)."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            children: Iterable[Any] = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_CASSETTE_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


#: The cassette decision of each ``ActionRecord`` decision; an invoked tool is
#: ``allowed`` whatever it decided (its error recorded when it did not return).
#: A deferred call did not run (``denied``); one over the tool-call limit is ``rejected``.
CASSETTE_DECISIONS = {"allowed": "allowed", "denied": "denied", "timed_out": "denied", "invalid": "invalid",
                      "rejected": "rejected", "not_offered": "rejected", "error": "rejected",
                      "deferred": "denied", "over_limit": "rejected"}


def _contradiction(op: Operation) -> str | None:
    """Where the recorded calls and the trace disagree: each decided request
    (``tool_calls`` other than ``not_reached``) must be the trace's action of
    its index (function, arguments, decision), and the trace may hold no
    other; ``not_reached`` requests only where the trace says ``act()`` raised."""
    trace = op.trace_obj()
    actions = {a.index: a for a in trace.actions}
    decided = {c.index: c for c in op.tool_calls if c.decision != "not_reached"}
    if actions.keys() != decided.keys():
        return (f"the trace decided requests {sorted(actions)[:10]}, tool_calls records "
                f"{sorted(decided)[:10]}")
    for index, rec in decided.items():
        act = actions[index]
        decision = "allowed" if act.invoked else CASSETTE_DECISIONS.get(act.decision, act.decision)
        if (rec.function != act.function or decision != rec.decision
                or json.dumps(rec.arguments, sort_keys=True) != json.dumps(act.raw_arguments, sort_keys=True)):
            return f"request {index} is {rec.function}/{rec.decision} in tool_calls, " \
                   f"{act.function}/{decision} in the trace"
    cut = any(t.source == "act" and t.trigger == "failed" for t in trace.transitions)
    if not cut and len(decided) < len(op.tool_calls):
        return "a request is not_reached, but the trace says act() did not raise"
    return None


def _run_contradiction(run: RunRecord, operations: list[Operation]) -> str | None:
    """Where a run's trace and its rounds disagree: the number of rounds, and
    each transition out of ``round`` against the round it followed."""
    try:
        run_trace = run.run_trace(operations)
    except ValueError as exc:
        return str(exc)
    rounds = iter(run_trace.rounds)
    for t in run_trace.trace.transitions:
        if t.source != "round" or t.trigger == "failed":
            continue
        trace = next(rounds, None)
        if trace is None:
            return f"{t.trigger} after a round that has no operation"
        acted = "act" in trace.states and bool(trace.actions)
        if t.trigger == "answered" and acted:
            return "answered after a round that acted on tool calls"
        if t.trigger in ("next_round", "max_rounds") and (not acted or trace.exit == "deferred"):
            return f"{t.trigger} after a round that acted on no tool call"
        if (t.trigger == "deferred") != (trace.exit == "deferred"):
            return f"{t.trigger} after a round that ended at {trace.exit}"
    if run.trace_obj().exit == "max_rounds" and run.rounds != run.max_rounds:
        return f"max_rounds after {run.rounds} round(s) of {run.max_rounds}"
    return None


def _problem(error: Any) -> str:
    """One pydantic error as ``loc: message``, on one line."""
    loc = ".".join(str(part) for part in error.get("loc", ())) or "cassette"
    message = " ".join(str(error.get("msg", "")).split()).removeprefix("Value error, ")
    return f"{loc}: {message[:300]}"
