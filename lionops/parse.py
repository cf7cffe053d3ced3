"""Parse model text into the requested response format (the inner parse).

The inner parse never raises on a bad value: it returns the model instance
when it can, else the extracted mapping, else the text, so that the
coordinator's *outer* policy decides (ADR-0022 D3).

Minimal version: JSON from plain or fenced text, then ``model_validate``.
The API adapter extends it (json-repair, fuzzy keys, parse-model retries).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from .operative import request_exclude_of

__all__ = ["extract_json", "parse_response"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n\s*```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON value in ``text`` (plain or in a fenced block), or ``None``."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    for m in _FENCE.finditer(text):
        try:
            return json.loads(m.group(1))
        except ValueError:
            continue
    start = stripped.find("{")
    end = stripped.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(stripped[start : end + 1])
        except ValueError:
            return None
    return None


async def parse_response(text: str | None, parse_param: Any, *, branch: Any = None) -> Any:
    """Parse ``text`` into ``parse_param.response_format``.

    Returns a model instance on success; the extracted JSON value when it
    does not validate; the text when no JSON is found; ``None`` for no text.
    Keys the model must never supply (``action_responses``) are dropped
    before validation (DESIGN ruling, C03).
    """
    if text is None:
        return None
    fmt = getattr(parse_param, "response_format", None) if parse_param is not None else None
    if not (isinstance(fmt, type) and issubclass(fmt, BaseModel)):
        return text
    data = extract_json(text)
    if data is None:
        return text
    if isinstance(data, dict):
        for key in request_exclude_of(fmt):
            data.pop(key, None)
    try:
        return fmt.model_validate(data)
    except ValidationError:
        return data
