"""The client the MCP conformance suite's client scenarios run:

    python -m tests.mcp_conformance_client URL

(``conformance client --command ... --scenario NAME`` appends the URL of its
test server and names the scenario in ``MCP_CONFORMANCE_SCENARIO``). It
connects with ``lionops.mcp.MCPServer(url=...)``, lists the tools and calls
each one the scenario expects through ``Branch.act`` (the governed path).
Elicitation is opted in with a callback that accepts the requested schema's
defaults; every other server request stays refused.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp.types as mt

from lionops import Branch
from lionops.mcp import MCPServer

#: scenario -> the calls it expects (tool name, arguments)
CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "initialize": [],
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
    "sse-retry": [("test_reconnection", {})],
}


async def accept_defaults(context: Any, params: Any) -> mt.ElicitResult:
    """Accept an elicitation with the defaults its requested schema gives."""
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {name: spec["default"] for name, spec in properties.items()
               if isinstance(spec, dict) and "default" in spec}
    return mt.ElicitResult(action="accept", content=content)


async def main(url: str, scenario: str) -> int:
    async with MCPServer(url=url, name="conformance", elicitation=accept_defaults, call_timeout=20) as server:
        tools = await server.tools()
        branch = Branch(tools=tools)
        requests = [{"function": name, "arguments": arguments} for name, arguments in CALLS[scenario]]
        responses = await branch.act(requests, strategy="sequential") if requests else []
    for response in responses:
        print(json.dumps({"function": response.function, "decision": response.record.decision,
                          "output": response.output}, default=str))
    return 0 if all(r.record.decision == "allowed" for r in responses) else 1


if __name__ == "__main__":
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    sys.exit(anyio.run(main, sys.argv[-1], scenario))
