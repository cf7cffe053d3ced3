"""One injectable clock for every wait lionops makes.

Retry backoff, throttling and ``Retry-After`` all sleep through
:func:`sleep`, so tests can install a :class:`RecordingClock` with
:func:`use_clock` and assert the requested delays instead of sleeping.
The clock is held in a context variable, so it follows anyio child tasks.
"""

from __future__ import annotations

import contextlib
import contextvars
import time as _time
from collections.abc import Iterator

import anyio

__all__ = ["Clock", "RecordingClock", "use_clock", "sleep", "monotonic"]


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


_clock: contextvars.ContextVar[Clock] = contextvars.ContextVar(
    "lionops_clock", default=Clock()
)


@contextlib.contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Install ``clock`` for the current context (and tasks started from it)."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


def current_clock() -> Clock:
    return _clock.get()


async def sleep(seconds: float) -> None:
    """Sleep ``seconds`` through the current clock."""
    await _clock.get().sleep(seconds)


def monotonic() -> float:
    """Seconds from the current clock's monotonic source."""
    return _clock.get().monotonic()
