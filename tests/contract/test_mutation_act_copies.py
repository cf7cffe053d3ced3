"""Each request's own copies of its arguments in ``act()``: the gate's
read-only view, the gate's copy of the raw arguments and the tool's arguments
are deep copies of their own whenever a value is nested (a flat dict of
scalars is copied as a new dict), and a denial's record names no error type.
Real tool functions, the public API (``Branch.act``)."""

from __future__ import annotations

from typing import Any

import pytest

from lionops import Branch, ToolInvocation

pytestmark = pytest.mark.anyio

NESTED = {"paths": ["a"], "options": {"force": False}}


def _tool(seen: list[Any], *, change: bool) -> Any:
    def edit(paths: list[str], options: dict[str, Any]) -> str:
        """Edit files."""
        seen.append((list(paths), dict(options)))
        if change:
            paths.append("by-the-tool")
            options["force"] = "by-the-tool"
        return "ok"
    return edit


async def test_a_gate_changing_a_nested_value_changes_neither_the_tool_s_arguments_nor_the_record():
    seen: list[Any] = []
    branch = Branch(tools=[_tool(seen, change=False)])
    shown: list[ToolInvocation] = []

    def gate(inv: ToolInvocation) -> bool:
        shown.append(inv)
        inv.arguments["paths"].append("by-the-gate")
        inv.arguments["options"]["force"] = True
        inv.raw_arguments["paths"].append("by-the-gate")
        return True

    branch.gate(gate)
    (out,) = await branch.act({"function": "edit", "arguments": {"paths": ["a"], "options": {"force": False}}})
    assert seen == [(["a"], {"force": False})]
    rec = out.record
    assert rec.decision == "allowed"
    assert rec.arguments == NESTED and rec.raw_arguments == NESTED
    assert shown[0].arguments["paths"] == ["a", "by-the-gate"]  # the gate's own copy took the change


async def test_a_tool_changing_its_nested_arguments_leaves_the_record_and_the_gate_s_view_alone():
    seen: list[Any] = []
    branch = Branch(tools=[_tool(seen, change=True)])
    shown: list[ToolInvocation] = []
    branch.gate(lambda inv: shown.append(inv) or True)
    (out,) = await branch.act({"function": "edit", "arguments": {"paths": ["a"], "options": {"force": False}}})
    rec = out.record
    assert rec.decision == "allowed"
    assert rec.arguments == NESTED and rec.raw_arguments == NESTED
    assert shown[0].arguments == NESTED and shown[0].raw_arguments == NESTED


async def test_flat_arguments_reach_gate_and_tool_as_copies_of_their_own():
    got: list[dict[str, Any]] = []

    def add(x: int, y: int) -> int:
        """Add."""
        got.append(dict(x=x, y=y))
        return x + y

    branch = Branch(tools=[add])
    shown: list[ToolInvocation] = []
    branch.gate(lambda inv: shown.append(inv) or True)
    raw = {"x": 1, "y": 2}
    (out,) = await branch.act({"function": "add", "arguments": raw})
    (inv,) = shown
    assert out.output == 3 and got == [raw]
    assert inv.arguments == raw and inv.raw_arguments == raw
    assert inv.raw_arguments is not out.record.raw_arguments
    assert inv.arguments is not out.record.arguments
    with pytest.raises(TypeError):
        inv.arguments["x"] = 5  # type: ignore[index]


async def test_a_denied_request_s_record_names_no_error_type():
    def add(x: int, y: int) -> int:
        """Add."""
        return x + y

    branch = Branch(tools=[add])
    branch.gate(lambda inv: False)
    (out,) = await branch.act({"function": "add", "arguments": {"x": 1, "y": 2}})
    rec = out.record
    assert rec.decision == "denied" and rec.error_type is None and rec.invoked is False
    assert rec.to_dict()["error_type"] is None
