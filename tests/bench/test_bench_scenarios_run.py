"""Smoke test of the benchmark script: one iteration of every scenario.

Timings are never asserted here; this only proves that ``make bench``
can run every scenario on every local system and render its table, in
process and end to end against the loopback peer (``bench/peer.py``, a real
HTTP server in its own process), and that the end-to-end systems send the
same request and get the same result.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request

import pytest


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


def _e2e_systems():
    """The local end-to-end systems; the openai SDK floor only where ``make bench`` installed it."""
    from e2e import E2E_LOCAL

    try:
        import openai  # noqa: F401
    except ImportError:
        return [s for s in E2E_LOCAL if s != "openai-sdk"]
    return list(E2E_LOCAL)


@pytest.fixture()
def peer(bench):
    from peer import Peer

    with Peer() as running:
        yield running


def _worker_env(bench, peer, **extra):
    import e2e

    env = {bench.PEER_ENV: peer.root, e2e.SHAPE_ENV: e2e.DEFAULT_SHAPE, **extra}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return saved


def _restore(saved):
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_every_end_to_end_scenario_runs_once_on_every_local_system(bench, peer):
    from common import H3_CALLS, H_SCENARIOS
    from report import render

    results = {}
    saved = _worker_env(bench, peer, **{bench.CALLS_ENV: str(next(iter(H3_CALLS)))})
    try:
        for system in _e2e_systems():
            timing = asyncio.run(bench.worker(system, "e2e", 0.0, True))
            assert set(H_SCENARIOS) <= set(timing), system
            assert all(len(timing[sc]["samples"]) == 1 == len(timing[sc]["wall"]) for sc in H_SCENARIOS), system
            h3 = asyncio.run(bench.worker(system, "h3", 0.0, True))
            assert len(h3["wall_ms"]) == 1 and h3["rss_peak_mib"] > 0
            bench.merge(results, system, {**timing, "H3-200": h3})
    finally:
        _restore(saved)
    table = render({"e2e_systems": _e2e_systems(), "e2e": results})
    assert "| H2 CPU |" in table and "H3 wall ms (200 concurrent H2)" in table and "Targets" in table


def _last_body(peer, scenario):
    with urllib.request.urlopen(f"{peer.root}/last/{scenario}", timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("scenario", ["H1", "H2", "H4"])
def test_end_to_end_systems_send_the_same_request_and_return_the_same_result(bench, peer, scenario):
    from common import H2_OUTPUTS, H_SCENARIOS, Forecast
    from e2e import build

    path, tools, _ = H_SCENARIOS[scenario]
    bodies = {}
    for system in _e2e_systems():
        new_conversation, call = build(system, peer.root).case(scenario)
        result = asyncio.run(call(new_conversation()))
        assert isinstance(result, Forecast), system
        assert (result.city, result.temp_c, result.sunny) == ("Lisbon", 21.5, True), system
        if tools:
            assert [r.output for r in result.action_responses] == H2_OUTPUTS, system
        bodies[system] = _last_body(peer, path)
    assert all(body == bodies["floor"] for body in bodies.values()), bodies
