"""The anyio driver: await each phase handler, then ask the engine which
guarded trigger fires, until a terminal state; record the trace.

Runs on any anyio backend (asyncio, trio). An exception leaving a phase —
cancellation included — is stored on the context, the ``failed`` transition
fires, the trace is completed synchronously, and the very same exception is
re-raised: cancellation is never swallowed.

An engine that carries a ``whole_run`` (the compiled engine: all of this,
the loop written out once for its table, :mod:`lionops.engine.straight`)
runs through it; any other engine through :func:`_loop`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import observe
from ..clock import current_clock
from ..runtime import ClockLike, _enter_trace, _leave
from ..trace import Trace
from .engines import Engine
from .straight import describe, record_row, settle

__all__ = ["drive", "new_trace"]


def new_trace(engine: Engine, meta: dict[str, Any] | None = None, clock: ClockLike | None = None) -> Trace:
    """A trace of a run of ``engine`` starting now (``clock``: the current one, read once by the caller)."""
    definition = engine.definition
    # Trace(machine, engine, started_at, initial, transitions, meta)
    return Trace(definition.name, engine.name, (clock or current_clock()).time(), definition.initial, None, meta)


async def drive(ctx: Any, engine: Engine, trace: Trace, *, clock: ClockLike | None = None,
                _observed: bool = False) -> Any:
    """Run the machine on ``ctx``; return the outcome value or raise it.

    ``ctx`` is the caller's context object: the driver reads and sets only
    its ``error`` (what a phase raised). ``trace`` is filled in place, so a
    caller holding it sees the whole trace also when this raises. ``clock``
    is the current clock when the caller has read it already.
    """
    if observe.observers and not _observed:  # instrumentation seam: one check when nothing observes
        return await observe.observe_operation(ctx, engine, trace, _observed_drive)
    clock = clock or current_clock()  # the real one unless a clock is installed
    run = getattr(engine, "whole_run", None)
    if run is not None:
        return await run(ctx, trace, clock)
    timer = clock.perf_counter_ns
    trace._t0 = timer()
    token = _enter_trace(trace.meta)  # annotate() writes to this trace
    try:
        outcome = await _loop(ctx, engine, timer, trace._rows.append)
    finally:
        _leave(token)
    try:
        return outcome(ctx)
    except BaseException as exc:
        rec = trace.transitions[-1]
        if rec.error is None:
            rec.error = describe(exc)
        raise


async def _loop(ctx: Any, engine: Engine, clock: Any, record: Any) -> Callable[[Any], Any]:
    """The generic loop, for any engine: returns the outcome of the exit taken."""
    handlers = engine.handlers
    terminals = engine.terminals
    failure_trigger = engine.failure_trigger
    run = engine.begin(ctx)
    fire = run.fire
    last = None
    try:
        state = run.state
        while state not in terminals:
            handler = handlers[state]
            if handler is not None and ctx.error is None:
                p0 = clock()
                try:
                    await handler(ctx)
                except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised by the outcome
                    ctx.error = exc
                at = clock()
            else:  # no handler ran: a decision-only state, or a phase skipped after an error
                p0 = at = clock()
            try:
                fired, evaluated = fire()
            except Exception as exc:  # a guard raised: the phase failed
                fired, evaluated = settle(ctx, state, fire, {}, exc)
            if fired is None:  # no guard held
                fired, evaluated = settle(ctx, state, fire, evaluated, None)
            record_row(record, ctx, state, fired, evaluated, at, p0, failure_trigger)
            state = fired.dest
            last = fired
    finally:
        run.close()
    assert last is not None and last.outcome is not None
    return engine.outcomes[last.outcome]


async def _observed_drive(ctx: Any, engine: Engine, trace: Trace) -> Any:
    """:func:`drive` inside an observed operation (the observers already know of it)."""
    return await drive(ctx, engine, trace, _observed=True)
