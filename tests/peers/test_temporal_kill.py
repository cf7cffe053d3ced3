"""A worker killed with SIGKILL while the second of three tools runs; a fresh
worker finishes the workflow. The model ran once, the first tool once, the
killed tool again (at-least-once, same idempotency key), the trace is
complete, and the history replays under temporalio's Replayer.

Both workers are separate processes (``python -m tests.temporal_app worker``);
the model is the loopback server in this process. Temporal's client runs on
asyncio only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402
from tests.temporal_support import WorkerProcess, dev_server_address, effects, requires_temporal, wait_for

pytestmark = requires_temporal


def test_killed_worker_then_fresh_worker_completes_the_operation(tmp_path):
    from temporalio.client import Client
    from temporalio.worker import Replayer

    from tests.temporal_workflows import WORKFLOWS, CaseWorkflow

    address = dev_server_address()
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "effects.jsonl"
    with OpenAIServer(app.reply_for) as server:
        env = {"LIONOPS_TEST_BASE_URL": server.base_url, "LIONOPS_TEST_EFFECTS": str(log),
               "LIONOPS_TEST_CHARGE_S": "30"}
        first = WorkerProcess(address, queue, env)
        second = None
        try:
            first.wait_ready()

            async def start():
                client = await Client.connect(address, plugins=[app.PLUGIN])
                return client, await client.start_workflow(
                    CaseWorkflow.run, "three_tools", id=f"{queue}-wf", task_queue=queue)

            client, handle = asyncio.run(start())
            wait_for(lambda: any(e["kind"] == "charge_start" for e in effects(log)), "the second tool to start")
            first.kill9()
            # The fresh worker's charge finishes quickly: only the first attempt hangs.
            second = WorkerProcess(address, queue, {**env, "LIONOPS_TEST_CHARGE_S": "0"})
            second.wait_ready()

            async def finish():
                client = await Client.connect(address, plugins=[app.PLUGIN])
                h = client.get_workflow_handle(handle.id)
                record = await asyncio.wait_for(h.result(), timeout=120)
                return record, await h.fetch_history()

            record, history = asyncio.run(finish())
        finally:
            first.stop()
            if second is not None:
                second.stop()

        ran = Counter(e["kind"] for e in effects(log))
        assert len(server.chat_requests) == 1  # the model was called once
        assert ran["lookup"] == 1  # the first tool ran once
        assert ran["charge_start"] == 2 and ran["charge"] == 1  # in flight when killed: run again
        keys = {e["key"] for e in effects(log) if e["kind"].startswith("charge")}
        assert len(keys) == 1 and None not in keys  # the same idempotency key on both attempts
        pids = {e["pid"] for e in effects(log) if e["kind"] == "charge_start"}
        assert pids == {first.pid, second.pid}
        assert ran["ship"] == 1
        assert {e["pid"] for e in effects(log) if e["kind"] == "ship"} == {second.pid}

        trace = record["trace"]
        assert [t["trigger"] for t in trace["transitions"]] == [
            "prepared", "schema_ready", "adapter_returned", "validated", "requests_found", "acted", "enriched"]
        outputs = [r["output"] for r in record["result"]["action_responses"]]
        assert outputs == [{"item": "tea", "price": 12}, {"charged": 1200}, "shipped tea"]
        roles = [m["role"] for m in record["messages"]]
        assert roles == ["system", "user", "assistant"] + ["action_request", "action_response"] * 3

    # The key the worker's model uses never reaches the history (the model is built on the worker).
    assert app.API_KEY not in history.to_json()

    # The recorded history replays with no nondeterminism error.
    async def replay():
        result = await Replayer(workflows=WORKFLOWS, plugins=[app.PLUGIN]).replay_workflow(history)
        assert result.replay_failure is None

    asyncio.run(replay())
