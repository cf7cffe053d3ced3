"""The API endpoint's time bounds, retry facts and secrets at the edges.

Waits are asserted through a RecordingClock; where a real socket must be
timed (a server dripping its body), only generous real bounds are used.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from typing import Any

import anyio
import pytest

from lionops import Branch, ConfigurationError, iModel
from lionops.clock import RecordingClock, use_clock
from lionops.errors import (
    EndpointAuthError,
    EndpointConnectionError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
)
from lionops.replay import Cassette, record
from lionops.testing import OpenAIServer, Reply, chunked, completion, error_body
from tests.helpers import Answer, ToolBox
from tests.openai_server import failing_operate, make_model, sent, server  # noqa: F401 - fixtures

MESSAGES = [{"role": "user", "content": "hi"}]
BUSY = error_body("The server is overloaded", "server_error")

#: A key no built-in redaction pattern knows: only lionops' own scrubbing removes it.
SENTINEL = "SENTINEL-key-7f3a9c2e51"
SENTINEL_HEADER = "SENTINEL-hdr-0d4e8b61aa"
SENTINEL_QUERY = "SENTINEL-qry-93c1f5e7bb"
SECRETS = (SENTINEL, SENTINEL_HEADER, SENTINEL_QUERY)


# ---------------------------------------------------------------- the total deadline


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_dripping_server_is_cut_by_the_deadline(server, stream):
    """One byte every half second never trips the read timeout; the total
    deadline ends the call. Real socket: generous real bounds only."""
    done = completion("x" * 400)
    reply = Reply(stream=chunked(done), drip_s=0.5) if stream else Reply(done, drip_s=0.5)
    server.push(reply)
    m = make_model(server, timeout=5, deadline=1.5, stream=stream)
    started = time.monotonic()
    with anyio.fail_after(60):  # the body alone would take minutes to arrive
        with pytest.raises(EndpointTimeoutError) as info:
            await m.endpoint.chat(MESSAGES)
    elapsed = time.monotonic() - started
    await m.aclose()
    err = info.value
    assert err.limit == "deadline" and err.seconds == 1.5 and err.attempts == 1
    assert "total deadline of 1.5 s" in str(err) and "attempt 1 was still running" in str(err)
    assert elapsed < 30  # far less than the minutes the body takes
    assert len(server.chat_requests) == 1


@pytest.mark.anyio
async def test_a_silent_server_is_cut_by_the_deadline_before_a_long_timeout(server):
    server.push(Reply(hang=True, hang_s=30))
    m = make_model(server, timeout=30, deadline=0.5)
    with anyio.fail_after(20):
        with pytest.raises(EndpointTimeoutError) as info:
            await m.endpoint.chat(MESSAGES)
    await m.aclose()
    assert info.value.limit == "deadline" and info.value.__context__ is None


@pytest.mark.anyio
async def test_the_read_timeout_names_itself(server):
    """A server that never answers trips ``timeout`` (one read), named as such."""
    server.push(Reply(hang=True, hang_s=10))
    m = make_model(server, timeout=0.3)
    with pytest.raises(EndpointTimeoutError) as info:
        await m.endpoint.chat(MESSAGES)
    await m.aclose()
    err = info.value
    assert err.limit == "timeout" and err.seconds == 0.3
    assert "one read waited longer than the timeout of 0.3 s" in str(err)
    assert err.__context__ is None and err.__cause__ is None  # no httpx2 exception (it holds the headers)


@pytest.mark.anyio
async def test_backoff_stops_where_the_deadline_would_pass(server):
    """Ten retries allowed, but waits 0.5 + 1 + 2 + 4 + 8 = 15.5 s leave no
    room for another 8 s wait within 20 s: no sixth wait, a deadline error."""
    for _ in range(11):
        server.push(Reply(BUSY, status=503))
    m = make_model(server, max_retries=10, deadline=20)
    with use_clock(RecordingClock()) as clk:
        with pytest.raises(EndpointTimeoutError) as info:
            await m.endpoint.chat(MESSAGES)
    await m.aclose()
    err = info.value
    assert clk.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert len(server.chat_requests) == 6 and err.attempts == 6
    assert err.limit == "deadline" and "total deadline of 20 s" in str(err)
    assert "HTTP 503" in str(err) and "would wait 8 s" in str(err) and "after 6 attempts" in str(err)
    assert [r["delay_s"] for r in err.retries] == clk.sleeps


@pytest.mark.anyio
async def test_retry_after_past_the_deadline_is_not_waited_for(server):
    """Retry-After is honoured while it fits the deadline, and a wait that
    would pass it is not made; the trace and the log show both attempts."""
    rate = error_body("Rate limit reached", "requests", "rate_limit_exceeded")
    server.push(Reply(rate, status=429, headers={"Retry-After": "25"}),
                Reply(rate, status=429, headers={"Retry-After": "25"}), completion("never"))
    err, branch, box, clk = await failing_operate(
        server, EndpointTimeoutError, {"deadline": 30}, instruction="q", response_format=Answer, actions=True,
    )
    assert clk.sleeps == [25.0] and len(server.chat_requests) == 2
    assert err.limit == "deadline" and err.attempts == 2
    trace = branch.traces[-1]
    assert trace.exit == "failed" and box.total == 0
    assert trace.meta["http_attempts"] == 2 and trace.meta["http_statuses"] == [429, 429]
    assert trace.meta["http_retries"] == [{"status": 429, "delay_s": 25.0}]
    assert [e.content["delay_s"] for e in branch.logs.of_kind("http_retry")] == [25.0]


@pytest.mark.anyio
async def test_the_deadline_bounds_the_whole_adapter_call_parse_model_included(server):
    """The answer holds no JSON, so the parse model is asked to restate it:
    those calls share the adapter call's deadline. 15 s went on the first
    call's Retry-After; a parse-model call asked to wait 10 s more (past 20 s)
    does not wait."""
    rate = error_body("Rate limit reached", "requests", "rate_limit_exceeded")
    server.push(Reply(rate, status=429, headers={"Retry-After": "15"}), completion("no JSON in this answer"))
    server.push(*[Reply(rate, status=429, headers={"Retry-After": "10"})] * 8)
    m = make_model(server, deadline=20)
    with use_clock(RecordingClock()) as clk:
        result = await Branch(chat_model=m).operate(instruction="q", response_format=Answer)
    await m.aclose()
    assert clk.sleeps[0] == 15.0 and 10.0 not in clk.sleeps
    assert result == "no JSON in this answer"  # the mismatch policy (return_value) applies


@pytest.mark.anyio
async def test_per_call_deadline_is_not_sent(server):
    """``operate(..., deadline=...)`` bounds that call and never reaches the provider."""
    server.push(completion('{"answer": 1}'))
    m = make_model(server)
    assert m.endpoint.deadline == 600 and "deadline=600" in repr(m.endpoint)
    result = await Branch(chat_model=m).operate(instruction="q", response_format=Answer, deadline=12.5)
    await m.aclose()
    assert result.answer == 1
    assert "deadline" not in sent(server)
    with pytest.raises(ConfigurationError, match="deadline"):
        await m.endpoint.chat(MESSAGES, deadline=0)


# ---------------------------------------------------------------- retries that run out


@pytest.mark.anyio
async def test_retries_that_run_out_are_visible(server):
    """5xx until the retries run out: the error carries the attempts, the
    failed operate()'s trace the attempts, statuses and waits, and each retry
    is an http_retry log entry."""
    for _ in range(3):
        server.push(Reply(BUSY, status=503))
    err, branch, box, clk = await failing_operate(
        server, EndpointStatusError, {}, instruction="q", response_format=Answer, actions=True,
    )
    waits = [{"status": 503, "delay_s": 0.5}, {"status": 503, "delay_s": 1.0}]
    assert err.attempts == 3 and err.retries == waits and "after 3 attempts" in str(err)
    trace = branch.traces[-1]
    assert trace.exit == "failed"
    assert trace.meta["http_attempts"] == 3 and trace.meta["http_statuses"] == [503, 503, 503]
    assert trace.meta["http_retries"] == waits
    assert [e.content for e in branch.logs.of_kind("http_retry")] == [{"provider": "openai", **w} for w in waits]
    assert box.total == 0


@pytest.mark.anyio
async def test_the_trace_keeps_the_model_calls_facts_after_a_parse_re_ask(server):
    """The answer holds no JSON, so the parse model re-asks (and fails once):
    the trace's HTTP facts stay those of the model call."""
    server.push(Reply(BUSY, status=503), completion("no JSON here"),
                Reply(error_body("bad"), status=400), completion('{"answer": 3}'))
    m = make_model(server)
    with use_clock(RecordingClock()):
        result, trace = await Branch(chat_model=m).operate_traced(instruction="q", response_format=Answer)
    await m.aclose()
    assert result.answer == 3 and len(server.chat_requests) == 4
    assert trace.meta["http_attempts"] == 2 and trace.meta["http_statuses"] == [503, 200]
    assert trace.meta["http_retries"] == [{"status": 503, "delay_s": 0.5}]


@pytest.mark.anyio
async def test_refused_connections_that_run_out_are_visible():
    srv = OpenAIServer().start()
    base = srv.base_url
    srv.stop()  # nothing listens there any more
    m = iModel(provider="openai", model="m", api_key="k", base_url=base)
    branch = Branch(chat_model=m)
    with use_clock(RecordingClock()), pytest.raises(EndpointConnectionError) as info:
        await branch.operate(instruction="q")
    await m.aclose()
    assert info.value.attempts == 3 and "after 3 attempts" in str(info.value)
    assert branch.traces[-1].meta["http_statuses"] == [None, None, None]
    assert [e.content["status"] for e in branch.logs.of_kind("http_retry")] == [None, None]


# ---------------------------------------------------------------- secrets at the edges


def _chain(err: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while err is not None and err not in out:
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def _secret_model(server: OpenAIServer, **kw: Any) -> iModel:
    return iModel(provider="openai", model="gpt-4o-mini", base_url=f"{server.base_url}?api-key={SENTINEL_QUERY}",
                  api_key=SENTINEL, headers={"X-Api-Token": SENTINEL_HEADER}, timeout=5, **kw)


def _leaks(text: str, min_part: int = 8) -> list[str]:
    """Secrets of which ``min_part`` or more characters appear in ``text``."""
    return [s for s in SECRETS if any(s[i:i + min_part] in text for i in range(len(s) - min_part + 1))]


ECHO_CASES = {
    "401": (Reply(error_body("Incorrect API key; you sent {request_headers}"), status=401, echo=True),
            EndpointAuthError),
    "500-text": (Reply("upstream said {request_headers}", status=500, echo=True), EndpointStatusError),
    "200-not-json": (Reply("<html>{request_headers}</html>", echo=True), EndpointResponseError),
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(ECHO_CASES))
async def test_an_echoing_server_leaks_no_secret(server, case, caplog, tmp_path):
    """A server that sends every request header back, in headers and body:
    no secret in DEBUG logs of any logger (httpx2, httpcore2 included), the
    error's str/repr/traceback and its whole chain, the trace, the branch,
    or the recorded cassette."""
    reply, error = ECHO_CASES[case]
    server.push(*[reply] * 3)
    m = _secret_model(server, max_retries=0)
    branch = Branch(chat_model=m, tools=ToolBox().tools())
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "echo.json"
    with pytest.raises(error) as info:
        await record(path, branch, instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    err = info.value
    assert _chain(err) == [err]
    raw = server.requests[0]
    assert raw.headers["authorization"] == "Bearer ***"
    assert any(r.name.startswith("httpcore2") for r in caplog.records)  # httpcore2's DEBUG records were seen
    shown = "\n".join([
        caplog.text, *(f"{r.getMessage()} {r.args!r}" for r in caplog.records),
        *(s for e in _chain(err) for s in (str(e), repr(e), getattr(e, "body", ""))),
        "".join(traceback.format_exception(err)),
        repr(m), repr(m.endpoint), repr(branch), branch.traces[-1].to_json(),
        json.dumps(branch.messages.to_list()), json.dumps(branch.logs.to_list()),
        path.read_text(), repr(Cassette.load(path)),
    ])
    assert not _leaks(shown)
    assert "***" in str(err) or "***" in err.body  # the echoed key was scrubbed, not dropped silently


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 200])
@pytest.mark.parametrize("offset", [280, 295, 299])
async def test_a_key_straddling_the_preview_cut_is_removed_whole(server, status, offset):
    """The preview is cut at 300 characters after secrets are removed, so a key
    the cut would split is not shown in part."""
    text = "x" * offset + SENTINEL + " and more " + "y" * 400
    server.push(Reply(text, status=status))
    m = _secret_model(server, max_retries=0)
    with pytest.raises((EndpointStatusError, EndpointResponseError)) as info:
        await m.endpoint.chat(MESSAGES)
    await m.aclose()
    err = info.value
    assert not _leaks(str(err) + repr(err) + getattr(err, "body", ""), min_part=4)


@pytest.mark.anyio
async def test_secret_forms_a_server_or_httpx_may_show(server):
    """A key read from a file with its newline is sent stripped; a header value
    httpx2 refuses (it quotes it in its error) and the bare credential of a
    caller's ``Authorization: Bearer ...`` header echoed alone are scrubbed."""
    server.push(completion("ok"), Reply(error_body(f"unknown key {SENTINEL_HEADER}"), status=401))
    keyed = iModel(provider="openai", model="m", base_url=server.base_url, api_key=f"{SENTINEL}\n")
    assert (await keyed.endpoint.chat(MESSAGES)).text == "ok"
    await keyed.aclose()
    bearer = iModel(provider="openai", model="m", base_url=server.base_url, max_retries=0,
                    headers={"Authorization": f"Bearer {SENTINEL_HEADER}"})
    with pytest.raises(EndpointAuthError) as auth:
        await bearer.endpoint.chat(MESSAGES)
    await bearer.aclose()
    broken = iModel(provider="openai", model="m", base_url=server.base_url, max_retries=0,
                    headers={"X-Api-Token": f"{SENTINEL_HEADER}\n"})
    with pytest.raises(EndpointConnectionError) as refused:
        await broken.endpoint.chat(MESSAGES)
    await broken.aclose()
    for err in (auth.value, refused.value):
        assert not _leaks(str(err) + repr(err) + "".join(traceback.format_exception(err)))
    assert "***" in str(auth.value)


@pytest.mark.anyio
async def test_a_body_that_cannot_be_decoded_is_a_typed_error(server):
    """A body labelled gzip that is not: a typed endpoint error with no chain,
    never httpx2's own exception (whose request holds the headers)."""
    server.push(Reply("definitely not gzip", headers={"Content-Encoding": "gzip"}))
    m = _secret_model(server, max_retries=0)
    with pytest.raises(EndpointResponseError, match="DecodingError") as info:
        await m.endpoint.chat(MESSAGES)
    await m.aclose()
    assert _chain(info.value) == [info.value] and not _leaks(str(info.value))


@pytest.mark.parametrize("url", [
    "http://user:SENTINEL-pw-4b1e9d@127.0.0.1:9/v1",
    "http://SENTINEL-user-only@127.0.0.1:9/v1",
    "https://:SENTINEL-pw-4b1e9d@api.example.test/v1",
])
def test_user_info_in_a_base_url_is_refused(url):
    """httpx2 would send it as Basic auth in place of the bearer key (and an
    echoing server would return it): refused at construction, never shown."""
    with pytest.raises(ConfigurationError, match="user info") as info:
        iModel(provider="openai", model="m", base_url=url, api_key=SENTINEL)
    assert "SENTINEL" not in str(info.value) + repr(info.value)


# ---------------------------------------------------------------- one model across event loops


def test_one_branch_and_model_across_event_loops():
    """One Branch and iModel on a keep-alive server, from asyncio.run() twice,
    anyio on trio, anyio on asyncio, then asyncio.run() again."""
    with OpenAIServer([completion(f'{{"answer": {i}}}') for i in range(5)]) as srv:
        m = make_model(srv)
        branch = Branch(chat_model=m)
        got: list[Any] = []

        async def call() -> None:
            got.append(await branch.operate(instruction="q", response_format=Answer))

        asyncio.run(call())
        asyncio.run(call())
        anyio.run(call, backend="trio")
        anyio.run(call, backend="asyncio")
        asyncio.run(call())
        assert [g.answer for g in got] == list(range(5))
        assert all(t.error is None for t in branch.traces) and len(branch.traces) == 5
