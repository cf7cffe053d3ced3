"""Durability: ``Branch.dump_logs`` and ``Branch.snapshot`` write
atomically; a process killed with SIGKILL mid-write leaves the previous file
or a complete new one, never a torn one; a snapshot never fails on what a
branch holds."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lionops import Branch
from lionops.trace import annotate
from tests.helpers import ScriptedMiddle

#: A real child process that imports lionops once, then for each line it reads
#: forks a writer (a real process of its own, announced by "pid N") that grows
#: a branch and writes a snapshot and a log dump of several MB per generation,
#: forever, printing "gen N" after each pair. When the writer dies the parent
#: prints "exit CODE" (after everything the writer printed) and waits for the
#: next line.
WRITER = r"""
import os
import sys
from lionops import Branch

snap, logs = sys.argv[1], sys.argv[2]


def write_forever():
    print(f"pid {os.getpid()}", flush=True)
    b = Branch(name="writer")
    pad = "x" * 200_000
    for i in range(20):
        b.messages.add("user", {"generation": -1, "pad": pad})
    gen = 0
    while True:
        b.messages.add("user", {"generation": gen, "pad": pad})
        b.logs.log("generation", {"generation": gen, "pad": pad})
        b.snapshot(snap)
        b.dump_logs(logs)
        print(f"gen {gen}", flush=True)
        gen += 1


for _ in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            write_forever()
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)
"""

#: Kill points after a completed generation, in seconds: spread over one
#: generation (~40 ms: serialize, then write and fsync) so some land mid-write.
#: Each is used once; between two of them a kill lands the moment a temp file
#: is seen in the folder, which is mid-write unless the rename won the race.
KILL_DELAYS = (0.0, 0.008, 0.016, 0.024, 0.032, 0.040)
#: After the sweep, kill until this many kills landed mid-write (a temp file
#: was left) ...
MID_WRITE_KILLS = 2
#: ... or this many kills in all.
MAX_KILLS = 40
#: Seconds a writer may take to start, to finish a generation or to be seen
#: writing; generous for a loaded machine (the happy path waits milliseconds).
STEP_TIMEOUT_S = 60.0


def check_snapshot(path: Path) -> int:
    """A complete snapshot of generation g holds 20 + g + 1 messages, the last
    of generation g; returns g."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    messages = doc["messages"]
    g = messages[-1]["content"]["generation"]
    assert len(messages) == 21 + g and [m["content"]["generation"] for m in messages[20:]] == list(range(g + 1))
    return g


def check_logs(path: Path) -> int:
    entries = json.loads(path.read_text(encoding="utf-8"))
    gens = [e["content"]["generation"] for e in entries]
    assert gens == list(range(len(gens)))
    return gens[-1]


def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    """Every line the writer's parent prints, then "" at its end."""
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.put(line)
    lines.put("")


def _read_line(lines: queue.Queue[str]) -> str:
    """The next line, waiting at most STEP_TIMEOUT_S."""
    try:
        line = lines.get(timeout=STEP_TIMEOUT_S)
    except queue.Empty:
        raise AssertionError(f"the writer printed nothing for {STEP_TIMEOUT_S} s") from None
    assert line, "the writer's parent died"
    return line


def _wait_for_a_write(folder: Path) -> None:
    """Return the moment a temp file shows in ``folder`` (bounded)."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not any(p.name.endswith(".tmp") for p in folder.iterdir()):
        assert time.monotonic() < deadline, "the writer never started a write"


def test_sigkill_mid_write_never_leaves_a_torn_file(tmp_path):
    """Kill a real writer with SIGKILL at points spread over its write cycle,
    and the moment it is seen writing, again and again on the same files:
    each time both files parse and are whole (the previous generation or the
    one being written). At least one kill must have landed mid-write, shown
    by the orphaned temp file it left."""
    snap, logs = tmp_path / "snap.json", tmp_path / "logs.json"
    kills = mid_write = 0
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(snap), str(logs)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(proc, lines), daemon=True)
    pump.start()
    try:
        sweep = 2 * len(KILL_DELAYS)
        while (kills < sweep or mid_write < MID_WRITE_KILLS) and kills < MAX_KILLS:
            proc.stdin.write("go\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            first = _read_line(lines)
            assert first.startswith("pid "), f"writer did not start: {first!r}"
            pid = int(first.split()[1])
            try:
                for _ in range(2):  # a completed generation or two, then kill it without warning
                    line = _read_line(lines)
                    assert line.startswith("gen "), f"writer died: {line!r}"
                last_done = int(line.split()[1])
                if kills % 2 == 0 and kills < sweep:
                    time.sleep(KILL_DELAYS[kills // 2])
                else:
                    _wait_for_a_write(tmp_path)
            finally:
                os.kill(pid, signal.SIGKILL)  # the writer is alive until its parent prints "exit"
                # The writer may have run ahead of our reads: every generation it
                # completed before the kill is announced before its exit code.
                # A kill may cut the writer's last line before its newline, so
                # the parent's "exit" line can follow it on the same line.
                while True:
                    head, sep, tail = _read_line(lines).partition("exit ")
                    parts = head.split()
                    if len(parts) == 2 and parts[0] == "gen" and parts[1].isdigit():
                        last_done = int(parts[1])
                    if sep:
                        line = sep + tail
                        break
            kills += 1
            assert int(line.split()[1]) == -signal.SIGKILL
            g = check_snapshot(snap)  # parses and is whole: the previous or the new one
            assert last_done <= g <= last_done + 1
            assert last_done <= check_logs(logs) <= last_done + 1
            leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
            mid_write += bool(leftovers)
            for p in leftovers:  # what a kill leaves: an orphaned temp file, never the target
                assert p.name.startswith((".snap.json.", ".logs.json."))
                p.unlink()
    finally:
        proc.kill()
        proc.wait(timeout=STEP_TIMEOUT_S)
        pump.join(timeout=STEP_TIMEOUT_S)
        proc.stdin.close()  # type: ignore[union-attr]
        proc.stdout.close()  # type: ignore[union-attr]
    print(f"{kills} kills, {mid_write} mid-write")
    assert mid_write >= 1


def test_failed_write_keeps_the_previous_file_and_no_temp(tmp_path):
    """A write that fails (here: the target became a directory) raises,
    leaves no temp file, and a later write to a good path works."""
    b = Branch()
    b.messages.add("user", "one")
    good = tmp_path / "snap.json"
    b.snapshot(good)
    before = good.read_text()
    bad = tmp_path / "taken"
    (bad / "child").mkdir(parents=True)
    with pytest.raises(OSError):
        b.snapshot(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap.json", "taken"]
    assert good.read_text() == before


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


@pytest.mark.anyio
async def test_snapshot_never_fails_on_what_the_branch_holds(tmp_path):
    """Messages with cyclic, deeply nested or opaque content and trace facts
    that are not JSON still snapshot: such values are written as text."""
    b = Branch()
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic
    deep: Any = []
    for _ in range(5000):
        deep = [deep]

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        annotate(opaque=Opaque(), cyclic=cyclic)
        branch.messages.add("assistant", {"cyclic": cyclic, "deep": deep, "opaque": Opaque()})
        return "done"

    assert await b.operate(instruction="x", middle=middle) == "done"
    await b.operate(instruction="y", middle=ScriptedMiddle({"k": {1, 2}}))
    b.snapshot(tmp_path / "snap.json")
    b.dump_logs(tmp_path / "logs.json")
    doc = json.loads((tmp_path / "snap.json").read_text())
    content = doc["messages"][0]["content"]
    assert content["opaque"] == "Opaque()" and content["cyclic"]["name"] == "loop"
    assert doc["traces"][0]["meta"]["opaque"] == "Opaque()"
