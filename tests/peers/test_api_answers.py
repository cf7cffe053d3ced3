"""Answers that real OpenAI-compatible servers send, each shape served by the
loopback server and run through ``operate()`` (or ``chat()`` where only the
endpoint is concerned). Every shape asserts what the caller gets and which
tools ran (real functions that count their calls)."""

from __future__ import annotations

import functools
import json
import zlib
from collections import Counter
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionops import Branch, MismatchError, RawOutput
from lionops.errors import ConfigurationError, EndpointProviderError, EndpointResponseError, EndpointTimeoutError
from lionops.testing import Reply, chunked, completion, tool_call
from tests.helpers import Answer
from tests.openai_server import make_model, operate_under, sent, server, user_text  # noqa: F401 - fixtures
from tests.peers.test_api_operate import POLICIES, Forecast

pytestmark = pytest.mark.anyio


class City(BaseModel):
    answer: str


class Counted:
    """Real tools that count their calls, with one that must never run."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.args: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[Any]:
        box = self

        def get_weather(city: str, unit: str = "C") -> dict[str, Any]:
            """Weather for a city."""
            box.calls["get_weather"] += 1
            box.args.append(("get_weather", {"city": city, "unit": unit}))
            return {"city": city, "temp": 20, "unit": unit}

        def search(q: str) -> list[str]:
            """Search."""
            box.calls["search"] += 1
            box.args.append(("search", {"q": q}))
            return [q]

        def terminal(command: str) -> str:
            """Run a command (pretend)."""
            box.calls["terminal"] += 1
            box.args.append(("terminal", {"command": command}))
            return "ok"

        def wipe_disk() -> str:
            """Destroys everything (must never run in these tests)."""
            box.calls["wipe_disk"] += 1
            return "wiped"

        return [get_weather, search, terminal, wipe_disk]

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def chunk(delta: dict[str, Any] | None = None, *, index: int = 0, finish: str | None = None,
          **top: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}], **top}


USAGE_ONLY = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "m", "choices": [],
              "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}

WIPE = {"function": "wipe_disk", "arguments": {}}


async def run(server, reply: Any, *, model_kw: dict[str, Any] | None = None, **kw: Any):
    """``operate_traced`` with the Counted tools against one scripted reply."""
    box = Counted()
    server.push(reply)
    m = make_model(server, **(model_kw or {}))
    branch = Branch(chat_model=m, tools=box.tools())
    try:
        result, trace = await branch.operate_traced(instruction="q", **kw)
    finally:
        await m.aclose()
    return result, trace, box, branch


# ---------------------------------------------------------------- 1. where the tools go


async def test_a_caller_model_asks_for_requests_in_the_structured_answer(server):
    answer = completion(json.dumps({"city": "Oslo", "temp_c": 3,
                                    "action_requests": [{"function": "get_weather", "arguments": {"city": "Oslo"}}]}))
    result, trace, box, _ = await run(server, answer, response_format=Forecast, actions=True)
    body = sent(server)
    assert "tools" not in body and "tool_choice" not in body
    assert "action_requests" in body["response_format"]["json_schema"]["schema"]["properties"]
    prompt = user_text(body)
    assert "Tools you may request in action_requests" in prompt
    assert all(name in prompt for name in ("get_weather", "search", "terminal", "wipe_disk"))
    assert trace.exit == "enriched" and isinstance(result, Forecast)
    assert box.args == [("get_weather", {"city": "Oslo", "unit": "C"})]
    assert trace.meta["tools_offered"] == "prompt"


async def test_without_a_caller_model_the_tools_go_natively(server):
    result, trace, box, _ = await run(server, completion(None, tool_calls=[tool_call("search", {"q": "lion"})]),
                                      actions=True)
    body = sent(server)
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "search", "terminal", "wipe_disk"]
    assert "Tools you may request" not in user_text(body)
    assert trace.exit == "enriched" and box.calls == {"search": 1}
    assert trace.meta["tools_offered"] == "native"


@pytest.mark.parametrize("where", ["endpoint", "operate"])
async def test_native_tools_on_opt_in(server, where):
    answer = completion('{"city": "Oslo", "temp_c": 3}', tool_calls=[tool_call("get_weather", {"city": "Oslo"})])
    model_kw = {"native_tools": True} if where == "endpoint" else {}
    call_kw = {"native_tools": True} if where == "operate" else {}
    result, trace, box, _ = await run(server, answer, model_kw=model_kw, response_format=Forecast, actions=True,
                                      **call_kw)
    body = sent(server)
    assert [t["function"]["name"] for t in body["tools"]][0] == "get_weather"
    assert "native_tools" not in body  # an invocation option for lionops, never sent
    assert "Tools you may request" not in user_text(body)
    assert trace.exit == "enriched" and box.calls == {"get_weather": 1} and result.city == "Oslo"


TOOLS_ONLY_TEXT = {"null": None, "empty": "", "blank": "  \n", "preamble": "I'll check the weather in Oslo.",
                   "thinking": "<think>I need the weather first.</think>"}


@pytest.mark.parametrize("text", list(TOOLS_ONLY_TEXT))
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("policy", POLICIES)
async def test_tool_calls_only_under_a_caller_model_say_why(server, policy, stream, text):
    done = completion(TOOLS_ONLY_TEXT[text],
                      tool_calls=[tool_call("get_weather", {"city": "Oslo"}), tool_call("wipe_disk", {})])
    box = Counted()
    server.push(Reply(stream=chunked(done)) if stream else done)
    m = make_model(server, native_tools=True, stream=stream)
    branch = Branch(chat_model=m, tools=box.tools())
    out = await operate_under(branch, policy, MismatchError, instruction="q", response_format=Forecast, actions=True)
    await m.aclose()
    trace = branch.traces[-1]
    assert box.total == 0 and len(server.chat_requests) == 1  # the text is never restated by a parse model
    assert trace.meta["raw_output"]["reason"] == "tool_calls_only"
    assert "tool calls only, no answer fields" in trace.meta["raw_output"]["detail"]
    if policy == "raise":
        assert out.reason == "tool_calls_only" and "tool calls only, no answer fields" in str(out)
        assert "get_weather" in str(out)
    elif policy == "return_value":
        assert isinstance(out, RawOutput) and out.reason == "tool_calls_only"
        json.dumps(out)  # what the default policy hands back serializes
    else:
        assert out is None


async def test_a_failed_answer_with_native_calls_serializes_under_return_value(server):
    answer = completion('{"citty": "Oslo"}', tool_calls=[tool_call("get_weather", {"city": "Oslo"})])
    result, trace, box, _ = await run(server, answer, model_kw={"native_tools": True},
                                      response_format=Forecast, actions=True)
    assert trace.exit == "mismatch_return_value" and box.total == 0
    assert json.loads(json.dumps(result))["action_requests"][0]["function"] == "get_weather"


# ---------------------------------------------------------------- 2. reasoning is never the answer

DRAFT = json.dumps({"answer": "tmp", "action_requests": [WIPE]})
THINKING = {
    "think": f'<think>A first guess would be {DRAFT} ... no, it is Paris.</think>\n{{"answer": "Paris"}}',
    "thinking": f'<thinking>\n{DRAFT}\n</thinking>\n\n{{"answer": "Paris"}}',
    "reasoning": f'<reasoning>{DRAFT}</reasoning>{{"answer": "Paris"}}',
    "upper-case": f'<THINK>{DRAFT}</THINK>\n```json\n{{"answer": "Paris"}}\n```',
    "closing-tag-only": f'Let me draft: {DRAFT}\n</think>\n\n{{"answer": "Paris"}}',
    "two-blocks": f'<think>{DRAFT}</think>\n<think>{DRAFT}</think>\n{{"answer": "Paris"}}',
    "channels": (f"<|channel|>analysis<|message|>{DRAFT}<|end|><|start|>assistant<|channel|>final<|message|>"
                 '{"answer": "Paris"}<|return|>'),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("shape", list(THINKING))
async def test_json_inside_reasoning_blocks_is_never_the_answer(server, shape, stream):
    done = completion(THINKING[shape])
    result, trace, box, branch = await run(server, Reply(stream=chunked(done)) if stream else done,
                                           response_format=City, actions=True, handle_validation="raise")
    assert isinstance(result, City) and result.answer == "Paris"
    assert box.total == 0 and trace.exit == "no_requests"
    assistant = branch.messages.by_role("assistant")[-1]
    assert "wipe_disk" in assistant.metadata["reasoning"] and "wipe_disk" not in (assistant.content or "")


@pytest.mark.parametrize("policy", POLICIES)
async def test_an_unclosed_reasoning_block_holds_no_answer(server, policy):
    box = Counted()
    server.push(completion(f"<think>Drafting {DRAFT} and then"))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=box.tools())
    out = await operate_under(branch, policy, MismatchError, instruction="q", response_format=City, actions=True)
    await m.aclose()
    assert box.total == 0 and len(server.chat_requests) == 1  # no parse-model restating of reasoning
    if policy == "return_value":
        assert not isinstance(out, City) and "wipe_disk" not in json.dumps(out)


def reasoning_stream(field: str) -> list[Any]:
    danger = json.dumps({"action_requests": [{"function": "wipe_disk", "arguments": {}}]})
    call = {"index": 0, "id": "call_t", "type": "function", "function": {"name": "terminal", "arguments": ""}}
    return [
        chunk({"role": "assistant", "content": None, field: "The user wants disk usage. "}),
        chunk({"content": None, field: f"Not {danger}. "}),
        chunk({"content": None, "tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"df -h"}'}}]}),
        chunk({}, finish="tool_calls"),
        USAGE_ONLY,
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_reasoning_fields_are_kept_never_parsed(server, field, stream):
    if stream:
        reply = Reply(stream=reasoning_stream(field))
    else:
        body = completion(None, tool_calls=[tool_call("terminal", {"command": "df -h"})])
        body["choices"][0]["message"][field] = f'I could call {json.dumps({"action_requests": [WIPE]})}.'
        reply = Reply(body)
    result, trace, box, branch = await run(server, reply, actions=True)
    assert box.args == [("terminal", {"command": "df -h"})]
    assert trace.exit == "enriched"
    assistant = branch.messages.by_role("assistant")[-1]
    assert "wipe_disk" in assistant.metadata["reasoning"] and trace.meta["reasoning_chars"] > 0
    if stream:
        assert trace.meta["usage"]["total_tokens"] == 18  # the final usage-only chunk is recorded


# ---------------------------------------------------------------- 3. never a fragment as the answer


async def test_raw_control_characters_do_not_demote_the_outer_object(server):
    content = ('{"city": "Oslo\nnorth", "temp_c": 3, "action_requests": '
               '[{"function": "get_weather", "arguments": {"city": "Oslo\tN"}}]}')
    result, trace, box, _ = await run(server, completion(content), response_format=Forecast, actions=True)
    assert isinstance(result, Forecast) and result.city == "Oslo\nnorth"
    assert box.args == [("get_weather", {"city": "Oslo\tN", "unit": "C"})]


async def test_raw_control_characters_in_native_arguments_are_text(server):
    call = tool_call("terminal", '{"command": "printf \'a\nb\'"}')  # a raw newline inside the JSON string
    result, trace, box, _ = await run(server, completion(None, tool_calls=[call]), actions=True)
    assert box.args == [("terminal", {"command": "printf 'a\nb'"})]


BROKEN_OUTER = {
    "bad-token": '{"answer": 1, "meta": {"k": 1}, "action_requests": [{"function": "wipe_disk", "arguments": {}}]'
                 ' oops}',
    "unclosed": 'Here: {"answer": 1, "meta": {"k": 1}, "action_requests": [{"function": "wipe_disk", "arguments": {}}',
    "fenced": '```json\n{"answer": 1 "meta": {"k": 1}, "action_requests": [{"function": "wipe_disk", "arguments": {}}]}'
              '\n```',
}


@pytest.mark.parametrize("shape", list(BROKEN_OUTER))
async def test_an_inner_object_of_a_broken_outer_one_is_never_the_answer(server, shape):
    result, trace, box, _ = await run(server, completion(BROKEN_OUTER[shape]), response_format=Answer, actions=True)
    assert box.total == 0
    assert result != {"k": 1} and result != {"function": "wipe_disk", "arguments": {}}
    assert not isinstance(result, dict) or "answer" in result
    if isinstance(result, Answer):  # repaired: the outer object, its requests never run
        assert result.answer == 1 and all(r.output.get("error") for r in result.action_responses or [])


@pytest.mark.parametrize("policy", POLICIES)
async def test_deep_nesting_in_the_answer_is_the_mismatch_policy(server, policy):
    deep = '{"answer": ' + "[" * 100_000 + "]" * 100_000 + "}"
    box = Counted()
    server.push(completion(deep))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=box.tools())
    out = await operate_under(branch, policy, MismatchError, instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    assert box.total == 0 and len(server.chat_requests) == 1
    if policy == "raise":
        assert out.reason == "too_deep"
    elif policy == "return_value":
        assert isinstance(out, RawOutput) and out.reason == "too_deep"


async def test_a_deeply_nested_body_is_a_response_error(server):
    server.push(Reply(body='{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}", content_type="application/json"))
    m = make_model(server)
    with pytest.raises(EndpointResponseError, match="nested too deep"):
        await m.endpoint.chat([{"role": "user", "content": "x"}])
    await m.aclose()


# ---------------------------------------------------------------- 4. stream endings and errors

ANSWER_WITH_REQUEST = json.dumps({"answer": 1, "action_requests": [WIPE]})
BAD_ENDINGS: dict[str, tuple[list[Any], bool, type[Exception], str]] = {
    "error-chunk": ([chunk({"content": ANSWER_WITH_REQUEST}),
                     {"error": {"message": "upstream overloaded", "code": 502}}], True,
                    EndpointProviderError, "upstream overloaded"),
    "error-event": ([chunk({"content": ANSWER_WITH_REQUEST}),
                     'event: error\ndata: {"error": {"message": "model crashed", "type": "server_error"}}\n\n'], False,
                    EndpointProviderError, "model crashed"),
    "error-shaped-chunk": ([chunk({"content": ANSWER_WITH_REQUEST}),
                            {"object": "error", "message": "engine dead", "type": "InternalServerError"}], True,
                           EndpointProviderError, "engine dead"),
    "error-text": ([chunk({"content": ANSWER_WITH_REQUEST}), {"error": "rate limited upstream"}], True,
                   EndpointProviderError, "rate limited upstream"),
    "error-event-message-only": ([chunk({"content": ANSWER_WITH_REQUEST}),
                                  'event: error\ndata: {"message": "quota exceeded"}\n\n'], False,
                                 EndpointProviderError, "quota exceeded"),
    "error-event-text": ([chunk({"content": ANSWER_WITH_REQUEST}), "event: error\ndata: internal failure\n\n"],
                         False, EndpointProviderError, "internal failure"),
    "finish-error": ([chunk({"content": ANSWER_WITH_REQUEST}),
                      {**chunk({}, finish="error"), "choices": [{"index": 0, "delta": {}, "finish_reason": "error",
                                                                 "error": {"message": "provider failed"}}]}],
                     True, EndpointProviderError, "provider failed"),
    "finish-error-bare": ([chunk({"content": ANSWER_WITH_REQUEST}), chunk({}, finish="error")], True,
                          EndpointProviderError, "error"),
    "done-without-finish": ([chunk({"content": ANSWER_WITH_REQUEST}), USAGE_ONLY], True,
                            EndpointResponseError, r"incomplete stream \(\[DONE\]"),
    "ended-early": ([chunk({"content": ANSWER_WITH_REQUEST})], False, EndpointResponseError, "incomplete stream"),
    "interim-empty-then-end": ([chunk({"content": ANSWER_WITH_REQUEST}, finish="")], False,
                               EndpointResponseError, "incomplete stream"),
}


@pytest.mark.parametrize("case", list(BAD_ENDINGS))
async def test_a_stream_that_does_not_end_complete_is_a_typed_error(server, case):
    events, done, error, message = BAD_ENDINGS[case]
    box = Counted()
    server.push(Reply(stream=events, done=done))
    m = make_model(server, stream=True)
    branch = Branch(chat_model=m, tools=box.tools())
    with pytest.raises(error, match=message) as info:
        await branch.operate(instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    assert box.total == 0
    if error is EndpointProviderError and case != "finish-error-bare":
        assert message in info.value.provider_message
    assert branch.messages.by_role("assistant") == []  # nothing was recorded as an answer


async def test_a_plain_completion_that_ended_in_error_is_a_provider_error(server):
    body = completion('{"answer": 1}', finish_reason="error")
    body["choices"][0]["error"] = {"message": "backend went away", "code": 500}
    server.push(body)
    m = make_model(server)
    with pytest.raises(EndpointProviderError, match="backend went away") as info:
        await Branch(chat_model=m).operate(instruction="q", response_format=Answer)
    await m.aclose()
    assert info.value.code == 500


async def test_interim_empty_finish_reasons_are_not_an_end(server):
    call = {"index": 0, "id": "call_l", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    parts = ['{"city": ', '"Lima", "unit"', ': "F"}']
    events = [chunk({"role": "assistant", "content": None}, finish=""), chunk({"tool_calls": [call]}, finish="")]
    events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}, finish="") for p in parts]
    events += [chunk({}, finish="tool_calls"), USAGE_ONLY]
    result, trace, box, _ = await run(server, Reply(stream=events), model_kw={"stream": True}, actions=True)
    assert box.args == [("get_weather", {"city": "Lima", "unit": "F"})]
    assert trace.meta["usage"]["total_tokens"] == 18 and trace.meta["finish_reason"] == "tool_calls"


# ---------------------------------------------------------------- 5. streamed parallel calls

WEATHER_ARGS, SEARCH_ARGS = '{"city": "Oslo"}', '{"q": "lion"}'


def _head(name: str, call_id: str | None, index: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": ""}}
    if call_id is not None:
        entry["id"] = call_id
    if index is not None:
        entry["index"] = index
    return entry


def _frag(text: Any, call_id: str | None = None, index: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"function": {"arguments": text}}
    if call_id is not None:
        entry["id"] = call_id
    if index is not None:
        entry["index"] = index
    return entry


def _halves(text: str) -> tuple[str, str]:
    return text[: len(text) // 2], text[len(text) // 2:]


W1, W2 = _halves(WEATHER_ARGS)
S1, S2 = _halves(SEARCH_ARGS)

#: One stream, two calls, keyed the ways servers key them.
PARALLEL: dict[str, list[list[dict[str, Any]]]] = {
    "by-index": [[_head("get_weather", "a", 0)], [_frag(W1, index=0)], [_frag(W2, index=0)],
                 [_head("search", "b", 1)], [_frag(S1, index=1)], [_frag(S2, index=1)]],
    "interleaved-indexes": [[_head("get_weather", "a", 0), _head("search", "b", 1)], [_frag(W1, index=0)],
                            [_frag(S1, index=1)], [_frag(W2, index=0), _frag(S2, index=1)]],
    "one-index-for-all-calls": [[_head("get_weather", "a", 0)], [_frag(W1, index=0)], [_frag(W2, index=0)],
                                [_head("search", "b", 0)], [_frag(S1, index=0)], [_frag(S2, index=0)]],
    "no-index-ids-on-heads": [[_head("get_weather", "a", None)], [_frag(W1)], [_frag(W2)],
                              [_head("search", "b", None)], [_frag(S1)], [_frag(S2)]],
    "no-index-id-on-every-delta": [[_head("get_weather", "a", None)], [_frag(W1, "a")],
                                   [{**_head("search", "b", None), "function": {"name": "search"}}],
                                   [_frag(S1, "b")], [_frag(W2, "a")], [_frag(S2, "b")]],
    "keyed-by-nothing": [[_head("get_weather", None, None)], [_frag(W1)], [_frag(W2)],
                         [_head("search", None, None)], [_frag(S1)], [_frag(S2)]],
    "whole-call-per-delta": [[{**_head("get_weather", "a", 0), "function": {"name": "get_weather",
                                                                           "arguments": WEATHER_ARGS}}],
                             [{**_head("search", "b", 1), "function": {"name": "search", "arguments": SEARCH_ARGS}}]],
    "arguments-as-objects": [[{**_head("get_weather", "a", 0), "function": {"name": "get_weather",
                                                                           "arguments": {"city": "Oslo"}}}],
                             [_head("search", "b", 1)], [_frag({"q": "lion"}, index=1)]],
    "one-index-interleaved-by-id": [[_head("get_weather", "a", 0)], [_head("search", "b", 0)],
                                    [_frag(W1, "a", 0)], [_frag(S1, "b", 0)], [_frag(W2, "a", 0)],
                                    [_frag(S2, "b", 0)]],
    "one-id-for-all-calls": [[_head("get_weather", "call_0", 0)], [_frag(W1, "call_0", 0)],
                             [_head("search", "call_0", 1)], [_frag(S1, "call_0", 1)], [_frag(W2, "call_0", 0)],
                             [_frag(S2, "call_0", 1)]],
    "new-id-on-every-fragment": [[_head("get_weather", "a", 0)], [_frag(W1, "x1", 0)], [_frag(W2, "x2", 0)],
                                 [_head("search", "b", 1)], [_frag(S1, "x3", 1)], [_frag(S2, "x4", 1)]],
    "id-repeated-index-new-per-call": [[_head("get_weather", "a", 0)], [_frag(W1, "a", 0)], [_frag(W2, "a", 0)],
                                       [_head("search", "b", 1)], [_frag(S1, "b", 1)], [_frag(S2, "b", 1)]],
}


@pytest.mark.parametrize("keying", list(PARALLEL))
async def test_streamed_parallel_calls_are_told_apart(server, keying):
    events = [chunk({"role": "assistant", "content": None})]
    events += [chunk({"tool_calls": entries}) for entries in PARALLEL[keying]]
    events += [chunk({}, finish="tool_calls"), USAGE_ONLY]
    result, trace, box, _ = await run(server, Reply(stream=events), model_kw={"stream": True}, actions=True)
    assert [(r.function, r.arguments) for r in result.action_requests] == [
        ("get_weather", {"city": "Oslo"}), ("search", {"q": "lion"})]
    assert box.calls == {"get_weather": 1, "search": 1} and trace.exit == "enriched"


async def test_plain_arguments_sent_as_an_object_are_used_whole(server):
    call = {"id": "call_p", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    result, trace, box, _ = await run(server, completion(None, tool_calls=[call]), actions=True)
    assert box.args == [("get_weather", {"city": "Paris", "unit": "C"})]


# ---------------------------------------------------------------- 6. choices


def two_choices() -> dict[str, Any]:
    body = completion("I'll check the weather in Oslo.")
    second = {"index": 1, "finish_reason": "tool_calls",
              "message": {"role": "assistant", "content": None,
                          "tool_calls": [tool_call("get_weather", {"city": "Oslo"})]}}
    body["choices"][0]["finish_reason"] = "stop"
    body["choices"].append(second)
    return body


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_tool_call_in_a_second_choice_is_not_dropped(server, stream):
    if stream:
        call = {"index": 0, "id": "call_o", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        reply = Reply(stream=[
            chunk({"role": "assistant", "content": "I'll check the weather in Oslo."}),
            chunk({}, finish="stop"),
            chunk({"role": "assistant", "tool_calls": [call]}, index=1),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}]}, index=1),
            chunk({}, index=1, finish="tool_calls"),
            USAGE_ONLY,
        ])
    else:
        reply = Reply(two_choices())
    result, trace, box, branch = await run(server, reply, model_kw={"stream": stream}, actions=True)
    assert box.args == [("get_weather", {"city": "Oslo", "unit": "C"})]
    assert trace.exit == "enriched" and trace.meta["choices"] == 2
    assert branch.messages.by_role("assistant")[-1].content == "I'll check the weather in Oslo."


async def test_with_n_above_one_the_first_choice_is_the_answer(server):
    body = two_choices()
    body["choices"][0]["message"]["content"] = '{"answer": 1}'
    result, trace, box, branch = await run(server, body, response_format=Answer, n=2)
    assert sent(server)["n"] == 2 and len(server.chat_requests) == 1
    assert isinstance(result, Answer) and result.answer == 1
    assert box.total == 0 and trace.meta["choices"] == 2


# ---------------------------------------------------------------- 7. HTTP 200 carrying an error

ODD_BODIES: dict[str, tuple[Reply, type[Exception], str]] = {
    "error-object": (Reply({"error": {"message": "This content was flagged by moderation", "code": 502}}),
                     EndpointProviderError, "flagged by moderation"),
    "error-text": (Reply({"error": "Provider returned error"}), EndpointProviderError, "Provider returned error"),
    "error-beside-choices": (Reply({"choices": [], "error": {"message": "upstream timeout"}}),
                             EndpointProviderError, "upstream timeout"),
    "error-shaped-object": (Reply({"object": "error", "message": "The model is overloaded", "code": 503}),
                            EndpointProviderError, "The model is overloaded"),
    "choices-empty": (Reply({"choices": []}), EndpointResponseError, "no choices"),
    "choices-null": (Reply({"choices": None}), EndpointResponseError, "no choices"),
    "no-choices-key": (Reply({"object": "chat.completion", "model": "m"}), EndpointResponseError, "no choices"),
    "choice-null": (Reply({"choices": [None]}), EndpointResponseError, "choice that is not an object"),
    "message-text": (Reply({"choices": [{"index": 0, "message": "hi"}]}), EndpointResponseError, "message"),
    "json-list": (Reply([{"choices": []}]), EndpointResponseError, "not an object"),
    "json-null": (Reply("null", content_type="application/json"), EndpointResponseError, "not an object"),
    "json-number": (Reply("42", content_type="application/json"), EndpointResponseError, "not an object"),
    "html-page": (Reply("<html><body>Bad gateway</body></html>", content_type="text/html"),
                  EndpointResponseError, "not JSON"),
    "binary": (Reply(b"\x00\xff\xfe", content_type="application/octet-stream"), EndpointResponseError, "not JSON"),
    "empty": (Reply(b"", content_type="application/json"), EndpointResponseError, "not JSON"),
}


@pytest.mark.parametrize("case", list(ODD_BODIES))
async def test_a_200_that_is_not_a_completion_is_a_typed_error(server, case):
    reply, error, message = ODD_BODIES[case]
    box = Counted()
    server.push(reply)
    m = make_model(server)
    branch = Branch(chat_model=m, tools=box.tools())
    with pytest.raises(error, match=message) as info:
        await branch.operate(instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    assert box.total == 0 and branch.messages.by_role("assistant") == []
    if error is EndpointProviderError:
        assert message in info.value.provider_message


# ---------------------------------------------------------------- 8. stream: true ignored


@pytest.mark.parametrize("shape", ["plain-json", "events-labelled-json"])
async def test_a_server_that_ignores_stream_true_is_used(server, shape):
    done = completion('{"answer": 5}', tool_calls=[tool_call("search", {"q": "lion"})])
    if shape == "plain-json":
        reply = Reply(done)
    else:
        events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunked(done)) + "data: [DONE]\n\n"
        reply = Reply(events, content_type="application/json")
    result, trace, box, _ = await run(server, reply, model_kw={"stream": True, "native_tools": True},
                                      response_format=Answer, actions=True)
    assert sent(server)["stream"] is True
    assert isinstance(result, Answer) and result.answer == 5 and box.calls == {"search": 1}


async def test_one_chunk_sent_as_a_plain_body_is_read_as_a_stream(server):
    whole = chunk({"role": "assistant", "content": '{"answer": 2}'}, finish="stop")
    cut = chunk({"role": "assistant", "content": '{"answer": 2, "action_requests": [{"function": "wipe_disk"}]}'})
    server.push(Reply(whole), Reply(cut))
    m = make_model(server)
    assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == '{"answer": 2}'
    with pytest.raises(EndpointResponseError, match="incomplete stream"):
        await m.endpoint.chat([{"role": "user", "content": "x"}])
    await m.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_content_parts_and_reasoning_parts(server, stream):
    parts = [{"type": "thinking", "thinking": f"draft {DRAFT}"}, {"type": "text", "text": '{"answer": "Paris"}'}]
    if stream:
        reply = Reply(stream=[chunk({"role": "assistant", "content": parts}), chunk({}, finish="stop")])
    else:
        body = completion(None)
        body["choices"][0]["message"]["content"] = parts
        reply = Reply(body)
    result, trace, box, branch = await run(server, reply, model_kw={"stream": stream}, response_format=City,
                                           actions=True)
    assert isinstance(result, City) and result.answer == "Paris" and box.total == 0
    assert "wipe_disk" in branch.messages.by_role("assistant")[-1].metadata["reasoning"]


# ---------------------------------------------------------------- 9. size


@functools.cache
def gzip_bomb(inflated: int) -> bytes:
    """A gzip body that inflates to ``inflated`` bytes of one long JSON string."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [comp.compress(b'{"choices": [{"index": 0, "message": {"content": "')]
    piece = b"a" * (1 << 20)
    for _ in range(inflated // len(piece)):
        out.append(comp.compress(piece))
    out.append(comp.compress(b'"}}]}'))
    out.append(comp.flush())
    return b"".join(out)


async def test_a_gzip_bomb_stops_at_the_cap(server):
    bomb = gzip_bomb(64 << 20)  # about 64 KiB on the wire, 64 MiB inflated (four times the default cap)
    assert len(bomb) < 1 << 20
    server.push(Reply(bomb, headers={"Content-Encoding": "gzip"}, content_type="application/json"))
    m = make_model(server)
    with pytest.raises(EndpointResponseError, match="larger than max_response_bytes=16777216"):
        await m.endpoint.chat([{"role": "user", "content": "x"}])
    await m.aclose()


async def test_a_gzip_body_under_the_cap_is_read(server):
    raw = json.dumps(completion("zipped")).encode()
    server.push(Reply(_gzip(raw), headers={"Content-Encoding": "gzip"}, content_type="application/json"))
    m = make_model(server)
    assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "zipped"
    await m.aclose()


@pytest.mark.parametrize("encoding", ["deflate-zlib", "deflate-raw", "corrupt-gzip"])
async def test_other_compressed_bodies(server, encoding):
    raw = json.dumps(completion("deflated")).encode()
    if encoding == "deflate-zlib":
        body, header = zlib.compress(raw), "deflate"
    elif encoding == "deflate-raw":
        comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        body, header = comp.compress(raw) + comp.flush(), "deflate"
    else:
        body, header = _gzip(raw)[:40] + b"\x00garbage" * 20, "gzip"
    server.push(Reply(body, headers={"Content-Encoding": header}, content_type="application/json"))
    m = make_model(server)
    if encoding == "corrupt-gzip":
        with pytest.raises(EndpointResponseError, match="cannot be decoded"):
            await m.endpoint.chat([{"role": "user", "content": "x"}])
    else:
        assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "deflated"
    await m.aclose()


def _gzip(data: bytes) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    return comp.compress(data) + comp.flush()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_the_size_cap_is_configurable_and_holds_for_streams(server, stream):
    text = "x" * 4096
    if stream:
        server.push(Reply(stream=[chunk({"content": text}) for _ in range(64)] + [chunk({}, finish="stop")]))
    else:
        server.push(completion(text * 64))
    m = make_model(server, max_response_bytes=64 * 1024, stream=stream)
    with pytest.raises(EndpointResponseError, match="larger than max_response_bytes=65536"):
        await m.endpoint.chat([{"role": "user", "content": "x"}])
    await m.aclose()


@pytest.mark.parametrize("announced", ["exact", "understated"])
async def test_a_body_with_a_content_length_is_capped_by_what_was_read(announced):
    """A body sent as is with its Content-Length is read in one piece: one at
    the cap is read; a transport that sends more than it announced is still
    refused at the cap (the length read is counted, not the header)."""
    import httpx2

    from lionops.runtime import use_runtime

    cap = 64 * 1024
    body = json.dumps(completion("y" * (cap - 2000))).encode()
    assert len(body) < cap
    body += b" " * (cap - len(body))  # exactly the cap
    if announced == "understated":
        body += b" " * 4096  # past the cap, announced as within it

    class Transport(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            await request.aread()
            headers = {"content-type": "application/json", "content-length": str(min(len(body), cap))}
            return httpx2.Response(200, headers=headers, stream=httpx2.ByteStream(body))

    m = make_model_offline(max_response_bytes=cap)
    with use_runtime(http_transport=Transport()):
        if announced == "exact":
            assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == "y" * (cap - 2000)
        else:
            with pytest.raises(EndpointResponseError, match=f"larger than max_response_bytes={cap}"):
                await m.endpoint.chat([{"role": "user", "content": "x"}])
    await m.aclose()


async def test_a_huge_answer_is_never_sent_to_the_parse_model(server):
    prose = "The answer is probably five, " * 5000  # 145 000 characters, no JSON
    server.push(completion(prose), completion('{"answer": 5}'))
    m = make_model(server)
    branch = Branch(chat_model=m, parse_model=m)
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer)
    await m.aclose()
    assert len(server.chat_requests) == 1
    assert result == prose and "above" in trace.meta["parse_model_skipped"]


def test_limits_must_be_positive():
    for bad in ({"silence_timeout": 0}, {"max_response_bytes": 0}):
        with pytest.raises(ConfigurationError):
            make_model_offline(**bad)


def make_model_offline(**kw: Any) -> Any:
    from lionops import iModel

    return iModel(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key="k", **kw)


# ---------------------------------------------------------------- 10. silence in streams


@pytest.mark.parametrize("then", ["ping", "silence"])
async def test_a_stream_that_goes_silent_ends_with_a_typed_timeout(server, then):
    """Keep-alive comments every 50 ms do not reset the 0.5 s silence bound
    (the per-read timeout of 30 s would never fire under them)."""
    box = Counted()
    server.push(Reply(stream=[chunk({"role": "assistant", "content": '{"answer": '})], done=False, then=then,
                      hang_s=60))
    m = make_model(server, stream=True, timeout=30, silence_timeout=0.5)
    branch = Branch(chat_model=m, tools=box.tools())
    with anyio.fail_after(25):  # a generous real bound: the test must not hang
        with pytest.raises(EndpointTimeoutError, match="silence_timeout"):
            await branch.operate(instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    assert box.total == 0


async def test_data_events_reset_the_silence_bound(server):
    events = [chunk({"content": part}) for part in ('{"ans', 'wer": ', "3}")] + [chunk({}, finish="stop")]
    server.push(Reply(stream=events, pause_s=0.2))
    m = make_model(server, stream=True, silence_timeout=5)
    assert (await m.endpoint.chat([{"role": "user", "content": "x"}])).text == '{"answer": 3}'
    await m.aclose()


def test_caller_model_of_each_response_format():
    from lionops.middles.api import caller_model
    from lionops.operative import Step

    def generated(base=None, **kw):
        return Step.respond_operative(Step.request_operative(base_type=base, **kw)).response_type

    assert caller_model(Forecast) is Forecast
    assert caller_model(Forecast(city="x", temp_c=1)) is Forecast
    assert caller_model(generated(Forecast, actions=True)) is Forecast
    assert caller_model(generated(actions=True)) is None
    assert caller_model(generated(actions=True, reason=True)) is None
    assert caller_model({"type": "object"}) is None and caller_model(None) is None
