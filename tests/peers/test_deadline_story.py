"""A deadline error tells the whole story: when the total ``deadline`` ends a
call that had already retried, the ``EndpointTimeoutError`` names every
earlier attempt and its outcome (message and ``earlier_attempts``), however
the deadline struck: an attempt still running, no time left for another, or
a wait that would pass it. Loopback OpenAI-compatible server, real sockets."""

from __future__ import annotations

import anyio
import pytest

from lionops.clock import RecordingClock, use_clock
from lionops.errors import EndpointTimeoutError
from lionops.testing import Reply, error_body
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "user", "content": "hi"}]
BUSY = error_body("The server is overloaded", "server_error")
RATE = error_body("Rate limit reached", "requests", "rate_limit_exceeded")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("first", [(500, BUSY, "EndpointStatusError"), (503, BUSY, "EndpointStatusError"),
                                   (429, RATE, "EndpointRateLimitError")], ids=["500", "503", "429"])
async def test_an_attempt_cut_by_the_deadline_names_the_attempts_before_it(server, first, stream):  # noqa: F811
    status, body, kind = first
    server.push(Reply(body, status=status), Reply(hang=True, hang_s=30))
    m = make_model(server, deadline=1.0, max_retries=3, backoff_initial=0.05, stream=stream)
    try:
        with anyio.fail_after(20):
            with pytest.raises(EndpointTimeoutError) as info:
                await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()
    err = info.value
    assert err.limit == "deadline" and err.attempts == 2
    assert "attempt 2 was still running" in str(err)
    assert err.earlier_attempts == [f"attempt 1: {kind} (HTTP {status})"]
    assert f"earlier: attempt 1: {kind} (HTTP {status})" in str(err)


async def test_a_wait_past_the_deadline_names_every_attempt_made(server):  # noqa: F811
    server.push(Reply(BUSY, status=500), Reply(BUSY, status=503), Reply(RATE, status=429))
    m = make_model(server, deadline=3, max_retries=5, backoff_initial=1, backoff_factor=2)
    try:
        with use_clock(RecordingClock()) as clk:
            with pytest.raises(EndpointTimeoutError) as info:
                await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()
    err = info.value
    assert clk.sleeps == [1.0] and err.attempts == 2
    assert err.earlier_attempts == ["attempt 1: EndpointStatusError (HTTP 500)",
                                    "attempt 2: EndpointStatusError (HTTP 503)"]
    assert "would wait 2 s" in str(err) and "attempt 2: EndpointStatusError (HTTP 503)" in str(err)


async def test_a_refused_attempt_is_named_too():
    """The first attempt finds no server (refused), the deadline ends the wait."""
    from lionops.testing import OpenAIServer
    with OpenAIServer() as down:
        m = make_model(down, deadline=1, max_retries=5, backoff_initial=0.6, backoff_factor=2)
    try:
        with use_clock(RecordingClock()):
            with pytest.raises(EndpointTimeoutError) as info:
                await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()
    assert info.value.earlier_attempts[0] == "attempt 1: EndpointConnectionError (no HTTP answer)"


async def test_a_deadline_with_no_retry_before_it_names_none(server):  # noqa: F811
    server.push(Reply(hang=True, hang_s=30))
    m = make_model(server, deadline=0.5)
    try:
        with pytest.raises(EndpointTimeoutError) as info:
            await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()
    assert info.value.earlier_attempts == [] and "earlier" not in str(info.value)
