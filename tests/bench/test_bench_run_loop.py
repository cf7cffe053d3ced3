"""R1 (bench/run_loop.py) runs once: the loop and the same rounds called by hand (timings never asserted)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_three_round_run_and_its_rounds_by_hand_run_once():
    spec = importlib.util.spec_from_file_location("bench_run_loop", BENCH / "run_loop.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert anyio.run(module._loop, 1) >= 0
    assert anyio.run(module._by_hand, 1) >= 0
