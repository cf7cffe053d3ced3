"""A connection to one MCP server (stdio or streamable HTTP) as an async context manager."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp.types as mt
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

from .._secrets import scrub_url, url_secrets
from .._text import summarize
from ..errors import ConfigurationError
from ._stdio import FrameTooLargeError, bounded_stdio_client
from .errors import (
    MCPDefinitionChangedError,
    MCPNameError,
    MCPResultTooLargeError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
)
from .pins import ToolPins, definition_hash
from .tool import MCPTool, ToolAnnotations, _never

__all__ = ["MCPServer"]

logger = logging.getLogger("lionops.mcp")

#: Defaults of the bounds (seconds, bytes).
DEFAULT_START_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_MAX_RESULT_BYTES = 1_000_000
_STDERR_TAIL = 400


def _flat(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the transports' task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _what(tool: MCPTool) -> str:
    """How errors name a call of ``tool``."""
    return f"tools/call {tool.remote_name!r}"


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name, flags=re.ASCII)



def _auth_secrets(auth: Any) -> list[str]:
    """The tokens and client secret an OAuth provider of the SDK holds now (its ``context``),
    so that an error quoting one of them is masked; nothing for any other ``httpx2.Auth``."""
    context = getattr(auth, "context", None)
    tokens = getattr(context, "current_tokens", None)
    info = getattr(context, "client_info", None)
    found = (getattr(tokens, "access_token", None), getattr(tokens, "refresh_token", None),
             getattr(info, "client_secret", None))
    return [v for v in found if isinstance(v, str)]

class MCPServer:
    """One MCP server: a child process spoken to over stdio (``command``) or a
    streamable HTTP endpoint (``url``).

    Args:
        command: the program and its arguments (stdio); ``env`` is laid over
            the SDK's default environment, ``cwd`` is its working folder.
        url: a streamable HTTP endpoint; ``headers`` go with every request.
        auth: an ``httpx2.Auth`` for the HTTP endpoint, such as the SDK's
            ``mcp.client.auth.OAuthClientProvider`` (OAuth 2.1 with discovery,
            registration and refresh) or ``ClientCredentialsOAuthProvider``;
            it signs every request, the first included.
        name: the name records, errors and pins use (default: the name the
            server gives itself).
        prefix: prepended to every tool name the model sees.
        start_timeout: seconds to start and initialize the server.
        call_timeout: seconds one tool call may take.
        max_result_bytes: largest result (and HTTP event) accepted.
        pins: the definition pins to check the tools against (default: pins of
            this server's own, first listing pinned).
        sampling, elicitation, list_roots: callbacks (the SDK's signatures)
            answering the server's own requests; without one, such a request is
            refused, naming this server.

    Use it as ``async with MCPServer(...) as server: tools = await server.tools()``.
    Leaving the block stops the child process (or closes the HTTP session).
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        name: str | None = None,
        prefix: str = "",
        start_timeout: float = DEFAULT_START_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        pins: ToolPins | None = None,
        sampling: Any = None,
        elicitation: Any = None,
        list_roots: Any = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ConfigurationError("MCPServer needs either command=[...] (stdio) or url=... (streamable HTTP)")
        if command is not None and (isinstance(command, str) or not command or not all(
                isinstance(c, str) for c in command)):
            raise ConfigurationError("MCPServer command must be a non-empty list of strings")
        if url is not None and not isinstance(url, str):
            raise ConfigurationError(f"MCPServer url must be a string, got {type(url).__name__}")
        if auth is not None and (url is None or not isinstance(auth, httpx2.Auth)):
            raise ConfigurationError(
                "MCPServer auth= is for url=... (streamable HTTP) and must be an httpx2.Auth, such as "
                f"mcp.client.auth.OAuthClientProvider; got {type(auth).__name__}"
                + ("" if url is not None else " with command=[...]"))
        if prefix and not (prefix + "x").isidentifier():
            raise ConfigurationError(f"MCPServer prefix must start an identifier, got {prefix!r}")
        for label, value in (("start_timeout", start_timeout), ("call_timeout", call_timeout)):
            if value is not None and not value > 0:
                raise ConfigurationError(f"MCPServer {label} must be positive, got {value!r}")
        if not isinstance(max_result_bytes, int) or max_result_bytes <= 0:
            raise ConfigurationError(f"MCPServer max_result_bytes must be a positive int, got {max_result_bytes!r}")
        self.command = list(command) if command is not None else None
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._url = url  # as given: its user info and query may hold credentials
        try:
            #: the endpoint as shown (in the name, repr and errors): no user info, no query
            self.url = scrub_url(url) if url is not None else None
        except ValueError:  # a port that is no number: nothing of it is shown
            raise ConfigurationError("MCPServer url is not a URL (its port is no number)") from None
        self._headers = dict(headers) if headers is not None else None
        self._auth = auth
        self._given_name = name
        self.prefix = prefix
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self.max_result_bytes = max_result_bytes
        #: the longest frame read from a stdio server: a result's JSON text may take up to six bytes
        #: a character (``\\uXXXX``), and the envelope some more
        self.max_frame_bytes = 6 * max_result_bytes + 64 * 1024
        self.pins = pins if pins is not None else ToolPins()
        self._callbacks = (sampling, elicitation, list_roots)
        self._group: anyio.abc.TaskGroup | None = None
        self._stop: anyio.Event | None = None  # made on entry, in the caller's event loop
        self._session: ClientSession | None = None
        self._stderr: Any = None
        self._fault: BaseException | None = None  # a frame the transport could not read
        self._broken: Exception | None = None  # the transport's own failure
        self._calls: set[anyio.CancelScope] = set()
        self._too_large: set[anyio.CancelScope] = set()  # calls cut by a frame over the transport's bound
        #: remote tool name -> hash of the definition this connection listed last;
        #: None until it lists, and again once the server says its tools changed
        self._listed: dict[str, str] | None = None
        self.server_info: mt.Implementation | None = None

    # ------------------------------------------------------------------ naming

    @property
    def name(self) -> str:
        """The given name, else the server's own once started, else the command's or URL's."""
        if self._given_name:
            return self._given_name
        if self.server_info is not None and self.server_info.name:
            return self.server_info.name
        return os.path.basename(self.command[0]) if self.command else str(self.url)

    @property
    def running(self) -> bool:
        """Whether the connection is open (entered and not yet left)."""
        return self._group is not None

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "streamable-http"

    def __repr__(self) -> str:
        where = f"command={self.command[0]!r}" if self.command else f"url={self.url!r}"
        state = "running" if self._session is not None else "stopped"
        return f"MCPServer(name={self.name!r}, {where}, {state})"

    def _secrets(self) -> list[str]:
        values = list((self.env or {}).values()) + list((self._headers or {}).values())
        values += url_secrets(self._url) if self._url is not None else []
        values += _auth_secrets(self._auth)
        return [v for v in values if isinstance(v, str) and len(v) >= 4]

    def _scrub(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, "[REDACTED]")
        return text

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - _STDERR_TAIL))
            tail = self._stderr.read().strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {self._scrub(tail)!r}" if tail else ""

    def _error(self, message: str, kind: type[MCPServerError] = MCPServerError) -> MCPServerError:
        return kind(self.name, self._scrub(message))

    # --------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> MCPServer:
        if self._group is not None:
            raise ConfigurationError(f"MCP server {self.name!r} is already started")
        self._fault = self._broken = None
        self._listed = None
        self._stop = anyio.Event()
        if self.command is not None:
            self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        group = anyio.create_task_group()
        await group.__aenter__()
        try:
            failure = await group.start(self._serve)
        except BaseException:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
            self._close_stderr()
            raise
        if failure is not None:
            await group.__aexit__(None, None, None)
            self._close_stderr()
            raise failure from None
        self._group = group
        return self

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[MCPServerError | None]) -> None:
        """Own the transport and the session in a task of their own, so a transport
        that fails cancels only this task, never the caller's; its failure is
        kept (``_broken``) and ends every call in flight."""
        started = False
        try:
            async with AsyncExitStack() as stack:
                await self._start(stack)
                started = True
                task_status.started(None)
                assert self._stop is not None
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - every failure of the server is its typed error
            self._session = None
            if not started:
                task_status.started(await self._start_failure(exc))
                return
            self._broken = exc
            for scope in list(self._calls):
                scope.cancel()
            logger.debug("MCP server %r: the connection failed: %s", self.name, _flat(exc))
        finally:
            self._session = None

    async def _start_failure(self, exc: Exception) -> MCPServerError:
        leaf = _flat(exc)
        if isinstance(leaf, MCPServerError):
            return leaf
        if isinstance(leaf, TimeoutError):
            error = self._error(f"did not start within {self.start_timeout}s", MCPTimeoutError)
        else:
            detail = "the server exited" if isinstance(leaf, SDKError) else type(leaf).__name__
            error = self._error(f"could not start: {detail}: {summarize(str(leaf), 300)}")
        error.args = (error.args[0] + self._stderr_tail(),)
        return error

    async def _start(self, stack: AsyncExitStack) -> None:
        if self.command is not None:
            params = StdioServerParameters(command=self.command[0], args=self.command[1:], env=self.env,
                                           cwd=None if self.cwd is None else os.fspath(self.cwd))
            streams = await stack.enter_async_context(
                bounded_stdio_client(params, self._stderr, max_frame_bytes=self.max_frame_bytes))
        else:
            assert self._url is not None
            client = create_mcp_http_client(
                headers=self._headers,
                auth=self._auth,
                # no read timeout: the SDK keeps a stream open for the server's messages, and each
                # call is bounded by call_timeout
                timeout=httpx2.Timeout(self.start_timeout, read=None))
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(streamable_http_client(
                self._url, http_client=client, max_sse_event_size=self.max_result_bytes))
        read, write = streams[0], streams[1]
        sampling, elicitation, list_roots = self._callbacks
        refused = frozenset(kind for kind, callback in zip(("sampling", "elicitation", "roots"), self._callbacks,
                                                           strict=True) if callback is None)
        session = _Session(
            refused, self._tools_changed, read, write,
            sampling_callback=sampling or self._refuse("sampling (sampling=...)"),
            elicitation_callback=elicitation or self._refuse("elicitation (elicitation=...)"),
            list_roots_callback=list_roots or self._refuse_roots(),
            message_handler=self._on_message,
        )
        await stack.enter_async_context(session)
        with anyio.fail_after(self.start_timeout):
            result = await session.initialize()
        self.server_info = result.server_info
        self._session = session

    async def __aexit__(self, *exc: object) -> None:
        group, self._group = self._group, None
        if group is None:
            return
        self._session = None
        for scope in list(self._calls):
            scope.cancel()
        if self._stop is not None:
            self._stop.set()
        try:
            await group.__aexit__(None, None, None)  # the transport stops the child (shielded in the SDK)
        finally:
            self._close_stderr()

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -------------------------------------------------- the server's requests

    def _refuse(self, what: str) -> Any:
        async def refuse(context: ClientRequestContext, params: Any) -> mt.ErrorData:
            logger.warning("MCP server %r asked for %s; refused", self.name, what.split(" ")[0])
            return mt.ErrorData(code=mt.INVALID_REQUEST, message=(
                f"lionops refuses {what.split(' ')[0]} for MCP server {self.name!r}: "
                f"the caller did not opt in (MCPServer {what.split(' ')[1].strip('()')})"))
        return refuse

    def _refuse_roots(self) -> Any:
        inner = self._refuse("roots (list_roots=...)")

        async def refuse(context: ClientRequestContext) -> mt.ErrorData:
            return await inner(context, None)  # type: ignore[no-any-return]
        return refuse

    def _tools_changed(self) -> None:
        """The server said its tools changed: the next call of each tool checks its definition again."""
        self._listed = None

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._tools_changed()
        elif isinstance(message, FrameTooLargeError):  # the connection goes on; the calls in flight fail
            self._too_large.update(self._calls)
            for scope in list(self._calls):
                scope.cancel()
        elif isinstance(message, Exception):  # a frame the transport could not read
            self._fault = message
            for scope in list(self._calls):
                scope.cancel()
        await anyio.lowlevel.checkpoint()

    # ------------------------------------------------------------------ tools

    async def list_definitions(self) -> list[dict[str, Any]]:
        """The tools the server lists now, as JSON objects (every page)."""
        session = self._running()
        definitions: list[dict[str, Any]] = []
        cursor: str | None = None
        cursors: set[str] = set()
        size = 0
        scope = anyio.CancelScope(deadline=anyio.current_time() + (self.call_timeout or DEFAULT_CALL_TIMEOUT))
        self._calls.add(scope)
        try:
            with scope:
                while True:
                    params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
                    definitions += dumped
                    # the listing is one result: bounded like one (a server may mint cursors forever)
                    size += len(json.dumps(dumped, ensure_ascii=False).encode())
                    if size > self.max_result_bytes:
                        raise self._error(f"tools/list: the listing has {size} bytes so far, more than "
                                          f"max_result_bytes={self.max_result_bytes}", MCPResultTooLargeError)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                    if cursor in cursors:
                        raise self._error(f"tools/list: the server gives the cursor {summarize(cursor, 60)!r} "
                                          f"again (its pages would never end)")
                    cursors.add(cursor)
        except Exception as exc:  # noqa: BLE001 - every failure of the server is its typed error
            raise self._failure(exc, "tools/list") from None
        finally:
            self._calls.discard(scope)
        if scope.cancel_called:
            raise self._cut(scope, "tools/list")
        listed: dict[str, str] = {}
        for definition in definitions:
            remote = definition.get("name")
            if isinstance(remote, str):
                listed[remote] = definition_hash(definition)
        self._listed = listed
        return definitions

    async def _check_definition(self, tool: MCPTool) -> None:
        """Refuse ``tool`` when this connection's listing no longer has its pinned
        definition: listed anew first if the connection has not listed yet (a worker's
        own connection) or the server said its tools changed."""
        listed = self._listed
        if listed is None:
            await self.list_definitions()
            listed = self._listed or {}
        if listed.get(tool.remote_name) != tool.definition_hash:
            raise MCPDefinitionChangedError(self.name, [tool.remote_name])

    async def tools(self, *, accept: Sequence[str] = ()) -> list[MCPTool]:
        """The server's tools as :class:`MCPTool`s, checked against the pins.

        A tool seen for the first time is pinned; ``accept`` names tools whose
        changed definition is accepted (pinned anew).

        Raises:
            MCPDefinitionChangedError: a tool's definition differs from its pin.
            MCPNameError: two tools get the same name, or a name is empty.
            MCPServerError: the server failed to list its tools.
        """
        definitions = await self.list_definitions()
        server = self.name
        changed = []
        built: dict[str, MCPTool] = {}
        for definition in definitions:
            remote = definition.get("name")
            if not isinstance(remote, str) or not remote:
                raise MCPNameError(server, f"lists a tool without a name: {summarize(definition, 120)}")
            digest = definition_hash(definition)
            pinned = self.pins.get(server, remote)
            if pinned is None or remote in accept:
                self.pins.pin(server, remote, digest)
            elif pinned != digest:
                changed.append(remote)
                continue
            name = self.prefix + _identifier(remote)
            if not name.isidentifier():
                name = "_" + name
            if name in built:
                raise MCPNameError(server, f"tools {built[name].remote_name!r} and {remote!r} both map to {name!r}")
            built[name] = MCPTool(
                _never, name=name, server=server, remote_name=remote, definition=definition,
                annotations=ToolAnnotations.of(definition.get("annotations")), definition_hash=digest,
                connection=self)
        if changed:
            raise MCPDefinitionChangedError(server, changed)
        return list(built.values())

    def _running(self) -> ClientSession:
        if self._session is None:
            failed = self._fault or self._broken
            if failed is not None and self._group is not None:  # the transport failed earlier
                raise self._failure(failed, "the connection")
            raise self._error("is not running (enter it with `async with` first)")
        return self._session

    def _failure(self, exc: BaseException, what: str) -> MCPServerError:
        leaf = _flat(exc)
        if isinstance(leaf, MCPServerError):
            return leaf
        if self._fault is not None:
            return self._error(f"{what}: the server wrote a frame that is not JSON-RPC: "
                               f"{summarize(str(self._fault), 200)}")
        if isinstance(leaf, TimeoutError):
            return self._error(f"{what} did not return within {self.call_timeout}s", MCPTimeoutError)
        if isinstance(leaf, ValidationError):
            return self._error(f"{what}: malformed result: {summarize(str(leaf), 300)}")
        if isinstance(leaf, SDKError):
            text = str(leaf)
            if "byte limit" in text:  # the HTTP transport's cap on one event (max_result_bytes)
                return self._error(f"{what}: the result is larger than max_result_bytes={self.max_result_bytes}"
                                   f" ({summarize(text, 200)})", MCPResultTooLargeError)
            hint = " (the server exited?)" if "closed" in text.lower() else ""
            return self._error(f"{what} failed{hint}: {summarize(text, 300)}{self._stderr_tail()}")
        if isinstance(leaf, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)):
            return self._error(f"{what}: the connection closed (the server exited?){self._stderr_tail()}")
        return self._error(f"{what} failed: {type(leaf).__name__}: {summarize(str(leaf), 300)}")

    async def call(self, tool: MCPTool, arguments: dict[str, Any]) -> Any:
        """Call ``tool`` with already validated and authorized ``arguments``
        (``act()`` does this; a caller never needs to).

        Before the call, the tool's definition is checked against the one it was
        built with (its pin) whenever this connection has not listed it yet or
        the server sent ``notifications/tools/list_changed`` since it last did.

        Raises:
            MCPDefinitionChangedError: the server lists a changed definition of
                the tool, or no longer lists it; the server is not called.
            MCPToolError: the tool answered with ``isError``.
            MCPServerError: the server failed (see the class), or is not running.
        """
        session = self._running()
        listed = self._listed
        if listed is None or listed.get(tool.remote_name) != tool.definition_hash:
            await self._check_definition(tool)
        # one scope: the call's deadline, and what a failing transport or the server's close cancels
        timeout = self.call_timeout
        scope = anyio.CancelScope(deadline=anyio.current_time() + timeout if timeout is not None else math.inf)
        self._calls.add(scope)
        result: mt.CallToolResult | None = None
        try:
            with scope:
                if self._fault is not None:
                    raise self._failure(self._fault, _what(tool))
                result = await session.call_tool(tool.remote_name, arguments)
        except Exception as exc:  # noqa: BLE001 - every failure of the server is its typed error
            raise self._failure(exc, _what(tool)) from None
        finally:
            self._calls.discard(scope)
        if result is None:  # cut by the deadline, a fault of the transport, or the server's close
            raise self._cut(scope, _what(tool))
        return self._output(tool, result)

    def _cut(self, scope: anyio.CancelScope, what: str) -> MCPServerError:
        """The error of a request whose scope was cancelled before its answer came."""
        if scope in self._too_large:
            self._too_large.discard(scope)
            return self._error(f"{what}: the server wrote a frame longer than {self.max_frame_bytes} bytes while "
                               f"this request waited (max_result_bytes={self.max_result_bytes}; the frame was "
                               f"skipped and the connection goes on)", MCPResultTooLargeError)
        failed = self._fault or self._broken
        if failed is not None:
            return self._failure(failed, what)
        if self._group is None:
            return self._error(f"{what}: the server was stopped during the call")
        return self._error(f"{what} did not return within {self.call_timeout or DEFAULT_CALL_TIMEOUT}s",
                           MCPTimeoutError)

    def _output(self, tool: MCPTool, result: mt.CallToolResult) -> Any:
        texts: list[str] | None = []
        for block in result.content:
            if texts is not None and type(block) is mt.TextContent:
                texts.append(block.text)
            else:
                texts = None
        structured = result.structured_content
        if texts is not None and structured is None and not result.is_error:  # the common case, measured cheaply
            size = sum(len(t) for t in texts)
            if size * 4 > self.max_result_bytes:  # up to 4 bytes a character: measure exactly
                size = sum(len(t.encode()) for t in texts)
        else:
            size = len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True),
                                  ensure_ascii=False).encode())
        if size > self.max_result_bytes:
            raise self._error(f"tools/call {tool.remote_name!r}: the result has {size} bytes, more than "
                              f"max_result_bytes={self.max_result_bytes}", MCPResultTooLargeError)
        if texts is not None and structured is None and not result.is_error:
            return "\n".join(texts)
        parts = [_part(block) for block in result.content]
        if result.is_error:
            text = " ".join(p["text"] for p in parts if p.get("type") == "text") or summarize(parts, 300)
            raise MCPToolError(self.name, tool.remote_name, self._scrub(summarize(text, 2000)))
        if structured is not None:
            return json.loads(json.dumps(structured))  # plain JSON, a copy of its own
        if all(p.get("type") == "text" for p in parts):
            return "\n".join(p["text"] for p in parts)
        return parts


class _Session(ClientSession):
    """The SDK's session, advertising none of the capabilities whose requests are
    refused (a refusing callback would otherwise advertise them), and telling
    ``tools_changed`` of a ``notifications/tools/list_changed`` in the order it
    arrives, before the response that follows it resolves a call (the message
    handler, which also tells it, runs in a task of its own)."""

    def __init__(self, refused: frozenset[str], tools_changed: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = refused
        self._on_tools_changed = tools_changed

    def _intercept_notification(self, method: str, params: Any) -> bool:
        if method == "notifications/tools/list_changed":
            self._on_tools_changed()
        return bool(super()._intercept_notification(method, params))

    def _build_capabilities(self, version: str) -> mt.ClientCapabilities:
        capabilities = super()._build_capabilities(version)
        return capabilities.model_copy(update=dict.fromkeys(self._refused))


def _part(block: Any) -> dict[str, Any]:
    """One content block as JSON: text, image and audio (base64 ``data``), a
    resource link, an embedded resource (``text`` or base64 ``blob``)."""
    part: dict[str, Any] = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    part.pop("_meta", None)
    part.pop("annotations", None)
    if part.get("type") in ("image", "audio") and isinstance(part.get("data"), str):
        try:
            base64.b64decode(part["data"], validate=True)
        except ValueError:
            part["data"] = None
    return part
