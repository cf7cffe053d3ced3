"""An assistant ``content`` that is no text (a number, an object, a part whose
``text`` is no string) is a malformed answer: a typed
``EndpointResponseError`` naming what was wrong, plain and streamed, never a
``TypeError`` and never the value's Python ``str`` taken for the answer;
nothing is parsed and no tool runs. Parts of other types (an image) are no
text and are left alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, RawOutput
from lionops.errors import EndpointResponseError
from lionops.testing import Reply, chunked, completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio

BAD = {
    "a number": 5,
    "an object": {"a": 1},
    "a part whose text is a number": [{"type": "text", "text": 5}],
    "a part whose text is null": [{"type": "text", "text": None}],
    "a second part whose text is a list": [{"type": "text", "text": '{"answer": 3}'}, {"type": "text", "text": ["x"]}],
    "an output_text part whose text is an object": [{"type": "output_text", "text": {"t": "x"}}],
}


def _answer(content: Any) -> dict[str, Any]:
    body = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    body["choices"][0]["message"]["content"] = content
    return body


def _streamed(content: Any) -> list[dict[str, Any]]:
    """The chunks of a streamed answer whose one content delta is ``content``."""
    chunks = chunked(_answer("x"))
    (at,) = [i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("content") == "x"]
    chunks[at]["choices"][0]["delta"]["content"] = content
    return chunks


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("case", list(BAD))
async def test_content_that_is_no_text_is_a_typed_error(server, case, stream, anyio_backend):  # noqa: F811
    server.push(Reply(stream=_streamed(BAD[case])) if stream else _answer(BAD[case]))
    box = ToolBox()
    model = make_model(server, stream=stream, max_retries=0)
    try:
        with pytest.raises(EndpointResponseError, match="content|text") as info:
            await Branch(chat_model=model, tools=box.tools()).operate(instruction="x", response_format=Answer,
                                                                      actions=True)
    finally:
        await model.aclose()
    assert box.calls == {} and "Traceback" not in str(info.value)


@pytest.mark.parametrize("content", [
    [{"type": "text", "text": '{"answer": 2}'}, {"type": "image_url", "image_url": {"url": "x"}}],
    [{"type": "text"}, {"type": "text", "text": '{"answer": 2}'}],
], ids=["an image part", "a text part with no text"])
async def test_parts_of_other_types_are_left_to_their_readers(server, content, anyio_backend):  # noqa: F811
    assert (await _plain_answer(server, "content", content)).answer == 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("refusal", [5, {"a": 1}, ["no"], True], ids=["a number", "an object", "a list", "true"])
async def test_a_refusal_that_is_no_text_is_still_a_refusal(server, refusal, stream, anyio_backend):  # noqa: F811
    body = _answer(json.dumps({"answer": 1}))
    if stream:
        chunks = chunked(body)
        chunks.insert(2, {**chunks[1], "choices": [{"index": 0, "delta": {"refusal": refusal}, "finish_reason": None}]})
        server.push(Reply(stream=chunks))
    else:
        body["choices"][0]["message"]["refusal"] = refusal
        server.push(body)
    box = ToolBox()
    model = make_model(server, stream=stream)
    try:
        result = await Branch(chat_model=model, tools=box.tools()).operate(instruction="x", response_format=Answer,
                                                                           actions=True)
    finally:
        await model.aclose()
    assert isinstance(result, RawOutput) and result.reason == "refusal" and "no text" in result.detail
    assert box.calls == {}


@pytest.mark.parametrize("refusal", ["", None, False, {}], ids=["empty", "null", "false", "an empty object"])
async def test_an_unset_refusal_is_none(server, refusal, anyio_backend):  # noqa: F811
    assert (await _plain_answer(server, "refusal", refusal, '{"answer": 4}')).answer == 4


async def _plain_answer(server: Any, field: str, value: Any, text: str = "x") -> Any:
    """What ``operate`` returns for one plain answer whose message ``field`` is ``value``."""
    body = completion(text)
    body["choices"][0]["message"][field] = value
    server.push(body)
    model = make_model(server)
    try:
        return await Branch(chat_model=model).operate(instruction="x", response_format=Answer)
    finally:
        await model.aclose()
