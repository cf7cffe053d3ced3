"""AlcallParams on anyio: order, bounds, retries, throttle, cancellation."""

from __future__ import annotations

import anyio
import pytest

from lionops import AlcallParams
from lionops.clock import RecordingClock, use_clock

pytestmark = pytest.mark.anyio


async def test_results_keep_input_order_and_dropna():
    async def f(x):
        await anyio.sleep(0.001 * (5 - x))
        return None if x == 2 else x * 10

    assert await AlcallParams()(range(5), f) == [0, 10, None, 30, 40]
    assert await AlcallParams(output_dropna=True)(range(5), f) == [0, 10, 30, 40]


@pytest.mark.parametrize("n", [1, 6])
async def test_dropna_drops_only_none_and_keeps_every_other_falsy_result(n):
    values = [0, None, "", False, [], None][:n] if n > 1 else [None]
    kept = [v for v in values if v is not None]

    async def f(i):
        return values[i]

    out = await AlcallParams(output_dropna=True)(range(n), f)
    assert out == kept and [type(v) for v in out] == [type(v) for v in kept]
    assert all(a is b for a, b in zip(out, kept, strict=True))
    assert type(out) is list
    assert await AlcallParams()(range(n), f) == values


async def test_max_concurrent_bounds_tasks_and_starts_in_input_order():
    running = 0
    peak = 0
    starts = []

    async def f(x):
        nonlocal running, peak
        starts.append(x)
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0)
        running -= 1
        return x

    out = await AlcallParams(max_concurrent=3)(range(50), f)
    assert out == list(range(50)) and peak <= 3 and starts == list(range(50))


async def test_retries_use_backoff_through_the_injectable_clock():
    """retry_attempts=3 means up to three retries after the first attempt."""
    attempts = {"n": 0}

    async def flaky(x):
        attempts["n"] += 1
        if attempts["n"] < 4:
            raise ConnectionError("again")
        return x

    with use_clock(RecordingClock()) as clock:
        out = await AlcallParams(retry_attempts=3, retry_initial_delay=1, retry_backoff=1.85)([7], flaky)
    assert out == [7] and attempts["n"] == 4
    assert clock.sleeps == pytest.approx([1, 1.85, 1.85 ** 2])


async def test_retries_exhausted_reraise_the_last_error():
    async def always(x):
        raise ConnectionError(f"fail {x}")

    with use_clock(RecordingClock()) as clock, pytest.raises(ConnectionError, match="fail 1"):
        await AlcallParams(retry_attempts=2)([1], always)
    assert len(clock.sleeps) == 2


async def test_throttle_spaces_starts():
    with use_clock(RecordingClock()) as clock:
        await AlcallParams(throttle_period=1, max_concurrent=1)(range(3), lambda x: anyio.sleep(0))
    assert clock.sleeps == [1, 1]


async def test_first_failure_in_input_order_is_reraised_as_itself():
    gate = anyio.Event()

    async def f(x):
        if x == 2:
            raise KeyError("late index first")
        if x == 1:
            await gate.wait()  # cancelled by the failure of 2
        return x

    with pytest.raises(KeyError, match="late index first"):
        await AlcallParams()(range(4), f)


async def test_retry_timeout_bounds_each_attempt():
    async def hang(x):
        await anyio.sleep(10)

    with pytest.raises(TimeoutError):
        await AlcallParams(retry_timeout=0.05)([1], hang)


async def test_cancellation_is_never_retried_and_propagates():
    attempts = {"n": 0}

    async def slow(x):
        attempts["n"] += 1
        await anyio.sleep(10)

    with anyio.move_on_after(0.05) as scope:
        await AlcallParams(retry_attempts=5)([1, 2], slow)
    assert scope.cancelled_caught and attempts["n"] == 2


def test_invalid_params_are_rejected():
    with pytest.raises(ValueError, match="retry_attempts"):
        AlcallParams(retry_attempts=-1)
    with pytest.raises(ValueError, match="max_concurrent"):
        AlcallParams(max_concurrent=0)


async def test_one_real_time_wait():
    """The only test that really sleeps: the real clock is used by default."""
    t0 = anyio.current_time()
    await AlcallParams(throttle_period=0.05, max_concurrent=1)([1, 2], lambda x: anyio.sleep(0))
    assert anyio.current_time() - t0 >= 0.04


async def test_a_single_call_runs_in_its_own_copy_of_the_context():
    """One input runs in the caller's task, but what the function sets in a
    context variable (before and after a checkpoint, from an async function
    or from a plain function returning an awaitable) stays its own, as for
    each input of a larger batch; errors and results are unchanged."""
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")

    async def coro(x):
        var.set(f"before {x}")
        await anyio.sleep(0)
        seen = var.get()
        var.set(f"after {x}")
        return seen

    class Awaitable:
        def __init__(self, x):
            self.x = x

        def __await__(self):
            return coro(self.x).__await__()

    def plain(x):
        var.set("plain")  # runs when called, before anything is awaited
        return Awaitable(x)

    assert await AlcallParams()([1], coro) == ["before 1"]
    assert var.get() == "caller"
    assert await AlcallParams()([2], plain) == ["before 2"]
    assert var.get() == "caller"
    assert await AlcallParams(retry_attempts=1, retry_timeout=5)([3], coro) == ["before 3"]
    assert var.get() == "caller"

    async def boom(x):
        var.set("boom")
        await anyio.sleep(0)
        raise KeyError(x)

    with pytest.raises(KeyError):
        await AlcallParams()([4], boom)
    assert var.get() == "caller"
