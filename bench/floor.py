"""The floors of the end-to-end scenarios: what a careful caller writes by hand.

No lionops import. :class:`HttpxFloor` is httpx2.AsyncClient + pydantic;
:class:`OpenAIFloor` is the official ``openai`` SDK (``chat.completions.create``
then ``model_validate_json``), the floor most users write. Both send the
request lionops sends for the scenario (the same model, messages,
``response_format`` and tools: :func:`request_body`) and do the same work on
the answer (:func:`finish`): validate the structured content into the
response model, take the tool calls (native ``tool_calls``, or the
``action_requests`` inside the content), validate each call's arguments
against its tool's argument model, run the tools concurrently in an anyio
task group, attach their ``action_responses`` to the result and keep the
turn's messages. Everything that does not depend on the call (schemas,
argument models, tool specs, the request body's fixed parts) is built once.

``shape`` is how tools are offered: ``"native"`` (``tools=`` in the request,
``tool_calls`` in the answer) or ``"in_body"`` (described in the prompt,
requested inside the structured answer).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, create_model

from common import API_KEY, INSTRUCTION, MODEL, TOOLS, Forecast

__all__ = ["HttpxFloor", "OpenAIFloor", "request_body", "finish"]


class ActionRequestModel(BaseModel):
    """One tool call: the name of a registered function and its arguments as a JSON object."""

    function: str | None = None
    arguments: dict[str, Any] | None = None


class ActionResponseModel(BaseModel):
    function: str
    arguments: dict[str, Any]
    output: Any = None


ForecastPlain = create_model("ForecastRequest", __base__=Forecast)


class ForecastRequest(Forecast):
    action_required: bool | None = Field(
        None, description="True when action_requests must be executed before the task is done.")
    action_requests: list[ActionRequestModel] | None = Field(
        None, description="Tool calls to execute: each names a registered function and its arguments object.")


class ForecastResponse(ForecastRequest):
    action_responses: list[ActionResponseModel] | None = None


def _untitled(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _untitled(v) for k, v in node.items() if k != "title"}
    return node


class _Tool:
    def __init__(self, func: Any) -> None:
        self.func = func
        self.name = func.__name__
        defs = {n: (p.annotation, ...) for n, p in inspect.signature(func).parameters.items()}
        self.args = create_model(f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **defs)
        self.spec = {"type": "function", "function": {
            "name": self.name, "description": inspect.getdoc(func),
            "parameters": _untitled(self.args.model_json_schema())}}


_TOOLS = {t.__name__: _Tool(t) for t in TOOLS}
_TOOL_SPECS = [t.spec for t in _TOOLS.values()]


def _response_format(model: type[BaseModel], strict: bool) -> dict[str, Any]:
    schema = model.model_json_schema()
    if strict:  # every field required, no nested objects: strict mode keeps the meaning
        schema = {**schema, "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": schema["title"], "schema": schema, "strict": strict}}


_FORMATS = {False: _response_format(ForecastPlain, True), True: _response_format(ForecastRequest, False)}
_TOOLS_PROMPT = ("Tools you may request in action_requests (you never run them; the runtime does):\n"
                 + json.dumps(_TOOL_SPECS))


def request_body(tools: bool, stream: bool, shape: str = "in_body") -> dict[str, Any]:
    """The request of one call: model, messages, ``response_format`` and, with
    ``tools``, the tool specs (natively or in the prompt)."""
    body: dict[str, Any] = {"model": MODEL, "response_format": _FORMATS[tools]}
    content = INSTRUCTION
    if tools and shape == "native":
        body["tools"] = _TOOL_SPECS
    elif tools:
        content = f"{INSTRUCTION}\n\n{_TOOLS_PROMPT}"
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body["messages"] = [{"role": "user", "content": content}]
    return body


async def _run(request: ActionRequestModel, tool: _Tool, out: list[Any], i: int) -> None:
    args = tool.args.model_validate(request.arguments or {})
    out[i] = ActionResponseModel(function=tool.name, arguments=request.arguments or {},
                                 output=tool.func(**dict(args)))


async def finish(text: str | None, calls: list[tuple[str, str]], tools: bool,
                 history: list[dict[str, Any]]) -> BaseModel:
    """The parse and tool work on one answer: ``text`` is the content, ``calls``
    the native tool calls as ``(name, arguments JSON)``."""
    history.append({"role": "assistant", "content": text})
    if not tools:
        return ForecastPlain.model_validate_json(text or "")
    result = ForecastResponse.model_validate_json(text or "")
    requests = list(result.action_requests or [])
    requests += [ActionRequestModel(function=name, arguments=json.loads(args or "{}")) for name, args in calls]
    result.action_requests = requests
    responses: list[Any] = [None] * len(requests)
    if len(requests) == 1:
        await _run(requests[0], _TOOLS[requests[0].function or ""], responses, 0)
    elif requests:
        async with anyio.create_task_group() as tg:
            for i, request in enumerate(requests):
                tg.start_soon(_run, request, _TOOLS[request.function or ""], responses, i)
    result.action_responses = responses
    history += [{"role": "action_response", "content": r.model_dump()} for r in responses]
    return result


class HttpxFloor:
    """httpx2.AsyncClient + pydantic, one client per process."""

    def __init__(self, base_url: str, tools: bool, stream: bool, shape: str = "in_body") -> None:
        self.url = f"{base_url}/chat/completions"
        self.tools, self.stream, self.shape = tools, stream, shape
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
        self.client: Any = None

    async def __call__(self) -> BaseModel:
        import httpx2

        if self.client is None:
            self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0))
        body = request_body(self.tools, self.stream, self.shape)
        history = list(body["messages"])
        if not self.stream:
            response = await self.client.post(self.url, json=body, headers=self.headers)
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
            calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()]
            return await finish(message.get("content"), calls, self.tools, history)
        text: list[str] = []
        parts: dict[int, list[Any]] = {}
        async with self.client.stream("POST", self.url, json=body, headers=self.headers) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[5:])["choices"]:
                    delta = choice["delta"]
                    if delta.get("content"):
                        text.append(delta["content"])
                    for call in delta.get("tool_calls") or ():
                        entry = parts.setdefault(call["index"], [None, []])
                        fn = call.get("function") or {}
                        entry[0] = entry[0] or fn.get("name")
                        entry[1].append(fn.get("arguments") or "")
        calls = [(name, "".join(args)) for name, args in parts.values()]
        return await finish("".join(text), calls, self.tools, history)


class OpenAIFloor:
    """The official ``openai`` SDK: ``chat.completions.create`` and ``model_validate_json``."""

    def __init__(self, base_url: str, tools: bool, stream: bool, shape: str = "in_body") -> None:
        self.base_url, self.tools, self.stream, self.shape = base_url, tools, stream, shape
        self.client: Any = None

    async def __call__(self) -> BaseModel:
        if self.client is None:
            from openai import AsyncOpenAI

            self.client = AsyncOpenAI(base_url=self.base_url, api_key=API_KEY, max_retries=0)
        body = request_body(self.tools, self.stream, self.shape)
        history = list(body["messages"])
        if not self.stream:
            completion = await self.client.chat.completions.create(**body)
            message = completion.choices[0].message
            calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or ()]
            return await finish(message.content, calls, self.tools, history)
        text: list[str] = []
        parts: dict[int, list[Any]] = {}
        async for chunk in await self.client.chat.completions.create(**body):
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                for call in delta.tool_calls or ():
                    entry = parts.setdefault(call.index, [None, []])
                    entry[0] = entry[0] or (call.function.name if call.function else None)
                    entry[1].append((call.function.arguments if call.function else None) or "")
        calls = [(name, "".join(args)) for name, args in parts.values()]
        return await finish("".join(text), calls, self.tools, history)
