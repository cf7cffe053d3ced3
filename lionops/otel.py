"""OpenTelemetry export of ``operate()`` (imported only by ``lionops.instrument()``).

One trace per ``operate()``:

- ``operate [CallerModel]`` (INTERNAL): the root span. Attributes: exit
  trigger, terminal state, states visited, engine, middle, caller model.
  Every fired transition is a span event named by its trigger, carrying the
  guards evaluated (``lionops.guard.<name>``: value), at the moment it fired.
  Status ERROR, with the exception recorded (secrets scrubbed; its message,
  which may quote content, only with ``capture_content``), when the call raised.
- ``chat {model}`` (CLIENT): the adapter call, GenAI semantic conventions
  (``gen_ai.*``), HTTP attempts and retries; for a CLI agent its session id
  and its own tool uses as events.
- ``execute_tool {tool}`` (INTERNAL): one per action request, with the
  decision (``lionops.tool.decision``) and hooks as events.
- ``writeback`` (INTERNAL): the context-provider offer before enrichment.

Metrics: ``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``
(GenAI conventions, advised buckets), ``lionops.operation.duration`` and the
counter ``lionops.operation.exits`` by exit trigger.

Content (instructions, answers, tool arguments and outputs, and exception
messages, which may quote them) is recorded only with ``capture_content=True``.
Without it no model-chosen text reaches a span name or attribute: a tool
name is exported only when it names a tool registered on the branch (a CLI
agent's own tool: one of its built-in tools or a registered one), anything
else as :data:`UNKNOWN_TOOL`; span names have a fixed form. Every string
attribute is bounded (:data:`MAX_ATTRIBUTE_CHARS`, content
:data:`MAX_CONTENT_CHARS`).
Secrets never are: every text that reaches a span goes through the cassette
:class:`~lionops.replay.redact.Redactor` and the endpoints' own ``scrub``.
"""

from __future__ import annotations

import contextvars
import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._version import __version__
from .messages import to_jsonable
from .replay.redact import Redactor

__all__ = ["OpenTelemetryObserver", "logged_decision", "tool_decision", "DECISIONS", "SCHEMA_URL",
           "UNKNOWN_TOOL", "MAX_ATTRIBUTE_CHARS", "MAX_CONTENT_CHARS"]

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
SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"

#: ``lionops.tool.decision`` values.
DECISIONS = ("allowed", "denied", "invalid", "rejected", "not_offered", "error", "timed_out", "deferred",
             "over_limit")

#: GenAI conventions: advised buckets of ``gen_ai.client.operation.duration`` (s).
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
#: GenAI conventions: advised buckets of ``gen_ai.client.token.usage``.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

#: lionops provider names whose GenAI ``gen_ai.provider.name`` differs.
_PROVIDER_NAMES = {"claude_code": "anthropic", "codex": "openai", "openai_responses": "openai", "google": "gcp.gemini"}

#: Numeric request options (``operate()`` keywords) -> their GenAI request attribute.
_REQUEST_OPTIONS = (
    ("max_completion_tokens", "gen_ai.request.max_tokens"), ("max_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"), ("top_p", "gen_ai.request.top_p"),
    ("seed", "gen_ai.request.seed"), ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
)

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
    #: native tool calls of the adapter's answer: [function, arguments, id]; matched by tool spans
    native_calls: list[list[Any]] = field(default_factory=list)


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

    def __init__(self, tracer_provider: Any = None, *, meter_provider: Any = None,
                 capture_content: bool = False) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.capture_content = capture_content
        self.tracer = otel_trace.get_tracer("lionops", __version__, tracer_provider, schema_url=SCHEMA_URL)
        meter = otel_metrics.get_meter("lionops", __version__, meter_provider, schema_url=SCHEMA_URL)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS))
        self.operation_duration = meter.create_histogram(
            "lionops.operation.duration", unit="s", description="Duration of one operate() call.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
        self.exits = meter.create_counter(
            "lionops.operation.exits", unit="{operation}", description="operate() calls by exit trigger.")
        self.redactor = Redactor()

    def __repr__(self) -> str:
        return (f"OpenTelemetryObserver(tracer_provider={self.tracer_provider!r}, "
                f"meter_provider={self.meter_provider!r}, capture_content={self.capture_content})")

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

    # ------------------------------------------------------------ operation

    def operation_start(self, ctx: Any, engine: Any, trace: Any) -> _Operation:
        branch = ctx.branch
        start_ns = time.time_ns()
        span = self.tracer.start_span("operate", kind=SpanKind.INTERNAL, start_time=start_ns, attributes={
            "lionops.machine": getattr(trace, "machine", "operate"),
            "lionops.engine": getattr(engine, "name", type(engine).__name__),
            "lionops.branch.id": str(getattr(branch, "id", "")),
        })
        scrub = self._scrub_for(getattr(branch, "chat_model", None), getattr(branch, "parse_model", None))
        op = _Operation(span, start_ns, time.perf_counter(), ctx, trace, scrub)
        op.tokens = (self._enter(span), _OPERATION.set(op))
        return op

    def operation_end(self, op: _Operation, result: Any, error: BaseException | None) -> None:
        if op.tokens is not None:
            context_token, op_token = op.tokens
            try:
                _OPERATION.reset(op_token)
            except ValueError:  # ended in another context: nothing of ours is current there
                pass
            self._leave(context_token)
        span, ctx, trace, scrub = op.span, op.ctx, op.trace, op.scrub
        records = trace.transitions
        for rec in records:
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
            span.add_event(rec.trigger, attributes, timestamp=op.start_ns + rec.at_ns)
        self._approval_events(span, ctx, trace, scrub)
        model_class = getattr(ctx, "model_class", None)
        caller_model = getattr(model_class, "__name__", None)
        if caller_model:
            span.update_name(_cut(f"operate {caller_model}"))
        attributes = {}
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
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
            metric_attributes["error.type"] = _error_type(error)
        self.exits.add(1, metric_attributes)
        self.operation_duration.record(time.perf_counter() - op.t0, metric_attributes)
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
                _set(attributes, "lionops.approval.by", _cut(scrub.text(str(note.get("by")))))
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
        options = getattr(ctx.chat_param, "imodel_kw", None) or {}
        model = options.get("model") if isinstance(options.get("model"), str) else getattr(endpoint, "model", None)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if provider:
            attributes["gen_ai.provider.name"] = _PROVIDER_NAMES.get(provider, provider)
            attributes["lionops.provider"] = provider
        _set(attributes, "gen_ai.request.model", model)
        for option, key in _REQUEST_OPTIONS:
            if isinstance(options.get(option), (int, float)) and not isinstance(options.get(option), bool):
                attributes.setdefault(key, options[option])
        if getattr(endpoint, "stream", False) is True:
            attributes["gen_ai.request.stream"] = True
        if not getattr(endpoint, "is_cli", False):
            has_format = getattr(ctx.chat_param, "response_format", None) is not None
            attributes["gen_ai.output.type"] = "json" if has_format else "text"
        _set(attributes, "lionops.middle", getattr(ctx, "middle_name", None))
        base_url = getattr(endpoint, "base_url", None)
        if isinstance(base_url, str) and base_url:
            try:
                from urllib.parse import urlsplit

                parts = urlsplit(scrub.redactor.url(base_url))
                _set(attributes, "server.address", parts.hostname)
                _set(attributes, "server.port", parts.port or (443 if parts.scheme == "https" else 80))
            except ValueError:
                pass
        if getattr(endpoint, "is_cli", False):
            attributes["lionops.cli"] = True
        metric_attributes = {k: v for k, v in attributes.items()
                             if k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                                      "server.address", "server.port")}
        span = self.tracer.start_span(_cut(f"chat {model}") if model else "chat", kind=SpanKind.CLIENT,
                                      attributes=attributes)
        return span, self._enter(span), time.perf_counter(), metric_attributes, scrub, op

    def adapter_end(self, handle: tuple[Any, ...], result: Any, error: BaseException | None) -> None:
        span, token, t0, metric_attributes, scrub, op = handle
        self._leave(token)
        from .trace import current_meta

        meta = current_meta()
        if meta is None:
            meta = getattr(op.ctx, "meta", None) if op is not None else None
        meta = meta or {}
        attributes: dict[str, Any] = {}
        raw_cli, raw_usage = meta.get("cli"), meta.get("usage")
        cli: dict[str, Any] | None = raw_cli if isinstance(raw_cli, dict) else None
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        input_tokens = usage.get("prompt_tokens", usage.get("input_tokens"))
        output_tokens = usage.get("completion_tokens", usage.get("output_tokens"))
        anthropic = metric_attributes.get("gen_ai.provider.name") == "anthropic"
        if "prompt_tokens" not in usage and (cli is not None or anthropic):
            # Anthropic's input_tokens, and every CLI agent's as lionops reports them, leave out
            # cache reads and writes; the conventions count them in
            input_tokens = _total_input(input_tokens, usage)
        _set(attributes, "gen_ai.usage.input_tokens", input_tokens)
        _set(attributes, "gen_ai.usage.output_tokens", output_tokens)
        _set(attributes, "gen_ai.usage.cache_read.input_tokens", usage.get("cache_read_input_tokens"))
        _set(attributes, "gen_ai.usage.cache_creation.input_tokens", usage.get("cache_creation_input_tokens"))
        response_model = meta.get("model") or (cli or {}).get("model")
        _set(attributes, "gen_ai.response.model", response_model)
        _set(attributes, "gen_ai.response.id", meta.get("response_id"))
        if meta.get("finish_reason"):
            attributes["gen_ai.response.finish_reasons"] = [_cut(str(meta["finish_reason"]))]
        _set(attributes, "lionops.http.attempts", meta.get("http_attempts"))
        retries = meta.get("http_retries") or []
        if meta.get("http_attempts") is not None:
            attributes["lionops.http.retries"] = len(retries)
        _set(attributes, "lionops.structured_output", meta.get("structured_output"))
        _set(attributes, "lionops.tool_calls", meta.get("tool_calls"))
        _set(attributes, "lionops.cost_usd", meta.get("cost_usd"))
        if cli is not None:
            _set(attributes, "gen_ai.conversation.id", cli.get("session_id"))
            _set(attributes, "lionops.cli.session_id", cli.get("session_id"))
            _set(attributes, "lionops.cli.exit_code", cli.get("exit_code"))
            _set(attributes, "lionops.cli.subtype", cli.get("subtype"))
            _set(attributes, "lionops.cli.num_turns", cli.get("num_turns"))
            _set(attributes, "lionops.cli.tool_calls", cli.get("cli_tool_calls"))
            _set(attributes, "lionops.cli.duration_ms", cli.get("duration_ms"))
        for number, retry in enumerate(retries, 1):
            if isinstance(retry, dict):
                event: dict[str, Any] = {"lionops.http.retry": number}
                _set(event, "http.response.status_code", retry.get("status"))
                _set(event, "lionops.http.retry_delay_s", retry.get("delay_s"))
                span.add_event("http_retry", event)
        span.set_attributes(attributes)
        if op is not None and result is not None:
            op.native_calls = _native_calls(op.ctx.branch)
        if self.capture_content and op is not None:
            self._chat_content(span, op.ctx.branch, scrub)
        if response_model:
            metric_attributes = {**metric_attributes, "gen_ai.response.model": _cut(str(response_model))}
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
            metric_attributes = {**metric_attributes, "error.type": _error_type(error)}
        self.duration.record(time.perf_counter() - t0, metric_attributes)
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if _is_count(count):
                self.token_usage.record(count, {**metric_attributes, "gen_ai.token.type": kind})
        span.end()

    def _chat_content(self, span: Any, branch: Any, scrub: _Scrub) -> None:
        """``gen_ai.system_instructions``, this turn's ``gen_ai.input.messages``
        and ``gen_ai.output.messages`` (JSON, redacted)."""
        messages = list(getattr(branch, "messages", ()))
        turn = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
        if turn is None:
            return
        system = [part for m in messages if m.role == "system" for part in _text_parts(m.content)]
        if system:
            span.set_attribute("gen_ai.system_instructions", scrub.json(system))
        user = messages[turn]
        span.set_attribute("gen_ai.input.messages", scrub.json([{"role": "user", "parts": _text_parts(user.content)}]))
        output = []
        for m in messages[turn + 1:]:
            if m.role != "assistant":
                continue
            parts = _text_parts(m.content)
            for call in m.metadata.get("tool_calls") or []:
                if isinstance(call, dict):
                    parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("function"),
                                  "arguments": call.get("arguments")})
            entry: dict[str, Any] = {"role": "assistant", "parts": parts}
            if m.metadata.get("finish_reason"):
                entry["finish_reason"] = m.metadata["finish_reason"]
            output.append(entry)
        if output:
            span.set_attribute("gen_ai.output.messages", scrub.json(output))

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
        return span, self._enter(span), request, scrub, branch, None if logs is None else len(logs)

    def tool_end(self, handle: tuple[Any, ...], response: Any, error: BaseException | None) -> None:
        span, token, request, scrub, branch, start = handle
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
        span.end()

    # ------------------------------------------------------------ steps and notes

    def step_start(self, name: str, facts: dict[str, Any]) -> tuple[Any, ...]:
        op = _OPERATION.get()
        attributes: dict[str, Any] = {}
        for key, value in facts.items():
            _set(attributes, f"lionops.{name}.{key}", value)
        span = self.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
        return span, self._enter(span), op.scrub if op is not None else self._scrub_for()

    def step_end(self, handle: tuple[Any, ...], result: Any, error: BaseException | None) -> None:
        span, token, scrub = handle
        self._leave(token)
        if error is not None:
            _fail(span, error, scrub, self.capture_content)
        span.end()

    def note(self, name: str, facts: dict[str, Any]) -> None:
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


def _total_input(input_tokens: Any, usage: dict[str, Any]) -> Any:
    """Anthropic usage's ``input_tokens`` plus its cache reads and writes."""
    if not _is_count(input_tokens):
        return input_tokens
    cached = [usage.get(k) for k in ("cache_read_input_tokens", "cache_creation_input_tokens")]
    return input_tokens + sum(c for c in cached if _is_count(c))


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
