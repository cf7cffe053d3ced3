"""Smoke test of the benchmark's paired method: the floor and lionops in one
process, block by block. Timings are never asserted; this only proves that
the paired workers run every scenario the goals name once and that their
ratios reach the table."""

from __future__ import annotations

import asyncio
import os


def test_paired_workers_time_both_sides_and_report_the_ratios(bench):
    import e2e
    from peer import Peer
    from report import render

    s_part = asyncio.run(bench.worker("paired", "paired-s", 0.0, True))
    assert set(bench.PAIRED_S) <= set(s_part)
    for scenario in bench.PAIRED_S:
        entry = s_part[scenario]
        assert len(entry["base"]) == len(entry["main"]) == len(entry["ratios"]) == 1, scenario
    with Peer() as peer:
        saved = {k: os.environ.get(k) for k in (bench.PEER_ENV, e2e.SHAPE_ENV)}
        os.environ[bench.PEER_ENV], os.environ[e2e.SHAPE_ENV] = peer.root, e2e.DEFAULT_SHAPE
        try:
            h_part = asyncio.run(bench.worker("paired", "paired-h", 0.0, True))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    assert set(bench.PAIRED_H) <= set(h_part)
    burst = h_part[f"H3-{bench.PAIRED_BURST}"]
    assert len(burst["wall_ratios"]) == len(burst["base_ms"]) == 2
    table = render({"paired": {**s_part, **h_part}})
    assert "| H2 CPU | floor |" in table and "Targets by the paired method" in table
    assert "(paired)" in table and "error" not in table
