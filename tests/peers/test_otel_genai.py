"""The GenAI conventions' facts of the export, one family each: the agent run
and its provider, the whole history sent, cached and reasoning tokens,
streams, request options, tool definitions, the conversation id, the
content switch from the environment, and the GenAI events."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind

import lionops
from lionops import Branch, iModel
from lionops.endpoints.cli import ClaudeCodeEndpoint, CodexEndpoint, GeminiEndpoint
from lionops.endpoints.registry import provider_spec
from lionops.observability.otel import CAPTURE_CONTENT_ENV, capture_from_env, provider_name, usage_tokens
from lionops.testing import Reply, chunked, completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("provider, expected", [
    ("openai", "openai"), ("openai_responses", "openai"), ("claude_code", "anthropic"), ("codex", "openai"),
    ("gemini", "gcp.gemini"), ("google", "gcp.gemini"), ("anthropic", "anthropic"), ("ollama", "ollama"),
    ("vllm", "vllm"), ("openrouter", "openrouter"),
])
def test_every_endpoint_reports_its_provider_s_registered_name(provider, expected):
    model = iModel(provider=provider) if provider_spec(provider).is_cli else iModel(provider=provider, api_key="k")
    assert model.endpoint.otel_name == expected == provider_spec(provider).otel_name
    assert provider_name(model.endpoint) == expected


@pytest.mark.parametrize("cls, expected", [
    (ClaudeCodeEndpoint, "anthropic"), (CodexEndpoint, "openai"), (GeminiEndpoint, "gcp.gemini"),
])
def test_a_cli_endpoint_built_without_a_provider_reports_its_own_provider_s_name(cls, expected):
    endpoint = cls()
    assert endpoint.provider == endpoint.default_executable and endpoint.otel_name == expected


def test_an_object_that_reports_no_name_is_named_by_its_provider():
    class Bare:
        provider = "inhouse"

    assert provider_name(Bare()) == "inhouse" and provider_name(object()) is None


async def test_the_span_names_the_provider_as_the_endpoint_reports_it(server, otel):  # noqa: F811
    server.push(completion('{"answer": 1}'))
    model = make_model(server)
    model.endpoint.otel_name = "example.host"  # what the endpoint says, not a table elsewhere
    try:
        await Branch(chat_model=model).operate(instruction="hi", response_format=Answer)
    finally:
        await model.aclose()
    (chat,) = otel.named("chat")
    assert otel.root().attributes["gen_ai.provider.name"] == chat.attributes["gen_ai.provider.name"] == "example.host"
    assert chat.attributes["lionops.provider"] == "openai"


@pytest.mark.parametrize("meta, expected", [
    # Chat Completions: prompt_tokens already hold the cached ones, completion_tokens the reasoning
    ({"usage": {"prompt_tokens": 100, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 64},
                "completion_tokens_details": {"reasoning_tokens": 30}}}, (100, 40, 64, None, 30)),
    # Codex: input_tokens hold cached_input_tokens; reasoning_output_tokens are part of the output
    ({"usage": {"input_tokens": 2400, "cached_input_tokens": 1200, "output_tokens": 60,
                "reasoning_output_tokens": 20}}, (2400, 60, 1200, None, 20)),
    # the one usage record, when the endpoint reports it, wins over the provider's object
    ({"tokens": {"input_tokens": 7, "output_tokens": 3, "cache_read_tokens": 2, "reasoning_tokens": 1},
      "usage": {"prompt_tokens": 99}}, (7, 3, 2, None, 1)),
    ({}, (None, None, None, None, None)),
])
def test_usage_counts_cache_and_reasoning_tokens_the_conventions_way(meta, expected):
    t = usage_tokens(meta, anthropic=False)
    assert (t.input_tokens, t.output_tokens, t.cache_read_tokens, t.cache_write_tokens, t.reasoning_tokens) == expected


def test_anthropic_input_tokens_add_the_cache():
    t = usage_tokens({"usage": {"input_tokens": 10, "cache_read_input_tokens": 5,
                                "cache_creation_input_tokens": 3, "output_tokens": 2}}, anthropic=True)
    assert (t.input_tokens, t.cache_read_tokens, t.cache_write_tokens) == (18, 5, 3)


@pytest.mark.parametrize("value, on", [("true", True), ("TRUE", True), ("span_only", True),
                                       ("span_and_event", True), ("event_only", True), ("false", False),
                                       ("no_content", False), ("", False)])
def test_the_environment_variable_turns_content_capture_on(monkeypatch, value, on):
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    assert capture_from_env() is on
    try:
        assert lionops.instrument().capture_content is on
        assert lionops.instrument(capture_content=False).capture_content is False  # the keyword wins
    finally:
        lionops.uninstrument()


async def test_the_operation_is_an_agent_run_with_its_conversation(server, otel):  # noqa: F811
    server.push(completion('{"answer": 1}', prompt_tokens=11, completion_tokens=4))
    model = make_model(server)
    try:
        branch = Branch(chat_model=model, name="forecaster")
        await branch.operate(instruction="hi", response_format=Answer)
    finally:
        await model.aclose()
    root = otel.root()
    assert root.name == "invoke_agent forecaster" and root.kind is SpanKind.INTERNAL
    a = root.attributes
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "forecaster"
    assert a["gen_ai.provider.name"] == "openai" and a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.conversation.id"] == str(branch.id) and a["lionops.caller_model"] == "Answer"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (11, 4)
    (chat,) = otel.named("chat")
    assert chat.attributes["gen_ai.conversation.id"] == str(branch.id)
    durations = otel.metrics()["gen_ai.invoke_agent.duration"].data.data_points
    assert [dict(p.attributes)["gen_ai.agent.name"] for p in durations] == ["forecaster"]


async def test_content_holds_the_whole_history_tool_arguments_as_objects_and_definitions(
        server, otel_content):  # noqa: F811
    server.push(completion('{"answer": 1}', tool_calls=[tool_call("get_weather", {"city": "Paris"}, "call_1")]))
    server.push(completion('{"answer": 2}'))
    model = make_model(server)
    try:
        branch = Branch(chat_model=model, tools=ToolBox().tools(), system="Be brief.")
        await branch.operate(instruction="first turn", response_format=Answer, actions=True)
        await branch.operate(instruction="second turn", response_format=Answer, actions=True)
    finally:
        await model.aclose()
    first, second = sorted(otel_content.named("chat"), key=lambda s: s.start_time or 0)
    sent = json.loads(second.attributes["gen_ai.input.messages"])
    texts = [p.get("content") for m in sent for p in m["parts"] if p["type"] == "text"]
    assert texts[0].startswith("first turn") and texts[-1].startswith("second turn")  # the whole history, in order
    roles = [m["role"] for m in sent]
    assert roles.index("assistant") < roles.index("tool") < len(roles) - 1
    (call,) = [p for m in sent for p in m["parts"] if p["type"] == "tool_call"]
    assert call["arguments"] == {"city": "Paris"} and call["id"] == "call_1"  # an object, not a JSON text
    (response,) = [p for m in sent for p in m["parts"] if p["type"] == "tool_call_response"]
    assert response["id"] == "call_1"
    output = json.loads(first.attributes["gen_ai.output.messages"])
    assert output[0]["parts"][-1]["arguments"] == {"city": "Paris"}
    definitions = json.loads(first.attributes["gen_ai.tool.definitions"])
    assert "get_weather" in {d["name"] for d in definitions}
    assert all(set(d) >= {"type", "name", "parameters"} for d in definitions)
    assert json.loads(first.attributes["gen_ai.system_instructions"])[0]["content"] == "Be brief."
    details = [r for r in otel_content.records() if r.event_name == "gen_ai.client.inference.operation.details"]
    assert len(details) == 2 and details[0].span_id == first.context.span_id
    assert "gen_ai.input.messages" in details[0].attributes


async def test_without_content_no_definitions_messages_or_details_event(server, otel):  # noqa: F811
    server.push(completion('{"answer": 1}'))
    model = make_model(server)
    try:
        await Branch(chat_model=model, tools=ToolBox().tools()).operate(
            instruction="hi", response_format=Answer, actions=True)
    finally:
        await model.aclose()
    dump = otel.dump()
    for key in ("gen_ai.tool.definitions", "gen_ai.input.messages", "gen_ai.output.messages"):
        assert key not in dump
    assert not otel.records()


async def test_request_options_stop_choice_count_and_top_k(server, otel):  # noqa: F811
    server.push(completion('{"answer": 1}'))
    model = make_model(server)
    try:
        await Branch(chat_model=model).operate(instruction="hi", response_format=Answer,
                                               stop="END", n=3, top_k=40, temperature=0.1)
    finally:
        await model.aclose()
    (chat,) = otel.named("chat")
    a = chat.attributes
    assert tuple(a["gen_ai.request.stop_sequences"]) == ("END",)
    assert a["gen_ai.request.choice.count"] == 3 and a["gen_ai.request.top_k"] == 40


async def test_a_stream_reports_its_first_chunk_and_a_broken_one_finishes_with_error(server, otel):  # noqa: F811
    streamed = chunked(completion('{"answer": 1}'), pieces=4)
    server.push(Reply(stream=streamed))
    server.push(Reply(stream=streamed[:3], done=False))
    model = make_model(server, stream=True)
    try:
        await Branch(chat_model=model).operate(instruction="hi", response_format=Answer)
        with pytest.raises(lionops.LionopsError):
            await Branch(chat_model=model).operate(instruction="again", response_format=Answer)
    finally:
        await model.aclose()
    good, broken = sorted(otel.named("chat"), key=lambda s: s.start_time or 0)
    assert good.attributes["gen_ai.request.stream"] is True
    assert good.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert tuple(good.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert tuple(broken.attributes["gen_ai.response.finish_reasons"]) == ("error",)
    metrics = otel.metrics()
    assert sum(p.count for p in metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points) == 2
    # after the first chunk, one interval per chunk: len(streamed) - 1 of the whole stream, 2 of the broken one
    gaps = sum(p.count for p in metrics["gen_ai.client.operation.time_per_output_chunk"].data.data_points)
    assert gaps == len(streamed) - 1 + 2
    (exception,) = [r for r in otel.records() if r.event_name == "gen_ai.client.operation.exception"]
    assert exception.span_id == broken.context.span_id
    assert exception.attributes["exception.message"] == exception.attributes["exception.type"].rsplit(".", 1)[-1]


async def test_tool_durations_by_registered_name_and_decision_stays_lionops(server, otel):  # noqa: F811
    server.push(completion('{"answer": 1}', tool_calls=[
        tool_call("get_weather", {"city": "Paris"}, "c1"), tool_call("send_message", {"to": "a", "body": "b"}, "c2"),
        tool_call("4111 1111 1111 1111", {}, "c3")]))
    model = make_model(server)
    try:
        branch = Branch(chat_model=model, tools=ToolBox().tools())
        branch.gate(lambda invocation: invocation.function != "send_message")
        await branch.operate(instruction="hi", response_format=Answer, actions=True)
    finally:
        await model.aclose()
    points = otel.metrics()["gen_ai.execute_tool.duration"].data.data_points
    names = sorted(dict(p.attributes)["gen_ai.tool.name"] for p in points)
    assert names == ["get_weather", "send_message", "unknown_tool"]
    decisions = {s.attributes["gen_ai.tool.name"]: s.attributes["lionops.tool.decision"]
                 for s in otel.named("execute_tool")}
    assert decisions["send_message"] == "denied"
    assert "guardrail" not in otel.dump() and "4111" not in otel.dump()
