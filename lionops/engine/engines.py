"""Engines: who decides which guarded trigger fires.

- :class:`TransitionsEngine` is the reference: it fires triggers through
  ``transitions``' own ``Machine`` (conditions, state changes), built once
  per process.
- :class:`CompiledEngine` is the production engine: a dispatch table
  compiled *from that transitions machine* (its events, ordered transitions
  and conditions), each state's rows tried in order by one plain loop.
  tests/unit/test_engines.py proves trace-for-trace equality with the
  reference over every combination of guard values;
  tests/unit/test_engine_paths.py drives both engines through the driver
  over every path and rare firing and compares the runs.

Both share one interface (``begin(ctx)`` → a run with ``state`` and
``fire()``), so the driver's one loop (:func:`lionops.engine.driver.drive`)
runs either and users may select either.
An engine is given every table it runs (the definition, the guards, the
phase handlers, the outcomes, the guard of the failure transition) and knows
nothing of what they mean.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from transitions import Machine

from ..errors import MachineDefinitionError
from .definition import WILDCARD, MachineDefinition, TransitionDef

__all__ = ["Engine", "EngineRun", "TransitionsEngine", "CompiledEngine"]

Guard = Callable[[Any], bool]
Fired = tuple[TransitionDef | None, dict[str, bool]]


class EngineRun(Protocol):
    @property
    def state(self) -> str:
        """The current state."""

    def fire(self) -> Fired:
        """Evaluate the current state's guards in table order; fire the first that holds.

        Returns the fired transition (``None`` if no guard held) and the
        guards evaluated. A guard exception propagates with the state unchanged.
        """

    def close(self) -> None: ...


class Engine(Protocol):
    """What the driver needs of an engine (read-only)."""

    @property
    def name(self) -> str: ...

    @property
    def definition(self) -> MachineDefinition: ...

    @property
    def handlers(self) -> Mapping[str, Callable[..., Any] | None]: ...

    @property
    def outcomes(self) -> Mapping[str, Callable[[Any], Any]]: ...

    @property
    def terminals(self) -> frozenset[str]: ...

    @property
    def failure_trigger(self) -> str: ...

    def begin(self, ctx: Any, initial: str | None = None) -> EngineRun:
        """Start a run on ``ctx`` in ``initial`` (default: the machine's initial state)."""


class _GuardCondition:
    """A transitions condition that evaluates one named guard on the carrier's context."""

    __slots__ = ("guard_name",)

    def __init__(self, guard_name: str) -> None:
        self.guard_name = guard_name

    def __call__(self, event_data: Any) -> bool:
        return event_data.model.evaluate(self.guard_name)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"guard:{self.guard_name}"


class _Carrier:
    """The object ``transitions`` decorates; holds the context, never is it.

    Trigger methods (``skip_validation`` ...) land here, so they cannot
    shadow context fields of the same name.
    """

    def __init__(self, ctx: Any, guards: Mapping[str, Guard]) -> None:
        self.ctx = ctx
        self.guards = guards
        self.evaluated: dict[str, bool] = {}

    def evaluate(self, guard_name: str) -> bool:
        value = bool(self.guards[guard_name](self.ctx))
        self.evaluated[guard_name] = value
        return value


def _check_names(definition: MachineDefinition, guards: Mapping[str, Guard],
                 handlers: Mapping[str, Any], outcomes: Mapping[str, Any]) -> None:
    missing = [
        *(f"guard {g!r}" for g in sorted(definition.guard_names - set(guards))),
        *(f"phase handler {h!r}" for h in sorted(definition.handler_names - set(handlers))),
        *(f"outcome {o!r}" for o in sorted(definition.outcome_names - set(outcomes))),
    ]
    if missing:
        raise MachineDefinitionError(f"machine {definition.name!r} names what code lacks: {', '.join(missing)}")


def _failure_trigger(definition: MachineDefinition, failure_guard: str) -> str:
    for t in definition.transitions:
        if t.source == WILDCARD and t.guard == failure_guard:
            return t.trigger
    raise MachineDefinitionError(f"the definition declares no wildcard failure transition guarded by {failure_guard}")


class _EngineBase:
    name = "base"

    def __init__(
        self,
        definition: MachineDefinition,
        *,
        guards: Mapping[str, Guard],
        phases: Mapping[str, Any],
        outcomes: Mapping[str, Callable[[Any], Any]],
        failure_guard: str,
    ) -> None:
        """``failure_guard`` names the guard of the wildcard transition fired
        when a phase raises; the other tables map the definition's names to code."""
        self.definition = definition
        self.guards: Mapping[str, Guard] = dict(guards)
        phase_table = dict(phases)
        self.outcomes = dict(outcomes)
        _check_names(self.definition, self.guards, phase_table, self.outcomes)
        self.handlers = {
            s.name: (phase_table[s.handler] if s.handler else None) for s in self.definition.states
        }
        self.terminals = frozenset(self.definition.terminals)
        self.failure_trigger = _failure_trigger(self.definition, failure_guard)
        self.machine = self._build_machine()

    def _build_machine(self) -> Machine:
        d = self.definition
        m = Machine(
            model=None, states=d.state_names, initial=d.initial,
            auto_transitions=False, send_event=True, ignore_invalid_triggers=False,
        )
        for t in d.transitions:
            sources: list[Any] = list(d.sources(t))
            m.add_transition(t.trigger, sources, t.dest, conditions=[_GuardCondition(t.guard)])
        return m

    def __repr__(self) -> str:
        return f"{type(self).__name__}(machine={self.definition.name!r})"


class _TransitionsRun:
    __slots__ = ("engine", "carrier")

    def __init__(self, engine: TransitionsEngine, ctx: Any, initial: str) -> None:
        self.engine = engine
        self.carrier = _Carrier(ctx, engine.guards)
        with engine._lock:
            engine.machine.add_model(self.carrier, initial=initial)

    @property
    def state(self) -> str:
        return self.carrier.state  # type: ignore[attr-defined,no-any-return]

    def fire(self) -> Fired:
        self.carrier.evaluated = {}
        source = self.state
        for trigger in self.engine.order[source]:
            if self.carrier.trigger(trigger):  # type: ignore[attr-defined]
                return self.engine.by_key[(source, trigger)], self.carrier.evaluated
        return None, self.carrier.evaluated

    def close(self) -> None:
        with self.engine._lock:
            self.engine.machine.remove_model(self.carrier)


class TransitionsEngine(_EngineBase):
    """Reference engine: every trigger goes through ``transitions.Machine``."""

    name = "transitions"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        d = self.definition
        self._lock = threading.Lock()
        self.order = {s: [t.trigger for t in d.candidates(s)] for s in d.nonterminal}
        self.by_key = {(s, t.trigger): t for s in d.nonterminal for t in d.candidates(s)}

    def begin(self, ctx: Any, initial: str | None = None) -> _TransitionsRun:
        return _TransitionsRun(self, ctx, initial or self.definition.initial)


@dataclass(frozen=True, slots=True)
class _Row:
    transition: TransitionDef
    guard_name: str
    guard: Guard


#: A compiled row as :meth:`_CompiledRun.fire` reads it: the guard, the
#: transition it fires, and the guards evaluated when it fires (each earlier
#: row's ``False``, its own ``True``: built once, shared by every run, never
#: changed; the trace copies it when it makes the row a record).
_FlatRow = tuple[Guard, TransitionDef, dict[str, bool]]


class _CompiledRun:
    __slots__ = ("table", "ctx", "state")

    def __init__(self, table: Mapping[str, tuple[_FlatRow, ...]], ctx: Any, initial: str) -> None:
        self.table = table
        self.ctx = ctx
        self.state = initial

    def fire(self) -> Fired:
        """The state's rows in table order: the first guard that holds fires
        (the run enters its destination); later guards are not evaluated."""
        ctx = self.ctx
        rows = self.table[self.state]
        for guard, transition, evaluated in rows:
            if guard(ctx):
                self.state = transition.dest
                return transition, evaluated
        return None, dict.fromkeys(rows[-1][2], False)  # every row's guard, none held

    def close(self) -> None:
        return None


def _flat(rows: tuple[_Row, ...]) -> tuple[_FlatRow, ...]:
    names = [r.guard_name for r in rows]
    return tuple(
        (r.guard, r.transition, {**dict.fromkeys(names[:i], False), r.guard_name: True})
        for i, r in enumerate(rows)
    )


class CompiledEngine(_EngineBase):
    """Production engine: a dispatch table compiled from the transitions machine."""

    name = "compiled"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.table = self.compile(self.machine)
        #: state -> its rows as :meth:`_CompiledRun.fire` reads them
        self._rows = {state: _flat(rows) for state, rows in self.table.items()}

    def compile(self, machine: Machine) -> dict[str, tuple[_Row, ...]]:
        """Read states, events, ordered transitions and conditions off ``machine``."""
        d = self.definition
        by_key = {(s, t.trigger): t for s in d.nonterminal for t in d.candidates(s)}
        table: dict[str, tuple[_Row, ...]] = {}
        for state in machine.states:
            if state in self.terminals:
                continue
            rows: list[_Row] = []
            for trigger, event in machine.events.items():
                for tr in event.transitions.get(state, []):
                    (cond,) = tr.conditions
                    func = cond.func
                    assert isinstance(func, _GuardCondition)  # every condition is one (see _build_machine)
                    gname = func.guard_name
                    tdef = by_key[(state, trigger)]
                    if tdef.dest != tr.dest:  # pragma: no cover - guards against drift
                        raise MachineDefinitionError(f"compiled dest differs for {state}/{trigger}")
                    rows.append(_Row(tdef, gname, self.guards[gname]))
            table[state] = tuple(rows)
        return table

    def begin(self, ctx: Any, initial: str | None = None) -> _CompiledRun:
        return _CompiledRun(self._rows, ctx, initial or self.definition.initial)

