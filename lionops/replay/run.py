"""Recording one ``operate()`` run, and replaying it against its recording.

Both run the real machine through ``branch.operate_traced``; only the
adapter's transport (the runtime's ``http_transport`` for API models,
``cli_transport`` for CLI agents) and, on replay, the tool functions (its
``tool_runner``) are
swapped. Parsing, validation, gating, authorization, hooks, ``act()`` and
enrichment run as in production.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .._formats import check_response_format, model_stands_for
from .._redact import Redactor
from .._text import summarize
from ..clock import RecordingClock
from ..endpoints.cli import CLITimeoutError, argv_secrets
from ..errors import EndpointConnectionError, EndpointStatusError
from ..governance import Approve
from ..messages import to_jsonable
from ..models import Instruct, decode_arguments
from ..pipeline.prepare import OperateKwargs
from ..runtime import use_runtime
from ..tools import Tool
from ..trace import Trace, Traced
from .cassette import (
    CASSETTE_DECISIONS,
    CallRecord,
    CliExchange,
    ErrorRecord,
    HttpExchange,
    Operation,
    OutcomeRecord,
    ToolCallRecord,
)
from .cli import CliRecorder, CliReplay
from .divergence import ReplayDivergence, compare_traces, first_difference, same_json
from .transport import RecordedExchanges, RecordingTransport, ReplayTransport

if TYPE_CHECKING:
    from ..branch import Branch

__all__ = ["describe_call", "describe_decisions", "record_operation", "replay_operation", "tool_calls_since",
           "failed_to_reach"]

#: Keywords that hold objects, described in the call record by their effect
#: (model, schemas) rather than copied.
_OBJECT_KEYWORDS = frozenset({
    "chat_model", "parse_model", "middle", "response_format", "operative", "field_models",
    "call_params", "engine", "tools", "instruct",
})
#: Call facts compared before a replay runs (history and base URL are not:
#: the request bodies prove the first, and a local server's port may change).
_COMPARED = ("provider", "model", "options", "response_format", "tool_schemas", "keywords")
#: Keywords asking for files on this machine (CLI stream persistence,
#: snapshots), not anything of the model: recorded, not compared.
LOCAL_KEYWORDS = frozenset({"stream_persist", "persist_dir", "snapshot_dir"})
#: Endpoint settings kept in the call record (those an endpoint has).
_ENDPOINT_FACTS = ("structured_output", "stream", "timeout", "max_retries", "args", "system")


def _models(branch: Branch, kw: dict[str, Any]) -> list[Any]:
    chat = kw.get("chat_model") or branch.chat_model
    parse = kw.get("parse_model") or chat
    return [m for m in (chat, parse, branch.parse_model) if m is not None]


def _scrubbers(branch: Branch, kw: dict[str, Any]) -> list[Callable[[str], str]]:
    out = []
    for model in _models(branch, kw):
        scrub = getattr(getattr(model, "endpoint", model), "scrub", None)
        if callable(scrub) and scrub not in out:
            out.append(scrub)
    # Secrets in a call's own CLI arguments (``cli_args=["--api-key", ...]``).
    cli_secrets = argv_secrets([str(a) for a in kw.get("cli_args") or ()])
    if cli_secrets:
        out.append(Redactor(secrets=tuple(cli_secrets), defaults=False, env=False).text)
    return out


def _selector(tools: Any) -> Any:
    if tools is None or tools is True:
        return tools
    items = tools if isinstance(tools, (list, tuple)) else [tools]
    return [t if isinstance(t, str) else getattr(t, "name", None) or getattr(t, "__name__", repr(t)) for t in items]


def _actions_requested(kw: dict[str, Any]) -> bool:
    instruct = kw.get("instruct")
    if isinstance(instruct, dict):
        instruct = Instruct.model_validate(instruct)
    return bool(kw.get("actions") or getattr(instruct, "actions", False)) and kw.get("invoke_actions", True)


def describe_decisions(branch: Branch, decisions: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decisions of a ``Branch.resume()`` as data, in request order (a
    call id no suspended operation holds keeps its place at the end, so
    ``resume`` itself refuses it)."""
    pending = {p.call_id: p for p in branch.pending_calls()}
    out = []
    for call_id, decision in decisions.items():
        call = pending.get(call_id)
        out.append({"call_id": str(call_id), "function": call.function if call else None,
                    "index": call.index if call else -1,
                    "decision": "approved" if isinstance(decision, Approve) else "denied",
                    "by": str(getattr(decision, "by", "")), "reason": getattr(decision, "reason", None)})
    return sorted(out, key=lambda d: (d["index"] < 0, d["index"]))


def describe_call(branch: Branch, kw: dict[str, Any], redactor: Redactor,
                  decisions: Mapping[str, Any] | None = None) -> CallRecord:
    """The normalized call of ``branch.operate(**kw)`` as data, redacted.

    ``options`` are the endpoint's default options overlaid with the call's
    extra keywords (ADR-0022 D1 ``imodel_kw``); ``response_format`` is the
    caller's model (``{"name", "schema"}``), ``tool_schemas`` what the
    model is shown when actions are on, ``keywords`` the plain keywords.
    """
    known = OperateKwargs.__optional_keys__
    model = kw.get("chat_model") or branch.chat_model
    endpoint = getattr(model, "endpoint", None)
    defaults = dict(getattr(endpoint, "default_options", None) or {})
    options = {**defaults, **{k: v for k, v in kw.items() if k not in known}}
    keywords = {k: v for k, v in kw.items() if k in known and k not in _OBJECT_KEYWORDS}
    if "instruct" in kw:
        keywords["instruct"] = kw["instruct"]
    if "tools" in kw:
        keywords["tools"] = _selector(kw["tools"])
    fmt = kw.get("response_format")
    if model_stands_for(fmt):  # a dataclass or TypedDict: recorded as the model it runs as
        fmt = check_response_format(fmt)
    response_format: dict[str, Any] | None = None
    if inspect.isclass(fmt) and hasattr(fmt, "model_json_schema"):
        response_format = {"name": fmt.__name__, "schema": fmt.model_json_schema()}
    elif isinstance(fmt, dict):
        response_format = {"name": None, "schema": fmt}
    tool_schemas: list[dict[str, Any]] = []
    if _actions_requested(kw):
        try:
            selector = kw.get("tools")  # None offers every registered tool; an empty selector none
            tool_schemas = branch.acts.get_tool_schema(tools=True if selector is None else selector)["tools"]
        except ValueError:
            tool_schemas = []  # prepare/schema will fail the run; the trace shows it
    endpoint_facts = {k: to_jsonable(getattr(endpoint, k)) for k in _ENDPOINT_FACTS if hasattr(endpoint, k)}
    history = [{"role": m.role, "content": to_jsonable(m.content), "metadata": to_jsonable(m.metadata)}
               for m in branch.messages]
    return CallRecord.model_validate(redactor.value({
        "provider": getattr(model, "provider", None),
        "model": getattr(model, "model", None),
        "base_url": getattr(endpoint, "base_url", None),
        "endpoint": endpoint_facts,
        "options": to_jsonable(options),
        "response_format": response_format,
        "tool_schemas": tool_schemas,
        "registered_tools": branch.acts.get_tool_schema()["tools"],
        "keywords": to_jsonable(keywords),
        "history": history,
        "resume": None if decisions is None else describe_decisions(branch, decisions),
    }))



def tool_calls_since(branch: Branch, start: int, redactor: Redactor) -> list[ToolCallRecord]:
    """What ``act()`` did with each action request: the typed
    :class:`~lionops.models.ActionRecord` each event-log entry from ``start``
    on carries (the error message is the entry's text of the exception)."""
    out: list[ToolCallRecord] = []
    for entry in list(branch.logs)[start:]:
        rec = entry.record
        if rec is None:
            continue
        fields: dict[str, Any] = {"index": rec.index, "function": to_jsonable(rec.function),
                                  "arguments": to_jsonable(rec.raw_arguments)}
        if rec.decision == "allowed":
            fields.update(decision="allowed", output=to_jsonable(rec.output))
        elif rec.invoked:
            fields.update(decision="allowed",
                          error={"type": rec.error_type or "Exception", "message": entry.content.get("error", "")})
        else:
            fields.update(decision=CASSETTE_DECISIONS[rec.decision])
        out.append(ToolCallRecord.model_validate(redactor.value(fields)))
    out.sort(key=lambda r: r.index)
    return out


def _outcome(result: Any, error: BaseException | None, redactor: Redactor) -> OutcomeRecord:
    if error is not None:
        return OutcomeRecord(error=ErrorRecord(type=type(error).__name__, message=redactor.text(str(error))))
    if isinstance(result, BaseModel):  # under the names the answer gave (an alias such as ``_id``)
        try:
            result = result.model_dump(mode="json", by_alias=True)
        except Exception:  # noqa: BLE001 - to_jsonable gives what it can
            pass
    return OutcomeRecord(result=redactor.value(to_jsonable(result)))


async def _run(branch: Branch, kw: dict[str, Any], decisions: Mapping[str, Any] | None = None
               ) -> tuple[Traced | None, Exception | None, Trace | None]:
    before = len(branch.traces)
    try:
        traced = await (branch.operate_traced(**kw) if decisions is None else branch.resume_traced(dict(decisions)))
    except Exception as exc:  # noqa: BLE001 - recorded, then re-raised by the caller
        trace = branch.traces[-1] if len(branch.traces) > before else None
        return None, exc, trace
    return traced, None, traced.trace




async def record_operation(branch: Branch, kw: dict[str, Any], redactor: Redactor,
                           decisions: Mapping[str, Any] | None = None
                           ) -> tuple[Operation, Traced | None, Exception | None]:
    """Run ``branch.operate_traced(**kw)`` (with ``decisions``:
    ``branch.resume_traced(decisions)``) for real, recording it.

    Returns ``(operation, traced, error)``: ``traced`` when the run returned,
    ``error`` when it raised (the operation is recorded either way; a call
    that raised before the machine ran has a trace with no transitions).
    """
    redactor = redactor.with_scrubbers(_scrubbers(branch, kw))
    call = describe_call(branch, kw, redactor, decisions)
    exchanges: list[Any] = []
    transport = RecordingTransport(redactor, exchanges)
    start = len(branch.logs)
    requests = RequestLog()
    try:
        with use_runtime(http_transport=transport, cli_transport=CliRecorder(redactor, exchanges),
                         before_dispatch=requests):
            traced, error, trace = await _run(branch, kw, decisions)
    finally:
        await transport.aclose()
    if trace is None:  # raised before the machine ran: still an operation, so later ones keep their places
        trace = Trace()
    call.middle = trace.meta.get("middle")
    op = Operation(
        call=call, exchanges=exchanges,
        tool_calls=requests.complete(tool_calls_since(branch, start, redactor), redactor),
        trace=redactor.value(trace.to_dict()),
        outcome=_outcome(traced.result if traced else None, error, redactor),
    )
    return op, traced, error


def failed_to_reach(op: Operation, error: BaseException | None) -> bool:
    """Whether a recorded run failed before the model answered, so its
    recording must not become the truth: the endpoint could not be reached
    (refused, reset, DNS) or timed out, answered 5xx or 429 until the retries
    ran out, or a CLI agent could not start or ran past its timeout. A run
    that got an answer (a 4xx such as 400 or 401 included) is a recording.

    The error is looked for in the whole exception chain (a Middle may raise
    its own error from the endpoint's), and the last exchange decides when
    the chain names none (also when the run returned: a Middle may swallow
    the failure)."""
    seen: list[BaseException] = []
    current = error
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        if isinstance(current, (EndpointConnectionError, CLITimeoutError)):  # EndpointTimeoutError too
            return True
        if isinstance(current, EndpointStatusError):
            return current.status >= 500 or current.status == 429
        current = current.__cause__ or current.__context__
    last = op.exchanges[-1] if op.exchanges else None
    if isinstance(last, CliExchange):
        return last.error is not None or last.timed_out
    if isinstance(last, HttpExchange):
        status = last.response.status if last.response is not None else None
        return last.error is not None or status is not None and (status >= 500 or status == 429)
    return False


_recorded_errors: dict[str, type[Exception]] = {}


def recorded_exception(error: ErrorRecord) -> Exception:
    """An exception of a class named like the recorded one, with its message,
    so ``act()`` builds the same error payload (the class is made, never imported)."""
    name = error.type if error.type.isidentifier() else "RecordedToolError"
    kind = _recorded_errors.get(name)
    if kind is None:
        kind = _recorded_errors[name] = type(name, (Exception,), {"__module__": "lionops.replay.recorded"})
    return kind(error.message)


class ToolServer:
    """The runtime ``tool_runner`` of a replay: serves each authorized call the
    recorded output (or error) of the first unused recorded call with the
    same function and validated arguments."""

    def __init__(self, calls: list[ToolCallRecord], redactor: Redactor,
                 on_divergence: Callable[[ReplayDivergence], None], operation: int) -> None:
        self.calls = [c for c in calls if c.decision == "allowed"]
        self.used = [False] * len(self.calls)
        self.redactor = redactor
        self.on_divergence = on_divergence
        self.operation = operation

    def _args(self, tool: Tool, arguments: Any) -> Any:
        try:
            return self.redactor.value(to_jsonable(tool.validate_arguments(arguments)))
        except ValueError:
            return None

    async def __call__(self, tool: Tool, kwargs: dict[str, Any]) -> Any:
        live = self.redactor.value(to_jsonable(kwargs))
        for i, rec in enumerate(self.calls):
            if not self.used[i] and rec.function == tool.name and same_json(self._args(tool, rec.arguments), live):
                self.used[i] = True
                if rec.error is not None:
                    raise recorded_exception(rec.error)
                return copy.deepcopy(rec.output)
        err = ReplayDivergence(
            f"tool call {tool.name}({live}) was not made in the recording",
            kind="tool_call", expected=None, actual=f"{tool.name} {live}", operation=self.operation,
        )
        self.on_divergence(err)
        raise err

    def unused(self) -> list[ToolCallRecord]:
        return [c for c, u in zip(self.calls, self.used, strict=False) if not u]


def _decoded(arguments: Any, redactor: Redactor) -> Any:
    """``arguments`` as recorded and compared: decoded where they can be (as
    the event log records them), redacted. Not validated: the gate and the
    hooks see them as the model wrote them, so ``"1"`` for ``1`` is a change."""
    try:
        arguments = decode_arguments(arguments)
    except (ValueError, TypeError):
        pass
    return redactor.value(to_jsonable(arguments))


class RequestLog:
    """The runtime ``before_dispatch`` seam of a recording: every action
    request ``act()`` was handed, so the cassette holds each one, also those
    a failing ``act()`` never reached (decision ``not_reached``)."""

    def __init__(self) -> None:
        self.requests: dict[int, tuple[Any, Any]] = {}

    def __call__(self, requests: list[tuple[int, Any, Any, str | None]]) -> None:
        for index, function, arguments, _ in requests:
            self.requests.setdefault(index, (function, arguments))

    def complete(self, calls: list[ToolCallRecord], redactor: Redactor) -> list[ToolCallRecord]:
        """``calls`` with a ``not_reached`` record for each request they lack."""
        have = {c.index for c in calls}
        missing = [ToolCallRecord(index=i, function=f if isinstance(f, str) else None,
                                  arguments=_decoded(a, redactor), decision="not_reached")
                   for i, (f, a) in self.requests.items() if i not in have and i >= 0]
        return sorted([*calls, *missing], key=lambda r: r.index) if missing else calls


class RequestCheck:
    """The runtime ``before_dispatch`` check of a replay: before ``act()``
    authorizes or invokes anything, each action request must be the recorded
    one of its index (same function, same arguments once decoded, of the
    same JSON types), and no recorded request may be missing. So a cassette
    edited to inject a call, or to change one's arguments, diverges (kind
    ``tool_call``) before the gate, a hook or a context provider sees it,
    whatever the recorded trace or outcome says.

    A request the recording never reached (``not_reached``: the recorded
    ``act()`` raised first) is held back: if the replay reaches it, the run
    diverges there, before anything sees it.
    """

    def __init__(self, calls: list[ToolCallRecord], redactor: Redactor,
                 on_divergence: Callable[[ReplayDivergence], None], *, operation: int) -> None:
        self.calls = {c.index: c for c in calls if c.index >= 0}
        self.redactor = redactor
        self.on_divergence = on_divergence
        self.operation = operation
        self.log = RequestLog()
        self.held: dict[int, ReplayDivergence] = {}

    def _arguments(self, arguments: Any) -> Any:
        return _decoded(arguments, self.redactor)

    def _diverge(self, message: str, index: int, expected: str | None, actual: str | None) -> ReplayDivergence:
        err = ReplayDivergence(message, kind="tool_call", index=index, expected=expected, actual=actual,
                               operation=self.operation)
        self.on_divergence(err)
        return err

    def __call__(self, requests: list[tuple[int, Any, Any, str | None]]) -> dict[int, BaseException] | None:
        self.log(requests)
        seen = set()
        for index, function, arguments, _ in requests:
            seen.add(index)
            live_function = self.redactor.value(to_jsonable(function))
            live = self._arguments(arguments)
            actual = f"#{index} {summarize(live_function, 80)}({summarize(live, 120)})"
            rec = self.calls.get(index)
            if rec is None:
                raise self._diverge(f"action request {actual} is not in the recording; nothing was dispatched",
                                    index, None, actual)
            if not same_json(rec.function, live_function) or not same_json(self._arguments(rec.arguments), live):
                expected = _call_line(rec)
                raise self._diverge(f"action request {index} differs from the recording: expected {expected}, "
                                    f"actual {actual}; nothing was dispatched", index, expected, actual)
        missing = sorted(i for i in self.calls if i not in seen)
        if missing:
            expected = _call_line(self.calls[missing[0]])
            raise self._diverge(f"the recording has action request {expected}, the run has none at "
                                f"index {missing[0]}; nothing was dispatched", missing[0], expected, None)
        self.held = {
            i: ReplayDivergence(f"action request {_call_line(c)}: the recording never reached it, the replay "
                                "did; it was not dispatched", kind="tool_call", index=i, expected=_call_line(c),
                                actual=_call_line(c), operation=self.operation)
            for i, c in self.calls.items() if c.decision == "not_reached"}
        return dict(self.held) or None


def _call_line(rec: ToolCallRecord | None) -> str | None:
    if rec is None:
        return None
    text = f"#{rec.index} {summarize(rec.function, 80)}({summarize(rec.arguments, 120)}) {rec.decision}"
    return text + (f" raising {rec.error.type}" if rec.error else "")


def compare_tool_calls(expected: list[ToolCallRecord], actual: list[ToolCallRecord], *,
                       operation: int, outputs: bool) -> ReplayDivergence | None:
    """The first action request handled differently: function, arguments,
    decision and (with ``outputs``) the error type, in request order."""
    def ident(r: ToolCallRecord) -> tuple[Any, ...]:
        return (r.index, r.function, r.arguments, r.decision, r.error.type if (outputs and r.error) else None)

    for i in range(max(len(expected), len(actual))):
        want = expected[i] if i < len(expected) else None
        got = actual[i] if i < len(actual) else None
        if want is not None and got is not None and same_json(ident(want), ident(got)):
            continue
        index = (want or got).index  # type: ignore[union-attr]
        exp, act = _call_line(want), _call_line(got)
        return ReplayDivergence(f"tool call {index} differs: expected {exp or 'no call'}, actual {act or 'no call'}",
                                kind="tool_call", index=index, expected=exp, actual=act, operation=operation)
    return None


def _without_responses(value: Any) -> Any:
    return {k: v for k, v in value.items() if k != "action_responses"} if isinstance(value, dict) else value


def compare_outcome(expected: OutcomeRecord, actual: OutcomeRecord, *, operation: int,
                    outputs: bool) -> ReplayDivergence | None:
    """The error type when either run raised, else the result's JSON (its
    ``action_responses`` left out when tools ran for real)."""
    if expected.error or actual.error:
        want = expected.error.type if expected.error else None
        got = actual.error.type if actual.error else None
        if want == got:
            return None
        return ReplayDivergence(f"the run {'raised ' + got if got else 'returned'}; the recording "
                                f"{'raised ' + want if want else 'returned'}",
                                kind="error", expected=want, actual=got, operation=operation)
    want, got = expected.result, actual.result
    if not outputs:
        want, got = _without_responses(want), _without_responses(got)
    diff = first_difference(want, got, "result")
    if diff is None:
        return None
    return ReplayDivergence(f"the result differs at {diff}", kind="result", operation=operation,
                            expected=repr(want)[:200], actual=repr(got)[:200])


def compare_call(expected: CallRecord, actual: CallRecord, *, operation: int) -> ReplayDivergence | None:
    """The normalized call: provider, model, options, schemas, keywords."""
    def compared(call: CallRecord) -> dict[str, Any]:
        facts = {k: getattr(call, k) for k in _COMPARED}
        facts["keywords"] = {k: v for k, v in call.keywords.items() if k not in LOCAL_KEYWORDS}
        # a deferred call's id may be made afresh (no provider id): the decisions compare without it
        facts["resume"] = None if call.resume is None else [
            d.model_dump(mode="json", exclude={"call_id"}) for d in call.resume]
        return facts

    want, got = compared(expected), compared(actual)
    diff = first_difference(want, got, "call")
    if diff is None:
        return None
    return ReplayDivergence(f"the call differs from the recorded one at {diff}", kind="call", operation=operation)


async def replay_operation(branch: Branch, op: Operation, kw: dict[str, Any], redactor: Redactor, *,
                           operation: int = 0, run_tools: bool = False,
                           decisions: Mapping[str, Any] | None = None) -> Traced:
    """Re-run ``branch.operate_traced(**kw)`` (with ``decisions``:
    ``branch.resume_traced(decisions)``) against the recording ``op``.

    No network and no subprocess: HTTP is served by a :class:`ReplayTransport`,
    CLI runs by a :class:`~lionops.replay.cli.CliReplay`. Tools return
    their recorded outputs unless ``run_tools``. Waits (retry backoff) are
    not slept. Returns the replay's ``Traced``; re-raises the run's own
    error when the recording raised the same way.

    Raises:
        ReplayDivergence: the first difference, checked in this order: the
            normalized call; a request the recording lacks; an action
            request that is not the recorded one (found before ``act()``
            dispatches anything, see :class:`RequestCheck`); the trace (first
            differing transition); each action request's handling (function,
            arguments, decision); a tool call the recording lacks; recorded
            exchanges or tool outputs left unused; the outcome (error type or
            result JSON).
    """
    redactor = redactor.with_scrubbers(_scrubbers(branch, kw))
    first = compare_call(op.call, describe_call(branch, kw, redactor, decisions), operation=operation)
    if first is not None:
        raise first
    seen: list[ReplayDivergence] = []
    transport = ReplayTransport(op.exchanges, redactor, seen.append, operation=operation)
    cli = CliReplay(op.exchanges, redactor, seen.append, operation=operation)
    server = ToolServer(op.tool_calls, redactor, seen.append, operation)
    blocked: list[ReplayDivergence] = []
    requests = RequestCheck(op.tool_calls, redactor, blocked.append, operation=operation)
    start = len(branch.logs)
    seams: dict[str, Any] = {
        "http_transport": transport, "cli_transport": cli, "before_dispatch": requests, "clock": RecordingClock(),
    }
    if not run_tools:
        seams["tool_runner"] = server
    with use_runtime(**seams):
        traced, error, trace = await _run(branch, kw, decisions)
    outputs = not run_tools
    def first_seen(kind: str) -> ReplayDivergence | None:
        return next((d for d in seen if d.kind == kind), None)

    checks: list[Callable[[], ReplayDivergence | None]] = [
        lambda: first_seen("exchange"),
        lambda: blocked[0] if blocked else None,
        lambda: next((e for e in requests.held.values() if e is error), None),
        lambda: compare_traces(op.trace_obj(), trace, operation=operation) if trace else None,
        lambda: compare_tool_calls(op.tool_calls, requests.log.complete(tool_calls_since(branch, start, redactor),
                                                                        redactor),
                                   operation=operation, outputs=outputs),
        lambda: first_seen("tool_call"),
        lambda: _unused_exchange((transport, cli), operation),
        lambda: _unused_tool_call(server, operation) if outputs else None,
        lambda: compare_outcome(op.outcome, _outcome(traced.result if traced else None, error, redactor),
                                operation=operation, outputs=outputs),
    ]
    for check in checks:
        found = check()
        if found is not None:
            found.traced, found.trace = traced, trace
            raise found from (None if found is error else error)
    if error is not None:
        raise error
    assert traced is not None
    return traced


def _unused_exchange(transports: tuple[RecordedExchanges, ...], operation: int) -> ReplayDivergence | None:
    """Recorded HTTP, then CLI, exchanges the run did not use (``index``: among those of its kind)."""
    for transport in transports:
        unused = transport.unused
        if unused:
            first = transport.describe(unused[0])
            return ReplayDivergence(
                f"{len(unused)} recorded exchange(s) left unused, first: #{unused[0]} {first}",
                kind="unused_exchange", index=unused[0], expected=first, actual=None, operation=operation,
            )
    return None


def _unused_tool_call(server: ToolServer, operation: int) -> ReplayDivergence | None:
    unused = server.unused()
    if not unused:
        return None
    rec = unused[0]
    return ReplayDivergence(f"recorded tool output left unused: {_call_line(rec)}", kind="unused_tool_call",
                            index=rec.index, expected=_call_line(rec), actual=None, operation=operation)
