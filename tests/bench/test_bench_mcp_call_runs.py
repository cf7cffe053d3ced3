"""``bench/mcp_call.py`` runs once (two calls a round, one round) and prints its table; no timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_mcp_call_bench_runs_once():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "mcp_call.py"), "--calls", "2", "--rounds", "1"],
                         capture_output=True, text=True, timeout=120, check=True, cwd=ROOT).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and "µs" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["ClientSession.call_tool", "lionops act() on an MCPTool"]
