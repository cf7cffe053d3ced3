"""Telemetry of durable runs records what ran, once.

A worker in this process is instrumented with ``lionops.instrument()`` (the
real OpenTelemetry SDK, in-memory exporter and metric reader). A run on a
caching worker is exported once; replaying its history (temporalio's
``Replayer``) exports nothing more; a worker that keeps no workflow cache
(every task replays, every task ends in an eviction) exports no span twice,
no ``operate`` span failed by an eviction and no exit count for one.
Temporal's client runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest

from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402
from tests.temporal_support import dev_server_address, requires_temporal  # noqa: E402

pytestmark = requires_temporal


def _names(otel: Any) -> Counter[str]:
    return Counter(s.name.split(" ")[0] for s in otel.spans())


def _exits(otel: Any) -> dict[str, int]:
    metric = otel.metrics().get("lionops.operation.exits")
    if metric is None:
        return {}
    return {str(p.attributes.get("lionops.exit.trigger", p.attributes)): int(p.value)
            for p in metric.data.data_points}


def _run(address: str, queue: str, cached: bool) -> tuple[dict[str, Any], Any]:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from tests.temporal_workflows import WORKFLOWS, BranchWorkflow

    async def main() -> tuple[dict[str, Any], Any]:
        client = await Client.connect(address, plugins=[app.PLUGIN])
        options: dict[str, Any] = {} if cached else {"max_cached_workflows": 0}
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS, **options):
            record = await client.execute_workflow(
                BranchWorkflow.run, args=["shop", "three_tools", "sequential"], id=f"{queue}-wf", task_queue=queue)
            return record, await client.get_workflow_handle(f"{queue}-wf").fetch_history()

    return asyncio.run(main())


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.setenv("LIONOPS_TEST_EFFECTS", str(tmp_path / "effects.jsonl"))
    with OpenAIServer(app.reply_for) as server:
        monkeypatch.setenv("LIONOPS_TEST_BASE_URL", server.base_url)
        yield server


def test_a_run_is_exported_once_and_its_replay_exports_nothing(otel, model):
    from temporalio.worker import Replayer

    from tests.temporal_workflows import WORKFLOWS

    record, history = _run(dev_server_address(), f"otel-{uuid.uuid4().hex[:8]}", cached=True)
    assert "error" not in record
    once = _names(otel)
    assert once["operate"] == 1 and once["execute_tool"] == 3, once
    assert not [s for s in otel.named("operate") if not s.status.is_ok and s.status.status_code.name == "ERROR"]
    exits = _exits(otel)

    async def replay() -> None:
        result = await Replayer(workflows=WORKFLOWS, plugins=[app.PLUGIN]).replay_workflow(history)
        assert result.replay_failure is None

    asyncio.run(replay())
    assert _names(otel) == once  # nothing exported again
    assert _exits(otel) == exits


def test_a_worker_without_a_workflow_cache_exports_no_span_twice_and_no_eviction(otel, model):
    record, _ = _run(dev_server_address(), f"otel0-{uuid.uuid4().hex[:8]}", cached=False)
    assert "error" not in record
    names = _names(otel)
    assert all(n <= 1 for k, n in names.items() if k in ("operate", "chat")), names
    assert names["execute_tool"] <= 3, names
    assert not [s for s in otel.spans() if s.status.status_code.name == "ERROR"], names
    assert sum(_exits(otel).values()) <= 1
    assert "failed" not in _exits(otel)
