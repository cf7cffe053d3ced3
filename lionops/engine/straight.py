"""The driver's loop over one compiled table, written out once as one coroutine.

:func:`lionops.engine.driver.drive` runs any engine through its generic
loop: await the state's phase handler, ``fire()`` the engine, record a row.
A :class:`~lionops.engine.engines.CompiledEngine` knows its whole table when
it is built, so :func:`whole_run` writes that loop out for it, state by state
(as ``dataclasses`` generates ``__init__``): the state's handler awaited, its
guards called in table order, the row of the first that holds recorded with
its names and evaluated guards as literals. The two rare firings, a guard
that raises and a state where no guard holds, go through :func:`settle` and
:func:`record_row`, which the generic loop uses too, so both loops give the
same rows, the same errors and the same exceptions.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import InternalInvariantError
from ..runtime import _enter_trace, _leave
from ..text import safe_str
from .definition import TransitionDef

if TYPE_CHECKING:
    from ..runtime import ClockLike
    from ..trace import Trace
    from .engines import CompiledEngine, Fired

__all__ = ["describe", "settle", "record_row", "whole_run", "WholeRun"]

#: ``await run(ctx, trace, clock)``: what :func:`~lionops.engine.driver.drive`
#: does on ``ctx`` without observers (``clock``: the current one): the machine
#: run from its initial state, its rows recorded on ``trace``; returns the
#: outcome's value or raises it.
WholeRun = Callable[[Any, "Trace", "ClockLike"], Awaitable[Any]]


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


def record_row(record: Callable[[tuple[Any, ...]], None], ctx: Any, state: str, fired: TransitionDef,
               evaluated: dict[str, bool], at: int, start: int, failure_trigger: str) -> None:
    """Record the row of ``fired`` leaving ``state`` (a trace row: see
    :class:`~lionops.trace.Trace`; ``at`` and ``start``: the clock readings
    that ended and started the state's phase)."""
    trigger = fired.trigger
    error = describe(ctx.error) if trigger == failure_trigger and ctx.error else None
    record(((trigger, state, fired.dest, evaluated, error), at, start))


def _rare(engine: CompiledEngine, ctx: Any, state: str, exc: Exception | None, evaluated: dict[str, bool],
          at: int, start: int, record: Callable[[tuple[Any, ...]], None]) -> TransitionDef:
    """A rare firing of the generated loop, as the generic loop settles and records it."""
    fired, evaluated = settle(ctx, state, engine.begin(ctx, state).fire, evaluated, exc)
    record_row(record, ctx, state, fired, evaluated, at, start, engine.failure_trigger)
    return fired


def whole_run(engine: CompiledEngine) -> WholeRun:
    """What the driver does over ``engine``'s table, as one coroutine function.

    As :func:`~lionops.engine.driver.drive` does: the clock's start reading,
    the trace's meta made the runtime's for the loop (``annotate()`` writes
    to it), then the outcome of the exit taken called on the context, an
    exception it raises noted on the last row (unless that row has an error).
    The loop is one ``if state == ...:`` block per non-terminal state, in the order of the
    definition, inside ``while True`` (a transition to a later block falls
    through to it, one to an earlier block goes round the loop). A block:

    - awaits the state's phase handler unless the context already holds an
      error (what it raises becomes the error), timing it as ``phase_ns``;
      the clock reading that ends the phase (or, when no handler runs, one
      taken as the block starts) is the row's ``at``, the one that starts
      it its ``start`` (the trace makes them ``at_ns`` and ``phase_ns``);
    - calls the state's guards in table order; the first that holds records
      its row and enters its destination (or leaves the loop with the
      transition's outcome when the destination is terminal). The row's constant part (trigger, source,
      destination, evaluated guards, no error) is built once, here; the
      trace copies the guards when it makes the row a record;
    - hands a guard's exception, or no guard holding, to :func:`_rare`.

    A guard that holds moves ``state`` off the block before its row is
    recorded: to the destination, or to ``HELD`` for a transition back into
    the same state (set to it once the row is recorded); so does handing a
    state to :func:`_rare`. The block's ``except`` re-raises whenever
    ``state`` has moved: an exception after a guard held (the error text,
    the recording) or from a rare firing's own evaluation is not taken
    for a guard's first one, it propagates, as it does from the generic loop.
    Guard, state and trigger names go into the source only as ``repr``
    literals; the functions and row parts are names of the generated module's
    namespace.
    """
    definition = engine.definition
    namespace: dict[str, Any] = {
        "describe": describe, "terminals": engine.terminals, "rare": functools.partial(_rare, engine),
        "outcomes": engine.outcomes, "HELD": object(), "enter": _enter_trace, "leave": _leave,
    }
    lines = [f"    state = {definition.initial!r}", "    while True:"]
    for i, state in enumerate(definition.nonterminal):
        handler = engine.handlers[state]
        rows = engine._flat[state]
        start = "at"  # the phase's start reading: the same as its end when no handler runs
        lines.append(f"        if state == {state!r}:")
        if handler is not None:
            namespace[f"handler{i}"] = handler
            start = "p0"
            lines += [
                "            if ctx.error is None:",
                "                p0 = clock()",
                "                try:",
                f"                    await handler{i}(ctx)",
                "                except BaseException as exc:  # recorded, then re-raised by the outcome",
                "                    ctx.error = exc",
                "                at = clock()",
                "            else:",
                "                p0 = at = clock()",
            ]
        else:
            lines.append("            at = clock()")
        lines.append("            try:")
        seen: list[str] = []
        for j, (guard_name, guard, transition, dest) in enumerate(rows):
            namespace[f"guard{i}_{j}"] = guard
            evaluated = {**dict.fromkeys(seen, False), guard_name: True}
            moved = "HELD" if dest == state else repr(dest)
            lines += [f"                {'if' if j == 0 else 'elif'} guard{i}_{j}(ctx):",
                      f"                    state = {moved}"]
            if transition.trigger == engine.failure_trigger:
                key = f"({transition.trigger!r}, {state!r}, {dest!r}, {evaluated!r}, error)"
                lines += ["                    error = describe(ctx.error) if ctx.error else None",
                          f"                    record(({key}, at, {start}))"]
            else:
                namespace[f"row{i}_{j}"] = (transition.trigger, state, dest, evaluated, None)
                lines.append(f"                    record((row{i}_{j}, at, {start}))")
            if dest in engine.terminals:
                namespace[f"outcome{i}_{j}"] = engine.outcomes[transition.outcome or ""]
                lines += [f"                    outcome = outcome{i}_{j}", "                    break"]
            elif dest == state:
                lines.append(f"                    state = {dest!r}")
            seen.append(guard_name)
        none_held = ", ".join(f"{name!r}: False" for name in seen)
        settled = [
            "                    state = fired.dest",
            "                    if state in terminals:",
            "                        outcome = outcomes[fired.outcome]",
            "                        break",
        ]
        lines += [
            "                else:",
            "                    state = HELD",
            f"                    fired = rare(ctx, {state!r}, None, {{{none_held}}}, at, {start}, record)",
            *settled,
            "            except Exception as exc:",
            f"                if state != {state!r}:",
            "                    raise  # not a guard's first exception",
            f"                fired = rare(ctx, {state!r}, exc, {{}}, at, {start}, record)",
            *(line[4:] for line in settled),
        ]
    source = "\n".join([
        "async def run(ctx, trace, source):",
        "    clock = source.perf_counter_ns",
        "    record = trace._rows.append",
        "    trace._t0 = clock()",
        "    token = enter(trace.meta)  # annotate() writes to this trace",
        "    try:",
        *(f"    {line}" for line in lines),
        "    finally:",
        "        leave(token)",
        "    try:",
        "        return outcome(ctx)",
        "    except BaseException as exc:",
        "        rec = trace.transitions[-1]",
        "        if rec.error is None:",
        "            rec.error = describe(exc)",
        "        raise",
    ])
    exec(source, namespace)  # noqa: S102 - source built from repr literals only
    run: WholeRun = namespace["run"]
    run.__qualname__ = f"run_{definition.name}"
    run.__doc__ = source  # what runs, for a reader in a debugger
    return run
