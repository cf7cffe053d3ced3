"""The next turn's history: results in request order, native tool calls paired
with their results by ``tool_call_id``, everything else as text."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from lionops import Branch
from lionops.models import ActionRequestModel
from lionops.testing import completion, tool_call
from tests.helpers import Answer
from tests.openai_server import make_model, server  # noqa: F401 - fixtures


def ordered_tools() -> tuple[list[Any], list[str]]:
    """Two real tools where the first finishes only after the second has:
    with the concurrent strategy they complete in the reverse of request order."""
    second_ran = anyio.Event()
    finished: list[str] = []

    async def slow_lookup(city: str) -> dict[str, Any]:
        """Look a city up (finishes last)."""
        await second_ran.wait()
        finished.append("slow_lookup")
        return {"city": city, "temp_c": 20}

    async def quick_search(q: str) -> list[str]:
        """Search (finishes first)."""
        second_ran.set()
        finished.append("quick_search")
        return [q]

    return [slow_lookup, quick_search], finished


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


@pytest.mark.anyio
async def test_native_calls_go_back_paired_and_in_request_order(server):
    tools, finished = ordered_tools()
    server.push(
        completion(None, tool_calls=[tool_call("slow_lookup", {"city": "Oslo"}, "call_a"),
                                     tool_call("quick_search", {"q": "lion"}, "call_b")]),
        completion("done"),
    )
    m = make_model(server)
    branch = Branch(chat_model=m, tools=tools)
    first = await branch.operate(instruction="weather?", actions=True)
    await branch.operate(instruction="and now?")
    await m.aclose()
    assert finished == ["quick_search", "slow_lookup"]  # completion order is the reverse
    assert [r.function for r in first.action_responses] == ["slow_lookup", "quick_search"]
    acts = [(m.role, m.content["function"], m.metadata.get("call_id")) for m in branch.messages
            if m.role.startswith("action")]
    assert acts == [("action_request", "slow_lookup", "call_a"), ("action_response", "slow_lookup", "call_a"),
                    ("action_request", "quick_search", "call_b"), ("action_response", "quick_search", "call_b")]

    body = server.chat_requests[1].body
    assert roles(body) == ["user", "assistant", "tool", "tool", "user"]
    assistant, tool_a, tool_b = body["messages"][1:4]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert assistant["tool_calls"][0] == {"id": "call_a", "type": "function",
                                          "function": {"name": "slow_lookup", "arguments": '{"city": "Oslo"}'}}
    assert (tool_a["tool_call_id"], json.loads(tool_a["content"])) == ("call_a", {"city": "Oslo", "temp_c": 20})
    assert (tool_b["tool_call_id"], json.loads(tool_b["content"])) == ("call_b", ["lion"])
    assert not any("Action results" in str(m.get("content")) for m in body["messages"])


@pytest.mark.anyio
async def test_an_invalid_native_call_is_paired_with_its_error(server):
    """A call whose arguments do not decode is answered with an error payload;
    that payload goes back as its tool message, with the raw arguments."""
    tools, _ = ordered_tools()
    bad = {"id": "call_bad", "type": "function", "function": {"name": "quick_search", "arguments": '{"q": "li'}}
    server.push(completion(None, tool_calls=[bad, tool_call("quick_search", {"q": "ok"}, "call_ok")]),
                completion("done"))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=tools)
    await branch.operate(instruction="q", actions=True)
    await branch.operate(instruction="next")
    await m.aclose()
    body = server.chat_requests[1].body
    assert roles(body) == ["user", "assistant", "tool", "tool", "user"]
    call = body["messages"][1]["tool_calls"][0]
    assert call["function"] == {"name": "quick_search", "arguments": '{"q": "li'}
    error = json.loads(body["messages"][2]["content"])
    assert body["messages"][2]["tool_call_id"] == "call_bad" and error["type"] == "InvalidActionRequest"


@pytest.mark.anyio
async def test_body_requests_stay_text_in_request_order(server):
    """Requests from the JSON body (no native call) go back as one text
    message, in request order, with no tool role."""
    tools, finished = ordered_tools()
    body_requests = [{"function": "slow_lookup", "arguments": {"city": "Oslo"}},
                     {"function": "quick_search", "arguments": {"q": "lion"}}]
    server.push(completion(json.dumps({"answer": 1, "action_requests": body_requests})), completion('{"answer": 2}'))
    m = make_model(server, structured_output="prompt")
    branch = Branch(chat_model=m, tools=tools)
    await branch.operate(instruction="q", response_format=Answer, actions=True)
    await branch.operate(instruction="next", response_format=Answer)
    await m.aclose()
    assert finished == ["quick_search", "slow_lookup"]
    body = server.chat_requests[1].body
    assert "tool" not in roles(body) and "tool_calls" not in body["messages"][1]
    text = [m["content"] for m in body["messages"] if "Action results" in str(m["content"])]
    assert len(text) == 1
    results = json.loads(text[0].split(": ", 1)[1])
    assert [r["function"] for r in results] == ["slow_lookup", "quick_search"]


@pytest.mark.anyio
async def test_reused_call_ids_pair_within_their_own_turn(server):
    """A server that numbers calls per turn ("call_0" every time): each turn's
    results pair with that turn's calls only."""
    tools, _ = ordered_tools()
    server.push(completion(None, tool_calls=[tool_call("quick_search", {"q": "one"}, "call_0")]),
                completion(None, tool_calls=[tool_call("quick_search", {"q": "two"}, "call_0")]),
                completion("done"))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=tools)
    await branch.operate(instruction="1", actions=True)
    await branch.operate(instruction="2", actions=True)
    await branch.operate(instruction="3")
    await m.aclose()
    body = server.chat_requests[2].body
    assert roles(body) == ["user", "assistant", "tool", "user", "assistant", "tool", "user"]
    assert [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"] == [["one"], ["two"]]


@pytest.mark.anyio
async def test_native_and_body_requests_in_one_turn(server):
    """Native calls pair as tool messages right after the assistant message;
    the JSON body's requests follow as text."""
    tools, _ = ordered_tools()
    content = json.dumps({"action_requests": [{"function": "quick_search", "arguments": {"q": "body"}}]})
    server.push(completion(content, tool_calls=[tool_call("slow_lookup", {"city": "Oslo"}, "call_n")]),
                completion("done"))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=tools)
    first = await branch.operate(instruction="q", actions=True)
    await branch.operate(instruction="next")
    await m.aclose()
    assert [r.function for r in first.action_responses] == ["quick_search", "slow_lookup"]
    msgs = server.chat_requests[1].body["messages"]
    assert roles(server.chat_requests[1].body) == ["user", "assistant", "tool", "user", "user"]
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["call_n"] and msgs[2]["tool_call_id"] == "call_n"
    assert msgs[3]["content"].startswith("Action results") and '"body"' in msgs[3]["content"]
    assert "Oslo" not in msgs[3]["content"]


def test_call_id_is_hidden_from_schema_and_dumps():
    req = ActionRequestModel(function="f", arguments={}, call_id="call_1")
    assert req.call_id == "call_1"
    assert "call_id" not in json.dumps(ActionRequestModel.model_json_schema())
    assert "call_id" not in req.model_dump() and "call_id" not in req.model_dump_json() and "call_1" not in repr(req)
