"""``operate()`` goes through an ``operate_traced`` replaced on a branch or on
its class after the class was made, as it goes through a subclass's own."""

from __future__ import annotations

from typing import Any

import pytest

from lionops import Branch
from lionops.trace import Traced
from tests.helpers import ScriptedMiddle

KW: dict[str, Any] = {"skip_validation": True}


@pytest.mark.anyio
async def test_operate_goes_through_an_operate_traced_set_on_the_branch(anyio_backend: str) -> None:
    branch = Branch()
    seen: list[dict[str, Any]] = []
    original = branch.operate_traced

    async def recording(**kw: Any) -> Traced:
        seen.append(dict(kw))
        return await original(**kw)

    branch.operate_traced = recording  # type: ignore[method-assign]
    middle = ScriptedMiddle("text")
    assert await branch.operate(instruction="x", middle=middle, **KW) == "text"
    assert seen == [{"instruction": "x", "middle": middle, **KW}]
    assert len(branch.traces) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("subclass", [False, True])
async def test_operate_goes_through_an_operate_traced_set_on_the_class_later(anyio_backend: str,
                                                                            subclass: bool) -> None:
    class Later(Branch):
        pass

    cls = Later if subclass else Branch
    original = Branch.operate_traced
    seen: list[dict[str, Any]] = []

    async def recording(self: Branch, **kw: Any) -> Traced:
        seen.append(dict(kw))
        return await original(self, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cls, "operate_traced", recording)
        assert await Later().operate(instruction="x", middle=ScriptedMiddle("text"), **KW) == "text"
    assert len(seen) == 1
    # once restored, the operation runs directly again, with the same result
    assert await Later().operate(instruction="x", middle=ScriptedMiddle("text"), **KW) == "text"
    assert len(seen) == 1
