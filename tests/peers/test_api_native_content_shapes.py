"""A native answer whose text is no text (a Messages ``text`` block, a
Responses ``output_text`` part, a Gemini ``text`` part holding a number, an
object or ``null``) is an ``EndpointResponseError`` naming it, as the same
delta is in a stream; a Responses ``refusal`` part that is set but no text
is still a refusal. Nothing is parsed and no tool runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, RawOutput, iModel
from lionops.errors import EndpointResponseError
from lionops.testing.native import NativeReply, Turn, anthropic_body, google_body, responses_body
from tests.helpers import Answer, ToolBox
from tests.native_recordings import ScriptPeer, endpoint_options

pytestmark = pytest.mark.anyio

TURN = Turn(text=json.dumps({"answer": 1}), calls=[("c1", "get_weather", {"city": "Oslo"})])


def _with_text(protocol: str, value: Any) -> dict[str, Any]:
    if protocol == "anthropic":
        body = anthropic_body(TURN)
        (block,) = [b for b in body["content"] if b["type"] == "text"]
        block["text"] = value
    elif protocol == "google":
        body = google_body(TURN)
        (part,) = [p for p in body["candidates"][0]["content"]["parts"] if "text" in p]
        part["text"] = value
    else:
        body = responses_body(TURN)
        (message,) = [i for i in body["output"] if i["type"] == "message"]
        message["content"][0]["text"] = value
    return body


async def _operate(protocol: str, body: dict[str, Any]) -> tuple[Any, ToolBox]:
    box = ToolBox()
    with ScriptPeer(NativeReply(200, json.dumps(body).encode())) as peer:
        model = iModel(**endpoint_options(protocol, peer, max_retries=0))
        try:
            return await Branch(chat_model=model, tools=box.tools()).operate(
                instruction="x", response_format=Answer, actions=True), box
        finally:
            await model.aclose()


@pytest.mark.parametrize("value", [5, {"t": "x"}, ["x"]], ids=["a number", "an object", "a list"])
@pytest.mark.parametrize("protocol", ["anthropic", "google", "openai_responses"])
async def test_a_native_text_that_is_no_text_is_a_typed_error(protocol, value, anyio_backend):
    box = ToolBox()
    with pytest.raises(EndpointResponseError, match="not text"):
        _, box = await _operate(protocol, _with_text(protocol, value))
    assert box.calls == {}


@pytest.mark.parametrize("refusal", [5, {"a": 1}, True], ids=["a number", "an object", "true"])
async def test_a_responses_refusal_part_that_is_no_text_is_still_a_refusal(refusal, anyio_backend):
    body = responses_body(TURN)
    (message,) = [i for i in body["output"] if i["type"] == "message"]
    message["content"].append({"type": "refusal", "refusal": refusal})
    result, box = await _operate("openai_responses", body)
    assert isinstance(result, RawOutput) and result.reason == "refusal" and box.calls == {}


def optional_note(text: str = "none") -> str:
    """A tool whose every parameter is optional: it would run with ``{}``."""
    CALLED.append(text)
    return text


CALLED: list[str] = []


@pytest.mark.parametrize(("arguments", "ran"), [
    ({"text": "kept"}, ["kept"]),  # an object is used whole, never replaced by {}
    (["kept"], []),  # not an object: an invalid request, never run
    (7, []),
], ids=["an object", "a list", "a number"])
async def test_responses_arguments_that_are_no_text_are_used_whole_or_refused(arguments, ran, anyio_backend):
    body = responses_body(Turn(calls=[("c1", "optional_note", {"text": "x"})]))
    (call,) = [i for i in body["output"] if i["type"] == "function_call"]
    call["arguments"] = arguments
    CALLED.clear()
    with ScriptPeer(NativeReply(200, json.dumps(body).encode())) as peer:
        model = iModel(**endpoint_options("openai_responses", peer, max_retries=0))
        try:
            await Branch(chat_model=model, tools=[optional_note]).operate(instruction="x", actions=True)
        finally:
            await model.aclose()
    assert CALLED == ran
