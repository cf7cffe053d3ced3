"""The offered tools are the allowed tools, and the gate judges what runs.

Each scenario runs through the API path (a real HTTP server on loopback), the
CLI path (a real subprocess) and a custom Middle: the model asks for tools,
and only what ``act()`` decides reaches the tool functions.
"""

from __future__ import annotations

from typing import Any

import pytest

from lionops import Branch, ToolInvocation
from lionops.tools import ToolNotOfferedError
from tests.governance_support import PATHS, operate_via
from tests.helpers import ToolBox

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("path", PATHS)
async def test_a_registered_tool_not_offered_never_runs(path, tmp_path):
    box = ToolBox()
    seen: list[ToolInvocation] = []
    branch = Branch(tools=box.tools())
    branch.gate(lambda inv: seen.append(inv) or True)
    result, trace = await operate_via(path, tmp_path, branch, [
        {"function": "get_weather", "arguments": {"city": "Paris"}},
        {"function": "send_message", "arguments": {"to": "all", "body": "hi"}},
    ], tools=["get_weather"])
    assert trace.exit == "enriched"
    assert dict(box.calls) == {"get_weather": 1}  # send_message was registered, not offered
    ok, refused = result.action_responses
    assert ok.output == {"city": "Paris", "temp_c": 20} and not ok.is_error
    assert refused.is_error and refused.record.decision == "not_offered"
    assert "not offered in this call" in refused.output["error"]
    assert refused.output["type"] == "ToolNotOfferedError"
    # the gate is asked only about offered tools, and it is told what was offered
    assert [inv.function for inv in seen] == ["get_weather"]
    assert seen[0].offered == frozenset({"get_weather"})
    assert [a.decision for a in trace.actions] == ["allowed", "not_offered"]
    assert [e.content["stage"] for e in branch.logs.of_kind("action_error")] == ["not_offered"]


@pytest.mark.parametrize("path", PATHS)
async def test_without_a_selector_every_registered_tool_is_offered(path, tmp_path):
    box = ToolBox()
    seen: list[frozenset[str]] = []
    branch = Branch(tools=box.tools())
    branch.gate(lambda inv: seen.append(inv.offered) or True)
    result, trace = await operate_via(path, tmp_path, branch, [
        {"function": "send_message", "arguments": {"to": "a", "body": "b"}},
    ])
    assert dict(box.calls) == {"send_message": 1} and trace.exit == "enriched"
    assert seen == [frozenset(branch.acts.names)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("selector", [[], (), set(), {}], ids=["list", "tuple", "set", "dict"])
async def test_an_empty_selector_offers_no_tool_and_none_runs(selector, path, tmp_path):
    box = ToolBox()
    asked: list[str] = []
    branch = Branch(tools=box.tools())
    branch.gate(lambda inv: asked.append(inv.function) or True)
    result, trace = await operate_via(path, tmp_path, branch, [
        {"function": "send_message", "arguments": {"to": "a", "body": "b"}},
    ], tools=selector)
    assert dict(box.calls) == {} and asked == []
    [refused] = result.action_responses
    assert refused.record.decision == "not_offered" and refused.output["type"] == "ToolNotOfferedError"
    assert [a.decision for a in trace.actions] == ["not_offered"]


async def test_an_unknown_tool_names_only_the_offered_ones():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    (out,) = await branch.act({"function": "rm_rf", "arguments": {}}, tools=["search"])
    assert out.record.decision == "rejected" and out.output["type"] == "UnknownToolError"
    assert "search" in out.output["error"] and "send_message" not in out.output["error"]


async def test_branch_act_offers_all_registered_tools_or_the_tools_given():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    reqs = [{"function": "search", "arguments": {"q": "x"}},
            {"function": "run_shell", "arguments": {"cmd": "ls"}}]
    out = await branch.act(reqs)
    assert [r.record.decision for r in out] == ["allowed", "allowed"]
    out = await branch.act(reqs, tools=["search"])
    assert [r.record.decision for r in out] == ["allowed", "not_offered"]
    assert box.calls == {"search": 2, "run_shell": 1}
    with pytest.raises(ToolNotOfferedError):
        await branch.act(reqs[1], tools="search", suppress_errors=False)
    assert box.calls["run_shell"] == 1


def _delete_tools(deleted: list[dict[str, Any]]) -> list[Any]:
    def delete_file(path: str, dry_run: bool = True) -> str:
        """Delete a file unless dry_run."""
        deleted.append({"path": path, "dry_run": dry_run})
        return "would delete" if dry_run else "deleted"

    return [delete_file]


@pytest.mark.parametrize("path", PATHS)
async def test_the_gate_sees_the_converted_arguments_the_tool_receives(path, tmp_path):
    """``"dry_run": "false"`` becomes ``False``: a gate that allows dry runs only
    must see ``False`` and deny, not the truthy string."""
    deleted: list[dict[str, Any]] = []
    asked: list[ToolInvocation] = []
    branch = Branch(tools=_delete_tools(deleted))

    @branch.gate
    def dry_runs_only(inv: ToolInvocation) -> bool:
        asked.append(inv)
        return inv.arguments["dry_run"] is not False

    result, trace = await operate_via(path, tmp_path, branch, [
        {"function": "delete_file", "arguments": {"path": "/etc/passwd", "dry_run": "false"}},
        {"function": "delete_file", "arguments": {"path": "/tmp/x", "dry_run": "true"}},
        {"function": "delete_file", "arguments": {"path": "/tmp/y"}},
    ])
    assert trace.exit == "enriched"
    assert sorted(deleted, key=str) == [{"path": "/tmp/x", "dry_run": True}, {"path": "/tmp/y", "dry_run": True}]
    denied, *allowed = result.action_responses
    assert denied.record.decision == "denied" and denied.output["error"] == "denied by governance gate"
    asked.sort(key=lambda inv: inv.index)  # concurrent: gates answer in any order
    assert [dict(inv.arguments) for inv in asked] == [
        {"path": "/etc/passwd", "dry_run": False}, {"path": "/tmp/x", "dry_run": True},
        {"path": "/tmp/y", "dry_run": True}]
    # the model's request travels beside the validated arguments
    assert asked[0].raw_arguments == {"path": "/etc/passwd", "dry_run": "false"}
    assert denied.record.raw_arguments == {"path": "/etc/passwd", "dry_run": "false"}
    assert denied.record.arguments == {"path": "/etc/passwd", "dry_run": False}
    # the tool received exactly what the gate saw
    assert sorted(deleted, key=str) == sorted((a.arguments for a in trace.actions[1:]), key=str)


async def test_the_gate_cannot_change_what_the_tool_receives():
    deleted: list[dict[str, Any]] = []
    branch = Branch(tools=_delete_tools(deleted))

    def meddle(inv: ToolInvocation) -> bool:
        inv.arguments["dry_run"] = False  # type: ignore[index]
        return True

    branch.gate(meddle)
    (out,) = await branch.act({"function": "delete_file", "arguments": {"path": "p"}})
    # a gate that tries to write raises, and a gate that raises denies
    assert out.record.decision == "denied" and deleted == []
