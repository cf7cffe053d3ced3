"""A request handed to ``Branch.act`` is read when the call is made: the
caller's later change to it reaches no result, record or message."""

from __future__ import annotations

import copy
import threading

import pytest

from lionops import Branch


def grow(items: list[str]) -> int:
    items.append("tool")
    return len(items)


@pytest.mark.anyio
async def test_a_later_change_to_the_request_reaches_nothing_kept(anyio_backend: str) -> None:
    branch = Branch(tools=[grow])
    request = {"function": "grow", "arguments": {"items": ["a"]}}
    (response,) = await branch.act(request)
    request["arguments"]["items"].append("caller")  # type: ignore[index]
    assert response.arguments == {"items": ["a"]}
    assert response.output == 2
    assert [m.content["arguments"] for m in branch.messages] == [{"items": ["a"]}] * 2


def other(note: str) -> str:
    return note


#: requests that never reach the tool, each holding a nested list the caller changes afterwards
NEVER_RUN = {
    "rejected by validation": ({"function": "grow", "arguments": {"items": ["a"], "extra": ["a"]}}, "rejected"),
    "unknown tool": ({"function": "shrink", "arguments": {"items": ["a"]}}, "rejected"),
    "not offered": ({"function": "other", "arguments": {"note": "n", "items": ["a"]}}, "not_offered"),
    "invalid request": ({"function": "", "arguments": {"items": ["a"]}}, "invalid"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(NEVER_RUN))
async def test_a_later_change_to_a_request_never_run_reaches_nothing_kept(case: str, anyio_backend: str) -> None:
    request, decision = copy.deepcopy(NEVER_RUN[case])
    branch = Branch(tools=[grow, other])
    (response,) = await branch.act(request, tools=["grow"])
    record = response.record
    assert record.decision == decision
    kept = (repr(record.raw_arguments), repr(response.arguments), [repr(m.content) for m in branch.messages],
            [repr(e.content) for e in branch.logs])
    request["arguments"]["items"].append("caller")  # type: ignore[index]
    assert (repr(record.raw_arguments), repr(response.arguments), [repr(m.content) for m in branch.messages],
            [repr(e.content) for e in branch.logs]) == kept


@pytest.mark.anyio
async def test_a_request_never_run_whose_arguments_cannot_be_copied_is_recorded_by_type(anyio_backend: str) -> None:
    lock = threading.Lock()
    branch = Branch(tools=[grow])
    (response,) = await branch.act({"function": "shrink", "arguments": {"items": [lock]}})
    assert response.record.decision == "rejected"
    assert response.record.raw_arguments == "<dict that cannot be copied>"
    assert [m.content["arguments"] for m in branch.messages] == ["<dict that cannot be copied>"] * 2
