"""A stream is read under one cancel scope whose deadline moves: the cases where
the move must not happen, or must not outlast a bound.

- data events that come more slowly than ``silence_timeout`` in all, each within
  it, are read to the end (the deadline moves after each one);
- keep-alive comments after a data event do not move it: the call ends at
  ``silence_timeout``;
- data events after the answer's end (Chat Completions' ``[DONE]``, Gemini's
  finish reason) do not hold the call past ``stream_end_grace``.

Chat Completions runs on ``tests.openai_server``; the native protocols on a
loopback server that sends each part of the body after its own pause.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from lionops import Branch, iModel
from lionops.errors import EndpointTimeoutError
from lionops.testing.native import Turn, anthropic_events, google_chunks, sse
from lionops.testing.openai_server import Reply
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": content} if content is not None else {}
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class Paced:
    """A loopback server answering every POST with ``parts`` (bytes, each sent
    ``pause_s`` after the one before) as one chunked event stream."""

    def __init__(self, parts: list[bytes], pause_s: float) -> None:
        self.parts, self.pause_s, self.stop = parts, pause_s, threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for i, part in enumerate(owner.parts):
                        if i and owner.stop.wait(owner.pause_s):
                            break
                        self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the client stopped reading
                    pass
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)  # a quick shutdown

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Paced:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _native(protocol: str, peer: Paced, **kw: Any) -> iModel:
    model = {"anthropic": "claude-peer", "google": "gemini-peer"}[protocol]
    return iModel(provider=protocol, model=model, base_url=peer.base_url, api_key="k", stream=True,
                  max_retries=0, **kw)


# ---------------------------------------------------------------- Chat Completions


async def test_data_events_each_within_the_silence_bound_are_read_past_its_first_deadline(server):
    words = ["a", "b", "c", "d", "e", "f"]
    server.push(Reply(stream=[chunk(w) for w in words] + [chunk(finish="stop")], pause_s=0.1))
    m = make_model(server, stream=True, silence_timeout=0.35, max_retries=0)
    # six pauses of 0.1 s: the stream outlasts one silence_timeout, so it is read whole only if the deadline moves
    assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "abcdef"
    await m.aclose()


async def test_data_events_after_done_do_not_hold_the_call(server):
    trailing = [f"data: {json.dumps(chunk('late'))}\n\n"] * 200  # ten seconds of data events
    server.push(Reply(stream=[chunk("on time", finish="stop"), "data: [DONE]\n\n", *trailing], done=False,
                      pause_s=0.05))
    m = make_model(server, stream=True, max_retries=0)
    with anyio.fail_after(5):  # a hang guard: the reader stops at stream_end_grace, not at the body's end
        assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "on time"
    await m.aclose()


# ---------------------------------------------------------------- native protocols


async def test_comments_after_a_data_event_do_not_move_the_silence_deadline():
    events = anthropic_events(Turn(text="partial"), cut=True)
    parts = [sse(events[:1])] + [b": keep-alive\n\n"] * 200  # message_start, then ten seconds of comments
    with Paced(parts, 0.05) as peer:
        with anyio.fail_after(5), pytest.raises(EndpointTimeoutError, match="silence_timeout"):
            await Branch(chat_model=_native("anthropic", peer, silence_timeout=0.3)).operate(instruction="x")


async def test_data_events_after_a_gemini_finish_reason_do_not_hold_the_call():
    chunks = google_chunks(Turn(text="settled"))
    late = {"candidates": [{"content": {"role": "model", "parts": []}, "index": 0}], "usageMetadata": {}}
    parts = [sse([(None, c) for c in chunks])] + [sse([(None, late)])] * 200  # ten seconds of data events
    with Paced(parts, 0.05) as peer:
        with anyio.fail_after(5):  # a hang guard: the reader stops at stream_end_grace
            assert await Branch(chat_model=_native("google", peer)).operate(instruction="x") == "settled"


async def test_a_native_stream_paced_slower_than_the_silence_bound_in_all_is_read_whole():
    events = anthropic_events(Turn(text="slow but steady"))
    with Paced([sse([e]) for e in events], 0.06) as peer:
        # each event within 0.3 s of the one before; the whole stream takes longer than that
        assert await Branch(chat_model=_native("anthropic", peer, silence_timeout=0.3)).operate(
            instruction="x") == "slow but steady"
