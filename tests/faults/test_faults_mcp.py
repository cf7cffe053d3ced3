"""Bad MCP servers and changed definitions: typed errors naming the server,
no child process left behind, the server never asked for what was refused.
The server is ``tests/mcp_raw_server.py`` (standard library only: it starts at once)."""

from __future__ import annotations

import json
import os
import socket

import anyio
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import OAuthClientMetadata, OAuthToken

from lionops import Branch
from lionops.errors import ConfigurationError, LionopsError
from lionops.mcp import (
    MCPDefinitionChangedError,
    MCPError,
    MCPResultTooLargeError,
    MCPServer,
    MCPServerError,
    MCPTimeoutError,
    ToolPins,
    definition_hash,
)
from tests.mcp_support import RAW, serve_http

pytestmark = pytest.mark.anyio


def call(name: str) -> dict[str, object]:
    return {"function": name, "arguments": {}}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not a leaked child of ours once reaped
        return f.read().split()[2] == "Z"


@pytest.mark.parametrize(("tool", "error", "text"), [
    ("crash", MCPServerError, "the server exited?"),
    ("partial", MCPServerError, "the server exited?"),
    ("garbage", MCPServerError, "a frame that is not JSON-RPC"),
    ("malformed", MCPServerError, "malformed result"),
    ("huge", MCPResultTooLargeError, "more than max_result_bytes=100000"),
    ("flood", MCPResultTooLargeError, "a frame longer than 665536 bytes"),
    ("hang", MCPTimeoutError, "did not return within 0.5s"),
])
async def test_a_bad_server_is_a_typed_error_naming_it_and_leaves_no_child(tool, error, text, tmp_path):
    pid_file = tmp_path / "pid"
    async with MCPServer(RAW, env={"RAW_PID": str(pid_file)}, name="faulty", call_timeout=0.5,
                         max_result_bytes=100_000) as server:
        branch = Branch(tools=await server.tools())
        (ok,) = await branch.act([call("ok")])
        (bad,) = await branch.act([call(tool)])
        with pytest.raises(error) as info:
            await branch.act([call(tool)], suppress_errors=False)
    assert ok.output == "fine"
    assert bad.record.decision in ("error", "timed_out") and text in bad.output["error"]
    assert isinstance(info.value, LionopsError) and info.value.server == "faulty"
    assert "MCP server 'faulty'" in str(info.value) and text in str(info.value)
    assert gone(int(pid_file.read_text()))


async def test_a_frame_over_the_bound_is_skipped_and_the_connection_goes_on():
    async with MCPServer(RAW, name="flooding", max_result_bytes=100_000) as server:
        assert server.max_frame_bytes == 6 * 100_000 + 64 * 1024
        branch = Branch(tools=await server.tools())
        (before,) = await branch.act([call("ok")])
        (flood,) = await branch.act([call("flood")])
        (after,) = await branch.act([call("ok")])
    assert before.output == after.output == "fine"
    assert flood.record.decision == "error" and "a frame longer than 665536 bytes" in flood.output["error"]


async def test_a_listing_page_over_the_bound_is_a_typed_error():
    async with MCPServer(RAW, env={"RAW_PAGES": "flood"}, name="flooding", max_result_bytes=100_000) as server:
        with pytest.raises(MCPResultTooLargeError, match="tools/list: the server wrote a frame longer than"):
            await server.tools()


@pytest.mark.parametrize("command", [[*RAW, "exit"], ["/nonexistent/mcp-server"]])
async def test_a_server_that_cannot_start_is_a_typed_error(command):
    with pytest.raises(MCPServerError, match="could not start") as info:
        async with MCPServer(command, name="broken", start_timeout=20):
            pass
    assert info.value.server == "broken"
    if command[-1] == "exit":
        assert "raw-faults: cannot start: no configuration" in str(info.value)  # its stderr, named


async def test_an_http_endpoint_that_is_not_there_is_a_typed_error_without_its_headers():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    token = "Bearer tok-abcdef123456"
    with pytest.raises(MCPServerError, match="could not start") as info:
        async with MCPServer(url=f"http://127.0.0.1:{port}/mcp", headers={"Authorization": token},
                             name="remote", start_timeout=10):
            pass
    assert info.value.server == "remote" and token not in str(info.value)


async def test_credentials_in_an_http_url_never_reach_its_name_repr_or_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    secrets = ["pw-abcdef123456", "qs-abcdef123456", "key-abcdef123456"]
    server = MCPServer(url=f"http://user:{secrets[0]}@127.0.0.1:{port}/mcp?access_token={secrets[1]}"
                           f"&key={secrets[2]}", start_timeout=10)
    with pytest.raises(MCPServerError, match="could not start") as info:
        async with server:
            pass
    shown = [server.name, repr(server), str(server.url), str(info.value), info.value.server]
    assert not [text for text in shown for secret in secrets if secret in text], shown
    assert f"127.0.0.1:{port}/mcp" in server.name


class _NoStorage(TokenStorage):
    async def get_tokens(self):
        return None

    async def set_tokens(self, tokens):
        pass

    async def get_client_info(self):
        return None

    async def set_client_info(self, client_info):
        pass


class _LeakyProvider(OAuthClientProvider):
    """An OAuth provider whose failure quotes the tokens it holds."""

    async def async_auth_flow(self, request):
        tokens = self.context.current_tokens
        raise RuntimeError(f"refresh failed: access {tokens.access_token} refresh {tokens.refresh_token}")
        yield request  # pragma: no cover (makes this a generator, as the base class's flow is)


async def test_an_oauth_providers_tokens_never_reach_an_error_message():
    access, refresh = "at-abcdef123456", "rt-abcdef123456"
    provider = _LeakyProvider(server_url="http://127.0.0.1:1/mcp", storage=_NoStorage(),
                              client_metadata=OAuthClientMetadata(redirect_uris=["http://localhost:3000/cb"]))
    provider.context.current_tokens = OAuthToken(access_token=access, refresh_token=refresh)
    with pytest.raises(MCPServerError, match="could not start") as info:
        async with MCPServer(url="http://127.0.0.1:1/mcp", auth=provider, name="oauth", start_timeout=10):
            pass
    chain, error = [], info.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    text = " | ".join(chain)
    assert "refresh failed" in text and access not in text and refresh not in text, text


@pytest.mark.parametrize(("pages", "error", "text"), [
    ("loop", MCPServerError, "cursor 'again' again"),
    ("endless", MCPResultTooLargeError, "max_result_bytes=20000"),
])
async def test_a_listing_that_never_ends_is_a_typed_error(pages, error, text):
    server = MCPServer(RAW, env={"RAW_PAGES": pages}, name="raw", max_result_bytes=20_000, call_timeout=30)
    async with server:
        with pytest.raises(error, match=text) as info:
            await server.tools()
        assert info.value.server == "raw"


async def test_an_http_server_that_dies_mid_session_is_a_tool_error_in_the_record(tmp_path):
    with serve_http(tmp_path) as app:
        async with MCPServer(url=app.url, name="remote") as server:
            branch = Branch(tools=await server.tools())
            app.process.kill()
            app.process.wait()
            (echo,) = await branch.act([{"function": "echo", "arguments": {"text": "x"}}])
            with pytest.raises(MCPServerError) as info:
                await branch.act([{"function": "echo", "arguments": {"text": "x"}}], suppress_errors=False)
    assert echo.record.decision == "error" and echo.record.error_type == "MCPServerError"
    assert "MCP server 'remote'" in echo.output["error"] and info.value.server == "remote"


async def test_env_values_never_reach_an_error_message():
    secret = "tok-9f8e7d6c5b4a"
    with pytest.raises(MCPServerError) as info:
        async with MCPServer([*RAW, "exit"], env={"RAW_TOKEN": secret}, name="leaky"):
            pass
    text = str(info.value)
    assert "cannot start: no configuration (token [REDACTED])" in text and secret not in text
    assert info.value.__cause__ is None and info.value.__suppress_context__


async def test_a_cancelled_call_leaves_the_server_usable(tmp_path):
    async with MCPServer(RAW, call_timeout=30) as server:
        branch = Branch(tools=await server.tools())
        with anyio.move_on_after(0.3) as scope:
            await branch.act([call("hang")])
        assert scope.cancelled_caught
        (ok,) = await branch.act([call("ok")])
    assert ok.output == "fine"


async def test_a_changed_definition_is_refused_until_accepted(tmp_path):
    pins_file = tmp_path / "pins.json"
    async with MCPServer(RAW, name="raw") as server:
        tools = await server.tools()
        server.pins.save(pins_file)
    pins = ToolPins.load(pins_file)
    assert pins.get("raw", "ok") == tools[0].definition_hash == definition_hash(tools[0].definition)
    async with MCPServer(RAW, env={"RAW_VARIANT": "2"}, name="raw", pins=pins) as changed:
        with pytest.raises(MCPDefinitionChangedError) as info:
            await changed.tools()
        assert info.value.tools == ["ok"] and info.value.server == "raw"
        assert isinstance(info.value, MCPError) and isinstance(info.value, ValueError)
        accepted = await changed.tools(accept=["ok"])  # re-accepted: pinned anew
        assert "third party" in accepted[0].description
        assert await changed.tools() == accepted
    assert pins.get("raw", "ok") == accepted[0].definition_hash != tools[0].definition_hash


async def test_pins_that_are_not_pins_are_refused(tmp_path):
    path = tmp_path / "pins.json"
    path.write_text(json.dumps({"raw": ["not", "a", "mapping"]}))
    with pytest.raises(ConfigurationError, match="does not hold tool pins"):
        ToolPins.load(path)


@pytest.mark.parametrize(("kwargs", "text"), [
    ({}, "either command"),
    ({"command": ["x"], "url": "http://127.0.0.1:1/mcp"}, "either command"),
    ({"command": "python server.py"}, "non-empty list"),
    ({"command": ["x"], "call_timeout": 0}, "call_timeout must be positive"),
    ({"command": ["x"], "max_result_bytes": -1}, "max_result_bytes"),
    ({"command": ["x"], "prefix": "1x"}, "prefix"),
    ({"url": 42}, "url must be a string"),
    ({"url": "http://127.0.0.1:port/mcp"}, "port is no number"),
    ({"command": ["x"], "auth": httpx2.BasicAuth("user", "pw-abcdef123456")}, "auth= is for url=.*with command"),
    ({"url": "http://127.0.0.1:1/mcp", "auth": "Bearer tok-abcdef123456"}, "must be an httpx2.Auth.*got str$"),
])
def test_bad_configuration_is_refused_at_construction(kwargs, text):
    with pytest.raises(ConfigurationError, match=text):
        MCPServer(**kwargs)


async def _frames_of(chunks, limit):
    from lionops.mcp._stdio import _frames

    send, receive = anyio.create_memory_object_stream(len(chunks))
    for chunk in chunks:
        send.send_nowait(chunk)
    send.close()
    return [frame async for frame in _frames(receive, limit)]


@pytest.mark.parametrize("split", [None, 1, 7])
async def test_a_frame_over_the_bound_is_refused_however_its_bytes_arrive(split):
    from lionops.mcp._stdio import FrameTooLargeError

    ok = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).encode()
    limit = len(ok)
    over = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "x": ""}}).encode()
    assert len(over) > limit
    data = ok + b"\n" + over + b"\n" + ok + b"\n"
    chunks = [data] if split is None else [data[i:i + split] for i in range(0, len(data), split)]
    frames = await _frames_of(chunks, limit)
    assert [type(f).__name__ for f in frames] == ["SessionMessage", "FrameTooLargeError", "SessionMessage"]
    assert isinstance(frames[1], FrameTooLargeError) and frames[1].limit == limit


@pytest.mark.parametrize("split", [None, 1, 7, "cr"], ids=["one read", "bytewise", "by 7", "cr and lf apart"])
async def test_a_crlf_frame_is_bounded_as_its_lf_twin_however_its_bytes_arrive(split):
    """The line break is not part of the frame: a frame of exactly the bound
    ending in CRLF is read, as one ending in LF is; one byte more is refused."""
    from lionops.mcp._stdio import FrameTooLargeError

    ok = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).encode()
    limit = len(ok)
    over = ok[:-1] + b" }"  # one byte longer
    data = ok + b"\r\n" + over + b"\r\n" + ok + b"\r\n"
    if split == "cr":
        chunks = [ok + b"\r", b"\n" + over + b"\r", b"\n" + ok + b"\r", b"\n"]
    elif split is None:
        chunks = [data]
    else:
        chunks = [data[i:i + split] for i in range(0, len(data), split)]
    frames = await _frames_of(chunks, limit)
    assert [type(f).__name__ for f in frames] == ["SessionMessage", "FrameTooLargeError", "SessionMessage"]
    assert isinstance(frames[1], FrameTooLargeError)
