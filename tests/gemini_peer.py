"""A loopback Gemini API peer (server-sent events) for the real Gemini CLI.

``GeminiPeer(reply)`` serves ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``
(and ``:generateContent``) on 127.0.0.1; the key arrives in ``x-goog-api-key``.
``reply(request_json)`` returns a :class:`Turn`: ``parts`` (``{"text": ...}``
or ``{"functionCall": {"name", "args"}}``), sent one chunk per part, the
``finish`` reason of the last chunk (``"STOP"``, ``"MAX_TOKENS"``, ...),
``cut_stream`` to end the stream with no finish reason at all, or an HTTP
``status`` with an API-shaped error body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .loopback_peer import Answer, LoopbackPeer, sse

USAGE = {"promptTokenCount": 900, "candidatesTokenCount": 30, "totalTokenCount": 930, "cachedContentTokenCount": 600}


@dataclass
class Turn:
    parts: list[dict[str, Any]] = field(default_factory=list)
    finish: str | None = "STOP"
    cut_stream: bool = False
    status: int = 200
    error: str = "peer error"


Reply = Callable[[dict[str, Any]], Turn]


def text(value: str) -> dict[str, Any]:
    return {"text": value}


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}}


def _chunks(turn: Turn, model: str) -> list[dict[str, Any]]:
    chunks = []
    for index, part in enumerate(turn.parts):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        last = index == len(turn.parts) - 1
        if last and turn.finish and not turn.cut_stream:
            candidate["finishReason"] = turn.finish
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": "peer"}
        if last and not turn.cut_stream:
            chunk["usageMetadata"] = dict(USAGE)
        chunks.append(chunk)
    return chunks


class GeminiPeer(LoopbackPeer):
    """``with GeminiPeer(reply) as peer:``; point the CLI at ``peer.base_url``."""

    def __init__(self, reply: Reply) -> None:
        super().__init__()
        self.reply = reply

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        route = path.split("?")[0]
        if not route.startswith("/v1beta/models/") or ":" not in route:
            return None
        model, _, method = route[len("/v1beta/models/"):].partition(":")
        if method == "countTokens":
            return Answer(200, json.dumps({"totalTokens": 10}).encode())
        if method not in ("streamGenerateContent", "generateContent"):
            return None
        turn = self.reply(request)
        if turn.status != 200:
            body = {"error": {"code": turn.status, "message": turn.error, "status": "INVALID_ARGUMENT"}}
            return Answer(turn.status, json.dumps(body).encode())
        chunks = _chunks(turn, model)
        if method == "generateContent":
            merged = {**chunks[-1], "candidates": [{**chunks[-1]["candidates"][0], "content": {
                "role": "model", "parts": [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]}}]}
            return Answer(200, json.dumps(merged).encode())
        return Answer(200, sse([(None, c) for c in chunks]), "text/event-stream")


def has_function_response(request: dict[str, Any]) -> bool:
    """True when the request's last content carries a ``functionResponse`` part."""
    contents = request.get("contents") or []
    parts = contents[-1].get("parts") if contents else None
    return isinstance(parts, list) and any(isinstance(p, dict) and "functionResponse" in p for p in parts)
