"""More shapes of the answers real OpenAI-compatible servers send: the older
``function_call`` message, refusal content parts, one call id in two choices,
event streams with a byte-order mark or multi-line ``data:`` fields, and
streamed arguments resent whole in every delta. Each is served by the
loopback server and run through ``operate()`` with real, counted tools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, RawOutput
from lionops.errors import EndpointResponseError
from lionops.testing import Reply, tool_call
from tests.openai_server import make_model, server  # noqa: F401 - fixtures
from tests.peers.test_api_answers import City, Counted, chunk, run

pytestmark = pytest.mark.anyio


def answer(message: dict[str, Any], finish: str = "stop", **choice: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-s", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, **choice}]}


def events(*chunks: dict[str, Any] | str) -> Reply:
    return Reply(stream=[c if isinstance(c, str) else f"data: {json.dumps(c)}\n\n" for c in chunks])


LEGACY = {
    "plain": answer({"content": None, "function_call": {"name": "search", "arguments": '{"q": "lion"}'}},
                    "function_call"),
    "stream": events(chunk({"role": "assistant", "function_call": {"name": "search", "arguments": '{"q":'}}),
                     chunk({"function_call": {"arguments": ' "lion"}'}}), chunk(finish="function_call")),
}


@pytest.mark.parametrize("shape", list(LEGACY))
async def test_a_legacy_function_call_runs_as_one_request(server, shape):
    result, trace, box, _ = await run(server, LEGACY[shape], model_kw={"stream": shape == "stream"}, actions=True)
    assert box.args == [("search", {"q": "lion"})]
    assert trace.exit == "enriched"


async def test_a_function_call_that_is_not_an_object_is_a_typed_error(server):
    server.push(answer({"content": None, "function_call": "search"}, "function_call"))
    m = make_model(server)
    box = Counted()
    with pytest.raises(EndpointResponseError, match="function_call that is not an object"):
        await Branch(chat_model=m, tools=box.tools()).operate(instruction="q", actions=True)
    await m.aclose()
    assert box.total == 0


REFUSAL_PART = [{"type": "refusal", "refusal": "I can't help with that."}]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_refusal_content_part_is_a_refusal(server, stream):
    reply = (events(chunk({"role": "assistant", "content": REFUSAL_PART}), chunk(finish="stop")) if stream
             else answer({"content": REFUSAL_PART}))
    result, trace, box, _ = await run(server, reply, model_kw={"stream": stream}, response_format=City,
                                      actions=True, handle_validation="return_value")
    assert isinstance(result, RawOutput) and result.reason == "refusal"
    assert "I can't help with that." in str(result) and box.total == 0
    assert len(server.chat_requests) == 1  # no parse model restates a refusal


async def test_one_call_id_in_two_choices_is_a_typed_error_naming_the_choices(server):
    call = tool_call("wipe_disk", {}, "call_same")
    body = answer({"content": None, "tool_calls": [call]}, "tool_calls")
    body["choices"].append({**body["choices"][0], "index": 1})
    server.push(body)
    m = make_model(server)
    box = Counted()
    with pytest.raises(EndpointResponseError, match="'call_same' in choice 0 and again in choice 1"):
        await Branch(chat_model=m, tools=box.tools()).operate(instruction="q", actions=True)
    await m.aclose()
    assert box.total == 0  # neither run twice nor once by a guess


PARIS = [chunk({"role": "assistant", "content": '{"answer":'}), chunk({"content": ' "Paris"}'}), chunk(finish="stop")]


def _data(c: dict[str, Any]) -> str:
    return f"data: {json.dumps(c)}\n\n"


STREAMS = {
    "byte-order-mark": ["\ufeff" + _data(PARIS[0]), *map(_data, PARIS[1:])],
    "multi-line-data": ["data: " + json.dumps(PARIS[0]).replace(', "model"', ',\ndata: "model"') + "\n\n",
                        *map(_data, PARIS[1:])],
    "crlf-and-fields": ["retry: 3000\r\n\r\n", ": keep-alive\r\n\r\n",
                        *("id: 1\r\nevent: message\r\ndata:" + json.dumps(c) + "\r\n\r\n" for c in PARIS)],
    "no-blank-lines": [f"data: {json.dumps(c)}\n" for c in PARIS],
    "empty-data-keep-alive": ["data:\n\n", "data: \n\n", *map(_data, PARIS[:2]), "data:\n\n", _data(PARIS[2])],
    "bare-cr": [f"data: {json.dumps(c)}\r\r" for c in PARIS],
    "crlf-split-across-reads": [x for c in PARIS for x in (f"data: {json.dumps(c)}\r", "\n\r", "\n")],
}


@pytest.mark.parametrize("shape", list(STREAMS))
async def test_event_stream_framings_give_the_whole_answer(server, shape):
    reply = Reply(stream=STREAMS[shape], pause_s=0.01 if shape == "crlf-split-across-reads" else 0.0)
    result, trace, box, _ = await run(server, reply, model_kw={"stream": True},
                                      response_format=City, handle_validation="raise")
    assert isinstance(result, City) and result.answer == "Paris"


def _call_delta(args: str, first: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": 0, "function": {"arguments": args}}
    if first:
        entry.update(id="call_1", type="function", function={"name": "get_weather", "arguments": args})
    return chunk({"tool_calls": [entry]})


CUMULATIVE = {
    "growing": [_call_delta('{"city":', True), _call_delta('{"city": "Lima"'), _call_delta('{"city": "Lima"}')],
    "whole-twice": [_call_delta('{"city": "Lima"}', True), _call_delta('{"city": "Lima"}')],
}


@pytest.mark.parametrize("shape", list(CUMULATIVE))
async def test_arguments_resent_whole_in_each_delta_are_not_doubled(server, shape):
    reply = events(*CUMULATIVE[shape], chunk(finish="tool_calls"))
    result, trace, box, _ = await run(server, reply, model_kw={"stream": True}, actions=True)
    assert box.args == [("get_weather", {"city": "Lima", "unit": "C"})]


BODY = json.dumps({"id": "chatcmpl-s", "object": "chat.completion", "model": "m",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                "finish_reason": "stop"}]}).encode()


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, br", "x-custom"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_content_encoding_that_cannot_be_decoded_is_a_typed_error(server, coding, stream):
    """httpx2 passes codings it has no decoder for through as is; the compressed
    bytes must never be read as the answer or previewed as if they were text."""
    server.push(Reply(stream=[], headers={"Content-Encoding": coding}) if stream
                else Reply(BODY, headers={"Content-Encoding": coding}, content_type="application/json"))
    m = make_model(server, stream=stream)
    with pytest.raises(EndpointResponseError, match=f"Content-Encoding '{coding.split(',')[-1].strip()}'") as info:
        await m.endpoint.chat([{"role": "user", "content": "x"}])
    await m.aclose()
    assert info.value.__cause__ is None and info.value.__context__ is None


async def test_an_error_status_with_an_undecodable_body_is_still_retried(server):
    server.push(Reply(b"\x8b\x00", status=503, headers={"Content-Encoding": "br"}),
                Reply(BODY, content_type="application/json"))
    m = make_model(server, max_retries=1, retry_after_cap=0.01)
    assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "hi"
    await m.aclose()
    assert len(server.chat_requests) == 2


async def test_a_body_with_a_byte_order_mark_is_read(server):
    server.push(Reply(b"\xef\xbb\xbf" + BODY, content_type="application/json"))
    m = make_model(server)
    assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "hi"
    await m.aclose()


@pytest.mark.parametrize("headers", [{"Retry-After": "nan"}, {"Retry-After": "NaN"},
                                     {"retry-after-ms": "nan", "Retry-After": "nan"}])
async def test_a_retry_after_that_is_no_number_of_seconds_falls_back_to_the_backoff(server, headers):
    """``float("nan")`` reads, but is no delay: the retry waits the backoff, not zero."""
    from lionops.clock import RecordingClock, use_clock

    server.push(Reply(status=503, headers=headers), Reply(BODY, content_type="application/json"))
    m = make_model(server, max_retries=1, backoff_initial=0.75)
    with use_clock(RecordingClock()) as clk:
        assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "hi"
    await m.aclose()
    assert clk.sleeps == [0.75]


# ---------------------------------------------------------------- a cut the server calls whole

_CUT_TEXTS = {
    "in a string": '{"answer": "Par',
    "in the requests": '{"answer": "Paris", "action_requests": [{"function": "get_weather", "arguments": {"city": "Os',
    "after prose": 'Here it is: {"answer": "Paris", "action_requests": [',
}


@pytest.mark.parametrize("finish", ["stop", None])
@pytest.mark.parametrize("where", list(_CUT_TEXTS))
@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_cut_inside_json_is_a_cut_whatever_the_finish_reason(server, finish, where, stream):
    """A server that reports ``stop`` (or nothing) for an answer that ends inside
    a JSON value: the answer is a cut-off RawOutput, never repaired into the
    model, and nothing in it runs; under ``"raise"`` a TruncatedOutputError."""
    from lionops import TruncatedOutputError

    text = _CUT_TEXTS[where]
    if stream:
        reply = events(chunk({"role": "assistant", "content": text[:10]}), chunk({"content": text[10:]}),
                       chunk(finish=finish or "stop"))
    else:
        reply = answer({"content": text}, finish)  # type: ignore[arg-type]
    result, trace, box, _ = await run(server, reply, model_kw={"stream": stream}, response_format=City, actions=True)
    assert isinstance(result, RawOutput) and result.reason == "length" and "ends inside a JSON value" in result.detail
    assert trace.exit == "mismatch_return_value" and box.total == 0
    server.push(reply)
    m = make_model(server, stream=stream)
    with pytest.raises(TruncatedOutputError):
        await Branch(chat_model=m, tools=box.tools()).operate(
            instruction="q", response_format=City, actions=True, handle_validation="raise")
    await m.aclose()
    assert box.total == 0


async def test_a_whole_answer_with_braces_in_its_prose_is_no_cut(server):
    """Braces in prose and a whole JSON answer after them: parsed as usual."""
    result, trace, box, _ = await run(
        server, answer({"content": 'Use {city} as the key. {"answer": "Paris"}'}), response_format=City)
    assert isinstance(result, City) and result.answer == "Paris"
