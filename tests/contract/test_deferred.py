"""Deferred approval: a gate's ``Defer`` ends the operation at ``deferred``;
``Branch.resume()`` runs exactly the deferred call, once, after its decision
(DESIGN "Rulings for the new doors": invariant 7)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import lionops
from lionops import (
    Approve,
    Branch,
    CallAlreadyDecidedError,
    Defer,
    Deny,
    PendingCall,
    ResumeError,
    SnapshotError,
    ToolChangedError,
    UnknownCallError,
)
from tests.helpers import ScriptedMiddle

ROOT = Path(__file__).resolve().parents[2]


class Shop:
    """Real tools that record every call with its arguments."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[Any]:
        shop = self

        def refund(order: str, amount: int) -> dict[str, Any]:
            """Refund an order."""
            shop.ran.append(("refund", {"order": order, "amount": amount}))
            return {"refunded": amount, "order": order}

        def lookup(order: str) -> dict[str, Any]:
            """Look an order up."""
            shop.ran.append(("lookup", {"order": order}))
            return {"order": order, "status": "paid"}

        return [refund, lookup]


def refunds_need_a_person(inv: lionops.ToolInvocation) -> bool | Defer:
    return Defer(reason=f"refund of {inv.arguments['amount']} needs approval") if inv.function == "refund" else True


def answer(*requests: tuple[str, dict[str, Any]]) -> ScriptedMiddle:
    return ScriptedMiddle({"action_requests": [
        {"function": f, "arguments": a, **({"call_id": f"c{i}"} if f == "refund" else {})}
        for i, (f, a) in enumerate(requests)]})


def shop_branch(**kw: Any) -> tuple[Branch, Shop]:
    shop = Shop()
    branch = Branch(tools=shop.tools(), **kw)
    branch.gate(refunds_need_a_person)
    return branch, shop


pytestmark = pytest.mark.anyio


async def test_a_deferred_call_ends_the_operation_at_its_own_exit_and_allowed_siblings_run():
    branch, shop = shop_branch()
    middle = answer(("refund", {"order": "A1", "amount": "450"}), ("lookup", {"order": "A1"}))
    out = await branch.operate_traced(instruction="refund A1", actions=True, middle=middle)
    assert out.trace.states == ["prepare", "schema", "adapter", "validate", "gate", "act", "suspended"]
    assert out.trace.exit == "deferred"
    assert middle.calls == 1
    assert shop.ran == [("lookup", {"order": "A1"})]  # the allowed sibling ran; the deferred one did not
    assert "action_responses" not in out.result
    [pending] = branch.pending_calls()
    assert isinstance(pending, PendingCall)
    assert (pending.call_id, pending.function, pending.arguments) == ("c0", "refund", {"order": "A1", "amount": 450})
    assert pending.reason == "refund of 450 needs approval" and len(pending.digest) == 64
    assert [a.decision for a in out.trace.actions] == ["deferred", "allowed"]
    assert sorted(e.kind for e in branch.logs) == ["action", "deferred"]


async def test_approve_runs_exactly_the_stored_call_once_then_enriches_the_round():
    branch, shop = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(
        ("refund", {"order": "A1", "amount": "450"}), ("lookup", {"order": "A1"})))
    out = await branch.resume_traced({"c0": Approve(by="ann", reason="customer is right")})
    assert out.trace.transitions[0].trigger == "resumed"
    assert out.trace.states == ["prepare", "act", "enrich", "returned"]
    assert shop.ran == [("lookup", {"order": "A1"}), ("refund", {"order": "A1", "amount": 450})]
    assert [r.output for r in out.result["action_responses"]] == [
        {"refunded": 450, "order": "A1"}, {"order": "A1", "status": "paid"}]
    [note] = out.trace.meta["approvals"]
    assert (note["decision"], note["by"], note["reason"]) == ("approved", "ann", "customer is right")
    assert note["decided_at"] >= note["deferred_at"]
    assert branch.logs.of_kind("approval")[0].content["by"] == "ann"
    assert branch.messages[-1].metadata["approval"]["by"] == "ann"
    assert branch.pending_calls() == []
    with pytest.raises(CallAlreadyDecidedError, match="approved by ann"):
        await branch.resume({"c0": Approve(by="bob")})
    assert len(shop.ran) == 2


async def test_deny_gives_a_denial_payload_and_never_runs_the_tool():
    branch, shop = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "B", "amount": 9})))
    result = await branch.resume({"c0": Deny(by="ann", reason="fraud")})
    [response] = result["action_responses"]
    assert response.output == {"error": "denied by governance gate", "function": "refund", "by": "ann",
                               "reason": "fraud"}
    assert response.record.decision == "denied" and shop.ran == []


async def test_missing_decisions_stay_pending_and_the_trace_ends_deferred_again():
    branch, shop = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(
        ("refund", {"order": "A", "amount": 1}), ("refund", {"order": "B", "amount": 2})))
    assert [p.call_id for p in branch.pending_calls()] == ["c0", "c1"]
    first = await branch.resume_traced({"c1": Approve(by="ann")})
    assert list(first.trace.path()) == [("prepare", "resumed", "act"), ("act", "deferred", "suspended")]
    assert first.result == {"action_requests": [
        {"function": "refund", "arguments": {"order": o, "amount": n}, "call_id": f"c{i}"}
        for i, (o, n) in enumerate((("A", 1), ("B", 2)))]}  # the round's result, not yet enriched
    assert [p.call_id for p in branch.pending_calls()] == ["c0"]
    assert shop.ran == [("refund", {"order": "B", "amount": 2})]
    last = await branch.resume_traced({"c0": Deny(by="bob")})
    assert last.trace.exit == "enriched"
    assert [r.record.decision for r in last.result["action_responses"]] == ["denied", "allowed"]


async def test_bad_decisions_are_typed_errors_and_decide_nothing():
    branch, shop = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 1})))
    with pytest.raises(UnknownCallError, match="'nope'") as info:
        await branch.resume({"c0": Approve(by="ann"), "nope": Approve(by="ann")})
    assert info.value.pending == ["c0"] and isinstance(info.value, ResumeError)
    with pytest.raises(TypeError, match="Approve or Deny"):
        await branch.resume({"c0": True})
    with pytest.raises(TypeError, match="non-empty mapping"):
        await branch.resume({})
    assert shop.ran == [] and [p.call_id for p in branch.pending_calls()] == ["c0"]
    await branch.resume({"c0": Approve(by="ann")})
    assert len(shop.ran) == 1


async def test_a_later_gate_that_denies_wins_over_an_earlier_defer():
    branch, shop = shop_branch()
    branch.gate(lambda inv: inv.arguments.get("amount", 0) < 100)
    await branch.operate(instruction="go", actions=True, middle=answer(
        ("refund", {"order": "A", "amount": 500}), ("refund", {"order": "B", "amount": 5})))
    assert [p.arguments["amount"] for p in branch.pending_calls()] == [5]
    assert branch.traces[-1].actions[0].decision == "denied"


async def race_approvals(branch_for: Any, *people: str) -> list[str]:
    """Each person approves call ``c0`` at once, on ``branch_for(person)``:
    ``"ran"`` or ``"refused"`` (CallAlreadyDecidedError) each, sorted."""
    outcomes: list[str] = []

    async def decide(by: str) -> None:
        try:
            await branch_for(by).resume({"c0": Approve(by=by)})
            outcomes.append("ran")
        except CallAlreadyDecidedError:
            outcomes.append("refused")

    async with anyio.create_task_group() as tg:
        for by in people:
            tg.start_soon(decide, by)
    return sorted(outcomes)


async def test_two_resumes_of_the_same_call_run_it_once():
    branch, shop = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 1})))
    assert await race_approvals(lambda _: branch, "ann", "bob") == ["ran", "refused"] and len(shop.ran) == 1


async def test_both_engines_take_the_same_path_through_defer_and_resume():
    paths = []
    for engine in ("compiled", "transitions"):
        branch, _ = shop_branch(engine=engine)
        await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 1})))
        out = await branch.resume_traced({"c0": Approve(by="ann")})
        paths.append((branch.traces[0].path(), out.trace.path(), [r.guards for r in out.trace.transitions]))
    assert paths[0] == paths[1]


async def test_a_restored_branch_refuses_a_changed_tool_and_tampered_arguments(tmp_path):
    branch, _ = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(("refund", {"order": "A", "amount": 1})))
    path = branch.snapshot(tmp_path / "branch.json")

    def refund(order: str, amount: int, note: str = "") -> dict[str, Any]:  # a new parameter: a new definition
        raise AssertionError("never runs")

    changed = Branch.restore(path, tools=[refund])
    with pytest.raises(ToolChangedError, match="definition"):
        await changed.resume({"c0": Approve(by="ann")})
    assert [p.call_id for p in changed.pending_calls()] == ["c0"]  # nothing decided
    gone = Branch.restore(path)
    with pytest.raises(ToolChangedError, match="no tool"):
        await gone.resume({"c0": Approve(by="ann")})

    doc = json.loads(path.read_text())
    doc["suspended"]["operations"][0]["pending"][0]["arguments"]["amount"] = 100000
    path.write_text(json.dumps(doc))
    shop = Shop()
    tampered = Branch.restore(path, tools=shop.tools())
    with pytest.raises(ToolChangedError):
        await tampered.resume({"c0": Approve(by="ann")})
    assert shop.ran == []


def test_a_file_that_is_not_a_snapshot_is_a_typed_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"branch": "x"}')
    with pytest.raises(SnapshotError, match="not a branch snapshot"):
        Branch.restore(bad)
    bad.write_text(json.dumps({"branch": "x", "messages": [], "logs": [], "traces": [],
                               "suspended": {"operations": [{"id": "o"}]}}))
    with pytest.raises(SnapshotError, match="malformed suspended operation"):
        Branch.restore(bad)


# ------------------------------------------------------------ across processes

PROPOSE = """
import sys, anyio
from lionops import Branch
from tests.contract.test_deferred import Shop, answer, refunds_need_a_person

async def main():
    shop = Shop()
    branch = Branch(tools=shop.tools())
    branch.gate(refunds_need_a_person)
    await branch.operate(instruction="refund", actions=True,
                         middle=answer(("refund", {"order": "A7", "amount": "450"}), ("lookup", {"order": "A7"})))
    branch.snapshot(sys.argv[1])
    print(len(shop.ran))

anyio.run(main, backend=sys.argv[2])
"""

APPROVE = """
import json, sys, anyio
from lionops import Approve, Branch
from tests.contract.test_deferred import Shop

async def main():
    shop = Shop()
    branch = Branch.restore(sys.argv[1], tools=shop.tools())
    [call] = branch.pending_calls()
    out = await branch.resume_traced({call.call_id: Approve(by="ann", reason="ok")})
    branch.snapshot(sys.argv[1])
    print(json.dumps({"ran": shop.ran, "states": out.trace.states, "pending": call.model_dump(),
                      "outputs": [r.output for r in out.result["action_responses"]]}))

anyio.run(main, backend=sys.argv[2])
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_call_deferred_in_one_process_is_approved_and_run_in_another(tmp_path, backend):
    path = str(tmp_path / "branch.json")
    assert _run(PROPOSE, path, backend) == "1"  # the lookup ran, the refund waits
    out = json.loads(_run(APPROVE, path, backend))
    assert out["ran"] == [["refund", {"order": "A7", "amount": 450}]]
    assert out["pending"]["arguments"] == {"order": "A7", "amount": 450}
    assert out["states"] == ["prepare", "act", "enrich", "returned"]
    assert out["outputs"] == [{"refunded": 450, "order": "A7"}, {"order": "A7", "status": "paid"}]
    again = Branch.restore(path, tools=Shop().tools())
    assert again.pending_calls() == [] and again.traces[-1].meta["approvals"][0]["by"] == "ann"
    with pytest.raises(CallAlreadyDecidedError):
        anyio.run(again.resume, {out["pending"]["call_id"]: Approve(by="bob")}, backend=backend)


# ------------------------------------------------------------ invariant 7

ANSWERS = st.sampled_from(["allow", "deny", "defer"])


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.tuples(ANSWERS, st.integers(-5, 500)), min_size=1, max_size=4),
    rounds=st.lists(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=4), max_size=3),
    restore=st.booleans(),
)
def test_invariant_7_every_decision_then_exactly_that_call_once(calls, rounds, restore, tmp_path_factory):
    """No tool runs before validation and every decision it needs; a resumed
    call runs only with the arguments deferred, at most once."""
    events: list[tuple[str, Any]] = []

    def pay(amount: int, note: str = "") -> int:
        """Pay."""
        events.append(("run", amount))
        return amount

    def gate(inv: lionops.ToolInvocation) -> bool | Defer:
        kind = calls[inv.index][0]
        events.append(("gate", inv.arguments["amount"]))
        return Defer(reason="ask") if kind == "defer" else kind == "allow"

    async def main() -> None:
        branch = Branch(tools=[pay])
        branch.gate(gate)
        requests = [{"function": "pay", "arguments": {"amount": str(a)}} for _, a in calls]
        await branch.operate(instruction="go", actions=True, middle=ScriptedMiddle({"action_requests": requests}))
        deferred = {p.call_id: p.arguments["amount"] for p in branch.pending_calls()}
        assert sorted(deferred.values()) == sorted(a for k, a in calls if k == "defer")
        allowed = [a for k, a in calls if k == "allow"]
        assert sorted(a for e, a in events if e == "run") == sorted(allowed)  # only gate-allowed calls ran
        ran_before = len([e for e in events if e[0] == "run"])
        approved: list[int] = []
        for decisions in rounds:
            ids = list(deferred)
            chosen = {ids[i % len(ids)]: ok for i, ok in decisions} if ids else {}
            if not chosen:
                continue
            if restore:
                path = branch.snapshot(tmp_path_factory.mktemp("s") / "b.json")
                branch = Branch.restore(path, tools=[pay])
            pending = {p.call_id for p in branch.pending_calls()}
            try:
                await branch.resume({c: Approve(by="a") if ok else Deny(by="a") for c, ok in chosen.items()})
            except CallAlreadyDecidedError:
                assert not set(chosen) <= pending
                continue
            approved += [deferred[c] for c, ok in chosen.items() if ok]
        runs = [a for e, a in events if e == "run"][ran_before:]
        assert sorted(runs) == sorted(approved)  # exactly the approved calls, with the deferred values, once

    anyio.run(main)


async def test_a_model_result_is_enriched_in_process_and_comes_back_as_data_after_a_restore(tmp_path):
    from tests.helpers import Answer, as_response

    branch, shop = shop_branch()
    middle = ScriptedMiddle(as_response({"answer": 7, "action_requests": [
        {"function": "refund", "arguments": {"order": "A", "amount": 3}, "call_id": "c0"}]}))
    first = await branch.operate(instruction="go", response_format=Answer, actions=True, middle=middle)
    path = branch.snapshot(tmp_path / "b.json")
    elsewhere = shutil.copy(path, tmp_path / "elsewhere.json")  # a copy: its own decisions
    result = await branch.resume({"c0": Approve(by="ann")})
    assert result is first and result.action_responses[0].output == {"refunded": 3, "order": "A"}

    restored = Branch.restore(elsewhere, tools=Shop().tools())
    data = await restored.resume({"c0": Approve(by="ann")})
    assert isinstance(data, dict) and data["answer"] == 7
    assert data["action_responses"][0].output == {"refunded": 3, "order": "A"}


async def test_decisions_are_span_events_and_resumed_calls_are_tool_spans(otel_content):
    branch, _ = shop_branch()
    await branch.operate(instruction="go", actions=True, middle=answer(
        ("refund", {"order": "A", "amount": 5}), ("refund", {"order": "B", "amount": 6})))
    otel_content.exporter.clear()
    await branch.resume({"c0": Approve(by="ann", reason="fine"), "c1": Deny(by="bob")})
    root = otel_content.root()
    assert dict(root.attributes)["lionops.exit"] == "enriched"
    approvals = [dict(e.attributes) for e in root.events if e.name == "lionops.approval"]
    assert [(a["lionops.approval.decision"], a["lionops.approval.by"], a["gen_ai.tool.name"]) for a in approvals] == [
        ("approved", "ann", "refund"), ("denied", "bob", "refund")]
    tools = otel_content.named("execute_tool")
    assert [dict(s.attributes)["lionops.tool.decision"] for s in tools] == ["allowed"]


async def test_a_decision_made_by_no_one_names_no_approver_in_its_span_event(otel_content):
    """A durable HumanApproval that timed out is recorded with ``by=None``:
    its span event has no approver (never the text "None")."""
    from lionops.trace import annotate

    async def timed_out(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                        skip_validation=False):
        annotate(approvals=[{"call_id": "w-1-0-0", "function": "refund", "decision": "timed_out", "by": None,
                             "reason": "no decision within 5s", "decided_at": "2026-01-01T00:00:00+00:00"}])
        return "done"

    branch, _ = shop_branch()
    await branch.operate(instruction="go", middle=timed_out)
    [event] = [dict(e.attributes) for e in otel_content.root().events if e.name == "lionops.approval"]
    assert event["lionops.approval.decision"] == "timed_out" and "lionops.approval.by" not in event
    assert event["lionops.approval.reason"] == "no decision within 5s"


async def test_a_deferring_operation_records_and_replays_from_its_cassette(tmp_path):
    from lionops import iModel
    from lionops.replay import record, replay
    from lionops.testing import OpenAIServer, completion, tool_call

    with OpenAIServer() as srv:
        srv.push(completion(tool_calls=[tool_call("refund", {"order": "A", "amount": 5}, call_id="c1")]))

        def new_branch() -> tuple[Branch, Shop]:
            model = iModel(provider="openai", model="gpt-4o-mini", base_url=srv.base_url, api_key="k")
            return shop_branch(chat_model=model)

        first, _ = new_branch()
        recorded = await record(tmp_path / "c.json", first, instruction="refund", actions=True)
        again, shop = new_branch()
        replayed = await replay(tmp_path / "c.json", again, instruction="refund", actions=True)
        assert recorded.trace.path() == replayed.trace.path() and replayed.trace.exit == "deferred"
        assert len(srv.chat_requests) == 1 and shop.ran == []
        await again.resume({"c1": Approve(by="ann")})
        assert shop.ran == [("refund", {"order": "A", "amount": 5})]


async def test_two_resumptions_of_one_round_running_at_once_enrich_it_once_with_every_response():
    branch, shop = shop_branch()
    first = await branch.operate(instruction="go", actions=True, middle=answer(
        ("refund", {"order": "A", "amount": 1}), ("refund", {"order": "B", "amount": 2})))
    exits: list[str] = []

    async def decide(call_id: str) -> None:
        exits.append((await branch.resume_traced({call_id: Approve(by="ann")})).trace.exit)

    async with anyio.create_task_group() as tg:
        tg.start_soon(decide, "c0")
        tg.start_soon(decide, "c1")
    assert sorted(exits) == ["deferred", "enriched"]
    assert [r.output["order"] for r in first["action_responses"]] == ["A", "B"]
    with pytest.raises(ResumeError, match="several suspended operations"):
        await _two_operations_at_once()


async def _two_operations_at_once() -> None:
    branch, _ = shop_branch()
    for order in ("X", "Y"):
        await branch.operate(instruction="go", actions=True, middle=ScriptedMiddle({"action_requests": [
            {"function": "refund", "arguments": {"order": order, "amount": 1}, "call_id": order}]}))
    await branch.resume({"X": Approve(by="ann"), "Y": Approve(by="ann")})



class Stop(BaseException):
    """Not an Exception: it escapes act() as itself."""


async def test_calls_a_failing_resumption_never_reached_are_pending_again():
    ran: list[str] = []

    def step(name: str) -> str:
        """One step; the first stops everything."""
        ran.append(name)
        if name == "first":
            raise Stop
        return name

    branch = Branch(tools=[step])
    branch.gate(lambda inv: Defer(reason="ask"))
    await branch.operate(instruction="go", actions=True, middle=ScriptedMiddle({"action_requests": [
        {"function": "step", "arguments": {"name": n}, "call_id": "same"} for n in ("first", "second")]}))
    first, second = branch.pending_calls()
    assert first.call_id == "same" and second.call_id != "same"  # one call id names one call
    with pytest.raises(Stop):
        await branch.resume({first.call_id: Approve(by="ann"), second.call_id: Approve(by="ann")})
    assert ran == ["first"] and [p.call_id for p in branch.pending_calls()] == [second.call_id]
    with pytest.raises(CallAlreadyDecidedError):
        await branch.resume({first.call_id: Approve(by="ann")})
    out = await branch.resume_traced({second.call_id: Approve(by="ann")})
    assert ran == ["first", "second"] and out.trace.exit == "enriched"


class Summary(BaseModel):
    summary: str


class Other(BaseModel):
    total: int


async def test_a_restored_result_comes_back_as_the_model_the_caller_names(tmp_path):
    def planned(parse_param: Any) -> Any:
        return parse_param.response_format.model_validate({
            "summary": "refund A", "action_requests": [{"function": "refund", "arguments": {"order": "A", "amount": 5},
                                                        "call_id": "c0"}]})

    branch, _ = shop_branch()
    await branch.operate(instruction="go", actions=True, response_format=Summary, middle=ScriptedMiddle(planned))
    path = branch.snapshot(tmp_path / "branch.json")

    wrong = Branch.restore(path, tools=Shop().tools())
    with pytest.raises(ResumeError, match="not Other data"):
        await wrong.resume({"c0": Approve(by="ann")}, response_format=Other)
    assert [p.call_id for p in wrong.pending_calls()] == ["c0"]  # nothing decided, nothing ran

    plain = Branch.restore(shutil.copy(path, tmp_path / "copy.json"), tools=Shop().tools())  # its own decisions
    assert isinstance(await plain.resume({"c0": Approve(by="ann")}), dict)  # no model named: its JSON data

    shop = Shop()
    later = Branch.restore(path, tools=shop.tools())
    result = await later.resume({"c0": Approve(by="ann")}, response_format=Summary)
    assert isinstance(result, Summary) and result.summary == "refund A"
    assert [r.output for r in result.action_responses] == [{"refunded": 5, "order": "A"}]
    assert shop.ran == [("refund", {"order": "A", "amount": 5})]
    assert later.traces[-1].exit == "enriched"

    same, _ = shop_branch()  # in the process that deferred, the result is the model already
    await same.operate(instruction="go", actions=True, response_format=Summary, middle=ScriptedMiddle(planned))
    assert isinstance(await same.resume({"c0": Approve(by="ann")}, response_format=Summary), Summary)
