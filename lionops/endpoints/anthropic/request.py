"""Anthropic Messages request bodies from Chat Completions-shaped messages. Pure: no IO.

- ``system`` messages become the top-level ``system`` text;
- user text and images become ``text`` / ``image`` blocks (a data URL as a
  ``base64`` source, any other URL as a ``url`` source);
- an assistant turn is sent back as the provider gave it when its
  ``native`` content is at hand (``thinking`` blocks with their
  ``signature``, ``redacted_thinking`` blocks, text), keeping only the
  ``tool_use`` blocks that are answered; otherwise text and ``tool_use``
  blocks are built from its ``tool_calls``;
- ``tool`` messages become ``tool_result`` blocks (``tool_use_id`` paired)
  at the head of the next user turn; consecutive turns of one role merge;
- ``tools`` become ``{"name", "description", "input_schema"}``; a
  ``json_schema`` response format becomes the documented tool-forcing idiom:
  one tool whose input schema is the answer's, chosen with ``tool_choice``
  (``{"type": "tool"}`` alone, ``{"type": "any"}`` beside other tools, left to
  the model when extended thinking is on, as the API requires).
"""

from __future__ import annotations

import json
from typing import Any

from .._native import cc_calls, data_url, json_schema_format, mapped_options, tool_specs

__all__ = ["ANSWER_TOOL", "DEFAULT_MAX_TOKENS", "API_VERSION", "messages_body"]

#: The ``anthropic-version`` header every request carries.
API_VERSION = "2023-06-01"
#: ``max_tokens`` is required by the Messages API; sent when the caller gives none.
DEFAULT_MAX_TOKENS = 4096
#: The name prefix of the tool that carries a structured answer.
ANSWER_TOOL = "lionops_answer"

#: Chat Completions option names -> Messages names.
_RENAMED = {"max_completion_tokens": "max_tokens", "stop": "stop_sequences"}
#: Chat Completions options the Messages API has no place for.
_DROPPED = frozenset({"stream_options", "n", "parallel_tool_calls", "response_format", "tools", "tool_choice"})


def _image(part: dict[str, Any]) -> dict[str, Any]:
    url = str((part.get("image_url") or {}).get("url") or "")
    inline = data_url(url)
    if inline is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        blocks = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                blocks.append(_image(part))
            elif isinstance(part, dict):
                blocks.append({"type": "text", "text": str(part.get("text") or "")})
        return blocks
    return [{"type": "text", "text": "" if content is None else str(content)}]


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = cc_calls(message)
    answered = {call_id for call_id, _, _ in calls}
    native = message.get("native")
    if isinstance(native, dict) and native.get("protocol") == "anthropic" and isinstance(native.get("content"), list):
        by_id: dict[Any, dict[str, Any]] = {i: {"type": "tool_use", "id": i, "name": n, "input": a}
                                            for i, n, a in calls}
        kept: list[dict[str, Any]] = []
        sent: set[Any] = set()
        for b in native["content"]:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                if b.get("id") not in answered or b.get("id") in sent:
                    continue  # unanswered, or a repeated id (its result goes back as text)
                sent.add(b.get("id"))
                b = by_id[b.get("id")]
            kept.append(b)
        kept += [block for i, block in by_id.items() if i not in sent]
        if kept:
            return kept
    blocks: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        blocks.append({"type": "text", "text": text})
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return blocks or [{"type": "text", "text": ""}]


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    return {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
            "content": content if isinstance(content, str) else json.dumps(content)}


def messages_of(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system text, Messages turns)`` of Chat Completions messages."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            content = message.get("content")
            system.append(content if isinstance(content, str) else json.dumps(content))
            continue
        if role == "assistant":
            blocks, role = _assistant_blocks(message), "assistant"
        elif role == "tool":
            blocks, role = [_tool_result(message)], "user"
        else:
            blocks, role = _user_blocks(message.get("content")), "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), turns


def answer_tool_name(name: str) -> str:
    return f"{ANSWER_TOOL}_{name}"[:64]


def messages_body(model: str, messages: list[dict[str, Any]], options: dict[str, Any], *,
                  stream: bool) -> dict[str, Any]:
    """The ``POST /v1/messages`` body (see the module docstring)."""
    system, turns = messages_of(messages)
    body: dict[str, Any] = {"model": model, **mapped_options(options, _DROPPED, _RENAMED)}
    body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    if system is not None:
        given = body.get("system")
        body["system"] = system if not given else (
            [{"type": "text", "text": system}, *given] if isinstance(given, list) else f"{system}\n\n{given}")
    tools = [{"name": n, "description": d or "", "input_schema": p} for n, d, p in tool_specs(options.get("tools"))]
    tools += [t for t in options.get("tools") or () if isinstance(t, dict) and "function" not in t]  # server tools
    answer = json_schema_format(options.get("response_format"))
    if answer is not None:
        name, schema, _ = answer
        tools.append({"name": answer_tool_name(name),
                      "description": "Give the final answer as this tool's input (the answer's JSON schema).",
                      "input_schema": schema})
        if "thinking" in body and (body["thinking"] or {}).get("type") == "enabled":
            body.setdefault("tool_choice", {"type": "auto"})
        elif len(tools) == 1:
            body.setdefault("tool_choice", {"type": "tool", "name": tools[0]["name"]})
        else:
            body.setdefault("tool_choice", {"type": "any"})
    elif options.get("tool_choice") in ("required",):
        body["tool_choice"] = {"type": "any"}
    if tools:
        body["tools"] = tools
    if stream:
        body["stream"] = True
    body["messages"] = turns
    return body
