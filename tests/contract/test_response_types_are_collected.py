"""A response type made at run time is collected with its calls: what lionops
derives from it (the generated request and response types, the shared
Operative, a dataclass's or TypedDict's model and TypeAdapter) is kept on
the type itself, never in a process-wide table that would keep it alive."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import pytest
from pydantic import create_model
from typing_extensions import TypedDict

from lionops import Branch, Tool

pytestmark = pytest.mark.anyio

ANSWER = {"city": "Lisbon", "temp_c": 21.5}


def made_now(kind: str) -> Any:
    if kind == "model":
        return create_model("Forecast", city=(str, ...), temp_c=(float, ...))
    if kind == "dataclass":
        return dataclasses.make_dataclass("Forecast", [("city", str), ("temp_c", float)])
    return TypedDict("Forecast", {"city": str, "temp_c": float})


def echo(text: str) -> str:
    return text


async def middle(branch, instruction, chat_param, parse_param=None, clear_messages=False, skip_validation=False):
    fields = parse_param.response_format.model_fields
    extra = {"action_requests": [{"function": "echo", "arguments": {"text": "hi"}}]} if "action_requests" in fields \
        else {}
    return parse_param.response_format.model_validate({**ANSWER, **extra, **({"reason": None} if "reason" in fields
                                                                             else {})})


@pytest.mark.parametrize("kind", ["model", "dataclass", "typeddict"])
@pytest.mark.parametrize("extras", [{}, {"reason": True, "actions": True}])
async def test_a_response_type_made_per_call_is_collected_after_the_call(kind: str, extras: dict[str, bool]):
    branch = Branch(tools=[Tool(echo)])
    fmt = made_now(kind)
    result = await branch.operate(instruction="q", response_format=fmt, middle=middle, **extras)
    if extras:
        assert [r.output for r in result.action_responses] == ["hi"]
    else:
        assert (result["city"] if isinstance(result, dict) else result.city) == "Lisbon"
    gone = weakref.ref(fmt)
    del fmt, result, branch  # the branch's trace and messages hold the result
    gc.collect()
    assert gone() is None
