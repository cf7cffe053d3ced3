"""The bounds of a stream read under one moving cancel scope, attacked: a
server that stalls after data, sends only comments, trickles one event a byte
at a time, holds the connection open after a whole answer or drops it inside
an event; a total deadline below the silence bound; the caller's own
cancellation. Each bound that ends the call is the one named in its typed
error (``limit`` and ``seconds``), on Chat Completions and the native
protocols alike, on asyncio and trio."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import anyio
import pytest

from lionops import Branch, iModel
from lionops.errors import EndpointError, EndpointResponseError, EndpointTimeoutError
from lionops.testing.native import Turn, anthropic_events, google_chunks, responses_events, sse
from lionops.testing.openai_server import Reply
from tests.openai_server import make_model, server  # noqa: F401 - fixture
from tests.peers.test_stream_one_silence_scope import Paced, chunk

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "user", "content": "x"}]


async def _chat(server: Any, reply: Reply, **kw: Any) -> Any:
    server.push(reply)
    m = make_model(server, stream=True, max_retries=0, **kw)
    try:
        with anyio.fail_after(5):  # a hang guard, far past every bound below
            return await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()


async def test_data_then_a_stall_ends_at_silence_timeout_named_in_the_error(server):
    with pytest.raises(EndpointTimeoutError, match="silence_timeout") as info:
        await _chat(server, Reply(stream=[chunk("a")], done=False, then="silence"), silence_timeout=0.2)
    assert (info.value.limit, info.value.seconds) == ("silence_timeout", 0.2)


async def test_comments_only_end_at_silence_timeout_named_in_the_error(server):
    with pytest.raises(EndpointTimeoutError, match="silence_timeout") as info:
        await _chat(server, Reply(stream=[": ping\n\n"], done=False, then="ping"), silence_timeout=0.2)
    assert (info.value.limit, info.value.seconds) == ("silence_timeout", 0.2)


async def test_one_event_trickled_a_byte_at_a_time_ends_at_silence_timeout(server):
    """Bytes keep coming (no read waits past ``timeout``), but no event is whole."""
    with pytest.raises(EndpointTimeoutError, match="silence_timeout") as info:
        await _chat(server, Reply(stream=[chunk("slow")], drip_s=0.02), silence_timeout=0.2, timeout=1)
    assert info.value.limit == "silence_timeout"


@pytest.mark.parametrize("line_break", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
async def test_a_whole_answer_then_a_held_connection_returns_the_answer(server, line_break):
    events = [f"data: {json.dumps(chunk('whole', finish='stop'))}\n\n", "data: [DONE]\n\n"]
    reply = Reply(stream=[e.replace("\n", line_break) for e in events], done=False, then="silence")
    got = await _chat(server, reply, silence_timeout=30)  # _chat's hang guard ends it long before
    assert got.text == "whole"


@pytest.mark.parametrize("kind", ["comments", "data"])
async def test_a_stream_past_max_response_bytes_is_cut_naming_the_bound(server, kind):
    """Comments count toward the bytes read, as data events do."""
    line = ": " + "x" * 1000 + "\n\n" if kind == "comments" else chunk("x" * 1000)
    with pytest.raises(EndpointResponseError, match="max_response_bytes=10000"):
        await _chat(server, Reply(stream=[line] * 30, done=False), silence_timeout=3, max_response_bytes=10_000)


@pytest.mark.parametrize("then", ["silence", "ping"])
async def test_a_finish_reason_without_done_then_a_held_connection_is_the_answer(server, then):
    """A finish reason with or without ``[DONE]`` is the assembled answer: a
    server that then holds the stream open (silent, or with comments) ends
    the read at ``silence_timeout`` with the answer, as one that closes it does."""
    got = await _chat(server, Reply(stream=[chunk("whole"), chunk(finish="stop")], done=False, then=then),
                      silence_timeout=0.2)
    assert (got.text, got.finish_reason) == ("whole", "stop")


async def test_a_deadline_below_the_silence_bound_ends_the_call_named_as_the_deadline(server):
    with pytest.raises(EndpointTimeoutError, match="deadline") as info:
        await _chat(server, Reply(stream=[chunk("a")], done=False, then="silence"), silence_timeout=3, deadline=0.2)
    assert (info.value.limit, info.value.seconds) == ("deadline", 0.2)


async def test_a_read_timeout_below_the_silence_bound_is_named_as_the_timeout(server):
    with pytest.raises(EndpointTimeoutError) as info:
        await _chat(server, Reply(stream=[chunk("a")], done=False, then="silence"), silence_timeout=3, timeout=0.2)
    assert (info.value.limit, info.value.seconds) == ("timeout", 0.2)


@pytest.mark.parametrize("where", ["after data", "before data"])
async def test_the_callers_cancellation_during_a_read_propagates_unchanged(server, where):
    stream: list[Any] = [chunk("a")] if where == "after data" else [": ping\n\n"]
    server.push(Reply(stream=stream, done=False, then="silence"))
    m = make_model(server, stream=True, max_retries=0, silence_timeout=3)
    with anyio.fail_after(5):
        with anyio.move_on_after(0.2) as scope:
            await m.endpoint.chat(MESSAGES)
            pytest.fail("the caller's scope ended the read")
    assert scope.cancelled_caught
    await m.aclose()
    await anyio.sleep(0)  # no cancellation left pending on this task


@pytest.mark.parametrize("outer", ["caller", "deadline"])
async def test_an_outer_bound_that_runs_out_with_the_silence_bound_wins(server, outer):
    """The event loop is held until the silence bound and an outer one (the
    caller's scope, the call's deadline) have both passed: the outer one ends
    the call, never turned into the silence error."""
    server.push(Reply(stream=[chunk("a")], done=False, then="silence", hang_s=5))
    m = make_model(server, stream=True, max_retries=0, silence_timeout=0.15,
                   **({"deadline": 0.1} if outer == "deadline" else {}))

    async def hold_the_loop() -> None:
        await anyio.sleep(0.05)
        time.sleep(0.3)  # noqa: ASYNC251 - holds the loop on purpose, past both bounds

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_the_loop)
            with anyio.move_on_after(0.1 if outer == "caller" else 5) as scope:
                if outer == "caller":
                    await m.endpoint.chat(MESSAGES)
                else:
                    with pytest.raises(EndpointTimeoutError) as info:
                        await m.endpoint.chat(MESSAGES)
                    assert info.value.limit == "deadline"
    assert scope.cancelled_caught is (outer == "caller")
    await m.aclose()


class Dropping:
    """A loopback server that answers a POST with a chunked event stream,
    sends ``head`` (bytes of the body, maybe part of one event, maybe part of
    one chunk) and then closes the connection."""

    def __init__(self, head: bytes, *, in_chunk: bool) -> None:
        self.head, self.in_chunk = head, in_chunk
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            size = len(self.head) + (40 if self.in_chunk else 0)  # a chunk announced longer than sent
            conn.sendall(f"{size:x}\r\n".encode() + self.head + (b"" if self.in_chunk else b"\r\n"))

    def __enter__(self) -> Dropping:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sock.close()


@pytest.mark.parametrize("in_chunk", [False, True], ids=["between chunks", "inside a chunk"])
async def test_a_connection_dropped_inside_an_event_is_a_typed_error(in_chunk):
    head = b'data: {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "del'
    with Dropping(head, in_chunk=in_chunk) as peer:
        m = iModel(provider="openai", model="m", base_url=peer.base_url, api_key="k", stream=True, max_retries=0,
                   silence_timeout=3)
        with anyio.fail_after(5), pytest.raises(EndpointError):
            await m.endpoint.chat(MESSAGES)
        await m.aclose()


# ---------------------------------------------------------------- native protocols


def _held(protocol: str, peer: Paced, silence_timeout: float) -> iModel:
    model = {"anthropic": "claude-peer", "google": "gemini-peer", "openai_responses": "gpt-peer"}[protocol]
    return iModel(provider=protocol, model=model, base_url=peer.base_url, api_key="k", stream=True, max_retries=0,
                  silence_timeout=silence_timeout)


def _native_parts(protocol: str) -> bytes:
    turn = Turn(text="partial")
    if protocol == "anthropic":
        return sse(anthropic_events(turn, cut=True)[:1])
    if protocol == "openai_responses":
        return sse(responses_events(turn)[:1])
    return b": only a comment\n\n"


@pytest.mark.parametrize("protocol", ["anthropic", "google", "openai_responses"])
async def test_a_native_stream_that_stalls_ends_at_silence_timeout_named_in_the_error(protocol):
    with Paced([_native_parts(protocol), b": late\n\n"], 30) as peer:  # then held open
        with anyio.fail_after(5), pytest.raises(EndpointTimeoutError, match="silence_timeout") as info:
            await Branch(chat_model=_held(protocol, peer, 0.2)).operate(instruction="x")
        assert (info.value.limit, info.value.seconds) == ("silence_timeout", 0.2)


def _whole(protocol: str) -> bytes:
    turn = Turn(text="whole")
    if protocol == "anthropic":
        return sse(anthropic_events(turn))
    if protocol == "openai_responses":
        return sse(responses_events(turn))
    return sse([(None, c) for c in google_chunks(turn)])


@pytest.mark.parametrize("line_break", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("protocol", ["anthropic", "google", "openai_responses"])
async def test_a_whole_native_answer_then_a_held_connection_returns_the_answer(protocol, line_break):
    """Whatever its line breaks: a last CR is a line break at once (a LF after
    it, in the next read, is its second half and no line of its own)."""
    with Paced([_whole(protocol).replace(b"\n", line_break), b": late\n\n"], 30) as peer:  # then held open
        with anyio.fail_after(5):  # far below silence_timeout: the answer's end, not the silence bound, ends the read
            assert await Branch(chat_model=_held(protocol, peer, 30)).operate(instruction="x") == "whole"


async def test_messages_pings_after_a_partial_answer_end_at_the_deadline_not_the_silence_bound():
    """A Messages ``ping`` event carries data: it resets ``silence_timeout``
    (the provider sends it while the model works), so a stream of nothing but
    pings ends at the call's ``deadline``, named in the error."""
    ping = sse([("ping", {"type": "ping"})])
    with Paced([_native_parts("anthropic")] + [ping] * 200, 0.05) as peer:
        model = iModel(provider="anthropic", model="claude-peer", base_url=peer.base_url, api_key="k", stream=True,
                       max_retries=0, silence_timeout=0.2, deadline=0.6)
        with anyio.fail_after(5), pytest.raises(EndpointTimeoutError, match="deadline") as info:
            await Branch(chat_model=model).operate(instruction="x")
    assert (info.value.limit, info.value.seconds) == ("deadline", 0.6)
