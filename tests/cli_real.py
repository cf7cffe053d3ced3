"""Shared parts of the real-CLI tests: the npm install (or the reason it is skipped).

Each CLI is installed by its Makefile target (``make claude-code``, ``make
codex``, ``make gemini-cli``; ``make test`` runs them first) into the
ignored ``.cache/``. A test is skipped, saying why, only when the npm
registry cannot be reached; when the registry answers and the binary is
still missing after the install, the test fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: name -> (Makefile target, binary path, environment override of the path).
CLIS = {
    "claude": ("claude-code", ".cache/claude-code/node_modules/.bin/claude", "LIONOPS_CLAUDE_CODE_BIN"),
    "codex": ("codex", ".cache/codex/node_modules/.bin/codex", "LIONOPS_CODEX_BIN"),
    "gemini": ("gemini-cli", ".cache/gemini-cli/node_modules/.bin/gemini", "LIONOPS_GEMINI_CLI_BIN"),
}


def _tail(text: str, limit: int = 400) -> str:
    return text.strip()[-limit:]


def bin_path(name: str) -> Path:
    _, path, env = CLIS[name]
    return Path(os.environ.get(env, ROOT / path))


def _install(target: str) -> str:
    """Try ``make <target>``; return what it printed."""
    if shutil.which("make") is None:
        return "make is not installed"
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), target], capture_output=True, text=True,
                          timeout=600, check=False)
    return _tail(proc.stdout + proc.stderr)


def _registry_reachable() -> tuple[bool, str]:
    if shutil.which("npm") is None:
        return False, "npm is not installed"
    try:
        proc = subprocess.run(["npm", "ping", "--fetch-retries=0", "--fetch-timeout=15000"],
                              capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return False, "npm ping timed out after 30 s"
    return proc.returncode == 0, _tail(proc.stdout + proc.stderr)


def installed(name: str) -> Path:
    """The CLI's binary, installed when missing; skips only when the registry is unreachable."""
    target = CLIS[name][0]
    path = bin_path(name)
    if not path.exists():
        reachable, why = _registry_reachable()
        if not reachable:
            pytest.skip(f"the npm registry cannot be reached, so {name} is not installed: {why}")
        printed = _install(target)
        if not path.exists():
            pytest.fail(f"the npm registry answers but {path} is missing after `make {target}`: {printed}")
    return path


def base_env(home: Path) -> dict[str, str]:
    """A minimal environment for a CLI with a private HOME."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
