"""Memory over a long life (M1, M2): resident set size at the start, middle and end.

    python bench/memory.py [--operations 10000] [--branches 1000] [--keep 50]

M1: one Branch with three tools, ``max_messages`` and ``max_traces`` set to
``--keep``, runs ``--operations`` S2 calls (three tool calls each, the
zero-latency Middle of S1-S5). M2: ``--branches`` Branches are made, each
runs one S2 call and is dropped. M3: one branch (history bounded as in M1)
runs ``--branches`` S2 calls, each with a response model made for that call
(``pydantic.create_model``, as a service building its types at run time
does; ``reason=True``, so lionops generates its own types from it). Each starts after a warm-up of a tenth of
its calls (caches filled, the allocator's arenas grown) and reads, after
``gc.collect()``, the process RSS (``/proc/self/statm``), the number of
objects the garbage collector tracks and the branch's kept history (messages,
traces, event-log entries) at the start, the middle and the end. A flat run
keeps the tracked objects at the same count and the RSS within the
allocator's noise (a few hundred KiB). Writes ``out/bench/memory.md`` and
``memory.json``. Runs in a few seconds; no timing is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SCENARIOS, TOOLS  # noqa: E402
from systems import _middle_kw  # noqa: E402

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_kib() -> int:
    """The resident set size of this process now, in KiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE // 1024


def reading(label: str, branch: Any | None) -> dict[str, Any]:
    gc.collect()
    row: dict[str, Any] = {"at": label, "rss_kib": rss_kib(), "gc_objects": len(gc.get_objects())}
    if branch is not None:
        row |= {"messages": len(branch.messages), "traces": len(branch.traces), "log_entries": len(branch.logs)}
    return row


async def readings(calls: int, one: Callable[[], Awaitable[None]], branch: Any | None) -> list[dict[str, Any]]:
    """``calls`` awaits of ``one()`` after a warm-up of a tenth of them; the
    readings at the start, after half of them and at the end."""
    for _ in range(calls // 10):
        await one()
    rows = [reading("start", branch)]
    for i in range(1, calls + 1):
        await one()
        if i == calls // 2:
            rows.append(reading("middle", branch))
    rows.append(reading("end", branch))
    return rows


def _bounded(keep: int) -> Any:
    from lionops import Branch, Tool

    return Branch(tools=[Tool(f) for f in TOOLS], max_messages=keep, max_traces=keep, max_logs=keep)


async def long_branch(operations: int, keep: int) -> list[dict[str, Any]]:
    """M1: one branch, ``operations`` S2 calls, history bounded by ``keep``."""
    kw = _middle_kw(*SCENARIOS["S2"], 0.0)
    branch = _bounded(keep)

    async def one() -> None:
        await branch.operate(**kw)

    return await readings(operations, one, branch)


async def many_branches(branches: int) -> list[dict[str, Any]]:
    """M2: ``branches`` branches, each made, run once and dropped."""
    from lionops import Branch, Tool

    kw = _middle_kw(*SCENARIOS["S2"], 0.0)
    tools = [Tool(f) for f in TOOLS]

    async def one() -> None:
        branch = Branch(tools=list(tools))
        await branch.operate(**kw)

    return await readings(branches, one, None)


async def fresh_types(calls: int, keep: int) -> list[dict[str, Any]]:
    """M3: ``calls`` S2 calls on one branch, each with a response model made for it."""
    from pydantic import create_model

    kw = _middle_kw(*SCENARIOS["S2"], 0.0)
    branch = _bounded(keep)

    async def one() -> None:
        fmt = create_model("Forecast", city=(str, ...), temp_c=(float, ...), sunny=(bool, ...))
        await branch.operate(**{**kw, "response_format": fmt, "reason": True})

    return await readings(calls, one, branch)


def render(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    names = {"M1": f"one branch, {args.operations:,} S2 calls, max_messages = max_traces = max_logs = {args.keep}",
             "M2": f"{args.branches:,} branches made, run once (S2) and dropped",
             "M3": f"one branch, {args.branches:,} S2 calls, each with a response model made for it"}
    lines = ["| | what | at | RSS KiB | tracked objects | messages | traces | log entries |",
             "|---|---|---|---|---|---|---|---|"]
    for key, rows in results.items():
        for row in rows:
            lines.append(f"| {key} | {names[key]} | {row['at']} | {row['rss_kib']:,} | {row['gc_objects']:,} | "
                         f"{row.get('messages', '')} | {row.get('traces', '')} | {row.get('log_entries', '')} |")
    for key, rows in results.items():
        lines.append(f"\n{key}: RSS end - start {rows[-1]['rss_kib'] - rows[0]['rss_kib']:+,} KiB "
                     f"(second half {rows[-1]['rss_kib'] - rows[1]['rss_kib']:+,} KiB), tracked objects "
                     f"{rows[-1]['gc_objects'] - rows[0]['gc_objects']:+,}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operations", type=int, default=10_000)
    ap.add_argument("--branches", type=int, default=1_000)
    ap.add_argument("--keep", type=int, default=50)
    ap.add_argument("--out", default=str(HERE.parent / "out" / "bench"))
    args = ap.parse_args()
    results = {"M1": asyncio.run(long_branch(args.operations, args.keep)),
               "M2": asyncio.run(many_branches(args.branches)),
               "M3": asyncio.run(fresh_types(args.branches, args.keep))}
    text = render(results, args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory.md").write_text(text)
    (out / "memory.json").write_text(json.dumps(results, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
