"""The adapter phase reads action requests only when tools may run: with
``invoke_actions=False`` no request is read and no tool runs, whatever the
result proposes. Scripted Middles (real objects), real tool functions, the
public API only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pydantic import BaseModel

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


class CountingMapping(Mapping[str, Any]):
    """A Middle result that counts how often its keys are read."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self.reads: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.reads.append(key)
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.append(key)
        return self._data.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class Verdict(BaseModel):
    answer: int


async def test_a_mismatched_result_is_never_asked_for_its_requests():
    # A result that is not the caller's model is a mismatch: its action
    # requests are never read, so nothing it proposes can reach a tool.
    box = ToolBox()
    branch = Branch(tools=box.tools())
    result = CountingMapping({"answer": 1, "action_requests": [{"function": "search", "arguments": {"q": "a"}}]})
    out, trace = await branch.operate_traced(instruction="q", response_format=Verdict, actions=True,
                                             handle_validation="return_value", middle=ScriptedMiddle(result))
    assert out is result and "action_requests" not in result.reads
    assert box.total == 0 and trace.actions == [] and trace.exit == "mismatch_return_value"


@pytest.mark.parametrize("keywords", [{"actions": True, "invoke_actions": False}, {}],
                         ids=["not-invoked", "no-actions"])
async def test_without_actions_to_run_the_requests_are_never_read(keywords):
    # Actions off, or offered but not invoked: what the result proposes is
    # never even read, so its code cannot run either.
    box = ToolBox()
    branch = Branch(tools=box.tools())
    result = CountingMapping({"answer": 1, "action_requests": [{"function": "search", "arguments": {"q": "a"}}]})
    out, trace = await branch.operate_traced(instruction="q", middle=ScriptedMiddle(result), **keywords)
    assert out is result and "action_requests" not in result.reads
    assert box.total == 0 and trace.actions == []


def test_a_model_without_an_action_requests_field_proposes_nothing():
    # read_requests() is total: a pydantic result without the field, text and
    # other values propose no request (D4); a mapping's key is read as given.
    from lionops.pipeline.adapter import read_requests

    assert read_requests(Verdict(answer=1)) is None
    assert read_requests("free text") is None
    assert read_requests(7) is None
    assert read_requests({"action_requests": []}) == []


def test_a_model_result_without_a_response_type_has_no_slot_for_responses():
    # No operative (so no generated response type): a pydantic result is not
    # attachable, whatever its fields.
    from lionops.pipeline.enrich import can_attach_responses

    assert can_attach_responses(Verdict(answer=1), None) is False
    assert can_attach_responses({"answer": 1}, None) is True
