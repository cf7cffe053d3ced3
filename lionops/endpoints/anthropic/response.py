"""An Anthropic Messages answer as a normalized completion. Pure: no IO.

``text`` blocks make the text; ``tool_use`` blocks become Chat Completions
tool calls (``input`` as JSON ``arguments``, ``id`` kept); the tool that
carries a structured answer (:data:`.request.ANSWER_TOOL`) becomes the text.
``thinking`` blocks are the reasoning, never the answer; every block is kept
as the turn's ``native`` content (signatures included) to be sent back.

``stop_reason``: ``end_turn`` / ``stop_sequence`` -> ``stop``, ``tool_use``
-> ``tool_calls``, ``max_tokens`` / ``model_context_window_exceeded`` ->
``length`` (a cut answer), ``refusal`` -> ``content_filter`` with the refusal;
none, or one not named here, is passed on as it is, so the answer is never
taken for a whole one.

Usage: ``input_tokens`` leaves cache reads and writes out; ``prompt_tokens``
is their sum, as the Chat Completions convention counts it.
"""

from __future__ import annotations

import json
from typing import Any

from ...usage import Usage
from .._native import NativeAnswers, count, usage_record
from .request import ANSWER_TOOL

__all__ = ["normalize", "usage_of", "FINISH"]

FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
          "model_context_window_exceeded": "length", "refusal": "content_filter", "pause_turn": "length"}


def usage_of(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, dict) else {}
    fresh, read, write = (count(usage.get(k)) for k in (
        "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    total = None if fresh is None else fresh + (read or 0) + (write or 0)
    return usage_record(input_total=total, output=count(usage.get("output_tokens")), cache_read=read,
                        cache_write=write)


def normalize(data: dict[str, Any], answers: NativeAnswers) -> dict[str, Any]:
    """The :class:`~lionops.endpoints._native.NativeCompletion` fields of a ``message`` object.

    Raises:
        EndpointProviderError: the body is an ``error`` object.
        EndpointResponseError: the body is no message (no ``content`` list).
    """
    if data.get("type") == "error" or (isinstance(data.get("error"), dict) and "content" not in data):
        err = data.get("error")
        kind = err.get("type") if isinstance(err, dict) else None
        raise answers.provider_error(err, 200, "an error", retryable=kind in ("overloaded_error", "api_error"))
    content = data.get("content")
    if not isinstance(content, list):
        raise answers.response_error("a body that is no Messages answer (no content list)", 200,
                                     json.dumps(data)[:300])
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    answer: str | None = None
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise answers.response_error(f"a text block whose text is {type(block.get('text')).__name__}, not text",
                                             200, json.dumps(data)[:300])
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
        elif kind == "tool_use":
            name = block.get("name")
            arguments = block.get("input")
            text = block.get("_partial_json") if arguments is None else json.dumps(arguments)
            if isinstance(name, str) and name.startswith(ANSWER_TOOL + "_"):
                answer = text if isinstance(text, str) else "{}"
                continue
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": name, "arguments": text if isinstance(text, str) else "{}"}})
    stop = data.get("stop_reason")
    finish = FINISH.get(stop, stop) if isinstance(stop, str) else None
    if answer is not None and finish == "tool_calls" and not calls:
        finish = "stop"
    refusal = None
    if stop == "refusal":
        refusal = "".join(texts) or "the model declined to answer (stop_reason refusal)"
    return {
        "text": answer if answer is not None else ("".join(texts) if texts else None),
        "refusal": refusal,
        "tool_calls": calls,
        "finish_reason": finish,
        "usage": usage_of(data.get("usage")), "tokens": Usage.from_anthropic(data.get("usage")),
        "model": data.get("model"),
        "reasoning": "\n".join(thoughts) or None,
        "native": {"protocol": "anthropic", "content": [b for b in content if isinstance(b, dict)]},
        "stop_reason": stop,
    }
