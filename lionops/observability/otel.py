"""OpenTelemetry export of ``operate()`` (imported only by ``lionops.instrument()``).

One trace per ``operate()``, following the OpenTelemetry GenAI semantic
conventions (:data:`SCHEMA_URL`; docs/observability.md has the mapping):

- ``invoke_agent {agent}`` (INTERNAL): the root span, the operation as an
  agent run (``gen_ai.agent.name``: the branch's name, else :data:`AGENT_NAME`;
  ``gen_ai.conversation.id``: the branch id). The machine's facts stay in
  ``lionops.*``: exit trigger, terminal state, states visited, engine, middle,
  caller model. Every fired transition is a span event named by its trigger,
  carrying the guards evaluated (``lionops.guard.<name>``: value), at the
  moment it fired. Status ERROR, with the exception recorded (secrets
  scrubbed; its message, which may quote content, only with
  ``capture_content``), when the call raised.
- ``chat {model}`` (CLIENT): an API adapter call (``gen_ai.*``), HTTP attempts
  and retries, stream chunk timing. A CLI agent run is ``invoke_agent
  {provider}`` (CLIENT), with its session id and its own tool uses as events.
- ``execute_tool {tool}`` (INTERNAL): one per action request, with the
  decision (``lionops.tool.decision``) and hooks as events.
- ``writeback`` (INTERNAL): the context-provider offer before enrichment.

A ``Branch.run()`` is one ``invoke_agent {agent}`` span (INTERNAL) of its own:
the run machine's transitions as events, its exit, states and rounds, the
tokens of every round summed. Each round is a ``round {n}`` span inside it
(the operation's attributes and children as above, without
``gen_ai.operation.name``: the agent invocation is the run), so a run counts
once in ``gen_ai.invoke_agent.duration``.

Metrics: ``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage``,
the two stream chunk histograms, ``gen_ai.invoke_agent.duration`` and
``gen_ai.execute_tool.duration`` (GenAI conventions, advised buckets),
``lionops.operation.duration`` and the counter ``lionops.operation.exits``.
Events (log records): ``gen_ai.client.inference.operation.details`` with
content capture, ``gen_ai.client.operation.exception`` for a failed call.

Content (instructions, answers, tool arguments and outputs, and exception
messages, which may quote them) is recorded only with ``capture_content=True``.
Without it no model-chosen text reaches a span name or attribute: a tool
name is exported only when it names a tool registered on the branch (a CLI
agent's own tool: one of its built-in tools or a registered one), anything
else as :data:`UNKNOWN_TOOL`; span names have a fixed form. Every string
attribute is bounded (:data:`MAX_ATTRIBUTE_CHARS`, content
:data:`MAX_CONTENT_CHARS`).
Secrets never are: every text that reaches a span goes through the cassette
:class:`~lionops.replay.Redactor` and the endpoints' own ``scrub``.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from opentelemetry import _logs as otel_logs
from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._redact import Redactor
from .._version import __version__
from ..messages import to_jsonable
from ..usage import Usage

__all__ = ["OpenTelemetryObserver", "logged_decision", "tool_decision", "provider_name", "capture_from_env",
           "DECISIONS", "SCHEMA_URL", "CAPTURE_CONTENT_ENV", "AGENT_NAME", "UNKNOWN_TOOL",
           "MAX_ATTRIBUTE_CHARS", "MAX_CONTENT_CHARS"]

#: The tool name exported for a requested tool that is not registered (or not
#: offered) without ``capture_content``: the model's text never reaches a span.
UNKNOWN_TOOL = "unknown_tool"
#: Longest string attribute value (and span name) besides content.
MAX_ATTRIBUTE_CHARS = 256
#: Longest content attribute value (``capture_content=True``).
MAX_CONTENT_CHARS = 32_768

#: Built-in tools of the CLI agents (Claude Code, Codex, Gemini CLI): their
#: names are the agent's, not the model's text.
_CLI_BUILTIN_TOOLS = frozenset({
    "Bash", "BashOutput", "Edit", "ExitPlanMode", "Glob", "Grep", "KillShell", "LS", "MultiEdit", "NotebookEdit",
    "NotebookRead", "Read", "SlashCommand", "Task", "TodoRead", "TodoWrite", "WebFetch", "WebSearch", "Write",
    "shell", "exec_command", "apply_patch", "local_shell", "update_plan", "view_image", "web_search",
    "command_execution", "file_change", "mcp_tool_call",
    "read_file", "read_many_files", "write_file", "replace", "list_directory", "glob", "search_file_content",
    "run_shell_command", "web_fetch", "google_web_search", "save_memory", "write_todos",
})

#: Semantic conventions schema the attribute names follow.
SCHEMA_URL = "https://opentelemetry.io/schemas/gen-ai/1.42.0"

#: The environment variable that turns content capture on when
#: ``instrument(capture_content=...)`` is not given (``true``, ``span_only``,
#: ``event_only`` or ``span_and_event``; anything else leaves it off).
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_VALUES = frozenset({"true", "1", "yes", "span_only", "event_only", "span_and_event"})

#: ``gen_ai.agent.name`` of an operation on a branch without a name.
AGENT_NAME = "lionops"

#: ``lionops.tool.decision`` values.
DECISIONS = ("allowed", "denied", "invalid", "rejected", "not_offered", "error", "timed_out", "deferred",
             "over_limit")

#: GenAI conventions: advised buckets of ``gen_ai.client.operation.duration`` (s).
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
#: GenAI conventions: advised buckets of the per-chunk stream histograms (s).
CHUNK_BUCKETS = (0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
#: GenAI conventions: advised buckets of ``gen_ai.client.token.usage``.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

#: Numeric request options (``operate()`` keywords) -> their GenAI request attribute.
_REQUEST_OPTIONS = (
    ("max_completion_tokens", "gen_ai.request.max_tokens"), ("max_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"), ("top_p", "gen_ai.request.top_p"),
    ("seed", "gen_ai.request.seed"), ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"), ("top_k", "gen_ai.request.top_k"),
)

#: Attributes of an inference span the conventions' ``invoke_agent`` span does
#: not list -> the ``lionops.*`` name a CLI agent run carries them under.
_NOT_ON_AGENT_SPANS = {"gen_ai.response.model": "lionops.response.model", "gen_ai.response.id": "lionops.response.id",
                       "gen_ai.usage.reasoning.output_tokens": "lionops.usage.reasoning.output_tokens",
                       "gen_ai.response.time_to_first_chunk": "lionops.response.time_to_first_chunk",
                       "gen_ai.request.stream": "lionops.request.stream"}

#: Span attributes the details event does not list (the span group adds them, the event does not).
_NOT_ON_DETAILS = frozenset({"gen_ai.provider.name", "gen_ai.request.top_k"})

#: Exception type names of a failed request -> decision.
_FAILURE_DECISIONS = {
    "InvalidActionRequest": "invalid",
    "ToolNotOfferedError": "not_offered",
    "UnknownToolError": "rejected",
    "ToolArgumentsError": "rejected",
    "RequestLimitError": "rejected",
    "TimeoutError": "timed_out",
}

#: Event-log kinds ``act()`` writes per request (each entry carries the record's ``decision``).
_LOGGED = frozenset({"action", "denied", "action_error"})

_OPERATION: contextvars.ContextVar[_Operation | None] = contextvars.ContextVar("lionops_otel_operation", default=None)
_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("lionops_otel_run", default=None)


@dataclass(slots=True, eq=False)
class _Chunks:
    """Arrival times (``perf_counter``) of a streamed answer's chunks."""

    t0: float
    first: float | None = None
    last: float | None = None
    gaps: list[float] = field(default_factory=list)

    def add(self, count: int) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        elif self.last is not None and len(self.gaps) < 100_000:
            self.gaps.append(now - self.last)
        self.gaps.extend([0.0] * max(0, min(count - 1, 100_000 - len(self.gaps))))
        self.last = now


_CHUNKS: contextvars.ContextVar[_Chunks | None] = contextvars.ContextVar("lionops_otel_chunks", default=None)


def logged_decision(branch: Any, start: int | None, request: Any) -> str | None:
    """The ``decision`` of the event-log entry ``act()`` made for ``request``
    (entries from ``start`` on), or ``None`` when it made none: the record's
    decision as logged, for a request whose ``act()`` raised before it
    returned its record."""
    logs = getattr(branch, "logs", None)
    if start is None or logs is None:
        return None
    index, function = getattr(request, "index", None), getattr(request, "function", None)
    for i in range(min(start, len(logs)), len(logs)):
        content = logs[i].content
        if logs[i].kind in _LOGGED and content.get("index") == index and content.get("function") == function:
            decision = content.get("decision")
            if isinstance(decision, str):
                return decision
    return None


def tool_decision(record: Any, error: BaseException | None) -> str:
    """The decision on one request: the typed record ``act()`` made, or, when
    ``act()`` raised for it (``suppress_errors=False``) and nothing was
    logged, the decision its exception type stands for. Never read back from
    an output's shape."""
    decision = getattr(record, "decision", None)
    if isinstance(decision, str):
        return decision
    if error is not None:
        for cls in type(error).__mro__:
            if cls.__name__ in _FAILURE_DECISIONS:
                return _FAILURE_DECISIONS[cls.__name__]
    return "error"


def provider_name(endpoint: Any) -> str | None:
    """The ``gen_ai.provider.name`` that ``endpoint`` reports
    (:attr:`~lionops.endpoints.base.Endpoint.otel_name`: the conventions'
    registered value, ``openai``, ``anthropic``, ``gcp.gemini``, ..., else the
    provider's own name); its ``provider`` when it reports none, ``None``
    when it names no provider at all."""
    for name in (getattr(endpoint, "otel_name", None), getattr(endpoint, "provider", None)):
        if isinstance(name, str) and name:
            return name
    return None


def capture_from_env(value: str | None = None) -> bool:
    """Whether :data:`CAPTURE_CONTENT_ENV` (or ``value``) turns content capture on."""
    raw = os.environ.get(CAPTURE_CONTENT_ENV, "") if value is None else value
    return raw.strip().lower() in _CAPTURE_VALUES


def usage_tokens(meta: dict[str, Any], *, anthropic: bool) -> Usage:
    """The token counts of one call from its trace facts, counted the
    conventions' way (input includes cache reads and writes, output includes
    reasoning): the call's one usage record (``meta["tokens"]``, a
    :class:`~lionops.usage.Usage` as a dict); for an endpoint that reports
    only its provider's usage object (``meta["usage"]``), that object read
    by :class:`~lionops.usage.Usage`."""
    record = meta.get("tokens")
    if isinstance(record, dict) and record:
        return Usage(input_tokens=_count(record.get("input_tokens")),
                     output_tokens=_count(record.get("output_tokens")),
                     cache_read_tokens=_count(record.get("cache_read_tokens")),
                     cache_write_tokens=_count(record.get("cache_write_tokens")),
                     reasoning_tokens=_count(record.get("reasoning_tokens")))
    raw = meta.get("usage")
    if not isinstance(raw, dict):
        return Usage()
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        return Usage.from_chat_completions(raw)
    return Usage.from_anthropic(raw) if anthropic else Usage.from_responses(raw)


def _count(value: Any) -> int | None:
    return value if _is_count(value) and value >= 0 else None


class _Scrub:
    """Secret removal for one operation: the cassette redactor, then each endpoint's ``scrub``."""

    __slots__ = ("redactor", "scrubbers")

    def __init__(self, redactor: Redactor, scrubbers: list[Any]) -> None:
        self.redactor = redactor
        self.scrubbers = scrubbers

    def add(self, model: Any) -> None:
        endpoint = getattr(model, "endpoint", model)
        scrub = getattr(endpoint, "scrub", None)
        if callable(scrub) and scrub not in self.scrubbers:
            self.scrubbers.append(scrub)

    def text(self, value: str) -> str:
        value = self.redactor.text(value)
        for scrub in self.scrubbers:
            try:
                value = scrub(value)
            except Exception:  # noqa: BLE001 - a scrubber that fails hides the text
                return "***"
        return value

    def json(self, value: Any) -> str:
        """Content as JSON, redacted and bounded (:data:`MAX_CONTENT_CHARS`)."""
        text = self.text(json.dumps(self.redactor.value(to_jsonable(value)), ensure_ascii=False))
        return _cut(text, MAX_CONTENT_CHARS)

    def error(self, exc: BaseException, content: bool) -> str:
        """``Type: message`` scrubbed; the type alone without ``content`` (a
        message may quote the answer, the arguments or a server's reply)."""
        if not content:
            return type(exc).__name__
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - an exception whose str() raises
            message = "<unprintable>"
        return self.text(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


@dataclass(slots=True, eq=False)
class _Operation:
    """Per-operation state, in a context variable for the phases' seams."""

    span: Any
    start_ns: int
    t0: float
    ctx: Any
    trace: Any
    scrub: _Scrub
    tokens: tuple[Any, Any] | None = None
    #: ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.agent.name``, ``gen_ai.request.model``
    metric_attributes: dict[str, Any] = field(default_factory=dict)
    #: input and output tokens of the operation's model calls, summed
    usage: list[int] = field(default_factory=lambda: [0, 0, 0])
    #: native tool calls of the adapter's answer: [function, arguments, id]; matched by tool spans
    native_calls: list[list[Any]] = field(default_factory=list)
    #: the run this operation is a round of (``Branch.run()``), else ``None``
    run: _Run | None = None


@dataclass(slots=True, eq=False)
class _Run:
    """Per-run state of one ``Branch.run()`` (its ``invoke_agent`` span)."""

    span: Any
    start_ns: int
    t0: float
    branch: Any
    trace: Any
    scrub: _Scrub
    metric_attributes: dict[str, Any]
    token: Any = None
    #: input and output tokens of the rounds' model calls, summed (the third: whether any was reported)
    usage: list[int] = field(default_factory=lambda: [0, 0, 0])
    rounds: int = 0


def _error_type(exc: BaseException) -> str:
    module = type(exc).__module__
    name = type(exc).__qualname__
    return name if module in ("builtins", None) else f"{module}.{name}"


def _stack(exc: BaseException, content: bool) -> str:
    """The stack trace of ``exc`` and its chain; without ``content``, each
    exception shown by its type only (no message)."""
    if content:
        return "".join(traceback.format_exception(exc))
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return "\n".join("Traceback (most recent call last):\n" + "".join(traceback.format_tb(e.__traceback__))
                     + _error_type(e) + "\n" for e in reversed(chain))


def _fail(span: Any, exc: BaseException, scrub: _Scrub, content: bool) -> None:
    """Status ERROR and an ``exception`` event, message and stack trace scrubbed;
    without ``content`` the exceptions are named by type only."""
    text = _cut(scrub.error(exc, content), MAX_CONTENT_CHARS if content else MAX_ATTRIBUTE_CHARS)
    span.set_status(Status(StatusCode.ERROR, text))
    span.set_attribute("error.type", _cut(_error_type(exc)))
    try:
        stack = _stack(exc, content)
    except Exception:  # noqa: BLE001 - formatting an exotic exception
        stack = ""
    span.add_event("exception", {
        "exception.type": _cut(_error_type(exc)),
        "exception.message": text,
        "exception.stacktrace": _cut(scrub.text(stack), MAX_CONTENT_CHARS),
    })


def _cut(value: str, limit: int = MAX_ATTRIBUTE_CHARS) -> str:
    """``value`` at most ``limit`` characters, a cut one marked as such."""
    if len(value) <= limit:
        return value
    mark = f"...[{len(value) - limit} more]"
    return value[: max(limit - len(mark), 0)] + mark


def _set(attributes: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` when ``value`` is a valid attribute value (None is skipped);
    strings are bounded (:data:`MAX_ATTRIBUTE_CHARS`)."""
    if value is None:
        return
    if isinstance(value, str):
        attributes[key] = _cut(value)
    elif isinstance(value, (bool, int, float)):
        attributes[key] = value
    elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        attributes[key] = [_cut(v) if isinstance(v, str) else v for v in value[:64]]
    else:
        attributes[key] = _cut(json.dumps(to_jsonable(value)))


def _tool_name(branch: Any, function: Any, *, cli: bool = False) -> str:
    """The exported name of a requested tool: its own when it names a tool
    registered on ``branch`` (for a CLI agent's own tool also one of the
    agent's built-in tools, or a registered tool under an MCP prefix), else
    :data:`UNKNOWN_TOOL`: never the model's text."""
    if not isinstance(function, str) or not function or len(function) > MAX_ATTRIBUTE_CHARS:
        return UNKNOWN_TOOL
    acts = getattr(branch, "acts", None)
    registered = acts is not None and acts.get(function) is not None
    if cli and not registered:
        if function in _CLI_BUILTIN_TOOLS:
            return function
        tail = function.rsplit("__", 1)[-1] if function.startswith("mcp__") else None
        registered = tail is not None and acts is not None and acts.get(tail) is not None
    return function if registered else UNKNOWN_TOOL


def _agent_attributes(branch: Any, endpoint: Any, model: Any) -> dict[str, Any]:
    """``gen_ai.operation.name`` (``invoke_agent``), ``gen_ai.agent.name`` (the
    branch's name, else :data:`AGENT_NAME`), ``gen_ai.provider.name`` and
    ``gen_ai.request.model`` of an agent invocation on ``branch``."""
    name = getattr(branch, "name", None)
    provider = getattr(endpoint, "provider", None)
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.agent.name": _cut(name) if isinstance(name, str) and name else AGENT_NAME,
                                  "gen_ai.provider.name": (provider_name(endpoint) if provider else None) or AGENT_NAME}
    _set(attributes, "gen_ai.request.model", model)
    return attributes


def _endpoint_of(ctx: Any) -> Any:
    model = getattr(ctx.chat_param, "imodel", None) or getattr(ctx.branch, "chat_model", None)
    return getattr(model, "endpoint", model)


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    text = content if isinstance(content, str) else json.dumps(to_jsonable(content))
    return [{"type": "text", "content": text}]


class OpenTelemetryObserver:
    """The observer ``lionops.instrument()`` registers (see the module docstring)."""

    def __init__(self, tracer_provider: Any = None, *, meter_provider: Any = None, logger_provider: Any = None,
                 capture_content: bool = False) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.logger_provider = logger_provider
        self.capture_content = capture_content
        self.tracer = otel_trace.get_tracer("lionops", __version__, tracer_provider, schema_url=SCHEMA_URL)
        self.events = otel_logs.get_logger("lionops", __version__, logger_provider, schema_url=SCHEMA_URL)
        meter = otel_metrics.get_meter("lionops", __version__, meter_provider, schema_url=SCHEMA_URL)
        def histogram(name: str, unit: str, description: str, buckets: tuple[float, ...]) -> Any:
            return meter.create_histogram(name, unit=unit, description=description,
                                          explicit_bucket_boundaries_advisory=list(buckets))

        self.duration = histogram("gen_ai.client.operation.duration", "s", "GenAI operation duration.",
                                  DURATION_BUCKETS)
        self.token_usage = histogram("gen_ai.client.token.usage", "{token}",
                                     "Number of input and output tokens used.", TOKEN_BUCKETS)
        self.time_to_first_chunk = histogram("gen_ai.client.operation.time_to_first_chunk", "s",
                                             "Time to receive the first chunk of a streamed answer.", CHUNK_BUCKETS)
        self.time_per_output_chunk = histogram("gen_ai.client.operation.time_per_output_chunk", "s",
                                               "Time between consecutive chunks of a streamed answer.", CHUNK_BUCKETS)
        self.agent_duration = histogram("gen_ai.invoke_agent.duration", "s",
                                        "Duration of one operate() as an agent run.", DURATION_BUCKETS)
        self.tool_duration = histogram("gen_ai.execute_tool.duration", "s",
                                       "Duration of one tool request through act().", DURATION_BUCKETS)
        self.operation_duration = histogram("lionops.operation.duration", "s", "Duration of one operate() call.",
                                            DURATION_BUCKETS)
        self.exits = meter.create_counter(
            "lionops.operation.exits", unit="{operation}", description="operate() calls by exit trigger.")
        self.redactor = Redactor()

    def __repr__(self) -> str:
        return (f"OpenTelemetryObserver(tracer_provider={self.tracer_provider!r}, "
                f"meter_provider={self.meter_provider!r}, logger_provider={self.logger_provider!r}, "
                f"capture_content={self.capture_content})")

    # ------------------------------------------------------------ helpers

    def _scrub_for(self, *models: Any) -> _Scrub:
        scrub = _Scrub(self.redactor, [])
        for model in models:
            if model is not None:
                scrub.add(model)
        return scrub

    @staticmethod
    def _enter(span: Any) -> Any:
        return otel_context.attach(otel_trace.set_span_in_context(span))

    @staticmethod
    def _leave(token: Any) -> None:
        if token is not None:
            otel_context.detach(token)

    def _release(self, var: contextvars.ContextVar[Any], tokens: tuple[Any, Any]) -> None:
        """Undo what a start set: ``var`` back, the span no longer current."""
        context_token, var_token = tokens
        try:
            var.reset(var_token)
        except ValueError:  # ended in another context: nothing of ours is current there
            pass
        self._leave(context_token)

    # ------------------------------------------------------------ operation

    def operation_start(self, ctx: Any, engine: Any, trace: Any) -> _Operation:
        branch = ctx.branch
        start_ns = time.time_ns()
        endpoint = _endpoint_of(ctx)
        attributes = _agent_attributes(branch, endpoint, _model_of(ctx, endpoint))
        agent = attributes["gen_ai.agent.name"]
        metric_attributes = dict(attributes)
        attributes.update({
            "gen_ai.conversation.id": str(getattr(branch, "id", "")),
            "lionops.machine": getattr(trace, "machine", "operate"),
            "lionops.engine": getattr(engine, "name", type(engine).__name__),
            "lionops.branch.id": str(getattr(branch, "id", "")),
        })
        run = _RUN.get()
        # a round of the run of this branch (not an operation a tool of a round started)
        if run is not None and run.branch is branch and _OPERATION.get() is None:
            run.rounds += 1
            del attributes["gen_ai.operation.name"]
            attributes["lionops.round"] = run.rounds
            span_name = f"round {run.rounds}"
        else:
            run = None
            span_name = f"invoke_agent {agent}"
        span = self.tracer.start_span(span_name, kind=SpanKind.INTERNAL, start_time=start_ns, attributes=attributes)
        scrub = self._scrub_for(getattr(branch, "chat_model", None), getattr(branch, "parse_model", None))
        op = _Operation(span, start_ns, time.perf_counter(), ctx, trace, scrub, metric_attributes=metric_attributes,
                        run=run)
        op.tokens = (self._enter(span), _OPERATION.set(op))
        return op

    def operation_end(self, op: _Operation, result: Any, error: BaseException | None) -> None:
        if op.tokens is not None:
            self._release(_OPERATION, op.tokens)
        span, ctx, trace, scrub = op.span, op.ctx, op.trace, op.scrub
        self._transition_events(span, trace, scrub, op.start_ns)
        self._approval_events(span, ctx, trace, scrub)
        model_class = getattr(ctx, "model_class", None)
        caller_model = getattr(model_class, "__name__", None)
        attributes: dict[str, Any] = {}
        if op.usage[2]:
            attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = op.usage[:2]
        _set(attributes, "lionops.exit", trace.exit)
        _set(attributes, "lionops.terminal", trace.terminal)
        attributes["lionops.states"] = list(trace.states)
        _set(attributes, "lionops.middle", getattr(ctx, "middle_name", None))
        _set(attributes, "lionops.caller_model", caller_model)
        _set(attributes, "lionops.handle_validation", getattr(ctx, "handle_validation", None))
        requests = getattr(ctx, "responses", None)
        if requests is not None:
            attributes["lionops.action_requests"] = len(requests)
        span.set_attributes(attributes)
        if self.capture_content and error is None:
            span.set_attribute("lionops.result", scrub.json(result))
        metric_attributes: dict[str, Any] = {"lionops.exit": trace.exit or "none"}
        agent_attributes = dict(op.metric_attributes)
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
            metric_attributes["error.type"] = agent_attributes["error.type"] = _error_type(error)
        elapsed = time.perf_counter() - op.t0
        self.exits.add(1, metric_attributes)
        self.operation_duration.record(elapsed, metric_attributes)
        if op.run is None:
            self.agent_duration.record(elapsed, agent_attributes)
        else:  # the run is the agent invocation: its span sums the rounds' tokens
            for i in range(3):
                op.run.usage[i] += op.usage[i]
        span.end()

    def _transition_events(self, span: Any, trace: Any, scrub: _Scrub, start_ns: int) -> None:
        """One event per fired transition of ``trace``, named by its trigger,
        with the guards evaluated, stamped when it fired."""
        for rec in trace.transitions:
            attributes: dict[str, Any] = {
                "lionops.transition.source": rec.source,
                "lionops.transition.dest": rec.dest,
                "lionops.phase.duration_ms": rec.phase_ns / 1e6,
            }
            for guard, value in rec.guards.items():
                attributes[f"lionops.guard.{guard}"] = bool(value)
            if rec.error is not None:
                error_text = rec.error if self.capture_content else rec.error.split(":", 1)[0]
                attributes["lionops.transition.error"] = _cut(scrub.text(error_text),
                                                              MAX_CONTENT_CHARS if self.capture_content
                                                              else MAX_ATTRIBUTE_CHARS)
            span.add_event(rec.trigger, attributes, timestamp=start_ns + rec.at_ns)

    # ------------------------------------------------------------ run

    def _run_start(self, facts: dict[str, Any]) -> _Run:
        """The ``invoke_agent {agent}`` span of one ``Branch.run()`` (the step ``run``)."""
        branch, run_trace = facts.get("branch"), facts.get("run_trace")
        start_ns = time.time_ns()
        model = facts.get("chat_model")
        endpoint = getattr(model, "endpoint", model)
        attributes = _agent_attributes(branch, endpoint, getattr(endpoint, "model", None))
        metric_attributes = dict(attributes)
        attributes.update({
            "gen_ai.conversation.id": str(getattr(branch, "id", "")),
            "lionops.machine": "run",
            "lionops.branch.id": str(getattr(branch, "id", "")),
        })
        _set(attributes, "lionops.engine", getattr(getattr(run_trace, "trace", None), "engine", None))
        _set(attributes, "lionops.max_rounds", facts.get("max_rounds"))
        span = self.tracer.start_span(f"invoke_agent {attributes['gen_ai.agent.name']}", kind=SpanKind.INTERNAL,
                                      start_time=start_ns, attributes=attributes)
        scrub = self._scrub_for(model, getattr(branch, "chat_model", None), getattr(branch, "parse_model", None))
        run = _Run(span, start_ns, time.perf_counter(), branch, run_trace, scrub, metric_attributes)
        run.token = (self._enter(span), _RUN.set(run))
        return run

    def _run_end(self, run: _Run, result: Any, error: BaseException | None) -> None:
        self._release(_RUN, run.token)
        span, scrub = run.span, run.scrub
        trace = getattr(run.trace, "trace", None)
        attributes: dict[str, Any] = {"lionops.rounds": run.rounds}
        if trace is not None:
            self._transition_events(span, trace, scrub, run.start_ns)
            _set(attributes, "lionops.exit", trace.exit)
            _set(attributes, "lionops.terminal", trace.terminal)
            attributes["lionops.states"] = list(trace.states)
        if run.usage[2]:
            attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = run.usage[:2]
        span.set_attributes(attributes)
        if self.capture_content and error is None:
            span.set_attribute("lionops.result", scrub.json(result))
        agent_attributes = dict(run.metric_attributes)
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
            agent_attributes["error.type"] = _error_type(error)
        self.agent_duration.record(time.perf_counter() - run.t0, agent_attributes)
        span.end()

    def _approval_events(self, span: Any, ctx: Any, trace: Any, scrub: Any) -> None:
        """One ``lionops.approval`` event per decision on a deferred call (who
        and why only with content capture: they are people's words)."""
        branch = getattr(ctx, "branch", None)
        for note in (trace.meta or {}).get("approvals") or ():
            if not isinstance(note, dict):
                continue
            attributes: dict[str, Any] = {
                "lionops.approval.decision": str(note.get("decision")),
                "gen_ai.tool.name": _tool_name(branch, note.get("function")),
            }
            _set(attributes, "gen_ai.tool.call.id", note.get("call_id"))
            _set(attributes, "lionops.approval.decided_at", note.get("decided_at"))
            if self.capture_content:
                if note.get("by") is not None:  # a durable approval that timed out was decided by no one
                    _set(attributes, "lionops.approval.by", _cut(scrub.text(str(note["by"]))))
                if note.get("reason") is not None:
                    _set(attributes, "lionops.approval.reason", _cut(scrub.text(str(note["reason"]))))
            span.add_event("lionops.approval", attributes)

    # ------------------------------------------------------------ adapter

    def adapter_start(self, ctx: Any) -> tuple[Any, ...]:
        op = _OPERATION.get()
        endpoint = _endpoint_of(ctx)
        scrub = op.scrub if op is not None else self._scrub_for()
        scrub.add(endpoint)
        provider = getattr(endpoint, "provider", None)
        cli = getattr(endpoint, "is_cli", False) is True
        model = _model_of(ctx, endpoint)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent" if cli else "chat"}
        if provider:
            attributes["gen_ai.provider.name"] = _cut(provider_name(endpoint) or provider)
            attributes["lionops.provider"] = _cut(provider)
        if cli:
            _set(attributes, "gen_ai.agent.name", provider)
        _set(attributes, "gen_ai.request.model", model)
        _request_options(attributes, getattr(ctx.chat_param, "imodel_kw", None) or {})
        stream = getattr(endpoint, "stream", False) is True
        if stream:
            attributes["gen_ai.request.stream"] = True
        if not cli:
            has_format = getattr(ctx.chat_param, "response_format", None) is not None
            attributes["gen_ai.output.type"] = "json" if has_format else "text"
        _set(attributes, "lionops.middle", getattr(ctx, "middle_name", None))
        _server(attributes, getattr(endpoint, "base_url", None), scrub)
        if op is not None:
            attributes["gen_ai.conversation.id"] = _cut(str(getattr(op.ctx.branch, "id", "")))
        if cli:
            attributes["lionops.cli"] = True
        metric_attributes = {k: v for k, v in attributes.items()
                             if k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                                      "server.address", "server.port")}
        verb = attributes["gen_ai.operation.name"]
        target = provider if cli else model
        span = self.tracer.start_span(_cut(f"{verb} {target}") if target else verb,
                                      kind=SpanKind.CLIENT, attributes=attributes)
        chunks = _Chunks(time.perf_counter())
        chunk_token = _CHUNKS.set(chunks)
        return span, self._enter(span), chunks.t0, metric_attributes, scrub, op, (chunks, chunk_token, stream)

    def adapter_end(self, handle: tuple[Any, ...], result: Any, error: BaseException | None) -> None:
        span, token, t0, metric_attributes, scrub, op, (chunks, chunk_token, stream) = handle
        self._leave(token)
        try:
            _CHUNKS.reset(chunk_token)
        except ValueError:  # ended in another context
            pass
        from ..trace import current_meta

        meta = current_meta()
        if meta is None:
            meta = getattr(op.ctx, "meta", None) if op is not None else None
        meta = meta or {}
        raw_cli = meta.get("cli")
        cli: dict[str, Any] | None = raw_cli if isinstance(raw_cli, dict) else None
        anthropic = cli is not None or metric_attributes.get("gen_ai.provider.name") == "anthropic"
        tokens = usage_tokens(meta, anthropic=anthropic)
        attributes = _answer_attributes(meta, cli, tokens)
        if metric_attributes.get("gen_ai.operation.name") == "invoke_agent":
            for key, own in _NOT_ON_AGENT_SPANS.items():  # the agent span lists none of these
                if key in attributes:
                    attributes[own] = attributes.pop(key)
        if stream and error is not None:
            attributes["gen_ai.response.finish_reasons"] = ["error"]
        if chunks.first is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = chunks.first - chunks.t0
        _retry_events(span, meta.get("http_retries") or [])
        span.set_attributes(attributes)
        if op is not None and result is not None:
            op.native_calls = _native_calls(op.ctx.branch)
        if op is not None and _is_count(tokens.input_tokens) and _is_count(tokens.output_tokens):
            op.usage[0] += tokens.input_tokens
            op.usage[1] += tokens.output_tokens
            op.usage[2] = 1
        if self.capture_content and op is not None:
            self._chat_content(span, op.ctx, scrub)
        response_model = attributes.get("gen_ai.response.model", attributes.get("lionops.response.model"))
        if response_model:
            metric_attributes = {**metric_attributes, "gen_ai.response.model": response_model}
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
            metric_attributes = {**metric_attributes, "error.type": _error_type(error)}
            self._exception_event(span, error, scrub, metric_attributes)
        elif self.capture_content and metric_attributes.get("gen_ai.operation.name") == "chat":
            self._details_event(span)
        self._chat_metrics(t0, metric_attributes, tokens, chunks)
        span.end()

    def _chat_metrics(self, t0: float, metric_attributes: dict[str, Any], tokens: Usage, chunks: _Chunks) -> None:
        self.duration.record(time.perf_counter() - t0, metric_attributes)
        for kind, count in (("input", tokens.input_tokens), ("output", tokens.output_tokens)):
            if _is_count(count):
                self.token_usage.record(count, {**metric_attributes, "gen_ai.token.type": kind})
        if chunks.first is not None:
            chunk_attributes = {k: v for k, v in metric_attributes.items() if k != "error.type"}
            self.time_to_first_chunk.record(chunks.first - chunks.t0, chunk_attributes)
            for gap in chunks.gaps:
                self.time_per_output_chunk.record(gap, chunk_attributes)

    def _details_event(self, span: Any) -> None:
        """``gen_ai.client.inference.operation.details``: the inference span's
        attributes, content included (only with content capture)."""
        attributes = dict(getattr(span, "attributes", None) or {})
        self.events.emit(event_name="gen_ai.client.inference.operation.details",
                         context=otel_trace.set_span_in_context(span),
                         severity_number=otel_logs.SeverityNumber.INFO,
                         attributes={k: v for k, v in attributes.items()
                                     if k.startswith(("gen_ai.", "server.")) and k not in _NOT_ON_DETAILS})

    def _exception_event(self, span: Any, error: BaseException, scrub: _Scrub,
                         metric_attributes: dict[str, Any]) -> None:
        """``gen_ai.client.operation.exception`` (severity WARN), the message
        only with content capture, as on the span."""
        attributes: dict[str, Any] = {
            "exception.type": _cut(_error_type(error)),
            "exception.message": _cut(scrub.error(error, self.capture_content),
                                      MAX_CONTENT_CHARS if self.capture_content else MAX_ATTRIBUTE_CHARS),
            **metric_attributes,
        }
        self.events.emit(event_name="gen_ai.client.operation.exception",
                         context=otel_trace.set_span_in_context(span),
                         severity_number=otel_logs.SeverityNumber.WARN, severity_text="WARN",
                         attributes=attributes)

    def _chat_content(self, span: Any, ctx: Any, scrub: _Scrub) -> None:
        """``gen_ai.system_instructions``, ``gen_ai.input.messages`` (the whole
        history sent, in order), ``gen_ai.output.messages`` and
        ``gen_ai.tool.definitions`` (JSON, redacted)."""
        messages = list(getattr(ctx.branch, "messages", ()))
        turn = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
        if turn is None:
            return
        system = [part for m in messages if m.role == "system" for part in _text_parts(m.content)]
        if system:
            span.set_attribute("gen_ai.system_instructions", scrub.json(system))
        sent = [_input_message(m) for m in messages[: turn + 1] if m.role != "system"]
        span.set_attribute("gen_ai.input.messages", scrub.json([m for m in sent if m is not None]))
        output = [_output_message(m) for m in messages[turn + 1:] if m.role == "assistant"]
        if output:
            span.set_attribute("gen_ai.output.messages", scrub.json(output))
        schemas = getattr(ctx.chat_param, "tool_schemas", None)
        if schemas:
            span.set_attribute("gen_ai.tool.definitions", scrub.json([_tool_definition(t) for t in schemas]))

    # ------------------------------------------------------------ tools

    def tool_start(self, branch: Any, request: Any) -> tuple[Any, ...]:
        op = _OPERATION.get()
        scrub = op.scrub if op is not None else self._scrub_for(getattr(branch, "chat_model", None))
        function = getattr(request, "function", None)
        name = _tool_name(branch, function)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        _set(attributes, "lionops.tool.index", getattr(request, "index", None))
        if name == UNKNOWN_TOOL and self.capture_content and isinstance(function, str):
            attributes["lionops.tool.requested_name"] = _cut(scrub.text(function))
        tool = branch.acts.get(name) if name != UNKNOWN_TOOL else None
        if tool is not None and getattr(tool, "description", None):
            attributes["gen_ai.tool.description"] = _cut(scrub.text(str(tool.description)))
        extra = getattr(tool, "span_attributes", None)  # an MCP tool's (lionops.mcp): mcp.method.name, ...
        if isinstance(extra, dict):
            attributes.update(extra)
        call_id = _take_call_id(op, function, getattr(request, "arguments", None)) if op is not None else None
        _set(attributes, "gen_ai.tool.call.id", call_id)
        span = self.tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes)
        logs = getattr(branch, "logs", None)
        return (span, self._enter(span), request, scrub, branch, None if logs is None else len(logs),
                time.perf_counter())

    def tool_end(self, handle: tuple[Any, ...], response: Any, error: BaseException | None) -> None:
        span, token, request, scrub, branch, start, t0 = handle
        self._leave(token)
        decision = (getattr(response, "decision", None) or logged_decision(branch, start, request)
                    or tool_decision(response, error))
        span.set_attribute("lionops.tool.decision", decision if decision in DECISIONS else "error")
        if decision == "not_offered":  # registered, but not shown to the model in this call
            span.update_name(f"execute_tool {UNKNOWN_TOOL}")
            span.set_attribute("gen_ai.tool.name", UNKNOWN_TOOL)
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", scrub.json(getattr(request, "arguments", None)))
            if response is not None:
                span.set_attribute("gen_ai.tool.call.result", scrub.json(getattr(response, "output", None)))
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
        elif decision in ("error", "timed_out"):
            output = getattr(response, "output", None) or {}
            message = output.get("error", decision) if self.capture_content else output.get("type") or decision
            span.set_status(Status(StatusCode.ERROR, _cut(scrub.text(str(message)),
                                                          MAX_CONTENT_CHARS if self.capture_content
                                                          else MAX_ATTRIBUTE_CHARS)))
            span.set_attribute("error.type", _cut(str(output.get("type") or decision)))
        metric_attributes = {"gen_ai.operation.name": "execute_tool",
                             "gen_ai.tool.name": UNKNOWN_TOOL if decision == "not_offered" else _tool_name_of(span)}
        error_type = (getattr(span, "attributes", None) or {}).get("error.type")
        if error_type:
            metric_attributes["error.type"] = error_type
        self.tool_duration.record(time.perf_counter() - t0, metric_attributes)
        span.end()

    # ------------------------------------------------------------ steps and notes

    def step_start(self, name: str, facts: dict[str, Any]) -> Any:
        if name == "run":
            return self._run_start(facts)
        op = _OPERATION.get()
        attributes: dict[str, Any] = {}
        for key, value in facts.items():
            _set(attributes, f"lionops.{name}.{key}", value)
        span = self.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
        return span, self._enter(span), op.scrub if op is not None else self._scrub_for()

    def step_end(self, handle: Any, result: Any, error: BaseException | None) -> None:
        if isinstance(handle, _Run):
            self._run_end(handle, result, error)
            return
        span, token, scrub = handle
        self._leave(token)
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
        span.end()

    def note(self, name: str, facts: dict[str, Any]) -> None:
        if name == "run_end":  # the run span's own attributes say it (lionops.exit, lionops.rounds)
            return
        if name == "stream_chunk":
            chunks = _CHUNKS.get()
            if chunks is not None:
                chunks.add(facts.get("count", 1) if _is_count(facts.get("count")) else 1)
            return
        span = otel_trace.get_current_span()
        if not span.is_recording():
            return
        if name == "cli_tool":
            self._cli_tool(span, facts["event"])
            return
        attributes: dict[str, Any] = {}
        for key, value in facts.items():
            _set(attributes, f"lionops.{name}.{key}", value)
        span.add_event(name, attributes)

    def _cli_tool(self, span: Any, event: Any) -> None:
        """A CLI agent's own tool call (request or result) as an event on the chat span."""
        op = _OPERATION.get()
        scrub = op.scrub if op is not None else self._scrub_for()
        attributes: dict[str, Any] = {}
        branch = op.ctx.branch if op is not None else None
        _set(attributes, "gen_ai.tool.name", _tool_name(branch, event.function, cli=True))
        if self.capture_content and isinstance(event.function, str) and attributes["gen_ai.tool.name"] == UNKNOWN_TOOL:
            attributes["lionops.tool.requested_name"] = _cut(scrub.text(event.function))
        _set(attributes, "gen_ai.tool.call.id", event.call_id)
        _set(attributes, "lionops.cli.tool.parent_call_id", event.parent)
        if event.kind == "request":
            if self.capture_content:
                attributes["gen_ai.tool.call.arguments"] = scrub.json(event.arguments)
            span.add_event("cli_tool_call", attributes)
        else:
            attributes["lionops.cli.tool.is_error"] = bool(event.is_error)
            if self.capture_content:
                attributes["gen_ai.tool.call.result"] = scrub.json(event.output)
            span.add_event("cli_tool_result", attributes)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _native_calls(branch: Any) -> list[list[Any]]:
    """``[function, arguments, id]`` of the native tool calls on the latest assistant message."""
    messages = getattr(branch, "messages", ())
    for i in range(len(messages) - 1, -1, -1):  # from the end, without copying the history
        message = messages[i]
        if message.role == "assistant":
            calls = message.metadata.get("tool_calls") or []
            return [[c.get("function"), c.get("arguments"), c.get("id")] for c in calls
                    if isinstance(c, dict) and c.get("id")]
        if message.role == "user":
            break
    return []


def _take_call_id(op: _Operation, function: Any, arguments: Any) -> str | None:
    """The id of the first unclaimed native tool call with this function and arguments."""
    for entry in op.native_calls:
        if entry[0] == function and entry[1] == arguments and entry[2] is not None:
            call_id, entry[2] = entry[2], None
            return str(call_id)
    return None


def _retry_events(span: Any, retries: list[Any]) -> None:
    """One ``http_retry`` event per retried HTTP request."""
    for number, retry in enumerate(retries, 1):
        if isinstance(retry, dict):
            event: dict[str, Any] = {"lionops.http.retry": number}
            _set(event, "http.response.status_code", retry.get("status"))
            _set(event, "lionops.http.retry_delay_s", retry.get("delay_s"))
            span.add_event("http_retry", event)


def _model_of(ctx: Any, endpoint: Any) -> Any:
    """The model asked for: an ``operate(model=...)`` option wins over the endpoint's."""
    options = getattr(getattr(ctx, "chat_param", None), "imodel_kw", None) or {}
    return options.get("model") if isinstance(options.get("model"), str) else getattr(endpoint, "model", None)


def _request_options(attributes: dict[str, Any], options: dict[str, Any]) -> None:
    """The request options a call set, as GenAI request attributes."""
    for option, key in _REQUEST_OPTIONS:
        value = options.get(option)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes.setdefault(key, value)
    stop = options.get("stop", options.get("stop_sequences"))
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, (list, tuple)) and stop and all(isinstance(s, str) for s in stop):
        attributes["gen_ai.request.stop_sequences"] = [_cut(s) for s in stop[:64]]
    count = options.get("n", options.get("candidate_count"))
    if _is_count(count) and count != 1:
        attributes["gen_ai.request.choice.count"] = count


def _server(attributes: dict[str, Any], base_url: Any, scrub: _Scrub) -> None:
    """``server.address`` and ``server.port`` of an API endpoint (never its credentials or query)."""
    if not isinstance(base_url, str) or not base_url:
        return
    try:
        parts = urlsplit(scrub.redactor.url(base_url))
        _set(attributes, "server.address", parts.hostname)
        _set(attributes, "server.port", parts.port or (443 if parts.scheme == "https" else 80))
    except ValueError:
        pass


def _answer_attributes(meta: dict[str, Any], cli: dict[str, Any] | None, tokens: Usage) -> dict[str, Any]:
    """The chat span's attributes from the call's trace facts."""
    attributes: dict[str, Any] = {}
    _set(attributes, "gen_ai.usage.input_tokens", tokens.input_tokens)
    _set(attributes, "gen_ai.usage.output_tokens", tokens.output_tokens)
    _set(attributes, "gen_ai.usage.cache_read.input_tokens", tokens.cache_read_tokens)
    _set(attributes, "gen_ai.usage.cache_creation.input_tokens", tokens.cache_write_tokens)
    _set(attributes, "gen_ai.usage.reasoning.output_tokens", tokens.reasoning_tokens)
    _set(attributes, "gen_ai.response.model", meta.get("model") or (cli or {}).get("model"))
    _set(attributes, "gen_ai.response.id", meta.get("response_id"))
    if meta.get("finish_reason"):
        attributes["gen_ai.response.finish_reasons"] = [_cut(str(meta["finish_reason"]))]
    _set(attributes, "lionops.http.attempts", meta.get("http_attempts"))
    if meta.get("http_attempts") is not None:
        attributes["lionops.http.retries"] = len(meta.get("http_retries") or [])
    _set(attributes, "lionops.structured_output", meta.get("structured_output"))
    _set(attributes, "lionops.tool_calls", meta.get("tool_calls"))
    _set(attributes, "lionops.cost_usd", meta.get("cost_usd"))
    if cli is not None:
        for key in ("session_id", "exit_code", "subtype", "num_turns", "duration_ms"):
            _set(attributes, f"lionops.cli.{key}", cli.get(key))
        _set(attributes, "lionops.cli.tool_calls", cli.get("cli_tool_calls"))
    return attributes


def _arguments(value: Any) -> Any:
    """Tool-call arguments as an object: a JSON text is parsed, anything else kept."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _input_message(message: Any) -> dict[str, Any] | None:
    """One message of the history sent, in the conventions' shape."""
    role = message.role
    if role == "assistant":
        return _output_message(message)
    if role == "action_response":
        content = message.content if isinstance(message.content, dict) else {}
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message.metadata.get("call_id"),
                                           "response": content.get("output", message.content)}]}
    if role == "action_request":
        return None  # implied by its response, as sent
    return {"role": "user", "parts": _text_parts(message.content)}


def _output_message(message: Any) -> dict[str, Any]:
    parts = _text_parts(message.content)
    for call in message.metadata.get("tool_calls") or []:
        if isinstance(call, dict):
            parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("function"),
                          "arguments": _arguments(call.get("arguments"))})
    entry: dict[str, Any] = {"role": "assistant", "parts": parts}
    if message.metadata.get("finish_reason"):
        entry["finish_reason"] = message.metadata["finish_reason"]
    return entry


def _tool_definition(schema: Any) -> Any:
    """An offered tool schema (Chat Completions shape) as a ``gen_ai.tool.definitions`` entry."""
    if isinstance(schema, dict) and isinstance(schema.get("function"), dict):
        function = schema["function"]
        return {"type": schema.get("type", "function"), "name": function.get("name"),
                "description": function.get("description"), "parameters": function.get("parameters")}
    return schema


def _tool_name_of(span: Any) -> str:
    """The ``gen_ai.tool.name`` a tool span carries."""
    value = (getattr(span, "attributes", None) or {}).get("gen_ai.tool.name")
    return value if isinstance(value, str) else UNKNOWN_TOOL
