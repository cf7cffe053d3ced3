"""100 operations over two worker processes through ``run_operations``.

Each operation is one ``lionops.operate`` workflow (a model call and one tool
activity); each completes exactly once, its tool ran exactly once, and both
workers took a share. The wall time is printed (bench/README.md reports it).
Temporal's client runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import pytest

from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402
from tests.temporal_support import WorkerProcess, dev_server_address, effects, requires_temporal

pytestmark = requires_temporal

N = 100


def test_hundred_operations_over_two_workers_each_complete_once(tmp_path, capsys):
    from temporalio.client import Client

    from lionops.temporal import DurableOperationError, run_operations

    address = dev_server_address()
    queue = f"scale-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "effects.jsonl"
    with OpenAIServer(app.reply_for) as server:
        env = {"LIONOPS_TEST_BASE_URL": server.base_url, "LIONOPS_TEST_EFFECTS": str(log)}
        workers = [WorkerProcess(address, queue, env) for _ in range(2)]
        try:
            for w in workers:
                w.wait_ready()

            async def main():
                client = await Client.connect(address, plugins=[app.PLUGIN])
                ops = [{"instruction": f"case:one_tool op={i}", "response_format": app.Answer, "actions": True}
                       for i in range(N)]
                t0 = time.perf_counter()
                results = await run_operations(client, app.bulk, ops, task_queue=queue, id_prefix=queue)
                return results, time.perf_counter() - t0

            results, wall = asyncio.run(main())
        finally:
            for w in workers:
                w.stop()
        assert len(server.chat_requests) == N

    assert len(results) == N
    assert not [r for r in results if isinstance(r.result, DurableOperationError)]
    assert all(r.trace.exit == "enriched" for r in results)
    assert all(isinstance(r.result, app.Answer) for r in results)  # rebuilt as the response type
    assert all(r.result.action_responses[0].output == {"item": "cup", "price": 12} for r in results)
    ran = [e for e in effects(log) if e["kind"] == "lookup"]
    per_workflow = Counter(e["key"].split("/")[0] for e in ran)
    assert len(per_workflow) == N and set(per_workflow.values()) == {1}
    assert {e["pid"] for e in ran} == {w.pid for w in workers}  # both workers took a share
    with capsys.disabled():
        shares = Counter(e["pid"] for e in ran)
        print(f"\n[temporal scale] {N} operations over 2 workers in {wall:.2f} s wall "
              f"(shares {sorted(shares.values())})")


def test_a_failed_operation_keeps_the_others(monkeypatch):
    from temporalio.client import Client
    from temporalio.worker import Worker

    from lionops.temporal import DurableArgumentError, DurableOperationError, run_operations
    from tests.temporal_workflows import WORKFLOWS

    address = dev_server_address()
    queue = f"fail-{uuid.uuid4().hex[:8]}"
    with OpenAIServer(app.reply_for) as server:
        monkeypatch.setenv("LIONOPS_TEST_BASE_URL", server.base_url)

        async def main():
            client = await Client.connect(address, plugins=[app.PLUGIN])
            try:
                await run_operations(client, "shop", [{"instruction": "x", "chat_model": None}], task_queue=queue)
            except DurableArgumentError as exc:
                assert "worker-side" in str(exc)
            else:
                raise AssertionError("a worker-side keyword was accepted")
            async with Worker(client, task_queue=queue, workflows=WORKFLOWS,
                              max_concurrent_workflow_tasks=app.WORKFLOW_TASKS):
                return await run_operations(client, app.shop, [
                    {"instruction": "case:no_action_param", "response_format": app.Answer},
                    {"instruction": "case:failed", "response_format": app.Answer},
                ], task_queue=queue)

        ok, failed = asyncio.run(main())
    assert ok.trace.exit == "no_action_param"
    assert isinstance(ok.result, app.Answer) and (ok.result.answer, ok.result.confidence) == ("ok", 0.9)
    assert isinstance(failed.result, DurableOperationError)
    assert failed.result.error_type == "EndpointStatusError" and "HTTP 400" in failed.result.message
    assert failed.trace.exit == "failed"
