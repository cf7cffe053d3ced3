"""A server that changes a tool and says so (``notifications/tools/list_changed``):
the next call of that tool checks its definition against its pin before the
server is asked to run it, over stdio and streamable HTTP; a connection that
has not listed its tools yet checks them before its first call."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lionops import Branch
from lionops.mcp import MCPDefinitionChangedError, MCPServer
from tests.mcp_support import APP, serve_http

pytestmark = pytest.mark.anyio


def request(function: str, **arguments: object) -> dict[str, object]:
    return {"function": function, "arguments": arguments}


def calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def _rug_pull(server: MCPServer, log: Path) -> None:
    tools = await server.tools()
    branch = Branch(tools=tools)
    responses = await branch.act([
        request("watch", text="a"),      # the pinned definition: runs
        request("rug_pull"),             # the server changes watch and notifies
        request("watch", text="b"),      # refused before the server is asked
        request("echo", text="c"),       # an unchanged tool still runs
    ], strategy="sequential")
    assert [r.record.decision for r in responses] == ["allowed", "allowed", "error", "allowed"]
    assert responses[0].output == {"result": "watched a"}
    refused = responses[2].record
    assert refused.error_type == "MCPDefinitionChangedError" and "'watch'" in (refused.reason or "")
    assert responses[3].output == {"result": "c"}
    assert calls(log) == ["watch", "rug_pull", "echo"]  # the changed tool never reached the server
    with pytest.raises(MCPDefinitionChangedError) as caught:  # the listing refuses it too, until accepted
        await server.tools()
    assert caught.value.tools == ["watch"] and caught.value.server == server.name
    branch.register_tools(await server.tools(accept=["watch"]), update=True)
    (again,) = await branch.act([request("watch", text="d")])
    assert again.record.decision == "allowed" and again.output == {"result": "watched d"}
    assert calls(log)[-1] == "watch"


async def test_a_changed_tool_is_refused_after_the_notification_over_stdio(tmp_path):
    log = tmp_path / "calls.log"
    async with MCPServer(APP, env={**os.environ, "MCP_APP_LOG": str(log)}, name="app") as server:
        await _rug_pull(server, log)


async def test_a_changed_tool_is_refused_after_the_notification_over_http(tmp_path):
    with serve_http(tmp_path) as app:
        async with MCPServer(url=app.url, name="app") as server:
            await _rug_pull(server, app.log)


async def test_a_fresh_connection_checks_the_definitions_before_its_first_call(tmp_path):
    """Tools built on one connection, called on a later one whose server lists a
    changed definition (a worker's own connection is such a later one)."""
    log = tmp_path / "calls.log"
    env = {**os.environ, "MCP_APP_LOG": str(log)}
    server = MCPServer(APP, env=env, name="app")
    async with server:
        tools = {t.name: t for t in await server.tools()}
    server.env = {**env, "MCP_APP_VARIANT": "2"}  # echo's description changes in the next process
    async with server:
        assert await tools["add"]._call({"a": 1, "b": 2}) == {"total": 3}
        with pytest.raises(MCPDefinitionChangedError) as caught:
            await tools["echo"]._call({"text": "x"})
    assert caught.value.tools == ["echo"]
    assert calls(log) == ["add"]
