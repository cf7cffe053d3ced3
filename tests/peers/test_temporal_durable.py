"""Durable runs keep the gate's promise, on the real dev server.

One worker process (``python -m tests.temporal_app worker --max-cached 0``)
serves this module: with no workflow cache every workflow task replays the
history from the start, on a process that never ran the operation before
that task. Each durable feature runs there (approval waiting, approval and
gate timeouts, concurrent and sequential tools, hooks, context providers),
and each recorded history replays again under temporalio's ``Replayer``.
Then: each approval gate decides for itself; the tool activity receives
exactly the arguments the gate saw; data stays data; an operation cannot
start twice. Tools write one effect line per run (with their idempotency
key), so the test counts what ran. Temporal's client runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402
from tests.temporal_support import WorkerProcess, dev_server_address, effects, requires_temporal  # noqa: E402

pytestmark = requires_temporal


class Env:
    """The module's dev server, model server, replaying worker and effect log."""

    def __init__(self, address: str, queue: str, server: OpenAIServer, log: Any) -> None:
        self.address, self.queue, self.server, self.log = address, queue, server, log

    def ran(self, prefix: str) -> list[dict[str, Any]]:
        """The effects of the workflows whose ids start with ``prefix``."""
        return [e for e in effects(self.log) if str(e.get("key") or "").startswith(prefix)]

    async def client(self) -> Any:
        from temporalio.client import Client

        return await Client.connect(self.address, plugins=[app.PLUGIN])


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    address = dev_server_address()
    queue = f"durable-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("durable") / "effects.jsonl"
    with OpenAIServer(app.reply_for) as server:
        old = os.environ.get("LIONOPS_TEST_BASE_URL")
        os.environ["LIONOPS_TEST_BASE_URL"] = server.base_url  # run_operations rebuilds types here
        worker = WorkerProcess(address, queue, {"LIONOPS_TEST_BASE_URL": server.base_url,
                                                "LIONOPS_TEST_EFFECTS": str(log)}, max_cached=0)
        try:
            worker.wait_ready()
            yield Env(address, queue, server, log)
        finally:
            worker.stop()
            if old is None:
                os.environ.pop("LIONOPS_TEST_BASE_URL", None)
            else:
                os.environ["LIONOPS_TEST_BASE_URL"] = old


async def until(handle: Any, predicate: Callable[[list[Any]], bool]) -> list[Any]:
    """The pending calls, once ``predicate`` holds for them (a generous real bound: ~60 s)."""
    from temporalio.service import RPCError

    from lionops.temporal import pending_approvals

    pending: list[Any] = []
    for _ in range(1200):
        try:
            pending = await pending_approvals(handle)
        except RPCError:  # not started yet
            pending = []
        if predicate(pending):
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"the pending calls never matched; last: {pending}")


def by_function(pending: list[Any]) -> dict[str, Any]:
    return {p.function: p for p in pending}


def replays_in_a_fresh_process(histories: list[Any], tmp_path: Any) -> None:
    """Each history replays in a new process (``python -m tests.temporal_app replay``)."""
    import json
    import subprocess
    import sys

    from tests.temporal_support import REPO

    paths = []
    for i, history in enumerate(histories):
        path = tmp_path / f"history-{i}.json"
        path.write_text(history.to_json())
        paths.append(str(path))
    out = subprocess.run([sys.executable, "-m", "tests.temporal_app", "replay", *paths], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=True)
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["failure"] for r in results] == [None] * len(paths), results


async def replays(histories: list[Any]) -> None:
    from temporalio.worker import Replayer

    from tests.temporal_workflows import WORKFLOWS

    replayer = Replayer(workflows=WORKFLOWS, plugins=[app.PLUGIN])
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (history.workflow_id, result.replay_failure)


# ------------------------------------------------------------ 1. replay on any worker


def test_every_durable_feature_runs_when_each_workflow_task_replays(env, tmp_path):
    from lionops.temporal import approve, deny
    from tests.temporal_workflows import BranchWorkflow, ObservedWorkflow

    prefix = f"{env.queue}-replay"

    async def main() -> tuple[dict[str, Any], list[Any]]:
        client = await env.client()
        out: dict[str, Any] = {}
        # approval waiting (update and signal) and the approval timeout, concurrent tools
        h = await client.start_workflow(BranchWorkflow.run, args=["mixed", "approve_three"],
                                        id=f"{prefix}-approval", task_queue=env.queue)
        calls = by_function(await until(h, lambda p: {c.function for c in p} >= {"lookup", "charge"}))
        await approve(h, calls["lookup"].call_id, by="alice")
        await deny(h, calls["charge"].call_id, by="bob", signal=True)
        out["approval"] = await h.result()
        # sequential tools, no gate
        out["sequential"] = await client.execute_workflow(
            BranchWorkflow.run, args=["shop", "three_tools", "sequential"], id=f"{prefix}-seq", task_queue=env.queue)
        # a gate that never answers, bounded by gate_timeout (a durable timer)
        out["gate_timeout"] = await client.execute_workflow(
            BranchWorkflow.run, args=["stalled", "one_tool"], id=f"{prefix}-stalled", task_queue=env.queue)
        # hooks and a context provider
        out["observed"] = await client.execute_workflow(
            ObservedWorkflow.run, "enriched", id=f"{prefix}-observed", task_queue=env.queue)
        ids = ["approval", "seq", "stalled", "observed"]
        histories = [await client.get_workflow_handle(f"{prefix}-{i}").fetch_history() for i in ids]
        return out, histories

    out, histories = asyncio.run(main())

    approvals = {a["function"]: a["decision"] for a in out["approval"]["trace"]["meta"]["approvals"]}
    assert approvals == {"lookup": "approved", "charge": "denied", "ship": "timed_out"}
    ran = Counter(e["kind"] for e in env.ran(f"{prefix}-approval"))
    assert ran == {"lookup": 1}

    seq = out["sequential"]
    assert [t["trigger"] for t in seq["trace"]["transitions"]][-2:] == ["acted", "enriched"]
    assert [r["output"] for r in seq["result"]["action_responses"]] == [
        {"item": "tea", "price": 12}, {"charged": 1200}, "shipped tea"]
    assert [e["kind"] for e in env.ran(f"{prefix}-seq")] == ["lookup", "charge_start", "charge", "ship"]

    stalled = out["gate_timeout"]
    assert [e["kind"] for e in stalled["logs"] if e["kind"] == "gate_timeout"] == ["gate_timeout"]
    assert stalled["result"]["action_responses"][0]["output"]["function"] == "lookup"
    assert env.ran(f"{prefix}-stalled") == []

    observed = out["observed"]
    assert "error" not in observed
    assert [t["trigger"] for t in observed["trace"]["transitions"]][-1] == "enriched"

    for history in histories:  # the worker's key never reaches a history
        assert app.API_KEY not in history.to_json()
    asyncio.run(replays(histories))
    replays_in_a_fresh_process(histories, tmp_path)


def test_a_fresh_worker_process_carries_on_a_waiting_approval(env):
    """The worker that started the wait is killed (SIGKILL); another process,
    which never ran the workflow, answers the query and the update."""
    from lionops.temporal import approve
    from tests.temporal_workflows import BranchWorkflow

    queue = f"fresh-{uuid.uuid4().hex[:8]}"
    wid = f"{queue}-wf"
    common = {"LIONOPS_TEST_BASE_URL": env.server.base_url, "LIONOPS_TEST_EFFECTS": str(env.log)}
    first = WorkerProcess(env.address, queue, common, max_cached=0)
    second = None
    try:
        first.wait_ready()

        async def start() -> None:
            client = await env.client()
            h = await client.start_workflow(BranchWorkflow.run, args=["patient", "one_tool"], id=wid,
                                            task_queue=queue)
            await until(h, lambda p: len(p) == 1)

        asyncio.run(start())
        first.kill9()
        second = WorkerProcess(env.address, queue, common, max_cached=0)
        second.wait_ready()

        async def finish() -> dict[str, Any]:
            client = await env.client()
            h = client.get_workflow_handle(wid)
            [call] = await until(h, lambda p: len(p) == 1)
            await approve(h, call.call_id, by="dana")
            return await h.result()

        record = asyncio.run(finish())
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert [a["by"] for a in record["trace"]["meta"]["approvals"]] == ["dana"]
    assert [(e["kind"], e["pid"]) for e in env.ran(wid)] == [("lookup", second.pid)]


# ------------------------------------------------------------ 2. each gate decides


def test_each_approval_gate_decides_for_itself_and_is_named(env):
    from lionops import CallAlreadyDecidedError
    from lionops.temporal import approve, deny
    from tests.temporal_workflows import BranchWorkflow

    wid = f"{env.queue}-twice"

    async def main() -> tuple[list[Any], dict[str, Any], Any]:
        client = await env.client()
        h = await client.start_workflow(BranchWorkflow.run, args=["twice", "approve_three"], id=wid,
                                        task_queue=env.queue)
        first = by_function(await until(h, lambda p: len(p) == 3))
        assert {p.gate for p in first.values()} == {0}
        await approve(h, first["lookup"].call_id, by="alice")  # gate 2 does not cover lookup
        await approve(h, first["charge"].call_id, by="alice")
        await deny(h, first["ship"].call_id, by="carol")
        second = by_function(await until(h, lambda p: [(c.function, c.gate) for c in p] == [("charge", 2)]))
        with pytest.raises(CallAlreadyDecidedError):  # the first gate's decision does not count twice
            await approve(h, first["charge"].call_id, by="alice")
        await approve(h, second["charge"].call_id, by="bob", reason="second pair of eyes")
        return list(first.values()) + list(second.values()), await h.result(), await h.fetch_history()

    pending, record, history = asyncio.run(main())
    assert len({p.call_id for p in pending}) == 4
    decided = [(a["function"], a["gate"], a["decision"], a["by"]) for a in record["trace"]["meta"]["approvals"]]
    assert sorted(decided) == [("charge", 0, "approved", "alice"), ("charge", 2, "approved", "bob"),
                               ("lookup", 0, "approved", "alice"), ("ship", 0, "denied", "carol")]
    assert Counter(e["kind"] for e in env.ran(wid)) == {"lookup": 1, "charge_start": 1, "charge": 1}
    on_charge = [m["metadata"] for m in record["messages"]
                 if m["role"] == "action_request" and m["content"]["function"] == "charge"]
    assert [(a["gate"], a["by"]) for a in on_charge[0]["approvals"]] == [(0, "alice"), (2, "bob")]
    assert on_charge[0]["approval"]["by"] == "bob"
    asyncio.run(replays([history]))


def test_the_same_gate_object_twice_is_a_configuration_error():
    from datetime import timedelta

    from lionops.errors import ConfigurationError
    from lionops.temporal import DurableBranch, HumanApproval

    once = HumanApproval(timeout=timedelta(seconds=5))
    for gates in ([once, once], [app.allow_all, once, app.allow_all]):
        with pytest.raises(ConfigurationError, match="same gate object"):
            DurableBranch("dup", chat_model=app.chat_model, tools=app.TOOLS, gate=gates)
    # two equal approvals are two gates
    DurableBranch("two", chat_model=app.chat_model, tools=app.TOOLS,
                  gate=[HumanApproval(timeout=5), HumanApproval(timeout=5)])
    with pytest.raises(ConfigurationError, match="would cut"):
        DurableBranch("cut", chat_model=app.chat_model, tools=app.TOOLS, gate=once, gate_timeout=1)


# ------------------------------------------------------------ 3. the approved arguments


def test_the_tool_activity_receives_exactly_what_the_gate_saw(env):
    from lionops.temporal import approve
    from tests.temporal_workflows import BranchWorkflow

    wid = f"{env.queue}-pay"

    async def main() -> tuple[Any, dict[str, Any]]:
        client = await env.client()
        h = await client.start_workflow(BranchWorkflow.run, args=["payments", "pay"], id=wid, task_queue=env.queue)
        [call] = await until(h, lambda p: len(p) == 1)
        await approve(h, call.call_id, by="alice")
        return call, await h.result()

    call, record = asyncio.run(main())
    assert call.arguments == {"amount": 1500, "memo": "tea"}  # "15.00" dollars, validated once
    [paid] = env.ran(wid)
    assert (paid["amount"], paid["memo"]) == (1500, "tea")
    assert record["result"]["action_responses"][0]["output"] == {"paid_cents": 1500}


# ------------------------------------------------------------ 4. data is data


def test_marker_keys_in_context_stay_data_and_import_nothing(env):
    from lionops.temporal import DurableOperationError, run_operations
    from tests.temporal_workflows import BranchWorkflow

    hostile = {"$lionops_class": "os:environ", "rows": [{"$lionops_model": "os:environ", "data": {}}],
               "$lionops_data": {"$lionops_bytes": 7}}
    prefix = f"{env.queue}-data"

    async def main() -> tuple[list[Any], dict[str, Any], list[Any]]:
        client = await env.client()
        results = await run_operations(client, app.shop, [
            {"instruction": "case:no_action_param", "response_format": app.Answer, "context": hostile},
        ], task_queue=env.queue, id_prefix=prefix)
        record = await client.execute_workflow(BranchWorkflow.run, args=["shop", "one_tool", "sequential", hostile],
                                               id=f"{prefix}-wf", task_queue=env.queue)
        histories = [await client.get_workflow_handle(i).fetch_history() for i in (f"{prefix}-0", f"{prefix}-wf")]
        return results, record, histories

    results, record, histories = asyncio.run(main())
    assert not isinstance(results[0].result, DurableOperationError), results[0].result
    assert isinstance(results[0].result, app.Answer)
    assert "error" not in record
    bodies = [str(r.body) for r in env.server.chat_requests if "os:environ" in str(r.body)]
    assert len(bodies) >= 2  # the context reached the prompt as the data it was
    for text in bodies + [h.to_json() for h in histories]:
        assert app.API_KEY not in text and os.environ["PATH"] not in text
    user = next(m for m in record["messages"] if m["role"] == "user")
    assert "os:environ" in str(user["content"])


# ------------------------------------------------------------ 5. no double start


def test_run_operations_again_returns_results_and_attaches_to_open_runs(env):
    from lionops.temporal import DurableOperationError, approve, run_operations

    prefix = f"{env.queue}-again"
    ops = [{"instruction": f"case:one_tool n={i}", "response_format": app.Answer, "actions": True} for i in range(2)]
    ops.append({"instruction": "case:failed", "response_format": app.Answer})  # a closed, failed operation

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        client = await env.client()
        first = await run_operations(client, app.shop, ops, task_queue=env.queue, id_prefix=prefix)
        again = await run_operations(client, app.shop, ops, task_queue=env.queue, id_prefix=prefix)
        # an open run: the client gives up waiting, then calls again and attaches
        open_prefix = f"{prefix}-open"
        gated = [{"instruction": "case:one_tool", "response_format": app.Answer, "actions": True}]
        task = asyncio.ensure_future(run_operations(client, app.patient, gated, task_queue=env.queue,
                                                    id_prefix=open_prefix))
        h = client.get_workflow_handle(f"{open_prefix}-0")
        [call] = await until(h, lambda p: len(p) == 1)
        task.cancel()
        retry = asyncio.ensure_future(run_operations(client, app.patient, gated, task_queue=env.queue,
                                                     id_prefix=open_prefix))
        await asyncio.sleep(0.2)
        await approve(h, call.call_id, by="alice")
        return first, again, await retry

    calls_before = len(env.server.chat_requests)
    first, again, attached = asyncio.run(main())
    assert [r.result for r in again[:2]] == [r.result for r in first[:2]]
    assert all(isinstance(r.result, app.Answer) for r in first[:2] + attached)
    failed = [r.result for r in (first[2], again[2])]
    assert all(isinstance(f, DurableOperationError) and f.workflow_id == f"{prefix}-2" for f in failed), failed
    assert failed[0].error_type == failed[1].error_type
    assert len(env.server.chat_requests) - calls_before == 4  # each operation called the model once
    ran = env.ran(prefix)
    assert Counter(e["kind"] for e in ran) == {"lookup": 3}  # two operations and the attached one, once each
    keys = sorted(e["key"] for e in ran)
    assert keys == [f"{prefix}-0/shop/1/1", f"{prefix}-1/shop/1/1", f"{prefix}-open-0/patient/1/1"]


# ------------------------------------------------------------ property: random gate lists and decisions

_DECISIONS = ("approve", "deny", "timeout")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gates=st.sampled_from(sorted(app.GATE_LISTS)),
       plan=st.dictionaries(st.tuples(st.sampled_from(["lookup", "charge", "ship"]), st.integers(0, 2)),
                            st.sampled_from(_DECISIONS), min_size=9, max_size=9))
def test_no_tool_runs_without_every_decision_it_needs_and_none_twice(env, gates, plan):
    """Random approve/deny/timeout orders over random gate lists (three
    concurrent calls, each behind the gates that cover it)."""
    from lionops import CallAlreadyDecidedError, UnknownCallError
    from lionops.temporal import approve, deny, pending_approvals
    from tests.temporal_workflows import BranchWorkflow

    wid = f"{env.queue}-prop-{uuid.uuid4().hex[:8]}"

    async def main() -> tuple[dict[str, Any], dict[str, str]]:
        client = await env.client()
        h = await client.start_workflow(BranchWorkflow.run, args=[f"gated_{gates}", "approve_three"], id=wid,
                                        task_queue=env.queue)
        sent: dict[str, str] = {}
        task = asyncio.ensure_future(h.result())
        while not task.done():
            try:
                pending = await pending_approvals(h)
            except Exception:  # noqa: BLE001 - not started yet, or just completed
                pending = []
            for call in pending:
                if call.call_id in sent:
                    continue
                choice = plan[(call.function, call.gate)]
                sent[call.call_id] = choice
                try:
                    if choice == "approve":
                        await approve(h, call.call_id, by=f"p{call.gate}")
                    elif choice == "deny":
                        await deny(h, call.call_id, by=f"p{call.gate}")
                except (CallAlreadyDecidedError, UnknownCallError):  # it timed out first: the record says so
                    sent[call.call_id] = "late"
            await asyncio.sleep(0.05)
        return await task, sent

    record, sent = asyncio.run(main())
    covers = app.GATE_LISTS[gates]
    records = record["trace"]["meta"]["approvals"]
    ran = Counter(e["kind"] for e in env.ran(wid))
    for function in ("lookup", "charge", "ship"):
        needed = [g for g, fns in enumerate(covers) if fns is None or function in fns]
        mine = {r["gate"]: r for r in records if r["function"] == function}
        approved = all(g in mine and mine[g]["approved"] for g in needed)
        runs = ran["charge" if function == "charge" else function]
        assert runs == (1 if approved else 0), (function, needed, mine, ran)
        for r in mine.values():  # each record is what was sent, or a timeout
            want = sent.get(r["call_id"], "timeout")
            expected = {"approve": "approved", "deny": "denied"}.get(want, "timed_out")
            # A decision the workflow reads in the same task as its timer's end
            # counts as late: the record then says timed_out, never the other verdict.
            late = want in ("approve", "deny") and r["decision"] == "timed_out"
            assert r["decision"] == expected or late, (r, want)
            assert r["by"] == (None if expected == "timed_out" or late else f"p{r['gate']}")
        # gates after a denial or timeout are never asked
        asked = sorted(mine)
        assert asked == needed[:len(asked)]
        if not approved:
            assert not mine[asked[-1]]["approved"]


def test_the_idempotency_key_is_the_same_in_a_reset_run(env):
    """A reset starts a new run of the same workflow id from its first task:
    the tools run again (a new run) with the keys of the first run."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

    from tests.temporal_workflows import BranchWorkflow

    wid = f"{env.queue}-reset"

    async def main() -> None:
        client = await env.client()
        h = await client.start_workflow(BranchWorkflow.run, args=["shop", "three_tools", "sequential"], id=wid,
                                        task_queue=env.queue)
        await h.result()
        history = await h.fetch_history()
        first_task = next(e.event_id for e in history.events
                          if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        reset = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=wid),
            reason="test", workflow_task_finish_event_id=first_task, request_id=uuid.uuid4().hex))
        await client.get_workflow_handle(wid, run_id=reset.run_id).result()

    asyncio.run(main())
    ran = env.ran(wid)
    assert [e["kind"] for e in ran] == ["lookup", "charge_start", "charge", "ship"] * 2  # two runs
    keys = [e["key"] for e in ran if e["kind"] != "charge_start"]
    assert keys[:3] == keys[3:] == [f"{wid}/shop/1/1", f"{wid}/shop/1/2", f"{wid}/shop/1/3"]


# ------------------------------------------------------------ 6. the decisions of one approval screen


def test_decisions_are_the_in_process_types_checked_whole_and_bounded(env):
    """The pending calls are ``PendingCall`` records with the in-process
    binding hash; ``{call_id: Approve | Deny}`` decides some calls and leaves
    the rest waiting; a refused update takes nothing; a payload past the
    bounds is refused unread."""
    from temporalio.client import WorkflowUpdateFailedError

    from lionops import Approve, Branch, CallAlreadyDecidedError, Deny, UnknownCallError
    from lionops.errors import JSONLimitError
    from lionops.governance import call_digest, jsonable_arguments
    from lionops.temporal import decide
    from lionops.temporal.approval import DECIDE_UPDATE
    from tests.temporal_workflows import BranchWorkflow

    wid = f"{env.queue}-decide"

    async def main() -> tuple[list[Any], list[Any], dict[str, Any], Any]:
        client = await env.client()
        h = await client.start_workflow(BranchWorkflow.run, args=["patient", "approve_three"], id=wid,
                                        task_queue=env.queue)
        calls = by_function(first := await until(h, lambda p: len(p) == 3))
        with pytest.raises(JSONLimitError) as size:  # a reason past the byte bound
            await decide(h, {calls["lookup"].call_id: Approve(by="ann", reason="x" * 70_000)})
        assert size.value.limit == "size"
        deep: Any = "x"
        for _ in range(10):
            deep = {"a": deep}
        with pytest.raises(WorkflowUpdateFailedError) as nested:  # a raw update nested past the depth bound
            await h.execute_update(DECIDE_UPDATE, {calls["lookup"].call_id: deep})
        assert nested.value.cause.type == "JSONLimitError"
        with pytest.raises(WorkflowUpdateFailedError) as malformed:  # neither Approve nor Deny
            await h.execute_update(DECIDE_UPDATE, {calls["lookup"].call_id: {"kind": "maybe", "by": "ann"}})
        assert malformed.value.cause.type == "ArgumentTypeError"
        with pytest.raises(UnknownCallError):  # one unknown id: none of the decisions is taken
            await decide(h, {calls["lookup"].call_id: Approve(by="ann"), "patient-1-7-0": Deny(by="ann")})
        await decide(h, {calls["lookup"].call_id: Approve(by="ann", reason="routine")})  # one of three
        # a signal cannot be refused: the workflow logs and ignores what it would refuse
        await decide(h, {calls["lookup"].call_id: Deny(by="eve"), "patient-1-9-0": Deny(by="eve")}, signal=True)
        rest = await until(h, lambda p: len(p) == 2)
        with pytest.raises(CallAlreadyDecidedError):
            await decide(h, {calls["lookup"].call_id: Deny(by="bob")})
        await decide(h, {calls["charge"].call_id: Deny(by="bob", reason="no"),
                         calls["ship"].call_id: Approve(by="bob")})
        return first, rest, await h.result(), await h.fetch_history()

    first, rest, record, history = asyncio.run(main())
    asyncio.run(replays([history]))  # the refused updates included
    tools = Branch(tools=app.TOOLS).acts
    for call in first:
        definition = tools.get(call.function).offered_schema.json
        assert call.digest == call_digest(call.function, definition, jsonable_arguments(call.arguments))
        assert call.operation == f"{wid}/patient/1" and call.gate == 0
    assert sorted(c.function for c in rest) == ["charge", "ship"]
    decided = {a["function"]: (a["decision"], a["by"], a["reason"]) for a in record["trace"]["meta"]["approvals"]}
    assert decided == {"lookup": ("approved", "ann", "routine"), "charge": ("denied", "bob", "no"),
                       "ship": ("approved", "bob", None)}
    assert Counter(e["kind"] for e in env.ran(wid)) == {"lookup": 1, "ship": 1}


def test_the_documented_approval_screen_decides_for_a_durable_branch(env):
    """docs/governance.md's ``screen`` and ``screen_durable``, run as written
    against a waiting workflow: the charge of 500 is within the rule."""
    import re

    from tests.temporal_support import REPO
    from tests.temporal_workflows import BranchWorkflow

    page = (REPO / "docs" / "governance.md").read_text()
    files = dict(re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", page, flags=re.S))
    namespace: dict[str, Any] = {}
    screen_code = files["screen.py"].split("# in process:")[0]  # the handler, without the in-process call
    exec(compile(screen_code + files["durable_screen.py"], "docs/governance.md", "exec"), namespace)  # noqa: S102
    wid = f"{env.queue}-screen"

    async def main() -> dict[str, Any]:
        client = await env.client()
        h = await client.start_workflow(BranchWorkflow.run, args=["patient", "approve_three"], id=wid,
                                        task_queue=env.queue)
        await until(h, lambda p: len(p) == 3)
        await namespace["screen_durable"](h, "ann@example.com")
        return await h.result()

    record = asyncio.run(main())
    decided = {(a["function"], a["decision"], a["by"], a["reason"]) for a in record["trace"]["meta"]["approvals"]}
    assert decided == {(f, "approved", "ann@example.com", "within policy") for f in ("lookup", "charge", "ship")}
    assert Counter(e["kind"] for e in env.ran(wid)) == {"lookup": 1, "charge_start": 1, "charge": 1, "ship": 1}
