"""Governance that no road around it can bypass: nested arguments the gate or the tool
could change, gates that cannot be interrupted, flags and switches that
reach ``operate()`` by another road.

Each runs through the public API; path-dependent ones through the API path
(a real HTTP server on loopback), the CLI path (a real subprocess) and a
custom Middle.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from lionops import Branch, Instruct, ToolInvocation
from tests.governance_support import PATHS, operate_via
from tests.helpers import ScriptedMiddle

pytestmark = pytest.mark.anyio


def _delete_tool(seen: list[dict[str, Any]]) -> Any:
    def delete_files(paths: list[str], options: dict[str, Any], note: Any = None) -> str:
        """Delete files (a side effect)."""
        seen.append({"paths": list(paths), "options": dict(options),
                     "note": dict(note) if isinstance(note, dict) else note})
        paths.append("added-by-the-tool")  # a tool that changes its own arguments
        options["force"] = "changed-by-the-tool"
        if isinstance(note, dict):
            note["text"] = "changed-by-the-tool"
        return "deleted"
    return delete_files


REQUEST = {"function": "delete_files",
           "arguments": {"paths": ["tmp/a"], "options": {"force": False}, "note": {"text": "as written"}}}


@pytest.mark.parametrize("path", PATHS)
async def test_a_gate_changing_nested_arguments_does_not_change_what_the_tool_receives(path, tmp_path):
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])

    def gate(inv: ToolInvocation) -> bool:
        inv.arguments["paths"].append("/etc/passwd")  # nested list: its own copy
        inv.arguments["options"]["force"] = True
        inv.raw_arguments["note"]["text"] = "changed-by-the-gate"
        return True

    branch.gate(gate)
    result, trace = await operate_via(path, tmp_path, branch, [REQUEST])
    assert trace.exit == "enriched"
    assert seen == [{"paths": ["tmp/a"], "options": {"force": False}, "note": {"text": "as written"}}]
    (rec,) = trace.actions
    # the record holds what the gate approved and what the model wrote, not
    # what the gate or the tool did to their copies afterwards
    assert rec.decision == "allowed"
    assert rec.arguments == REQUEST["arguments"] and rec.raw_arguments == REQUEST["arguments"]
    assert result.action_responses[0].record == rec
    request_msg, response_msg = list(branch.messages)[-2:]
    assert request_msg.content["arguments"] == REQUEST["arguments"]
    assert response_msg.content["arguments"] == REQUEST["arguments"]
    assert branch.logs.of_kind("action")[-1].content["arguments"] == REQUEST["arguments"]


async def test_a_tool_changing_its_arguments_leaves_the_record_and_the_next_call_alone():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    gate_saw: list[Any] = []
    branch.gate(lambda inv: gate_saw.append(dict(inv.arguments)) or True)
    out = await branch.act([REQUEST, REQUEST], strategy="sequential")
    assert [r.record.decision for r in out] == ["allowed", "allowed"]
    assert seen[0] == seen[1] == {"paths": ["tmp/a"], "options": {"force": False},
                                  "note": {"text": "as written"}}
    assert all(r.record.arguments == REQUEST["arguments"] for r in out)
    assert all(r.record.raw_arguments == REQUEST["arguments"] for r in out)
    assert REQUEST["arguments"]["paths"] == ["tmp/a"]  # the caller's request object too
    assert gate_saw[1]["paths"] == ["tmp/a"]


async def test_arguments_that_cannot_be_copied_are_rejected_and_never_run():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    (out,) = await branch.act({"function": "delete_files",
                               "arguments": {"paths": [], "options": {}, "note": threading.Lock()}})
    assert seen == [] and out.record.decision == "rejected"
    assert out.output["type"] == "ToolArgumentsError" and "cannot be copied" in out.output["error"]


# ---------------------------------------------------------------- gates that cannot be interrupted


async def test_a_sync_gate_that_blocks_past_its_timeout_denies():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)], gate_timeout=0.05)
    branch.gate(lambda inv: time.sleep(0.5) or True)  # blocks; cannot be cancelled
    (out,) = await branch.act(REQUEST)
    assert seen == [] and out.record.decision == "timed_out"
    assert out.output["error"] == "denied by governance gate"
    assert branch.logs.of_kind("gate_timeout")[0].content["timeout_s"] == 0.05


@pytest.mark.parametrize("path", PATHS)
async def test_a_blocking_gate_that_never_returns_is_abandoned_at_its_timeout(path, tmp_path):
    # a sync check marked blocking runs in a worker thread: the wait ends at
    # gate_timeout even though the check never returns on its own
    seen: list[dict[str, Any]] = []
    release, asked = threading.Event(), []
    branch = Branch(tools=[_delete_tool(seen)], gate_timeout=0.1)

    def ask_a_person(inv: ToolInvocation) -> bool:
        asked.append((inv.function, threading.current_thread() is threading.main_thread()))
        release.wait(60)  # nobody answers while the call waits
        return True

    assert branch.gate(ask_a_person, blocking=True) is ask_a_person  # still usable as a decorator
    try:
        result, trace = await operate_via(path, tmp_path, branch, [REQUEST])
    finally:
        release.set()
    assert asked == [("delete_files", False)] and seen == []
    assert [a.decision for a in trace.actions] == ["timed_out"]
    assert result.action_responses[0].output["reason"] == (
        "gate test_a_blocking_gate_that_never_returns_is_abandoned_at_its_timeout.<locals>.ask_a_person "
        "did not answer within 0.1s")
    assert branch.logs.of_kind("gate_timeout")[0].content["gate"].endswith("ask_a_person")


async def test_a_blocking_gate_that_answers_in_time_decides_as_an_inline_one():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    branch.gate(lambda inv: inv.arguments["paths"] != ["tmp/a"], blocking=True)
    (out,) = await branch.act(REQUEST)
    assert (out.record.decision, seen) == ("denied", [])
    branch = Branch(tools=[_delete_tool(seen)])
    branch.gate(lambda inv: True, blocking=True)
    (out,) = await branch.act(REQUEST)
    assert out.record.decision == "allowed" and len(seen) == 1


@pytest.mark.parametrize("path", PATHS)
async def test_a_shielded_async_gate_that_answers_late_denies(path, tmp_path):
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)], gate_timeout=0.05)

    async def shielded(inv: ToolInvocation) -> bool:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.5)
        return True

    branch.gate(shielded)
    result, trace = await operate_via(path, tmp_path, branch, [REQUEST])
    assert seen == [] and [a.decision for a in trace.actions] == ["timed_out"]
    assert result.action_responses[0].is_error


# ---------------------------------------------------------------- flags by another road


@pytest.mark.parametrize("field,value", [("actions", "no"), ("actions", "false"), ("reason", "no"), ("actions", 1)])
@pytest.mark.parametrize("how", ["assigned", "constructed"])
async def test_a_non_bool_flag_inside_an_instruct_is_a_type_error_at_prepare(field, value, how):
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    if how == "assigned":
        instruct = Instruct(instruction="go")
        setattr(instruct, field, value)
    else:
        instruct = Instruct.model_construct(instruction="go", **{field: value})
    with pytest.raises(TypeError, match=f"Instruct.{field} must be a bool"):
        await branch.operate(instruct=instruct, middle=ScriptedMiddle({"action_requests": [REQUEST]}))
    assert seen == [] and branch.traces[-1].states == ["prepare", "raised"]


@pytest.mark.parametrize("value", [False, True, "no"])
async def test_suppress_errors_is_refused_by_operate_not_sent_to_the_provider(value):
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    with pytest.raises(TypeError, match="suppress_errors is not an operate"):
        await branch.operate(instruction="go", actions=True, suppress_errors=value,
                             middle=ScriptedMiddle({"action_requests": [REQUEST]}))
    assert seen == [] and branch.traces[-1].states == ["prepare", "raised"]


# ---------------------------------------------------------------- the guards decide on plain values


class _Shifty(dict):
    """A dict result whose ``get`` answers differently each time it is asked."""

    def __init__(self, *answers: Any) -> None:
        super().__init__(action_requests=answers[0])
        self.answers = list(answers)
        self.asked = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]


async def test_the_result_is_read_once_and_the_requests_the_gate_saw_are_the_ones_run():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    other = {"function": "delete_files", "arguments": {"paths": ["/"], "options": {"force": True}}}
    result = _Shifty([REQUEST], [other], None)
    traced = await branch.operate_traced(instruction="go", actions=True, middle=ScriptedMiddle(result))
    assert result.asked == 1
    assert traced.trace.exit == "enriched" and [s["paths"] for s in seen] == [["tmp/a"]]


async def test_reading_the_result_raising_is_the_adapter_phase_failing_not_a_guard():
    class Raises(dict):
        def get(self, key: Any, default: Any = None) -> Any:
            raise KeyError("no reading")

    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[_delete_tool(seen)])
    with pytest.raises(KeyError, match="no reading"):
        await branch.operate(instruction="go", actions=True,
                             middle=ScriptedMiddle(Raises(action_requests=[REQUEST])))
    assert seen == [] and branch.traces[-1].states == ["prepare", "schema", "adapter", "raised"]


# ---------------------------------------------------------------- a tool registered anew during the call


def _search(ran: list[str], label: str) -> Any:
    def search(q: str) -> str:
        """Search."""
        ran.append(label)
        return label
    return search


async def test_a_tool_registered_anew_under_an_offered_name_during_the_call_does_not_run():
    ran: list[str] = []
    branch = Branch(tools=[_search(ran, "offered")])

    class Replacing(ScriptedMiddle):
        async def __call__(self, branch: Branch, *args: Any, **kw: Any) -> Any:
            branch.acts.register(_search(ran, "replacement"), update=True)
            return await super().__call__(branch, *args, **kw)

    traced = await branch.operate_traced(
        instruction="go", actions=True, tools=["search"],
        middle=Replacing({"action_requests": [{"function": "search", "arguments": {"q": "x"}}]}))
    assert ran == [] and [a.decision for a in traced.trace.actions] == ["not_offered"]
    (out,) = traced.result["action_responses"]
    assert out.output["type"] == "ToolNotOfferedError" and "registered anew" in out.output["error"]


async def test_a_gate_replacing_a_tool_mid_batch_runs_only_the_offered_one():
    ran: list[str] = []
    branch = Branch(tools=[_search(ran, "offered")])

    def gate(inv: ToolInvocation) -> bool:
        branch.acts.register(_search(ran, "replacement"), update=True)
        return True

    branch.gate(gate)
    reqs = [{"function": "search", "arguments": {"q": "a"}}, {"function": "search", "arguments": {"q": "b"}}]
    out = await branch.act(reqs, strategy="sequential")
    assert ran == ["offered"] and [r.record.decision for r in out] == ["allowed", "not_offered"]


async def test_an_async_gate_marked_blocking_is_refused_when_registered():
    async def check(inv: ToolInvocation) -> bool:
        return True

    class Checker:
        async def __call__(self, inv: ToolInvocation) -> bool:
            return True

    branch = Branch()
    with pytest.raises(TypeError, match=r"is async: blocking=True is for sync code"):
        branch.gate(check, blocking=True)
    with pytest.raises(TypeError, match=r"^gate Checker is async"):
        branch.gate(Checker(), blocking=True)
    assert branch.gate(check) is check  # awaited, and cut by its timeout, as before
