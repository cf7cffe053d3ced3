"""Streamed answers: chunks assembled into one answer, tool-call deltas by
index, id or position ."""

from __future__ import annotations

import pytest

from lionops import Branch, RawOutput
from lionops.endpoints.openai import StreamAccumulator
from lionops.errors import EndpointResponseError
from lionops.testing import Reply, chunked, completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, model, sent, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def _chunk(delta: dict) -> dict:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


FIRST = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
ARGS_1 = {"function": {"arguments": '{"city":'}}
ARGS_2 = {"function": {"arguments": '"Tokyo"}'}}
DONE = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}

#: tool-call deltas without an index or with a repeated one: the same call, delivered three ways.
C20_VARIANTS = {
    "indexed": [[{"index": 0, **FIRST}], [{"index": 0, **ARGS_1}], [{"index": 0, **ARGS_2}]],
    "no-index": [[FIRST], [ARGS_1], [ARGS_2]],
    "repeated-index-in-first-chunk": [[{"index": 0, **FIRST}, {"index": 0, **ARGS_1}], [{"index": 0, **ARGS_2}]],
}


@pytest.mark.parametrize("variant", list(C20_VARIANTS))
async def test_tool_call_deltas_make_one_call(server, variant):
    box = ToolBox()
    chunks = [_chunk({"role": "assistant", "content": None})]
    chunks += [_chunk({"tool_calls": entries}) for entries in C20_VARIANTS[variant]]
    server.push(Reply(stream=chunks + [DONE]))
    m = make_model(server, stream=True)
    branch = Branch(chat_model=m, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", actions=True)
    await m.aclose()
    assert [(r.function, r.arguments) for r in result.action_requests] == [("get_weather", {"city": "Tokyo"})]
    assert box.args == [("get_weather", {"city": "Tokyo"})]
    assert trace.exit == "enriched"
    assert sent(server)["stream"] is True and sent(server)["stream_options"] == {"include_usage": True}


def test_distinct_calls_stay_distinct():
    acc = StreamAccumulator()
    acc.add(_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}))
    acc.add(_chunk({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}}]}))
    acc.add(_chunk({"tool_calls": [{"id": "c", "function": {"name": "h", "arguments": "{"}}]}))
    acc.add(_chunk({"tool_calls": [{"function": {"arguments": "}"}}]}))
    calls = acc.completion()["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", "f", "{}"), ("b", "g", "{}"), ("c", "h", "{}"),
    ]


async def test_streamed_structured_answer_with_tools_and_usage(server):
    box = ToolBox()
    done = completion('{"answer": 7}',
                      tool_calls=[tool_call("search", {"q": "lion"}), tool_call("get_weather", {"city": "Oslo"})],
                      prompt_tokens=30, completion_tokens=12)
    server.push(Reply(stream=chunked(done, pieces=4)))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True, stream=True)
    await m.aclose()
    assert isinstance(result, Answer) and result.answer == 7
    assert box.calls == {"search": 1, "get_weather": 1}
    assert trace.meta["usage"]["total_tokens"] == 42 and trace.meta["finish_reason"] == "tool_calls"


async def test_streamed_cut_off_is_not_parsed(server):
    box = ToolBox()
    done = completion('{"answer": 7, "action_requests": [{"function": "send_message"', finish_reason="length")
    server.push(Reply(stream=chunked(done)))
    m = make_model(server, stream=True)
    branch = Branch(chat_model=m, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    assert isinstance(result, RawOutput) and result.reason == "length"
    assert trace.exit == "mismatch_return_value" and box.total == 0


async def test_a_broken_chunk_is_a_response_error(server, model):
    stop = {**DONE, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    server.push(Reply(stream=[_chunk({"content": "hi"}), stop]), Reply(body="data: {oops\n\n"))
    assert (await model.endpoint.chat([{"role": "user", "content": "x"}], stream=True)).text == "hi"
    with pytest.raises(EndpointResponseError, match="stream chunk"):
        await model.endpoint.chat([{"role": "user", "content": "x"}], stream=True)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_calls_read_the_answer_to_its_end_and_reuse_one_connection(stream):
    import json

    from lionops import iModel
    from tests.loopback_peer import Answer as PeerAnswer
    from tests.loopback_peer import LoopbackPeer

    done = completion("again")
    if stream:
        text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunked(done)) + "data: [DONE]\n\n"
        reply = PeerAnswer(200, text.encode(), "text/event-stream")
    else:
        reply = PeerAnswer(200, json.dumps(done).encode())

    class Peer(LoopbackPeer):
        def answer(self, path: str, request: dict) -> PeerAnswer:
            return reply

    with Peer() as peer:
        chat = iModel(provider="openai", model="m", base_url=peer.base_url + "/v1", api_key="k", stream=stream)
        for _ in range(3):
            assert await Branch(chat_model=chat).operate(instruction="x") == "again"
        await chat.aclose()
    assert peer.connections == 1
