"""A worker process whose durable branch calls an MCP server's tools.

    python -m tests.temporal_mcp_app --address HOST:PORT --task-queue Q

The worker lists the SDK-built test server's tools (``tests/mcp_app.py``
over stdio) when it is built, under the pins in ``LIONOPS_TEST_PINS`` when
that file exists (saved there otherwise), registers them on the durable
branch ``mcp`` with ``deny_destructive`` as its gate, and runs with its own
connection to the server (the plugin starts it). ``MCP_APP_LOG`` is the
server's call log; the model is the loopback server at ``LIONOPS_TEST_BASE_URL``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from lionops import iModel
from lionops.mcp import MCPServer, ToolPins, deny_destructive
from lionops.temporal import DurableBranch, LionopsPlugin
from lionops.testing import completion, tool_call

from .temporal_app import FAST_MODEL, FAST_TOOLS

APP = [sys.executable, "-m", "tests.mcp_app"]

#: case word of the instruction -> the model's tool calls
CALLS: dict[str, list[dict[str, Any]]] = {
    "governed": [
        tool_call("echo", {"text": "hi"}, "g1"),               # read-only: allowed, an activity
        tool_call("delete_file", {"path": "/etc/passwd"}, "g2"),  # destructive: denied in the workflow
        tool_call("add", {"a": "one", "b": 2}, "g3"),          # invalid against the input schema
        tool_call("add", {"a": 2, "b": 3}, "g4"),              # allowed
        tool_call("fail", {"message": "no"}, "g5"),            # no annotations: destructive, denied
    ],
    "rug": [
        tool_call("watch", {"text": "a"}, "r1"),
        tool_call("rug_pull", {}, "r2"),                       # the server changes watch and notifies
        tool_call("watch", {"text": "b"}, "r3"),               # refused by the worker's connection
        tool_call("echo", {"text": "c"}, "r4"),
    ],
}


def reply_for(request: Any) -> Any:
    """Tool calls for the first request of an operation, then a plain answer."""
    messages = request.body.get("messages", [])
    if any(m.get("role") == "tool" for m in messages):
        return completion("done")
    text = next((m["content"] for m in reversed(messages) if isinstance(m.get("content"), str)
                 and "case:" in m["content"]), "")
    case = text.split("case:", 1)[1].split()[0] if "case:" in text else ""
    return completion("done", tool_calls=CALLS[case]) if case in CALLS else completion("done")


def chat_model() -> iModel:
    return iModel(provider="openai", model="m", base_url=os.environ["LIONOPS_TEST_BASE_URL"], api_key="sk-test")


async def build() -> DurableBranch:
    """The durable branch: its tools listed (and pinned) once, when the worker is built."""
    pins_path = Path(os.environ["LIONOPS_TEST_PINS"])
    pins = ToolPins.load(pins_path) if pins_path.exists() else ToolPins()
    server = MCPServer(APP, env={**os.environ}, name="app", pins=pins)
    async with server:
        tools = await server.tools()
    pins.save(pins_path)
    return DurableBranch("mcp", chat_model=chat_model, tools=tools, gate=deny_destructive,
                         model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)


async def main(address: str, task_queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    try:
        durable = await build()
    except Exception as exc:  # noqa: BLE001 - the test reads why the worker was not built
        print(json.dumps({"not built": type(exc).__name__, "message": str(exc)}), flush=True)
        raise SystemExit(2) from None
    plugin = LionopsPlugin(durable)
    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(client, task_queue=task_queue, max_concurrent_workflow_tasks=4,
                    sticky_queue_schedule_to_start_timeout=timedelta(seconds=1))
    print("worker ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args()
    asyncio.run(main(args.address, args.task_queue))
