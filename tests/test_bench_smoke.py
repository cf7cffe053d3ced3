"""Smoke test of the benchmark script: one iteration of every scenario.

Timings are never asserted here; this only proves that ``make bench``
can run every scenario on every local system and render its table.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
MODULES = ("common", "systems", "reference", "report", "untraced", "run")


@pytest.fixture()
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import run

        yield run
    finally:
        sys.path.remove(str(BENCH))
        for name in MODULES:
            sys.modules.pop(name, None)


def test_every_scenario_runs_once_on_every_local_system(bench):
    from common import SCENARIOS, UNTRACED
    from report import render
    from systems import LOCAL

    results = {}
    for system in LOCAL:
        timing = asyncio.run(bench.worker(system, "timing", 0.0, True))
        assert set(SCENARIOS) <= set(timing)
        assert all(len(timing[sc]["samples"]) == 1 for sc in SCENARIOS)
        s4 = asyncio.run(bench.worker(system, "s4", 0.0, True))
        assert len(s4["wall_ms"]) == 1
        bench.merge(results, system, {**timing, "S4": s4})
    assert results["lionops"]["extras"]["traces_per_s"][0] > 0
    assert len(results["lionops"][UNTRACED]["samples"]) == 1
    table = render({"systems": list(LOCAL), "results": results})
    assert "| S1 |" in table and "S4 wall ms" in table and "Targets" in table


def test_systems_return_the_enriched_result(bench):
    from common import Forecast
    from systems import LOCAL, build

    for system in (*LOCAL, "lionops-untraced"):
        new_branch, call = build(system).scenario("actions", 3)
        result = asyncio.run(call(new_branch()))
        assert isinstance(result, Forecast), system
        assert [r.output for r in result.action_responses] == [3, "hi", True], system
