"""The anyio driver: await each phase handler, then ask the engine which
guarded trigger fires, until a terminal state; record the trace.

Runs on any anyio backend (asyncio, trio). An exception leaving a phase —
cancellation included — is stored on the context, the ``failed`` transition
fires, the trace is completed synchronously, and the very same exception is
re-raised: cancellation is never swallowed.
"""

from __future__ import annotations

from typing import Any

from .. import observe
from ..clock import current_clock
from ..errors import InternalInvariantError
from ..runtime import _enter_trace, _leave
from ..trace import Trace
from .engines import Engine

__all__ = ["drive", "new_trace"]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def new_trace(engine: Engine, meta: dict[str, Any] | None = None) -> Trace:
    definition = engine.definition
    # Trace(machine, engine, started_at, initial, transitions, meta)
    return Trace(definition.name, engine.name, current_clock().time(), definition.initial, None, meta)


async def drive(ctx: Any, engine: Engine, trace: Trace, *, _observed: bool = False) -> Any:
    """Run the machine on ``ctx``; return the outcome value or raise it.

    ``ctx`` is the caller's context object: the driver reads and sets only
    its ``error`` (what a phase raised). ``trace`` is filled in place, so a
    caller holding it sees the whole trace also when this raises.
    """
    if observe.observers and not _observed:  # instrumentation seam: one check when nothing observes
        return await observe.observe_operation(ctx, engine, trace, _observed_drive)
    handlers = engine.handlers
    terminals = engine.terminals
    failure_trigger = engine.failure_trigger
    clock = current_clock().perf_counter_ns  # the real one unless a clock is installed
    record = trace._rows.append
    t0 = clock()
    run = engine.begin(ctx)
    fire = run.fire
    last = None
    token = _enter_trace(trace.meta)  # annotate() writes to this trace
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
                phase_ns = clock() - p0
            else:
                phase_ns = 0  # no handler ran: a decision-only state, or a phase skipped after an error
            try:
                fired, evaluated = fire()
            except Exception as exc:  # a guard raised: the phase failed
                ctx.error = exc
                fired, more = fire()
                evaluated = {**more}
            if fired is None:
                ctx.error = InternalInvariantError(state, evaluated)
                fired, more = fire()
                evaluated = {**evaluated, **more}
            assert fired is not None
            trigger = fired.trigger
            error = _describe(ctx.error) if trigger == failure_trigger and ctx.error else None
            # a TransitionRecord row: (trigger, source, dest, guards, at_ns, phase_ns, error)
            record((trigger, state, fired.dest, evaluated, clock() - t0, phase_ns, error))
            state = fired.dest
            last = fired
    finally:
        _leave(token)
        run.close()
    assert last is not None and last.outcome is not None
    try:
        return engine.outcomes[last.outcome](ctx)
    except BaseException as exc:
        rec = trace.transitions[-1]
        if rec.error is None:
            rec.error = _describe(exc)
        raise


async def _observed_drive(ctx: Any, engine: Engine, trace: Trace) -> Any:
    """:func:`drive` inside an observed operation (the observers already know of it)."""
    return await drive(ctx, engine, trace, _observed=True)
