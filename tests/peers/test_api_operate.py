"""operate() through communicate and a real HTTP server on loopback.

Each test serves realistic Chat Completions payloads and asserts the result,
the trace exit and which tools ran (ToolBox counts real calls).
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from lionops import Branch, RawOutput, RefusalError, TruncatedOutputError
from lionops.clock import RecordingClock, use_clock
from lionops.errors import EndpointStatusError, EndpointTimeoutError
from lionops.testing import Reply, completion, error_body, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import (  # noqa: F401 - fixtures
    failing_operate,
    make_model,
    model,
    operate_under,
    sent,
    server,
    user_text,
)

pytestmark = pytest.mark.anyio

POLICIES = ("raise", "return_value", "return_none")


class Forecast(BaseModel):
    city: str
    temp_c: int


class Item(BaseModel):
    label: str


class Pet(BaseModel):
    name: str
    color: str | None = None
    tags: list[Item] = []


class Basket(BaseModel):
    name: str
    items: list[str]


class X(BaseModel):
    x: int


def schema_sent(body: dict) -> dict:
    return body["response_format"]["json_schema"]


# ---------------------------------------------------------------- text and JSON


async def test_plain_text_answer(server, model):
    server.push(completion("Paris is the capital of France."))
    branch = Branch(chat_model=model, system="Be brief.")
    result, trace = await branch.operate_traced(instruction="Capital of France?")
    assert result == "Paris is the capital of France."
    assert trace.exit == "no_action_param"
    assert [m.role for m in branch.messages] == ["system", "user", "assistant"]
    body = sent(server)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "response_format" not in body and "tools" not in body


async def test_fenced_json_into_model(server, model):
    server.push(completion('Here you go:\n```json\n{"answer": 42}\n```\nAnything else?'))
    branch = Branch(chat_model=model)
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer)
    assert isinstance(result, Answer) and result.answer == 42
    assert trace.exit == "no_action_param"


async def test_strict_structured_output(server, model):
    server.push(completion('{"city": "Oslo", "temp_c": -3}'))
    branch = Branch(chat_model=model)
    result, trace = await branch.operate_traced(instruction="q", response_format=Forecast, handle_validation="raise")
    assert isinstance(result, Forecast) and result.model_dump() == {"city": "Oslo", "temp_c": -3}
    assert trace.exit == "no_action_param"
    spec = schema_sent(sent(server))
    assert spec["strict"] is True
    assert spec["schema"]["additionalProperties"] is False
    assert sorted(spec["schema"]["required"]) == ["city", "temp_c"]
    assert trace.meta["structured_output"] == "strict"
    assert "JSON schema" not in user_text(sent(server))


async def test_optional_fields_stay_optional(server, model):
    server.push(completion('{"name": "cat"}'), completion('{"name": "cat", "tags": [{"label": "x"}]}'))
    branch = Branch(chat_model=model)
    first = await branch.operate(instruction="q", response_format=Pet, handle_validation="raise")
    second = await branch.operate(instruction="q", response_format=Pet, handle_validation="raise")
    assert first.color is None and first.tags == []
    assert second.tags == [Item(label="x")]
    spec = schema_sent(sent(server, 0))
    assert spec["strict"] is False  # tags=[] cannot be strict without becoming required
    assert spec["schema"]["required"] == ["name"]


async def test_request_options_from_operate_kwargs(server, model):
    server.push(completion("ok"))
    branch = Branch(chat_model=model)
    await branch.operate(instruction="q", temperature=0.1, max_tokens=64, seed=7)
    body = sent(server)
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.1, 64, 7)
    assert body["model"] == "gpt-4o-mini"


# ---------------------------------------------------------------- tool calls


async def test_one_tool_call(server, model):
    box = ToolBox()
    server.push(completion('{"answer": 1}', tool_calls=[tool_call("get_weather", {"city": "Paris"})]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    assert trace.exit == "enriched"
    assert box.calls == {"get_weather": 1}
    assert result.answer == 1
    assert [r.output for r in result.action_responses] == [{"city": "Paris", "temp_c": 20}]
    body = sent(server)
    # A caller model: the requests belong in the structured answer, the tools in the prompt.
    assert "tools" not in body
    spec = schema_sent(body)
    assert spec["strict"] is False  # arguments: dict cannot be strict
    assert "action_responses" not in spec["schema"]["properties"]
    assert "action_requests" in spec["schema"]["properties"]
    assert "Tools you may request" in user_text(body)
    assert all(name in user_text(body) for name in ("get_weather", "send_message", "search", "run_shell"))
    assert trace.meta["tools_offered"] == "prompt"
    assert branch.messages.by_role("assistant")[0].metadata["tool_calls"][0]["function"] == "get_weather"


async def test_several_tool_calls_in_order(server, model):
    box = ToolBox()
    server.push(completion(None, tool_calls=[
        tool_call("search", {"q": "lion"}),
        tool_call("get_weather", {"city": "Rome"}),
        tool_call("run_shell", {"cmd": "ls"}),
    ]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", actions=True)
    assert trace.exit == "enriched"
    assert box.calls == {"search": 1, "get_weather": 1, "run_shell": 1}
    assert [r.function for r in result.action_responses] == ["search", "get_weather", "run_shell"]
    assert result.action_responses[2].output == "ran ls"


async def test_tool_arguments_as_text_twice_encoded_list_or_scalar(server, model):
    box = ToolBox()
    args = json.dumps({"city": "Paris"})
    server.push(completion(None, tool_calls=[
        tool_call("get_weather", args),                 # (a) JSON text
        tool_call("get_weather", json.dumps(args)),     # (b) encoded twice
        tool_call("get_weather", '["Paris"]'),          # (c) a list
        tool_call("get_weather", "42"),                 # (d) a scalar
        tool_call("get_weather", '{"city": "Pa'),       # broken JSON text
    ]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", actions=True)
    assert trace.exit == "enriched"
    assert box.calls == {"get_weather": 2}
    assert box.args == [("get_weather", {"city": "Paris"})] * 2
    outputs = [r.output for r in result.action_responses]
    assert outputs[:2] == [{"city": "Paris", "temp_c": 20}] * 2
    assert "list" in outputs[2]["error"] and "int" in outputs[3]["error"]
    assert "not a JSON object" in outputs[4]["error"]
    assert all(o["type"] == "InvalidActionRequest" for o in outputs[2:])


async def test_unknown_tool_and_missing_name_are_answered_not_run(server, model):
    box = ToolBox()
    server.push(completion(None, tool_calls=[
        tool_call("execute_python", {"code": "print(1)"}),
        {"id": "call_x", "type": "function", "function": {"name": "", "arguments": "{}"}},
        tool_call("run_shell", {"cmd": "echo hi"}),
    ]))
    branch = Branch(chat_model=model, tools=box.tools())
    result = await branch.operate(instruction="q", actions=True)
    assert box.calls == {"run_shell": 1}
    assert [r.is_error for r in result.action_responses] == [True, True, False]


async def test_body_action_requests_are_honoured(server, model):
    box = ToolBox()
    server.push(completion(json.dumps({
        "answer": 2,
        "action_requests": [{"function": "search", "arguments": {"q": "lion"}}],
        "action_responses": [{"function": "search", "arguments": {"q": "lion"}, "output": ["fake"]}],
    }), tool_calls=[tool_call("search", {"q": "lion"}), tool_call("get_weather", {"city": "Oslo"})]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    assert trace.exit == "enriched"
    # the identical native call is not run twice; the fabricated response is discarded
    assert box.calls == {"search": 1, "get_weather": 1}
    assert [r.output for r in result.action_responses] == [["lion"], {"city": "Oslo", "temp_c": 20}]


async def test_tool_calls_with_model_mismatch_run_nothing(server, model):
    box = ToolBox()
    server.push(completion("Let me check.", tool_calls=[tool_call("send_message", {"to": "team", "body": "x"})]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    assert trace.exit == "mismatch_return_value"
    assert result == "Let me check." and result.reason == "tool_calls_only"
    assert box.total == 0
    assert len(server.chat_requests) == 1  # a preamble beside tool calls is never restated


async def test_prose_under_a_caller_model_is_restated_by_the_parse_model(server, model):
    box = ToolBox()
    server.push(completion("Let me check."))
    for _ in range(4):  # the parse model cannot restate prose without an answer
        server.push(completion('{"answer": null}'))
    branch = Branch(chat_model=model, tools=box.tools())
    with use_clock(RecordingClock()) as clk:
        result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    assert trace.exit == "mismatch_return_value"
    assert result == "Let me check."
    assert box.total == 0
    assert len(server.chat_requests) == 5 and trace.meta["parse_model_calls"] == 4
    assert clk.sleeps == pytest.approx([1, 1.85, 1.85**2])
    assert "tools" not in sent(server)  # the parse model is never offered tools


async def test_skip_validation_returns_raw_text_and_runs_nothing(server, model):
    box = ToolBox()
    server.push(completion('{"answer": 1}', tool_calls=[tool_call("get_weather", {"city": "Paris"})]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(
        instruction="q", response_format=Answer, actions=True, skip_validation=True
    )
    assert result == '{"answer": 1}'
    assert trace.exit == "skip_validation"
    assert box.total == 0


# ---------------------------------------------------------------- refusal and cut-off


CUT_BODY = '{"name": "Ana", "items": ["a", "b"'
CUT_IN_REQUESTS = (
    '{"name": "Ana", "items": [], "action_requests": [{"function": "send_message", "arguments": {"to": "team", "bo'
)
REFUSAL = "I can't help with that."

#: (reply, response_format, error under "raise", reason, words in the error)
UNCOERCED = {
    "refusal": (completion("I'm sorry, but I can't help with that request.", refusal=REFUSAL),
                    X, RefusalError, "refusal", REFUSAL),
    "length": (completion(CUT_BODY, finish_reason="length", completion_tokens=16),
                   Basket, TruncatedOutputError, "length", "cut off"),
    "length-in-requests": (completion(CUT_IN_REQUESTS, finish_reason="length"),
                               Basket, TruncatedOutputError, "length", "cut off"),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", list(UNCOERCED))
async def test_refusal_and_cut_off_are_never_parsed(server, model, policy, case):
    reply, fmt, error, reason, words = UNCOERCED[case]
    box = ToolBox()
    server.push(reply)
    branch = Branch(chat_model=model, tools=box.tools())
    out = await operate_under(branch, policy, error, instruction="q", response_format=fmt, actions=True)
    if policy == "raise":
        assert out.reason == reason and words in str(out)
    elif policy == "return_value":
        assert isinstance(out, RawOutput) and out.reason == reason
        assert out == (reply["choices"][0]["message"]["content"])  # uncoerced, brackets not closed
    else:
        assert out is None
    assert branch.traces[-1].exit == f"mismatch_{policy}"
    assert len(server.chat_requests) == 1  # no parse-model retry
    assert box.total == 0


async def test_length_cut_inside_native_tool_call_runs_nothing(server, model):
    box = ToolBox()
    server.push(completion(None, finish_reason="length", tool_calls=[
        tool_call("get_weather", {"city": "Paris"}),
        tool_call("send_message", '{"to": "team", "bo'),
    ]))
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="q", actions=True)  # no caller model
    assert isinstance(result, RawOutput) and result.reason == "length"
    assert trace.exit == "no_requests"
    assert box.total == 0


# ---------------------------------------------------------------- HTTP behaviour through operate


async def test_429_then_success_waits_retry_after(server, model):
    server.push(
        Reply(error_body("Rate limit reached", "requests", "rate_limit_exceeded"), status=429,
              headers={"Retry-After": "2"}),
        completion('{"answer": 5}'),
    )
    branch = Branch(chat_model=model)
    with use_clock(RecordingClock()) as clk:
        result, trace = await branch.operate_traced(instruction="q", response_format=Answer)
    assert isinstance(result, Answer) and result.answer == 5
    assert clk.sleeps == [2.0]
    assert trace.exit == "no_action_param"
    assert trace.meta["http_attempts"] == 2
    assert trace.meta["http_retries"] == [{"status": 429, "delay_s": 2.0}]
    assert [e.kind for e in branch.logs] == ["http_retry"]
    assert len(branch.messages.by_role("assistant")) == 1  # one logical call


async def test_500_three_times_fails(server):
    for _ in range(3):
        server.push(Reply(error_body("The server had an error", "server_error"), status=500))
    err, branch, box, clk = await failing_operate(
        server, EndpointStatusError, {"max_retries": 2}, instruction="q", response_format=Answer, actions=True,
    )
    assert err.status == 500 and err.attempts == 3
    assert clk.sleeps == [0.5, 1.0]
    trace = branch.traces[-1]
    assert trace.exit == "failed" and trace.states[-2:] == ["adapter", "raised"]
    assert "EndpointStatusError" in trace.error
    assert len(server.chat_requests) == 3
    assert box.total == 0


async def test_hang_past_timeout_fails(server):
    box = ToolBox()
    server.push(Reply(hang=True))
    m = make_model(server, timeout=0.3, max_retries=0)
    branch = Branch(chat_model=m, tools=box.tools())
    with pytest.raises(EndpointTimeoutError) as info:
        await branch.operate(instruction="q", actions=True)
    await m.aclose()
    assert isinstance(info.value, TimeoutError)
    assert branch.traces[-1].exit == "failed"
    server.wait_for_requests(1)  # the client gave up first; the handler thread may read it later
    assert len(server.chat_requests) == 1
    assert box.total == 0


# ---------------------------------------------------------------- the turn: history, images, usage


async def test_history_and_tool_results_reach_the_next_turn(server, model):
    box = ToolBox()
    server.push(
        completion(None, tool_calls=[tool_call("get_weather", {"city": "Lima"})]),
        completion("It is 20 degrees in Lima."),
    )
    branch = Branch(chat_model=model, system="You are terse.", tools=box.tools())
    await branch.operate(instruction="Weather in Lima?", actions=True)
    await branch.operate(instruction="Summarize.")
    roles = [m["role"] for m in sent(server)["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]  # a native call goes back paired
    msgs = sent(server)["messages"]
    assert msgs[2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert msgs[3]["tool_call_id"] == msgs[2]["tool_calls"][0]["id"] and '"temp_c": 20' in msgs[3]["content"]
    assert "tools" not in sent(server)  # actions off on the second call


async def test_clear_messages(server, model):
    server.push(completion("one"), completion("two"))
    branch = Branch(chat_model=model, system="sys")
    await branch.operate(instruction="first")
    await branch.operate(instruction="second", clear_messages=True)
    assert [m["role"] for m in sent(server)["messages"]] == ["system", "user"]
    assert [m.content for m in branch.messages] == ["sys", "second", "two"]


async def test_guidance_context_and_images(server, model):
    server.push(completion("a cat"))
    branch = Branch(chat_model=model)
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 8
    await branch.operate(
        instruction="What is shown?", guidance="One phrase.", context={"source": "camera"},
        images=["https://example.test/cat.jpg", png], image_detail="low",
    )
    content = sent(server)["messages"][-1]["content"]
    assert content[0]["type"] == "text"
    assert "One phrase." in content[0]["text"] and '"camera"' in content[0]["text"]
    assert content[1] == {"type": "image_url", "image_url": {"url": "https://example.test/cat.jpg", "detail": "low"}}
    assert content[2]["image_url"]["url"].startswith("data:image/png;base64,")


async def test_token_usage_on_message_trace_and_to_model(server, model):
    server.push(completion("one", prompt_tokens=10, completion_tokens=5), completion("two"))
    branch = Branch(chat_model=model)
    _, trace = await branch.operate_traced(instruction="first")
    meta = branch.messages.by_role("assistant")[0].metadata
    assert meta["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert meta["latency_ms"] >= 0 and meta["http_attempts"] == 1
    assert trace.meta["usage"]["total_tokens"] == 15 and trace.meta["latency_ms"] == meta["latency_ms"]
    await branch.operate(instruction="second", include_token_usage_to_model=True)
    assert "15 tokens (10 prompt, 5 completion) over 1 model calls" in user_text(sent(server))


async def test_schema_in_prompt_mode(server):
    m = make_model(server, structured_output="prompt")
    server.push(completion('{"answer": 9}'))
    branch = Branch(chat_model=m, tools=ToolBox().tools())
    result, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    await m.aclose()
    body = sent(server)
    assert "response_format" not in body and "tools" not in body
    text = user_text(body)
    assert "JSON schema" in text and "action_responses" not in text
    assert text.count("Tools you may request") == 1  # a caller model: the tools are described once, in the prompt
    assert result.answer == 9 and trace.meta["structured_output"] == "prompt"


async def test_json_object_mode(server):
    m = make_model(server, structured_output="json_object")
    server.push(completion('{"answer": 4}'))
    result, trace = await Branch(chat_model=m).operate_traced(instruction="q", response_format=Answer)
    await m.aclose()
    assert sent(server)["response_format"] == {"type": "json_object"}
    assert "JSON schema" in user_text(sent(server))
    assert result.answer == 4 and trace.meta["structured_output"] == "json_object"


# ---------------------------------------------------------------- cut-off arguments and validation before
# side effects, through HTTP: no second model legitimizes a bad value

BAD_BODIES = {
    "cut-arguments": '{"answer": 1, "action_requests": [{"function": "get_weather", '
                         '"arguments": "{\\"city\\": \\"Par"}]}',
    "bad-value": '{"answer": "high", "action_requests": [{"function": "send_message", '
                     '"arguments": {"to": "team", "body": "done"}}]}',
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_invalid_body_runs_no_tool_and_asks_no_parse_model(server, model, policy, case):
    from lionops import MismatchError

    box = ToolBox()
    server.push(completion(BAD_BODIES[case]))
    branch = Branch(chat_model=model, tools=box.tools())
    out = await operate_under(branch, policy, MismatchError, instruction="q", response_format=Answer, actions=True)
    if policy == "return_value":
        assert out == json.loads(BAD_BODIES[case])
    elif policy == "return_none":
        assert out is None
    assert branch.traces[-1].exit == f"mismatch_{policy}"
    assert len(server.chat_requests) == 1
    assert box.total == 0
