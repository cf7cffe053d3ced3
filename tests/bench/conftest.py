"""The benchmark's scripts, importable by their bare names for one test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
#: The bench modules a test may import; dropped again after each test.
MODULES = ("common", "systems", "reference", "report", "untraced", "run", "e2e", "floor", "peer", "native", "memory",
           "native_peer")


@pytest.fixture()
def bench() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import run

        yield run
    finally:
        sys.path.remove(str(BENCH))
        for name in MODULES:
            sys.modules.pop(name, None)
