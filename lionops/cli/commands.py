"""lionops' own command line: the ``lionops`` console script and ``python -m lionops``.

Commands: ``trace show``, ``replay`` and ``diagram``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

from .._json import loads as bounded_json
from ..errors import JSONLimitError, LionopsError

__all__ = ["main", "UsageError"]


class UsageError(LionopsError):
    """Bad input to a command (an unreadable or garbage file): exit status 2, one line on stderr."""


def _line(text: object) -> str:
    """``text`` on one line (a message never spreads over several)."""
    return " ".join(str(text).split())


def _print_trace(trace: Any) -> None:
    print(f"{' -> '.join(trace.states)}  (exit: {trace.exit}, engine: {trace.engine})")
    print(trace.table())


def _read_json(path: str) -> Any:
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    try:
        return bounded_json(text)
    except JSONLimitError:
        raise UsageError(f"{path} is nested too deep to read") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None


def _traces_of(path: str, data: Any) -> list[Any]:
    """The traces of a trace file, a run trace (the loop, then each round), a branch
    snapshot (``traces``) or a cassette (``operations``)."""
    from ..replay import Cassette, CassetteError
    from ..trace import Trace

    if isinstance(data, dict) and "operations" in data:
        try:
            return [op.trace_obj() for op in Cassette.loads(json.dumps(data), source=path).operations]
        except CassetteError as exc:
            raise UsageError(str(exc)) from None
    if isinstance(data, dict) and str(data.get("format", "")).startswith("lionops.run_trace/"):
        from ..run import RunTrace

        try:
            run = RunTrace.from_dict(data)
        except ValueError as exc:
            raise UsageError(f"{path}: {exc}") from None
        return [run.trace, *run.rounds]  # the loop, then each round
    items = data.get("traces") if isinstance(data, dict) and "traces" in data else [data]
    if not isinstance(items, list):
        raise UsageError(f"{path}: 'traces' is not a list")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(Trace.from_dict(item))
        except ValueError as exc:
            where = f" (trace {i})" if len(items) > 1 else ""
            raise UsageError(f"{path}{where}: {exc}") from None
    return out


def _cmd_trace_show(args: argparse.Namespace) -> int:
    """A trace JSON file, a branch snapshot (``traces``) or a cassette (``operations``)."""
    traces = _traces_of(args.path, _read_json(args.path))
    for i, trace in enumerate(traces):
        if len(traces) > 1:
            print(f"{'' if i == 0 else chr(10)}trace {i}:")
        _print_trace(trace)
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    """Replay a cassette's operations, rebuilt from the cassette alone; print each trace.

    Exit status 0 when every operation took its recorded path, 1 on a
    ``ReplayDivergence``, 2 when the cassette is unreadable, invalid, has no
    such operation or cannot be rebuilt.
    """
    import anyio

    from ..messages import to_jsonable
    from ..replay import Cassette, CassetteError, ReplayDivergence, replay
    from ..run import RunTrace

    try:
        cassette = Cassette.load(args.cassette)
    except CassetteError as exc:
        raise UsageError(str(exc)) from None
    if not cassette.operations:
        raise UsageError(f"{args.cassette} holds no operations")
    if args.operation is not None and not 0 <= args.operation < len(cassette.operations):
        raise UsageError(f"{args.cassette} has {len(cassette.operations)} operation(s); no operation {args.operation}")
    numbers = [args.operation] if args.operation is not None else range(len(cassette.operations))
    in_runs = {i for r in cassette.runs for i in range(r.first + 1, r.first + r.rounds)}
    status = 0
    for n in numbers:
        if args.operation is None and n in in_runs:
            continue  # replayed with the run it is a round of
        run = cassette.run_at(n)
        what = f"run of operations {n}..{n + run.rounds - 1}" if run is not None else f"operation {n}"
        print(f"{'' if n == numbers[0] else chr(10)}{what} of {args.cassette}:")
        if cassette.operations[n].call.resume is not None and run is None:
            print("resumes a suspended operation: it replays after the operation it resumes, from code "
                  "(a CassetteSession on the same branch)")
            continue
        try:
            traced = anyio.run(functools.partial(replay, cassette, operation=n, run_tools=False))
        except ReplayDivergence as exc:
            print(f"DIVERGED: {_line(exc)}", file=sys.stderr)
            if exc.trace is not None:
                _print_trace(exc.trace)
            status = 1
            continue
        except CassetteError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - reported, never a traceback
            recorded = (run or cassette.operations[n]).outcome.error
            if recorded is None or recorded.type != type(exc).__name__:
                raise UsageError(f"{type(exc).__name__}: {exc}") from None
            print(f"raised, as recorded: {type(exc).__name__}: {_line(exc)}")
            continue
        shown = traced.trace
        for trace in [shown.trace, *shown.rounds] if isinstance(shown, RunTrace) else [shown]:
            _print_trace(trace)
        print("result:", json.dumps(to_jsonable(traced.result), indent=2, ensure_ascii=False))
        print("replayed: same path, tool calls and result as recorded")
    return status


def build_parser(prog: str = "lionops") -> argparse.ArgumentParser:
    """The argument parser; ``prog`` is the name shown in usage lines."""
    parser = argparse.ArgumentParser(prog=prog)
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


def main(argv: list[str] | None = None, *, prog: str = "lionops") -> int:
    """Run one command; returns its exit status (argparse exits 2 on bad arguments).

    Exit status 2 with one ``error: ...`` line on stderr (no traceback) when
    the input is unusable; 1 when a replay diverged or a check failed.
    """
    args = build_parser(prog).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"error: {_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
