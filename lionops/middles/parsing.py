"""The inner parse of a Middle's answer, with the parse-model re-ask.

:func:`parse_response` runs the pure steps of :mod:`lionops.parse` and, only
when the reply held no JSON object at all, asks the parse model
(``parse_param.imodel``) to restate the text as JSON (step 5 of the parse,
ADR-0022 D3). The re-ask is a network call shaped like any structured
request, so it lives in the Middle layer beside the request shaping; the
extraction itself stays pure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .._alcall import alcall
from .._defaults import DEFAULT_PARSE_CALL_PARAMS
from .._limits import check_parse_request, note_parse_request
from ..errors import UsageLimitExceeded
from ..models import ActionRequestModel
from ..operative import request_type_of
from ..parse import PARSE_MODEL_MAX_CHARS, _validate, extract_json, local_parse, merge_action_requests, split_reasoning
from ..trace import annotate, current_meta
from .shaping import structured_options

__all__ = ["parse_response"]

logger = logging.getLogger("lionops.parse")


async def parse_response(
    text: str | None,
    parse_param: Any,
    *,
    branch: Any = None,
    action_requests: list[ActionRequestModel] | None = None,
) -> Any:
    """Parse ``text`` into ``parse_param.response_format`` (see the module docstring).

    Args:
        text: the model's text, or ``None`` when it produced none.
        parse_param: a ParseParam (``response_format``, ``fuzzy_match_params``,
            ``alcall_params``, ``imodel``, ``imodel_kw``) or ``None``.
        branch: the branch (unused by the parse itself; kept for Middles).
        action_requests: native tool calls to merge into the result (step 4).

    Returns:
        A model instance on success; the extracted mapping when it does not
        validate; the text when no JSON object is found; ``None`` when there
        is no text and no native tool call. Never raises on a bad value.
    """
    fmt = getattr(parse_param, "response_format", None) if parse_param is not None else None
    text, _ = split_reasoning(text)
    if text is None and not action_requests:
        return None
    if not (isinstance(fmt, type) and issubclass(fmt, BaseModel)):
        return text
    value, found_json = local_parse(text, fmt, parse_param, action_requests)
    if isinstance(value, BaseModel) or found_json or not text:
        return value
    if len(text) > PARSE_MODEL_MAX_CHARS:
        annotate(parse_model_calls=0, parse_model_skipped=f"answer of {len(text)} characters, "
                                                          f"above {PARSE_MODEL_MAX_CHARS}")
        return value
    retried = await _parse_model_retry(text, fmt, parse_param, action_requests, branch)
    return retried if retried is not None else value


def _parse_messages(text: str, fmt: type[BaseModel], schema_in_prompt: bool) -> list[dict[str, Any]]:
    system = (
        "You restate an assistant's answer as one JSON object. Keep its facts; invent "
        "nothing; use null for what the answer does not say."
    )
    user = f"Answer to restate:\n{text}"
    if schema_in_prompt:
        user += "\n\nJSON schema:\n" + json.dumps(request_type_of(fmt).model_json_schema())
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def _parse_model_retry(
    text: str, fmt: type[BaseModel], parse_param: Any,
    action_requests: list[ActionRequestModel] | None, branch: Any = None,
) -> BaseModel | None:
    """Ask the parse model to restate ``text`` as ``fmt``; ``None`` when it cannot.

    Runs under ``parse_param.alcall_params`` (retries, backoff and throttle,
    every wait through :mod:`lionops.clock`). The parse model's own
    ``action_requests`` are replaced by the original native ones. Each
    request counts against the branch's usage limits and is checked before
    it is made: one that would pass a limit is not made, and
    :class:`~lionops.errors.UsageLimitExceeded` ends the operation (``over_limit``).
    """
    imodel = getattr(parse_param, "imodel", None)
    chat = getattr(getattr(imodel, "endpoint", imodel), "chat", None)
    if chat is None:
        return None
    endpoint = getattr(imodel, "endpoint", imodel)
    shaped = hasattr(endpoint, "structured_output")
    options, schema_in_prompt = structured_options(endpoint, fmt) if shaped else ({}, True)
    messages = _parse_messages(text, fmt, schema_in_prompt)
    extra = dict(getattr(parse_param, "imodel_kw", None) or {})
    calls = {"n": 0}
    limits, used, meta = getattr(branch, "limits", None), getattr(branch, "usage", None), current_meta()
    over: list[UsageLimitExceeded] = []

    async def attempt(_: str) -> BaseModel | None:
        if limits is not None and used is not None and meta is not None:
            stop = check_parse_request(limits, used, meta)
            if stop is not None:  # checked before the request it limits: not made
                over.append(stop)
                return None
        calls["n"] += 1
        completion = await chat(messages, **extra, **options)
        if meta is not None:
            note_parse_request(meta, _facts(endpoint, completion))
        if completion.finish_reason == "length" or completion.refusal:
            raise ValueError(f"parse model stopped: {completion.finish_reason or 'refusal'}")
        data = extract_json(split_reasoning(completion.text)[0] or "")
        if not isinstance(data, dict):
            raise ValueError("parse model answered without a JSON object")
        data.pop("action_requests", None)
        value = _validate(merge_action_requests(data, action_requests), fmt, parse_param)
        if not isinstance(value, BaseModel):
            raise ValueError("parse model output does not validate")
        return value

    params = getattr(parse_param, "alcall_params", None) or DEFAULT_PARSE_CALL_PARAMS
    try:
        [value] = await alcall([text], attempt, params)
    except Exception as exc:  # noqa: BLE001 - the inner parse never raises on a bad value
        logger.info("parse model could not restate the answer after %d calls: %s", calls["n"], exc)
        value = None
    annotate(parse_model_calls=calls["n"], parse_model_ok=value is not None)
    if over:
        raise over[0]
    return value


def _facts(endpoint: Any, completion: Any) -> dict[str, Any]:
    """What a parse-model request used, named as the model request's trace facts."""
    usage = getattr(completion, "usage", None)
    as_dict = getattr(getattr(completion, "tokens", None), "as_dict", None)
    return {
        "provider": getattr(endpoint, "provider", None),
        "model": getattr(completion, "model", None),
        "usage": dict(usage) if isinstance(usage, Mapping) else {},
        "tokens": as_dict() if callable(as_dict) else {},
    }
