"""The loopback OpenAI-compatible peer of the end-to-end scenarios (H1–H4).

    python bench/peer.py [--port 0]      # prints "port N" when listening

One asyncio process (standard library only) on 127.0.0.1, HTTP/1.1 with
keep-alive, answering ``POST /<scenario>/v1/chat/completions`` at once with a
canned body prepared at start-up, so the time a client spends is its own
work. It runs in its own process: the client's CPU time never includes it.

What it answers depends on the scenario in the path and on the request:

- ``h1``: the structured answer (:data:`common.ANSWER`) as the message content.
- ``h2``: the structured answer and the two tool calls of
  :data:`common.H2_CALLS`, in the shape the request asks for:
  - a request with ``tools`` gets them natively, as ``tool_calls`` (arguments as
    JSON text) beside the structured content;
  - a request without ``tools`` (tools described in the prompt) gets them
    inside the structured content, as ``action_requests``;
  - a request whose last message is a ``tool`` result (a client that sends the
    tool results back and asks again) gets the structured answer alone.
- ``"stream": true`` turns any of these into server-sent events, sent with
  chunked transfer encoding: the content in fragments, each tool call's
  ``arguments`` in fragments, the finish reason, a usage chunk, ``[DONE]``.

``GET /last/<scenario>`` returns the last request body of that scenario (the
smoke test compares what the systems send). Nothing else is served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import ANSWER, H2_CALLS, MODEL  # noqa: E402

USAGE = {"prompt_tokens": 52, "completion_tokens": 17, "total_tokens": 69}
#: fragments of the streamed content and of each tool call's arguments
FRAGMENTS = 6


def _tool_calls() -> list[dict[str, Any]]:
    return [{"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(H2_CALLS)]


def _in_body() -> dict[str, Any]:
    return {**ANSWER, "action_requests": [{"function": n, "arguments": a} for n, a in H2_CALLS]}


def _message(content: dict[str, Any], tool_calls: list[dict[str, Any]] | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": json.dumps(content), "refusal": None}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


def _completion(message: dict[str, Any]) -> bytes:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1767225600, "model": MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": USAGE,
    }).encode()


def _pieces(text: str, n: int = FRAGMENTS) -> list[str]:
    step = max(1, -(-len(text) // n))
    return [text[i:i + step] for i in range(0, len(text), step)] or [""]


def _sse(message: dict[str, Any]) -> bytes:
    """The message as chat.completion.chunk events, each its own HTTP chunk."""

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict[str, Any]:
        return {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
                "model": MODEL, "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
                "usage": usage}

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(message["content"])]
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                   for piece in _pieces(call["function"]["arguments"])]
    events.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    events.append(chunk({}, usage=USAGE))
    lines = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
    return b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines) + b"0\r\n\r\n"


def _response(body: bytes, stream: bool) -> bytes:
    if stream:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        return head + body
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)) + body


def canned() -> dict[tuple[str, str, bool], bytes]:
    """(scenario, shape, stream) -> the whole HTTP response, built once."""
    answer = _message(ANSWER, None)
    messages = {
        ("h1", "plain"): answer,
        ("h2", "native"): _message(ANSWER, _tool_calls()),
        ("h2", "in_body"): _message(_in_body(), None),
        ("h2", "after_tools"): answer,
    }
    out = {}
    for (scenario, shape), message in messages.items():
        out[scenario, shape, False] = _response(_completion(message), False)
        out[scenario, shape, True] = _response(_sse(message), True)
    return out


def shape_of(scenario: str, request: dict[str, Any]) -> str:
    if scenario != "h2":
        return "plain"
    messages = request.get("messages") or [{}]
    if messages[-1].get("role") == "tool":
        return "after_tools"
    return "native" if request.get("tools") else "in_body"


class PeerProtocol(asyncio.Protocol):
    """One keep-alive connection: requests are answered in arrival order."""

    replies = canned()
    last: dict[str, bytes] = {}

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            self.transport.write(self.answer(head.split(" ", 2), body))

    def answer(self, request_line: list[str], body: bytes) -> bytes:
        method, path = request_line[0], request_line[1] if len(request_line) > 1 else ""
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 2 and parts[0] == "last":
            return _response(self.last.get(parts[1], b"null"), False)
        if method != "POST" or len(parts) != 4 or parts[1:] != ["v1", "chat", "completions"] or \
                parts[0] not in ("h1", "h2"):
            return b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
        self.last[parts[0]] = body
        request = json.loads(body)
        return self.replies[parts[0], shape_of(parts[0], request), bool(request.get("stream"))]


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(PeerProtocol, "127.0.0.1", port, backlog=4096)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


class Peer:
    """The peer as a child process: ``with Peer() as peer: peer.base_url("h2")``;
    ``script``: another peer script that prints ``port N`` when listening."""

    def __init__(self, script: Path | None = None) -> None:
        self.script = script or Path(__file__).resolve()
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0

    def __enter__(self) -> Peer:
        self.proc = subprocess.Popen([sys.executable, str(self.script)], stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("port "):
            self.proc.kill()
            raise RuntimeError(f"the bench peer did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
