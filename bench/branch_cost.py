"""Branch construction alone: bare, with three Tool objects, with three plain functions.

    python bench/branch_cost.py [--number 20000] [--repeat 7]

Prints the best of ``--repeat`` runs of ``--number`` constructions, in µs
per Branch (the H1-H4 lionops system builds one per call).
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import TOOLS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    from lionops import Branch, Tool

    functions = list(TOOLS)
    tool_objects = [Tool(f) for f in TOOLS]
    cases = {
        "Branch()": lambda: Branch(),
        "Branch(tools=[3 Tool objects])": lambda: Branch(tools=tool_objects),
        "Branch(tools=[add, echo, flag])": lambda: Branch(tools=functions),
    }
    for label, make in cases.items():
        best = min(timeit.repeat(make, number=args.number, repeat=args.repeat)) / args.number * 1e6
        print(f"{label}: {best:.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
