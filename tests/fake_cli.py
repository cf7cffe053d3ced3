#!/usr/bin/env python3
"""A stand-in CLI agent: replays a recorded stream-json session on stdout.

    fake_cli.py --session FILE [options] [any CLI arguments, ignored]

It reads its whole stdin first (the prompt, as the real CLIs do), then writes
the session file's bytes verbatim, line by line, each line in ``--chunk``-byte
writes with a flush between them (so lines reach the reader split across
reads). Options:

    --record PATH        write {"argv": [...], "stdin": "..."} to PATH
    --pidfile PATH       write this process's pid to PATH on start
    --child-pidfile PATH start a grandchild (sleeps) in the same process
                         group and write its pid to PATH
    --chunk N            bytes per write (default: whole lines)
    --stderr TEXT        written to stderr after the session
    --exit N             exit status after the session (default 0)
    --hang-after N       after N lines, sleep forever (N >= the number of
                         lines: after the whole session)
    --close-stdout       close stdout before sleeping (with --hang-after)
    --exit-on-term N     on SIGTERM, exit with status N (as a CLI with a
                         signal handler does)
    --kill-after N       after N lines, SIGKILL itself

Only the standard library is used, so any Python can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--session", required=True)
    parser.add_argument("--record")
    parser.add_argument("--pidfile")
    parser.add_argument("--child-pidfile")
    parser.add_argument("--chunk", type=int, default=0)
    parser.add_argument("--stderr", default="")
    parser.add_argument("--stderr-env", action="append", default=[],
                        help="also write this environment variable's value to stderr (a CLI echoing its config)")
    parser.add_argument("--stderr-file", action="append", default=[],
                        help="also write this file's text to stderr (a CLI echoing its config file)")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--hang-after", type=int, default=-1)
    parser.add_argument("--kill-after", type=int, default=-1)
    parser.add_argument("--close-stdout", action="store_true")
    parser.add_argument("--exit-on-term", type=int, default=None)
    opts, _unknown = parser.parse_known_args(argv)

    if opts.exit_on_term is not None:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(opts.exit_on_term))
    if opts.pidfile:
        _write(opts.pidfile, str(os.getpid()))
    if opts.child_pidfile:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        _write(opts.child_pidfile, str(child.pid))
    prompt = sys.stdin.buffer.read().decode("utf-8")
    if opts.record:
        _write(opts.record, json.dumps({"argv": argv, "stdin": prompt}))

    out = sys.stdout.buffer
    with open(opts.session, "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    for index, line in enumerate(lines):
        if index == opts.hang_after:
            _hang(out, opts.close_stdout)
        if index == opts.kill_after:
            out.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        step = opts.chunk or len(line) or 1
        for start in range(0, len(line), step):
            out.write(line[start : start + step])
            out.flush()
    if opts.hang_after >= len(lines):
        _hang(out, opts.close_stdout)
    if opts.stderr:
        sys.stderr.write(opts.stderr)
    for name in opts.stderr_env:
        sys.stderr.write(f"{name}={os.environ.get(name, '')}\n")
    for path in opts.stderr_file:
        with open(os.path.expandvars(path), encoding="utf-8") as fh:
            sys.stderr.write(fh.read())
    sys.stderr.flush()
    return opts.exit


def _hang(out, close: bool) -> None:
    out.flush()
    if close:
        out.close()
        os.close(1)
    time.sleep(3600)


def _write(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
