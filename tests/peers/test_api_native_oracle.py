"""The official SDKs as oracles of the native endpoints.

One recorded answer (thinking, text and two parallel tool calls, plain and
streamed, in each provider's documented shapes) is served on loopback and
read twice: by lionops' endpoint and by the provider's own SDK (``openai``,
``anthropic``, ``google-genai``: test dependencies only). Both must find the
same text, the same tool calls (id, name, arguments), the same reasoning and
the same token counts.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import iModel
from tests.native_recordings import PROTOCOLS, SECRET_KEY, ScriptPeer, Turn, endpoint_options, render

pytestmark = pytest.mark.anyio

TURN = Turn(thinking="Two cities: check both.", text="Checking the weather.",
            calls=[("call_a1", "weather", {"city": "Paris"}), ("call_b2", "weather", {"city": "Oslo", "days": 2})])


def _anthropic(peer: ScriptPeer, stream: bool) -> dict[str, Any]:
    import anthropic

    client = anthropic.Anthropic(api_key=SECRET_KEY, base_url=peer.base_url, max_retries=0)
    kw: dict[str, Any] = {"model": "claude-peer", "max_tokens": 100, "messages": [{"role": "user", "content": "x"}]}
    if stream:
        with client.messages.stream(**kw) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kw)
    usage = message.usage
    return {"text": "".join(b.text for b in message.content if b.type == "text"),
            "calls": [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"],
            "reasoning": "".join(b.thinking for b in message.content if b.type == "thinking"),
            "input": (usage.input_tokens + (usage.cache_read_input_tokens or 0)
                      + (usage.cache_creation_input_tokens or 0)),
            "output": usage.output_tokens, "cached": usage.cache_read_input_tokens}


def _responses(peer: ScriptPeer, stream: bool) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(api_key=SECRET_KEY, base_url=peer.base_url + "/v1", max_retries=0)
    if stream:
        with client.responses.stream(model="gpt-peer", input="x") as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(model="gpt-peer", input="x")
    usage = response.usage
    assert usage is not None
    return {"text": response.output_text,
            "calls": [(i.call_id, i.name, json.loads(i.arguments)) for i in response.output
                      if i.type == "function_call"],
            "reasoning": "".join(s.text for i in response.output if i.type == "reasoning" for s in i.summary),
            "input": usage.input_tokens, "output": usage.output_tokens,
            "cached": usage.input_tokens_details.cached_tokens}


def _google(peer: ScriptPeer, stream: bool) -> dict[str, Any]:
    from google import genai

    client = genai.Client(api_key=SECRET_KEY, http_options=genai.types.HttpOptions(base_url=peer.base_url))
    if stream:
        chunks = list(client.models.generate_content_stream(model="gemini-peer", contents="x"))
    else:
        chunks = [client.models.generate_content(model="gemini-peer", contents="x")]
    parts = [p for c in chunks for p in (c.candidates[0].content.parts or [])]
    usage = chunks[-1].usage_metadata
    assert usage is not None
    return {"text": "".join(p.text for p in parts if p.text and not p.thought),
            "calls": [(p.function_call.id, p.function_call.name, p.function_call.args) for p in parts
                      if p.function_call],
            "reasoning": "".join(p.text for p in parts if p.text and p.thought),
            "input": usage.prompt_token_count,
            "output": (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
            "cached": usage.cached_content_token_count}


ORACLES = {"anthropic": _anthropic, "openai_responses": _responses, "google": _google}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_lionops_and_the_official_sdk_read_the_same_answer(protocol, stream):
    with ScriptPeer(render(protocol, TURN, stream=stream)) as peer:
        endpoint = iModel(**endpoint_options(protocol, peer, stream=stream)).endpoint
        mine = await endpoint.chat([{"role": "user", "content": "x"}])
        await endpoint.aclose()
        sdk = ORACLES[protocol](peer, stream)
    assert mine.text == sdk["text"] == TURN.text
    calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in mine.tool_calls]
    assert calls == sdk["calls"] == TURN.calls
    assert mine.reasoning == sdk["reasoning"] == TURN.thinking
    assert (mine.usage["prompt_tokens"], mine.usage["completion_tokens"], mine.usage["cache_read_input_tokens"]) \
        == (sdk["input"], sdk["output"], sdk["cached"])
