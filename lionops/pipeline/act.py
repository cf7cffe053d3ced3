"""``act()``: the one governed path from action requests to tools (ADR-0022 D4).

Every request, whatever adapter proposed it, goes through :func:`act`:

1. All request *shapes* are checked first; a bad shape raises ``ValueError``
   before anything is invoked. Requests past the branch's ``max_requests``
   cap are answered with an error payload (``rejected``) and never run.
2. Per request, in this order: a usable name and a JSON-object argument
   (``invalid`` otherwise), a registered tool (``rejected``), the very Tool
   offered in this call under that name (``not_offered``), arguments that satisfy the tool's
   signature (``rejected``); a request failing any of these is never invoked.
3. ``branch.authorize(ToolInvocation)`` is asked with the *validated*
   arguments the tool will receive; a denial (a gate that says no, raises or
   returns a non-bool: ``denied``; one that does not answer within
   ``branch.gate_timeout``: ``timed_out``) gives a denial payload and emits
   no hooks. A gate that answers ``Defer`` leaves the call ``deferred``:
   not run, a decision comes through ``Branch.resume()`` (see ``resume.py``).
4. A call past the branch's ``tool_calls`` limit is ``over_limit``, not
   invoked. ``TOOL_PRE`` → invoke with exactly the arguments the gate saw →
   ``TOOL_POST`` or ``TOOL_ERROR``. A tool past its ``Tool.timeout`` (else
   the ``retry_timeout``) is ``timed_out``; one that raises is ``error``; an
   idempotent tool's ``retries`` are attempted first, each failure logged.
5. An output that does not serialize to JSON is a tool failure
   (``ToolOutputError``), so responses, messages and logs always serialize.
6. With ``suppress_errors`` a failure becomes an error-payload response;
   otherwise the original exception is re-raised after the hook and log.

Each decision is one :class:`~lionops.models.ActionRecord`, made as soon as it
is known (before any hook that follows it), logged at once, and written to the
branch messages in *request* order when the batch ends, whether it returns or
raises: whatever ran is recorded. A ``BaseException`` that is not an
``Exception`` (a stray ``CancelledError`` on asyncio, ``KeyboardInterrupt``)
from a tool, gate or hook is recorded and re-raised as itself; a real
cancellation propagates unchanged.

``"sequential"`` awaits requests in input order; ``"concurrent"`` runs them
through the ActionParam's ``AlcallParams`` (results in input order); any
other strategy raises ``ConfigurationError``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import operator
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, NamedTuple, cast

import anyio
import pydantic_core
from pydantic import BaseModel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from .._alcall import AlcallParams, in_own_context, is_cancellation
from .._defaults import DEFAULT_ACTION_CALL_PARAMS
from .._hooks import HookPoint
from .._invalid_mark import invalid_reason
from .._limits import claim_tool_call
from .._text import VERBOSE_ARGS_LIMIT, safe_str, summarize
from ..clock import current_clock
from ..errors import ConfigurationError, InvalidActionRequest, RequestLimitError, ToolOutputError
from ..models import (
    ActionRecord,
    ActionRequestModel,
    ActionResponseModel,
    Decision,
    decode_arguments,
    normalize_request_keys,
)
from ..observability import observe
from ..params import ACTION_STRATEGIES, ActionParam
from ..runtime import current_runtime
from ..tools import FrozenArguments, Tool, ToolArgumentsError, ToolInvocation, ToolNotOfferedError, UnknownToolError
from .context import BranchLike, OperationContext

__all__ = [
    "act", "phase", "InvalidActionRequest", "ToolOutputError", "RequestLimitError", "DENIAL_ERROR",
]

logger = logging.getLogger("lionops.act")

#: The error text of a governance denial payload.
DENIAL_ERROR = "denied by governance gate"


_SHAPE_ERROR = (
    "action_request must be an ActionRequest, BaseModel with 'function'"
    " and 'arguments', or dict with 'function' and 'arguments'."
)


def _check_output(function: str, output: Any) -> None:
    """Raise ToolOutputError unless ``output`` serializes to JSON (pydantic's
    rules: models, dataclasses, datetimes, sets... are fine; opaque objects
    and cycles are not). ``_act_one`` calls it only for an output that is not
    ``None`` or a plain scalar (those always serialize).

    A one-shot iterator (a generator, ``iter(...)``, ``map(...)``, an async
    generator) is refused before anything reads it: serializing it would use
    it up, and the record would keep an exhausted iterator instead of what
    the model was shown."""
    kind = _one_shot(output)
    if kind is not None:
        where = "" if kind is type(output) else f" inside its {type(output).__name__}"
        raise ToolOutputError(
            f"output of {function!r} is a one-shot iterator ({kind.__name__}){where}: it cannot be both recorded"
            " and shown to the model; return a list (for example list(...)) instead")
    try:
        pydantic_core.to_json(output)
    except Exception as exc:  # noqa: BLE001 - serialization errors, cycles, recursion
        raise ToolOutputError(
            f"output of {function!r} is not JSON-serializable ({type(output).__name__}): {safe_str(exc)}"
        ) from exc


def _one_shot(value: Any) -> type | None:
    """The type of the first one-shot iterator in ``value``: ``value`` itself,
    or one held in the dicts, lists, tuples, sets, models and dataclasses it
    is made of (serializing would use up a nested one as well), else ``None``.
    Nothing is read from an iterator; a part met twice (a cycle) is walked once."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _ATOMIC:
            continue
        if hasattr(kind, "__next__") or hasattr(kind, "__anext__"):
            return kind
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            if not _all_atomic(map(type, item.values())):  # a flat one (the usual row) holds no iterator
                stack.extend(item.values())
            if not _all_atomic(map(type, item)):
                stack.extend(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            if not _all_atomic(map(type, item)):
                stack.extend(item)
        elif isinstance(item, BaseModel):
            stack.extend(item.__dict__.values())
            stack.extend((item.__pydantic_extra__ or {}).values())
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name, None) for f in dataclasses.fields(item))
    return None


class _Request(NamedTuple):
    """One request after its shape check (a tuple: cheap to make, immutable).
    Observers read ``index`` and ``function`` from it by name."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, never called on a request
    function: Any
    arguments: Any
    invalid: str | None
    call_id: str | None = None


#: makes a ``_Request`` from its five values (what its generated ``__new__`` does, without the call)
_new_request = tuple.__new__


def _normalize(index: int, item: Any) -> _Request:
    """Check one request's shape (ADR-0022 D4); raise ValueError if it has none."""
    if type(item) is dict:  # a plain dict (never a model): the Mapping branch below
        return _from_mapping(index, item)
    if isinstance(item, ActionRequestModel):
        function, arguments = item.function, item.arguments
        mark = item.invalid
        invalid = None if mark is None else invalid_reason(mark)  # no mark: no reason
        call_id = item.call_id
    elif isinstance(item, BaseModel) and {"function", "arguments"} <= set(type(item).model_fields):
        # any model class that declares both fields (checked just above); a
        # mark it carries, as a field or an extra, is read as any other
        function, arguments = getattr(item, "function"), getattr(item, "arguments")  # noqa: B009
        extra = item.__pydantic_extra__ or {}
        invalid = invalid_reason(getattr(item, "invalid") if "invalid" in type(item).model_fields  # noqa: B009
                                 else extra.get("invalid"))
        call_id = getattr(item, "call_id", None)
    elif isinstance(item, Mapping):
        return _from_mapping(index, item)
    else:
        raise InvalidActionRequest(f"{_SHAPE_ERROR} Request {index} is {type(item).__name__}.")
    return _new_request(_Request, (index, function, arguments, invalid, call_id if isinstance(call_id, str) else None))


def _from_mapping(index: int, item: Mapping[str, Any]) -> _Request:
    """A request given as a mapping: its keys read with their aliases (a copy; ``item`` is left as it is)."""
    data = normalize_request_keys(item)
    if "function" not in data or "arguments" not in data:
        raise InvalidActionRequest(f"{_SHAPE_ERROR} Request {index} has keys {sorted(map(str, data))}.")
    call_id = item.get("call_id")
    return _new_request(_Request, (index, data["function"], data["arguments"], invalid_reason(data.get("invalid")),
                                   call_id if isinstance(call_id, str) else None))


#: value types a deep copy returns as they are (immutable, no parts)
_ATOMIC = frozenset({str, int, float, bool, type(None)})
#: the two tests of a flat dict (bound once): every key a ``str``, every value atomic
_all_str = frozenset({str}).issuperset
_all_atomic = _ATOMIC.issuperset


def _flat(value: Any) -> bool:
    """Whether ``value`` is a plain dict of str keys and immutable scalar
    values: its deep copy is a new dict (what ``copy.deepcopy`` gives for it,
    without its memo and dispatch)."""
    return type(value) is dict and _all_str(map(type, value)) and _all_atomic(map(type, value.values()))


def _copies(function: str, kwargs: dict[str, Any], raw: Any) -> tuple[FrozenArguments, Any, dict[str, Any]]:
    """The gate's read-only view of the validated arguments, its copy of the
    raw ones, and the tool's own copy of the validated arguments: each a deep
    copy of its own (``ToolArgumentsError`` for arguments that have none)."""
    flat = _flat(kwargs)
    shown = FrozenArguments(kwargs if flat else _copied(function, kwargs))
    shown_raw = dict(raw) if _flat(raw) else _copied(function, raw)
    return shown, shown_raw, dict(kwargs) if flat else _copied(function, kwargs)


def _tool_copy(function: str, kwargs: dict[str, Any], raw: Any) -> tuple[dict[str, Any], Any]:
    """The tool's own copy of the validated arguments when no gate is asked
    (the gate's two are never made), and the record's copy of the raw ones,
    under the rule of :func:`_copies`: raw arguments that have no deep copy
    are refused all the same."""
    kept = dict(raw) if _flat(raw) else _copied(function, raw)
    if _flat(kwargs):
        return dict(kwargs), kept
    given: dict[str, Any] = _copied(function, kwargs)
    return given, kept


def _copied(function: str, value: Any) -> Any:
    """A deep copy of validated arguments; ``ToolArgumentsError`` if they have
    none (an argument object that cannot be copied cannot be shown unchanged)."""
    try:
        return copy.deepcopy(value)
    except Exception as exc:  # noqa: BLE001 - an uncopyable object is refused, never shared
        raise ToolArgumentsError(function, f"arguments cannot be copied ({type(exc).__name__})") from None


def _kept(raw: Any) -> Any:
    """The record's own copy of arguments that never reach a tool, so a
    caller's later change to its request reaches no record, message or log
    entry; arguments that have no deep copy are kept as a note of their type."""
    if _flat(raw):
        return dict(raw)
    try:
        return copy.deepcopy(raw)
    except Exception:  # noqa: BLE001 - an uncopyable object is described, never shared
        return f"<{type(raw).__name__} that cannot be copied>"


def _error_payload(function: Any, exc: BaseException, text: str | None = None) -> dict[str, Any]:
    text = safe_str(exc) if text is None else text
    return {
        "error": text,
        "type": type(exc).__name__,
        "message": f"Error invoking action '{function}': {text}",
    }


#: event-log kind of each decision but ``"allowed"`` (the entry's content is
#: the record; an allowed record is logged as ``"action"`` by ``keep_allowed``).
_LOG_KIND: dict[str, str] = {
    "denied": "denied", "invalid": "action_error", "rejected": "action_error",
    "not_offered": "action_error", "error": "action_error", "timed_out": "action_error",
    "deferred": "deferred", "over_limit": "action_error",
}

#: what the model is shown for a deferred call until it is decided
DEFERRED_NOTE = "deferred for a decision"


#: a record's request index (the order messages are written in)
_index_of = operator.attrgetter("index")


class _Batch:
    """The records of one ``act()`` call, by request index."""

    __slots__ = ("branch", "param", "tools", "offered", "records", "errors", "held")

    def __init__(self, branch: BranchLike, param: ActionParam, tools: dict[str, Tool | None]) -> None:
        self.branch = branch
        self.param = param
        #: offered name -> the Tool offered under it (the one whose schema was shown)
        self.tools = tools
        self.offered = frozenset(tools)
        self.records: dict[int, ActionRecord] = {}
        self.errors: dict[int, BaseException] = {}
        #: requests the runtime's before_dispatch check holds back: reaching one raises its exception
        self.held: Mapping[int, BaseException] = {}

    def keep(self, rec: ActionRecord, exc: BaseException | None = None) -> ActionRecord:
        """Store ``rec`` (any decision but ``"allowed"``, see :meth:`keep_allowed`)
        and log it at once (synchronous: survives any later exception)."""
        self.records[rec.index] = rec
        if exc is not None:
            self.errors[rec.index] = exc
        branch = self.branch
        content = {
            "function": rec.function, "arguments": rec.raw_arguments, "index": rec.index,
            "decision": rec.decision, "branch": branch.id,
        }
        if rec.call_id is not None:
            content["call_id"] = rec.call_id
        kind = _LOG_KIND[rec.decision]
        if kind in ("denied", "deferred"):
            content["reason"] = rec.reason
        else:
            content.update(stage=rec.decision, error=safe_str(exc) if exc is not None else rec.reason,
                           type=rec.error_type, reason=rec.reason, invoked=rec.invoked)
            if rec.duration_s is not None:
                content["duration_s"] = rec.duration_s
        branch.logs.log(kind, content, record=rec)
        return rec

    def keep_allowed(self, rec: ActionRecord) -> ActionRecord:
        """Store and log an ``"allowed"`` record at once: kind ``"action"``, with
        its output and duration (and its ``call_id`` when it has one)."""
        self.records[rec.index] = rec
        branch = self.branch
        if rec.call_id is None:
            content = {
                "function": rec.function, "arguments": rec.raw_arguments, "index": rec.index,
                "decision": "allowed", "branch": branch.id, "output": rec.output, "duration_s": rec.duration_s,
            }
        else:
            content = {
                "function": rec.function, "arguments": rec.raw_arguments, "index": rec.index,
                "decision": "allowed", "branch": branch.id, "call_id": rec.call_id,
                "output": rec.output, "duration_s": rec.duration_s,
            }
        branch.logs.log("action", content, record=rec)
        return rec

    def write_messages(self, ordered: list[ActionRecord]) -> None:
        """Write the request/response messages of every record (``ordered``: in request order)."""
        branch = self.branch
        exchanges = []
        for rec in ordered:
            function = rec.function
            meta: dict[str, Any] = {"index": rec.index, "decision": rec.decision}
            if rec.call_id is not None:
                meta["call_id"] = rec.call_id
            exchanges.append((function, rec.raw_arguments, rec.output,
                              function if isinstance(function, str) else str(function), meta))
        branch.messages.add_action_exchanges(exchanges, sender=branch.id)


def _record(req: _Request, raw: Any, decision: Decision, *, arguments: dict[str, Any] | None = None,
            reason: str | None = None, output: Any = None, exc: BaseException | None = None,
            duration_s: float | None = None, invoked: bool = False) -> ActionRecord:
    return ActionRecord(
        index=req.index, function=req.function, raw_arguments=raw, arguments=arguments, decision=decision,
        reason=reason, output=output, error_type=type(exc).__name__ if exc is not None else None,
        duration_s=duration_s, call_id=req.call_id, invoked=invoked,
    )


def _hook_payload(branch: BranchLike, rec: ActionRecord, **extra: Any) -> dict[str, Any]:
    """A TOOL_POST / TOOL_ERROR payload, from the record (summaries cut at 200 characters)."""
    payload = {
        "function": rec.function, "arguments": summarize(rec.arguments), "index": rec.index,
        "decision": rec.decision, "duration_s": rec.duration_s, "call_id": rec.call_id, "branch": branch.id,
    }
    if rec.error_type is not None:
        payload["type"] = rec.error_type
    payload.update(extra)
    return payload


def _failed(batch: _Batch, req: _Request, raw: Any, decision: Decision, exc: BaseException, *,
            arguments: dict[str, Any] | None = None, duration_s: float | None = None,
            invoked: bool = False) -> ActionRecord:
    """Record a failed request (its error payload); re-raise unless errors are suppressed."""
    rec = batch.keep(_record(req, raw, decision, arguments=arguments, reason=safe_str(exc),
                             output=_error_payload(req.function, exc), exc=exc,
                             duration_s=duration_s, invoked=invoked), exc)
    if not batch.param.suppress_errors:
        raise exc
    if batch.param.verbose_action:
        logger.error("Action %s failed: %s", req.function, safe_str(exc))
    return rec


def _interrupted(batch: _Batch, req: _Request, raw: Any, exc: BaseException, what: str, *,
                 arguments: dict[str, Any] | None, started: float | None, invoked: bool) -> None:
    """Record a request cut short by a BaseException (then re-raised by the caller)."""
    cancelled = is_cancellation(exc)
    how = "cancelled" if cancelled else f"raised {type(exc).__name__}"
    duration = time.perf_counter() - started if started is not None else None
    # A cancellation's own text names a scope's address and the task's source
    # line: what the model may read of it is a fixed word.
    output = _error_payload(req.function, exc, "cancelled" if cancelled else None)
    batch.keep(_record(req, raw, "error", arguments=arguments, reason=f"{what} {how}",
                       output=output, exc=exc, duration_s=duration, invoked=invoked), exc)


async def _act_one(batch: _Batch, req: _Request, timeout: float | None) -> ActionRecord:
    if req.index in batch.held:  # held back by the runtime (replay): nothing may see it
        raise batch.held[req.index]
    raw, tool = _admitted(batch, req)
    if type(tool) is ActionRecord:
        return tool
    tool = cast(Tool, tool)
    function: str = req.function
    gated = batch.branch.needs_authorization()
    try:
        kwargs = tool.validate_arguments(raw)
        # Nested values (lists, dicts, models) may be shared with ``raw`` and are
        # mutable: the gate and the tool each get their own deep copy, so neither
        # can change what the tool receives or what is recorded.
        if gated:
            shown, shown_raw, given = _copies(function, kwargs, raw)
            raw = dict(raw) if _flat(raw) else _copied(function, raw)
        else:
            given, raw = _tool_copy(function, kwargs, raw)
        if not _flat(kwargs):  # what is recorded: a copy, never the caller's own values
            kwargs = _copied(function, kwargs)
    except ValueError as exc:
        return _failed(batch, req, _kept(raw), "rejected", exc)
    if gated:  # 3. governance, on exactly what the tool will receive: fail closed
        verdict, reason, told = await _authorized(batch, req, raw, tool, kwargs, shown, shown_raw)
        if verdict != "allowed":
            return _not_allowed(batch, req, raw, kwargs, verdict, reason, told)
    # With nothing to ask (no gate, Branch's own authorize) every invocation is allowed.
    return await invoke(batch, req, tool, raw, kwargs, given, timeout)


def _admitted(batch: _Batch, req: _Request) -> tuple[Any, Tool | ActionRecord]:
    """Steps 1 and 2 of a request: its decoded arguments and its tool, or
    (with the arguments as far as they were decoded) the record of why it
    is never invoked."""
    raw: Any
    _, function, raw, invalid, _ = req
    # 1. content of the request: never invoke what cannot be invoked.
    try:
        if invalid:
            raise InvalidActionRequest(invalid)
        if not isinstance(function, str) or not function:
            raise InvalidActionRequest(f"function must be a non-empty string, got {function!r}")
        if type(raw) is not dict:  # JSON text, None...: decoded (a dict is used as it is)
            raw = decode_arguments(raw)
    except ValueError as exc:
        err = exc if isinstance(exc, InvalidActionRequest) else InvalidActionRequest(str(exc))
        return raw, _failed(batch, req, _kept(raw), "invalid", err)
    # 2. the offered tools are the allowed tools.
    tool = batch.branch.acts.get(function)
    if tool is None:
        return raw, _failed(batch, req, _kept(raw), "rejected", UnknownToolError(function, batch.offered))
    if function not in batch.offered:
        return raw, _failed(batch, req, _kept(raw), "not_offered", ToolNotOfferedError(function, batch.offered))
    if batch.tools[function] is not tool:  # replaced since it was offered: never shown to the model
        return raw, _failed(batch, req, _kept(raw), "not_offered",
                            ToolNotOfferedError(function, batch.offered, replaced=True))
    return raw, tool


async def _authorized(batch: _Batch, req: _Request, raw: Any, tool: Tool, kwargs: dict[str, Any],
                      shown: FrozenArguments, shown_raw: Any) -> tuple[str, str | None, str | None]:
    """Step 3: the branch's decision on a request, asked with the gate's own
    copies of the arguments: ``(verdict, reason, told)``. A gate cut short
    (cancelled, or raising a BaseException) is recorded and re-raised."""
    branch = batch.branch
    invocation = ToolInvocation(req.function, shown, tool, branch.id, req.index, batch.offered, shown_raw,
                                req.call_id)
    try:
        answer = await branch.authorization(invocation)
        return answer[0], answer[1], getattr(answer, "told", None)
    except BaseException as exc:
        _interrupted(batch, req, raw, exc, "gate", arguments=kwargs, started=None, invoked=False)
        raise


def _not_allowed(batch: _Batch, req: _Request, raw: Any, kwargs: dict[str, Any], verdict: str,
                 reason: str | None, told: str | None) -> ActionRecord:
    """The record of a call the gates did not allow: denied or timed out (a
    denial payload), or deferred (not run now; a decision comes through resume)."""
    function = req.function
    if verdict == "deferred":
        return batch.keep(_record(req, raw, "deferred", arguments=kwargs, reason=reason,
                                  output={"pending": DEFERRED_NOTE, "function": function, "reason": reason}))
    output = _denial(function, verdict, reason, told)
    return batch.keep(_record(req, raw, verdict, arguments=kwargs, reason=reason, output=output))  # type: ignore[arg-type]


def _denial(function: str, verdict: str, reason: str | None, told: str | None) -> dict[str, Any]:
    """The payload the model gets for a call authorization did not allow: the
    reason of a timeout, or of a gate's ``Deny(reason=...)`` (``told``,
    bounded and without secrets); a plain ``False`` says only that it was denied."""
    output: dict[str, Any] = {"error": DENIAL_ERROR, "function": function}
    if verdict == "timed_out":
        output["reason"] = reason
    elif told:
        output["reason"] = told
    return output


async def invoke(batch: _Batch, req: _Request, tool: Tool, raw: Any, kwargs: dict[str, Any],
                 given: dict[str, Any], timeout: float | None) -> ActionRecord:
    """Step 4 of a request every decision allowed: ``TOOL_PRE`` → the tool
    called with ``given`` (a copy of ``kwargs``) → ``TOOL_POST`` or
    ``TOOL_ERROR``; one record. A resumed deferred call enters here too."""
    branch, param = batch.branch, batch.param
    index, function, call_id = req.index, req.function, req.call_id
    used = getattr(branch, "usage", None)
    over = claim_tool_call(getattr(branch, "limits", None), used) if used is not None else None
    if over is not None:  # checked (and counted) before the call it limits
        return batch.keep(_record(req, raw, "over_limit", arguments=kwargs, reason=str(over),
                                  output=_error_payload(function, over), exc=over))
    if param.verbose_action:
        logger.debug("Invoking action %s with %s.", function, summarize(kwargs, VERBOSE_ARGS_LIMIT))
    started: float | None = None
    if tool.timeout is not None:
        timeout = tool.timeout
    try:
        if branch.has_hooks(HookPoint.TOOL_PRE):
            await branch.emit(HookPoint.TOOL_PRE, {
                "function": function, "arguments": summarize(kwargs), "index": index,
                "call_id": call_id, "branch": branch.id,
            })
        started = time.perf_counter()
        if tool.retries:
            output = await _retried(branch, req, tool, given, timeout)
        elif timeout is None:
            output = await tool._call(given)
        else:
            output = await _bounded(tool, given, timeout)
        if type(output) not in _ATOMIC:  # None and plain scalars always serialize
            _check_output(function, output)
    except Exception as exc:
        elapsed = time.perf_counter() - started if started is not None else None
        decision: Decision = "timed_out" if _was_cut(exc) else "error"
        rec = _record(req, raw, decision, arguments=kwargs, reason=safe_str(exc),
                      output=_error_payload(function, exc), exc=exc, duration_s=elapsed, invoked=started is not None)
        batch.keep(rec, exc)
        if branch.has_hooks(HookPoint.TOOL_ERROR):
            await branch.emit(HookPoint.TOOL_ERROR, _hook_payload(branch, rec, error=summarize(exc)))
        if not param.suppress_errors:
            raise
        if param.verbose_action:
            logger.error("Action %s failed: %s", function, safe_str(exc))
        return rec
    except BaseException as exc:
        what = "tool" if started is not None else "TOOL_PRE hook"
        _interrupted(batch, req, raw, exc, what, arguments=kwargs, started=started, invoked=started is not None)
        raise
    elapsed = time.perf_counter() - started
    # index, function, raw_arguments, arguments, decision, reason, output,
    # error_type, duration_s, call_id, invoked
    rec = batch.keep_allowed(ActionRecord(index, function, raw, kwargs, "allowed", None, output,
                                          None, elapsed, call_id, True))
    if branch.has_hooks(HookPoint.TOOL_POST):
        await branch.emit(HookPoint.TOOL_POST, _hook_payload(branch, rec, output=summarize(output)))
    if param.verbose_action:
        logger.debug("Action %s invoked in %.3fs.", function, elapsed)
    return rec


#: the attribute that marks the TimeoutError of a cut tool call (a tool raising TimeoutError itself is an ``error``)
_CUT_MARK = "_lionops_cut"


def _was_cut(exc: BaseException) -> bool:
    return getattr(exc, _CUT_MARK, False) is True


async def _bounded(tool: Tool, given: dict[str, Any], timeout: float) -> Any:
    """One call of ``tool`` cut after ``timeout`` seconds (a marked TimeoutError)."""
    with anyio.move_on_after(timeout):
        return await tool._call(given)
    # Only reached when the call was cut. A built-in TimeoutError on purpose:
    # the error payload's documented type (docs/governance.md), which otel
    # maps to timed_out; the mark tells it from a TimeoutError the tool raised.
    cut = TimeoutError(f"{tool.name!r} did not return within {timeout}s")
    setattr(cut, _CUT_MARK, True)
    raise cut


async def _retried(branch: BranchLike, req: _Request, tool: Tool, given: dict[str, Any],
                   timeout: float | None) -> Any:
    """Call an idempotent ``tool`` up to ``1 + tool.retries`` times on the
    failures it retries, each attempt with its own copy of ``given`` and
    bounded by ``timeout``; every failed attempt is logged (``tool_attempt``)."""
    retrying = AsyncRetrying(
        stop=stop_after_attempt(tool.retries + 1),
        wait=wait_exponential(multiplier=tool.retry_delay, exp_base=tool.retry_backoff),
        retry=retry_if_exception_type(tool.retry_on), sleep=current_clock().sleep, reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            args = copy.deepcopy(given)
            try:
                return await (tool._call(args) if timeout is None else _bounded(tool, args, timeout))
            except Exception as exc:
                branch.logs.log("tool_attempt", {
                    "function": tool.name, "index": req.index, "call_id": req.call_id, "branch": branch.id,
                    "attempt": attempt.retry_state.attempt_number, "of": tool.retries + 1,
                    "timed_out": _was_cut(exc), "error": safe_str(exc), "type": type(exc).__name__,
                })
                raise
    raise AssertionError("unreachable: tenacity re-raises the last failure")  # pragma: no cover


def _finish(batch: _Batch, records: list[ActionRecord] | None, raising: BaseException | None) -> None:
    """Hand out the records of ``batch`` and write its messages, in request order.

    The records come first, so a message writer that raises loses none of
    them. While ``raising`` (a tool's exception, a cancellation) propagates,
    a writer's failure does not replace it: it is logged as
    ``message_error`` and noted on ``raising``."""
    ordered = sorted(batch.records.values(), key=_index_of)
    if records is not None:
        records.extend(ordered)
    if raising is None:
        batch.write_messages(ordered)
        return
    try:
        batch.write_messages(ordered)
    except Exception as exc:  # noqa: BLE001 - the exception already propagating stays the one raised
        text = safe_str(exc)
        batch.branch.logs.log("message_error", {"error": text, "type": type(exc).__name__, "branch": batch.branch.id})
        raising.add_note(f"writing the messages of the batch failed too: {type(exc).__name__}: {text}")


async def act(
    branch: BranchLike,
    action_request: Any,
    action_param: ActionParam,
    *,
    offered: Iterable[str | Tool] | None = None,
    records: list[ActionRecord] | None = None,
) -> list[ActionResponseModel | None]:
    """Run action requests through governance and tools (ADR-0022 D4).

    Args:
        branch: the branch whose tools, authorizer, hooks, log, messages and
            limits (``max_requests``, ``gate_timeout``, ``observer_timeout``) apply.
        action_request: a list of requests, or one request: an
            ``ActionRequestModel``, a pydantic model with ``function`` and
            ``arguments`` fields, or a mapping with those keys (aliases
            ``name``/``parameters``/``args``/``input`` are normalized).
        action_param: strategy, suppression, AlcallParams and the ``tools``
            selector.
        offered: the tools offered in this call (any iterable of Tools, or
            of names resolved when ``act()`` starts; one Tool or name alone
            is that one); only these can run, and a name only as
            the Tool it was offered as (one registered anew under it since
            is ``not_offered``). Default: the tools ``action_param.tools``
            selects (all registered when it is ``None``). ``operate()``
            passes the Tools whose schemas it published.
        records: when given, the :class:`ActionRecord` of every request that
            was decided is appended here in request order, also when this raises.

    Returns:
        One ``ActionResponseModel`` per request, in request order (``None``
        results are dropped when the AlcallParams say ``output_dropna``);
        each carries its ``record``.

    Raises:
        ValueError: a request has no valid shape (nothing was invoked).
        ConfigurationError: the strategy is neither sequential nor concurrent.
        RequestLimitError: more requests than ``branch.max_requests`` and
            ``suppress_errors`` is false (nothing was invoked).
        Exception: the first tool failure in request order when
            ``suppress_errors`` is false (the others are cancelled).
        BaseException: a non-``Exception`` raised by a tool, gate or hook
            (the others are cancelled), re-raised as itself after the
            records were written; cancellation propagates unchanged.
    """
    items = action_request if isinstance(action_request, list) else [action_request]
    requests = [_normalize(i, item) for i, item in enumerate(items)]
    # The runtime's before_dispatch check (replay compares the requests with
    # its recording): what it raises ends act() with nothing dispatched; a
    # request it holds back raises its exception when reached.
    check = current_runtime().before_dispatch
    held = check([(r.index, r.function, r.arguments, r.invalid) for r in requests]) if check is not None else None
    strategy = action_param.strategy
    if strategy not in ACTION_STRATEGIES:
        raise ConfigurationError(
            f"Invalid action strategy {strategy!r}. Choose 'concurrent' or 'sequential'."
        )
    if offered is None:
        offered = branch.acts.select(action_param.tools)
    elif isinstance(offered, (str, Tool)):
        offered = (offered,)  # one name or Tool, never a name's characters
    elif not isinstance(offered, (list, tuple)):
        offered = tuple(offered)  # read twice below
    # Names are bound to their Tools now: a tool registered anew under an
    # offered name later in the call (by a Middle, gate, hook or tool) is not
    # the tool that was offered, and does not run.
    bound: dict[str, Tool | None] = {t.name: t for t in offered if isinstance(t, Tool)}
    if len(bound) < len(offered):  # names among them (or Tools that share a name)
        bound |= {t: branch.acts.get(t) for t in offered if isinstance(t, str)}
    batch = _Batch(branch, action_param, bound)
    if held:
        batch.held = held
    cap = branch.max_requests
    results: list[ActionRecord | None] = []
    over: list[ActionRecord] = []
    try:
        if cap is not None and len(requests) > cap:
            for req in requests[cap:]:
                exc = RequestLimitError(
                    f"request {req.index} is past the cap of {cap} action requests per call; not run")
                over.append(batch.keep(_record(req, req.arguments, "rejected", reason=str(exc),
                                               output=_error_payload(req.function, exc), exc=exc), exc))
            if not action_param.suppress_errors:
                raise batch.errors[cap]
            requests = requests[:cap]
        call_params = action_param.action_call_params or DEFAULT_ACTION_CALL_PARAMS
        if strategy == "sequential" or (len(requests) == 1 and call_params is DEFAULT_ACTION_CALL_PARAMS):
            # each in its own copy of the context, as each request of a concurrent
            # batch (one request alone is what the default alcall runs so too: in
            # this task); the caller's own call_params always run the batch
            for req in requests:
                results.append(await in_own_context(
                    observe.tool_call, branch, req, _act_one(batch, req, call_params.retry_timeout)))
        else:
            timeout = call_params.retry_timeout
            # The timeout applies to each tool call inside _act_one; retries
            # never apply: a request is decided once (its gate asked, its tool
            # called, its record logged), as in a sequential batch.
            outer: AlcallParams = (
                call_params if timeout is None and call_params.retry_attempts == 0
                else dataclasses.replace(call_params, retry_timeout=None, retry_attempts=0)
            )

            def run(req: _Request) -> Awaitable[ActionRecord]:
                return observe.tool_call(branch, req, _act_one(batch, req, timeout))

            results = await outer(requests, run)
    except BaseException as exc:
        _finish(batch, records, exc)
        raise
    _finish(batch, records, None)
    # What the strategy returned, in its order (an AlcallParams may drop or
    # blank results: the ADR drops None responses), then the over-cap ones.
    return [rec.response() if rec is not None else None for rec in [*results, *over]]


async def phase(ctx: OperationContext) -> None:
    """D4: every request the adapter phase read goes through :func:`act`."""
    assert ctx.action_param is not None
    ctx.responses = await act(
        ctx.branch, ctx.requests, ctx.action_param, offered=ctx.offered, records=ctx.actions,
    )
    ctx.acted = True
