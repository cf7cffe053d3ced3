"""Gemini ``generateContent`` request bodies from Chat Completions-shaped messages. Pure: no IO.

- ``system`` messages become ``systemInstruction``;
- user text and images become ``text`` / ``inlineData`` (a data URL) or
  ``fileData`` (any other URL) parts of a ``user`` content;
- an assistant turn becomes a ``model`` content: with its ``native`` parts
  at hand, those parts as the API gave them (``thought`` parts and
  ``thoughtSignature`` included), keeping only the answered
  ``functionCall`` parts; otherwise a text part and one ``functionCall``
  part per call;
- ``tool`` messages become ``functionResponse`` parts (the call's ``name``,
  and its ``id`` when the call had one) in a ``user`` content; consecutive
  contents of one role merge;
- ``tools`` become one ``functionDeclarations`` tool (``parametersJsonSchema``);
  a ``json_schema`` response format becomes ``responseMimeType:
  application/json`` with ``responseJsonSchema`` (JSON mode: the MIME type alone).
"""

from __future__ import annotations

import json
from typing import Any

from ..._json import loads as bounded_json
from .._native import cc_calls, data_url, json_schema_format, tool_specs

__all__ = ["generate_body", "SYNTHETIC_ID", "contents_of"]

#: The prefix of the id lionops gives a ``functionCall`` that came without one.
SYNTHETIC_ID = "lionops_call_"

#: Chat Completions option names -> ``generationConfig`` fields.
_CONFIG = {"temperature": "temperature", "top_p": "topP", "top_k": "topK", "max_tokens": "maxOutputTokens",
           "max_completion_tokens": "maxOutputTokens", "max_output_tokens": "maxOutputTokens",
           "stop": "stopSequences", "seed": "seed", "presence_penalty": "presencePenalty",
           "frequency_penalty": "frequencyPenalty", "candidate_count": "candidateCount",
           "thinking_config": "thinkingConfig"}
_DROPPED = frozenset({"stream_options", "n", "response_format", "tools", "parallel_tool_calls", "tool_choice",
                      "generation_config", "generationConfig"})


def _user_parts(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return [{"text": "" if content is None else str(content)}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url") or "")
            inline = data_url(url)
            parts.append({"inlineData": {"mimeType": inline[0], "data": inline[1]}} if inline
                         else {"fileData": {"fileUri": url}})
        elif isinstance(part, dict):
            parts.append({"text": str(part.get("text") or "")})
    return parts


def _call_part(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id and not call_id.startswith(SYNTHETIC_ID):
        call["id"] = call_id
    return {"functionCall": call}


def _model_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = cc_calls(message)
    by_id = {i: (n, a) for i, n, a in calls}
    native = message.get("native")
    if isinstance(native, dict) and native.get("protocol") == "google" and isinstance(native.get("content"), list):
        ids = iter(native.get("ids") or ())
        kept: list[dict[str, Any]] = []
        sent: set[str] = set()
        for part in native["content"]:
            if not isinstance(part, dict):
                continue
            if "functionCall" in part:
                call_id = next(ids, None)
                if call_id not in by_id or call_id in sent:
                    continue  # a call no result answers, or a repeated id (its result goes back as text)
                name, args = by_id[call_id]
                kept.append({**part, **_call_part(call_id, name, args)})
                sent.add(call_id)
            else:
                kept.append(part)
        kept += [_call_part(i, n, a) for i, (n, a) in by_id.items() if i not in sent]
        if kept:
            return kept
    parts: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        parts.append({"text": text})
    parts += [_call_part(i, n, a) for i, n, a in calls]
    return parts or [{"text": ""}]


def contents_of(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system text, contents)`` of Chat Completions messages."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            system.append(content if isinstance(content, str) else json.dumps(content))
            continue
        if role == "assistant":
            names.update({i: n for i, n, _ in cc_calls(message)})
            parts, role = _model_parts(message), "model"
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            try:
                output = bounded_json(content, what="a tool result") if isinstance(content, str) else content
            except ValueError:  # not JSON, or nested past the bound (JSONLimitError): sent as text
                output = content
            response: dict[str, Any] = {"name": names.get(call_id, "tool"), "response": {"result": output}}
            if call_id and not call_id.startswith(SYNTHETIC_ID):
                response["id"] = call_id
            parts, role = [{"functionResponse": response}], "user"
        else:
            parts, role = _user_parts(content), "user"
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"] += parts
        else:
            contents.append({"role": role, "parts": parts})
    return ("\n\n".join(system) if system else None), contents


def generate_body(messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    """The ``generateContent`` body (see the module docstring)."""
    system, contents = contents_of(messages)
    body: dict[str, Any] = {}
    config: dict[str, Any] = dict(options.get("generation_config") or options.get("generationConfig") or {})
    for key, value in options.items():
        if value is None or key in _DROPPED:
            continue
        if key in _CONFIG:
            config[_CONFIG[key]] = [value] if key == "stop" and isinstance(value, str) else value
        else:
            body[key] = value
    if system is not None:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    specs = tool_specs(options.get("tools"))
    own = [t for t in options.get("tools") or () if isinstance(t, dict) and "function" not in t]  # googleSearch, ...
    if specs or own:
        declared = [{"functionDeclarations": [
            {"name": n, **({"description": d} if d else {}), "parametersJsonSchema": p} for n, d, p in specs]}]
        body["tools"] = (declared if specs else []) + own
    fmt = options.get("response_format")
    answer = json_schema_format(fmt)
    if answer is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = answer[1]
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        config["responseMimeType"] = "application/json"
    if config:
        body["generationConfig"] = config
    body["contents"] = contents
    return body
