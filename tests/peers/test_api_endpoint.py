"""The Chat Completions endpoint: configuration, retries, typed errors, secrets.

Every wait is asserted through a RecordingClock except in one real-time test.
"""

from __future__ import annotations

import email.utils
import json
import logging
import socket
import time
import traceback

import anyio
import pytest

from lionops import Branch, ConfigurationError, iModel
from lionops.clock import RecordingClock, use_clock
from lionops.endpoints.openai import ChatCompletionsEndpoint, parse_retry_after
from lionops.errors import (
    EndpointAuthError,
    EndpointConnectionError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
)
from lionops.testing import Reply, completion, error_body
from tests.helpers import Answer, ToolBox
from tests.openai_server import failing_operate, make_model, model, server  # noqa: F401 - fixtures

MESSAGES = [{"role": "user", "content": "hi"}]
RATE = error_body("Rate limit reached for gpt-4o-mini", "requests", "rate_limit_exceeded")


# ---------------------------------------------------------------- configuration


def test_key_and_base_url_from_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    m = iModel(provider="openai", model="gpt-4o-mini")
    assert m.endpoint.has_api_key and m.endpoint.base_url == "http://127.0.0.1:9/v1"
    assert m.endpoint.url == "http://127.0.0.1:9/v1/chat/completions"
    assert not m.is_cli
    explicit = iModel(provider="openai", model="x", api_key="sk-arg", base_url="http://127.0.0.1:8/v1")
    assert explicit.endpoint.scrub("sk-arg") == "***" and explicit.endpoint.base_url.endswith(":8/v1")


def test_local_servers_never_read_the_cloud_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cloud")
    m = iModel(provider="ollama", model="llama3.2")
    assert not m.endpoint.has_api_key
    assert m.endpoint.base_url == "http://127.0.0.1:11434/v1"


def test_reprs_name_no_secret():
    ep = ChatCompletionsEndpoint(model="m", api_key="sk-test-SENTINEL-123", base_url="https://host.test/v1?key=q")
    text = repr(ep) + str(ep) + repr(vars(ep)) + repr(iModel(endpoint=ep))
    assert "SENTINEL" not in text and "key=q" not in text
    assert "api_key=set" in repr(ep) and "host.test/v1" in repr(ep)


@pytest.mark.parametrize("kw", [
    {"provider": "nope"}, {"max_retries": -1}, {"timeout": 0}, {"messages": []},
    {"structured_output": "xml"}, {"deadline": 0}, {"deadline": -1}, {"deadline": "30"}, {"deadline": None},
])
def test_bad_configuration(kw):
    with pytest.raises(ConfigurationError):
        ChatCompletionsEndpoint(**{"model": "m", **kw})


@pytest.mark.anyio
async def test_no_model_name_is_refused(server):
    ep = ChatCompletionsEndpoint(base_url=server.base_url)
    with pytest.raises(ConfigurationError, match="model"):
        await ep.chat(MESSAGES)
    assert server.requests == []


@pytest.mark.anyio
async def test_default_and_call_options_and_no_key(server):
    server.push(completion("ok"))
    ep = ChatCompletionsEndpoint(provider="vllm", model="m", base_url=server.base_url, temperature=0.5, top_p=0.9)
    done = await ep.chat(MESSAGES, temperature=0.0, user=None)
    await ep.aclose()
    body = server.requests[0].body
    assert (body["temperature"], body["top_p"], "user" in body) == (0.0, 0.9, False)
    assert "authorization" not in server.requests[0].headers
    assert done.text == "ok" and done.finish_reason == "stop" and done.attempts == 1


@pytest.mark.anyio
@pytest.mark.parametrize("native", [False, True], ids=["tools_in_prompt", "native_tools"])
async def test_the_request_body_is_compact_utf8_json_and_the_same_on_every_call(native):
    """The bytes sent are what ``json=`` would send (compact separators, text
    as UTF-8, not escaped), also for the shared schema and tool specs, and the
    same on a second call that reuses them."""
    import httpx2

    from lionops.runtime import use_runtime

    sent: list[bytes] = []

    class Transport(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            sent.append(await request.aread())
            assert request.headers["content-type"] == "application/json"
            assert request.headers["content-length"] == str(len(sent[-1]))
            return httpx2.Response(200, json=completion('{"answer": 4}'))

    m = iModel(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key="k", native_tools=native)
    with use_runtime(http_transport=Transport()):
        for _ in range(2):
            branch = Branch(chat_model=m, tools=ToolBox().tools())
            await branch.operate(instruction="Prévision — «quatre»?", response_format=Answer, actions=True)
    await m.aclose()
    first = json.loads(sent[0])
    assert sent[0] == json.dumps(first, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    assert "Prévision — «quatre»?".encode() in sent[0]
    assert first["response_format"]["json_schema"]["schema"]["properties"]["answer"]
    assert ("tools" in first) is native
    assert sent[1] == sent[0]


@pytest.mark.anyio
async def test_a_cookie_the_server_sets_is_sent_back(server):
    """An answer that sets a cookie has it kept and sent on the next request;
    answers that set none leave the jar as it was."""
    server.push(completion("one"), Reply(completion("two"), headers={"Set-Cookie": "session=abc123; Path=/"}),
                completion("three"), completion("four"))
    m = make_model(server)
    for _ in range(4):
        await m.endpoint.chat(MESSAGES)
    await m.aclose()
    cookies = [r.headers.get("cookie") for r in server.chat_requests]  # the server records it redacted
    assert [c is not None for c in cookies] == [False, False, True, True]


# ---------------------------------------------------------------- client lifecycle


@pytest.mark.anyio
async def test_one_client_reused_within_a_loop(server, model):
    server.push(completion("a"), completion("b"))
    await model.endpoint.chat(MESSAGES)
    first = model.endpoint._client
    await model.endpoint.chat(MESSAGES)
    assert model.endpoint._client is first


def test_endpoint_survives_a_new_event_loop_and_backend(server):
    ep = ChatCompletionsEndpoint(model="m", base_url=server.base_url, api_key="k")
    server.push(completion("a"), completion("b"))
    texts = []

    async def call() -> None:
        texts.append((await ep.chat(MESSAGES)).text)

    anyio.run(call, backend="asyncio")
    anyio.run(call, backend="trio")
    assert texts == ["a", "b"]


# ---------------------------------------------------------------- Retry-After


def test_parse_retry_after_forms():
    now = time.time()
    date = email.utils.formatdate(now + 3, usegmt=True)
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert 1.5 < parse_retry_after({"retry-after": date}, now=now) <= 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}) == 0.0
    assert parse_retry_after({}) is None


@pytest.mark.anyio
async def test_retry_after_in_seconds_is_waited(server, model):
    server.push(Reply(RATE, status=429, headers={"Retry-After": "2"}), completion("done"))
    with use_clock(RecordingClock()) as clk:
        done = await model.endpoint.chat(MESSAGES)
    assert clk.sleeps == [2.0]
    assert done.text == "done" and done.attempts == 2
    assert done.retries == [{"status": 429, "delay_s": 2.0}]


@pytest.mark.anyio
async def test_retry_after_as_an_http_date_is_waited(server, model):
    when = email.utils.formatdate(time.time() + 3, usegmt=True)
    server.push(Reply(RATE, status=429, headers={"Retry-After": when}), completion("done"))
    with use_clock(RecordingClock()) as clk:
        done = await model.endpoint.chat(MESSAGES)
    assert len(clk.sleeps) == 1 and 1.5 < clk.sleeps[0] <= 3.0
    assert done.text == "done"


@pytest.mark.anyio
async def test_retry_after_above_the_cap_is_a_prompt_rate_limit_error(server):
    server.push(Reply(RATE, status=429, headers={"Retry-After": "3600"}), completion("never"))
    err, branch, box, clk = await failing_operate(
        server, EndpointRateLimitError, {"retry_after_cap": 30}, instruction="q", response_format=Answer, actions=True,
    )
    assert clk.sleeps == []
    assert err.retry_after == 3600 and err.status == 429
    assert "above the cap of 30 s" in str(err)
    assert len(server.chat_requests) == 1
    assert branch.traces[-1].exit == "failed" and box.total == 0


@pytest.mark.anyio
async def test_429_until_retries_run_out(server):
    for _ in range(3):
        server.push(Reply(RATE, status=429))
    m = make_model(server, max_retries=2, backoff_initial=0.25, backoff_factor=3)
    with use_clock(RecordingClock()) as clk:
        with pytest.raises(EndpointRateLimitError) as info:
            await m.endpoint.chat(MESSAGES)
    await m.aclose()
    assert clk.sleeps == [0.25, 0.75]
    assert info.value.attempts == 3 and "after 3 attempts" in str(info.value)


@pytest.mark.anyio
async def test_5xx_then_success_backs_off(server, model):
    server.push(Reply("upstream connect error", status=502), Reply(error_body("busy"), status=503), completion("ok"))
    with use_clock(RecordingClock()) as clk:
        done = await model.endpoint.chat(MESSAGES)
    assert clk.sleeps == [0.5, 1.0] and done.attempts == 3


@pytest.mark.anyio
async def test_one_real_time_retry(server, model):
    """The one test that really sleeps (retry-after-ms: 200)."""
    server.push(Reply(RATE, status=429, headers={"retry-after-ms": "200"}), completion("ok"))
    done = await model.endpoint.chat(MESSAGES)
    assert done.text == "ok" and done.retries == [{"status": 429, "delay_s": 0.2}]
    assert len(server.chat_requests) == 2


# ---------------------------------------------------------------- typed errors


@pytest.mark.anyio
async def test_400_is_not_retried(server, model):
    server.push(Reply(error_body("Invalid value for 'temperature'."), status=400))
    with use_clock(RecordingClock()) as clk:
        with pytest.raises(EndpointStatusError) as info:
            await model.endpoint.chat(MESSAGES, temperature=9)
    assert info.value.status == 400 and clk.sleeps == []
    assert "Invalid value for 'temperature'" in str(info.value)
    assert len(server.chat_requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("body", ["<html>502 Bad Gateway</html>", {"object": "chat.completion", "choices": []}])
async def test_2xx_without_a_completion_is_a_response_error(server, model, body):
    server.push(Reply(body))
    with pytest.raises(EndpointResponseError):
        await model.endpoint.chat(MESSAGES)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.anyio
async def test_connection_refused():
    m = iModel(provider="openai", model="m", api_key="k", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    branch = Branch(chat_model=m)
    with use_clock(RecordingClock()) as clk:
        with pytest.raises(EndpointConnectionError, match="cannot reach.*check base_url"):
            await branch.operate(instruction="q")
    await m.aclose()
    assert clk.sleeps == [0.5, 1.0]  # refused connections are retried
    assert branch.traces[-1].exit == "failed"


# ---------------------------------------------------------------- secrets

SENTINEL = "sk-test-SENTINEL-123"


@pytest.mark.anyio
async def test_the_api_key_never_leaks(server, caplog):
    server.push(Reply(error_body(f"Incorrect API key provided: {SENTINEL}.", code="invalid_api_key"), status=401))
    m = make_model(server, api_key=SENTINEL)
    branch = Branch(chat_model=m, tools=ToolBox().tools())
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EndpointAuthError) as info:
        await branch.operate(instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    err = info.value
    assert err.status == 401 and len(server.chat_requests) == 1  # never retried
    trace = branch.traces[-1]
    seen = "\n".join([
        caplog.text, str(err), repr(err), err.body,
        "".join(traceback.format_exception(err)),
        repr(m), str(m), repr(m.endpoint), repr(vars(m.endpoint)), repr(branch),
        json.dumps(branch.messages.to_list()), json.dumps(branch.logs.to_list()),
        trace.to_json(), json.dumps([r.to_dict() for r in server.requests]),
    ])
    assert SENTINEL not in seen
    assert "***" in str(err)  # the echoed key was scrubbed, not dropped silently
    assert server.requests[0].headers["authorization"] == "Bearer ***"
    assert any(r.name == "lionops.http" for r in caplog.records)


@pytest.mark.anyio
@pytest.mark.parametrize("echo", ["sk-test-SENT****-123", "sk-test-SENTINEL-***", "****test-SENTINEL-123"])
async def test_the_api_key_echoed_in_part_never_leaks(server, caplog, echo):
    server.push(Reply(error_body(f"Incorrect API key provided: {echo}.", code="invalid_api_key"), status=401))
    m = make_model(server, api_key=SENTINEL)
    branch = Branch(chat_model=m)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EndpointAuthError) as info:
        await branch.operate(instruction="q")
    await m.aclose()
    err = info.value
    seen = "\n".join([caplog.text, str(err), repr(err), err.body, "".join(traceback.format_exception(err)),
                      json.dumps(branch.logs.to_list()), branch.traces[-1].to_json()])
    assert "SENTINEL" not in seen and "Incorrect API key provided: ***" in str(err)
