"""The client scenarios of the MCP conformance suite (``@modelcontextprotocol/conformance``,
``make mcp-conformance``) against ``lionops.mcp``: the suite starts its own
test server for each scenario and runs ``tests/mcp_conformance_client.py``,
which connects with ``MCPServer(url=...)`` and calls the scenario's tools
through ``Branch.act``; the suite's checks (``checks.json``) must hold.

The ``auth/*`` scenarios are not run: ``MCPServer`` sends fixed headers and
has no OAuth flow of its own. In ``sse-retry`` the suite also measures how
long the reconnection waited; that timing check is the suite's and is not
asserted here (a shared machine decides it, not the client).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.mcp_support import ROOT

CONFORMANCE = ROOT / ".cache" / "mcp-conformance" / "node_modules" / ".bin" / "conformance"
#: scenario -> checks that must be SUCCESS (every other check must not be FAILURE)
SCENARIOS = {
    "initialize": {"mcp-client-initialization"},
    "tools_call": {"tool-add-numbers"},
    "elicitation-sep1034-client-defaults": {
        f"client-elicitation-sep1034-{kind}-default" for kind in ("string", "integer", "number", "enum", "boolean")},
    "sse-retry": {"client-sse-graceful-reconnect", "client-sse-last-event-id"},
}
TIMED = {"client-sse-retry-timing"}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_conformance_client_scenario(scenario, tmp_path):
    if not CONFORMANCE.exists():
        pytest.skip(f"{CONFORMANCE} is not installed: `make mcp-conformance` could not reach the npm registry")
    command = f"{sys.executable} -m tests.mcp_conformance_client"
    done = subprocess.run([str(CONFORMANCE), "client", "--command", command, "--scenario", scenario,
                           "--timeout", "60000", "-o", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith(scenario)]
    checks = json.loads((folder / "checks.json").read_text())
    status = {c["id"]: c["status"] for c in checks if c["status"] != "INFO"}
    failed = {k: v for k, v in status.items() if v == "FAILURE" and k not in TIMED}
    assert not failed, (failed, done.stdout[-2000:], (folder / "stderr.txt").read_text()[-2000:])
    assert {k for k, v in status.items() if v == "SUCCESS"} >= SCENARIOS[scenario], (status, done.stdout[-2000:])
