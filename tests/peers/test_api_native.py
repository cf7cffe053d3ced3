"""The native endpoints (``openai_responses``, ``anthropic``, ``google``) through ``operate()``.

Every test runs each protocol, plain and streamed, on asyncio and trio,
against a loopback peer serving answers in the provider's documented shapes
(:mod:`tests.native_recordings`), through the real ``communicate`` Middle
and the real ``act()``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionops import Branch, iModel
from lionops.errors import (
    EndpointAuthError,
    EndpointProviderError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
)
from lionops.models import RawOutput
from tests.loopback_peer import Answer, sse
from tests.native_recordings import (
    ENCRYPTED,
    PROTOCOLS,
    SECRET_KEY,
    SIGNATURE,
    THOUGHT_SIGNATURE,
    USAGE,
    ScriptPeer,
    Turn,
    anthropic_events,
    endpoint_options,
    error_answer,
    google_chunks,
    render,
    responses_events,
)

pytestmark = pytest.mark.anyio

CASES = [(p, s) for p in PROTOCOLS for s in (False, True)]
IDS = [f"{p}-{'stream' if s else 'plain'}" for p, s in CASES]


class Weather(BaseModel):
    city: str
    sky: str


def weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def _model(protocol: str, peer: ScriptPeer, stream: bool, **kw: Any) -> iModel:
    return iModel(**endpoint_options(protocol, peer, **{"stream": stream, "max_retries": 1, "backoff_initial": 0.0,
                                                         **kw}))


def _tool_results(protocol: str, request: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """``(paired id, output)`` of the tool results a request carries, in the protocol's own form."""
    if protocol == "anthropic":
        return [(b["tool_use_id"], json.loads(b["content"])) for m in request["messages"] if m["role"] == "user"
                for b in m["content"] if b.get("type") == "tool_result"]
    if protocol == "openai_responses":
        return [(i["call_id"], json.loads(i["output"])) for i in request["input"]
                if i.get("type") == "function_call_output"]
    return [(p["functionResponse"].get("id"), p["functionResponse"]["response"]["result"])
            for c in request["contents"] for p in c["parts"] if "functionResponse" in p]


def _reasoning_sent_back(protocol: str, request: dict[str, Any]) -> bool:
    """Whether the provider's reasoning of the earlier turn went back unchanged."""
    if protocol == "anthropic":
        return any(b == {"type": "thinking", "thinking": "I should check both cities.", "signature": SIGNATURE}
                   for m in request["messages"] if m["role"] == "assistant" for b in m["content"])
    if protocol == "openai_responses":
        return any(i.get("type") == "reasoning" and i.get("encrypted_content") == ENCRYPTED for i in request["input"])
    return any(p.get("thoughtSignature") == THOUGHT_SIGNATURE for c in request["contents"] if c["role"] == "model"
               for p in c["parts"])


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_parallel_native_calls_run_once_each_and_results_go_back_paired(protocol, stream):
    calls = [("call_a1", "weather", {"city": "Paris"}), ("call_b2", "weather", {"city": "Oslo"})]
    first = render(protocol, Turn(thinking="I should check both cities.", calls=calls), stream=stream)
    second = render(protocol, Turn(text="Both sunny."), stream=stream)
    with ScriptPeer(first, second) as peer:
        branch = Branch(chat_model=_model(protocol, peer, stream), tools=[weather])
        result = await branch.operate(instruction="Weather in Paris and Oslo?", actions=True)
        assert [r.output for r in result.action_responses] == ["sunny in Paris", "sunny in Oslo"]
        turn = next(m for m in branch.messages if m.role == "assistant")
        assert turn.metadata["reasoning"] == "I should check both cities."  # kept, never the answer
        assert [c["id"] for c in turn.metadata["tool_calls"]] == ["call_a1", "call_b2"]
        assert await branch.operate(instruction="And now?") == "Both sunny."
        request = peer.requests[-1]
    assert _tool_results(protocol, request) == [("call_a1", "sunny in Paris"), ("call_b2", "sunny in Oslo")]
    assert _reasoning_sent_back(protocol, request)


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_structured_output_uses_the_native_mechanism(protocol, stream):
    answer = render(protocol, Turn(thinking="Paris, clear.", text='{"city": "Paris", "sky": "clear"}'),
                    stream=stream)
    if protocol == "anthropic":  # the answer arrives as the forced answer tool's input
        turn = Turn(calls=[("toolu_answer", "lionops_answer_WeatherRequest", {"city": "Paris", "sky": "clear"})])
        answer = render(protocol, turn, stream=stream)
    with ScriptPeer(answer) as peer:
        result = await Branch(chat_model=_model(protocol, peer, stream)).operate(
            instruction="Weather?", response_format=Weather)
        request = peer.requests[-1]
    assert (result.city, result.sky) == ("Paris", "clear")
    if protocol == "openai_responses":
        assert request["text"]["format"]["type"] == "json_schema"
        assert request["text"]["format"]["schema"]["required"] == ["city", "sky"]
    elif protocol == "anthropic":
        assert request["tool_choice"] == {"type": "tool", "name": "lionops_answer_WeatherRequest"}
        assert request["tools"][0]["input_schema"]["required"] == ["city", "sky"]
    else:
        config = request["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseJsonSchema"]["required"] == ["city", "sky"]


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
@pytest.mark.parametrize("end", ["cut", "refused"])
async def test_a_cut_or_refused_answer_is_never_coerced_into_the_model(protocol, stream, end):
    text = '{"city": "Paris", "sky": "cle' if end == "cut" else "I can't help with that."
    with ScriptPeer(render(protocol, Turn(text=text, end=end), stream=stream)) as peer:
        result = await Branch(chat_model=_model(protocol, peer, stream)).operate(
            instruction="Weather?", response_format=Weather)
    assert isinstance(result, RawOutput)
    assert result.reason == ("length" if end == "cut" else "refusal")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_blocked_gemini_prompt_is_a_refusal(stream):
    body = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9},
            "modelVersion": "gemini-peer"}
    answer = Answer(200, sse([(None, body)]), "text/event-stream") if stream else Answer(200, json.dumps(body).encode())
    with ScriptPeer(answer) as peer:
        result = await Branch(chat_model=_model("google", peer, stream)).operate(
            instruction="x", response_format=Weather)
    assert isinstance(result, RawOutput) and result.reason == "refusal"
    assert "PROHIBITED_CONTENT" in (result.detail or "")


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_overloaded_and_server_errors_are_retried_then_answered(protocol, stream):
    kind = {"anthropic": "overloaded_error", "openai_responses": "server_error", "google": "UNAVAILABLE"}[protocol]
    status = 529 if protocol == "anthropic" else 503
    with ScriptPeer(error_answer(protocol, status, kind, "Overloaded"), render(protocol, Turn(text="hi"),
                                                                                stream=stream)) as peer:
        branch = Branch(chat_model=_model(protocol, peer, stream))
        assert await branch.operate(instruction="x") == "hi"
    assert branch.messages[-1].metadata["http_attempts"] == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_rate_limit_past_the_cap_is_typed_with_its_retry_after(protocol):
    kind = {"anthropic": "rate_limit_error", "openai_responses": "rate_limit_exceeded",
            "google": "RESOURCE_EXHAUSTED"}[protocol]
    with ScriptPeer(error_answer(protocol, 429, kind, "slow down", {"retry-after": "120"})) as peer:
        with pytest.raises(EndpointRateLimitError) as caught:
            await Branch(chat_model=_model(protocol, peer, False)).operate(instruction="x")
    assert caught.value.retry_after == 120 and caught.value.attempts == 1
    assert kind in str(caught.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_refused_key_is_an_auth_error_without_the_key(protocol, caplog):
    kind = {"anthropic": "authentication_error", "openai_responses": "invalid_api_key",
            "google": "PERMISSION_DENIED"}[protocol]
    caplog.set_level(logging.DEBUG)
    echo = error_answer(protocol, 401, kind, f"invalid key {SECRET_KEY}")
    with ScriptPeer(echo) as peer:
        options = endpoint_options(protocol, peer)
        if protocol == "google":  # a key in the URL's query is a secret too
            options["base_url"] += f"?key={SECRET_KEY}"
        model = iModel(**options)
        with pytest.raises(EndpointAuthError) as caught:
            await Branch(chat_model=model).operate(instruction="x")
        headers = peer.headers[-1]
    sent = {"anthropic": "x-api-key", "openai_responses": "authorization", "google": "x-goog-api-key"}[protocol]
    assert SECRET_KEY in headers[sent]
    if protocol == "anthropic":
        assert headers["anthropic-version"] == "2023-06-01"
    for text in (str(caught.value), caught.value.body, repr(model.endpoint), caplog.text):
        assert SECRET_KEY not in text


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_error_in_the_stream_is_a_provider_error(protocol):
    turn = Turn(text="partial answer")
    if protocol == "anthropic":
        body = sse(anthropic_events(turn, error={"type": "overloaded_error", "message": "Overloaded"}))
    elif protocol == "openai_responses":
        body = sse(responses_events(turn, error_event={"code": "server_error", "message": "The server failed"}))
    else:
        chunks = google_chunks(turn, cut=True)
        chunks.append({"error": {"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}})
        body = sse([(None, c) for c in chunks])
    with ScriptPeer(Answer(200, body, "text/event-stream")) as peer:
        branch = Branch(chat_model=_model(protocol, peer, True, max_retries=0))
        with pytest.raises(EndpointProviderError) as caught:
            await branch.operate(instruction="x")
    assert caught.value.provider == protocol
    assert not any(m.role == "assistant" for m in branch.messages)  # nothing partial recorded


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_stream_broken_off_is_a_response_error(protocol):
    answer = render(protocol, Turn(text="partial answer"), stream=True, cut=True)
    with ScriptPeer(answer) as peer:
        with pytest.raises(EndpointResponseError, match="broken off"):
            await Branch(chat_model=_model(protocol, peer, True, max_retries=0)).operate(instruction="x")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_response_is_a_provider_error_with_its_code(stream):
    error = {"code": "server_error", "message": "The model failed to answer"}
    answer = render("openai_responses", Turn(text=""), stream=stream, status="failed", error=error)
    with ScriptPeer(answer) as peer:
        with pytest.raises(EndpointProviderError) as caught:
            await Branch(chat_model=_model("openai_responses", peer, stream)).operate(instruction="x")
    assert caught.value.code == "server_error"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_malformed_gemini_function_call_is_a_provider_error(stream):
    answer = render("google", Turn(text=""), stream=stream, finish="MALFORMED_FUNCTION_CALL")
    with ScriptPeer(answer) as peer:
        with pytest.raises(EndpointProviderError) as caught:
            await Branch(chat_model=_model("google", peer, stream)).operate(instruction="x")
    assert caught.value.code == "MALFORMED_FUNCTION_CALL"


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_usage_counts_cache_and_reasoning_the_same_way(protocol, stream):
    with ScriptPeer(render(protocol, Turn(thinking="t", text="hi"), stream=stream)) as peer:
        branch = Branch(chat_model=_model(protocol, peer, stream))
        await branch.operate(instruction="x")
    tokens = branch.messages[-1].metadata["tokens"]  # the one Usage record
    assert (tokens["input_tokens"], tokens["output_tokens"], tokens["cache_read_tokens"]) == (
        USAGE["input"], USAGE["output"], USAGE["cached"])
    assert tokens.get("cache_write_tokens") == (USAGE["cache_write"] if protocol == "anthropic" else None)
    assert tokens.get("reasoning_tokens") == (None if protocol == "anthropic" else USAGE["reasoning"])
    usage = branch.messages[-1].metadata["usage"]
    assert usage["prompt_tokens"] == USAGE["input"]
    assert usage["completion_tokens"] == USAGE["output"]
    assert usage["cache_read_input_tokens"] == USAGE["cached"]
    if protocol != "anthropic":  # the Messages API does not count thinking tokens apart
        assert usage["reasoning_tokens"] == USAGE["reasoning"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_broken_tool_arguments_become_an_invalid_request_never_run(protocol):
    ran: list[str] = []

    def record(city: str) -> str:
        """Record a city."""
        ran.append(city)
        return city

    if protocol == "anthropic":
        events = anthropic_events(Turn(calls=[("toolu_1", "record", {"city": "X"})]))
        for _, data in events:  # a fragment that breaks the JSON
            if data.get("delta", {}).get("type") == "input_json_delta" and data["delta"]["partial_json"]:
                data["delta"]["partial_json"] = '{"city": '
                break
        answer = Answer(200, sse(events), "text/event-stream")
    elif protocol == "openai_responses":
        events = responses_events(Turn(calls=[("call_1", "record", {"city": "X"})]))
        for _, data in events:
            if "item" in data and data["item"].get("type") == "function_call":
                data["item"]["arguments"] = '{"city": '
            if data.get("type") == "response.completed":
                data["response"]["output"][0]["arguments"] = '{"city": '
        answer = Answer(200, sse(events), "text/event-stream")
    else:
        body = render("google", Turn(calls=[("c1", "record", {"city": "X"})]), stream=False).body
        data = json.loads(body)
        data["candidates"][0]["content"]["parts"][0]["functionCall"]["args"] = "not an object"
        answer = Answer(200, json.dumps(data).encode())
    with ScriptPeer(answer, render(protocol, Turn(text="ok"), stream=False)) as peer:
        branch = Branch(chat_model=_model(protocol, peer, False), tools=[record])
        result = await branch.operate(instruction="x", actions=True)
    assert ran == []
    assert result.action_responses and "error" in json.dumps(result.action_responses[0].output).lower()


async def test_a_bad_request_names_the_providers_error_type():
    with ScriptPeer(error_answer("anthropic", 400, "invalid_request_error", "messages: roles must alternate")) as peer:
        with pytest.raises(EndpointStatusError, match=r"roles must alternate.*invalid_request_error"):
            await Branch(chat_model=_model("anthropic", peer, False)).operate(instruction="x")


@pytest.mark.parametrize("protocol", ["anthropic", "google"])
async def test_an_overloaded_error_event_mid_stream_is_retried(protocol):
    turn = Turn(text="partial")
    if protocol == "anthropic":
        broken = sse(anthropic_events(turn, error={"type": "overloaded_error", "message": "Overloaded"}))
    else:
        chunks = google_chunks(turn, cut=True) + [{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}]
        broken = sse([(None, c) for c in chunks])
    whole = render(protocol, Turn(text="whole"), stream=True)
    with ScriptPeer(Answer(200, broken, "text/event-stream"), whole) as peer:
        branch = Branch(chat_model=_model(protocol, peer, True))
        assert await branch.operate(instruction="x") == "whole"
    assert branch.messages[-1].metadata["http_attempts"] == 2


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_an_answer_past_max_response_bytes_is_refused_unread(protocol, stream):
    with ScriptPeer(render(protocol, Turn(text="x" * 4000), stream=stream)) as peer:
        with pytest.raises(EndpointResponseError, match="max_response_bytes=1000"):
            await Branch(chat_model=_model(protocol, peer, stream, max_response_bytes=1000)).operate(instruction="x")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_stalled_stream_ends_at_the_silence_timeout(protocol):
    answer = render(protocol, Turn(text="partial"), stream=True, cut=True)
    stalled = Answer(200, answer.body, "text/event-stream", hold_s=5.0)
    with ScriptPeer(stalled) as peer:
        with pytest.raises(EndpointTimeoutError, match="silence_timeout"):
            await Branch(chat_model=_model(protocol, peer, True, silence_timeout=0.2, max_retries=0)).operate(
                instruction="x")


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_calls_read_their_answer_to_the_end_and_reuse_one_connection(protocol, stream):
    with ScriptPeer(render(protocol, Turn(text="again"), stream=stream)) as peer:
        model = _model(protocol, peer, stream)
        for _ in range(3):
            assert await Branch(chat_model=model).operate(instruction="x") == "again"
    assert peer.connections == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_stream_that_goes_on_after_its_last_event_is_answered_and_cut_off(protocol):
    answer = render(protocol, Turn(text="done"), stream=True)
    if protocol == "google":  # its stream has no last event: the body's end is the end
        answer = render("anthropic", Turn(text="done"), stream=True)
        protocol = "anthropic"
    lingering = Answer(200, answer.body + b": ping\n\n", "text/event-stream", hold_s=30.0)
    with ScriptPeer(lingering) as peer:
        with anyio.fail_after(20):  # a hang guard: the reader stops at stream_end_grace
            assert await Branch(chat_model=_model(protocol, peer, True)).operate(instruction="x") == "done"


async def test_a_gemini_stream_held_open_after_its_finish_reason_is_answered():
    """Gemini's stream has no last event: the chunk with the finish reason ends
    the answer, and a server that then holds the connection open is waited on
    only ``stream_end_grace``, never ``silence_timeout``."""
    answer = render("google", Turn(text="done"), stream=True)
    lingering = Answer(200, answer.body + b": ping\n\n", "text/event-stream", hold_s=30.0)
    with ScriptPeer(lingering) as peer:
        with anyio.fail_after(20):  # a hang guard: the reader stops at stream_end_grace
            branch = Branch(chat_model=_model("google", peer, True, silence_timeout=15.0))
            assert await branch.operate(instruction="x") == "done"
            usage = branch.messages[-1].metadata.get("usage") or {}
    assert usage.get("completion_tokens") == USAGE["output"]  # the final chunk's usage kept


WRONG_TYPED_DELTAS = [
    ("anthropic", "text_delta", "text"), ("anthropic", "thinking_delta", "thinking"),
    ("anthropic", "input_json_delta", "partial_json"), ("anthropic", "signature_delta", "signature"),
    ("openai_responses", "response.output_text.delta", "delta"),
    ("openai_responses", "response.function_call_arguments.delta", "delta"),
]


@pytest.mark.parametrize(("protocol", "kind", "key"), WRONG_TYPED_DELTAS)
@pytest.mark.parametrize("value", [{"text": "injected"}, ["a"], 7])
async def test_a_stream_delta_whose_text_is_no_string_is_a_response_error_never_text(protocol, kind, key, value):
    turn = Turn(thinking="think", text="hello", calls=[("call_1", "weather", {"city": "Oslo"})])
    events = (anthropic_events if protocol == "anthropic" else responses_events)(turn)
    hit = [d for _, d in events if d.get("type") == kind
           or (isinstance(d.get("delta"), dict) and d["delta"].get("type") == kind)]
    assert hit, kind
    if protocol == "anthropic":
        hit[0]["delta"][key] = value
    else:
        hit[0][key] = value
    with ScriptPeer(Answer(200, sse(events), "text/event-stream")) as peer:
        branch = Branch(chat_model=_model(protocol, peer, True), tools=[weather])
        with pytest.raises(EndpointResponseError, match="not text"):
            await branch.operate(instruction="x", actions=True)
    assert not [m for m in branch.messages if m.role in ("assistant", "action_response")]


def test_the_native_providers_are_registered_with_their_genai_names():
    from lionops.endpoints.registry import provider_spec, providers

    names = {name: provider_spec(name).otel_name for name in PROTOCOLS}
    assert names == {"openai_responses": "openai", "anthropic": "anthropic", "google": "gcp.gemini"}
    assert set(PROTOCOLS) <= set(providers())
    assert iModel(provider="gemini").is_cli  # the Gemini CLI keeps its name


@pytest.mark.parametrize(("protocol", "stream"), CASES, ids=IDS)
async def test_a_stream_reports_its_time_to_first_chunk_through_opentelemetry(protocol, stream, otel):
    from lionops.endpoints.registry import provider_spec

    with ScriptPeer(render(protocol, Turn(text="ok"), stream=stream)) as peer:
        assert await Branch(chat_model=_model(protocol, peer, stream)).operate(instruction="x") == "ok"
    (chat,) = otel.named("chat")
    assert chat.attributes["gen_ai.provider.name"] == provider_spec(protocol).otel_name
    assert ("gen_ai.response.time_to_first_chunk" in chat.attributes) is stream
    if stream:
        assert chat.attributes["gen_ai.response.time_to_first_chunk"] >= 0
        points = otel.metrics()["gen_ai.client.operation.time_to_first_chunk"].data.data_points
        assert [p.attributes["gen_ai.provider.name"] for p in points] == [provider_spec(protocol).otel_name]
        assert sum(p.count for p in points) == 1
    else:
        assert "gen_ai.client.operation.time_to_first_chunk" not in otel.metrics()


SEARCH_BLOCKS = [
    {"type": "server_tool_use", "id": "srvtoolu_01peer", "name": "web_search", "input": {"query": "weather Paris"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01peer",
     "content": [{"type": "web_search_result", "url": "https://example.org", "title": "Paris",
                  "encrypted_content": "EqgfCioIARgBIiQ3", "page_age": None}]},
]


def _paused(stream: bool, text: str, container: str | None = None) -> Answer:
    """An Anthropic answer that pauses its turn after a server tool's search."""
    if not stream:
        body = {**anthropic_body_of(Turn(text=text)), "stop_reason": "pause_turn"}
        body["content"] = [*SEARCH_BLOCKS, *body["content"]]
        if container:
            body["container"] = {"id": container, "expires_at": "2030-01-01T00:00:00Z"}
        return Answer(200, json.dumps(body).encode())
    events = anthropic_events(Turn(text=text))
    shift = len(SEARCH_BLOCKS)
    for _, data in events:
        if "index" in data:
            data["index"] += shift
        if data.get("type") == "message_delta":
            data["delta"]["stop_reason"] = "pause_turn"
            if container:
                data["delta"]["container"] = {"id": container, "expires_at": "2030-01-01T00:00:00Z"}
    blocks = [e for i, b in enumerate(SEARCH_BLOCKS) for e in (
        ("content_block_start", {"type": "content_block_start", "index": i, "content_block": b}),
        ("content_block_stop", {"type": "content_block_stop", "index": i}))]
    return Answer(200, sse([*events[:2], *blocks, *events[2:]]), "text/event-stream")


def anthropic_body_of(turn: Turn) -> dict[str, Any]:
    from tests.native_recordings import anthropic_body

    return anthropic_body(turn)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_paused_anthropic_turn_is_continued_with_its_content_sent_back(stream):
    final = render("anthropic", Turn(text="sunny."), stream=stream)
    with ScriptPeer(_paused(stream, "It is ", container="container_011peer"), final) as peer:
        branch = Branch(chat_model=_model("anthropic", peer, stream))
        assert await branch.operate(instruction="weather in Paris?") == "It is sunny."
    first, second = peer.requests
    sent = second["messages"][-1]
    assert sent["role"] == "assistant" and second["messages"][:-1] == first["messages"]
    assert [b["type"] for b in sent["content"]] == ["server_tool_use", "web_search_tool_result", "text"]
    assert sent["content"][:2] == SEARCH_BLOCKS and sent["content"][2]["text"] == "It is "
    assert second["container"] == "container_011peer"
    assert branch.messages[-1].metadata["usage"]["completion_tokens"] == 2 * USAGE["output"]
    assert branch.messages[-1].metadata["http_attempts"] == 1


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_turn_paused_past_the_limit_is_a_cut_answer_never_parsed(stream):
    with ScriptPeer(_paused(stream, "still searching")) as peer:
        model = _model("anthropic", peer, stream)
        model.endpoint.pause_turn_limit = 2
        result = await Branch(chat_model=model).operate(instruction="x", response_format=Weather)
    assert isinstance(result, RawOutput)
    assert len(peer.requests) == 3  # the first request and two continuations
    last = peer.requests[-1]["messages"][-1]
    assert [b["type"] for b in last["content"]].count("server_tool_use") == 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_gemini_call_with_its_own_model_names_it_in_the_url(stream):
    with ScriptPeer(render("google", Turn(text="ok"), stream=stream)) as peer:
        endpoint = _model("google", peer, stream).endpoint
        await endpoint.chat([{"role": "user", "content": "x"}])
        await endpoint.chat([{"role": "user", "content": "x"}], model="gemini-other")
        await endpoint.chat([{"role": "user", "content": "x"}])
        await endpoint.aclose()
    method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
    assert peer.paths == [f"/v1beta/models/{m}{method}" for m in ("gemini-peer", "gemini-other", "gemini-peer")]
    assert all("__lionops" not in json.dumps(r) for r in peer.requests)
