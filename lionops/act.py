"""``act()``: the one governed path from action requests to tools (ADR-0022 D4).

Every request, whatever adapter proposed it, goes through :func:`act`:

1. All request *shapes* are checked first; a bad shape raises ``ValueError``
   before anything is invoked.
2. Per request, in this order: arguments must be a JSON object (C01, C05),
   the function must be registered (C07), the arguments must satisfy the
   tool's signature (C08); a request failing any of these is never invoked.
3. ``branch.authorize(ToolInvocation)`` is asked; a denial (or an authorizer
   that raises or returns a non-bool) gives a denial payload, is recorded in
   messages and the event log, and emits no hooks.
4. ``TOOL_PRE`` → invoke → ``TOOL_POST`` or ``TOOL_ERROR``; event log and
   action request/response messages.
5. An output that does not serialize to JSON is a tool failure
   (``ToolOutputError``), so responses, messages and logs always serialize.
6. With ``suppress_errors`` a failure becomes an error-payload response;
   otherwise the original exception is re-raised after the hook and log.

``"sequential"`` awaits requests in input order; ``"concurrent"`` runs them
through the ActionParam's ``AlcallParams`` (results in input order); any
other strategy raises ``ConfigurationError``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core
from pydantic import BaseModel

from . import observe
from ._defaults import DEFAULT_ACTION_CALL_PARAMS
from .alcall import AlcallParams
from .errors import ConfigurationError
from .hooks import VERBOSE_ARGS_LIMIT, HookPoint, safe_str, summarize
from .models import ActionRequestModel, ActionResponseModel, decode_arguments, normalize_request_keys
from .params import ActionParam
from .tools import ToolInvocation, UnknownToolError

if TYPE_CHECKING:
    from .branch import Branch

__all__ = ["act", "InvalidActionRequest", "ToolOutputError", "DENIAL_ERROR", "BEFORE_DISPATCH"]

logger = logging.getLogger("lionops.act")

#: The error text of a governance denial payload.
DENIAL_ERROR = "denied by governance gate"

#: A check of one call's requests before any is authorized or invoked:
#: called with ``(index, function, arguments, invalid)`` per request once
#: every shape is checked; what it raises ends ``act()`` with nothing
#: dispatched (no gate, hook, tool or record). Replay sets it to compare the
#: requests with its recording (``lionops.replay``).
BEFORE_DISPATCH: contextvars.ContextVar[Callable[[list[tuple[int, Any, Any, str | None]]], None] | None] = (
    contextvars.ContextVar("lionops_before_dispatch", default=None))

_SHAPE_ERROR = (
    "action_request must be an ActionRequest, BaseModel with 'function'"
    " and 'arguments', or dict with 'function' and 'arguments'."
)


class InvalidActionRequest(ValueError):
    """A request of valid shape whose content cannot be invoked (non-object arguments, no name)."""


class ToolOutputError(TypeError):
    """A tool returned a value that cannot be serialized to JSON (an error
    payload under ``suppress_errors``, like any tool failure)."""


def _check_output(function: str, output: Any) -> None:
    """Raise ToolOutputError unless ``output`` serializes to JSON (pydantic's
    rules: models, dataclasses, datetimes, sets... are fine; opaque objects
    and cycles are not)."""
    if output is None or type(output) in (str, int, float, bool):
        return
    try:
        pydantic_core.to_json(output)
    except Exception as exc:  # noqa: BLE001 - serialization errors, cycles, recursion
        raise ToolOutputError(
            f"output of {function!r} is not JSON-serializable ({type(output).__name__}): {safe_str(exc)}"
        ) from exc


@dataclass(slots=True, frozen=True)
class _Request:
    index: int
    function: Any
    arguments: Any
    invalid: str | None
    call_id: str | None = None
    #: (role, content, sender, recipient) of this request's messages, added in request order by act().
    records: list[tuple[str, Any, Any, Any]] = dataclasses.field(default_factory=list)

    def record(self, role: str, content: Any, sender: Any, recipient: Any) -> None:
        self.records.append((role, content, sender, recipient))


def _normalize(index: int, item: Any) -> _Request:
    """Check one request's shape (ADR-0022 D4); raise ValueError if it has none."""
    invalid: str | None = None
    if isinstance(item, ActionRequestModel):
        function, arguments, invalid = item.function, item.arguments, item.invalid
    elif isinstance(item, BaseModel) and {"function", "arguments"} <= set(type(item).model_fields):
        function, arguments = getattr(item, "function"), getattr(item, "arguments")
    elif isinstance(item, Mapping):
        data = normalize_request_keys(dict(item))
        if not {"function", "arguments"} <= set(data):
            raise ValueError(f"{_SHAPE_ERROR} Request {index} has keys {sorted(map(str, data))}.")
        function, arguments = data["function"], data["arguments"]
        invalid = data.get("invalid") if isinstance(data.get("invalid"), str) else None
    else:
        raise ValueError(f"{_SHAPE_ERROR} Request {index} is {type(item).__name__}.")
    call_id = getattr(item, "call_id", None) if not isinstance(item, Mapping) else item.get("call_id")
    return _Request(index, function, arguments, invalid, call_id if isinstance(call_id, str) else None)


def _error_payload(function: Any, exc: BaseException) -> dict[str, Any]:
    text = safe_str(exc)
    return {
        "error": text,
        "type": type(exc).__name__,
        "message": f"Error invoking action '{function}': {text}",
    }


def _hooked(branch: Branch, point: HookPoint) -> bool:
    """Whether ``point`` has handlers: payload summaries are built only for them."""
    return bool(branch._hooks[point])


def _request_content(function: Any, arguments: Any) -> dict[str, Any]:
    return {"function": function, "arguments": arguments}


async def _act_one(
    branch: Branch,
    req: _Request,
    param: ActionParam,
    timeout: float | None,
) -> ActionResponseModel:
    function = req.function
    raw_args = req.arguments
    # 1. content of the request: never invoke what cannot be invoked.
    try:
        if req.invalid:
            raise InvalidActionRequest(req.invalid)
        if not isinstance(function, str) or not function:
            raise InvalidActionRequest(f"function must be a non-empty string, got {function!r}")
        arguments = decode_arguments(raw_args)
    except ValueError as exc:
        err = exc if isinstance(exc, InvalidActionRequest) else InvalidActionRequest(str(exc))
        return _failed(branch, req, function, raw_args, err, param, stage="invalid")
    tool = branch.acts.get(function)
    try:
        if tool is None:
            raise UnknownToolError(function, branch.acts.names)
        kwargs = tool.validate_arguments(arguments)
    except (UnknownToolError, ValueError) as exc:
        return _failed(branch, req, function, arguments, exc, param, stage="rejected")

    # 3. governance: fail closed.
    invocation = ToolInvocation(function, arguments, tool, branch.id, req.index)
    if not await branch.authorize(invocation):
        output = {"error": DENIAL_ERROR, "function": function}
        branch.logs.log("denied", {"function": function, "arguments": arguments, "index": req.index, "branch": branch.id})
        req.record("action_request", _request_content(function, arguments), branch.id, function)
        req.record("action_response", {"function": function, "arguments": arguments, "output": output},
                   function, branch.id)
        return ActionResponseModel(function=function, arguments=arguments, output=output)

    # 4. invocation with hooks.
    if param.verbose_action:
        logger.debug("Invoking action %s with %s.", function, summarize(arguments, VERBOSE_ARGS_LIMIT))
    if _hooked(branch, HookPoint.TOOL_PRE):
        await branch.emit(HookPoint.TOOL_PRE, {
            "function": function, "arguments": summarize(arguments), "index": req.index, "branch": branch.id,
        })
    started = time.perf_counter()
    try:
        if timeout is None:
            output = await tool._call(kwargs)
        else:
            with anyio.fail_after(timeout):
                output = await tool._call(kwargs)
        _check_output(function, output)
    except Exception as exc:
        if _hooked(branch, HookPoint.TOOL_ERROR):
            await branch.emit(HookPoint.TOOL_ERROR, {
                "function": function, "arguments": summarize(arguments), "index": req.index,
                "error": summarize(exc), "type": type(exc).__name__, "branch": branch.id,
            })
        return _failed(branch, req, function, arguments, exc, param, stage="error")
    elapsed = time.perf_counter() - started
    if _hooked(branch, HookPoint.TOOL_POST):
        await branch.emit(HookPoint.TOOL_POST, {
            "function": function, "arguments": summarize(arguments), "index": req.index,
            "output": summarize(output), "duration_s": elapsed, "branch": branch.id,
        })
    branch.logs.log("action", {
        "function": function, "arguments": arguments, "output": output,
        "index": req.index, "duration_s": elapsed, "branch": branch.id,
    })
    req.record("action_request", _request_content(function, arguments), branch.id, function)
    req.record("action_response", {"function": function, "arguments": arguments, "output": output},
               function, branch.id)
    if param.verbose_action:
        logger.debug("Action %s invoked in %.3fs.", function, elapsed)
    return ActionResponseModel(function=function, arguments=arguments, output=output)


def _failed(
    branch: Branch,
    req: _Request,
    function: Any,
    arguments: Any,
    exc: Exception,
    param: ActionParam,
    *,
    stage: str,
) -> ActionResponseModel:
    """Log and record a failed request; return its error payload or re-raise."""
    branch.logs.log("action_error", {
        "stage": stage, "error": safe_str(exc), "type": type(exc).__name__, "function": function,
        "arguments": arguments, "index": req.index, "branch": branch.id,
    })
    if not param.suppress_errors:
        raise exc
    if param.verbose_action:
        logger.error("Action %s failed: %s", function, safe_str(exc))
    output = _error_payload(function, exc)
    args_dict = arguments if isinstance(arguments, dict) else {}
    req.record("action_request", _request_content(function, arguments), branch.id, str(function))
    req.record("action_response", {"function": function, "arguments": arguments, "output": output},
               str(function), branch.id)
    return ActionResponseModel(
        function=function if isinstance(function, str) else str(function or "unknown"),
        arguments=args_dict,
        output=output,
    )


async def act(
    branch: Branch,
    action_request: Any,
    action_param: ActionParam,
) -> list[ActionResponseModel]:
    """Run action requests through governance and tools (ADR-0022 D4).

    Args:
        branch: the branch whose tools, authorizer, hooks, log and messages apply.
        action_request: a list of requests, or one request: an
            ``ActionRequestModel``, a pydantic model with ``function`` and
            ``arguments`` fields, or a mapping with those keys (aliases
            ``name``/``parameters``/``args``/``input`` are normalized).
        action_param: strategy, suppression and AlcallParams.

    Returns:
        One ``ActionResponseModel`` per request, in request order (``None``
        results are dropped when the AlcallParams say ``output_dropna``).

    Raises:
        ValueError: a request has no valid shape (nothing was invoked).
        ConfigurationError: the strategy is neither sequential nor concurrent.
        Exception: the first tool failure in request order when
            ``suppress_errors`` is false (the others are cancelled).
    """
    items = action_request if isinstance(action_request, list) else [action_request]
    requests = [_normalize(i, item) for i, item in enumerate(items)]
    check = BEFORE_DISPATCH.get()
    if check is not None:
        check([(r.index, r.function, r.arguments, r.invalid) for r in requests])
    try:
        return await _dispatch(branch, requests, action_param)
    finally:
        # Messages go in request order, whatever order the requests completed in.
        for req in requests:
            for role, content, sender, recipient in req.records:
                branch.messages.add(role, content, sender=sender, recipient=recipient,  # type: ignore[arg-type]
                                    metadata={"call_id": req.call_id} if req.call_id else {})


async def _dispatch(branch: Branch, requests: list[_Request], action_param: ActionParam) -> list[ActionResponseModel]:
    strategy = action_param.strategy
    if strategy == "sequential":
        call_params = action_param.action_call_params or DEFAULT_ACTION_CALL_PARAMS
        out = []
        for req in requests:
            out.append(await observe.tool_call(branch, req, _act_one(branch, req, action_param, call_params.retry_timeout)))
        return out
    if strategy == "concurrent":
        call_params = action_param.action_call_params or DEFAULT_ACTION_CALL_PARAMS
        timeout = call_params.retry_timeout
        outer: AlcallParams = (
            call_params if timeout is None else dataclasses.replace(call_params, retry_timeout=None)
        )

        async def run(req: _Request) -> ActionResponseModel:
            return await observe.tool_call(branch, req, _act_one(branch, req, action_param, timeout))

        return await outer(requests, run)
    raise ConfigurationError(
        f"Invalid action strategy {strategy!r}. Choose 'concurrent' or 'sequential'."
    )
