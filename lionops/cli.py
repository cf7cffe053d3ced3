"""Command-line entry points of ``python -m lionops``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]


def _cmd_trace_show(args: argparse.Namespace) -> int:
    from .trace import Trace

    trace = Trace.from_json(Path(args.path).read_text())
    print(f"{' -> '.join(trace.states)}  (exit: {trace.exit}, engine: {trace.engine})")
    print(trace.table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lionops")
    sub = parser.add_subparsers(dest="command", required=True)
    trace = sub.add_parser("trace", help="inspect traces")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    show = trace_sub.add_parser("show", help="print a trace JSON file as a table")
    show.add_argument("path")
    show.set_defaults(func=_cmd_trace_show)
    from . import diagram

    diagram.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
