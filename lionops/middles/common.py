"""What every Middle shares: rendering the user turn, recording messages,
finishing a turn (raw text under ``skip_validation``, else the inner parse).
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import Message, to_jsonable
from ..parse import extract_json
from ..tools import ToolSchema
from ..trace import annotate
from .parsing import parse_response
from .shaping import per_request_model, request_model_of, request_schema

__all__ = [
    "request_schema", "schema_prompt", "render_instruction", "begin_turn",
    "record_assistant", "finish_turn", "request_model_of", "per_request_model", "tools_json",
]

_SCHEMA_PROMPT = "Answer with one JSON object only, matching this JSON schema:\n"


def render_instruction(instruction: Any, chat_param: Any, *, schema_in_prompt: bool,
                       tools_in_prompt: bool | None = None) -> str:
    """The user turn as text: instruction, guidance, context; with
    ``tools_in_prompt`` (default: ``schema_in_prompt``) the tool schemas, and
    with ``schema_in_prompt`` the response JSON schema."""
    parts: list[str] = []
    if instruction is not None:
        parts.append(instruction if isinstance(instruction, str) else json.dumps(to_jsonable(instruction)))
    if chat_param is not None and chat_param.guidance is not None:
        guidance = chat_param.guidance
        parts.append(f"Guidance: {guidance if isinstance(guidance, str) else json.dumps(to_jsonable(guidance))}")
    if chat_param is not None and chat_param.context is not None:
        parts.append(f"Context: {json.dumps(to_jsonable(chat_param.context))}")
    if (schema_in_prompt if tools_in_prompt is None else tools_in_prompt) and chat_param is not None:
        if chat_param.tool_schemas:
            parts.append(
                "Tools you may request in action_requests (you never run them; "
                "the runtime does):\n" + tools_json(chat_param.tool_schemas)
            )
    if schema_in_prompt and chat_param is not None:
        prompt = schema_prompt(chat_param.response_format)
        if prompt is not None:
            parts.append(prompt)
    return "\n\n".join(parts)


def tools_json(schemas: list[Any]) -> str:
    """``json.dumps(schemas)``, from the text each offered schema carries."""
    return "[" + ", ".join(s.json if isinstance(s, ToolSchema) else json.dumps(s) for s in schemas) + "]"


def schema_prompt(response_format: Any) -> str | None:
    """The prompt text asking for one JSON object matching the request schema,
    or ``None`` when ``response_format`` has no schema."""
    model = request_model_of(response_format)
    if model is not None:
        return per_request_model(model, "prompt",  # type: ignore[no-any-return]
                                 lambda m: _SCHEMA_PROMPT + json.dumps(request_schema(m)))
    schema = request_schema(response_format)
    if schema is None:
        return None
    return _SCHEMA_PROMPT + json.dumps(schema)


def begin_turn(branch: Any, instruction: Any, chat_param: Any, clear_messages: bool,
               *, schema_in_prompt: bool, tools_in_prompt: bool | None = None) -> Message:
    """Clear messages when asked, then record the user instruction."""
    if clear_messages:
        branch.clear_messages()
    content = render_instruction(instruction, chat_param, schema_in_prompt=schema_in_prompt,
                                 tools_in_prompt=tools_in_prompt)
    message: Message = branch.messages.add(
        "user", content,
        sender=getattr(chat_param, "sender", None), recipient=getattr(chat_param, "recipient", None),
    )
    return message


def record_assistant(branch: Any, text: str | None, metadata: dict[str, Any] | None = None) -> Message:
    """Record the assistant response (``metadata``: usage, latency, tool calls, ...)."""
    message: Message = branch.messages.add("assistant", text, sender=None, recipient=branch.id,
                                           metadata=dict(metadata or {}))
    return message


async def finish_turn(branch: Any, text: str | None, parse_param: Any, skip_validation: bool,
                      *, metadata: dict[str, Any] | None = None,
                      action_requests: list[Any] | None = None) -> Any:
    """Record the assistant text; return it raw under ``skip_validation``,
    else the inner parse of it (never raises on a bad value).

    ``action_requests``: native tool calls (``ActionRequestModel``) the
    parse merges into the result's ``action_requests``.
    """
    record_assistant(branch, text, metadata)
    if skip_validation:
        return text
    _note_answer_requests(text, parse_param)
    return await parse_response(text, parse_param, branch=branch, action_requests=action_requests)


def _note_answer_requests(text: str | None, parse_param: Any) -> None:
    """Put on the trace (``answer_action_requests``) how many ``action_requests``
    the answer's JSON holds when the result cannot carry them (no format, or a
    format without that field: actions are off), so the exit ``no_action_param``
    can say that tool requests were present and none ran (ADR-0022 D4)."""
    if not text or "action_requests" not in text:
        return
    fmt = getattr(parse_param, "response_format", None)
    if "action_requests" in (getattr(fmt, "model_fields", None) or {}):
        return  # the result carries them: the trace counts them from it
    data = extract_json(text)
    requests = data.get("action_requests") if isinstance(data, dict) else None
    if isinstance(requests, list) and requests:
        annotate(answer_action_requests=len(requests))
