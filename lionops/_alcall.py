"""``AlcallParams``: apply an async function to a list, on anyio.

ADR-0022 D1/D4: results keep input order; ``max_concurrent``
bounds how many calls run at once; ``throttle_period`` spaces the *starts* of
calls (seconds); ``retry_attempts`` counts retries after the first attempt,
each waiting ``retry_initial_delay * retry_backoff ** n`` seconds;
``retry_timeout`` bounds each attempt (seconds); ``output_dropna`` drops
``None`` results. Cancellation is never retried. Every wait goes through
:mod:`lionops.clock`.

A call that raises a ``BaseException`` that is not a cancellation of its own
task (``KeyboardInterrupt``, or on asyncio a stray ``CancelledError`` from
awaiting a future someone else cancelled) is a failure like any other: it is
kept, the other calls are cancelled, and it is re-raised as itself instead of
being mistaken by the task group for a cancellation and swallowed.
"""

from __future__ import annotations

import contextvars
import functools
import operator
import types
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import sniffio
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from . import clock
from .errors import ConfigurationError

__all__ = ["AlcallParams", "alcall", "in_own_context", "is_cancellation"]

T = TypeVar("T")
R = TypeVar("R")


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is a real cancellation of the running task (an anyio
    cancel scope, or ``task.cancel()`` on asyncio), not a stray one.

    On asyncio a ``CancelledError`` counts only while the current task has a
    pending cancellation request (``Task.cancelling()``); one raised from a
    future that someone else cancelled does not. On trio only
    ``trio.Cancelled`` counts.
    """
    if not isinstance(exc, anyio.get_cancelled_exc_class()):
        return False
    try:
        import asyncio

        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return True
    if task is None:
        return True
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or cancelling() > 0


@dataclass(slots=True, frozen=True)
class AlcallParams:
    """Parameters for applying an async callable to many inputs (ADR-0022 D1, D4).

    Attributes (units: seconds for times):
        retry_initial_delay: wait before the first retry.
        retry_backoff: factor applied to the wait after each retry.
        retry_attempts: retries after the first attempt (3 → up to 4 calls).
        max_concurrent: calls in flight at once; ``None`` means unbounded.
        throttle_period: minimum spacing between the starts of two calls.
        retry_timeout: limit of one attempt; exceeding it raises ``TimeoutError``.
        output_dropna: drop ``None`` results from the output list.

    Calling the object runs ``func`` over ``inputs`` (see :func:`alcall`).
    """

    retry_initial_delay: float = 0
    retry_backoff: float = 1
    retry_attempts: int = 0
    max_concurrent: int | None = None
    throttle_period: float | None = None
    retry_timeout: float | None = None
    output_dropna: bool = False

    def __post_init__(self) -> None:
        if self.retry_attempts < 0:
            raise ConfigurationError("retry_attempts must be >= 0")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ConfigurationError("max_concurrent must be >= 1 or None")
        for name in ("retry_initial_delay", "retry_backoff"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must be >= 0")

    async def __call__(
        self, inputs: Sequence[T], func: Callable[[T], Awaitable[R]]
    ) -> list[R]:
        return await alcall(inputs, func, self)


async def _attempt(func: Callable[[T], Awaitable[R]], item: T, params: AlcallParams) -> R:
    if params.retry_timeout is None:
        return await func(item)
    with anyio.fail_after(params.retry_timeout):
        return await func(item)


def _call_with_retries(func: Callable[[T], Awaitable[R]], item: T, params: AlcallParams) -> Awaitable[R]:
    """The awaitable of one call under ``params``: the call itself when
    neither retries nor an attempt limit apply."""
    if params.retry_attempts == 0:
        return func(item) if params.retry_timeout is None else _attempt(func, item, params)
    return _retried(func, item, params)


async def _retried(func: Callable[[T], Awaitable[R]], item: T, params: AlcallParams) -> R:
    retrying = AsyncRetrying(
        stop=stop_after_attempt(params.retry_attempts + 1),
        wait=wait_exponential(multiplier=params.retry_initial_delay, exp_base=params.retry_backoff),
        # Only Exception subclasses are retried: anyio/trio/asyncio
        # cancellation derives from BaseException and always propagates.
        retry=retry_if_exception_type(Exception),
        sleep=clock.sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await _attempt(func, item, params)
    raise AssertionError("unreachable")  # pragma: no cover


async def _awaited(awaitable: Awaitable[R]) -> R:
    return await awaitable


def in_own_context(call: Callable[..., Awaitable[R]], *args: Any) -> Awaitable[R]:
    """Await ``call(*args)`` in this task, the call and each step of what it
    returns in one copy of the current context: what it sets in context
    variables stays its own, as in a task started for it, without the task
    (what ``yield from`` does, with every step run through ``Context.run``)."""
    return _in_own_context(None, call, args)


@types.coroutine
def _in_own_context(on_wait: Callable[[], None] | None, call: Callable[..., Awaitable[R]],
                    args: tuple[Any, ...]) -> Generator[Any, Any, R]:
    """:func:`in_own_context`; ``on_wait`` (when given) is called once, when the
    call first hands control to the event loop, before it does."""
    context = contextvars.copy_context()
    awaitable = context.run(call, *args)
    coro = awaitable if isinstance(awaitable, types.CoroutineType) else _awaited(awaitable)
    send, throw = coro.send, coro.throw
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                yielded = context.run(send, value) if error is None else context.run(throw, error)
            except StopIteration as stop:
                result: R = stop.value
                return result
            if on_wait is not None:
                on_wait()
                on_wait = None
            value, error = None, None
            try:
                value = yield yielded
            except GeneratorExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown into the call, as yield from does
                error = exc
    finally:
        coro.close()


async def _inline_until_a_wait(tg: Any, n: int, run_one: Callable[[int, anyio.CancelScope], Awaitable[None]]) -> None:
    """Run calls ``0..n-1`` of a batch in this task, one after the other, each
    in its own copy of the context, until one of them first waits: then the
    calls not yet started are spawned in ``tg`` before control goes to the
    event loop. On asyncio (ready callbacks run in the order they were
    scheduled) this is the order a task per call gives: call 0 runs until it
    first waits, then call 1 starts, and so on; a call that never waits ends
    before the next starts. After a failure (``run_one`` cancels the group)
    the calls not yet started get their tasks as they had them already: the
    group's cancellation reaches each at its first wait."""
    scope = tg.cancel_scope
    following = 0

    def start_the_rest() -> None:
        nonlocal following
        for j in range(following, n):
            tg.start_soon(run_one, j, scope)
        following = n

    while following < n:
        i = following
        following += 1
        await _in_own_context(start_the_rest, run_one, (i, scope))
        if scope.cancel_called:
            start_the_rest()


class _Throttle:
    """Spaces the starts of calls by at least ``period`` seconds (the clock's)."""

    __slots__ = ("period", "lock", "last")

    def __init__(self, period: float) -> None:
        self.period = period
        self.lock = anyio.Lock()
        self.last: float | None = None

    async def wait(self) -> None:
        async with self.lock:
            now = clock.monotonic()
            if self.last is not None:
                wait = self.last + self.period - now
                if wait > 0:
                    await clock.sleep(wait)
                    now = clock.monotonic()
            self.last = now


#: whether a result is kept under ``output_dropna`` (it is not ``None``)
_not_none = functools.partial(operator.is_not, None)


async def alcall(
    inputs: Sequence[T],
    func: Callable[[T], Awaitable[R]],
    params: AlcallParams | None = None,
) -> list[R]:
    """Run ``func`` over ``inputs`` under ``params``; results keep input order.

    If calls fail, the remaining calls are cancelled and the failure of the
    lowest input index is re-raised as itself (not an ExceptionGroup).
    Cancellation of the caller propagates and is never retried.
    """
    params = params or AlcallParams()
    items = list(inputs)
    n = len(items)
    if n <= 1:
        # Nothing to schedule: the one call starts at once (no throttle wait
        # before a first start, no limit below 1), so run it in this task,
        # in its own copy of the context as the tasks of a larger batch are.
        single = [await in_own_context(_call_with_retries, func, item, params) for item in items]
        return list(filter(_not_none, single)) if params.output_dropna else single
    results: list[Any] = [None] * n
    errors: dict[int, BaseException] = {}
    # Slots are taken by the spawning loop, so calls start in input order and
    # no more than max_concurrent tasks ever exist at once (bounded fan-out).
    # A limit of at least n never makes a call wait: no semaphore then.
    limit = params.max_concurrent or n
    slots = anyio.Semaphore(limit) if limit < n else None
    throttle = _Throttle(params.throttle_period) if params.throttle_period else None
    # The awaitable of one call: func's own when neither retries nor an attempt limit apply.
    attempt = (func if params.retry_attempts == 0 and params.retry_timeout is None
               else functools.partial(_call_with_retries, func, params=params))

    async def run_one(i: int, scope: anyio.CancelScope) -> None:
        try:
            results[i] = await attempt(items[i])
        except BaseException as exc:  # noqa: BLE001 - re-raised below in input order
            if is_cancellation(exc):
                raise
            errors[i] = exc
            scope.cancel()
        finally:
            if slots is not None:
                slots.release()

    async with anyio.create_task_group() as tg:
        # Nothing makes a start wait: on asyncio the calls run in this task
        # until one waits, then the rest get their tasks (the same order; see
        # _inline_until_a_wait). trio runs a batch of ready tasks in an order
        # of its own choosing, which a call started early in this task would
        # change (it would get a step ahead of its siblings): a task each.
        if slots is None and throttle is None and sniffio.current_async_library() == "asyncio":
            await _inline_until_a_wait(tg, n, run_one)
        else:
            for i in range(n):
                if slots is not None:
                    await slots.acquire()
                if throttle is not None:
                    await throttle.wait()
                tg.start_soon(run_one, i, tg.cancel_scope)

    if errors:
        raise errors[min(errors)]
    if params.output_dropna:
        return list(filter(_not_none, results))
    return results
