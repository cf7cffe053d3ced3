"""An answer whose finish reason is missing, or one no endpoint maps (a
host's own cut such as ``model_length`` or ``insufficient_system_resource``,
a new Gemini reason), is never taken for a whole one: it comes back as an
uncoerced ``RawOutput`` (``no_finish_reason`` / ``unknown_finish_reason``),
nothing is parsed from it, and none of its tool calls runs; on Chat
Completions and every native protocol, answered in one plain body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, RawOutput, iModel
from lionops.endpoints.openai.response import WHOLE_FINISH_REASONS
from lionops.testing import Reply, chunked, completion, tool_call
from lionops.testing.native import NativeReply, Turn, anthropic_body, google_body, responses_body
from tests.helpers import Answer, ToolBox
from tests.native_recordings import ScriptPeer, endpoint_options
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio

TURN = Turn(text=json.dumps({"answer": 1}), calls=[("c1", "get_weather", {"city": "Oslo"})])
#: finish marker -> the RawOutput's reason
FINISHES: dict[Any, str] = {None: "no_finish_reason", "": "no_finish_reason", "model_length": "unknown_finish_reason",
                            "insufficient_system_resource": "unknown_finish_reason"}


def _body(protocol: str, finish: Any) -> dict[str, Any]:
    if protocol == "anthropic":
        return {**anthropic_body(TURN), "stop_reason": finish}
    if protocol == "google":
        body = google_body(TURN)
        body["candidates"][0]["finishReason"] = finish
        if finish is None:
            del body["candidates"][0]["finishReason"]
        return body
    return {**responses_body(TURN), "status": finish}


async def _operate(model: Any) -> tuple[Any, ToolBox]:
    box = ToolBox()
    try:
        branch = Branch(chat_model=model, tools=box.tools())
        result = await branch.operate(instruction="weather?", response_format=Answer, actions=True)
    finally:
        await model.aclose()
    return result, box


@pytest.mark.parametrize("finish", list(FINISHES), ids=[str(f) for f in FINISHES])
async def test_chat_completions_answer_not_said_whole_runs_nothing(server, finish, anyio_backend):  # noqa: F811
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    answer["choices"][0]["finish_reason"] = finish
    server.push(answer)
    result, box = await _operate(make_model(server))
    assert isinstance(result, RawOutput) and result.reason == FINISHES[finish]
    assert box.calls == {}


#: (protocol, finish marker): a Responses status other than completed or incomplete is refused as no answer
NATIVE = [(p, f) for p in ("anthropic", "google") for f in (None, "model_context_window_exceeded_v2",
                                                           "FINISH_REASON_UNSPECIFIED")] + [("openai_responses", None)]


@pytest.mark.parametrize(("protocol", "finish"), NATIVE, ids=[f"{p}-{f}" for p, f in NATIVE])
async def test_a_native_answer_not_said_whole_runs_nothing(protocol, finish, anyio_backend):
    with ScriptPeer(NativeReply(200, json.dumps(_body(protocol, finish)).encode())) as peer:
        result, box = await _operate(iModel(**endpoint_options(protocol, peer, max_retries=0)))
    assert isinstance(result, RawOutput)
    assert result.reason == ("no_finish_reason" if finish is None else "unknown_finish_reason"), result.detail
    assert box.calls == {}


async def test_a_finish_reason_is_shown_in_the_detail_without_its_hostile_characters(server, anyio_backend):  # noqa: F811
    answer = completion("text")
    answer["choices"][0]["finish_reason"] = "cut\n\x1b[31m" + "x" * 100
    server.push(answer)
    result, _ = await _operate(make_model(server))
    assert result.reason == "unknown_finish_reason"
    assert "'cut???31m" in result.detail and "\n" not in result.detail and "x" * 41 not in result.detail


@pytest.mark.parametrize("finish", ["eos_token", "eos", "stop_sequence", "end_turn"])
async def test_a_hosts_own_word_for_a_whole_answer_runs_its_tools(server, finish, anyio_backend):  # noqa: F811
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    answer["choices"][0]["finish_reason"] = finish
    server.push(answer)
    result, box = await _operate(make_model(server))
    assert result.answer == 1 and box.calls == {"get_weather": 1}


async def test_an_endpoint_told_another_whole_reason_runs_its_tools(server, anyio_backend):  # noqa: F811
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    answer["choices"][0]["finish_reason"] = "done"
    server.push(answer, answer)
    model = make_model(server)
    result, box = await _operate(model)
    assert result.reason == "unknown_finish_reason" and "whole_finish_reasons" in result.detail and box.calls == {}
    model = make_model(server)
    model.endpoint.whole_finish_reasons = WHOLE_FINISH_REASONS | {"done"}
    result, box = await _operate(model)
    assert result.answer == 1 and box.calls == {"get_weather": 1}


@pytest.mark.parametrize("finish", ["model_length", "insufficient_system_resource"])
async def test_a_stream_ending_with_an_unknown_finish_reason_runs_nothing(server, finish, anyio_backend):  # noqa: F811
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    answer["choices"][0]["finish_reason"] = finish
    server.push(Reply(stream=chunked(answer)))
    result, box = await _operate(make_model(server, stream=True))
    assert isinstance(result, RawOutput) and result.reason == "unknown_finish_reason" and box.calls == {}


async def test_under_raise_the_error_says_why_the_answer_was_not_parsed(server, anyio_backend):  # noqa: F811
    from lionops import MismatchError

    answer = completion(json.dumps({"answer": 1}))
    answer["choices"][0]["finish_reason"] = "model_length"
    server.push(answer)
    model = make_model(server)
    try:
        with pytest.raises(MismatchError) as info:
            await Branch(chat_model=model).operate(instruction="x", response_format=Answer, handle_validation="raise")
    finally:
        await model.aclose()
    text = str(info.value)
    assert text.startswith("Failed to parse LLM response into 'Answer': unknown_finish_reason: ")
    assert "whole_finish_reasons" in text and "structured JSON output" not in text
    assert info.value.reason == "unknown_finish_reason"


async def test_a_finish_reason_echoing_the_key_is_scrubbed_in_the_detail(server, anyio_backend):  # noqa: F811
    key = "sk-test-FINISH-0123456789abcdef"
    answer = completion("text")
    answer["choices"][0]["finish_reason"] = f"refused:{key}"
    server.push(answer)
    model = make_model(server, api_key=key)
    try:
        result = await Branch(chat_model=model).operate(instruction="x")
    finally:
        await model.aclose()
    assert result.reason == "unknown_finish_reason" and "FINISH-01" not in result.detail and "***" in result.detail


@pytest.mark.parametrize("protocol", ["chat", "anthropic", "google"])
async def test_a_finish_reason_echoing_the_key_is_kept_without_it(server, protocol, anyio_backend):  # noqa: F811
    """The reason as the trace, the assistant message and its metadata keep it: scrubbed."""
    key = "sk-peer-SECRET-0123456789abcdef"  # the native test servers' key
    reason = f"refused:{key}"
    if protocol == "chat":
        answer = completion("text")
        answer["choices"][0]["finish_reason"] = reason
        server.push(answer)
        model = make_model(server, api_key=key)
        try:
            branch = Branch(chat_model=model)
            await branch.operate(instruction="x")
        finally:
            await model.aclose()
    else:
        with ScriptPeer(NativeReply(200, json.dumps(_body(protocol, reason)).encode())) as peer:
            model = iModel(**endpoint_options(protocol, peer, max_retries=0))
            try:
                branch = Branch(chat_model=model)
                await branch.operate(instruction="x")
            finally:
                await model.aclose()
    kept = branch.traces[-1].to_json() + json.dumps(branch.messages.to_list(), default=str)
    assert key not in kept and "SECRET-01" not in kept and "refused:***" in kept
@pytest.mark.parametrize(("second", "reason"), [(None, "no_finish_reason"), ("model_length", "unknown_finish_reason"),
                                                (7, "no_finish_reason")], ids=["none", "unknown", "not a string"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_merged_choices_one_not_said_whole_run_nothing(server, second, reason, stream, anyio_backend):  # noqa: F811
    """Choices merged into one answer: one of them without a finish reason, or
    with one no endpoint maps, makes the whole answer not said whole."""
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    if stream:
        chunks = chunked(answer)
        head = {k: chunks[0][k] for k in ("id", "object", "created", "model")}
        chunks[-1:-1] = [{**head, "choices": [{"index": 1, "delta": {"role": "assistant"}, "finish_reason": second}]}]
        server.push(Reply(stream=chunks))
    else:
        second_choice = {"index": 1, "message": {"role": "assistant", "content": None}, "finish_reason": second}
        answer["choices"].append(second_choice)
        server.push(answer)
    result, box = await _operate(make_model(server, stream=stream))
    assert isinstance(result, RawOutput) and result.reason == reason and box.calls == {}, result


@pytest.mark.parametrize("echo", ["whole", "part"])
async def test_a_finish_reason_echoing_the_key_shows_none_of_it(server, echo, anyio_backend):  # noqa: F811
    from lionops._secrets import PARTIAL_ECHO
    from tests.openai_server import API_KEY

    answer = completion("text")
    answer["choices"][0]["finish_reason"] = API_KEY if echo == "whole" else "bad_" + API_KEY[2:14]
    server.push(answer)
    model = make_model(server)
    try:
        branch = Branch(chat_model=model)
        result = await branch.operate(instruction="x", response_format=Answer)
    finally:
        await model.aclose()
    assert isinstance(result, RawOutput) and result.reason == "unknown_finish_reason"
    shown = " ".join([result.detail, repr(result), branch.traces[-1].to_json()])
    runs = [API_KEY[i:i + PARTIAL_ECHO] for i in range(len(API_KEY) - PARTIAL_ECHO + 1)]
    assert not [run for run in runs if run in shown], shown[:400]


@pytest.mark.parametrize("protocol", ["anthropic", "google", "openai_responses"])
async def test_a_native_finish_reason_echoing_the_key_shows_none_of_it(protocol, anyio_backend):
    from lionops._secrets import PARTIAL_ECHO
    from tests.native_recordings import SECRET_KEY

    finish = "bad_" + SECRET_KEY[3:20]
    with ScriptPeer(NativeReply(200, json.dumps(_body(protocol, finish)).encode())) as peer:
        model = iModel(**endpoint_options(protocol, peer, max_retries=0))
        branch = Branch(chat_model=model)
        try:
            result = await branch.operate(instruction="x", response_format=Answer)
        except Exception as exc:  # a status no answer has: the error must not carry it either
            result = exc
        finally:
            await model.aclose()
    shown = " ".join([repr(result), str(getattr(result, "detail", result)), branch.traces[-1].to_json(),
                      repr([(m.content, m.metadata) for m in branch.messages])])
    runs = [SECRET_KEY[i:i + PARTIAL_ECHO] for i in range(len(SECRET_KEY) - PARTIAL_ECHO + 1)]
    assert not [run for run in runs if run in shown], shown[:300]


async def test_the_run_loop_stops_at_an_answer_not_said_whole_and_records_why(server, anyio_backend):  # noqa: F811
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "c1")])
    answer["choices"][0]["finish_reason"] = "model_length"
    server.push(answer)
    model, box = make_model(server), ToolBox()
    try:
        branch = Branch(chat_model=model, tools=box.tools())
        result = await branch.run("weather?", response_format=Answer)
    finally:
        await model.aclose()
    assert isinstance(result, RawOutput) and result.reason == "unknown_finish_reason" and box.calls == {}
    assert len(server.requests) == 1
    assert '"unknown_finish_reason"' in branch.traces[-1].to_json()


@pytest.mark.parametrize("served", ["gpt-4o-mini-2024-07-18", "proxy/sk-test-MODEL-0123456789abcdef"],
                         ids=["a dated name of the model asked for", "a name echoing the key"])
async def test_the_servers_model_name_is_kept_without_the_key(server, served, anyio_backend):  # noqa: F811
    key = "sk-test-MODEL-0123456789abcdef"
    answer = completion(json.dumps({"answer": 1}))
    answer["model"] = served
    server.push(answer)
    model = make_model(server, api_key=key)
    try:
        branch = Branch(chat_model=model)
        await branch.operate(instruction="x", response_format=Answer)
    finally:
        await model.aclose()
    kept = branch.traces[-1].to_json() + json.dumps(branch.messages.to_list(), default=str)
    assert "MODEL-01" not in kept
    assert (served in kept) == (key not in served)
