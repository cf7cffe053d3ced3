"""Command-line entry points of ``python -m lionops``."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _print_trace(trace: Any) -> None:
    print(f"{' -> '.join(trace.states)}  (exit: {trace.exit}, engine: {trace.engine})")
    print(trace.table())


def _cmd_trace_show(args: argparse.Namespace) -> int:
    """A trace JSON file, a branch snapshot (``traces``) or a cassette (``operations``)."""
    from .trace import Trace

    data = json.loads(Path(args.path).read_text())
    if isinstance(data, dict) and "operations" in data:
        traces = [op["trace"] for op in data["operations"]]
    elif isinstance(data, dict) and "traces" in data:
        traces = data["traces"]
    else:
        traces = [data]
    for i, item in enumerate(traces):
        if len(traces) > 1:
            print(f"{'' if i == 0 else chr(10)}trace {i}:")
        _print_trace(Trace.from_dict(item))
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    """Replay a cassette's operations, rebuilt from the cassette alone; print each trace.

    Exit status 0 when every operation took its recorded path, 1 on a
    ``ReplayDivergence``, 2 when the cassette is invalid or cannot be rebuilt.
    """
    import anyio

    from .messages import to_jsonable
    from .replay import Cassette, CassetteError, ReplayDivergence, replay

    try:
        cassette = Cassette.load(args.cassette)
    except CassetteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    numbers = [args.operation] if args.operation is not None else range(len(cassette.operations))
    status = 0
    for n in numbers:
        print(f"{'' if n == numbers[0] else chr(10)}operation {n} of {args.cassette}:")
        try:
            traced = anyio.run(functools.partial(replay, cassette, operation=n, run_tools=False))
        except ReplayDivergence as exc:
            print(f"DIVERGED: {exc}", file=sys.stderr)
            if exc.trace is not None:
                _print_trace(exc.trace)
            status = 1
            continue
        except CassetteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # noqa: BLE001 - reported, never a traceback
            recorded = cassette.operations[n].outcome.error
            if recorded is None or recorded.type != type(exc).__name__:
                print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 2
            print(f"raised, as recorded: {type(exc).__name__}: {exc}")
            continue
        _print_trace(traced.trace)
        print("result:", json.dumps(to_jsonable(traced.result), indent=2, ensure_ascii=False))
        print("replayed: same path, tool calls and result as recorded")
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lionops")
    sub = parser.add_subparsers(dest="command", required=True)
    trace = sub.add_parser("trace", help="inspect traces")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    show = trace_sub.add_parser("show", help="print a trace JSON file as a table")
    show.add_argument("path")
    show.set_defaults(func=_cmd_trace_show)
    rep = sub.add_parser("replay", help="replay a cassette offline and print its traces")
    rep.add_argument("cassette")
    rep.add_argument("--operation", type=int, default=None, help="replay only this operation (0-based)")
    rep.set_defaults(func=_cmd_replay)
    from . import diagram

    diagram.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
