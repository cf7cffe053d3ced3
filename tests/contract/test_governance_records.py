"""Nothing that ran goes unrecorded, and decisions are typed facts.

A stray ``CancelledError`` (not from a cancel scope) or another
``BaseException`` raised by a tool, gate or hook inside a batch surfaces as
itself, and every request decided before it keeps its record: messages, event
log, ``Trace.actions``. Each decision is one ``ActionRecord``; nothing reads it
back from an output's shape.
"""

from __future__ import annotations

import asyncio
import json
from types import MappingProxyType
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, ConfigDict

from lionops import AlcallParams, Branch, HookPoint
from lionops.models import ActionRecord
from tests.governance_support import PATHS, operate_via
from tests.helpers import ScriptedMiddle

pytestmark = pytest.mark.anyio


class Abort(BaseException):
    """A BaseException that is not a cancellation."""


def _tools(ran: list[str]) -> list[Any]:
    def ok(n: int) -> int:
        """Returns at once."""
        ran.append(f"ok{n}")
        return n

    async def stray() -> str:
        """Raises a CancelledError no cancel scope asked for (as awaiting a
        future someone else cancelled does)."""
        ran.append("stray")
        raise asyncio.CancelledError("a future someone else cancelled")

    async def aborts() -> str:
        """Raises a BaseException."""
        ran.append("aborts")
        raise Abort("stop")

    def looks_failed() -> dict[str, Any]:
        """Succeeds with an output shaped like an error or a denial."""
        ran.append("looks_failed")
        return {"error": "denied by governance gate", "function": "looks_failed"}

    def no_error() -> dict[str, Any]:
        """Succeeds with ``error: None``."""
        ran.append("no_error")
        return {"error": None, "ok": True}

    return [ok, stray, aborts, looks_failed, no_error]


def req(function: str, **arguments: Any) -> dict[str, Any]:
    return {"function": function, "arguments": arguments}


def _check_recorded(branch: Branch, trace: Any, ran: list[str], done: dict[int, str]) -> None:
    """Every request in ``done`` (index -> decision) is recorded everywhere."""
    records = {a.index: a.decision for a in trace.actions}
    assert {i: records.get(i) for i in done} == done
    responses = branch.messages.by_role("action_response")
    assert [m.metadata["index"] for m in responses] == sorted(records)  # request order
    logged = [e for e in branch.logs if e.content.get("decision") is not None]
    assert sorted(e.content["index"] for e in logged) == sorted(records)
    # every tool that ran has a record saying it was invoked
    assert len(ran) == sum(a.invoked for a in trace.actions)


STRAY = [asyncio.CancelledError, Abort]


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
@pytest.mark.parametrize("raiser", ["stray", "aborts"])
async def test_a_tool_raising_a_base_exception_surfaces_it_with_the_records(raiser, strategy):
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    error = asyncio.CancelledError if raiser == "stray" else Abort
    middle = ScriptedMiddle({"action_requests": [req("ok", n=0), req(raiser), req("ok", n=2)]})
    with anyio.fail_after(10), pytest.raises(error):
        await branch.operate(instruction="go", actions=True, middle=middle, action_strategy=strategy)
    trace = branch.traces[-1]
    assert trace.states[-2:] == ["act", "raised"] and trace.error.startswith(error.__name__)
    assert "ok0" in ran and raiser in ran
    by_index = {a.index: a for a in trace.actions}
    assert by_index[0].decision == "allowed" and by_index[0].output == 0
    assert by_index[1].decision == "error" and by_index[1].error_type == error.__name__
    assert by_index[1].invoked
    _check_recorded(branch, trace, ran, {0: "allowed", 1: "error"})
    if strategy == "sequential":
        assert "ok2" not in ran and 2 not in by_index  # nothing after the failure starts


@pytest.mark.parametrize("where", ["gate", "tool_pre", "tool_post", "tool_error", "writeback"])
@pytest.mark.parametrize("error", STRAY)
async def test_an_observer_or_gate_raising_a_base_exception_keeps_what_ran(where, error):
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))

    def boom(payload: Any) -> bool:
        """Raises for the second request (a ToolInvocation or a hook payload)."""
        index = payload.index if hasattr(payload, "index") else payload.get("index")
        if index == 1:
            raise error(where)
        return True

    class Provider:
        def writeback(self, response: Any) -> None:
            raise error("writeback")

    requests = [req("ok", n=0), req("ok", n=1)]
    if where == "gate":
        branch.gate(boom)
    elif where == "writeback":
        branch.add_context_provider(Provider())
    elif where == "tool_error":
        requests.append(req("looks_failed"))  # after the failure: never starts

        async def fail(n: int) -> None:
            """Raises."""
            ran.append("fail")
            raise ValueError("bad")

        branch.register_tools(fail)
        requests[1] = req("fail", n=1)
        branch.on(HookPoint.TOOL_ERROR, boom)
    else:
        branch.on(HookPoint(where), boom)
    with anyio.fail_after(10), pytest.raises(error):
        await branch.operate(instruction="go", actions=True, middle=ScriptedMiddle({"action_requests": requests}),
                             action_strategy="sequential")
    trace = branch.traces[-1]
    by_index = {a.index: a for a in trace.actions}
    assert by_index[0].decision == "allowed" and "ok0" in ran
    if where == "tool_post":
        assert by_index[1].decision == "allowed" and "ok1" in ran  # ran, and recorded
    elif where == "writeback":
        assert by_index[1].decision == "allowed"
    elif where == "tool_error":
        assert by_index[1].decision == "error" and by_index[1].error_type == "ValueError"
        assert "looks_failed" not in ran and 2 not in by_index
    else:  # gate, tool_pre: the tool never started
        assert "ok1" not in ran and not by_index[1].invoked
    _check_recorded(branch, trace, ran, {0: "allowed"})


async def test_a_stray_cancellation_in_a_concurrent_batch_is_not_swallowed():
    """The shape of the hole: three concurrent tools, the middle one stray-
    cancelled; before, operate() returned with no responses recorded."""
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    middle = ScriptedMiddle({"action_requests": [req("ok", n=0), req("stray"), req("ok", n=2)]})
    with anyio.fail_after(10), pytest.raises(asyncio.CancelledError):
        await branch.operate(instruction="go", actions=True, middle=middle)
    assert branch.traces[-1].exit == "failed"
    assert branch.logs.of_kind("action")  # what ran is in the log
    assert branch.messages.by_role("action_response")


async def test_a_real_cancellation_still_propagates_and_records_the_started_tool():
    started = anyio.Event()

    async def hang() -> str:
        """Never returns."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    branch = Branch(tools=[hang])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            async def call() -> None:
                with anyio.CancelScope() as scope:
                    holder.append(scope)
                    await branch.operate(instruction="go", actions=True,
                                         middle=ScriptedMiddle({"action_requests": [req("hang")]}))
            holder: list[anyio.CancelScope] = []
            tg.start_soon(call)
            await started.wait()
            holder[0].cancel()
    assert holder[0].cancelled_caught
    (record,) = branch.traces[-1].actions
    assert record.decision == "error" and record.reason == "tool cancelled" and record.invoked


# ---------------------------------------------------------------- typed decisions


async def test_decisions_come_from_the_record_not_the_output_shape():
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    branch.gate(lambda inv: inv.function != "ok" or inv.arguments["n"] != 9)
    out = await branch.act([req("looks_failed"), req("no_error"), req("ok", n=9), req("ok", n="x"),
                            {"function": 7, "arguments": {}}])
    assert [r.record.decision for r in out] == ["allowed", "allowed", "denied", "rejected", "invalid"]
    assert [r.is_error for r in out] == [False, False, True, True, True]
    assert out[0].output == out[2].output | {"function": "looks_failed"}  # same shape, different facts
    # the log says the same, from the same record (logged as decided: any order)
    logged = sorted((e.content["index"], e.content["decision"]) for e in branch.logs if "decision" in e.content)
    assert [d for _, d in logged] == [r.record.decision for r in out]
    assert [m.metadata["decision"] for m in branch.messages.by_role("action_response")] == [
        r.record.decision for r in out]


async def test_messages_are_written_in_request_order_with_call_ids():
    second_done = anyio.Event()
    order: list[str] = []

    async def first() -> str:
        """Finishes after second."""
        await second_done.wait()
        order.append("first")
        return "1"

    async def second() -> str:
        """Finishes first."""
        order.append("second")
        second_done.set()
        return "2"

    branch = Branch(tools=[first, second])
    with anyio.fail_after(10):
        out = await branch.act([{"function": "first", "arguments": {}, "call_id": "call_a"},
                                {"function": "second", "arguments": {}, "call_id": "call_b"}])
    assert order == ["second", "first"]  # completion order
    assert [m.content["function"] for m in branch.messages] == ["first", "first", "second", "second"]
    assert [m.metadata["call_id"] for m in branch.messages] == ["call_a"] * 2 + ["call_b"] * 2
    assert [r.record.call_id for r in out] == ["call_a", "call_b"]


async def test_records_round_trip_through_the_trace_json():
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    _, trace = await branch.operate_traced(
        instruction="go", actions=True,
        middle=ScriptedMiddle({"action_requests": [req("ok", n=1), req("nope")]}))
    assert [a.decision for a in trace.actions] == ["allowed", "rejected"]
    again = type(trace).from_json(trace.to_json())
    assert again.actions == trace.actions and isinstance(again.actions[0], ActionRecord)
    assert json.loads(trace.to_json())["actions"][0]["decision"] == "allowed"
    assert "decision" in repr(trace.actions[0]) or "allowed" in repr(trace.actions[0])


# ---------------------------------------------------------------- results enrich cannot attach to


class FrozenAnswer(BaseModel):
    model_config = ConfigDict(frozen=True)
    answer: int


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    answer: int = 0


class Foreign(BaseModel):
    action_requests: list[dict[str, Any]] | None = None


class NoSetItem(dict):
    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("read-only")


def _unattachable(kind: str) -> Any:
    requests = [req("ok", n=1)]
    if kind == "mapping_proxy":
        return MappingProxyType({"action_requests": requests})
    if kind == "dict_subclass":
        return NoSetItem(action_requests=requests)
    if kind == "foreign_model":
        return Foreign(action_requests=requests)
    if kind == "extra_allow":
        return Loose(answer=1, action_requests=requests)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["mapping_proxy", "dict_subclass", "foreign_model", "extra_allow"])
async def test_no_tool_runs_for_a_result_without_a_slot(kind):
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    value = _unattachable(kind)
    out, trace = await branch.operate_traced(instruction="go", actions=True, middle=ScriptedMiddle(value))
    assert out is value and trace.exit == "no_response_slot"
    assert ran == [] and trace.actions == [] and not branch.logs.of_kind("action")
    assert trace.transitions[-1].guards["responses_unattachable"] is True


@pytest.mark.parametrize("path", PATHS)
async def test_a_frozen_response_model_runs_no_tool(path, tmp_path):
    """A caller model with ``frozen=True``: the generated response type is
    frozen too, so action_responses cannot be set and no tool may run."""
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    out, trace = await operate_via(path, tmp_path, branch, [req("ok", n=1)], response_format=FrozenAnswer)
    assert trace.exit == "no_response_slot" and ran == []
    assert out.answer == 1 and out.action_requests


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize("flag,value", [
    ("invoke_actions", "false"), ("actions", "no"), ("actions", 1), ("skip_validation", "False"),
    ("reason", 0), ("clear_messages", None), ("verbose_action", "yes"),
])
async def test_a_non_bool_flag_is_a_type_error_at_prepare(flag, value):
    ran: list[str] = []
    branch = Branch(tools=_tools(ran))
    kw: dict[str, Any] = {"instruction": "go", "actions": True,
                          "middle": ScriptedMiddle({"action_requests": [req("ok", n=1)]}), flag: value}
    with pytest.raises(TypeError, match=flag):
        await branch.operate(**kw)
    assert ran == [] and branch.traces[-1].states == ["prepare", "raised"]


async def test_branch_act_checks_its_flags():
    branch = Branch(tools=_tools([]))
    with pytest.raises(TypeError, match="suppress_errors"):
        await branch.act(req("ok", n=1), suppress_errors="no")  # type: ignore[arg-type]


# ---------------------------------------------------------------- bounded waits and fan-out


async def test_a_hanging_gate_times_out_and_denies():
    ran: list[str] = []
    branch = Branch(tools=_tools(ran), gate_timeout=0.05)

    async def hangs(inv: Any) -> bool:
        await anyio.sleep_forever()
        return True

    branch.gate(hangs)
    with anyio.fail_after(10):
        out = await branch.act([req("ok", n=1)])
    assert ran == [] and out[0].record.decision == "timed_out" and out[0].is_error
    assert out[0].output["error"] == "denied by governance gate" and "within 0.05s" in out[0].output["reason"]
    assert branch.logs.of_kind("gate_timeout")[0].content["timeout_s"] == 0.05


@pytest.mark.parametrize("point", ["tool_pre", "tool_post", "writeback"])
async def test_a_hanging_observer_is_abandoned_and_logged(point):
    ran: list[str] = []
    branch = Branch(tools=_tools(ran), observer_timeout=0.05)

    async def hangs(*_: Any) -> None:
        await anyio.sleep_forever()

    class Provider:
        writeback = staticmethod(hangs)

    if point == "writeback":
        branch.add_context_provider(Provider())
    else:
        branch.on(HookPoint(point), hangs)
    with anyio.fail_after(10):
        out, trace = await branch.operate_traced(
            instruction="go", actions=True, middle=ScriptedMiddle({"action_requests": [req("ok", n=1)]}))
    assert trace.exit == "enriched" and ran == ["ok1"] and out["action_responses"][0].output == 1
    kind = "writeback_timeout" if point == "writeback" else "hook_timeout"
    assert len(branch.logs.of_kind(kind)) == 1


async def test_a_tool_past_its_timeout_is_recorded_timed_out():
    async def slow() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "never"

    def raises_timeout() -> str:
        """Raises TimeoutError itself: an error, not a timeout of lionops."""
        raise TimeoutError("socket")

    branch = Branch(tools=[slow, raises_timeout])
    with anyio.fail_after(10):
        out = await branch.act([req("slow"), req("raises_timeout")],
                               call_params=AlcallParams(retry_timeout=0.05))
    assert [r.record.decision for r in out] == ["timed_out", "error"]
    assert out[0].output["type"] == "TimeoutError" and out[0].record.invoked


@pytest.mark.parametrize("path", PATHS)
async def test_requests_past_the_cap_get_error_payloads_and_do_not_run(path, tmp_path):
    ran: list[str] = []
    branch = Branch(tools=_tools(ran), max_requests=2)
    result, trace = await operate_via(path, tmp_path, branch, [req("ok", n=i) for i in range(5)])
    assert sorted(ran) == ["ok0", "ok1"]
    decisions = [r.record.decision for r in result.action_responses]
    assert decisions == ["allowed", "allowed", "rejected", "rejected", "rejected"]
    assert result.action_responses[4].output["type"] == "RequestLimitError"
    assert "cap of 2" in result.action_responses[4].output["error"]


async def test_the_cap_unsuppressed_raises_before_anything_runs():
    from lionops.pipeline.act import RequestLimitError

    ran: list[str] = []
    branch = Branch(tools=_tools(ran), max_requests=1)
    with pytest.raises(RequestLimitError):
        await branch.act([req("ok", n=0), req("ok", n=1)], suppress_errors=False)
    assert ran == [] and [m.metadata["index"] for m in branch.messages.by_role("action_response")] == [1]


def test_limits_are_checked():
    with pytest.raises(ValueError):
        Branch(gate_timeout=0)
    with pytest.raises(TypeError):
        Branch(max_requests=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Branch(observer_timeout="1")  # type: ignore[arg-type]
    assert Branch(gate_timeout=None).gate_timeout is None


# ---------------------------------------------------------------- what replay records


async def test_a_recording_holds_each_decision_and_replays_it(tmp_path):
    """The cassette's tool calls come from the records: a not-offered tool, a
    gate timeout and an allowed call are recorded and replay offline."""
    from lionops.replay import Cassette, record, replay
    from lionops.testing import OpenAIServer, completion, tool_call
    from tests.helpers import ToolBox
    from tests.openai_server import make_model

    def branch_for(model: Any, box: ToolBox) -> Branch:
        branch = Branch(chat_model=model, tools=box.tools(), gate_timeout=0.05)

        async def slow_for_search(inv: Any) -> bool:
            if inv.function == "search":
                await anyio.sleep_forever()
            return True

        branch.gate(slow_for_search)
        return branch

    kw = dict(instruction="go", actions=True, tools=["get_weather", "search"])
    answer = completion(None, tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "call_1"),
                                          tool_call("send_message", {"to": "a", "body": "b"}, "call_2"),
                                          tool_call("search", {"q": "x"}, "call_3")])
    path = tmp_path / "run.json"
    box = ToolBox()
    with anyio.fail_after(20):
        with OpenAIServer([answer]) as server:
            model = make_model(server)
            recorded = await record(path, branch_for(model, box), **kw)
            await model.aclose()
        assert box.calls == {"get_weather": 1}
        assert [a.decision for a in recorded.trace.actions] == ["allowed", "not_offered", "timed_out"]
        calls = Cassette.load(path).operations[0].tool_calls
        assert [(c.function, c.decision) for c in calls] == [
            ("get_weather", "allowed"), ("send_message", "rejected"), ("search", "denied")]
        replay_box = ToolBox()
        replayed = await replay(path, branch_for(model, replay_box), **kw)
    assert replay_box.calls == {}  # the recorded output was served
    assert [(a.function, a.decision, a.output) for a in replayed.trace.actions] == [
        (a.function, a.decision, a.output) for a in recorded.trace.actions]


async def test_a_response_model_with_its_own_setattr_runs_no_tool():
    """A caller model whose ``__setattr__`` refuses: the generated response
    type inherits it, so enrich could not attach and no tool runs."""

    class Sealed(BaseModel):
        answer: int

        def __setattr__(self, name: str, value: Any) -> None:
            raise AttributeError("sealed")

    ran: list[str] = []
    branch = Branch(tools=_tools(ran))

    def build(parse_param: Any) -> Any:
        return parse_param.response_format.model_validate({"answer": 1, "action_requests": [req("ok", n=1)]})

    out, trace = await branch.operate_traced(instruction="go", actions=True, response_format=Sealed,
                                             middle=ScriptedMiddle(build))
    assert trace.exit == "no_response_slot" and ran == [] and out.answer == 1


@pytest.mark.parametrize("actions", ["5", "[1]", '[{"index": 0}]', '[{"index": "0", "decision": "allowed"}]',
                                     '[{"index": 0, "decision": "maybe"}]'])
def test_malformed_trace_actions_are_a_value_error(actions):
    from lionops import Trace

    with pytest.raises(ValueError):
        Trace.from_json(f'{{"transitions": [], "actions": {actions}}}')


@pytest.mark.parametrize("error", STRAY)
async def test_alcall_reraises_a_base_exception_of_one_call_as_itself(error):
    """AlcallParams: a non-cancellation BaseException of one call is the
    failure of that call (re-raised as itself, siblings cancelled), not a
    cancellation for the task group to swallow."""
    done: list[int] = []

    async def work(i: int) -> int:
        if i == 1:
            raise error("from call 1")
        await anyio.sleep(0)
        done.append(i)
        return i

    with anyio.fail_after(10), pytest.raises(error):
        await AlcallParams()([0, 1, 2], work)
    assert done == []  # the siblings were cancelled at their first checkpoint
    assert await AlcallParams()([0, 2, 3], work) == [0, 2, 3]


async def test_tools_of_a_concurrent_batch_do_not_leak_context_variables_to_the_caller():
    import contextvars

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")

    def mark(n: int) -> int:
        """Set a context variable and never reset it."""
        seen.set(f"tool {n}")
        return n

    branch = Branch(tools=[mark])
    out = await branch.act([{"function": "mark", "arguments": {"n": 1}}, {"function": "mark", "arguments": {"n": 2}},
                            {"function": "mark", "arguments": {"n": 3}}])
    assert [r.output for r in out] == [1, 2, 3]
    assert seen.get() == "caller"


async def test_a_single_request_does_not_leak_context_variables_to_the_caller():
    """A batch of one runs in the caller's task but in its own copy of the
    context, like each request of a larger batch: a sync or async tool, a
    gate and hooks that set a context variable and never reset it leave the
    caller's value alone, through act() and through operate()."""
    import contextvars

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")

    def mark(n: int) -> int:
        """Set a context variable and never reset it."""
        seen.set(f"tool {n}")
        return n

    async def amark(n: int) -> str:
        """Set a context variable, yield to the event loop, then read it back."""
        seen.set(f"async tool {n}")
        await anyio.sleep(0)
        return seen.get()

    branch = Branch(tools=[mark, amark])

    @branch.gate
    def gate(invocation: Any) -> bool:
        seen.set("gate")
        return True

    branch.on(HookPoint.TOOL_POST, lambda payload: seen.set("hook"))
    (out,) = await branch.act({"function": "mark", "arguments": {"n": 1}})
    assert out.output == 1 and seen.get() == "caller"
    (out,) = await branch.act({"function": "amark", "arguments": {"n": 2}})
    assert out.output == "async tool 2"  # the tool kept its own value across the checkpoint
    assert seen.get() == "caller"

    class Answer(BaseModel):
        text: str

    middle = ScriptedMiddle(lambda pp: pp.response_format(
        text="ok", action_requests=[{"function": "amark", "arguments": {"n": 3}}]))
    result = await branch.operate(instruction="q", response_format=Answer, actions=True, middle=middle)
    assert [r.output for r in result.action_responses] == ["async tool 3"]
    assert seen.get() == "caller"


async def test_each_request_of_a_sequential_batch_runs_in_its_own_context():
    """Sequential requests run one after another in the caller's task, each in
    its own copy of the context: what one tool, gate or hook sets is seen
    neither by the next request nor by the caller, through act() and operate()."""
    import contextvars

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")

    async def mark(n: int) -> str:
        """Read the context variable, set it, yield, read it back."""
        before = seen.get()
        seen.set(f"tool {n}")
        await anyio.sleep(0)
        return f"{before} -> {seen.get()}"

    branch = Branch(tools=[mark])
    branch.gate(lambda invocation: seen.set("gate") is not None)
    branch.on(HookPoint.TOOL_POST, lambda payload: seen.set("hook"))
    requests = [{"function": "mark", "arguments": {"n": n}} for n in (1, 2)]
    out = await branch.act(requests, strategy="sequential")
    assert [r.output for r in out] == ["gate -> tool 1", "gate -> tool 2"]
    assert seen.get() == "caller"

    class Answer(BaseModel):
        text: str

    middle = ScriptedMiddle(lambda pp: pp.response_format(text="ok", action_requests=requests))
    result = await branch.operate(instruction="q", response_format=Answer, actions=True,
                                  action_strategy="sequential", middle=middle)
    assert [r.output for r in result.action_responses] == ["gate -> tool 1", "gate -> tool 2"]
    assert seen.get() == "caller"


async def test_a_single_request_is_cancelled_and_times_out_as_before():
    """The copied context changes nothing about cancellation: a single slow
    async tool past its retry_timeout is timed_out, and a caller's cancel
    scope still cancels it."""
    async def slow() -> str:
        """Sleep for a long time."""
        await anyio.sleep(30)
        return "late"

    branch = Branch(tools=[slow])
    (out,) = await branch.act({"function": "slow", "arguments": {}},
                              call_params=AlcallParams(retry_timeout=0.01))
    assert out.record is not None and out.record.decision == "timed_out"
    with anyio.move_on_after(0.01) as scope:
        await branch.act({"function": "slow", "arguments": {}})
    assert scope.cancelled_caught
