"""MCP tools on the governed path: the SDK-built test server over streamable
HTTP (one process for the module) and stdio, the reference servers from npm."""

from __future__ import annotations

import pytest

from lionops import Branch
from lionops.mcp import (
    MCPResultTooLargeError,
    MCPServer,
    MCPTool,
    MCPToolError,
    ToolAnnotations,
    deny_destructive,
)
from tests.mcp_support import APP, RAW, ROOT, http_app, reference_server  # noqa: F401

pytestmark = pytest.mark.anyio


def request(function: str, **arguments: object) -> dict[str, object]:
    return {"function": function, "arguments": arguments}


async def test_the_gate_sees_validated_arguments_server_and_annotations_and_nothing_else_reaches_it(http_app):
    seen = []
    async with MCPServer(url=http_app.url, name="app") as server:
        tools = await server.tools()
        assert all(isinstance(t, MCPTool) for t in tools)
        branch = Branch(tools=tools)
        branch.gate(lambda inv: seen.append(inv) or True)
        branch.gate(deny_destructive)
        before = len(http_app.calls())
        responses = await branch.act([
            request("echo", text="hi"),                     # allowed
            request("delete_file", path="/etc/passwd"),     # destructive: denied
            request("add", a="one", b=2),                   # invalid against the input schema
            request("add", a=1),                            # a required argument missing
            request("fetch_url", url="x"),                  # not a tool
        ], strategy="sequential", tools=["echo", "delete_file", "add"])
        responses += await branch.act([request("big", n=3)], tools=["echo"])  # registered, not offered
    decisions = [r.record.decision for r in responses]
    assert decisions == ["allowed", "denied", "rejected", "rejected", "rejected", "not_offered"]
    assert responses[0].output == {"result": "hi"}
    assert "a: 'one' is not of type 'integer'" in responses[2].record.reason
    assert "'b' is a required property" in responses[3].record.reason
    assert http_app.calls()[before:] == ["echo"]  # only the allowed call reached the server
    assert [inv.function for inv in seen] == ["echo", "delete_file"]  # validation came before the gate
    echo, delete = seen
    assert dict(echo.arguments) == {"text": "hi"} and echo.server == "app"
    assert echo.annotations == ToolAnnotations(read_only=True, destructive=False, open_world=False)
    assert delete.annotations.destructive and not delete.annotations.read_only
    assert delete.tool.remote_name == "delete-file"


async def test_results_map_text_structured_images_resources_and_is_error(http_app):
    async with MCPServer(url=http_app.url, max_result_bytes=10_000) as server:
        assert server.name == "lionops-test-app"
        branch = Branch(tools=await server.tools())
        add, picture, fail, big = await branch.act([
            request("add", a=2, b=3), request("picture"), request("fail", message="no"), request("big", n=20_000)])
        with pytest.raises(MCPResultTooLargeError):  # without suppression, the typed error itself
            await branch.act([request("big", n=20_000)], suppress_errors=False)
        (after,) = await branch.act([request("echo", text="still up")])
    assert after.output == {"result": "still up"}
    assert add.output == {"total": 5}
    text, image, resource = picture.output
    assert text == {"type": "text", "text": "a dot"}
    assert image["type"] == "image" and image["mimeType"] == "image/png" and image["data"].startswith("iVBOR")
    assert resource["resource"] == {"uri": "file:///note.txt", "mimeType": "text/plain", "text": "note"}
    assert fail.record.decision == "error" and fail.record.error_type == "MCPToolError"
    assert fail.output["type"] == "MCPToolError" and "'fail'" in fail.output["error"]
    assert big.record.error_type == "MCPResultTooLargeError" and "max_result_bytes=10000" in big.output["error"]


async def test_is_error_raises_the_tool_error_when_errors_are_not_suppressed(http_app):
    async with MCPServer(url=http_app.url, name="app") as server:
        branch = Branch(tools=await server.tools())
        with pytest.raises(MCPToolError) as info:
            await branch.act([request("fail", message="no")], suppress_errors=False)
    assert info.value.server == "app" and info.value.tool == "fail"


async def test_prefixes_keep_two_servers_apart_and_a_collision_fails_at_registration(http_app):
    async with MCPServer(url=http_app.url) as one, MCPServer(url=http_app.url, prefix="two_") as two:
        first, second = await one.tools(), await two.tools()
        assert {t.name for t in second} == {"two_" + t.name for t in first}
        branch = Branch(tools=first + second)
        assert "two_echo" in branch.acts and "echo" in branch.acts
        with pytest.raises(ValueError, match="'echo' is already registered"):
            branch.register_tools(await one.tools())
        (out,) = await branch.act([request("two_echo", text="x")])
        assert out.output == {"result": "x"}


async def test_server_requests_are_refused_unless_opted_in_over_stdio():
    async def sampling(context, params):
        from mcp.types import CreateMessageResult, TextContent
        return CreateMessageResult(role="assistant", content=TextContent(text="yes"), model="local")

    async with MCPServer(APP, cwd=ROOT, name="app") as refusing:  # the SDK-built server
        (refused,) = await Branch(tools=await refusing.tools()).act([request("sample")])
    async with MCPServer(RAW, name="raw") as raw_refusing, MCPServer(RAW, sampling=sampling) as allowing:
        (raw_refused,) = await Branch(tools=await raw_refusing.tools()).act([request("sample")])
        (allowed,) = await Branch(tools=await allowing.tools()).act([request("sample")])
    assert "lionops refuses sampling for MCP server 'app'" in refused.output["result"]
    assert raw_refused.output.startswith("refused: lionops refuses sampling for MCP server 'raw'")
    assert allowed.output == "yes"


async def test_reference_filesystem_server_write_denied_read_allowed(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    async with MCPServer([reference_server("filesystem"), str(tmp_path)], name="fs") as fs:
        tools = {t.name: t for t in await fs.tools()}
        assert tools["write_file"].annotations.destructive
        assert tools["read_text_file"].annotations.read_only
        branch = Branch(tools=list(tools.values()))
        branch.gate(deny_destructive)
        write, read = await branch.act([
            request("write_file", path=str(tmp_path / "notes.txt"), content="gone"),
            request("read_text_file", path=str(tmp_path / "notes.txt")),
        ], strategy="sequential")
    assert write.record.decision == "denied"
    assert read.record.decision == "allowed" and "keep me" in str(read.output)
    assert (tmp_path / "notes.txt").read_text() == "keep me"


async def test_reference_everything_server_echo_image_and_invalid_arguments():
    async with MCPServer([reference_server("everything")], prefix="ev_") as ev:
        tools = await ev.tools()
        branch = Branch(tools=tools)
        echo, tiny, sums, bad = await branch.act([
            request("ev_echo", message="hello"), request("ev_get_tiny_image"),
            request("ev_get_sum", a=2, b=40), request("ev_get_sum", a="2"),
        ])
    assert "hello" in str(echo.output)
    assert any(isinstance(p, dict) and p.get("type") == "image" for p in tiny.output)
    assert "42" in str(sums.output)
    assert bad.record.decision == "rejected" and isinstance(bad.record.reason, str)
    # sampling, elicitation and roots are not advertised: the server offers no tool that needs them
    assert not {"ev_trigger_sampling_request", "ev_trigger_elicitation_request", "ev_get_roots_list"} & {
        t.name for t in tools}


async def test_reference_everything_server_samples_through_an_opted_in_callback():
    async def sampling(context, params):
        from mcp.types import CreateMessageResult, TextContent
        return CreateMessageResult(role="assistant", content=TextContent(text="sampled-yes"), model="local")

    async with MCPServer([reference_server("everything")], sampling=sampling) as ev:
        (sampled,) = await Branch(tools=await ev.tools()).act([request("trigger_sampling_request", prompt="hi")])
    assert sampled.record.decision == "allowed" and "sampled-yes" in str(sampled.output)
