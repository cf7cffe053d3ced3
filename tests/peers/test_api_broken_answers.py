"""An answer that started and then broke is a response error, not "cannot reach".

A raw socket server on loopback writes exact bytes: a ``Content-Length``
larger than the body, ``Content-Length: -1``, two conflicting
``Content-Length`` headers. The server answered, so the error is
:class:`~lionops.errors.EndpointResponseError` saying the answer was
malformed or broken off; a connection refused or closed before any answer
stays :class:`~lionops.errors.EndpointConnectionError`, retryable as before.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lionops import Branch, iModel
from lionops.errors import EndpointConnectionError, EndpointResponseError


@contextmanager
def raw_server(answer: bytes | None) -> Iterator[int]:
    """An asyncio socket server in its own thread that reads the request and
    writes ``answer`` (``None``: nothing) before closing; yields its port."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, object] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        writer.close()

    async def start() -> None:
        box["server"] = await asyncio.start_server(handle, "127.0.0.1", 0)
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert ready.wait(10)
    server = box["server"]
    try:
        yield server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    finally:
        loop.call_soon_threadsafe(server.close)  # type: ignore[attr-defined]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


BROKEN = {
    "Content-Length larger than the body":
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"choices\": []",
    "Content-Length -1": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n{}",
    "two conflicting Content-Length":
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "an event stream broken off":
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 900\r\n\r\n"
        b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"hi\"}}]}\n\n",
}


async def _operate(port: int) -> BaseException:
    m = iModel(provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=2)
    try:
        with pytest.raises((EndpointResponseError, EndpointConnectionError)) as info:
            await Branch(chat_model=m).operate(instruction="x")
    finally:
        await m.aclose()
    return info.value


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(BROKEN))
async def test_an_answer_that_started_and_broke_is_a_response_error(case: str) -> None:
    with raw_server(BROKEN[case]) as port:
        err = await _operate(port)
    assert type(err) is EndpointResponseError, err
    assert "malformed or broken off" in str(err) and "cannot reach" not in str(err)
    assert err.attempts == 1  # not retried, as any refused answer


@pytest.mark.anyio
async def test_a_connection_closed_before_any_answer_stays_a_connection_error() -> None:
    with raw_server(None) as port:
        err = await _operate(port)
    assert type(err) is EndpointConnectionError and "cannot reach" in str(err)
    assert not getattr(err, "retryable", False)


@pytest.mark.anyio
async def test_a_refused_connection_stays_a_retryable_connection_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = await _operate(port)
    assert type(err) is EndpointConnectionError and "cannot reach" in str(err)
    assert err.attempts == 3  # retried: a refusal is retryable
