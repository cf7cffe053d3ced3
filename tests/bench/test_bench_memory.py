"""M1 and M2 (bench/memory.py) run once, small: the rows are read and rendered (sizes never asserted)."""

from __future__ import annotations

import argparse
import asyncio


def test_the_long_branch_and_the_many_branches_report_their_readings(bench):
    import memory

    results = {"M1": asyncio.run(memory.long_branch(40, 5)), "M2": asyncio.run(memory.many_branches(20)),
               "M3": asyncio.run(memory.fresh_types(20, 5))}
    assert [row["at"] for row in results["M1"]] == ["start", "middle", "end"] == [r["at"] for r in results["M3"]]
    # the history is bounded: max_messages, max_traces and max_logs are all 5
    assert all(max(row["messages"], row["traces"], row["log_entries"]) <= 5 for row in results["M1"])
    assert results["M1"][-1]["traces"] == results["M1"][-1]["log_entries"] == 5
    text = memory.render(results, argparse.Namespace(operations=40, branches=20, keep=5))
    assert "| M1 |" in text and "| M2 |" in text and "| M3 |" in text and "tracked objects" in text
