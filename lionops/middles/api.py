"""``communicate``: the API Middle (ADR-0022 D3).

One chat turn against an API endpoint. Every endpoint takes messages and
options shaped as Chat Completions ones: the OpenAI-compatible endpoint sends
them as they are, the native ones (Responses, Messages, generateContent) translate them
into their protocol and their answers back (docs/api.md, "Native protocols"):

1. clear the branch messages when ``clear_messages``; record the user turn
   (instruction, guidance, context; images and their detail go on the
   message metadata; the schema too when the endpoint cannot take it natively);
2. send system + history + the user turn and the *request* schema as
   ``response_format`` (strict only when the schema allows it). The offered
   tools go where the answer will hold the requests: with a caller model
   (``response_format=Model``), the prompt describes them and the model
   lists its requests in the structured answer's ``action_requests``
   (ADR-0022 D2, one round, one answer); without one, or with the opt-in
   ``native_tools=True`` (an endpoint option, or an ``operate()`` invocation
   option that is never sent), they are sent natively as ``tools=``.
   Remaining ``operate()`` keywords (``chat_param.imodel_kw``) are request
   options (ADR-0022 D1);
3. record the assistant message with token usage, latency, the tool calls
   and any reasoning on its metadata, and the same facts on the trace
   (:func:`lionops.trace.annotate`). Reasoning (``reasoning_content``
   fields, ``<think>`` blocks, native reasoning) is kept as a fact and never
   parsed; a native endpoint's own turn (thinking blocks with signatures,
   reasoning items, thought parts) is kept as ``metadata["native"]`` and
   handed back to that endpoint with the history;
4. a ``finish_reason: "length"`` cut-off, a refusal, or an answer with no
   finish reason or one that marks no whole answer is returned as a
   :class:`~lionops.models.RawOutput`, never parsed, repaired or turned into
   tool calls; otherwise the raw text under ``skip_validation``,
   else the inner parse with the native ``tool_calls`` merged into
   ``action_requests`` (a malformed ``arguments`` string becomes a request
   marked invalid, which ``act()`` answers with an error payload). A
   reply of tool calls only (beside no text, or text that holds no JSON
   object), under a caller model whose fields it leaves out, is a
   ``RawOutput`` with ``reason="tool_calls_only"``: the caller's
   mismatch policy decides (ADR-0022 D3) and no tool runs.

It never executes tools.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel

from ..endpoints.base import ChatEndpoint
from ..endpoints.openai import call_deadline
from ..endpoints.openai.response import WHOLE_FINISH_REASONS, plain_reason
from ..errors import ConfigurationError, EndpointError, EndpointResponseError
from ..messages import Message, to_jsonable
from ..models import ActionRequestModel, RawOutput, _preview, decode_arguments
from ..operative import request_type_of
from ..parse import ends_inside_json, extract_json, split_reasoning
from ..trace import annotate
from .common import begin_turn, finish_turn, record_assistant
from .parsing import parse_response
from .shaping import structured_options

__all__ = ["communicate", "provider_messages", "native_requests", "usage_note", "caller_model"]


def _endpoint_of(imodel: Any) -> ChatEndpoint:
    """The :class:`~lionops.endpoints.base.ChatEndpoint` of ``imodel`` (or ``imodel`` itself)."""
    endpoint = getattr(imodel, "endpoint", imodel)
    if endpoint is None or not callable(getattr(endpoint, "chat", None)):
        raise ConfigurationError(
            "communicate: no API endpoint configured; pass middle= to operate() "
            "or a chat_model=iModel(provider='openai', ...)"
        )
    return cast(ChatEndpoint, endpoint)


def _image_part(image: Any, detail: str | None) -> dict[str, Any]:
    """An ``image_url`` content part from a URL, a data URL or raw bytes."""
    if isinstance(image, (bytes, bytearray)):
        kind = "png"
        if image[:3] == b"\xff\xd8\xff":
            kind = "jpeg"
        elif image[:4] == b"GIF8":
            kind = "gif"
        elif image[:4] == b"RIFF" and image[8:12] == b"WEBP":
            kind = "webp"
        url = f"data:image/{kind};base64,{base64.b64encode(bytes(image)).decode()}"
    elif isinstance(image, str):
        url = image
    else:
        raise ConfigurationError(f"an image must be a URL, a data URL or bytes, got {type(image).__name__}")
    part: dict[str, Any] = {"url": url}
    if detail:
        part["detail"] = detail
    return {"type": "image_url", "image_url": part}


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(to_jsonable(content))


def _assistant_text(msg: Message) -> str:
    text = _text(msg.content)
    calls = msg.metadata.get("tool_calls") or []
    if calls and not text:
        text = "Requested actions: " + json.dumps(
            [{"function": c.get("function"), "arguments": c.get("arguments")} for c in calls]
        )
    return text


def _native_calls(msg: Message, answered: dict[str, Message]) -> list[dict[str, Any]]:
    """The assistant's native tool calls (from its metadata) that a result
    answers, in call order; a call without an id or a name stays text."""
    out: dict[str, dict[str, Any]] = {}
    for call in msg.metadata.get("tool_calls") or []:
        if (isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"] in answered
                and isinstance(call.get("function"), str) and call["function"]):
            out.setdefault(call["id"], call)  # a repeated id is paired once; the rest stays text
    return list(out.values())


def _answers_after(history: list[Message], index: int) -> dict[str, Message]:
    """The lionops-run results recorded right after ``history[index]``, by ``call_id``."""
    answered: dict[str, Message] = {}
    for msg in history[index + 1:]:
        if msg.role not in ("action_request", "action_response"):
            break
        call_id = msg.metadata.get("call_id")
        if msg.role == "action_response" and isinstance(call_id, str) and msg.metadata.get("executed_by") != "cli":
            answered.setdefault(call_id, msg)
    return answered


def _tool_call_entry(call: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_calls`` entry as the provider sent it: arguments as JSON text
    (the raw text of arguments that did not decode)."""
    arguments = call.get("arguments")
    text = json.dumps(to_jsonable(arguments)) if isinstance(arguments, dict) else call.get("raw_arguments")
    if not isinstance(text, str):
        text = "{}"
    return {"id": call["id"], "type": "function", "function": {"name": call["function"], "arguments": text}}


def provider_messages(branch: Any, progression: Any = None, native_protocol: str | None = None) -> list[dict[str, Any]]:
    """The branch history as Chat Completions messages.

    ``system``, ``user`` and ``assistant`` map to their roles (a user message
    with ``metadata["images"]`` becomes text + ``image_url`` parts). With
    ``progression`` (an iterable of message ids), only those messages are sent.

    Tool traffic: where the model made native tool calls (an assistant
    message whose ``metadata["tool_calls"]`` carry ids) and ``act()``
    answered them (``action_response`` messages whose ``metadata["call_id"]``
    is that id), the assistant message carries those ``tool_calls`` and is
    followed by one ``tool`` message per call, in call order, with its
    ``tool_call_id`` and the output as JSON. Every other result (requests
    from the JSON body, calls without an id, a CLI's own tool traffic) is
    text: each run of such ``action_response`` messages becomes one user
    message ``Action results (from the runtime): [...]``, in the order the
    messages were recorded (request order). ``action_request`` messages are
    implied by their results.

    With ``native_protocol`` (the protocol of an endpoint that sends a turn back as
    the provider gave it), an assistant message recorded from that protocol
    also carries its ``native`` content (thinking blocks with signatures,
    reasoning items, thought parts) for the endpoint to send unchanged.
    """
    keep = None if progression is None else set(progression)
    history = [m for m in branch.messages if keep is None or m.id in keep]
    as_tool: set[int] = set()  # ids of action_response messages sent as tool messages
    out: list[dict[str, Any]] = []
    results: list[Any] = []

    def flush() -> None:
        if results:
            out.append({"role": "user", "content": "Action results (from the runtime): " + json.dumps(results)})
            results.clear()

    for i, msg in enumerate(history):
        if msg.role == "action_response":
            if msg.id not in as_tool:
                results.append(to_jsonable(msg.content))
            continue
        if msg.role == "action_request":
            continue
        flush()
        native = []
        if msg.role == "assistant":
            # Results pair with this message's calls only if they follow it
            # directly (servers reuse ids such as "call_0" across turns).
            answered = _answers_after(history, i)
            native = _native_calls(msg, answered)
        own = msg.metadata.get("native") if native_protocol and msg.role == "assistant" else None
        extra = {"native": own} if isinstance(own, dict) and own.get("protocol") == native_protocol else {}
        if native:
            out.append({"role": "assistant", "content": _text(msg.content) or None,
                        "tool_calls": [_tool_call_entry(c) for c in native], **extra})
            for call in native:
                answer = answered[call["id"]]
                output = answer.content.get("output") if isinstance(answer.content, dict) else answer.content
                out.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(to_jsonable(output))})
                as_tool.add(answer.id)
        elif msg.role == "assistant":
            out.append({"role": "assistant", "content": _assistant_text(msg), **extra})
        elif msg.role == "user" and msg.metadata.get("images"):
            detail = msg.metadata.get("image_detail")
            parts = [{"type": "text", "text": _text(msg.content)}]
            parts += [_image_part(img, detail) for img in msg.metadata["images"]]
            out.append({"role": "user", "content": parts})
        else:
            out.append({"role": msg.role, "content": _text(msg.content)})
    flush()
    return out


def native_requests(tool_calls: list[Any]) -> list[ActionRequestModel]:
    """``tool_calls`` as action requests, in order.

    ``arguments`` arrive as JSON text and are decoded (twice at most).
    Each request keeps the call's ``id`` as its hidden ``call_id``.
    A call whose arguments are not a JSON object, that has no name, or an
    entry that is not an object at all, is kept and marked ``invalid`` with
    the reason: ``act()`` answers it with an
    error payload and never invokes it. No call is dropped or invented.
    """
    out: list[ActionRequestModel] = []
    for call in tool_calls:
        if not isinstance(call, dict):
            out.append(ActionRequestModel(invalid=f"tool call entry is not an object: {_preview(call)}"))
            continue
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        function = call.get("function")
        fn: dict[str, Any] = function if isinstance(function, dict) else {}
        name = fn.get("name") if isinstance(fn.get("name"), str) and fn.get("name") else None
        raw = fn.get("arguments")
        try:
            arguments = decode_arguments(raw if raw not in ("", None) else "{}")
        except ValueError as exc:
            out.append(ActionRequestModel(function=name, invalid=f"tool call {call.get('id')!s}: {exc}",
                                          call_id=call_id))
            continue
        if name is None:
            out.append(ActionRequestModel(arguments=arguments,
                                          invalid=f"tool call {call.get('id')!s} has no function name",
                                          call_id=call_id))
            continue
        out.append(ActionRequestModel(function=name, arguments=arguments, call_id=call_id))
    return out


def _call_summary(call: Any, request: ActionRequestModel) -> dict[str, Any]:
    entry = call if isinstance(call, dict) else {}
    summary: dict[str, Any] = {"id": entry.get("id"), "function": request.function, "arguments": request.arguments}
    if request.invalid:
        summary["invalid"] = request.invalid
        fn = entry.get("function")
        summary["raw_arguments"] = fn.get("arguments") if isinstance(fn, dict) else None
    return summary


def usage_note(branch: Any) -> str | None:
    """The token usage of the branch's earlier model calls, as a line for the
    model (``include_token_usage_to_model``); ``None`` before the first call."""
    prompt = completion = calls = 0
    for msg in branch.messages:
        if msg.role != "assistant":
            continue
        tokens, usage = msg.metadata.get("tokens"), msg.metadata.get("usage")
        if tokens:  # the one usage record (lionops.usage.Usage), whatever the endpoint
            calls += 1
            prompt += int(tokens.get("input_tokens", 0))
            completion += int(tokens.get("output_tokens", 0))
        elif usage:
            calls += 1
            prompt += int(usage.get("prompt_tokens", 0))
            completion += int(usage.get("completion_tokens", 0))
    if not calls:
        return None
    return (
        f"Token usage so far in this conversation: {prompt + completion} tokens "
        f"({prompt} prompt, {completion} completion) over {calls} model calls."
    )


def caller_model(response_format: Any) -> type[BaseModel] | None:
    """The caller's own model class behind ``response_format``, or ``None``.

    A response type generated for ``reason``/``actions`` alone (no
    ``response_format=`` from the caller) has no caller model; a generated
    type built on the caller's class gives that class.
    """
    if isinstance(response_format, BaseModel):
        response_format = type(response_format)
    request = request_type_of(response_format)
    if not (isinstance(request, type) and issubclass(request, BaseModel)):
        return None
    generated = request is not response_format  # else the caller's class itself
    if not generated:
        return request
    base = request.__bases__[0] if request.__bases__ else BaseModel
    return base if base is not BaseModel and issubclass(base, BaseModel) else None


def _tools_only(caller: type[BaseModel], calls: list[Any], text: str | None) -> RawOutput:
    names = [c.get("function", {}).get("name") if isinstance(c, dict) and isinstance(c.get("function"), dict)
             else None for c in calls]
    shown = ", ".join(str(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    return RawOutput(text or "", reason="tool_calls_only", detail=(
        f"tool calls only, no answer fields: the reply held {len(calls)} native tool call(s) ({shown}) "
        f"and none of the fields of {caller.__name__}; no tool was run"
    ))


def _within_deadline(middle: Any) -> Any:
    """Run the Middle under the endpoint's ``deadline`` (or the call's
    ``deadline=`` option): every ``chat()`` it makes, the parse model's
    re-asks included, ends within that total."""

    @functools.wraps(middle)
    async def bounded(branch: Any, instruction: Any, chat_param: Any, *args: Any, **kw: Any) -> Any:
        endpoint = getattr(getattr(chat_param, "imodel", None) or branch.chat_model, "endpoint", None)
        seconds = (getattr(chat_param, "imodel_kw", None) or {}).get("deadline")
        seconds = getattr(endpoint, "deadline", None) if seconds is None else seconds
        if seconds is None:
            return await middle(branch, instruction, chat_param, *args, **kw)
        with call_deadline(seconds):
            return await middle(branch, instruction, chat_param, *args, **kw)

    return bounded


@_within_deadline
async def communicate(
    branch: Any,
    instruction: Any,
    chat_param: Any,
    parse_param: Any = None,
    clear_messages: bool = False,
    skip_validation: bool = False,
) -> Any:
    """Run one API chat turn (see the module docstring).

    Args:
        branch: the Branch; its messages are the history.
        instruction: the instruction text (or JSON value).
        chat_param: the ChatParam (``imodel`` or ``branch.chat_model`` is the
            API model; ``response_format``, ``tool_schemas``, ``images``,
            ``image_detail``, ``progression``, ``include_token_usage_to_model``,
            ``imodel_kw``).
        parse_param: the ParseParam of the inner parse.
        clear_messages: clear the branch messages (system kept) first.
        skip_validation: return the raw text without parsing.

    Returns:
        A model instance, a mapping, the text, a ``RawOutput`` (cut-off,
        refusal, tool calls only under a caller model, JSON nested too deep),
        or ``None`` when the model produced neither text nor tool calls.

    Raises:
        ConfigurationError: the selected model is not API-backed, or a bad image.
        lionops.errors.EndpointError: transport failures (typed, secret-free).
    """
    imodel = getattr(chat_param, "imodel", None) or branch.chat_model
    endpoint = _endpoint_of(imodel)
    turn = _request(branch, instruction, chat_param, endpoint, clear_messages)  # steps 1 and 2
    completion, unfinished = await _send(branch, endpoint, turn, parse_param)
    text, requests, metadata = _record(branch, endpoint, turn, completion)  # step 3
    whole = getattr(endpoint, "whole_finish_reasons", WHOLE_FINISH_REASONS)
    return await _answer(branch, turn, completion, unfinished, text, requests, metadata,  # step 4
                         parse_param, skip_validation, whole, getattr(endpoint, "scrub", _unchanged))


@dataclass(frozen=True, slots=True)
class _Turn:
    """What steps 1 and 2 of ``communicate`` decided: the request and how it was shaped."""

    fmt: Any
    caller: type[BaseModel] | None
    messages: list[dict[str, Any]]
    options: dict[str, Any]
    schema_in_prompt: bool
    tools_native: bool
    tool_schemas: Any
    shaped_format: Any


def _request(branch: Any, instruction: Any, chat_param: Any, endpoint: ChatEndpoint,
             clear_messages: bool) -> _Turn:
    """Steps 1 and 2: record the user turn and shape the request (response
    format, where the tools go, the call's own options)."""
    fmt = getattr(chat_param, "response_format", None)
    options: dict[str, Any] = {}
    schema_in_prompt = False
    if fmt is not None and hasattr(endpoint, "structured_output"):
        options, schema_in_prompt = structured_options(endpoint, fmt)
    invocation = dict(getattr(chat_param, "imodel_kw", None) or {})
    opt_in = invocation.pop("native_tools", None)
    tool_schemas = getattr(chat_param, "tool_schemas", None)
    caller = caller_model(fmt)
    native = bool(opt_in if opt_in is not None else getattr(endpoint, "native_tools", False))
    tools_native = bool(tool_schemas) and (caller is None or native)
    if tools_native:
        options["tools"] = list(tool_schemas or ())

    note = usage_note(branch) if getattr(chat_param, "include_token_usage_to_model", False) else None
    # Tools sent natively are not repeated in the prompt; otherwise the prompt describes them.
    user = begin_turn(branch, instruction, chat_param, clear_messages, schema_in_prompt=schema_in_prompt,
                      tools_in_prompt=bool(tool_schemas) and not tools_native)
    if note:
        user.content = f"{user.content}\n\n{note}" if user.content else note
    images = getattr(chat_param, "images", None)
    if images:
        user.metadata["images"] = list(images)
        if chat_param.image_detail:
            user.metadata["image_detail"] = chat_param.image_detail

    progression = getattr(chat_param, "progression", None)
    if progression is not None:
        progression = [*progression, user.id]
    return _Turn(fmt=fmt, caller=caller, messages=provider_messages(branch, progression,
                                                                     getattr(endpoint, "native_protocol", None)),
                 options={**invocation, **options}, schema_in_prompt=schema_in_prompt,
                 tools_native=tools_native, tool_schemas=tool_schemas,
                 shaped_format=options.get("response_format"))


async def _send(branch: Any, endpoint: ChatEndpoint, turn: _Turn, parse_param: Any) -> tuple[Any, bool]:
    """Step 2's call: the endpoint's answer, and whether it is a stream that
    never got a finish reason (kept only for a call with no response format)."""
    try:
        return await endpoint.chat(turn.messages, **turn.options), False
    except EndpointError as exc:
        _log_retries(branch, endpoint, getattr(exc, "retries", ()))
        completion = _unfinished_text_answer(exc, turn.fmt, parse_param)
        if completion is None:
            raise
        return completion, True


def _record(branch: Any, endpoint: ChatEndpoint, turn: _Turn,
            completion: Any) -> tuple[str | None, list[Any], dict[str, Any]]:
    """Step 3: the facts of the turn on the assistant message's metadata and the
    trace. Returns the answer text (reasoning split off), the native requests
    and the metadata."""
    text, thought = split_reasoning(completion.text)
    reasoning = "\n".join(r for r in (getattr(completion, "reasoning", None), thought) if r) or None

    requests = native_requests(completion.tool_calls)
    # The facts of the turn, built once: the assistant message's metadata and
    # the trace carry them under the same names.
    # The server's own words (model, finish reason) are scrubbed of the endpoint's secrets,
    # unless they are what was asked for or a plain word (a scrub costs about 8 µs).
    scrub = getattr(endpoint, "scrub", _unchanged)
    model, finish = completion.model, completion.finish_reason
    if isinstance(model, str) and not model.startswith(getattr(endpoint, "model", None) or "\0"):
        model = scrub(model)
    if isinstance(finish, str) and not plain_reason(finish):
        finish = scrub(finish)
    facts: dict[str, Any] = {
        "provider": getattr(endpoint, "provider", None),
        "model": model,
        "finish_reason": finish,
        "usage": dict(completion.usage),
        "tokens": completion.tokens.as_dict(),
        "latency_ms": round(completion.latency_s * 1000, 3),
        "http_attempts": completion.attempts,
    }
    metadata: dict[str, Any] = dict(facts)
    if completion.tool_calls:
        metadata["tool_calls"] = [_call_summary(c, r) for c, r in zip(completion.tool_calls, requests, strict=False)]
    if completion.refusal:
        metadata["refusal"] = completion.refusal
    if reasoning:
        metadata["reasoning"] = reasoning
    own_turn = getattr(completion, "native", None)
    if own_turn:  # the provider's own turn, sent back as it came
        metadata["native"] = own_turn
    fmt_option = turn.shaped_format or {}
    if "json_schema" in fmt_option:
        mode: str | None = "strict" if fmt_option["json_schema"].get("strict") else "json_schema"
    else:
        mode = fmt_option.get("type") or ("prompt" if turn.schema_in_prompt else None)
    annotate(
        **facts, response_id=completion.raw.get("id"), http_retries=list(completion.retries),
        tool_calls=len(completion.tool_calls),
        structured_output=mode,
        tools_offered=("native" if turn.tools_native else "prompt") if turn.tool_schemas else None,
        reasoning_chars=len(reasoning) if reasoning else 0,
        choices=getattr(completion, "choices", 1),
    )
    _log_retries(branch, endpoint, completion.retries)
    return text, requests, metadata


async def _answer(branch: Any, turn: _Turn, completion: Any, unfinished: bool, text: str | None, requests: list[Any],
                  metadata: dict[str, Any], parse_param: Any, skip_validation: bool,
                  whole: frozenset[str] = WHOLE_FINISH_REASONS, scrub: Callable[[str], str] | None = None) -> Any:
    """Step 4: an uncoerced ``RawOutput`` (cut, refusal, no finish reason), the
    tool calls alone under a caller model, or the inner parse."""
    raw = _no_finish_reason(text) if unfinished else _uncoerced(completion, text, whole, scrub or _unchanged)
    if raw is not None:
        record_assistant(branch, raw, metadata)
        return _noted(raw)
    if turn.caller is not None and not skip_validation and completion.tool_calls and not _holds_json(text):
        # Tool calls beside no JSON answer (nothing, or a preamble such as "I'll check"):
        # the calls alone are parsed; the text is never restated into the caller's fields.
        record_assistant(branch, text, metadata)
        result = await parse_response(None, parse_param, branch=branch, action_requests=requests)
        calls = completion.tool_calls
        return _noted(result if isinstance(result, BaseModel) else _tools_only(turn.caller, calls, text))
    if turn.caller is None and _actions_only(turn.fmt) and not completion.tool_calls and not _holds_json(text):
        # No caller model, no tool call, no JSON: the answer is prose. Restating it
        # into a type that holds only the action fields would lose it: it stays text.
        record_assistant(branch, text, metadata)
        return _noted(text)
    return _noted(await finish_turn(
        branch, text, parse_param, skip_validation,
        metadata=metadata, action_requests=requests,
    ))


def _log_retries(branch: Any, endpoint: Any, retries: Any) -> None:
    """One ``http_retry`` log entry per retry, also for a call that failed."""
    for retry in retries:
        branch.logs.log("http_retry", {"provider": getattr(endpoint, "provider", None), **retry})


_ACTION_FIELDS = frozenset({"action_required", "action_requests", "action_responses"})


def _actions_only(fmt: Any) -> bool:
    """Whether ``fmt`` is a generated type holding nothing but the action fields."""
    fields = getattr(fmt, "model_fields", None)
    return isinstance(fields, dict) and bool(fields) and set(fields) <= _ACTION_FIELDS


def _holds_json(text: str | None) -> bool:
    return bool(text and text.strip()) and isinstance(extract_json(text or ""), dict)


def _noted(result: Any) -> Any:
    """``result``; a ``RawOutput``'s reason and detail also go on the trace."""
    if isinstance(result, RawOutput):
        annotate(raw_output={"reason": result.reason, "detail": result.detail})
    return result


def _unfinished_text_answer(exc: EndpointError, fmt: Any, parse_param: Any) -> Any:
    """The answer of a stream that ended with ``[DONE]`` but no finish reason,
    when no response format was asked for (it comes back as an uncoerced
    ``RawOutput``); ``None`` otherwise: the error stands (ADR-0022 D4: an
    answer the server never finished is never the model and runs no tool)."""
    unfinished = getattr(exc, "unfinished", None) if isinstance(exc, EndpointResponseError) else None
    if unfinished is None or fmt is not None or getattr(parse_param, "response_format", None) is not None:
        return None
    return unfinished


def _no_finish_reason(text: str | None) -> RawOutput:
    """The text of a stream that ended with ``[DONE]`` but no finish reason, uncoerced."""
    return RawOutput(text or "", reason="no_finish_reason", detail=(
        "the stream ended with [DONE] but never sent a finish reason: the text is returned as it came, "
        "unparsed, and no tool was run"))


def _unchanged(text: str) -> str:
    return text


def _not_said_whole(text: str, finish_reason: Any, scrub: Callable[[str], str] = _unchanged) -> RawOutput:
    """The text of an answer whose finish reason is missing or unknown,
    uncoerced; the reason shown is scrubbed of the endpoint's secrets first."""
    if finish_reason is None or finish_reason == "":
        return RawOutput(text, reason="no_finish_reason", detail=(
            "the server sent no finish reason: the text is returned as it came, unparsed, and no tool was run"))
    shown = "".join(c if c.isalnum() or c in "_-.*" else "?" for c in scrub(str(finish_reason)[:400])[:40])
    return RawOutput(text, reason="unknown_finish_reason", detail=(
        f"the server's finish reason {shown!r} is not one that marks a whole answer: the text is returned "
        "as it came, unparsed, and no tool was run (if this host ends whole answers with it, add it to the "
        "endpoint's whole_finish_reasons)"))


def _uncoerced(completion: Any, text: str | None, whole: frozenset[str] = WHOLE_FINISH_REASONS,
               scrub: Callable[[str], str] = _unchanged) -> RawOutput | None:
    """A ``RawOutput`` for a cut-off (``length``) or a refusal (``refusal`` text
    or ``content_filter``); ``None`` for an answer that may be parsed."""
    text = text or ""
    if completion.finish_reason == "length":
        used = completion.tokens.output_tokens
        detail = "the answer was cut off at the token limit"
        if used is not None:
            detail += f" after {used} completion tokens"
        return RawOutput(text, reason="length", detail=detail)
    if completion.refusal:
        return RawOutput(text or completion.refusal, reason="refusal", detail=completion.refusal)
    if completion.finish_reason == "content_filter":
        return RawOutput(text, reason="refusal", detail="the provider's content filter stopped the answer")
    if ends_inside_json(text):
        # A server that reports a whole answer for a cut one: never repaired into the model.
        return RawOutput(text, reason="length", detail=(
            f"the answer ends inside a JSON value although the server reported finish_reason "
            f"{completion.finish_reason!r}; treated as cut off"))
    if completion.finish_reason not in whole:
        # A whole answer says so: with no finish reason, or one no endpoint maps
        # (a host's own cut such as "model_length" or "insufficient_system_resource"),
        # the answer is not taken for a whole one, and no tool runs from it.
        return _not_said_whole(text, completion.finish_reason, scrub)
    return None
