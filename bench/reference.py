"""The floor: ADR-0022's steps as plain straight-line code with pydantic.

No machine, no trace, no lionops import. It does the same work per call as
lionops' ``operate()`` does for the benchmark scenarios: normalize the call
(D1), publish tool schemas and pick the generated response type (D2, types
built once per configuration), await the Middle once and apply the outer
validation policy (D3), then run each action request through one governed
path (shape check, argument validation, authorization, hooks, event log,
messages, error suppression) and enrich the original result (D4).
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, create_model


class Instruct(BaseModel):
    instruction: str | None = None
    guidance: Any = None
    context: Any = None
    reason: bool | None = None
    actions: bool | None = None
    action_strategy: str | None = None


class Reason(BaseModel):
    title: str | None = None
    content: str | None = None
    confidence_score: float | None = None


class ActionRequest(BaseModel):
    function: str | None = None
    arguments: dict[str, Any] | None = None


class ActionResponse(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    function: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: Any = None


@dataclass(slots=True, frozen=True)
class ChatParam:
    guidance: Any = None
    context: Any = None
    sender: Any = None
    recipient: Any = None
    response_format: Any = None
    tool_schemas: list[dict[str, Any]] | None = None
    imodel: Any = None
    imodel_kw: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ParseParam:
    response_format: Any = None
    handle_validation: str = "return_value"
    imodel: Any = None


@dataclass(slots=True, frozen=True)
class ActionParam:
    tools: Any = None
    strategy: str = "concurrent"
    suppress_errors: bool = True


@dataclass(slots=True)
class Message:
    role: str
    content: Any
    sender: Any = None
    recipient: Any = None
    timestamp: float = field(default_factory=time.time)


@dataclass(slots=True)
class Tool:
    """A tool with its argument model and schema, both built at registration."""

    func: Callable[..., Any]
    name: str = ""
    args_model: type[BaseModel] = field(init=False)
    schema: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.name or self.func.__name__
        defs = {
            p.name: (p.annotation, ... if p.default is p.empty else p.default)
            for p in inspect.signature(self.func).parameters.values()
        }
        self.args_model = create_model(f"{self.name}Args", __config__=ConfigDict(extra="forbid"), **defs)
        params = self.args_model.model_json_schema()
        self.schema = {"type": "function", "function": {
            "name": self.name, "description": inspect.getdoc(self.func) or "", "parameters": params,
        }}


class Branch:
    def __init__(self, tools: list[Tool] | tuple[Tool, ...] = ()) -> None:
        self.id = uuid.uuid4().hex
        self.user = None
        self.chat_model = None
        self.messages: list[Message] = []
        self.logs: list[tuple[str, dict[str, Any], float]] = []
        self.tools = {t.name: t for t in tools}
        self.gates: list[Callable[[Any], Any]] = []
        self.hooks: dict[str, list[Callable[[dict[str, Any]], Any]]] = {"pre": [], "post": [], "error": []}
        self.providers: list[Any] = []

    async def authorize(self, function: str, arguments: dict[str, Any]) -> bool:
        for gate in self.gates:
            try:
                verdict = gate(function, arguments)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception:  # noqa: BLE001 - fail closed
                return False
            if verdict is not True:
                return False
        return True

    async def emit(self, point: str, payload: dict[str, Any]) -> None:
        for hook in self.hooks[point]:
            try:
                out = hook(payload)
                if inspect.isawaitable(out):
                    await out
            except Exception as exc:  # noqa: BLE001 - observers never change the outcome
                self.logs.append(("hook_error", {"error": str(exc)}, time.time()))


_TYPES: dict[tuple[Any, ...], type[BaseModel]] = {}


def response_type(base: type[BaseModel] | None, reason: bool, actions: bool) -> type[BaseModel]:
    """The generated response type, built once per configuration."""
    key = (base, reason, actions)
    cached = _TYPES.get(key)
    if cached is None:
        fields: dict[str, Any] = {}
        if reason:
            fields["reason"] = (Reason | None, None)
        if actions:
            fields["action_required"] = (bool | None, None)
            fields["action_requests"] = (list[ActionRequest] | None, None)
        request = create_model(f"{getattr(base, '__name__', 'Operative')}Request",
                               __base__=base or BaseModel, **fields)
        cached = create_model(f"{getattr(base, '__name__', 'Operative')}Response", __base__=request,
                              action_responses=(list[ActionResponse] | None, None))
        _TYPES[key] = cached
    return cached


async def operate(  # noqa: C901 - the floor is one straight-line function on purpose: a split adds calls it must not pay
    branch: Branch,
    *,
    instruction: Any = None,
    guidance: Any = None,
    context: Any = None,
    response_format: Any = None,
    actions: bool = False,
    reason: bool = False,
    handle_validation: str = "return_value",
    skip_validation: bool = False,
    invoke_actions: bool = True,
    action_strategy: str = "concurrent",
    tools: Any = None,
    middle: Any,
    **model_kw: Any,
) -> Any:
    # D1: normalize the call.
    if handle_validation not in ("raise", "return_value", "return_none"):
        raise ValueError(f"bad handle_validation {handle_validation!r}")
    instruct = Instruct(instruction=instruction, guidance=guidance, context=context)
    if reason:
        instruct.reason = True
    if actions:
        instruct.actions = True
        instruct.action_strategy = action_strategy
    chat = ChatParam(guidance=instruct.guidance, context=instruct.context, sender=branch.user or "user",
                     recipient=branch.id, response_format=response_format, imodel=branch.chat_model,
                     imodel_kw=model_kw)
    action = ActionParam(tools=tools, strategy=action_strategy) if invoke_actions and instruct.actions else None

    # D2: tool schemas, generated response type.
    if action is not None:
        selected = branch.tools.values() if tools is None else [branch.tools[n] for n in tools]
        chat = dataclasses.replace(chat, tool_schemas=[t.schema for t in selected])
    is_model = isinstance(response_format, type) and issubclass(response_format, BaseModel)
    model_class = response_format if is_model else None
    fmt = response_format
    if model_class is not None or action is not None or instruct.reason:
        fmt = response_type(model_class, bool(instruct.reason), action is not None)
        chat = dataclasses.replace(chat, response_format=fmt)
    parse = ParseParam(response_format=fmt, imodel=branch.chat_model)

    # D3: one adapter await, then the outer validation policy.
    result = await middle(branch, instruct.instruction, chat, parse, False, skip_validation=skip_validation)
    if skip_validation:
        return result
    if model_class is not None and not isinstance(result, model_class):
        if handle_validation == "return_value":
            return result
        if handle_validation == "return_none":
            return None
        raise ValueError(f"expected {model_class.__name__}, got {repr(result)[:200]}")
    if not invoke_actions or action is None:
        return result
    if isinstance(result, BaseModel):
        requests = getattr(result, "action_requests", None)
    elif isinstance(result, Mapping):
        requests = result.get("action_requests")
    else:
        requests = None
    if requests is None:
        return result

    # D4: every request through act(), then enrichment.
    responses = [r for r in await act(branch, requests, action) if r is not None]
    if not responses:
        return result
    for provider in branch.providers:
        for response in responses:
            provider.writeback(response)
    if isinstance(result, BaseModel):
        result.action_responses = responses
    else:
        result["action_responses"] = responses
    return result


def _shape(item: Any) -> tuple[Any, Any]:
    if isinstance(item, BaseModel):
        return item.function, item.arguments
    if isinstance(item, Mapping) and "function" in item and "arguments" in item:
        return item["function"], item["arguments"]
    raise ValueError(f"bad action request shape: {type(item).__name__}")


async def act(branch: Branch, requests: Any, param: ActionParam) -> list[ActionResponse]:
    items = [_shape(r) for r in (requests if isinstance(requests, list) else [requests])]
    if param.strategy == "sequential" or len(items) < 2:
        return [await _act_one(branch, i, f, a, param) for i, (f, a) in enumerate(items)]
    out: list[Any] = [None] * len(items)

    async def run(i: int, function: Any, arguments: Any) -> None:
        out[i] = await _act_one(branch, i, function, arguments, param)

    async with anyio.create_task_group() as tg:
        for i, (f, a) in enumerate(items):
            tg.start_soon(run, i, f, a)
    return out


async def _act_one(branch: Branch, index: int, function: Any, arguments: Any, param: ActionParam) -> ActionResponse:
    arguments = arguments or {}
    tool = branch.tools.get(function)
    try:
        if tool is None:
            raise LookupError(f"unknown function {function!r}")
        kwargs = tool.args_model.model_validate(arguments).model_dump()
    except Exception as exc:  # noqa: BLE001
        return _failed(branch, function, arguments, exc, param)
    if not await branch.authorize(function, arguments):
        output = {"error": "denied by governance gate", "function": function}
        branch.logs.append(("denied", {"function": function, "arguments": arguments}, time.time()))
        _record(branch, function, arguments, output)
        return ActionResponse(function=function, arguments=arguments, output=output)
    if branch.hooks["pre"]:
        await branch.emit("pre", {"function": function, "arguments": str(arguments)[:200], "index": index})
    started = time.perf_counter()
    try:
        output = tool.func(**kwargs)
        if inspect.isawaitable(output):
            output = await output
    except Exception as exc:  # noqa: BLE001
        if branch.hooks["error"]:
            await branch.emit("error", {"function": function, "error": str(exc)[:200]})
        return _failed(branch, function, arguments, exc, param)
    elapsed = time.perf_counter() - started
    if branch.hooks["post"]:
        await branch.emit("post", {"function": function, "output": str(output)[:200], "duration_s": elapsed})
    branch.logs.append(("action", {"function": function, "arguments": arguments, "output": output,
                                   "index": index, "duration_s": elapsed}, time.time()))
    _record(branch, function, arguments, output)
    return ActionResponse(function=function, arguments=arguments, output=output)


def _record(branch: Branch, function: Any, arguments: Any, output: Any) -> None:
    branch.messages.append(Message("action_request", {"function": function, "arguments": arguments},
                                   branch.id, function))
    branch.messages.append(Message("action_response", {"function": function, "arguments": arguments,
                                                       "output": output}, function, branch.id))


def _failed(branch: Branch, function: Any, arguments: Any, exc: Exception, param: ActionParam) -> ActionResponse:
    branch.logs.append(("action_error", {"function": function, "error": str(exc)}, time.time()))
    if not param.suppress_errors:
        raise exc
    output = {"error": str(exc), "type": type(exc).__name__, "message": f"Error invoking action '{function}': {exc}"}
    _record(branch, function, arguments, output)
    return ActionResponse(function=str(function), arguments=arguments if isinstance(arguments, dict) else {},
                          output=output)
