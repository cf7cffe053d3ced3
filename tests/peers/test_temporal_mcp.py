"""MCP tools on ``lionops.temporal``, on the real dev server, a real worker
process and the SDK-built MCP server (``tests/temporal_mcp_app.py``).

The workflow validates against the pinned input schemas and asks the gate
(``deny_destructive``); each allowed call is one activity, run through the
worker's own connection to the server, which checks the tool's definition
against its pin before the call. The server's call log shows what reached it.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from lionops.testing import OpenAIServer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_mcp_app as app  # noqa: E402
from tests.temporal_support import WorkerProcess, dev_server_address, requires_temporal  # noqa: E402

pytestmark = requires_temporal


class Env:
    def __init__(self, address: str, queue: str, log: Path, pins: Path) -> None:
        self.address, self.queue, self.log, self.pins = address, queue, log, pins

    def calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def run(self, case: str) -> Any:
        from temporalio.client import Client

        from lionops.temporal import LionopsPlugin, run_operations

        async def main() -> Any:
            client = await Client.connect(self.address, plugins=[LionopsPlugin()])
            ops = [{"instruction": f"case:{case}", "actions": True, "action_strategy": "sequential"}]
            (traced,) = await run_operations(client, "mcp", ops, task_queue=self.queue,
                                             id_prefix=f"{self.queue}-{case}")
            history = await client.get_workflow_handle(f"{self.queue}-{case}-0").fetch_history()
            activities = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                          if e.HasField("activity_task_scheduled_event_attributes")]
            return traced, activities

        return asyncio.run(main())


def _processes_with(value: str) -> list[int]:
    """The processes whose environment holds ``value`` (this test's own server log path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if value.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    address = dev_server_address()
    queue = f"mcp-{uuid.uuid4().hex[:8]}"
    folder = tmp_path_factory.mktemp("temporal-mcp")
    log, pins = folder / "calls.log", folder / "pins.json"
    with OpenAIServer(app.reply_for) as model:
        worker = WorkerProcess(address, queue, {"LIONOPS_TEST_BASE_URL": model.base_url, "MCP_APP_LOG": str(log),
                                                "LIONOPS_TEST_PINS": str(pins)},
                               module="tests.temporal_mcp_app")
        try:
            worker.wait_ready()
            yield Env(address, queue, log, pins)
        finally:
            worker.stop()
    assert _gone(str(log)) == []  # the worker stopped its MCP server's process


def _gone(value: str, within: float = 20.0) -> list[int]:
    """The processes still holding ``value`` once they had ``within`` seconds
    to exit: a stopped worker's server may finish exiting just after it."""
    ends = time.monotonic() + within
    while (left := _processes_with(value)) and time.monotonic() < ends:
        time.sleep(0.05)
    return left


def test_validation_and_the_gate_run_in_the_workflow_and_each_allowed_call_is_an_activity(env):
    from lionops.temporal import DurableOperationError

    before = len(env.calls())
    traced, activities = env.run("governed")
    assert activities == ["mcp.model", "mcp.tool.echo", "mcp.tool.add"]  # the model call, then each allowed call
    assert not isinstance(traced.result, DurableOperationError), traced.result
    records = traced.trace.actions
    assert [(r.function, r.decision) for r in records] == [
        ("echo", "allowed"), ("delete_file", "denied"), ("add", "rejected"), ("add", "allowed"), ("fail", "denied")]
    assert records[0].output == {"result": "hi"} and records[3].output == {"total": 5}
    assert "a: 'one' is not of type 'integer'" in (records[2].reason or "")
    assert records[1].reason == records[4].reason == "denied by gate deny_destructive"  # fail: no annotations
    # only the allowed calls reached the server, through the worker's connection
    assert env.calls()[before:] == ["echo", "add"]
    assert '"app"' in env.pins.read_text()  # pinned when the worker was built


def test_the_worker_refuses_a_tool_the_server_changed_with_the_typed_error(env):
    from lionops.temporal import DurableOperationError

    before = len(env.calls())
    traced, activities = env.run("rug")
    assert activities == ["mcp.model", "mcp.tool.watch", "mcp.tool.rug_pull", "mcp.tool.watch", "mcp.tool.echo"]
    assert not isinstance(traced.result, DurableOperationError), traced.result
    records = traced.trace.actions
    assert [r.decision for r in records] == ["allowed", "allowed", "error", "allowed"]
    assert records[2].error_type == "MCPDefinitionChangedError" and "'watch'" in (records[2].reason or "")
    assert records[3].output == {"result": "c"}
    assert env.calls()[before:] == ["watch", "rug_pull", "echo"]  # the changed tool never reached the server


def test_a_worker_built_against_changed_pins_refuses_to_start(env, tmp_path):
    """The pins saved by the first worker hold the first definitions; a worker
    whose server now lists a changed ``echo`` is not built (typed error)."""
    pins = tmp_path / "pins.json"
    pins.write_text(env.pins.read_text())
    worker = WorkerProcess(env.address, f"{env.queue}-changed",
                           {"LIONOPS_TEST_BASE_URL": "http://127.0.0.1:9", "MCP_APP_VARIANT": "2",
                            "LIONOPS_TEST_PINS": str(pins), "MCP_APP_LOG": os.devnull},
                           module="tests.temporal_mcp_app")
    try:
        assert worker.proc.stdout is not None
        first = worker.proc.stdout.readline()
        assert worker.proc.wait(timeout=60) == 2
    finally:
        worker.stop()
    assert '"not built": "MCPDefinitionChangedError"' in first and "'echo'" in first


def test_the_history_replays_with_no_server_started(env, monkeypatch):
    """temporalio's Replayer runs the recorded workflow again (validation and the
    gate in workflow code) from its history: the same decisions, and no MCP
    server started or called."""
    from temporalio.client import Client
    from temporalio.worker import Replayer

    from lionops.temporal import LionopsPlugin

    monkeypatch.setenv("LIONOPS_TEST_PINS", str(env.pins))
    monkeypatch.setenv("MCP_APP_LOG", str(env.log))
    monkeypatch.setenv("LIONOPS_TEST_BASE_URL", "http://127.0.0.1:9")
    env.run("governed")  # started here, or attached to when the first test ran it

    async def main() -> Any:
        durable = await app.build()  # lists the tools once (no call), as a worker does
        client = await Client.connect(env.address, plugins=[LionopsPlugin()])
        history = await client.get_workflow_handle(f"{env.queue}-governed-0").fetch_history()
        before = env.calls()
        replayer = Replayer(workflows=[], plugins=[LionopsPlugin(durable)])
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        servers = {id(t.connection): t.connection for t in durable.tools}
        return result, before, [s.running for s in servers.values()]

    result, before, running = asyncio.run(main())
    assert result.replay_failure is None, result.replay_failure
    assert env.calls() == before and running == [False]
