"""lionops' own command line as installed: the ``lionops`` console script and ``python -m lionops``."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from lionops.cli.commands import main

#: The console script pip wrote beside the interpreter running the tests (``.venv/bin/lionops``).
SCRIPT = Path(sys.executable).parent / "lionops"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """A real process (a generous bound: a hang fails, never blocks CI)."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120)


def test_the_lionops_console_script_resolves_to_the_command_line():
    (script,) = entry_points(group="console_scripts", name="lionops")
    assert script.value == "lionops.cli.commands:main"
    assert script.load() is main


def test_the_installed_lionops_script_prints_its_help():
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: install the package (make setup)"
    proc = run(str(SCRIPT), "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: lionops ")
    for command in ("trace", "replay", "diagram"):
        assert command in proc.stdout


def test_python_dash_m_lionops_runs_the_same_command_line():
    proc = run(sys.executable, "-m", "lionops", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m lionops ")


def test_the_installed_script_exits_2_with_one_line_on_a_missing_file(tmp_path):
    proc = run(str(SCRIPT), "trace", "show", str(tmp_path / "missing.json"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot read ") and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
