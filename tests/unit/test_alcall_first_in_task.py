"""A batch whose starts nothing delays runs, on asyncio, in the caller's task
until one of its calls first waits; the calls not started by then get a task
each at that moment. The calls still run concurrently, each in its own copy of
the context, in the order a task per call gives, and a failure or a
cancellation ends them as it would end their tasks. With ``max_concurrent``
below the batch or a throttle (and on trio), every call is a task of its own."""

from __future__ import annotations

import contextvars

import anyio
import pytest

from lionops import AlcallParams
from lionops.clock import RecordingClock, use_clock

pytestmark = pytest.mark.anyio

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")


async def _wait_long(x: int, cancelled: list[int]) -> int:
    """Wait far longer than any test; note ``x`` in ``cancelled`` when cancelled."""
    try:
        await anyio.sleep(10)
    except anyio.get_cancelled_exc_class():
        cancelled.append(x)
        raise
    return x


async def test_an_early_call_waits_for_a_later_one_and_all_finish():
    """Call 0 waits on what call 2 sets: run one after the other, this would never end."""
    last_ran = anyio.Event()

    async def f(x):
        if x == 0:
            await last_ran.wait()
        elif x == 2:
            last_ran.set()
        return x

    with anyio.fail_after(5):
        assert await AlcallParams()([0, 1, 2], f) == [0, 1, 2]


async def test_calls_interleave_as_tasks_do(anyio_backend):
    """Each call runs until it first waits, then the next starts (asyncio's
    order; trio picks its own order among ready tasks)."""
    seen: list[str] = []

    async def f(x):
        seen.append(f"start {x}")
        await anyio.sleep(0)
        seen.append(f"end {x}")
        return x

    def plain(x):  # never waits
        seen.append(f"plain {x}")
        return anyio.sleep(0) if x == 9 else _done(x)

    async def _done(x):
        return x

    assert await AlcallParams()(range(3), f) == [0, 1, 2]
    assert await AlcallParams()([5, 6], plain) == [5, 6]
    if anyio_backend == "asyncio":
        assert seen == ["start 0", "start 1", "start 2", "end 0", "end 1", "end 2", "plain 5", "plain 6"]
    else:
        assert sorted(seen[:6]) == ["end 0", "end 1", "end 2", "start 0", "start 1", "start 2"]


async def test_calls_that_never_wait_run_in_order_and_keep_their_own_context():
    async def f(x):
        var.set(f"set by {x}")
        return var.get()

    assert await AlcallParams()([0, 1, 2], f) == ["set by 0", "set by 1", "set by 2"]
    assert var.get() == "caller"


async def test_what_each_call_sets_in_a_context_variable_stays_its_own():
    async def f(x):
        var.set(f"set by {x}")
        await anyio.sleep(0)
        return var.get()

    assert await AlcallParams()([0, 1, 2], f) == ["set by 0", "set by 1", "set by 2"]
    assert var.get() == "caller"


async def test_a_failure_cancels_the_other_calls_at_their_first_wait_and_is_raised():
    cancelled: list[int] = []

    async def f(x):
        if x == 1:
            raise KeyError("second fails")
        return await _wait_long(x, cancelled)

    with anyio.fail_after(5), pytest.raises(KeyError, match="second fails"):
        await AlcallParams()([0, 1, 2], f)
    assert sorted(cancelled) == [0, 2]


async def test_after_a_failure_before_any_wait_the_others_run_until_their_first_wait():
    """As tasks spawned before the failure do: what a call does before it
    first waits still happens; nothing after that wait does."""
    ran: list[str] = []

    async def f(x):
        ran.append(f"start {x}")
        if x == 0:
            raise ValueError("first fails")
        await anyio.sleep(0)
        ran.append(f"end {x}")
        return x

    with pytest.raises(ValueError, match="first fails"):
        await AlcallParams()([0, 1, 2], f)
    assert sorted(ran) == ["start 0", "start 1", "start 2"]


async def test_the_callers_cancellation_ends_every_call():
    cancelled: list[int] = []

    with anyio.move_on_after(0.05) as scope:
        await AlcallParams()([0, 1, 2], lambda x: _wait_long(x, cancelled))
    assert scope.cancelled_caught and sorted(cancelled) == [0, 1, 2]


@pytest.mark.parametrize("params", [AlcallParams(max_concurrent=1), AlcallParams(throttle_period=1)],
                         ids=["max_concurrent", "throttle"])
async def test_with_a_bound_on_starts_every_call_is_its_own_task(params):
    """Under a start bound the calls get their tasks as before: the bound holds
    (one call at a time; the throttle's waits), the context stays each call's."""
    running = {"now": 0, "most": 0}

    async def f(x):
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        var.set(f"set by {x}")
        await anyio.sleep(0)
        running["now"] -= 1
        return var.get()

    with use_clock(RecordingClock()) as clock:
        assert await params(range(3), f) == ["set by 0", "set by 1", "set by 2"]
    assert var.get() == "caller"
    if params.max_concurrent == 1:
        assert running["most"] == 1
    else:
        assert clock.sleeps == [1, 1]
