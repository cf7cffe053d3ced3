"""A loopback Anthropic Messages API peer for testing real CLI agents.

``MessagesPeer(reply)`` serves ``POST /v1/messages`` on 127.0.0.1 (a free
port) in a background thread. ``reply(request_json)`` returns the content
blocks of the assistant message (``[{"type": "text", "text": ...}]`` or
``[{"type": "tool_use", "id", "name", "input"}]``); the peer answers as a
complete message, or as server-sent events when the request asks for
``"stream": true``. Every request body is kept in ``requests``. Anything
else gets a 404 with an API-shaped error. It never reaches beyond loopback.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], list[dict[str, Any]]]

USAGE_IN, USAGE_OUT = 321, 17


def _sse(blocks: list[dict[str, Any]], model: str) -> bytes:
    """The Messages API event stream of one assistant message made of ``blocks``."""
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {
        "type": "message_start",
        "message": {"id": "msg_peer", "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": 1}},
    })]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    events += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": USAGE_OUT}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _message(blocks: list[dict[str, Any]], model: str) -> bytes:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return json.dumps({
        "id": "msg_peer", "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT},
    }).encode()


class MessagesPeer:
    """Start with ``with MessagesPeer(reply) as peer:``; ``peer.base_url`` is its address."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                peer.paths.append(self.path)
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    self._not_found()
                    return
                request = json.loads(raw or b"{}")
                peer.requests.append(request)
                blocks = peer.reply(request)
                model = str(request.get("model") or "claude-peer")
                if request.get("stream"):
                    self._send(200, _sse(blocks, model), "text/event-stream")
                else:
                    self._send(200, _message(blocks, model), "application/json")

            def _not_found(self) -> None:
                body = json.dumps({"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                self._send(404, body.encode(), "application/json")

            def do_GET(self) -> None:  # noqa: N802
                peer.paths.append(self.path)
                self._not_found()

            do_HEAD = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> MessagesPeer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def last_turn_has_tool_result(request: dict[str, Any]) -> bool:
    """True when the request's last message carries a ``tool_result`` block."""
    messages = request.get("messages") or []
    content = messages[-1].get("content") if messages else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
