"""A native answer that repeats a tool call's id: every call runs, and the
turn goes back with the id once (the repeat's result as text), so the next
request is one the provider accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, iModel
from tests.native_recordings import PROTOCOLS, ScriptPeer, Turn, endpoint_options, render

pytestmark = pytest.mark.anyio

CASES = [(p, s) for p in PROTOCOLS for s in (False, True)]
IDS = [f"{p}-{'stream' if s else 'plain'}" for p, s in CASES]


def weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def _calls_sent_back(protocol: str, request: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, arguments)`` of the tool calls the request sends back, in the protocol's own form."""
    if protocol == "anthropic":
        return [(b["id"], b["input"]) for m in request["messages"] if m["role"] == "assistant"
                for b in m["content"] if b.get("type") == "tool_use"]
    if protocol == "openai_responses":
        return [(i["call_id"], json.loads(i["arguments"])) for i in request["input"]
                if i.get("type") == "function_call"]
    return [(p["functionCall"].get("id"), p["functionCall"]["args"]) for c in request["contents"]
            if c["role"] == "model" for p in c["parts"] if "functionCall" in p]


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_a_repeated_call_id_goes_back_once_with_its_own_arguments(protocol, stream):
    calls = [("call_1", "weather", {"city": "Paris"}), ("call_1", "weather", {"city": "Oslo"})]
    first = render(protocol, Turn(calls=calls), stream=stream)
    with ScriptPeer(first, render(protocol, Turn(text="ok"), stream=stream)) as peer:
        model = iModel(**endpoint_options(protocol, peer, stream=stream, max_retries=0))
        branch = Branch(chat_model=model, tools=[weather])
        result = await branch.operate(instruction="Paris and Oslo?", actions=True)
        assert [r.output for r in result.action_responses] == ["sunny in Paris", "sunny in Oslo"]
        assert await branch.operate(instruction="And now?") == "ok"
        request = peer.requests[-1]
    sent = _calls_sent_back(protocol, request)
    ids = [i for i, _ in sent if i is not None]
    assert len(ids) == len(set(ids)), sent
    assert ("call_1", {"city": "Paris"}) in sent or protocol == "google", sent
    assert "sunny in Oslo" in json.dumps(request)  # the repeat's result goes back as text
