"""The operate machine: the ADR-0022 tables bound to the generic engine.

``states/operate.toml`` names each state's phase handler, each transition's
guard and each exit's outcome; this module gives the engine those tables
(:data:`PHASES`, :data:`~lionops.pipeline.validate.GUARDS`,
:data:`~lionops.pipeline.outcomes.OUTCOMES`) and runs one operation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from ..clock import current_clock
from ..engine import engines
from ..engine.definition import MachineDefinition, default_definition
from ..engine.driver import drive
from ..engine.engines import Engine
from ..errors import ConfigurationError, did_you_mean
from ..runtime import ClockLike
from ..trace import Trace, Traced, started_trace
from . import adapter, enrich, prepare, resume, schema
from .context import OperationContext
from .outcomes import OUTCOMES
from .validate import GUARDS

__all__ = [
    "PHASES", "FAILURE_GUARD", "CompiledEngine", "TransitionsEngine", "ENGINES", "get_engine",
    "resolve_engine", "begin_operation", "start_operation", "run_operation",
]

#: handler name (as in states/operate.toml) -> coroutine function of the context.
PHASES: dict[str, Callable[[OperationContext], Any]] = {
    "prepare": prepare.phase, "schema": schema.phase, "adapter": adapter.phase,
    "act": resume.act_phase, "enrich": enrich.phase,
}

#: The guard of the wildcard transition an exception leaving a phase fires.
FAILURE_GUARD = "phase_raised"


def _tables(definition: MachineDefinition | None, guards: Mapping[str, Any] | None,
            phases: Mapping[str, Any] | None, outcomes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "definition": definition or default_definition(),
        "guards": GUARDS if guards is None else guards,
        "phases": PHASES if phases is None else phases,
        "outcomes": OUTCOMES if outcomes is None else outcomes,
        "failure_guard": FAILURE_GUARD,
    }


class CompiledEngine(engines.CompiledEngine):
    """The compiled engine over the operate machine (any table may be replaced)."""

    def __init__(self, definition: MachineDefinition | None = None, *, guards: Mapping[str, Any] | None = None,
                 phases: Mapping[str, Any] | None = None, outcomes: Mapping[str, Any] | None = None) -> None:
        super().__init__(**_tables(definition, guards, phases, outcomes))


class TransitionsEngine(engines.TransitionsEngine):
    """The reference engine over the operate machine (any table may be replaced)."""

    def __init__(self, definition: MachineDefinition | None = None, *, guards: Mapping[str, Any] | None = None,
                 phases: Mapping[str, Any] | None = None, outcomes: Mapping[str, Any] | None = None) -> None:
        super().__init__(**_tables(definition, guards, phases, outcomes))


ENGINES: dict[str, type[CompiledEngine] | type[TransitionsEngine]] = {
    "compiled": CompiledEngine, "transitions": TransitionsEngine,
}


@functools.cache
def get_engine(name: str = "compiled") -> Engine:
    """The process-wide engine of that name over the shipped definition.

    Raises ``ValueError`` for an unknown name (known: ``compiled``, ``transitions``).
    """
    try:
        cls = ENGINES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown engine {name!r}{did_you_mean(name, ENGINES)}; known: {sorted(ENGINES)}") from None
    return cls()


def resolve_engine(engine: Engine | str | None, default: Engine | str | None = None) -> Engine:
    """``engine``, else ``default``, else the compiled engine; a name is looked up."""
    chosen = engine if engine is not None else default
    if chosen is None:
        return get_engine()
    if isinstance(chosen, str):
        return get_engine(chosen)
    return chosen


def begin_operation(ctx: OperationContext, engine: Engine | str | None = None) -> tuple[Engine, Trace, ClockLike]:
    """The engine (``engine``, else the branch's, see :func:`resolve_engine`),
    the trace and the current clock of an operation on ``ctx`` starting now."""
    chosen = resolve_engine(engine, ctx.branch.engine)
    clock = current_clock()  # read once for the trace's start and its timings
    definition = chosen.definition
    # the same list as ctx.actions: act() appends its records to it
    trace = started_trace(definition.name, chosen.name, clock.time(), definition.initial, ctx.meta, ctx.actions)
    return chosen, trace, clock


def start_operation(ctx: OperationContext,
                    engine: Engine | str | None = None) -> tuple[Coroutine[Any, Any, Any], Trace]:
    """The run of ``ctx`` on ``engine`` (default: the branch's), to be
    awaited, and its trace.

    The run appends the trace to ``ctx.branch.traces`` and applies the
    branch's history limits at its end in every case, also when it raises.
    Every operation runs here, through :func:`~lionops.engine.driver.drive`;
    awaiting the run is one coroutine frame (the driver's) for the whole
    operation.
    """
    chosen, trace, clock = begin_operation(ctx, engine)
    return drive(ctx, chosen, trace, clock=clock, keep=ctx.branch), trace


async def run_operation(ctx: OperationContext, engine: Engine | str | None = None) -> Traced:
    """Drive ``ctx`` to a terminal state on ``engine`` (default: the branch's):
    :func:`start_operation` awaited, its result with its trace.

    The trace is appended to ``ctx.branch.traces`` and the branch's history
    limits are applied in every case, also when this raises.
    """
    run, trace = start_operation(ctx, engine)
    return _traced(Traced, (await run, trace))


#: ``Traced(result, trace)`` without the generated ``__new__``'s frame.
_traced = tuple.__new__
