"""Shared helpers of the CLI adapter tests: the fake CLI, fixtures, process checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lionops import iModel

HERE = Path(__file__).parent
FAKE_CLI = HERE / "fake_cli.py"
FIXTURES = HERE / "fixtures" / "cli"

#: The trace of a turn that ends without actions / with actions / with an adapter error.
NO_ACTIONS = ["prepare", "schema", "adapter", "validate", "gate", "returned"]
WITH_ACTIONS = ["prepare", "schema", "adapter", "validate", "gate", "act", "enrich", "returned"]
ADAPTER_FAILED = ["prepare", "schema", "adapter", "raised"]


def fixture(name: str) -> Path:
    return FIXTURES / name


def fake_model(session: str, *fake_args: str, provider: str = "claude_code", **options: Any) -> iModel:
    """An iModel whose CLI is ``fake_cli.py`` replaying ``fixtures/cli/<session>``."""
    command = [sys.executable, str(FAKE_CLI), "--session", str(fixture(session)), *fake_args]
    options.setdefault("model", "claude-sonnet-4-5")
    options.setdefault("timeout", 30)
    options.setdefault("kill_grace", 0.5)
    return iModel(provider=provider, cli_command=command, **options)


def read_pid(path: Path) -> int:
    return int(path.read_text())


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def recorded(path: Path) -> dict[str, Any]:
    """What the fake CLI recorded: ``{"argv": [...], "stdin": "..."}``."""
    return json.loads(path.read_text())


def roles(branch: Any) -> list[str]:
    return [m.role for m in branch.messages]
