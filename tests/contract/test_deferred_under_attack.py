"""Deferred approval against what a hostile caller does with a snapshot:
restore it twice and approve in each, race two restored branches, restore
after a resumption that was refused. A call is decided once and runs at
most once, also across restores of one snapshot file (DESIGN "Rulings for
the new doors": invariant 7)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lionops import Approve, Branch, CallAlreadyDecidedError, Deny, ToolChangedError
from tests.contract.test_deferred import Shop, answer, shop_branch

pytestmark = pytest.mark.anyio


async def _deferred_snapshot(tmp_path: Path) -> Path:
    branch, _ = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 450})))
    return branch.snapshot(tmp_path / "branch.json")


async def test_two_restores_of_one_snapshot_decide_a_call_once(tmp_path):
    path = await _deferred_snapshot(tmp_path)
    shop = Shop()
    first, second = Branch.restore(path, tools=shop.tools()), Branch.restore(path, tools=shop.tools())
    await first.resume({"c0": Approve(by="ann")})
    with pytest.raises(CallAlreadyDecidedError, match="ann"):
        await second.resume({"c0": Deny(by="bob")})
    with pytest.raises(CallAlreadyDecidedError):
        await Branch.restore(path, tools=shop.tools()).resume({"c0": Approve(by="eve")})
    assert shop.ran == [("refund", {"order": "A", "amount": 450})]


async def test_racing_restored_branches_run_the_call_once(tmp_path):
    path = await _deferred_snapshot(tmp_path)
    shop = Shop()
    outcomes: list[str] = []

    async def approve(by: str) -> None:
        branch = Branch.restore(path, tools=shop.tools())
        try:
            await branch.resume({"c0": Approve(by=by)})
            outcomes.append("ran")
        except CallAlreadyDecidedError:
            outcomes.append("refused")

    async with anyio.create_task_group() as tg:
        for by in ("ann", "bob", "eve"):
            tg.start_soon(approve, by)
    assert sorted(outcomes) == ["ran", "refused", "refused"]
    assert len(shop.ran) == 1


async def test_a_restore_whose_resumption_was_refused_leaves_the_call_to_decide(tmp_path):
    path = await _deferred_snapshot(tmp_path)
    shop = Shop()
    with pytest.raises(ToolChangedError):  # no tool of that name here: nothing decided
        await Branch.restore(path).resume({"c0": Approve(by="ann")})
    await Branch.restore(path, tools=shop.tools()).resume({"c0": Approve(by="bob")})
    assert shop.ran == [("refund", {"order": "A", "amount": 450})]
