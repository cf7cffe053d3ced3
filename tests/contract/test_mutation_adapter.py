"""The adapter phase reads action requests only when tools may run: with
``invoke_actions=False`` no request is read and no tool runs, whatever the
result proposes. Scripted Middles (real objects), real tool functions, the
public API only.
"""

from __future__ import annotations

import pytest

from lionops import Branch
from tests.helpers import ScriptedMiddle, ToolBox

pytestmark = pytest.mark.anyio


async def test_invoke_actions_false_runs_no_tool_and_asks_no_gate():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    asked: list[str] = []
    branch.gate(lambda inv: asked.append(inv.function) or True)
    mid = ScriptedMiddle({"answer": 1, "action_requests": [{"function": "search", "arguments": {"q": "a"}}]})
    out, trace = await branch.operate_traced(instruction="q", actions=True, invoke_actions=False, middle=mid)
    assert box.total == 0 and asked == []
    assert trace.actions == []
    assert "action_responses" not in out
    assert [m.role for m in branch.messages if m.role.startswith("action")] == []
