"""Shared fixtures: every async test runs on asyncio and on trio.

Hypothesis profiles (``LIONOPS_HYPOTHESIS_PROFILE``, default ``ci``; see
docs/reliability.md, "The example database"):

- ``ci``: derandomized with a fixed ``max_examples``; the same examples on
  every run. Hypothesis implies ``database=None`` under ``derandomize``.
- ``replay``: replays every example committed in ``tests/.hypothesis-db``
  (read-only: a committed failure is never deleted) and generates nothing.
  ``make test`` runs the hypothesis tests once more under this profile.
- ``explore``: random search with more examples; new failures are appended to
  ``tests/.hypothesis-db`` (append-only: fixed failures are kept), to be
  committed with their fix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase, ReadOnlyDatabase

if TYPE_CHECKING:
    from .otel_support import Telemetry

#: The committed example database.
EXAMPLE_DB = Path(__file__).parent / ".hypothesis-db"


class AppendOnlyDatabase(ExampleDatabase):
    """Saves through to ``db``; never deletes or moves, so a failure once
    found stays in the committed database after it is fixed."""

    def __init__(self, db: ExampleDatabase) -> None:
        super().__init__()
        self._db = db

    def save(self, key: bytes, value: bytes) -> None:
        self._db.save(key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self._db.fetch(key)

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._db.save(dest, value)


_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=int(os.environ.get("LIONOPS_HYPOTHESIS_EXAMPLES", "120")),
    **_common,
)
settings.register_profile(
    "replay",
    database=ReadOnlyDatabase(DirectoryBasedExampleDatabase(EXAMPLE_DB)),
    phases=[Phase.explicit, Phase.reuse],
    **_common,
)
settings.register_profile(
    "explore",
    database=AppendOnlyDatabase(DirectoryBasedExampleDatabase(EXAMPLE_DB)),
    max_examples=int(os.environ.get("LIONOPS_HYPOTHESIS_EXAMPLES", "2000")),
    **_common,
)
settings.load_profile(os.environ.get("LIONOPS_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    """The real OpenTelemetry SDK with in-memory exporters, instrumented through ``lionops.instrument()``."""
    from .otel_support import telemetry

    yield from telemetry()


@pytest.fixture
def otel_content() -> Iterator[Telemetry]:
    """``otel`` with ``capture_content=True``."""
    from .otel_support import telemetry

    yield from telemetry(capture_content=True)
