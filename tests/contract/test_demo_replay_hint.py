"""The demo's closing hint is a command that works as printed, typed in the
directory the demo ran in: the interpreter that ran it (``.venv/bin/python``
after ``make demo`` from a fresh clone), never a bare ``python`` that may
lack lionops' dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lionops.cli.demo import replay_command


def test_the_printed_replay_command_runs_as_printed(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LIONOPS_MODEL"))}
    env["PATH"] = "/usr/bin:/bin"  # a plain shell: the venv is not activated
    out = subprocess.run([sys.executable, "-m", "lionops.cli.demo"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    [line] = [ln for ln in out.stdout.splitlines() if "replay it offline: " in ln]
    command = line.split("replay it offline: ", 1)[1]
    assert not command.startswith("python ")
    replayed = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert "replayed: same path, tool calls and result as recorded" in replayed.stdout


def test_after_make_demo_the_hint_names_the_venv_interpreter_relative_to_the_clone(tmp_path, monkeypatch):
    venv_python = tmp_path / ".venv" / "bin" / "python"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(venv_python))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert replay_command(Path("out/demo-cassette.json")) == ".venv/bin/python -m lionops replay out/demo-cassette.json"


def test_an_activated_environment_gets_the_short_command(tmp_path, monkeypatch):
    bin_dir = tmp_path / "env" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert replay_command(Path("out/my demo.json")) == "python -m lionops replay 'out/my demo.json'"
