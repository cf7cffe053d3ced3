"""The observer seam: what an instrumentation layer is told, and nothing more.

The core never imports an instrumentation library. It checks one
process-wide tuple, :data:`observers`, at a few places; empty (the default),
each place costs one truthiness check and nothing else is built:

- the driver, around one whole ``operate()`` run (:func:`observe_operation`);
- the ``adapter`` phase, around the awaited Middle (:func:`observe_adapter`);
- ``act()``, around each request (:func:`observe_tool`);
- the ``enrich`` phase, around the writeback offer (:func:`observe_step`);
- ``Branch.run()``, around the whole loop of rounds (:func:`observe_step`
  named ``run``, with the facts ``branch.id``, ``max_rounds``, ``branch``,
  ``run_trace`` and ``chat_model``; each round an observed operation inside it; the note
  ``run_end`` tells its exit and number of rounds before the step ends);
- a tool hook being emitted, a CLI agent's own tool call, and chunks of a
  streamed answer arriving (:func:`note`).

An observer is any object with the methods of :class:`Observer`. An
observer that raises is logged and ignored: it never changes an operation's
outcome, its trace, or the exception the caller gets. Observers are added
and removed with :func:`add_observer` / :func:`remove_observer`
(``lionops.instrument()`` does this for OpenTelemetry).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

__all__ = [
    "Observer", "observers", "add_observer", "remove_observer",
    "observe_operation", "observe_adapter", "observe_tool", "tool_call", "observe_step", "note", "quiet",
]

logger = logging.getLogger("lionops.observe")

T = TypeVar("T")

#: The observers of this process, in the order added. Read at each seam; never mutated in place.
observers: tuple[Observer, ...] = ()

_lock = threading.Lock()

#: A check a seam asks before it reports, in the current context (``None``:
#: always report). ``quiet(None)`` true: the seam reports nothing (durable
#: workflow code sets one that is true while the workflow replays its
#: history); ``quiet(exc)`` true for the exception a seam ends with: its end
#: is not reported (a workflow's coroutine cancelled by an eviction).
quiet: contextvars.ContextVar[Callable[[BaseException | None], bool] | None] = contextvars.ContextVar(
    "lionops_observe_quiet", default=None)


class Observer(Protocol):
    """What an observer implements. Each ``*_start`` returns a handle (any
    value, kept by the seam); the matching ``*_end`` receives it with the
    awaited result (``None`` when it raised) and the exception (``None``
    when it returned)."""

    def operation_start(self, ctx: Any, engine: Any, trace: Any) -> Any: ...

    def operation_end(self, handle: Any, result: Any, error: BaseException | None) -> None: ...

    def adapter_start(self, ctx: Any) -> Any: ...

    def adapter_end(self, handle: Any, result: Any, error: BaseException | None) -> None: ...

    def tool_start(self, branch: Any, request: Any) -> Any: ...

    def tool_end(self, handle: Any, result: Any, error: BaseException | None) -> None: ...

    def step_start(self, name: str, facts: dict[str, Any]) -> Any: ...

    def step_end(self, handle: Any, result: Any, error: BaseException | None) -> None: ...

    def note(self, name: str, facts: dict[str, Any]) -> None: ...


def add_observer(observer: Observer) -> None:
    """Add ``observer`` (once; adding it again does nothing)."""
    global observers
    with _lock:
        if observer not in observers:
            observers = (*observers, observer)


def remove_observer(observer: Observer) -> None:
    """Remove ``observer`` if present."""
    global observers
    with _lock:
        observers = tuple(o for o in observers if o is not observer)


def _call(observer: Any, method: str, *args: Any) -> Any:
    try:
        return getattr(observer, method)(*args)
    except Exception as exc:  # noqa: BLE001 - an observer never changes the outcome
        logger.warning("observer %s.%s failed: %s: %s", type(observer).__name__, method,
                       type(exc).__name__, _safe(exc))
        return None


def _safe(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - an exception whose str() raises
        return "<unprintable>"


async def _around(kind: str, call: Awaitable[T], *args: Any) -> T:
    """Await ``call`` between every observer's ``{kind}_start(*args)`` and
    ``{kind}_end(handle, result, error)``.

    Ends run in reverse order, in the task that ran the starts, also on
    cancellation; the exception (if any) is re-raised unchanged.
    """
    hush = quiet.get()
    if hush is not None and hush(None):
        return await call
    handles = [(o, _call(o, f"{kind}_start", *args)) for o in observers]
    try:
        result = await call
    except BaseException as exc:
        if hush is not None and hush(exc):
            raise
        for o, h in reversed(handles):
            _call(o, f"{kind}_end", h, None, exc)
        raise
    for o, h in reversed(handles):
        _call(o, f"{kind}_end", h, result, None)
    return result


async def observe_operation(ctx: Any, engine: Any, trace: Any,
                            run: Callable[[Any, Any, Any], Awaitable[T]]) -> T:
    """``await run(ctx, engine, trace)`` as one observed operation."""
    return await _around("operation", run(ctx, engine, trace), ctx, engine, trace)


async def observe_adapter(ctx: Any, call: Awaitable[T]) -> T:
    """``await call`` (the Middle of ``ctx``) as one observed adapter call."""
    return await _around("adapter", call, ctx)


async def observe_tool(branch: Any, request: Any, call: Awaitable[T]) -> T:
    """``await call`` (``act()`` on one request) as one observed tool call; the
    observer reads the decision from the response or the exception."""
    return await _around("tool", call, branch, request)


def tool_call(branch: Any, request: Any, call: Awaitable[T]) -> Awaitable[T]:
    """``call`` itself when nothing observes, else :func:`observe_tool` over it
    (the one seam ``act()`` has per request)."""
    return observe_tool(branch, request, call) if observers else call


async def observe_step(name: str, call: Awaitable[T], **facts: Any) -> T:
    """``await call`` as a short observed step (``writeback``)."""
    return await _around("step", call, name, facts)


def note(name: str, **facts: Any) -> None:
    """Tell every observer that ``name`` happened now (a hook emitted, a CLI tool call)."""
    hush = quiet.get()
    if hush is not None and hush(None):
        return
    for o in observers:
        _call(o, "note", name, facts)
