"""ADR-0022 D3: one adapter, then one outer validation policy."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lionops import Branch, ConfigurationError, MismatchError, RawOutput
from lionops.errors import RefusalError, TruncatedOutputError
from lionops.params import ChatParam, RunParam
from tests.helpers import Answer, ScriptedMiddle, ToolBox, as_response

pytestmark = pytest.mark.anyio

REQ = [{"function": "get_weather", "arguments": {"city": "Paris"}}]


async def test_caller_middle_wins_without_wrapping():
    """D3: a caller-supplied middle wins without additional wrapping."""
    mid = ScriptedMiddle("text")
    b = Branch()
    _, trace = await b.operate_traced(instruction="x", middle=mid)
    assert mid.calls == 1 and trace.meta["middle"] == "ScriptedMiddle"


class CliModel:
    is_cli = True


@pytest.mark.parametrize("kw, branch_model, expected", [
    ({}, None, "communicate"),
    ({"stream_persist": True}, None, "run_and_collect"),
    ({}, CliModel(), "run_and_collect"),
])
async def test_adapter_selection(kw, branch_model, expected):
    """D3: RunParam or a CLI-backed branch.chat_model selects run_and_collect;
    otherwise communicate."""
    b = Branch(chat_model=branch_model)
    with pytest.raises(ConfigurationError):
        await b.operate(instruction="x", **kw)  # no endpoint: the selection is what we check
    assert b.traces[-1].meta["middle"] == expected
    assert "adapter" in b.traces[-1].states


async def test_clear_messages_and_skip_validation_are_passed():
    """D3: clear_messages and skip_validation are passed to the adapter."""
    mid = ScriptedMiddle("raw")
    b = Branch(system="sys")
    b.messages.add("user", "old")
    await b.operate(instruction="x", middle=mid, clear_messages=True, skip_validation=True)
    assert mid.seen[0]["clear_messages"] is True and mid.seen[0]["skip_validation"] is True
    assert [m.role for m in b.messages] == ["system", "user", "assistant"]


async def test_skip_validation_returns_raw_and_nothing_after():
    """D3: skip_validation=True returns immediately after the adapter: no
    instance check, no invoke_actions check, no request inspection, no tool
    execution, no writeback, no enrichment."""
    box = ToolBox()
    b = Branch(tools=box.tools())
    offered = []

    class Provider:
        def writeback(self, r):
            offered.append(r)

    b.add_context_provider(Provider())
    raw = {"action_requests": REQ}
    out, trace = await b.operate_traced(instruction="x", response_format=Answer, actions=True,
                                        skip_validation=True, handle_validation="raise",
                                        middle=ScriptedMiddle(raw))
    assert out is raw and "action_responses" not in raw
    assert box.total == 0 and offered == []
    assert trace.exit == "skip_validation" and trace.states[-2:] == ["validate", "returned"]
    assert list(trace.transitions[-1].guards) == ["phase_raised", "skip_validation_set"]


@pytest.mark.parametrize("policy, exit_, value", [
    ("return_value", "mismatch_return_value", "same"),
    ("return_none", "mismatch_return_none", None),
])
async def test_mismatch_policies_return_before_actions(policy, exit_, value):
    """D3: with a caller model class and a non-instance result, return_value
    returns it unchanged and return_none returns None, immediately: no actions
    even if the mapping contains action_requests."""
    box = ToolBox()
    b = Branch(tools=box.tools())
    raw = {"answer": "not an int", "action_requests": REQ}
    out, trace = await b.operate_traced(instruction="x", response_format=Answer, actions=True,
                                        handle_validation=policy, middle=ScriptedMiddle(raw))
    assert (out is raw) if value == "same" else (out is None)
    assert box.total == 0 and trace.exit == exit_ and "gate" not in trace.states


async def test_mismatch_raise_names_model_and_truncates_repr():
    """D3: "raise" raises a ValueError naming the expected model with at most
    the first 200 characters of repr(result)."""
    box = ToolBox()
    b = Branch(tools=box.tools())
    raw = {"blob": "x" * 500, "action_requests": REQ}
    with pytest.raises(ValueError) as ei:
        await b.operate(instruction="x", response_format=Answer, actions=True,
                        handle_validation="raise", middle=ScriptedMiddle(raw))
    err = ei.value
    assert isinstance(err, MismatchError)
    assert "Failed to parse LLM response into 'Answer'" in str(err)
    assert err.received == repr(raw)[:200] and len(err.received) == 200
    assert box.total == 0
    assert b.traces[-1].exit == "mismatch_raise" and b.traces[-1].states[-1] == "raised"
    assert "MismatchError" in b.traces[-1].transitions[-1].error


@pytest.mark.parametrize("reason, cls", [("length", TruncatedOutputError), ("refusal", RefusalError)])
async def test_uncoerced_outputs_carry_their_reason_under_raise(reason, cls):
    """A cut-off or refusal is returned uncoerced; under
    "raise" the ValueError subclass keeps the ADR message and carries the reason."""
    raw = RawOutput('{"answer": ', reason=reason, detail="I can't help with that.")
    with pytest.raises(cls) as ei:
        await Branch().operate(instruction="x", response_format=Answer, handle_validation="raise",
                               middle=ScriptedMiddle(raw))
    assert ei.value.reason == reason and "Failed to parse LLM response into 'Answer'" in str(ei.value)
    out = await Branch().operate(instruction="x", response_format=Answer, middle=ScriptedMiddle(raw))
    assert out == raw and out.reason == reason


async def test_generated_model_without_caller_class_is_inspected():
    """D3: with no caller model class, a generated action model can still be
    returned and inspected."""
    box = ToolBox()
    b = Branch(tools=box.tools())
    out, trace = await b.operate_traced(instruction="x", actions=True,
                                        middle=ScriptedMiddle(as_response({"action_requests": REQ})))
    assert trace.exit == "enriched" and box.calls["get_weather"] == 1
    assert out.action_responses[0].function == "get_weather"


async def test_invoke_actions_false_returns_before_requests_are_read():
    """D3: invoke_actions=False returns after validation and before request
    inspection — action_requests is never read."""
    reads = []

    class Probe(BaseModel):
        answer: int = 1

        @property
        def action_requests(self):
            reads.append(1)
            return REQ

    box = ToolBox()
    b = Branch(tools=box.tools())
    out, trace = await b.operate_traced(instruction="x", actions=True, invoke_actions=False,
                                        middle=ScriptedMiddle(Probe()))
    assert trace.exit == "actions_disabled" and reads == [] and box.total == 0
    assert "requests_absent" not in trace.transitions[-1].guards


async def test_adapter_error_propagates_unchanged():
    """D3: the adapter's exception leaves operate() as itself; trace ends in raised."""

    async def broken(*a, **k):
        raise ConfigurationError("no endpoint")

    b = Branch()
    with pytest.raises(ConfigurationError, match="no endpoint"):
        await b.operate(instruction="x", middle=broken)
    t = b.traces[-1]
    assert t.exit == "failed" and t.states == ["prepare", "schema", "adapter", "raised"]


async def test_coordinator_called_directly():
    """D2/D3: operate() over prepared parameters runs the same machine."""
    from lionops import operate

    mid = ScriptedMiddle(lambda pp: pp.response_format.model_validate({"answer": 3}))
    b = Branch()
    out = await operate(b, "x", ChatParam(response_format=Answer), middle=mid)
    assert out.answer == 3 and b.traces[-1].exit == "no_action_param"
    out = await operate(b, "x", RunParam(), middle=ScriptedMiddle("t"))
    assert out == "t"
