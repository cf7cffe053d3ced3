"""A loopback Anthropic Messages API peer for testing real CLI agents.

``MessagesPeer(reply)`` serves ``POST /v1/messages`` on 127.0.0.1 (a free
port) in a background thread. ``reply(request_json)`` returns the content
blocks of the assistant message (``[{"type": "text", "text": ...}]`` or
``[{"type": "tool_use", "id", "name", "input"}]``); the peer answers as a
complete message, or as server-sent events when the request asks for
``"stream": true``. ``reply`` may instead return ``{"blocks": [...],
"stop_reason": "max_tokens"}`` (another stop reason) or ``{"status": 400,
"message": "..."}`` (an API error). Every request body is kept in
``requests``. Anything else gets a 404 with an API-shaped error. It never
reaches beyond loopback.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from .loopback_peer import Answer, LoopbackPeer, sse

Reply = Callable[[dict[str, Any]], Any]

USAGE_IN, USAGE_OUT = 321, 17


def _stop(blocks: list[dict[str, Any]], stop: str | None) -> str:
    return stop or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")


_ids = itertools.count(1)


def _sse(blocks: list[dict[str, Any]], model: str, stop: str | None = None) -> bytes:
    """The Messages API event stream of one assistant message made of ``blocks``."""
    events: list[tuple[str | None, dict[str, Any]]] = [("message_start", {
        "type": "message_start",
        "message": {"id": f"msg_peer_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
                    "content": [],
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
    stop = _stop(blocks, stop)
    events += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": USAGE_OUT}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse(events)


def _message(blocks: list[dict[str, Any]], model: str, stop: str | None = None) -> bytes:
    stop = _stop(blocks, stop)
    return json.dumps({
        "id": f"msg_peer_{next(_ids)}", "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT},
    }).encode()


class MessagesPeer(LoopbackPeer):
    """Start with ``with MessagesPeer(reply) as peer:``; ``peer.base_url`` is its address."""

    def __init__(self, reply: Reply) -> None:
        super().__init__()
        self.reply = reply

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        if not path.split("?")[0].endswith("/v1/messages"):
            return None
        answer = self.reply(request)
        stop = None
        if isinstance(answer, dict) and "status" in answer:
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": answer["message"]}}
            return Answer(answer["status"], json.dumps(body).encode())
        if isinstance(answer, dict):
            answer, stop = answer["blocks"], answer.get("stop_reason")
        model = str(request.get("model") or "claude-peer")
        if request.get("stream"):
            return Answer(200, _sse(answer, model, stop), "text/event-stream")
        return Answer(200, _message(answer, model, stop))


def last_turn_has_tool_result(request: dict[str, Any]) -> bool:
    """True when the request's last message carries a ``tool_result`` block."""
    messages = request.get("messages") or []
    content = messages[-1].get("content") if messages else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
