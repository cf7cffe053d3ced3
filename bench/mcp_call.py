"""One MCP tool call through lionops against the same call made directly with
the SDK's ``ClientSession.call_tool``, on the same server in the same run.

    python bench/mcp_call.py [--calls 200] [--rounds 30]

The server is ``tests/mcp_raw_server.py`` over stdio (standard library only,
answering at once), so what differs between the two is the client's own
work. lionops' call is ``branch.act([request])`` with one gate
(``lionops.mcp.deny_destructive``): offered-set check, validation against the
input schema, the gate, the record, the call, the result mapping.

The two are timed in pairs: each pair times a block of ``--calls`` direct
calls and a block of as many lionops calls back to back, each after
``gc.collect()``, the order alternating from pair to pair, so both blocks of
a pair see the same load on a shared machine. A pair gives two ratios,
lionops over direct, of the blocks' process CPU time (the client's; the
server runs in its own process) and of their wall-clock time. The table
shows the median per-call time of each side's blocks and the median of the
per-pair ratios (± half their interquartile range), with the load average
at the start and the end.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent


async def _block(fn: Callable[[], Awaitable[None]], calls: int) -> tuple[float, float]:
    """Per-call process CPU and wall-clock time of ``calls`` calls of ``fn`` (µs)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await fn()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / calls * 1e6, wall / calls * 1e6


async def run(calls: int, pairs: int) -> dict[str, list[float]]:
    from lionops import Branch
    from lionops.mcp import MCPServer, deny_destructive

    async with MCPServer([sys.executable, str(ROOT / "tests" / "mcp_raw_server.py")]) as server:
        tools = await server.tools()
        branch = Branch(tools=tools)
        branch.gate(deny_destructive)
        session = server._running()
        request = [{"function": "ok", "arguments": {}}]

        async def direct() -> None:
            await session.call_tool("ok", {})

        async def lionops_act() -> None:
            (response,) = await branch.act(request)
            assert response is not None and response.output == "fine", response

        for fn in (direct, lionops_act):  # warm up
            for _ in range(50):
                await fn()
        branch.clear_logs()
        branch.clear_messages()
        out: dict[str, list[float]] = {k: [] for k in ("direct_cpu", "direct_wall", "lionops_cpu", "lionops_wall")}
        for i in range(pairs):
            sides = [("direct", direct), ("lionops", lionops_act)]
            for label, fn in sides if i % 2 == 0 else sides[::-1]:
                cpu, wall = await _block(fn, calls)
                out[f"{label}_cpu"].append(cpu)
                out[f"{label}_wall"].append(wall)
            branch.clear_logs()
            branch.clear_messages()
        return out


def _ratio(num: list[float], den: list[float]) -> str:
    ratios = [a / b for a, b in zip(num, den, strict=True)]
    if len(ratios) < 2:
        return f"{ratios[0]:.2f}×"
    q = statistics.quantiles(ratios, n=4)
    return f"{statistics.median(ratios):.2f}× ±{(q[2] - q[0]) / 2:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200, help="calls per block")
    ap.add_argument("--rounds", type=int, default=30, help="pairs of blocks (direct, lionops)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    out = anyio.run(run, args.calls, args.rounds)
    end = os.getloadavg()[0]
    med = {k: statistics.median(v) for k, v in out.items()}
    print(f"{args.rounds} pairs of {args.calls} calls a block, the order alternating; "
          f"load average {load:.2f} at the start, {end:.2f} at the end")
    print("| system | CPU µs per call | wall µs per call | CPU × direct | wall × direct |")
    print("|---|---:|---:|---:|---:|")
    print(f"| ClientSession.call_tool | {med['direct_cpu']:.0f} | {med['direct_wall']:.0f} | 1.00 | 1.00 |")
    print(f"| lionops act() on an MCPTool | {med['lionops_cpu']:.0f} | {med['lionops_wall']:.0f} "
          f"| {_ratio(out['lionops_cpu'], out['direct_cpu'])} | {_ratio(out['lionops_wall'], out['direct_wall'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
