"""A loopback OpenAI Responses API peer (server-sent events) for the real Codex CLI.

``ResponsesPeer(reply)`` serves ``POST {base}/responses`` on 127.0.0.1.
``reply(request_json)`` returns a :class:`Turn`: output items (``message``
with ``text`` and an optional ``phase``, or ``function_call`` with ``name``
and ``arguments``) and how the response ends: ``"completed"``,
``"incomplete"`` (``max_output_tokens``), ``"failed"`` (with ``error``), or
an HTTP ``status`` with an API-shaped error body. The events are the ones
the Responses API streams: ``response.created``,
``response.output_item.added``, ``response.output_text.delta``,
``response.output_item.done``, then ``response.completed`` /
``response.incomplete`` / ``response.failed``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .loopback_peer import Answer, LoopbackPeer, sse

USAGE = {"input_tokens": 1200, "cached": 1000, "output_tokens": 40, "reasoning": 8}


@dataclass
class Turn:
    items: list[dict[str, Any]] = field(default_factory=list)
    end: str = "completed"
    error: dict[str, Any] | None = None
    status: int = 200


Reply = Callable[[dict[str, Any]], Turn]


def message(text: str, phase: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "text": text}
    if phase is not None:
        item["phase"] = phase
    return item


def function_call(name: str, arguments: dict[str, Any], call_id: str = "call_peer_1") -> dict[str, Any]:
    return {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id}


def _full(item: dict[str, Any], index: int) -> dict[str, Any]:
    if item["type"] == "message":
        out = {"type": "message", "id": f"msg_{index}", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": item["text"], "annotations": []}]}
        if "phase" in item:
            out["phase"] = item["phase"]
        return out
    return {"type": "function_call", "id": f"fc_{index}", "status": "completed", "call_id": item["call_id"],
            "name": item["name"], "arguments": json.dumps(item["arguments"])}


def _events(turn: Turn, model: str) -> list[tuple[str | None, dict[str, Any]]]:
    rid = "resp_peer"
    base = {"id": rid, "object": "response", "model": model, "created_at": 0}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}),
    ]
    done: list[dict[str, Any]] = []
    for index, item in enumerate(turn.items):
        full = _full(item, index)
        start = {**full, "status": "in_progress"}
        if full["type"] == "message":
            start["content"] = []
        else:
            start["arguments"] = ""
        events.append(("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": index, "item": start}))
        if full["type"] == "message":
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": full["id"], "output_index": index,
                "content_index": 0, "delta": item["text"]}))
        events.append(("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": index, "item": full}))
        done.append(full)
    usage = {"input_tokens": USAGE["input_tokens"], "input_tokens_details": {"cached_tokens": USAGE["cached"]},
             "output_tokens": USAGE["output_tokens"],
             "output_tokens_details": {"reasoning_tokens": USAGE["reasoning"]},
             "total_tokens": USAGE["input_tokens"] + USAGE["output_tokens"]}
    final = {**base, "output": done, "usage": usage}
    if turn.end == "incomplete":
        events.append(("response.incomplete", {"type": "response.incomplete", "response": {
            **final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}))
    elif turn.end == "failed":
        events.append(("response.failed", {"type": "response.failed", "response": {
            **final, "status": "failed", "error": turn.error or {"code": "server_error", "message": "peer failed"}}}))
    else:
        events.append(("response.completed", {"type": "response.completed",
                                               "response": {**final, "status": "completed"}}))
    return events


class ResponsesPeer(LoopbackPeer):
    """``with ResponsesPeer(reply) as peer:``; point Codex at ``peer.base_url + "/v1"``."""

    def __init__(self, reply: Reply) -> None:
        super().__init__()
        self.reply = reply

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        if not path.split("?")[0].endswith("/responses"):
            return None
        turn = self.reply(request)
        if turn.status != 200:
            body = {"error": turn.error or {"message": "peer error", "type": "server_error"}}
            return Answer(turn.status, json.dumps(body).encode())
        return Answer(200, sse(_events(turn, str(request.get("model") or "peer-model"))), "text/event-stream")


def has_function_output(request: dict[str, Any]) -> bool:
    """True when the request's input carries a ``function_call_output`` item."""
    return any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in request.get("input") or [])
