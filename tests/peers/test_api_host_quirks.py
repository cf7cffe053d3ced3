"""Answers of OpenAI-compatible hosts read right, through the public API.

- A placeholder legacy ``function_call`` (every value empty; one host sends
  it on every answer) requests no tool: plain and streamed.
- A stream that ends with ``[DONE]`` but never sends a finish reason: with no
  response format its text comes back as an uncoerced ``RawOutput`` that says
  so, and no tool runs; under a response format the call fails as before.
"""

from __future__ import annotations

import json

import pytest

from lionops import Branch, EndpointResponseError, RawOutput
from lionops.testing import Reply, chunked, completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio

PLACEHOLDERS = [
    {"name": "", "arguments": ""},
    {"name": None, "arguments": None},
    {"name": "", "arguments": "{}"},
    {"name": " ", "arguments": " "},
]


def _with_function_call(content: str, function_call: dict, finish: str = "stop") -> dict:
    done = completion(content, finish_reason=finish)
    done["choices"][0]["message"]["function_call"] = function_call
    return done


@pytest.mark.parametrize("placeholder", PLACEHOLDERS, ids=["empty", "nulls", "empty-object", "blanks"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_placeholder_function_call_requests_no_tool(server, placeholder, stream) -> None:  # noqa: F811
    done = _with_function_call(json.dumps({"answer": 7}), placeholder)
    if stream:
        chunks = chunked(done)
        chunks.insert(1, {**chunks[1], "choices": [{"index": 0, "delta": {"function_call": placeholder},
                                                    "finish_reason": None}]})
        server.push(Reply(stream=chunks))
    else:
        server.push(done)
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=box.tools())
    out, trace = await branch.operate_traced(instruction="x", response_format=Answer, actions=True, stream=stream)
    await model.aclose()
    assert out.answer == 7 and not out.action_requests and box.calls == {}
    assert trace.meta["tool_calls"] == 0 and "act" not in trace.states
    assert not [m for m in branch.messages if m.role == "action_request"]


async def test_a_real_legacy_function_call_still_runs(server) -> None:  # noqa: F811
    server.push(_with_function_call(json.dumps({"answer": 7}), {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                                    "function_call"))
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=box.tools())
    await branch.operate(instruction="x", response_format=Answer, actions=True)
    await model.aclose()
    assert box.calls == {"get_weather": 1}


def _no_finish(done: dict) -> list[dict]:
    """The chunks of ``done`` with the finish reason never sent."""
    return [c for c in chunked(done) if not (c["choices"] and c["choices"][0]["finish_reason"])]


@pytest.mark.parametrize("calls", [False, True], ids=["text", "text-and-tool-call"])
async def test_done_without_a_finish_reason_returns_the_text_uncoerced(server, calls) -> None:  # noqa: F811
    done = completion("It is sunny.", tool_calls=[tool_call("get_weather", {"city": "Oslo"})] if calls else None)
    server.push(Reply(stream=_no_finish(done)))
    box = ToolBox()
    model = make_model(server, stream=True)
    branch = Branch(chat_model=model, tools=box.tools())
    out, trace = await branch.operate_traced(instruction="x")
    await model.aclose()
    assert isinstance(out, RawOutput) and out == "It is sunny." and out.reason == "no_finish_reason"
    assert "finish reason" in out.detail and box.calls == {} and "act" not in trace.states
    assert trace.meta["raw_output"]["reason"] == "no_finish_reason" and trace.meta["finish_reason"] is None
    assert branch.messages[-1].role == "assistant"


async def test_done_without_a_finish_reason_under_a_response_format_fails_as_before(server) -> None:  # noqa: F811
    server.push(Reply(stream=_no_finish(completion(json.dumps({"answer": 7})))))
    model = make_model(server, stream=True)
    with pytest.raises(EndpointResponseError, match=r"\[DONE\] before any finish reason"):
        await Branch(chat_model=model).operate(instruction="x", response_format=Answer)
    await model.aclose()


async def test_a_stream_cut_before_done_stays_an_error_without_a_response_format(server) -> None:  # noqa: F811
    server.push(Reply(stream=_no_finish(completion("It is")), done=False))
    model = make_model(server, stream=True)
    with pytest.raises(EndpointResponseError, match="an end before a finish reason"):
        await Branch(chat_model=model).operate(instruction="x")
    await model.aclose()
