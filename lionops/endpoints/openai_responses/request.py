"""OpenAI Responses request bodies from Chat Completions-shaped messages. Pure: no IO.

- ``system`` / ``developer`` messages become ``instructions``;
- user text and images become ``input_text`` / ``input_image`` parts;
- an assistant turn goes back as the output items the API gave
  (``reasoning`` items with their ``encrypted_content``, ``message`` items,
  built-in tool calls) when its ``native`` content is at hand, keeping only
  the answered ``function_call`` items; otherwise as an ``assistant``
  message plus one ``function_call`` item per answered call;
- ``tool`` messages become ``function_call_output`` items (``call_id`` paired);
- ``tools`` become flat ``{"type": "function", "name", "description",
  "parameters", "strict"}`` entries; a ``json_schema`` response format
  becomes ``text.format`` (``json_schema`` with ``name``, ``schema``,
  ``strict``), JSON mode ``text.format = {"type": "json_object"}``.
"""

from __future__ import annotations

import json
from typing import Any

from .._native import cc_calls, mapped_options

__all__ = ["responses_body", "input_of"]

_RENAMED = {"max_completion_tokens": "max_output_tokens", "max_tokens": "max_output_tokens"}
_DROPPED = frozenset({"stream_options", "n", "response_format", "tools", "messages"})


def _user_parts(content: Any) -> Any:
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            image = part.get("image_url") or {}
            entry = {"type": "input_image", "image_url": str(image.get("url") or "")}
            entry["detail"] = str(image.get("detail") or "auto")
            parts.append(entry)
        elif isinstance(part, dict):
            parts.append({"type": "input_text", "text": str(part.get("text") or "")})
    return parts


def _assistant_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = cc_calls(message)
    answered = {i: (n, a) for i, n, a in calls}
    native = message.get("native")
    items: list[dict[str, Any]] = []
    sent: set[str] = set()
    if isinstance(native, dict) and native.get("protocol") == "openai_responses":
        for item in native.get("content") or ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                if item.get("call_id") not in answered or str(item.get("call_id")) in sent:
                    continue  # a call no result answers, or a repeated id (its result goes back as text)
                sent.add(str(item["call_id"]))
            items.append(dict(item))
    else:
        text = message.get("content")
        if isinstance(text, str) and text:
            items.append({"role": "assistant", "content": text})
    items += [{"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
              for i, (n, a) in answered.items() if i not in sent]
    while items and items[-1].get("type") == "reasoning":  # a reasoning item must be followed by its output
        items.pop()
    return items


def input_of(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(instructions, input items)`` of Chat Completions messages."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            instructions.append(content if isinstance(content, str) else json.dumps(content))
        elif role == "assistant":
            items += _assistant_items(message)
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": str(message.get("tool_call_id") or ""),
                          "output": content if isinstance(content, str) else json.dumps(content)})
        else:
            items.append({"role": "user", "content": _user_parts(content)})
    return ("\n\n".join(instructions) if instructions else None), items


def _tool(tool: Any) -> Any:
    fn = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
    if not isinstance(fn, dict):
        return tool  # a built-in tool (web_search, file_search, ...) goes as given
    out: dict[str, Any] = {"type": "function", "name": fn.get("name"),
                           "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}
    if fn.get("description"):
        out["description"] = fn["description"]
    out["strict"] = bool(fn.get("strict", False))
    return out


def responses_body(model: str, messages: list[dict[str, Any]], options: dict[str, Any], *,
                   stream: bool) -> dict[str, Any]:
    """The ``POST /responses`` body (see the module docstring)."""
    instructions, items = input_of(messages)
    body: dict[str, Any] = {"model": model, **mapped_options(options, _DROPPED, _RENAMED)}
    if instructions is not None:
        given = body.get("instructions")
        body["instructions"] = instructions if not given else f"{instructions}\n\n{given}"
    if options.get("tools"):
        body["tools"] = [_tool(t) for t in options["tools"]]
    fmt = options.get("response_format")
    if isinstance(fmt, dict):
        text = dict(body.get("text") or {})
        if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
            spec = fmt["json_schema"]
            text["format"] = {"type": "json_schema", "name": str(spec.get("name") or "response"),
                              "schema": spec.get("schema"), "strict": bool(spec.get("strict"))}
        elif fmt.get("type") in ("json_object", "text"):
            text["format"] = {"type": fmt["type"]}
        body["text"] = text
    if stream:
        body["stream"] = True
    body["input"] = items
    return body
