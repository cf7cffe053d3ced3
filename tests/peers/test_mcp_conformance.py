"""The client scenarios of the MCP conformance suite (``@modelcontextprotocol/conformance``,
``make mcp-conformance``) against ``lionops.mcp``: the suite starts its own
test server for each scenario and runs ``tests/mcp_conformance_client.py``,
which connects with ``MCPServer(url=...)`` and calls the scenario's tools
through ``Branch.act``; the suite's checks (``checks.json``) must hold.

The ``auth/*`` scenarios connect with ``MCPServer(url=..., auth=...)`` and
the SDK's OAuth providers; every check must hold, and a client that gives up
(a protected resource naming another server, a step-up that never ends) does
so with a typed error naming the server; except in the two scenarios
whose authorization-server metadata names another issuer than the one the
client was sent to: there the SDK's refusal (RFC 8414 section 3.3) must fail
the start with a typed error naming the server. In ``sse-retry`` the suite also measures how
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
#: the suite's authorization scenarios, discovered from the installed suite
AUTH = sorted(line.strip(" -") for line in subprocess.run(
    [str(CONFORMANCE), "list"], capture_output=True, text=True, timeout=60).stdout.splitlines()
    if line.strip().startswith("- auth/")) if CONFORMANCE.exists() else []
#: scenarios whose authorization server gives metadata with an issuer other than its own address
ISSUER_MISMATCH = {"auth/metadata-var2", "auth/metadata-var3"}


def run_scenario(scenario, tmp_path):
    """Run one client scenario; its checks by id, the suite's output and the client's stderr."""
    if not CONFORMANCE.exists():
        pytest.skip(f"{CONFORMANCE} is not installed: `make mcp-conformance` could not reach the npm registry")
    command = f"{sys.executable} -m tests.mcp_conformance_client"
    done = subprocess.run([str(CONFORMANCE), "client", "--command", command, "--scenario", scenario,
                           "--timeout", "60000", "-o", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    (folder,) = [p for p in tmp_path.rglob("*") if p.is_dir() and p.name.startswith(scenario.split("/")[-1] + "-")]
    checks = json.loads((folder / "checks.json").read_text())
    return checks, done.stdout, (folder / "stderr.txt").read_text() if (folder / "stderr.txt").exists() else ""


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_conformance_client_scenario(scenario, tmp_path):
    checks, stdout, stderr = run_scenario(scenario, tmp_path)
    status = {c["id"]: c["status"] for c in checks if c["status"] != "INFO"}
    failed = {k: v for k, v in status.items() if v == "FAILURE" and k not in TIMED}
    assert not failed, (failed, stdout[-2000:], stderr[-2000:])
    assert {k for k, v in status.items() if v == "SUCCESS"} >= SCENARIOS[scenario], (status, stdout[-2000:])


def test_the_suite_has_authorization_scenarios():
    if not CONFORMANCE.exists():
        pytest.skip(f"{CONFORMANCE} is not installed: `make mcp-conformance` could not reach the npm registry")
    assert len(AUTH) >= 19 and ISSUER_MISMATCH <= set(AUTH), AUTH


@pytest.mark.parametrize("scenario", AUTH)
def test_conformance_authorization_scenario(scenario, tmp_path):
    checks, stdout, stderr = run_scenario(scenario, tmp_path)
    status = {c["id"]: c["status"] for c in checks if c["status"] != "INFO"}
    if scenario in ISSUER_MISMATCH:
        assert "MCPServerError: MCP server 'conformance': could not start" in stderr, stderr[-2000:]
        assert "issuer mismatch" in stderr, stderr[-2000:]
        return
    assert status and all(v == "SUCCESS" for v in status.values()), (status, stdout[-2000:], stderr[-2000:])
    if "Traceback" in stderr:  # a scenario whose server must be refused (a foreign resource, endless step-up)
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("lionops.mcp.errors.MCPServerError: MCP server 'conformance'"), stderr[-2000:]
