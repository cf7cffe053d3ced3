"""A Gemini ``generateContent`` answer as a normalized completion. Pure: no IO.

The first candidate's ``text`` parts make the text; ``thought`` parts are
the reasoning, never the answer; ``functionCall`` parts become Chat
Completions tool calls (``args`` as JSON ``arguments``; the call's ``id``,
or one lionops gives it). Every part is kept as the turn's ``native``
content (``thoughtSignature`` included) to be sent back.

``finishReason``: ``STOP`` -> ``stop`` (``tool_calls`` with calls),
``MAX_TOKENS`` -> ``length`` (a cut answer); ``SAFETY``, ``RECITATION``,
``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, ``IMAGE_SAFETY`` and
``LANGUAGE`` -> ``content_filter`` with the reason as the refusal; a prompt
refused before any candidate (``promptFeedback.blockReason``) is a refusal
too. ``MALFORMED_FUNCTION_CALL``, ``UNEXPECTED_TOOL_CALL`` and ``OTHER`` are
typed :class:`~lionops.errors.EndpointProviderError`. No ``finishReason``, or
one not named here, is passed on as it is (``None`` or the reason), so the
answer is never taken for a whole one.

Usage: ``promptTokenCount`` counts cached input (``cachedContentTokenCount``);
``candidatesTokenCount`` leaves thoughts out (``thoughtsTokenCount``), so
``completion_tokens`` is their sum.
"""

from __future__ import annotations

import json
from typing import Any

from ...usage import Usage
from .._native import NativeAnswers, count, usage_record
from .request import SYNTHETIC_ID

__all__ = ["normalize", "usage_of", "REFUSED", "FAILED"]

REFUSED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"})
FAILED = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "OTHER", "TOO_MANY_TOOL_CALLS"})


def usage_of(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, dict) else {}
    candidates, thoughts = count(usage.get("candidatesTokenCount")), count(usage.get("thoughtsTokenCount"))
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return usage_record(input_total=count(usage.get("promptTokenCount")), output=output,
                        cache_read=count(usage.get("cachedContentTokenCount")), reasoning=thoughts)


def normalize(data: dict[str, Any], answers: NativeAnswers) -> dict[str, Any]:
    """The :class:`~lionops.endpoints._native.NativeCompletion` fields of a ``GenerateContentResponse``.

    Raises:
        EndpointProviderError: an ``error`` body, or a finish reason that is a failure.
        EndpointResponseError: no candidate and no block reason.
    """
    if isinstance(data.get("error"), dict):
        raise answers.provider_error(data["error"], 200, "an error")
    usage = usage_of(data.get("usageMetadata"))
    model = data.get("modelVersion")
    candidates = data.get("candidates")
    feedback: dict[str, Any] = data["promptFeedback"] if isinstance(data.get("promptFeedback"), dict) else {}
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        reason = feedback.get("blockReason")
        if reason:
            refusal_text = f"the prompt was blocked (promptFeedback.blockReason {reason})"
            message = feedback.get("blockReasonMessage")
            if isinstance(message, str) and message:
                refusal_text += f": {message}"
            return {"text": None, "refusal": refusal_text, "tool_calls": [], "finish_reason": "content_filter",
                    "usage": usage, "tokens": Usage.from_gemini(data.get("usageMetadata")), "model": model,
                    "reasoning": None, "native": None, "stop_reason": str(reason)}
        raise answers.response_error("a body that is no Gemini answer (no candidates)", 200, json.dumps(data)[:300])
    candidate = candidates[0]
    content: dict[str, Any] = candidate["content"] if isinstance(candidate.get("content"), dict) else {}
    parts = [p for p in content.get("parts") or () if isinstance(p, dict)]
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    ids: list[str] = []
    for part in parts:
        if isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else \
                f"{SYNTHETIC_ID}{len(ids)}"
            ids.append(call_id)
            args = call.get("args")
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": call.get("name"), "arguments": json.dumps(args if args is not None
                                                                                         else {})}})
        elif isinstance(part.get("text"), str):
            (thoughts if part.get("thought") else texts).append(part["text"])
        elif part.get("text") is not None and not part.get("thought"):
            raise answers.response_error(f"a text part whose text is {type(part['text']).__name__}, not text", 200,
                                         json.dumps(data)[:300])
    reason = candidate.get("finishReason")
    refusal: str | None = None
    if reason in FAILED:
        raise answers.provider_error({"message": str(candidate.get("finishMessage") or f"finishReason {reason}"),
                                      "code": reason}, 200, "a failed candidate")
    if reason == "MAX_TOKENS":
        finish: str | None = "length"
    elif reason in REFUSED:
        finish, refusal = "content_filter", f"the answer was stopped (finishReason {reason})"
    elif reason == "STOP":
        finish = "tool_calls" if calls else "stop"
    else:  # none, or one not known here: never taken for a whole answer
        finish = reason if isinstance(reason, str) and reason else None
    return {
        "text": "".join(texts) if texts else None,
        "refusal": refusal,
        "tool_calls": calls,
        "finish_reason": finish,
        "usage": usage, "tokens": Usage.from_gemini(data.get("usageMetadata")),
        "model": model,
        "reasoning": "\n".join(thoughts) or None,
        "native": {"protocol": "google", "content": parts, "ids": ids},
        "stop_reason": reason,
    }
