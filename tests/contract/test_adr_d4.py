"""ADR-0022 D4: structured action requests execute through act() and augment the result."""

from __future__ import annotations

import logging

import anyio
import pytest
from pydantic import BaseModel

from lionops import (
    ActionParam,
    ActionRequestModel,
    ActionResponseModel,
    AlcallParams,
    Branch,
    ConfigurationError,
    HookPoint,
    act,
)
from lionops._defaults import DEFAULT_ACTION_CALL_PARAMS
from tests.helpers import ScriptedMiddle, ToolBox, as_response

pytestmark = pytest.mark.anyio

W = {"function": "get_weather", "arguments": {"city": "Paris"}}


def branch_with_box():
    box = ToolBox()
    return Branch(tools=box.tools()), box


class Carrier(BaseModel):
    function: str
    arguments: dict


async def test_accepted_request_shapes():
    """D4: a list of mappings, an ActionRequestModel, or a pydantic model exposing
    function and arguments is accepted."""
    b, box = branch_with_box()
    param = ActionParam()
    out = await act(b, [W, ActionRequestModel(**W), Carrier(**W)], param)
    assert [r.output for r in out] == [{"city": "Paris", "temp_c": 20}] * 3
    out = await act(b, W, param)  # a single request
    assert len(out) == 1 and box.calls["get_weather"] == 4


@pytest.mark.parametrize("bad", ["get_weather", 42, None, [["nested"]], {"function": "x"}, {"arguments": {}}])
async def test_other_shapes_raise_before_any_invocation(bad):
    """D4: any other shape raises ValueError before invocation — of any request."""
    b, box = branch_with_box()
    with pytest.raises(ValueError, match="action_request must be"):
        await act(b, [W, bad], ActionParam())
    assert box.total == 0 and len(b.messages) == 0


async def test_requests_read_from_model_attribute_or_mapping_key_only():
    """D4: action_requests is read from a returned model attribute or mapping
    key; plain text and other values produce no requests."""
    for value, exit_ in (({"action_requests": [W]}, "enriched"), ("get_weather(city='Paris')", "no_requests"),
                         (42, "no_requests"), ({"answer": 1}, "no_requests")):
        b, box = branch_with_box()
        _, trace = await b.operate_traced(instruction="x", actions=True, middle=ScriptedMiddle(value))
        assert trace.exit == exit_
        assert box.total == (1 if exit_ == "enriched" else 0)


async def test_empty_list_dispatches_but_does_not_enrich():
    """D4: an empty list dispatches (act runs) but yields no responses and therefore no enrichment."""
    b, _ = branch_with_box()
    raw = {"action_requests": []}
    out, trace = await b.operate_traced(instruction="x", actions=True, middle=ScriptedMiddle(raw))
    assert trace.states[-3:] == ["act", "enrich", "returned"] and trace.exit == "no_responses"
    assert out is raw and "action_responses" not in raw


async def test_returned_requests_without_action_param_cause_no_side_effect():
    """D4/Consequences: returning action_requests when no ActionParam exists
    causes no tool side effect."""
    b, box = branch_with_box()
    _, trace = await b.operate_traced(instruction="x", middle=ScriptedMiddle({"action_requests": [W]}))
    assert trace.exit == "no_action_param" and box.total == 0


async def test_sequential_runs_in_input_order_and_concurrent_overlaps():
    """D4: "sequential" awaits requests in input order; "concurrent" uses the
    configured AlcallParams callable."""
    events = []

    async def slow(tag: str) -> str:
        """Slow."""
        events.append(f"start {tag}")
        await anyio.sleep(0.01)
        events.append(f"end {tag}")
        return tag

    b = Branch(tools=[slow])
    reqs = [{"function": "slow", "arguments": {"tag": t}} for t in "ab"]
    out = await act(b, reqs, ActionParam(strategy="sequential"))
    assert events == ["start a", "end a", "start b", "end b"] and [r.output for r in out] == ["a", "b"]
    events.clear()
    out = await act(b, reqs, ActionParam(strategy="concurrent"))
    assert set(events[:2]) == {"start a", "start b"} and [r.output for r in out] == ["a", "b"]
    events.clear()
    await act(b, reqs, ActionParam(strategy="concurrent", action_call_params=AlcallParams(max_concurrent=1)))
    assert events == ["start a", "end a", "start b", "end b"]


async def test_unknown_strategy_is_a_configuration_error():
    """D4: any other strategy raises ConfigurationError (when act() dispatches);
    operate() refuses it in prepare (D1), before the Middle is awaited."""
    b, box = branch_with_box()
    with pytest.raises(ConfigurationError, match="Invalid action strategy 'parallel'"):
        await act(b, [W], ActionParam(strategy="parallel"))
    assert box.total == 0
    mid = ScriptedMiddle({"action_requests": [W]})
    with pytest.raises(ConfigurationError, match="action_strategy must be one of"):
        await b.operate(instruction="x", actions=True, action_strategy="parallel", middle=mid)
    assert b.traces[-1].states == ["prepare", "raised"] and mid.calls == 0 and box.total == 0


def test_default_action_call_params():
    """D4: the default action AlcallParams sets output_dropna=True and otherwise library defaults."""
    assert DEFAULT_ACTION_CALL_PARAMS == AlcallParams(output_dropna=True)


async def test_authorization_before_invocation_and_denial_payload():
    """D4: branch.authorize(ToolInvocation) before invoking; a denial is returned
    as an ActionResponseModel with an error payload and recorded in messages."""
    b, box = branch_with_box()
    seen = []

    async def gate(inv):
        seen.append((inv.function, inv.arguments, inv.tool.name, inv.branch_id, inv.index))
        return False

    b.gate(gate)
    out = await b.act([W])
    assert box.total == 0
    assert seen == [("get_weather", {"city": "Paris"}, "get_weather", b.id, 0)]
    assert out == [ActionResponseModel(function="get_weather", arguments={"city": "Paris"},
                                       output={"error": "denied by governance gate", "function": "get_weather"})]
    assert [m.role for m in b.messages] == ["action_request", "action_response"]
    assert b.messages[1].content["output"]["error"] == "denied by governance gate"
    assert b.logs.of_kind("denied")[0].content["function"] == "get_weather"


async def test_hooks_pre_then_post_or_error_with_200_char_summaries(caplog):
    """D4: TOOL_PRE, then TOOL_POST on success or TOOL_ERROR on an exception;
    payload summaries cut at 200 characters (the invocation is not truncated);
    verbose logging cuts its argument preview at 50."""
    calls = []

    def echo(text: str) -> str:
        """Echo."""
        return text

    def boom(text: str) -> str:
        """Boom."""
        raise RuntimeError("exploded")

    b = Branch(tools=[echo, boom])
    for point in HookPoint:
        b.on(point, lambda payload, p=point: calls.append((p, payload)))
    long = "y" * 500
    with caplog.at_level(logging.DEBUG, logger="lionops.act"):
        out = await b.act([{"function": "echo", "arguments": {"text": long}},
                           {"function": "boom", "arguments": {"text": "z"}}],
                          strategy="sequential", verbose_action=True)
    assert out[0].output == long  # not truncated
    assert [c[0] for c in calls] == [HookPoint.TOOL_PRE, HookPoint.TOOL_POST, HookPoint.TOOL_PRE, HookPoint.TOOL_ERROR]
    assert len(calls[0][1]["arguments"]) == 203 and calls[0][1]["arguments"].endswith("...")
    assert len(calls[1][1]["output"]) == 203
    assert calls[3][1]["error"] == "exploded" and calls[3][1]["type"] == "RuntimeError"
    previews = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Invoking action echo")]
    assert previews and len(previews[0].split(" with ", 1)[1][:-1]) == 53  # drop the final "."


async def test_suppressed_errors_are_logged_recorded_and_returned():
    """D4: with suppress_errors=True a tool exception is logged, recorded as an
    action response and returned as an ActionResponseModel."""

    def boom(x: int) -> int:
        """Boom."""
        raise ValueError("bad x")

    b = Branch(tools=[boom])
    (r,) = await b.act([{"function": "boom", "arguments": {"x": 1}}])
    assert r.output == {"error": "bad x", "type": "ValueError", "message": "Error invoking action 'boom': bad x"}
    assert r.is_error
    assert b.logs.of_kind("action_error")[0].content["error"] == "bad x"
    assert b.messages[-1].role == "action_response" and b.messages[-1].content["output"] == r.output


async def test_unsuppressed_error_reraised_after_hook_and_log():
    """D4: with suppress_errors=False the original exception is re-raised after
    the error hook and log path."""
    err = ValueError("bad x")

    def boom(x: int) -> int:
        """Boom."""
        raise err

    b = Branch(tools=[boom])
    hooked = []
    b.on(HookPoint.TOOL_ERROR, hooked.append)
    with pytest.raises(ValueError) as ei:
        await b.act([{"function": "boom", "arguments": {"x": 1}}], suppress_errors=False)
    assert ei.value is err and len(hooked) == 1 and len(b.logs.of_kind("action_error")) == 1


async def test_none_responses_removed_before_enrichment():
    """D4: None responses are removed before enrichment; if none remain the
    original result is returned."""
    b, _ = branch_with_box()
    raw = {"action_requests": [W]}

    class DropAll(AlcallParams):
        async def __call__(self, inputs, func):
            await super().__call__(inputs, func)
            return [None for _ in inputs]

    out, trace = await b.operate_traced(instruction="x", actions=True, call_params=DropAll(),
                                        middle=ScriptedMiddle(raw))
    assert trace.exit == "no_responses" and out is raw and "action_responses" not in raw


async def test_writeback_offered_every_response_including_denials_and_errors():
    """D4: every non-None response is offered to context-provider writeback
    before enrichment, including governance denials and suppressed errors."""
    b, box = branch_with_box()
    b.gate(lambda inv: inv.function != "send_message")
    offered = []

    class Provider:
        async def writeback(self, response):
            offered.append((response.function, response.is_error))

    b.add_context_provider(Provider())
    reqs = [W, {"function": "send_message", "arguments": {"to": "a", "body": "b"}},
            {"function": "search", "arguments": {}}]
    out = await b.operate(instruction="x", actions=True, middle=ScriptedMiddle({"action_requests": reqs}))
    assert offered == [("get_weather", False), ("send_message", True), ("search", True)]
    assert [r.function for r in out["action_responses"]] == ["get_weather", "send_message", "search"]
    with pytest.raises(TypeError, match="writeback"):
        b.add_context_provider(object())


async def test_enrichment_of_generated_model_and_mapping():
    """D4: a generated model gets action_responses updated and is returned; a
    mapping is mutated; the result is never replaced by the response list."""
    b, _ = branch_with_box()
    out, trace = await b.operate_traced(
        instruction="x", actions=True, reason=True,
        middle=ScriptedMiddle(as_response({"action_requests": [W], "reason": {"title": "t"}})),
    )
    assert type(out).__name__ == "OperativeResponse" and out.reason.title == "t"
    assert out.action_responses[0].output["city"] == "Paris" and trace.exit == "enriched"
    raw = {"keep": 1, "action_requests": [W]}
    out = await b.operate(instruction="x", actions=True, middle=ScriptedMiddle(raw))
    assert out is raw and raw["keep"] == 1 and isinstance(raw["action_responses"][0], ActionResponseModel)


async def test_foreign_model_result_runs_no_tool():
    """D4: a model result that is not the generated response type has no slot
    for action_responses, so the gate runs no tool for it (exit
    ``no_response_slot``) and the result comes back unchanged."""

    class Foreign(BaseModel):
        action_requests: list[dict] | None = None
        note: str = "kept"

    b, box = branch_with_box()
    original = Foreign(action_requests=[W])
    out, trace = await b.operate_traced(instruction="x", actions=True, middle=ScriptedMiddle(original))
    assert out is original and trace.exit == "no_response_slot"
    assert box.total == 0 and trace.actions == []
