"""Human approval of tool calls: one approved, one denied, one timed out.

The ``approvals`` durable branch gates every tool with
``HumanApproval(timeout=3 s)``. The test (a client of the real dev server)
waits for the three calls to be pending, approves one through the
``lionops.decision`` signal and denies one through the ``lionops.decide``
update; the third times out, which denies. The
decisions and the approver are in the trace, the event log and the messages.
Temporal's client runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from lionops.pipeline.act import DENIAL_ERROR
from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402
from tests.temporal_support import dev_server_address, effects, requires_temporal

pytestmark = requires_temporal


def test_approved_denied_and_timed_out_calls_are_recorded(tmp_path, monkeypatch):
    from temporalio.client import Client
    from temporalio.worker import Replayer, Worker

    from lionops import Approve, CallAlreadyDecidedError, Deny, PendingCall, UnknownCallError
    from lionops.temporal import decide, pending_approvals
    from tests.temporal_workflows import WORKFLOWS, CaseWorkflow

    address = dev_server_address()
    queue = f"approve-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "effects.jsonl"
    monkeypatch.setenv("LIONOPS_TEST_EFFECTS", str(log))
    with OpenAIServer(app.reply_for) as server:
        monkeypatch.setenv("LIONOPS_TEST_BASE_URL", server.base_url)

        async def main():
            client = await Client.connect(address, plugins=[app.PLUGIN])
            async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                              max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
                handle = await client.start_workflow(
                    CaseWorkflow.run, "approve_three", id=f"{queue}-wf", task_queue=queue)
                pending: list = []
                for _ in range(600):  # a generous real bound: ~30 s
                    pending = await pending_approvals(handle)
                    if len(pending) == 3:
                        break
                    await asyncio.sleep(0.05)
                assert all(isinstance(p, PendingCall) for p in pending)
                by_function = {p.function: p.call_id for p in pending}
                assert set(by_function) == {"lookup", "charge", "ship"}
                with pytest.raises(UnknownCallError) as unknown:  # no such call: nothing is taken
                    await decide(handle, {by_function["charge"]: Deny(by="eve"),
                                          "approvals-1-99": Approve(by="alice")})
                assert unknown.value.call_id == "approvals-1-99"
                assert sorted(unknown.value.pending) == sorted(by_function.values())
                await decide(handle, {by_function["lookup"]: Approve(by="alice", reason="routine lookup")},
                             signal=True)
                await decide(handle, {by_function["charge"]: Deny(by="bob", reason="over budget")})
                with pytest.raises(CallAlreadyDecidedError, match="denied by bob"):
                    await decide(handle, {by_function["charge"]: Approve(by="mallory")})
                record = await asyncio.wait_for(handle.result(), timeout=60)
                return by_function, record, await handle.fetch_history()

        by_function, record, history = asyncio.run(main())

    approvals = {a["function"]: a for a in record["trace"]["meta"]["approvals"]}
    assert approvals["lookup"]["decision"] == "approved" and approvals["lookup"]["by"] == "alice"
    assert approvals["lookup"]["reason"] == "routine lookup"
    assert approvals["charge"]["decision"] == "denied" and approvals["charge"]["by"] == "bob"
    assert approvals["charge"]["reason"] == "over budget"
    assert approvals["ship"]["decision"] == "timed_out" and approvals["ship"]["approved"] is False
    assert approvals["ship"]["by"] is None
    assert {a["call_id"] for a in approvals.values()} == set(by_function.values())

    # Only the approved tool ran.
    assert Counter(e["kind"] for e in effects(log)) == {"lookup": 1}
    outputs = {r["function"]: r["output"] for r in record["result"]["action_responses"]}
    assert outputs["lookup"] == {"item": "tea", "price": 12}
    assert outputs["charge"] == {"error": DENIAL_ERROR, "function": "charge", "reason": "over budget"}
    assert outputs["ship"] == {"error": DENIAL_ERROR, "function": "ship"}

    # The decision and the approver are on the messages of each call.
    on_messages = {}
    for m in record["messages"]:
        if m["role"] in ("action_request", "action_response"):
            on_messages.setdefault(m["content"]["function"], set()).add(
                (m["metadata"]["approval"]["decision"], m["metadata"]["approval"]["by"]))
    assert on_messages == {"lookup": {("approved", "alice")}, "charge": {("denied", "bob")},
                           "ship": {("timed_out", None)}}
    logged = [e["content"] for e in record["logs"] if e["kind"] == "approval"]
    assert len(logged) == 3
    # who, when, why: the keys of an in-process decision record
    assert all({"call_id", "function", "decision", "by", "reason", "deferred_at", "decided_at"} <= set(e)
               for e in logged)
    assert len([e for e in record["logs"] if e["kind"] == "denied"]) == 2

    async def replay():
        result = await Replayer(workflows=WORKFLOWS, plugins=[app.PLUGIN]).replay_workflow(history)
        assert result.replay_failure is None

    asyncio.run(replay())


def test_cancelling_a_workflow_that_waits_for_approval_runs_no_tool(tmp_path, monkeypatch):
    """Cancellation reaches the waiting gate: the workflow ends cancelled, no tool ran."""
    from temporalio.client import Client, WorkflowFailureError
    from temporalio.exceptions import CancelledError
    from temporalio.worker import Worker

    from lionops.temporal import pending_approvals
    from tests.temporal_workflows import WORKFLOWS, CaseWorkflow

    address = dev_server_address()
    queue = f"cancel-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "effects.jsonl"
    monkeypatch.setenv("LIONOPS_TEST_EFFECTS", str(log))
    with OpenAIServer(app.reply_for) as server:
        monkeypatch.setenv("LIONOPS_TEST_BASE_URL", server.base_url)

        async def main():
            client = await Client.connect(address, plugins=[app.PLUGIN])
            async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                              max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
                handle = await client.start_workflow(
                    CaseWorkflow.run, "approve_three", id=f"{queue}-wf", task_queue=queue)
                for _ in range(600):  # a generous real bound: ~30 s
                    if len(await pending_approvals(handle)) == 3:
                        break
                    await asyncio.sleep(0.05)
                await handle.cancel()
                with pytest.raises(WorkflowFailureError) as failure:
                    await asyncio.wait_for(handle.result(), timeout=60)
                return failure.value

        failure = asyncio.run(main())
    assert isinstance(failure.cause, CancelledError)
    assert effects(log) == []
