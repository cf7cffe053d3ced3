"""Deferred approval against what a hostile caller does with a snapshot:
restore it twice and approve in each, race two restored branches, restore
after a resumption that was refused. A call is decided once and runs at
most once, also across restores of one snapshot file (DESIGN "Rulings for
the new doors": invariant 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import AfterValidator

import lionops
from lionops import Approve, Branch, CallAlreadyDecidedError, Deny, SnapshotError, ToolChangedError
from tests.contract.test_deferred import ROOT, Shop, answer, race_approvals, shop_branch
from tests.helpers import ScriptedMiddle

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
    outcomes = await race_approvals(lambda _: Branch.restore(path, tools=shop.tools()), "ann", "bob", "eve")
    assert outcomes == ["ran", "refused", "refused"]
    assert len(shop.ran) == 1


async def test_a_restore_whose_resumption_was_refused_leaves_the_call_to_decide(tmp_path):
    path = await _deferred_snapshot(tmp_path)
    shop = Shop()
    with pytest.raises(ToolChangedError):  # no tool of that name here: nothing decided
        await Branch.restore(path).resume({"c0": Approve(by="ann")})
    await Branch.restore(path, tools=shop.tools()).resume({"c0": Approve(by="bob")})
    assert shop.ran == [("refund", {"order": "A", "amount": 450})]


# ------------------------------------------------------------ secrets in reasons

SECRET = "s3cr3t-shop-token-0123456789"
KEY = "sk-live0123456789abcdefABCDEF"


def _everywhere(branch: Branch, path: Path) -> str:
    """Every place a reason is kept: pending calls, records, log, messages, traces, the snapshot."""
    branch.snapshot(path)
    return "\n".join([
        repr(branch.pending_calls()), repr(list(branch.logs)), repr(list(branch.messages)),
        *(t.to_json() for t in branch.traces), path.read_text(),
    ])


async def test_a_defer_reason_keeps_no_secret_and_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    shop = Shop()
    branch = Branch(tools=shop.tools())
    branch.gate(lambda call: lionops.Defer(reason=f"ask ops ({SECRET}, {KEY}) " + "x" * 5000))
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 1})))
    [call] = branch.pending_calls()
    assert SECRET not in call.reason and KEY not in call.reason and "[redacted]" in call.reason
    assert len(call.reason) <= 203
    seen = _everywhere(branch, tmp_path / "b.json")
    assert SECRET not in seen and KEY not in seen and "x" * 300 not in seen


@pytest.mark.parametrize("verdict", [Approve, Deny])
async def test_a_decision_reason_keeps_no_secret_and_is_bounded(tmp_path, monkeypatch, verdict):
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    branch, _ = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 1})))
    result = await branch.resume({"c0": verdict(by="ann", reason=f"per {SECRET} and {KEY} " + "y" * 5000)})
    [response] = result["action_responses"]
    if verdict is Deny:
        told = response.output["reason"]
        assert "[redacted]" in told and len(told) <= 203
    seen = _everywhere(branch, tmp_path / "b.json") + repr(response.output)
    assert SECRET not in seen and KEY not in seen and "y" * 300 not in seen
    assert branch.traces[-1].meta["approvals"][0]["by"] == "ann"


# ------------------------------------------------------------ malformed snapshots

def _edited(path: Path, name: str, edit: Any) -> Path:
    doc = json.loads(path.read_text())
    edit(doc)
    out = path.with_name(name)
    out.write_text(json.dumps(doc))
    return out


def _op(doc: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = doc["suspended"]["operations"][0]
    return op


EDITS = {
    "no request for a pending call": lambda d: _op(d).update(requests={}),
    "a request that is not an object": lambda d: _op(d)["requests"].update(c0=[1]),
    "usage that is not a count": lambda d: d.update(usage={"requests": "lots"}),
    "usage that is negative": lambda d: d.update(usage={"tool_calls": -5}),
    "usage that is a bool": lambda d: d.update(usage={"requests": True}),
    "usage that is not an object": lambda d: d.update(usage=[1]),
}


@pytest.mark.parametrize("edit", list(EDITS))
async def test_a_malformed_snapshot_is_refused_when_restored_and_loses_nothing(tmp_path, edit):
    path = await _deferred_snapshot(tmp_path)
    bad = _edited(path, "bad.json", EDITS[edit])
    with pytest.raises(SnapshotError):
        Branch.restore(bad, tools=Shop().tools())
    shop = Shop()  # the good file still decides and runs the call
    await Branch.restore(path, tools=shop.tools()).resume({"c0": Approve(by="ann")})
    assert shop.ran == [("refund", {"order": "A", "amount": 450})]


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"branch": ' * 50_000])
def test_a_deeply_nested_snapshot_is_a_snapshot_error(tmp_path, text):
    bad = tmp_path / "deep.json"
    bad.write_text(text)
    with pytest.raises(SnapshotError):
        Branch.restore(bad)


# ------------------------------------------------------------ the tool between defer and resume

async def test_a_tool_registered_anew_after_the_defer_does_not_run_the_approved_call():
    """In the process that deferred, the approved call runs on the Tool its
    gate saw: one registered anew under its name (the same schema, another
    body) is refused, as a tool registered anew after it was offered is."""
    branch, shop = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 9})))
    swapped: list[Any] = []

    def refund(order: str, amount: int) -> dict[str, Any]:
        """Refund an order."""
        swapped.append((order, amount))
        return {"refunded": amount * 100, "order": order}

    branch.acts.register(refund, update=True)
    with pytest.raises(ToolChangedError, match="anew"):
        await branch.resume({"c0": Approve(by="ann")})
    assert swapped == [] and shop.ran == []
    assert [p.call_id for p in branch.pending_calls()] == ["c0"]  # nothing decided


# ------------------------------------------------------------ values whose JSON form has no one order

DEFER_TAGS = """
import sys, anyio
from lionops import Branch, Defer
from tests.contract.test_deferred_under_attack import tag_tools
from tests.helpers import ScriptedMiddle

async def main():
    branch = Branch(tools=tag_tools([]))
    branch.gate(lambda call: Defer(reason="tags need a person"))
    tags = ["zeta", "alpha", "mid", "beta", "q", "r", "s", "t"]
    await branch.operate(instruction="tag", actions=True, middle=ScriptedMiddle({"action_requests": [
        {"function": "tag", "arguments": {"order": "A", "tags": tags}, "call_id": "c0"}]}))
    branch.snapshot(sys.argv[1])

anyio.run(main)
"""


def tag_tools(ran: list[Any]) -> list[Any]:
    def tag(order: str, tags: set[str]) -> str:
        """Tag an order."""
        ran.append((order, tags))
        return "tagged"

    return [tag]


def test_a_set_argument_deferred_in_another_process_runs_once_approved(tmp_path):
    """A set's JSON form is a list in the order of the process that stored
    it: after a restore under another hash seed it decodes to the same set,
    so the approved call runs (and a validator that changes what it is given
    again is still refused)."""
    path = tmp_path / "tags.json"
    done = subprocess.run([sys.executable, "-c", DEFER_TAGS, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONHASHSEED": "1"})
    assert done.returncode == 0, done.stderr
    ran: list[Any] = []
    branch = Branch.restore(path, tools=tag_tools(ran))
    anyio.run(branch.resume, {"c0": Approve(by="ann")})
    assert ran == [("A", {"zeta", "alpha", "mid", "beta", "q", "r", "s", "t"})]


async def test_a_validator_that_changes_its_own_output_is_still_refused_after_a_restore(tmp_path):
    ran: list[int] = []

    def double(n: Annotated[int, AfterValidator(lambda v: v * 2)]) -> int:
        """Doubles what it is given when validated."""
        ran.append(n)
        return n

    branch = Branch(tools=[double])
    branch.gate(lambda call: lionops.Defer(reason="ask"))
    await branch.operate(instruction="go", actions=True, middle=ScriptedMiddle({"action_requests": [
        {"function": "double", "arguments": {"n": 3}, "call_id": "c0"}]}))
    path = branch.snapshot(tmp_path / "d.json")
    with pytest.raises(ToolChangedError, match="same values"):
        await Branch.restore(path, tools=[double]).resume({"c0": Approve(by="ann")})
    assert ran == []


@pytest.mark.parametrize("verdict", [Approve, lionops.Deny])
def test_who_decided_is_kept_as_a_reason_is_bounded_and_without_secrets(monkeypatch, verdict):
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    decision = verdict(by=f"ann {SECRET} {KEY} " + "x" * 5000)
    assert SECRET not in decision.by and KEY not in decision.by and len(decision.by) <= 203  # 200 and "..."
    assert decision.by.startswith("ann ") and verdict(by="ann").by == "ann"
