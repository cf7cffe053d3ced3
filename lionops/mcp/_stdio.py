"""The stdio transport of ``MCPServer(command=[...])``: the SDK's, with each
frame bounded while it is read.

The SDK's own stdio client keeps reading a line until its newline comes, so a
server that writes one endless line holds the client's memory (and its time:
the pending text is copied on every chunk). This transport reads the same
newline-delimited JSON-RPC, spawns and stops the server the way the SDK does
(its own process group; on exit: stdin closed, a grace period, then the whole
process tree terminated), and stops reading a frame at ``max_frame_bytes``:
the session is handed a :class:`FrameTooLargeError` (the calls in flight fail
with it) and the rest of that frame is skipped up to its newline, so the
connection stays usable. On Windows the SDK's own client runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp.types as mt
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.shared.message import SessionMessage

#: seconds the server has to exit by itself once its stdin is closed, then to die once terminated
STOP_GRACE = 2.0
#: seconds the writer has to hand over what it accepted before stdin closes
FLUSH_GRACE = 0.5


class FrameTooLargeError(Exception):
    """A frame from the server grew past the transport's bound before its newline came."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a frame longer than {limit} bytes (its rest was skipped)")
        self.limit = limit


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # the session hands it to the message handler: the server's fault
        return exc


async def _frames(stdout: anyio.abc.ByteReceiveStream, limit: int) -> AsyncIterator[SessionMessage | Exception]:
    """The frames on ``stdout``, each at most ``limit`` bytes (its line break,
    LF or CRLF, not counted); a longer one is a :class:`FrameTooLargeError`
    and is skipped up to its newline."""
    pending = bytearray()
    scanned = 0  # pending[:scanned] holds no newline
    skipping = False
    async for chunk in stdout:
        pending += chunk
        while (end := pending.find(b"\n", scanned)) != -1:
            line = bytes(pending[:end])
            del pending[:end + 1]
            scanned = 0
            if skipping:
                skipping = False
            elif end - line.endswith(b"\r") > limit:  # its newline came in the same read as the bytes over the bound
                yield FrameTooLargeError(limit)
            elif line.strip():
                yield _parse(line)
        scanned = len(pending)
        # a CR at the end may be the first half of a CRLF line break, which is not part of the frame
        if len(pending) - pending.endswith(b"\r") > limit:
            if not skipping:
                skipping = True
                yield FrameTooLargeError(limit)
            pending.clear()
            scanned = 0


async def _stop(process: anyio.abc.Process) -> None:
    """Stop the server as the protocol asks: stdin closed, then (after a grace
    period) the whole process tree terminated; every wait is bounded."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()  # type: ignore[union-attr]
    with anyio.move_on_after(STOP_GRACE):
        while process.returncode is None:
            await anyio.sleep(0.01)
    if process.returncode is None:
        await terminate_posix_process_tree(process, STOP_GRACE)
        with anyio.move_on_after(STOP_GRACE):
            while process.returncode is None:
                await anyio.sleep(0.01)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()  # type: ignore[union-attr]


@asynccontextmanager
async def bounded_stdio_client(params: StdioServerParameters, errlog: TextIO,
                               max_frame_bytes: int) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server of ``params`` and yield the session's (read, write) streams."""
    if sys.platform == "win32":  # pragma: no cover - the SDK's client (a Job Object, its own stop)
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    process = await anyio.open_process(
        [params.command, *params.args], env=get_default_environment() | (params.env or {}),
        stderr=errlog, cwd=None if params.cwd is None else os.fspath(params.cwd), start_new_session=True)
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        async with to_session:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
                async for frame in _frames(process.stdout, max_frame_bytes):
                    await to_session.send(frame)
        # the session is gone: what the server still writes is read and dropped, so that a
        # server flushing its output on exit is not held on a full pipe
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            async for _ in process.stdout:
                pass

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server stopped reading: the session sees the end
        finally:
            written.set()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read, write
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled caller must not leave the server running
                read.close()
                write.close()
                with anyio.move_on_after(FLUSH_GRACE):
                    await written.wait()
                await _stop(process)
                for stream in (read, write, to_session, from_session):
                    await stream.aclose()
            group.cancel_scope.cancel()
