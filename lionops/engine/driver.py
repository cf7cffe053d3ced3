"""The anyio driver: await each phase handler, then ask the engine which
guarded trigger fires, until a terminal state; record the trace.

Runs on any anyio backend (asyncio, trio). An exception leaving a phase —
cancellation included — is stored on the context, the ``failed`` transition
fires, the trace is completed synchronously, and the very same exception is
re-raised: cancellation is never swallowed.

:func:`drive` holds the one loop every run goes through, on every engine:
the production (compiled) engine and the reference (``transitions``) engine
differ only in how ``fire()`` picks the transition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._text import safe_str
from ..clock import current_clock
from ..errors import InternalInvariantError
from ..observability import observe
from ..runtime import ClockLike, _enter_trace, _leave
from ..trace import Trace
from .definition import TransitionDef
from .engines import Engine

if TYPE_CHECKING:
    from .engines import Fired

__all__ = ["drive", "new_trace"]


def describe(exc: BaseException) -> str:
    """The ``error`` of a trace row: ``"ExcType: message"`` (the message
    ``<unprintable ExcType>`` when the exception's ``str()`` raises: the row is
    recorded and the exception itself re-raised all the same)."""
    return f"{type(exc).__name__}: {safe_str(exc)}"


def settle(ctx: Any, state: str, fire: Callable[[], Fired], evaluated: dict[str, bool],
           exc: Exception | None) -> tuple[TransitionDef, dict[str, bool]]:
    """What fires in ``state`` after a guard raised ``exc``, or when no guard
    held (``exc`` is ``None``; ``evaluated``: the guards evaluated).

    A guard that raised fails the phase: ``exc`` becomes the context's error
    and the guards are evaluated again. If then no guard holds, the error is an
    :class:`InternalInvariantError` and they are evaluated once more. What a
    guard raises on these evaluations propagates."""
    fired: TransitionDef | None = None
    if exc is not None:
        ctx.error = exc
        fired, more = fire()
        evaluated = {**more}
    if fired is None:
        ctx.error = InternalInvariantError(state, evaluated)
        fired, more = fire()
        evaluated = {**evaluated, **more}
    assert fired is not None
    return fired, evaluated


def new_trace(engine: Engine, meta: dict[str, Any] | None = None, clock: ClockLike | None = None) -> Trace:
    """A trace of a run of ``engine`` starting now (``clock``: the current one, read once by the caller)."""
    definition = engine.definition
    # Trace(machine, engine, started_at, initial, transitions, meta)
    return Trace(definition.name, engine.name, (clock or current_clock()).time(), definition.initial, None, meta)


async def drive(ctx: Any, engine: Engine, trace: Trace, *, clock: ClockLike | None = None,
                as_operation: bool = True, keep: Any = None) -> Any:
    """Run the machine on ``ctx``; return the outcome value or raise it.

    ``ctx`` is the caller's context object: the driver reads and sets only
    its ``error`` (what a phase raised). ``trace`` is filled in place, so a
    caller holding it sees the whole trace also when this raises. ``clock``
    is the current clock when the caller has read it already. With
    ``as_operation`` (the default) and an observer installed, the run is
    first handed to the observers as one operation
    (:func:`~lionops.observability.observe.observe_operation`); false for a
    run that is no operation (the run loop, observed as a step of its own).
    ``keep``: the branch whose ``traces`` the trace is appended to at the
    end of the run, and whose history limits are then applied, also when
    the run raises (after the observers are done with it); ``None``: the
    caller keeps the trace.

    The loop of every run, on every engine. Per state: await its phase
    handler unless the context already holds an error (what it raises
    becomes the error), timing it; ``fire()`` the engine (a guard that
    raises, or no guard holding, is settled by :func:`settle`); record the
    row (trigger, source, destination, evaluated guards, the error text on
    the failure transition; the clock readings that ended and started the
    phase); enter the destination. At a terminal state, the outcome of the
    exit taken is called on the context; an exception it raises is noted on
    the last row (unless that row has an error) and propagates.
    """
    try:
        if as_operation and observe.observers:  # instrumentation seam: one check when nothing observes
            return await observe.observe_operation(ctx, engine, trace, _observed_drive)
        timer = (clock or current_clock()).perf_counter_ns  # the real clock unless one is installed
        handlers = engine.handlers
        terminals = engine.terminals
        failure_trigger = engine.failure_trigger
        record = trace._rows.append
        fired: TransitionDef | None = None
        trace._t0 = timer()
        token = _enter_trace(trace.meta)  # annotate() writes to this trace
        try:
            run = engine.begin(ctx)
            fire = run.fire
            state = run.state
            try:
                while state not in terminals:
                    handler = handlers[state]
                    if handler is not None and ctx.error is None:
                        p0 = timer()
                        try:
                            await handler(ctx)
                        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised by the outcome
                            ctx.error = exc
                        at = timer()
                    else:  # no handler ran: a decision-only state, or a phase skipped after an error
                        p0 = at = timer()
                    try:
                        fired, evaluated = fire()
                    except Exception as exc:  # a guard raised: the phase failed
                        fired, evaluated = settle(ctx, state, fire, {}, exc)
                    if fired is None:  # no guard held
                        fired, evaluated = settle(ctx, state, fire, evaluated, None)
                    error = describe(ctx.error) if fired.trigger == failure_trigger and ctx.error else None
                    record((fired.trigger, state, fired.dest, evaluated, error, at, p0))  # one tuple a row
                    state = fired.dest
            finally:
                run.close()
        finally:
            _leave(token)
        assert fired is not None and fired.outcome is not None
        try:
            return engine.outcomes[fired.outcome](ctx)
        except BaseException as exc:
            rec = trace.transitions[-1]
            if rec.error is None:
                rec.error = describe(exc)
            raise
    finally:
        if keep is not None:
            try:
                keep.traces.append(trace)
            finally:
                keep.trim_history()


async def _observed_drive(ctx: Any, engine: Engine, trace: Trace) -> Any:
    """:func:`drive` inside an observed operation (the observers already know of it)."""
    return await drive(ctx, engine, trace, as_operation=False)
