"""A durable operate() gives the in-process trace, state by state and guard by guard.

Each exit trigger of the operate machine runs once as Temporal workflow code
(a worker in this process, the real dev server, the loopback model server)
and once in process on a plain ``Branch`` with the same tools and inputs; the
transitions (trigger, source, dest, guards evaluated, error), the trace facts
(timings aside), the result and the messages must be equal. Temporal's client
runs on asyncio only; the in-process half runs on asyncio and on trio.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

import pytest

from lionops import Branch
from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402
from tests.temporal_support import SKIP_REASON, dev_server_address, requires_temporal

pytestmark = requires_temporal

#: Trace facts that are timings (they differ between any two runs).
TIMING_META = {"latency_ms"}
EXITS = sorted(app.CASES)


def _rows(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(t["trigger"], t["source"], t["dest"], t["guards"], t.get("error")) for t in trace["transitions"]]


def _messages(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    keep = {"finish_reason", "tool_calls", "usage", "model", "provider", "approval"}
    return [(m["role"], m["content"], m["sender"] is None, {k: v for k, v in m["metadata"].items() if k in keep})
            for m in messages]


@pytest.fixture(scope="module")
def model_server():
    with OpenAIServer(app.reply_for) as server:
        old = os.environ.get("LIONOPS_TEST_BASE_URL")
        os.environ["LIONOPS_TEST_BASE_URL"] = server.base_url
        try:
            yield server
        finally:
            if old is None:
                os.environ.pop("LIONOPS_TEST_BASE_URL", None)
            else:
                os.environ["LIONOPS_TEST_BASE_URL"] = old


@pytest.fixture(scope="module")
def durable_records(model_server) -> dict[str, dict[str, Any]]:
    """Every exit case run as a workflow (one worker in this process)."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from tests.temporal_workflows import WORKFLOWS, CaseWorkflow

    address = dev_server_address()
    queue = f"traces-{uuid.uuid4().hex[:8]}"

    async def main() -> dict[str, dict[str, Any]]:
        client = await Client.connect(address, plugins=[app.PLUGIN])
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                          max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
            runs = [client.execute_workflow(CaseWorkflow.run, case, id=f"{queue}-{case}", task_queue=queue)
                    for case in EXITS]
            return dict(zip(EXITS, await asyncio.gather(*runs), strict=True))

    return asyncio.run(main())


async def _in_process(case: str) -> dict[str, Any]:
    limits = app.CASE_LIMITS[case][1] if case in app.CASE_LIMITS else None
    branch = Branch(chat_model=app.chat_model(), tools=app.TOOLS, system=app.SYSTEM, limits=limits)
    try:
        traced = await branch.operate_traced(**app.case_kwargs(case))
    except Exception as exc:  # noqa: BLE001 - the record keeps the error
        return app.run_record(exc, branch)
    return app.run_record(traced, branch)


@pytest.mark.anyio
@pytest.mark.parametrize("case", EXITS)
async def test_durable_trace_equals_in_process(case, durable_records, anyio_backend):
    durable = durable_records[case]
    local = await _in_process(case)
    assert durable["trace"]["transitions"][-1]["trigger"] == CASE_EXIT[case]
    assert _rows(durable["trace"]) == _rows(local["trace"])
    # With no model request made, the Middle named is the workflow's model
    # activity: which Middle the worker would select is not known in workflow code.
    skip = TIMING_META | ({"middle"} if case in NO_MODEL_CALL else set())
    strip = lambda meta: {k: v for k, v in meta.items() if k not in skip}  # noqa: E731
    assert strip(durable["trace"]["meta"]) == strip(local["trace"]["meta"])
    assert durable.get("result") == local.get("result")
    assert durable.get("error") == local.get("error")
    assert _messages(durable["messages"]) == _messages(local["messages"])


#: Cases whose operation never reaches the model (a usage limit before the request).
NO_MODEL_CALL = {"over_limit"}

#: The exit each case must take (every exit trigger of states/operate.toml).
CASE_EXIT = {
    "skip_validation": "skip_validation", "mismatch_return_value": "mismatch_return_value",
    "mismatch_return_none": "mismatch_return_none", "mismatch_raise": "mismatch_raise",
    "actions_disabled": "actions_disabled", "no_action_param": "no_action_param",
    "no_requests": "no_requests", "no_responses": "no_responses", "no_response_slot": "no_response_slot",
    "enriched": "enriched",
    "failed": "failed", "failed_in_prepare": "failed",
    "over_limit": "over_limit", "over_limit_in_parse": "over_limit",
}


def test_every_exit_trigger_is_covered():
    from lionops.pipeline.machine import get_engine

    engine = get_engine()
    exits = {t.trigger for t in engine.definition.transitions if t.dest in engine.terminals}
    assert exits - NOT_DURABLE == set(CASE_EXIT.values())


#: Exits a durable run does not take: a durable branch waits for a person
#: inside the workflow (HumanApproval) instead of suspending at ``deferred``
#: (tested in process, tests/contract/test_deferred.py).
NOT_DURABLE = {"deferred"}


def test_a_skip_reason_names_the_missing_part():
    assert SKIP_REASON is None or "temporal" in SKIP_REASON


CONVERSATION = app.CONVERSATION


def test_the_conversation_lives_in_workflow_state(model_server):
    """Three operate() calls in one workflow run give the messages and traces
    of the same three calls on one in-process Branch; the model saw the history."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from tests.temporal_workflows import WORKFLOWS, ConversationWorkflow

    address = dev_server_address()
    queue = f"conversation-{uuid.uuid4().hex[:8]}"

    async def durable() -> dict[str, Any]:
        client = await Client.connect(address, plugins=[app.PLUGIN])
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                          max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
            return await client.execute_workflow(ConversationWorkflow.run, id=queue, task_queue=queue)

    async def local() -> Branch:
        branch = Branch(chat_model=app.chat_model(), tools=app.TOOLS, system=app.SYSTEM)
        for step in CONVERSATION:
            await branch.operate(**step)
        return branch

    seen = len(model_server.chat_requests)
    record = asyncio.run(durable())
    durable_requests = model_server.chat_requests[seen:]
    branch = asyncio.run(local())
    local_requests = model_server.chat_requests[seen + len(durable_requests):]

    assert [_rows(t) for t in record["traces"]] == [_rows(t.to_dict()) for t in branch.traces]
    assert _messages(record["messages"]) == _messages(branch.messages.to_list())
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant"]  # cleared, then one turn
    assert [r.body["messages"] for r in durable_requests] == [r.body["messages"] for r in local_requests]
    second = durable_requests[1].body
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]  # the history
    # under a caller model the offered tools are described in the prompt, not sent as native tools
    prompt = json.dumps(second["messages"])
    assert "tools" not in second and "lookup" in prompt and "ship" in prompt
    assert [m["id"] for m in record["messages"]] == sorted(m["id"] for m in record["messages"])


def test_hooks_and_context_providers_run_as_in_process(model_server):
    """Tool hooks and context-provider writeback are workflow code: they see
    the same calls, in the same order, as on an in-process Branch."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from tests.temporal_workflows import WORKFLOWS, ObservedWorkflow

    address = dev_server_address()
    queue = f"observed-{uuid.uuid4().hex[:8]}"

    async def durable() -> dict[str, Any]:
        client = await Client.connect(address, plugins=[app.PLUGIN])
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                          max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
            return await client.execute_workflow(ObservedWorkflow.run, "enriched", id=queue, task_queue=queue)

    app.OBSERVED.clear()
    record = asyncio.run(durable())
    seen_durable = list(app.OBSERVED)
    app.OBSERVED.clear()
    branch = Branch(chat_model=app.chat_model(), tools=app.TOOLS, system=app.SYSTEM)
    for point, handler in app.OBSERVERS.items():
        branch.on(point, handler)
    branch.add_context_provider(app.Recorder())
    asyncio.run(branch.operate_traced(**app.case_kwargs("enriched")))
    assert seen_durable == list(app.OBSERVED) == [
        ("tool_pre", "lookup"), ("tool_post", "lookup"), ("tool_pre", "ship"), ("tool_error", "ship"),
        ("writeback", "lookup"), ("writeback", "ship"),
    ]
    assert _rows(record["trace"]) == _rows(branch.traces[-1].to_dict())


def test_a_failed_model_call_is_retried_by_temporal_not_by_the_machine(model_server):
    """The endpoint's own retries run out (503 three times), so the model
    activity fails; Temporal's retry policy runs it again and it answers.
    The machine awaited its Middle once: one adapter transition, one answer."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from tests.temporal_workflows import WORKFLOWS, CaseWorkflow

    address = dev_server_address()
    queue = f"flaky-{uuid.uuid4().hex[:8]}"
    app.FLAKY.clear()

    async def durable():
        client = await Client.connect(address, plugins=[app.PLUGIN])
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                          max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
            handle = await client.start_workflow(CaseWorkflow.run, "flaky", id=queue, task_queue=queue)
            return await handle.result(), await handle.fetch_history()

    record, history = asyncio.run(durable())
    assert len(app.FLAKY) == 4  # three HTTP requests in the failed attempt, one in the next
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.HasField("activity_task_started_event_attributes")]
    assert attempts == [2]  # the started event of the activity's last attempt
    triggers = [t["trigger"] for t in record["trace"]["transitions"]]
    assert triggers.count("adapter_returned") == 1 and triggers[-1] == "no_requests"
    assert record["trace"]["meta"]["http_attempts"] == 1  # the facts of the attempt that answered
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant"]


def test_a_durable_run_takes_the_in_process_loop(model_server):
    """branch.run() as workflow code: the run machine's path and every round's
    path equal an in-process Branch.run() with the same tools and model."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from lionops import RunTrace
    from tests.temporal_workflows import WORKFLOWS, RunWorkflow

    queue = f"run-{uuid.uuid4().hex[:8]}"

    async def durable() -> dict[str, Any]:
        client = await Client.connect(dev_server_address(), plugins=[app.PLUGIN])
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                          max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
            return await client.execute_workflow(RunWorkflow.run, id=f"{queue}-run", task_queue=queue)

    async def local() -> Any:
        branch = Branch(chat_model=app.chat_model(), tools=app.TOOLS, system=app.SYSTEM)
        return await branch.run_traced("case:run_loop", **app.RUN_LOOP), branch

    record = asyncio.run(durable())
    (result, run), branch = asyncio.run(local())
    durable_run = RunTrace.from_dict(record["run"])
    assert durable_run.exit == run.exit == "answered"
    assert durable_run.trace.path() == run.trace.path()
    assert [r.path() for r in durable_run.rounds] == [r.path() for r in run.rounds]
    assert len(run.rounds) == 3
    assert record["result"] == result.model_dump(mode="json")
    assert _messages(record["messages"]) == _messages(branch.messages.to_list())
