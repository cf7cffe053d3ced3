"""The native endpoints' records: OpenTelemetry spans and cassettes.

Spans come from the real OpenTelemetry SDK (``otel`` fixture), with the
GenAI provider names ``openai``, ``anthropic`` and ``gcp.gemini``;
cassettes are recorded against a loopback peer in the protocol's shapes,
then replayed with the peer stopped, and never hold the key (header or
``?key=`` query).
"""

from __future__ import annotations

import pytest

from lionops import Branch, iModel
from lionops.replay import record, replay
from tests.native_recordings import PROTOCOLS, SECRET_KEY, USAGE, ScriptPeer, Turn, endpoint_options, render

pytestmark = pytest.mark.anyio

GENAI_NAME = {"openai_responses": "openai", "anthropic": "anthropic", "google": "gcp.gemini"}


def weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_chat_span_names_the_provider_and_counts_cached_input(protocol, otel):
    with ScriptPeer(render(protocol, Turn(thinking="t", text="hi"), stream=True)) as peer:
        branch = Branch(chat_model=iModel(**endpoint_options(protocol, peer, stream=True)))
        assert await branch.operate(instruction="x") == "hi"
    (chat,) = otel.named("chat")
    attributes = chat.attributes
    assert attributes["gen_ai.provider.name"] == GENAI_NAME[protocol]
    assert attributes["gen_ai.usage.input_tokens"] == USAGE["input"]
    assert attributes["gen_ai.usage.output_tokens"] == USAGE["output"]
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == USAGE["cached"]
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["stop"]
    for span in otel.spans():
        assert SECRET_KEY not in str(dict(span.attributes or {}))


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_recorded_native_call_replays_offline_without_the_key(protocol, tmp_path):
    path = tmp_path / "run.json"
    calls = [("call_a1", "weather", {"city": "Paris"})]
    with ScriptPeer(render(protocol, Turn(thinking="t", calls=calls), stream=True)) as peer:
        options = endpoint_options(protocol, peer, stream=True)
        if protocol == "google":
            options["base_url"] += f"?key={SECRET_KEY}"
        model = iModel(**options)
        traced = await record(path, Branch(chat_model=model, tools=[weather]), instruction="x", actions=True)
        await model.aclose()
    assert SECRET_KEY.encode() not in path.read_bytes()
    assert b"sk-peer" not in path.read_bytes()
    replayed = await replay(path, Branch(chat_model=model, tools=[weather]), instruction="x", actions=True)
    assert replayed.trace.path() == traced.trace.path()
    assert [r.output for r in replayed.result.action_responses] == ["sunny in Paris"]
