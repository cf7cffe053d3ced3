"""A request handed to ``Branch.act`` is read when the call is made: the
caller's later change to it reaches no result, record or message."""

from __future__ import annotations

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
