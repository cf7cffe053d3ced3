"""MCP calls in the record of a run: the trace, the event log, OpenTelemetry's
``execute_tool`` spans and cassettes; replay serves the recorded MCP results
with no server running. The MCP server is ``tests/mcp_app.py`` over streamable
HTTP (one process for the module), the model a loopback OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from lionops import Branch
from lionops.mcp import MCPServer, deny_destructive
from lionops.replay import record, replay
from lionops.testing import OpenAIServer, completion, tool_call
from tests.mcp_support import http_app  # noqa: F401 - fixture
from tests.openai_server import make_model

pytestmark = pytest.mark.anyio


class Note(BaseModel):
    text: str


KW = dict(instruction="Echo hi, then delete the notes.", response_format=Note, actions=True)
ANSWER = completion(
    json.dumps({"text": "done"}),
    tool_calls=[tool_call("echo", {"text": "hi"}, "call_1"), tool_call("delete_file", {"path": "notes"}, "call_2"),
                tool_call("add", {"a": 2, "b": 40}, "call_3")],
)


def governed(model, tools) -> Branch:
    branch = Branch(chat_model=model, system="Be brief.", tools=tools)
    branch.gate(deny_destructive)
    return branch


async def test_a_recorded_mcp_run_replays_with_no_server_running(http_app, tmp_path):
    path = tmp_path / "run.json"
    with OpenAIServer([ANSWER]) as llm:
        model = make_model(llm)
        async with MCPServer(url=http_app.url, name="app") as server:
            tools = await server.tools()
            before = len(http_app.calls())
            branch = governed(model, tools)
            recorded = await record(path, branch, **KW)
            assert sorted(http_app.calls()[before:]) == ["add", "echo"]  # concurrent: any order
        await model.aclose()
    actions = recorded.trace.actions
    assert [(a.function, a.decision) for a in actions] == [("echo", "allowed"), ("delete_file", "denied"),
                                                          ("add", "allowed")]
    logged = [e.kind for e in branch.logs if e.kind in ("action", "denied")]
    assert sorted(logged) == ["action", "action", "denied"]
    calls = json.loads(path.read_text())["operations"][0]["tool_calls"]
    assert [(c["function"], c["decision"], c.get("output")) for c in calls] == [
        ("echo", "allowed", {"result": "hi"}), ("delete_file", "denied", None), ("add", "allowed", {"total": 42})]

    # the MCP server is stopped (its session closed) and the model server too
    replayed = await replay(path, governed(model, tools), **KW)
    assert [r.output for r in replayed.result.action_responses] == [r.output for r in recorded.result.action_responses]
    assert replayed.trace.path() == recorded.trace.path()
    assert len(http_app.calls()) == before + 2  # nothing more reached the server
    rebuilt = await replay(path)  # from the cassette alone
    assert [r.record.decision for r in rebuilt.result.action_responses] == ["allowed", "denied", "allowed"]


async def test_mcp_calls_are_execute_tool_spans_with_mcp_attributes(http_app, otel):
    with OpenAIServer([ANSWER]) as llm:
        model = make_model(llm)
        async with MCPServer(url=http_app.url, name="app") as server:
            await governed(model, await server.tools()).operate(**KW)
        await model.aclose()
    spans = {s.attributes["gen_ai.tool.name"]: s for s in otel.named("execute_tool")}
    echo, delete = spans["echo"].attributes, spans["delete_file"].attributes
    assert echo["mcp.method.name"] == "tools/call" and echo["lionops.mcp.server"] == "app"
    assert echo["network.transport"] == "tcp" and echo["lionops.tool.decision"] == "allowed"
    assert delete["lionops.tool.decision"] == "denied" and delete["mcp.method.name"] == "tools/call"
