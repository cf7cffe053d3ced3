"""An OpenAI Responses answer as a normalized completion. Pure: no IO.

``message`` items' ``output_text`` parts make the text (``refusal`` parts
the refusal); ``function_call`` items become Chat Completions tool calls
(``call_id`` as the id, ``arguments`` as sent); ``reasoning`` items
(summaries, and ``encrypted_content`` when asked for with ``include``) are
the reasoning, never the answer; every output item goes back unchanged on the next turn.

``status``: ``completed`` -> ``stop`` (``tool_calls`` with calls);
``incomplete`` with ``max_output_tokens`` -> ``length`` (a cut answer),
with ``content_filter`` -> ``content_filter``; ``failed`` -> a typed
:class:`~lionops.errors.EndpointProviderError` with the response's ``error``;
no ``status`` -> no finish reason (never taken for a whole answer); any
other status is refused as no answer.

Usage: ``input_tokens`` counts cached input (``input_tokens_details.cached_tokens``),
``output_tokens`` counts reasoning (``output_tokens_details.reasoning_tokens``).
"""

from __future__ import annotations

import json
from typing import Any

from ...usage import Usage
from .._native import NativeAnswers, count, usage_record
from ..openai.response import NOT_TEXT_REFUSAL

__all__ = ["normalize", "usage_of"]


def usage_of(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, dict) else {}
    details_in = usage.get("input_tokens_details") if isinstance(usage.get("input_tokens_details"), dict) else {}
    details_out = usage.get("output_tokens_details") if isinstance(usage.get("output_tokens_details"), dict) else {}
    return usage_record(input_total=count(usage.get("input_tokens")), output=count(usage.get("output_tokens")),
                        cache_read=count(details_in.get("cached_tokens")),
                        reasoning=count(details_out.get("reasoning_tokens")))


def _reasoning_text(item: dict[str, Any]) -> list[str]:
    out = []
    for key in ("summary", "content"):
        for part in item.get(key) or ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def normalize(data: dict[str, Any], answers: NativeAnswers) -> dict[str, Any]:
    """The :class:`~lionops.endpoints._native.NativeCompletion` fields of a ``response`` object.

    Raises:
        EndpointProviderError: ``status`` ``failed``, or an ``error`` body.
        EndpointResponseError: no ``output`` list.
    """
    status = data.get("status")
    if status == "failed" or (isinstance(data.get("error"), dict) and "output" not in data):
        raise answers.provider_error(data.get("error") or {"message": "the response failed"}, 200,
                                     "a failed response")
    output = data.get("output")
    if not isinstance(output, list):
        raise answers.response_error("a body that is no Responses answer (no output list)", 200,
                                     json.dumps(data)[:300])
    texts: list[str] = []
    refusals: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text":
                    if not isinstance(part.get("text"), str):
                        raise answers.response_error(
                            f"an output_text part whose text is {type(part.get('text')).__name__}, not text", 200,
                            json.dumps(data)[:300])
                    texts.append(part["text"])
                elif part.get("type") == "refusal" and part.get("refusal"):
                    refusal = part["refusal"]
                    refusals.append(refusal if isinstance(refusal, str) else NOT_TEXT_REFUSAL)
        elif kind == "function_call":
            arguments = item.get("arguments")
            calls.append({"id": item.get("call_id") or item.get("id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": _arguments_text(arguments)}})
        elif kind == "reasoning":
            thoughts += _reasoning_text(item)
    finish: str | None = ("tool_calls" if calls else "stop") if status == "completed" else None
    reason = None
    if status == "incomplete":
        details = data.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        finish = "content_filter" if reason == "content_filter" else "length"
    elif status not in (None, "completed"):
        raise answers.response_error(f"a response whose status is {str(status)[:40]!r}, not an answer", 200,
                                     json.dumps(data)[:300])
    return {
        "text": "".join(texts) if texts else None,
        "refusal": "".join(refusals) or None,
        "tool_calls": calls,
        "finish_reason": finish,
        "usage": usage_of(data.get("usage")), "tokens": Usage.from_responses(data.get("usage")),
        "model": data.get("model"),
        "reasoning": "\n".join(thoughts) or None,
        "native": {"protocol": "openai_responses", "content": [i for i in output if isinstance(i, dict)]},
        "stop_reason": status if status != "incomplete" else f"incomplete:{reason}",
    }


def _arguments_text(arguments: Any) -> str:
    """A call's ``arguments`` as JSON text: text as sent; an object (a host
    that sends one) used whole, never replaced by ``{}``; none as ``{}``; any
    other value as its JSON, which the act phase refuses as no object."""
    if isinstance(arguments, str):
        return arguments
    return "{}" if arguments is None else json.dumps(arguments)
