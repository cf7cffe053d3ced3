"""Servers for lionops.mcp's tests: the SDK-built ``tests/mcp_app.py`` over
streamable HTTP (one process per test module) or stdio, the bare fault
server ``tests/mcp_raw_server.py``, and the reference servers from npm
(``make mcp-servers`` installs them into ``.cache/mcp-servers``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NPM_BIN = ROOT / ".cache" / "mcp-servers" / "node_modules" / ".bin"
APP = [sys.executable, "-m", "tests.mcp_app"]
RAW = [sys.executable, str(ROOT / "tests" / "mcp_raw_server.py")]


def reference_server(name: str) -> str:
    """The path of an installed reference server (``filesystem``, ``everything``), or skip saying why."""
    path = NPM_BIN / f"mcp-server-{name}"
    if not path.exists():
        pytest.skip(f"{path} is not installed: `make mcp-servers` could not reach the npm registry")
    return str(path)


@dataclass
class HttpApp:
    url: str
    log: Path

    def calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpProcess(HttpApp):
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def http_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpApp]:
    """``tests/mcp_app.py`` over streamable HTTP on loopback, shared by a module's tests."""
    with serve_http(tmp_path_factory.mktemp("mcp")) as app:
        yield app


@contextmanager
def serve_http(folder: Path) -> Iterator[HttpProcess]:
    """``tests/mcp_app.py`` over streamable HTTP on a free loopback port, stopped on exit."""
    log = folder / "calls.log"
    port = _free_port()
    env = {**os.environ, "MCP_APP_LOG": str(log)}
    proc = subprocess.Popen([*APP, "http", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tests.mcp_app did not listen on {port} (exit {proc.poll()})") from None
                time.sleep(0.1)
        yield HttpProcess(f"http://127.0.0.1:{port}/mcp", log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
