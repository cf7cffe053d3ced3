"""The rules that decide whether a tool runs, and the records users and replay read.

Each test states its expected value independently of the code (literal
payloads, schemas and counts), so a broken rule or a dropped field fails here.
Everything goes through the public API: real tool functions, the loopback
OpenAI-compatible server, the fake CLI agent as a real subprocess.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import (
    ActionParam,
    Branch,
    ChatParam,
    HookPoint,
    LionopsError,
    ParseParam,
    Spec,
    Tool,
    act,
    operate,
)
from lionops.middles.parsing import parse_response
from lionops.testing import completion
from tests.cli_support import fake_model
from tests.helpers import Answer, ScriptedMiddle, ToolBox
from tests.openai_server import model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

WEATHER = {"function": "get_weather", "arguments": {"city": "Paris"}}


def kinds(branch: Branch) -> list[str]:
    return [entry.kind for entry in branch.logs]


# ---------------------------------------------------------------- whether a tool runs


@pytest.mark.parametrize("request_", [
    {"function": "get_weather", "arguments": {"city": "Paris"}, "invalid": "arguments were not JSON"},
    {"name": "get_weather", "parameters": {"city": "Paris"}, "invalid": "arguments were not JSON"},
])
async def test_a_mapping_request_with_an_invalid_reason_never_runs(request_):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [request_], ActionParam(suppress_errors=True))
    assert box.total == 0
    assert response.function == "get_weather"
    assert response.output == {
        "error": "arguments were not JSON",
        "type": "InvalidActionRequest",
        "message": "Error invoking action 'get_weather': arguments were not JSON",
    }
    [entry] = list(branch.logs)
    assert entry.kind == "action_error"
    content = dict(entry.content)
    assert content == {
        "function": "get_weather", "arguments": {"city": "Paris"}, "index": 0, "decision": "invalid",
        "branch": branch.id, "stage": "invalid", "error": "arguments were not JSON",
        "type": "InvalidActionRequest", "reason": "arguments were not JSON", "invoked": False,
    }


async def test_a_mapping_request_with_invalid_none_runs():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [{**WEATHER, "invalid": None}], ActionParam(suppress_errors=True))
    assert box.calls == {"get_weather": 1}
    assert response.output == {"city": "Paris", "temp_c": 20}


@pytest.mark.parametrize("mark", [True, 1, "", "   ", {"why": "cut"}, ["x"]])
async def test_any_invalid_mark_but_none_or_false_keeps_a_request_from_running(mark):
    # Fails closed: a mark that is not a reason in words still marks the request.
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [{**WEATHER, "invalid": mark}], ActionParam(suppress_errors=True))
    assert box.total == 0
    assert branch.traces == [] and response.record.decision == "invalid"
    assert response.output["type"] == "InvalidActionRequest"
    assert response.output["error"].startswith("request marked invalid (")


async def test_an_invalid_false_mark_runs():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [{**WEATHER, "invalid": False}], ActionParam(suppress_errors=True))
    assert box.calls == {"get_weather": 1} and response.record.decision == "allowed"


async def test_operate_never_runs_a_mapping_request_marked_invalid():
    """A Middle result (a dict) whose request mapping carries an ``invalid`` reason."""
    box = ToolBox()
    branch = Branch(tools=box.tools())
    mid = ScriptedMiddle({"answer": 1, "action_requests": [{**WEATHER, "invalid": "cut by the provider"}]})
    out, trace = await branch.operate_traced(instruction="q", actions=True, middle=mid)
    assert box.total == 0
    assert trace.exit == "enriched"
    assert [r.decision for r in trace.actions] == ["invalid"]
    assert out["action_responses"][0].output["error"] == "cut by the provider"


REPAIRED_SINGLE = "{'answer': 1, 'action_requests': {'function': 'get_weather', 'arguments': {'city': 'Paris'}}}"
REPAIRED_LIST = "{'answer': 1, 'action_requests': [{'function': 'get_weather', 'arguments': {'city': 'Paris'}}]}"


async def test_repaired_json_with_a_single_request_object_proposes_nothing():
    """JSON that needed repair never yields a runnable request: a single
    request object (not a list) is dropped."""
    from lionops.operative import operative_for

    fmt = operative_for(Answer, actions=True, reason=False, fields=None).response_type
    value = await parse_response(REPAIRED_SINGLE, ParseParam(response_format=fmt))
    assert value.answer == 1 and value.action_requests is None


@pytest.mark.parametrize("text, decisions", [(REPAIRED_SINGLE, []), (REPAIRED_LIST, ["invalid"])])
async def test_operate_never_runs_requests_from_repaired_json(server, model, text, decisions):
    box = ToolBox()
    server.push(completion(text))
    branch = Branch(chat_model=model, tools=box.tools())
    out, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    assert box.total == 0
    assert out.answer == 1
    assert [r.decision for r in trace.actions] == decisions
    if decisions:
        assert trace.actions[0].invoked is False and trace.actions[0].function == "get_weather"


async def test_direct_operate_with_an_unknown_policy_and_a_mismatch_runs_no_tool():
    """``operate()`` over prepared parameters does not check the policy
    name; a mismatched result under an unknown one stops the machine in
    ``validate`` with a typed error, and no tool runs."""
    box = ToolBox()
    branch = Branch(tools=box.tools())
    mid = ScriptedMiddle({"answer": 1, "action_requests": [WEATHER]})
    with pytest.raises(LionopsError, match="no guard holds in state 'validate'"):
        await operate(branch, "q", ChatParam(response_format=Answer), ActionParam(),
                      handle_validation="bogus", middle=mid)
    assert box.total == 0 and mid.calls == 1
    assert branch.traces[-1].states == ["prepare", "schema", "adapter", "validate", "raised"]
    assert kinds(branch) == []


async def test_direct_operate_with_a_plain_chat_param_on_a_cli_model_uses_the_cli_middle():
    """A CLI-backed ``branch.chat_model`` selects the CLI agent Middle even
    when the caller hands ``operate()`` a plain ChatParam (not a RunParam)."""
    branch = Branch(chat_model=fake_model("plain_answer.jsonl"))
    result = await operate(branch, "Capital of France?", ChatParam())
    assert result == "Paris is the capital of France."
    trace = branch.traces[-1]
    assert trace.meta["middle"] == "run_and_collect"
    assert trace.meta["cli"]["exit_code"] == 0


async def test_explicit_parse_model_reaches_the_middle(server, model):
    from tests.openai_server import make_model

    parse_model = make_model(server, model="gpt-4o-parse")
    try:
        mid = ScriptedMiddle("text")
        branch = Branch(chat_model=model)
        await branch.operate(instruction="q", response_format=Answer, parse_model=parse_model, middle=mid)
        assert mid.seen[0]["parse_param"].imodel is parse_model
        assert mid.seen[0]["chat_param"].imodel is model
        # without one, the parse model is the chat model of the call
        await branch.operate(instruction="q", response_format=Answer, middle=mid)
        assert mid.seen[1]["parse_param"].imodel is model
    finally:
        await parse_model.aclose()


async def test_explicit_field_models_reach_the_middle():
    mid = ScriptedMiddle("text")
    branch = Branch()
    await branch.operate(instruction="q", response_format=Answer, middle=mid,
                         field_models=[Spec(str, name="note", default="none")])
    fmt = mid.seen[0]["parse_param"].response_format
    assert set(fmt.model_fields) == {"answer", "note"}
    assert fmt.model_fields["note"].default == "none"
    assert mid.seen[0]["chat_param"].response_format is fmt


async def test_direct_operate_field_models_reach_the_middle():
    mid = ScriptedMiddle("text")
    await operate(Branch(), "q", ChatParam(), field_models=[Spec(int, name="count")], middle=mid)
    fmt = mid.seen[0]["parse_param"].response_format
    assert set(fmt.model_fields) == {"count"}
    assert mid.seen[0]["chat_param"].response_format is fmt


@pytest.mark.parametrize("policy", ["raise", "return_none", "return_value"])
async def test_the_middle_always_gets_handle_validation_return_value(policy):
    """ADR-0022 D3: the outer policy is applied once, after the Middle; the
    Middle's ParseParam always says ``return_value``."""
    mid = ScriptedMiddle(lambda pp: pp.response_format(answer=1))
    await Branch().operate(instruction="q", response_format=Answer, handle_validation=policy, middle=mid)
    assert mid.seen[0]["parse_param"].handle_validation == "return_value"
    # also over prepared parameters, with or without a response format of the caller
    for cp in (ChatParam(response_format=Answer), ChatParam()):
        mid2 = ScriptedMiddle("text")
        await operate(Branch(), "q", cp, parse_param=ParseParam(response_format=Answer, handle_validation=policy),
                      handle_validation=policy if policy != "raise" else "return_value", middle=mid2)
        assert mid2.seen[0]["parse_param"].handle_validation == "return_value"


# ---------------------------------------------------------------- records: hooks, log, messages


def recording_hooks(branch: Branch) -> dict[str, list[dict[str, Any]]]:
    seen: dict[str, list[dict[str, Any]]] = {"tool_pre": [], "tool_post": [], "tool_error": []}
    for point in HookPoint:
        branch.on(point, lambda payload, p=point.value: seen[p].append(dict(payload)))
    return seen


def boom(x: int) -> int:
    """Always fails."""
    raise RuntimeError(f"boom {x}")


async def test_hook_payloads_carry_every_field():
    box = ToolBox()
    branch = Branch(tools=[*box.tools(), boom])
    seen = recording_hooks(branch)
    requests = [
        {"function": "get_weather", "arguments": {"city": "Paris"}, "call_id": "call_1"},
        {"function": "boom", "arguments": {"x": 7}},
    ]
    await act(branch, requests, ActionParam(strategy="sequential", suppress_errors=True))
    assert seen["tool_pre"] == [
        {"function": "get_weather", "arguments": "{'city': 'Paris'}", "index": 0, "call_id": "call_1",
         "branch": branch.id},
        {"function": "boom", "arguments": "{'x': 7}", "index": 1, "call_id": None, "branch": branch.id},
    ]
    [post] = seen["tool_post"]
    assert isinstance(post.pop("duration_s"), float)
    assert post == {"function": "get_weather", "arguments": "{'city': 'Paris'}", "index": 0,
                    "decision": "allowed", "call_id": "call_1", "branch": branch.id,
                    "output": "{'city': 'Paris', 'temp_c': 20}"}
    [error] = seen["tool_error"]
    assert isinstance(error.pop("duration_s"), float)
    assert error == {"function": "boom", "arguments": "{'x': 7}", "index": 1, "decision": "error",
                     "call_id": None, "branch": branch.id, "type": "RuntimeError", "error": "boom 7"}


async def test_event_log_entries_and_messages_of_each_decision():
    box = ToolBox()
    branch = Branch(tools=[*box.tools(), boom])

    @branch.gate
    def no_messages(invocation):
        return invocation.function != "send_message"

    requests = [
        {"function": "get_weather", "arguments": {"city": "Paris"}, "call_id": "c0"},
        {"function": "send_message", "arguments": {"to": "a", "body": "b"}},
        {"function": "boom", "arguments": {"x": 1}},
        {"function": "missing", "arguments": {}},
        {"function": "get_weather", "arguments": {"town": "Paris"}},
    ]
    responses = await act(branch, requests, ActionParam(strategy="sequential", suppress_errors=True))
    assert box.calls == {"get_weather": 1}
    entries = [(e.kind, dict(e.content)) for e in branch.logs]
    assert [k for k, _ in entries] == ["action", "denied", "action_error", "action_error", "action_error"]
    allowed, denied, error, unknown, misfit = (c for _, c in entries)
    assert isinstance(allowed.pop("duration_s"), float)
    assert allowed == {"function": "get_weather", "arguments": {"city": "Paris"}, "index": 0,
                       "decision": "allowed", "branch": branch.id, "call_id": "c0",
                       "output": {"city": "Paris", "temp_c": 20}}
    assert denied == {"function": "send_message", "arguments": {"to": "a", "body": "b"}, "index": 1,
                      "decision": "denied", "branch": branch.id, "reason": "denied by gate " + no_messages.__qualname__}
    assert isinstance(error.pop("duration_s"), float)
    assert error == {"function": "boom", "arguments": {"x": 1}, "index": 2, "decision": "error",
                     "branch": branch.id, "stage": "error", "error": "boom 1", "type": "RuntimeError",
                     "reason": "boom 1", "invoked": True}
    assert unknown["stage"] == "rejected" and unknown["type"] == "UnknownToolError"
    assert unknown["invoked"] is False and "duration_s" not in unknown
    assert misfit["stage"] == "rejected" and misfit["type"] == "ToolArgumentsError"
    assert misfit["invoked"] is False and "duration_s" not in misfit

    # error responses: the arguments as requested, an error payload as output
    assert responses[1].arguments == {"to": "a", "body": "b"}
    assert responses[1].output == {"error": "denied by governance gate", "function": "send_message"}
    assert responses[2].arguments == {"x": 1}
    assert responses[2].output == {"error": "boom 1", "type": "RuntimeError",
                                   "message": "Error invoking action 'boom': boom 1"}
    assert responses[3].output["type"] == "UnknownToolError"
    assert responses[3].output["message"].startswith("Error invoking action 'missing': ")

    # messages: one request and one response per decision, in request order
    msgs = list(branch.messages)
    assert [m.role for m in msgs] == ["action_request", "action_response"] * 5
    for i, req in enumerate(requests):
        out_msg, back = msgs[2 * i], msgs[2 * i + 1]
        assert (out_msg.sender, out_msg.recipient) == (branch.id, req["function"])
        assert (back.sender, back.recipient) == (req["function"], branch.id)
        assert out_msg.content == {"function": req["function"], "arguments": req["arguments"]}
        assert back.content["output"] == responses[i].output
        expected_meta = {"index": i, "decision": ["allowed", "denied", "error", "rejected", "rejected"][i]}
        if i == 0:
            expected_meta["call_id"] = "c0"
        assert out_msg.metadata == expected_meta and back.metadata == expected_meta


async def test_record_durations_are_present_and_typed():
    box = ToolBox()
    branch = Branch(tools=[*box.tools(), boom])
    records: list[Any] = []
    mid = ScriptedMiddle({"answer": 1, "action_requests": [WEATHER, {"function": "boom", "arguments": {"x": 2}},
                                                          {"function": "nope", "arguments": {}}]})
    _, trace = await branch.operate_traced(instruction="q", actions=True, middle=mid)
    records = trace.actions
    assert [r.decision for r in records] == ["allowed", "error", "rejected"]
    assert isinstance(records[0].duration_s, float) and records[0].duration_s >= 0
    assert isinstance(records[1].duration_s, float) and records[1].duration_s >= 0
    assert records[2].duration_s is None
    assert [r.invoked for r in records] == [True, True, False]
    assert json.loads(trace.to_json())["actions"][0]["duration_s"] == records[0].duration_s


# ---------------------------------------------------------------- tool signatures


def forecast(city, days: int = 3, *, units: str = "metric", verbose=False) -> dict[str, Any]:
    """Forecast for a city."""
    return {"city": city, "days": days, "units": units, "verbose": verbose}


def collect(*items: int, **options: str) -> dict[str, Any]:
    """Collect options."""
    return {"items": list(items), "options": options}


def test_schema_of_defaulted_unannotated_and_keyword_only_parameters():
    assert Tool(forecast).schema == {
        "type": "function",
        "function": {
            "name": "forecast",
            "description": "Forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {},
                    "days": {"type": "integer", "default": 3},
                    "units": {"type": "string", "default": "metric"},
                    "verbose": {"default": False},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }


def test_variadic_parameters_are_not_offered_and_keywords_open_the_schema():
    params = Tool(collect).schema["function"]["parameters"]
    assert params["properties"] == {}
    assert params.get("additionalProperties", True) is not False
    assert Tool(collect).validate_arguments({"colour": "red"}) == {"colour": "red"}


async def test_defaulted_unannotated_and_keyword_only_parameters_reach_the_function():
    branch = Branch(tools=[forecast])
    responses = await act(branch, [
        {"function": "forecast", "arguments": {"city": "Oslo"}},
        {"function": "forecast", "arguments": {"city": ["any", "value"], "days": "5", "units": "imperial",
                                               "verbose": "yes"}},
        {"function": "forecast", "arguments": {"days": 1}},
        {"function": "forecast", "arguments": {"city": "Oslo", "hours": 1}},
    ], ActionParam(strategy="sequential", suppress_errors=True))
    assert responses[0].output == {"city": "Oslo", "days": 3, "units": "metric", "verbose": False}
    # an unannotated parameter takes any value as given; an annotated one is coerced
    assert responses[1].output == {"city": ["any", "value"], "days": 5, "units": "imperial", "verbose": "yes"}
    assert responses[2].output["type"] == "ToolArgumentsError"  # the required one is missing
    assert responses[3].output["type"] == "ToolArgumentsError"  # an unknown one is refused
    assert [r.record.decision for r in responses] == ["allowed", "allowed", "rejected", "rejected"]


# ---------------------------------------------------------------- tool errors: what the model and the log read


def tally(xs: list[int], label: str) -> str:
    """Count."""
    return f"{label}: {len(xs)}"


def test_argument_errors_name_the_tool_and_every_failing_location():
    from lionops.tools import ToolArgumentsError

    tool = Tool(tally)
    with pytest.raises(ToolArgumentsError) as info:
        tool.validate_arguments({"xs": [1, "a", 3]})
    assert info.value.tool == "tally"
    assert str(info.value) == ("invalid arguments for 'tally': xs.1: Input should be a valid integer, "
                               "unable to parse string as an integer; label: Field required")
    with pytest.raises(ToolArgumentsError) as info:
        tool.validate_arguments([1])  # type: ignore[arg-type]
    assert str(info.value).startswith("invalid arguments for 'tally': (arguments): ")
    assert str(ToolArgumentsError("tally", "arguments cannot be copied (TypeError)")) == (
        "invalid arguments for 'tally': arguments cannot be copied (TypeError)")


async def test_unknown_and_not_offered_tools_say_what_was_offered():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    responses = await act(branch, [{"function": "launch", "arguments": {}},
                                   {"function": "send_message", "arguments": {"to": "a", "body": "b"}}],
                          ActionParam(suppress_errors=True, tools=["get_weather", "search"]))
    assert box.total == 0
    assert responses[0].output["error"] == "unknown function 'launch'; registered tools: ['get_weather', 'search']"
    assert responses[0].output["type"] == "UnknownToolError"
    assert responses[1].output["error"] == (
        "'send_message' is not offered in this call; offered tools: ['get_weather', 'search']")
    assert responses[1].output["type"] == "ToolNotOfferedError"
    assert [r.record.decision for r in responses] == ["rejected", "not_offered"]


async def test_a_tool_registered_anew_after_it_was_offered_does_not_run():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    calls: list[str] = []

    def get_weather(city: str) -> str:
        """A replacement registered while the call runs."""
        calls.append(city)
        return "replaced"

    async def middle(b, instruction, chat_param, parse_param=None, clear_messages=False, skip_validation=False):
        b.register_tools(get_weather, update=True)
        return {"answer": 1, "action_requests": [WEATHER]}

    out, trace = await branch.operate_traced(instruction="q", actions=True, middle=middle)
    assert calls == [] and box.total == 0
    assert trace.actions[0].decision == "not_offered"
    assert out["action_responses"][0].output["error"].startswith(
        "'get_weather' was registered anew after it was offered in this call; offered tools: [")


async def test_tool_invoke_validates_then_calls():
    from lionops.tools import ToolArgumentsError

    tool = Tool(forecast)
    assert await tool.invoke({"city": "Rome", "days": "2"}) == {
        "city": "Rome", "days": 2, "units": "metric", "verbose": False}
    with pytest.raises(ToolArgumentsError):
        await tool.invoke({"days": 2})


async def test_arguments_that_cannot_be_copied_are_refused_before_the_gate():
    import threading

    asked: list[str] = []
    ran: list[Any] = []

    def keep(value) -> str:
        """Keep anything."""
        ran.append(value)
        return "kept"

    branch = Branch(tools=[keep])
    branch.gate(lambda inv: asked.append(inv.function) or True)
    [response] = await act(branch, [{"function": "keep", "arguments": {"value": threading.Lock()}}],
                           ActionParam(suppress_errors=True))
    assert ran == [] and asked == []
    assert response.record.decision == "rejected"
    assert response.output["error"] == "invalid arguments for 'keep': arguments cannot be copied (TypeError)"


# ---------------------------------------------------------------- act(): the exact words of each refusal


async def test_requests_past_the_cap_are_answered_and_never_run():
    from lionops.errors import RequestLimitError

    box = ToolBox()
    branch = Branch(tools=box.tools(), max_requests=1)
    three = [WEATHER, {"function": "search", "arguments": {"q": "a"}}, {"function": "search", "arguments": {"q": "b"}}]
    responses = await act(branch, three, ActionParam(strategy="sequential", suppress_errors=True))
    assert box.calls == {"get_weather": 1}
    assert [r.record.decision for r in responses] == ["allowed", "rejected", "rejected"]
    assert responses[1].output == {
        "error": "request 1 is past the cap of 1 action requests per call; not run", "type": "RequestLimitError",
        "message": "Error invoking action 'search': request 1 is past the cap of 1 action requests per call; not run"}
    assert responses[2].record.reason == "request 2 is past the cap of 1 action requests per call; not run"
    assert [r.record.invoked for r in responses] == [True, False, False]

    box2 = ToolBox()
    strict = Branch(tools=box2.tools(), max_requests=1)
    with pytest.raises(RequestLimitError, match="request 1 is past the cap of 1"):
        await act(strict, three, ActionParam(suppress_errors=False))
    assert box2.total == 0
    assert [e.content["index"] for e in strict.logs] == [1, 2]


async def test_a_tool_past_its_timeout_is_timed_out():
    from lionops import AlcallParams

    async def slow(n: int) -> int:
        """Never returns in time."""
        import anyio

        await anyio.sleep(30)
        return n

    branch = Branch(tools=[slow])
    for strategy in ("sequential", "concurrent"):
        [response] = await act(branch, [{"function": "slow", "arguments": {"n": 1}}],
                               ActionParam(strategy=strategy, suppress_errors=True,
                                           action_call_params=AlcallParams(retry_timeout=0.05)))
        rec = response.record
        assert rec.decision == "timed_out" and rec.invoked is True and isinstance(rec.duration_s, float)
        assert response.output == {"error": "'slow' did not return within 0.05s", "type": "TimeoutError",
                                   "message": "Error invoking action 'slow': 'slow' did not return within 0.05s"}


async def test_a_gate_past_its_timeout_denies_with_the_reason():
    import anyio

    box = ToolBox()
    branch = Branch(tools=box.tools(), gate_timeout=0.05)

    async def slow_gate(invocation) -> bool:
        await anyio.sleep(30)
        return True

    branch.gate(slow_gate)
    [response] = await act(branch, [{**WEATHER, "call_id": "c9"}], ActionParam(suppress_errors=True))
    assert box.total == 0
    reason = f"gate {slow_gate.__qualname__} did not answer within 0.05s"
    assert response.output == {"error": "denied by governance gate", "function": "get_weather", "reason": reason}
    assert response.record.decision == "timed_out" and response.record.reason == reason
    assert [m.metadata for m in branch.messages] == [{"index": 0, "decision": "timed_out", "call_id": "c9"}] * 2


@pytest.mark.parametrize("function, reason", [
    (7, "function must be a non-empty string, got 7"),
    ("", "function must be a non-empty string, got ''"),
    (None, "function must be a non-empty string, got None"),
])
async def test_a_request_without_a_usable_name_is_invalid(function, reason):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [{"function": function, "arguments": {}}], ActionParam(suppress_errors=True))
    assert box.total == 0
    assert response.record.decision == "invalid" and response.record.reason == reason
    assert response.output["type"] == "InvalidActionRequest"


async def test_a_request_without_a_shape_stops_the_batch_before_anything_runs():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    with pytest.raises(ValueError, match=r"Request 1 has keys \['arguments', 'tool'\]\.$"):
        await act(branch, [WEATHER, {"tool": "search", "arguments": {}}], ActionParam(suppress_errors=True))
    with pytest.raises(ValueError, match=r"Request 0 is int\.$"):
        await act(branch, [3], ActionParam(suppress_errors=True))
    assert box.total == 0 and list(branch.logs) == [] and list(branch.messages) == []


async def test_an_output_that_does_not_serialize_is_a_tool_error():
    def opaque() -> object:
        """Returns an opaque object."""
        return object()

    branch = Branch(tools=[opaque])
    [response] = await act(branch, [{"function": "opaque", "arguments": {}}], ActionParam(suppress_errors=True))
    assert response.record.decision == "error" and response.record.invoked is True
    assert response.output["type"] == "ToolOutputError"
    assert response.output["error"].startswith("output of 'opaque' is not JSON-serializable (object): ")


async def test_an_unknown_strategy_is_a_configuration_error():
    from lionops import ConfigurationError

    box = ToolBox()
    with pytest.raises(ConfigurationError, match=r"^Invalid action strategy 'parallel'\. "
                                                 r"Choose 'concurrent' or 'sequential'\.$"):
        await act(Branch(tools=box.tools()), [WEATHER], ActionParam(strategy="parallel"))
    assert box.total == 0


# ---------------------------------------------------------------- tools: docstrings, names, the registry


def book(city: str, nights: int = 1, *, guests=2, note: str = "") -> str:
    """Book a room
    in a hotel.

    The second paragraph is not the description.

    Arguments:
        city (str): where to stay.
        nights: how many
            nights (a continuation line is part of it).
        not an identifier: ignored.

        guests:   how many guests.
    Returns:
        note: not a parameter description.
    """
    return f"{city} {nights} {guests} {note}"


def test_descriptions_come_from_the_docstring():
    tool = Tool(book)
    assert tool.description == "Book a room in a hotel."
    props = tool.schema["function"]["parameters"]["properties"]
    assert {name: prop.get("description") for name, prop in props.items()} == {
        "city": "where to stay.", "nights": "how many nights (a continuation line is part of it).",
        "guests": "how many guests.", "note": None,
    }
    assert tool.schema["function"]["parameters"]["required"] == ["city"]
    assert Tool(book, description="Own words.").description == "Own words."


def test_a_tool_without_a_docstring_has_no_description():
    def bare(x: int) -> int:
        return x

    tool = Tool(bare)
    assert tool.description == ""
    assert tool.schema["function"]["parameters"]["properties"] == {"x": {"type": "integer"}}


@pytest.mark.parametrize("header", ["Args:", "Arguments:", "Parameters:"])
def test_every_args_header_is_read(header):
    def f(a: int) -> int:
        return a

    f.__doc__ = f"Do.\n\n{header}\n    a: the a.\n"
    assert Tool(f).schema["function"]["parameters"]["properties"]["a"]["description"] == "the a."


def test_tool_names_and_the_registry():
    with pytest.raises(ValueError, match=r"^tool name must be an identifier, got 'two words'$"):
        Tool(book, name="two words")
    with pytest.raises(TypeError, match=r"^Tool needs a callable, got int$"):
        Tool(3)  # type: ignore[arg-type]
    assert repr(Tool(book, name="reserve")) == "Tool(name='reserve')"

    branch = Branch(tools=[book])
    assert repr(branch.acts) == "ActionManager(tools=['book'])"
    assert branch.acts.names == ["book"] and "book" in branch.acts and len(branch.acts) == 1
    with pytest.raises(ValueError, match=r"^a tool named 'book' is already registered$"):
        branch.register_tools(book)
    [again] = branch.register_tools(Tool(book, description="Again."), update=True)
    assert branch.acts.get("book") is again and branch.acts.get(7) is None and branch.acts.get(["book"]) is None
    with pytest.raises(ValueError, match=r"^tool 'nope' is not registered$"):
        branch.acts.select(["book", "nope"])
    assert branch.acts.select(book) == [again] and branch.acts.select("book") == [again]
    assert branch.acts.get_tool_schema()["tools"][0]["function"]["description"] == "Again."
    reserve = Tool(book, name="reserve")
    branch.register_tools(reserve)
    assert branch.acts.select(reserve) == [reserve]  # a Tool is selected by its own name


async def test_a_sync_tool_that_returns_an_awaitable_is_awaited():
    async def fetch(n: int) -> int:
        return n * 2

    def deferred(n: int):
        """Returns a coroutine."""
        return fetch(n)

    branch = Branch(tools=[deferred])
    [response] = await act(branch, [{"function": "deferred", "arguments": {"n": 21}}], ActionParam())
    assert response.output == 42 and response.record.decision == "allowed"


async def test_the_trace_keeps_every_field_of_each_record():
    """What replay and users read back from a trace: one record per request."""
    box = ToolBox()
    branch = Branch(tools=box.tools())
    mid = ScriptedMiddle({"answer": 1, "action_requests": [
        {"function": "get_weather", "arguments": '{"city": "Paris"}', "call_id": "k1"},
        {"function": "get_weather", "arguments": {"town": "Paris"}},
    ]})
    _, trace = await branch.operate_traced(instruction="q", actions=True, middle=mid)
    allowed, rejected = json.loads(trace.to_json())["actions"]
    assert isinstance(allowed.pop("duration_s"), float)
    assert allowed == {"index": 0, "function": "get_weather", "raw_arguments": {"city": "Paris"},
                       "arguments": {"city": "Paris"}, "decision": "allowed", "reason": None,
                       "output": {"city": "Paris", "temp_c": 20}, "error_type": None, "call_id": "k1",
                       "invoked": True}
    assert rejected["decision"] == "rejected" and rejected["invoked"] is False and rejected["duration_s"] is None
    assert rejected["arguments"] is None and rejected["raw_arguments"] == {"town": "Paris"}
    assert rejected["error_type"] == "ToolArgumentsError" and rejected["call_id"] is None
    assert rejected["reason"].startswith("invalid arguments for 'get_weather': ")
    assert rejected["output"]["message"] == f"Error invoking action 'get_weather': {rejected['reason']}"


async def test_the_errors_act_raises_carry_what_was_refused():
    from lionops.tools import ToolNotOfferedError, UnknownToolError

    box = ToolBox()
    branch = Branch(tools=box.tools())
    with pytest.raises(UnknownToolError) as unknown:
        await branch.act({"function": "launch", "arguments": {}}, suppress_errors=False)
    assert (unknown.value.name, unknown.value.known) == ("launch", ["get_weather", "run_shell", "search",
                                                                    "send_message"])
    with pytest.raises(ToolNotOfferedError) as not_offered:
        await branch.act({"function": "search", "arguments": {"q": "x"}}, suppress_errors=False,
                         tools=["get_weather"])
    err = not_offered.value
    assert (err.name, err.offered, err.replaced) == ("search", ["get_weather"], False)
    replaced = ToolNotOfferedError("search", ["search"], replaced=True)
    assert replaced.replaced is True
    assert str(replaced) == "'search' was registered anew after it was offered in this call; offered tools: ['search']"
    assert box.total == 0
