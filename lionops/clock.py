"""One injectable clock for every wait lionops makes.

Retry backoff, throttling and ``Retry-After`` all sleep through
:func:`sleep`, so tests can install a :class:`RecordingClock` with
:func:`use_clock` and assert the requested delays instead of sleeping.
The clock is the ``clock`` seam of the current runtime
(:func:`lionops.runtime.current_runtime`), so it follows anyio child tasks;
without one installed, the real :class:`Clock` is used.
"""

from __future__ import annotations

import contextlib
import time as _time
from collections.abc import Iterator
from typing import TypeVar

import anyio

from .runtime import ClockLike, current_runtime, use_runtime

__all__ = ["Clock", "RecordingClock", "use_clock", "current_clock", "sleep", "monotonic"]

_C = TypeVar("_C", bound=ClockLike)


class Clock:
    """The real clock: ``anyio.sleep`` and ``time.monotonic`` (seconds).

    The transition trace also reads its clock here: ``time()`` (wall-clock
    seconds since the epoch, the trace's ``started_at``) and
    ``perf_counter_ns()`` (the timings of its rows). A clock that replays
    deterministically (a durable workflow's) overrides both; the others keep
    the real ones.
    """

    #: Wall-clock seconds since the epoch (``Trace.started_at``).
    time = staticmethod(_time.time)
    #: Monotonic nanoseconds for trace timings (``at_ns``, ``phase_ns``).
    perf_counter_ns = staticmethod(_time.perf_counter_ns)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    def monotonic(self) -> float:
        return _time.monotonic()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RecordingClock(Clock):
    """A virtual clock for tests: records each requested delay, never sleeps.

    ``sleeps`` lists every requested delay in seconds, in order; ``now``
    advances by each delay so code that measures elapsed time stays coherent.
    A checkpoint is still awaited so cancellation is delivered as usual.
    """

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.now = 0.0

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(float(seconds))
        self.now += max(0.0, float(seconds))
        await anyio.lowlevel.checkpoint()

    def monotonic(self) -> float:
        return self.now

    def __repr__(self) -> str:
        return f"RecordingClock(sleeps={self.sleeps!r})"


#: The clock used when the runtime installs none.
_REAL = Clock()


@contextlib.contextmanager
def use_clock(clock: _C) -> Iterator[_C]:
    """Install ``clock`` for the current context (and tasks started from it)."""
    with use_runtime(clock=clock):
        yield clock


def current_clock() -> ClockLike:
    """The clock of the current runtime (the real one unless one is installed)."""
    return current_runtime().clock or _REAL


async def sleep(seconds: float) -> None:
    """Sleep ``seconds`` through the current clock."""
    await current_clock().sleep(seconds)


def monotonic() -> float:
    """Seconds from the current clock's monotonic source."""
    return current_clock().monotonic()
