"""One MCP tool call through lionops against the same call made directly with
the SDK's ``ClientSession.call_tool``, on the same server in the same run.

    python bench/mcp_call.py [--calls 300] [--rounds 7]

The server is ``tests/mcp_raw_server.py`` over stdio (standard library only,
answering at once), so what differs between the two is the client's own
work. lionops' call is ``branch.act([request])`` with one gate
(``lionops.mcp.deny_destructive``): offered-set check, validation against the
input schema, the gate, the record, the call, the result mapping. Rounds
alternate the two; the best round of each is reported in µs per call with
the ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent


async def run(calls: int, rounds: int) -> dict[str, float]:
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
            assert response.output == "fine", response.output

        best = {"direct": float("inf"), "lionops": float("inf")}
        for fn in (direct, lionops_act):  # warm up
            for _ in range(20):
                await fn()
        for _ in range(rounds):
            for label, fn in (("direct", direct), ("lionops", lionops_act)):
                start = time.perf_counter()
                for _ in range(calls):
                    await fn()
                best[label] = min(best[label], (time.perf_counter() - start) / calls * 1e6)
            branch.clear_logs()
            branch.clear_messages()
        return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    best = anyio.run(run, args.calls, args.rounds)
    print("| system | µs per MCP call (best round) | × direct |")
    print("|---|---:|---:|")
    print(f"| ClientSession.call_tool | {best['direct']:.0f} | 1.00 |")
    print(f"| lionops act() on an MCPTool | {best['lionops']:.0f} | {best['lionops'] / best['direct']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
