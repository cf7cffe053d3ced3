"""Recorded answers of the three native protocols, and a loopback peer that serves them.

The shapes follow each provider's documentation: the Anthropic Messages
``message`` object and its event stream (``message_start``, ``ping``,
``content_block_start`` / ``_delta`` / ``_stop`` with ``thinking_delta``,
``signature_delta``, ``text_delta`` and ``input_json_delta`` fragments,
``message_delta``, ``message_stop``, and the ``error`` event); the OpenAI
Responses ``response`` object and its events (``response.created``,
``response.output_item.added``, ``response.reasoning_summary_text.delta``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.output_item.done``, ``response.completed`` / ``.incomplete`` /
``.failed``); the Gemini ``GenerateContentResponse`` and its
``alt=sse`` chunks. A turn is described once (:class:`Turn`) and rendered
per protocol as a plain body or as a stream, so one scenario runs on all three.

:class:`ScriptPeer` answers each POST with the next scripted answer (a
callable gets the request) and keeps every path, header set and body.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .loopback_peer import Answer, LoopbackPeer, sse

PROTOCOLS = ("openai_responses", "anthropic", "google")

#: Usage of every recorded turn: input (cached part), output (reasoning part).
USAGE = {"input": 1200, "cached": 1000, "cache_write": 50, "output": 40, "reasoning": 8}


@dataclass
class Turn:
    """One assistant turn, protocol-neutral.

    ``thinking``: the reasoning text (sent with a signature / encrypted
    content / thought signature); ``text``: the answer text; ``calls``:
    ``(id, name, arguments)`` tool calls (parallel when several); ``end``:
    ``"done"``, ``"cut"`` (token limit), ``"refused"``.
    """

    text: str | None = None
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    thinking: str | None = None
    end: str = "done"


SIGNATURE = "EqQBCkgIARABGAIiQPeerSignatureOfTheThinkingBlock=="
ENCRYPTED = "gAAAAABpeerEncryptedReasoningContent=="
THOUGHT_SIGNATURE = base64.b64encode(b"a peer thought signature").decode()


def _fragments(text: str, n: int = 3) -> list[str]:
    size = max(1, len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# ------------------------------------------------------------------ Anthropic


def anthropic_content(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.thinking is not None:
        blocks.append({"type": "thinking", "thinking": turn.thinking, "signature": SIGNATURE})
    if turn.text is not None:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in turn.calls]
    return blocks


def _anthropic_stop(turn: Turn) -> str:
    if turn.end == "cut":
        return "max_tokens"
    if turn.end == "refused":
        return "refusal"
    return "tool_use" if turn.calls else "end_turn"


def _anthropic_usage() -> dict[str, Any]:
    return {"input_tokens": USAGE["input"] - USAGE["cached"] - USAGE["cache_write"],
            "cache_read_input_tokens": USAGE["cached"], "cache_creation_input_tokens": USAGE["cache_write"],
            "output_tokens": USAGE["output"]}


def anthropic_body(turn: Turn, model: str = "claude-peer") -> dict[str, Any]:
    return {"id": "msg_01peer", "type": "message", "role": "assistant", "model": model,
            "content": anthropic_content(turn), "stop_reason": _anthropic_stop(turn), "stop_sequence": None,
            "usage": _anthropic_usage()}


def anthropic_events(turn: Turn, model: str = "claude-peer", error: dict[str, Any] | None = None,
                     cut: bool = False) -> list[tuple[str | None, dict[str, Any]]]:
    usage = _anthropic_usage()
    events: list[tuple[str | None, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
        "id": "msg_01peer", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}),
        ("ping", {"type": "ping"})]
    for index, block in enumerate(anthropic_content(turn)):
        kind = block["type"]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": f} for f in _fragments(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": SIGNATURE})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": f} for f in _fragments(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": f} for f in _fragments(json.dumps(block["input"]))]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if error is not None:
            events.append(("error", {"type": "error", "error": error}))
            return events
    if cut:
        return events
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": _anthropic_stop(turn), "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


# ------------------------------------------------------------------ OpenAI Responses


def responses_output(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.thinking is not None:
        items.append({"type": "reasoning", "id": "rs_peer", "summary": [
            {"type": "summary_text", "text": turn.thinking}], "encrypted_content": ENCRYPTED})
    if turn.text is not None:
        part = ({"type": "refusal", "refusal": turn.text} if turn.end == "refused"
                else {"type": "output_text", "text": turn.text, "annotations": []})
        items.append({"type": "message", "id": "msg_peer", "status": "completed", "role": "assistant",
                      "content": [part]})
    items += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": n, "arguments": json.dumps(a),
               "status": "completed"} for i, n, a in turn.calls]
    return items


def _responses_usage() -> dict[str, Any]:
    return {"input_tokens": USAGE["input"], "input_tokens_details": {"cached_tokens": USAGE["cached"]},
            "output_tokens": USAGE["output"], "output_tokens_details": {"reasoning_tokens": USAGE["reasoning"]},
            "total_tokens": USAGE["input"] + USAGE["output"]}


def responses_body(turn: Turn, model: str = "gpt-peer", status: str | None = None,
                   error: dict[str, Any] | None = None) -> dict[str, Any]:
    status = status or ("incomplete" if turn.end == "cut" else "completed")
    body: dict[str, Any] = {"id": "resp_peer", "object": "response", "created_at": 1700000000, "status": status,
                            "model": model, "output": responses_output(turn), "usage": _responses_usage(),
                            "error": error, "incomplete_details": None, "parallel_tool_calls": True,
                            "tool_choice": "auto", "tools": []}
    if status == "incomplete":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    return body


def responses_events(turn: Turn, model: str = "gpt-peer", status: str | None = None,
                     error: dict[str, Any] | None = None, cut: bool = False,
                     error_event: dict[str, Any] | None = None) -> list[tuple[str | None, dict[str, Any]]]:
    final = responses_body(turn, model, status, error)
    head = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": head}),
        ("response.in_progress", {"type": "response.in_progress", "response": head})]
    for index, item in enumerate(final["output"]):
        kind = item["type"]
        start = {**item, "status": "in_progress"}
        if kind == "message":
            start["content"] = []
        elif kind == "function_call":
            start["arguments"] = ""
        elif kind == "reasoning":
            start["summary"] = []
        events.append(("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": index, "item": start}))
        if kind == "reasoning":
            events.append(("response.reasoning_summary_part.added", {
                "type": "response.reasoning_summary_part.added", "item_id": item["id"], "output_index": index,
                "summary_index": 0, "part": {"type": "summary_text", "text": ""}}))
            for f in _fragments(item["summary"][0]["text"]):
                events.append(("response.reasoning_summary_text.delta", {
                    "type": "response.reasoning_summary_text.delta", "item_id": item["id"], "output_index": index,
                    "summary_index": 0, "delta": f}))
        elif kind == "message":
            part = item["content"][0]
            empty = {**part, "refusal": ""} if part["type"] == "refusal" else {**part, "text": ""}
            events.append(("response.content_part.added", {
                "type": "response.content_part.added", "item_id": item["id"], "output_index": index,
                "content_index": 0, "part": empty}))
            name = "response.refusal.delta" if part["type"] == "refusal" else "response.output_text.delta"
            for f in _fragments(part.get("text") or part.get("refusal") or ""):
                events.append((name, {"type": name, "item_id": item["id"], "output_index": index,
                                      "content_index": 0, "delta": f}))
            events.append(("response.content_part.done", {
                "type": "response.content_part.done", "item_id": item["id"], "output_index": index,
                "content_index": 0, "part": part}))
        else:
            for f in _fragments(item["arguments"]):
                events.append(("response.function_call_arguments.delta", {
                    "type": "response.function_call_arguments.delta", "item_id": item["id"],
                    "output_index": index, "delta": f}))
            events.append(("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": index,
                "arguments": item["arguments"]}))
        events.append(("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": index, "item": item}))
    if error_event is not None:
        events.append(("error", {"type": "error", **error_event}))
        return events
    if cut:
        return events
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete",
                "failed": "response.failed"}[final["status"]]
    events.append((terminal, {"type": terminal, "response": final}))
    for n, (_, data) in enumerate(events):
        data["sequence_number"] = n
    return events


# ------------------------------------------------------------------ Gemini


def google_parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if turn.thinking is not None:
        parts.append({"text": turn.thinking, "thought": True})
    if turn.text is not None:
        parts.append({"text": turn.text})
    for n, (i, name, args) in enumerate(turn.calls):
        part: dict[str, Any] = {"functionCall": {"id": i, "name": name, "args": args}}
        if n == 0:
            part["thoughtSignature"] = THOUGHT_SIGNATURE
        parts.append(part)
    return parts


def _google_finish(turn: Turn) -> str:
    return {"cut": "MAX_TOKENS", "refused": "SAFETY"}.get(turn.end, "STOP")


def _google_usage() -> dict[str, Any]:
    return {"promptTokenCount": USAGE["input"], "cachedContentTokenCount": USAGE["cached"],
            "candidatesTokenCount": USAGE["output"] - USAGE["reasoning"], "thoughtsTokenCount": USAGE["reasoning"],
            "totalTokenCount": USAGE["input"] + USAGE["output"]}


def google_body(turn: Turn, model: str = "gemini-peer", finish: str | None = None) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": google_parts(turn)},
                            "finishReason": finish or _google_finish(turn), "index": 0}],
            "usageMetadata": _google_usage(), "modelVersion": model, "responseId": "peer-response"}


def google_chunks(turn: Turn, model: str = "gemini-peer", finish: str | None = None,
                  cut: bool = False) -> list[dict[str, Any]]:
    pieces: list[dict[str, Any]] = []
    for part in google_parts(turn):
        if "text" in part and "thoughtSignature" not in part:
            pieces += [{**part, "text": f} for f in _fragments(part["text"], 2)]
        else:
            pieces.append(part)
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}], "modelVersion": model,
               "responseId": "peer-response"} for p in pieces]
    if not cut:
        chunks[-1]["candidates"][0]["finishReason"] = finish or _google_finish(turn)
        chunks[-1]["usageMetadata"] = _google_usage()
    return chunks


# ------------------------------------------------------------------ rendering


def render(protocol: str, turn: Turn, *, stream: bool, **kw: Any) -> Answer:
    """``turn`` as ``protocol`` answers it, plain or streamed."""
    if protocol == "anthropic":
        if stream:
            return Answer(200, sse(anthropic_events(turn, **kw)), "text/event-stream")
        return Answer(200, json.dumps(anthropic_body(turn)).encode())
    if protocol == "openai_responses":
        if stream:
            return Answer(200, sse(responses_events(turn, **kw)), "text/event-stream")
        return Answer(200, json.dumps(responses_body(turn, **kw)).encode())
    if stream:
        return Answer(200, sse([(None, c) for c in google_chunks(turn, **kw)]), "text/event-stream")
    return Answer(200, json.dumps(google_body(turn, **kw)).encode())


def error_answer(protocol: str, status: int, kind: str, message: str,
                 headers: dict[str, str] | None = None) -> Answer:
    """An HTTP error as ``protocol`` sends it."""
    if protocol == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    elif protocol == "openai_responses":
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    else:
        body = {"error": {"code": status, "message": message, "status": kind}}
    return Answer(status, json.dumps(body).encode(), headers=headers)


Script = Answer | Callable[[dict[str, Any]], Answer]


class ScriptPeer(LoopbackPeer):
    """Answers each POST with the next of ``script`` (the last one repeats)."""

    def __init__(self, *script: Script) -> None:
        super().__init__()
        self.script = list(script)

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        with self._lock:
            step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return step(request) if callable(step) else step


def endpoint_options(protocol: str, peer: ScriptPeer, **kw: Any) -> dict[str, Any]:
    """``iModel`` keywords pointing ``protocol`` at ``peer``."""
    model = {"anthropic": "claude-peer", "openai_responses": "gpt-peer", "google": "gemini-peer"}[protocol]
    base = peer.base_url + ("/v1" if protocol == "openai_responses" else "")
    return {"provider": protocol, "model": model, "base_url": base, "api_key": SECRET_KEY, **kw}


#: The key every test endpoint sends; it must never appear in an error, log, span or recording.
SECRET_KEY = "sk-peer-SECRET-0123456789abcdef"
