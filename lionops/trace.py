"""Transition traces: what ran, in what order, and why.

Every ``operate()`` call yields a :class:`Trace`; ``branch.traces`` keeps
them (also when the call raises) and ``operate_traced`` returns
``Traced(result, trace)``. A trace round-trips through JSON.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._json import loads as bounded_json
from .engine.definition import MachineDefinition, default_definition
from .errors import JSONLimitError, TraceFormatError
from .messages import to_jsonable
from .models import ActionRecord
from .runtime import current_runtime

__all__ = ["TransitionRecord", "Trace", "Traced", "TRACE_FORMAT", "annotate", "current_meta"]

def current_meta() -> dict[str, Any] | None:
    """The ``meta`` dict of the trace being recorded in this context, if any
    (the runtime's ``trace_meta``)."""
    return current_runtime().trace_meta


def annotate(**facts: Any) -> None:
    """Record JSON-compatible facts (token usage, latency, ...) on the trace of
    the ``operate()`` call running in this context; a no-op outside one.

    Adapters call this; values must not contain secrets.
    """
    meta = current_runtime().trace_meta
    if meta is not None:
        meta.update(facts)

#: Version of the JSON form of a trace.
TRACE_FORMAT = 1


@dataclass(slots=True)
class TransitionRecord:
    """One fired transition.

    Attributes:
        trigger: the trigger that fired (its name tells the path taken).
        source: the state left; ``dest``: the state entered.
        guards: the guards evaluated in table order, name → value; later
            guards are not evaluated once one holds.
        at_ns: monotonic nanoseconds from the trace start to the end of the
            source state's phase: the clock reading taken as its phase
            handler returns (when no handler runs, as the state is entered);
            the transition fires right after, once the state's guards are
            evaluated.
        phase_ns: nanoseconds spent in the source state's phase handler
            (0 when none ran: a decision-only state, or a phase skipped
            after an error).
        error: ``"ExcType: message"`` when the trigger is ``failed``.
    """

    trigger: str
    source: str
    dest: str
    guards: dict[str, bool]
    at_ns: int = 0
    phase_ns: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "trigger": self.trigger, "source": self.source, "dest": self.dest,
            "guards": dict(self.guards), "at_ns": self.at_ns, "phase_ns": self.phase_ns,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TransitionRecord:
        """Build a record from :meth:`to_dict`'s output. Raises ``ValueError``
        when a field is missing or of the wrong type."""
        _check_record(d)
        return cls(
            trigger=d["trigger"], source=d["source"], dest=d["dest"],
            guards={str(k): bool(v) for k, v in d.get("guards", {}).items()},
            at_ns=int(d.get("at_ns", 0)), phase_ns=int(d.get("phase_ns", 0)),
            error=d.get("error"),
        )


class Trace:
    """The transition trace of one ``operate()`` call.

    Attributes:
        machine: the machine name (``"operate"``).
        engine: the engine that ran it (``"compiled"`` or ``"transitions"``).
        started_at: wall-clock start, seconds since the epoch.
        initial: the state the run started in (``"prepare"``).
        transitions: the fired transitions in order (:class:`TransitionRecord`).
        meta: adapter facts (middle name, token usage, latency), JSON-compatible.
        actions: the :class:`~lionops.models.ActionRecord` of every action
            request ``act()`` decided in this call, in request order (empty
            when no tool phase ran); in JSON under ``"actions"``.

    The driver records each transition as one plain tuple,
    ``(trigger, source, dest, guards, error, at, start)`` (``guards`` shared
    by the rows of many traces, never changed); ``at`` and ``start`` are
    the clock's readings (``perf_counter_ns``) that ended and started the
    source state's phase (the same one when no handler ran), and the trace
    keeps the reading its run started at. Rows become
    :class:`TransitionRecord` objects (each with its own copy of the guards;
    ``at_ns`` and ``phase_ns`` the differences of those readings) the first
    time ``transitions`` is read, so recording stays cheap on the hot path.
    """

    __slots__ = ("machine", "engine", "started_at", "initial", "meta", "actions", "_records", "_rows", "_t0")

    def __init__(
        self,
        machine: str = "operate",
        engine: str = "compiled",
        started_at: float = 0.0,
        initial: str = "prepare",
        transitions: list[TransitionRecord] | None = None,
        meta: dict[str, Any] | None = None,
        actions: list[ActionRecord] | None = None,
    ) -> None:
        self.machine = machine
        self.engine = engine
        self.started_at = started_at
        self.initial = initial
        self.meta: dict[str, Any] = {} if meta is None else meta
        self.actions: list[ActionRecord] = [] if actions is None else actions
        self._records: list[TransitionRecord] = list(transitions) if transitions else []
        #: rows ``(trigger, source, dest, guards, error, at, start)`` not yet materialized
        self._rows: list[tuple[Any, ...]] = []
        #: the clock reading the run started at (set by the driver before it records a row)
        self._t0 = 0

    @property
    def transitions(self) -> list[TransitionRecord]:
        if self._rows:
            t0 = self._t0
            self._records.extend(
                TransitionRecord(trigger, source, dest, dict(guards), at - t0, at - start, error)
                for trigger, source, dest, guards, error, at, start in self._rows
            )
            self._rows.clear()
        return self._records

    @transitions.setter
    def transitions(self, value: list[TransitionRecord]) -> None:
        self._rows.clear()
        self._records = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (self.machine, self.engine, self.started_at, self.initial, self.transitions, self.meta,
                self.actions) == (other.machine, other.engine, other.started_at, other.initial,
                                  other.transitions, other.meta, other.actions)

    __hash__ = None  # type: ignore[assignment]

    @property
    def states(self) -> list[str]:
        """States visited in order, the terminal state included."""
        out = [self.initial]
        out.extend(t.dest for t in self.transitions)
        return out

    @property
    def exit(self) -> str | None:
        """The last trigger (names the path taken), ``None`` if nothing fired."""
        return self.transitions[-1].trigger if self.transitions else None

    @property
    def terminal(self) -> str | None:
        return self.transitions[-1].dest if self.transitions else None

    @property
    def triggers(self) -> list[str]:
        return [t.trigger for t in self.transitions]

    @property
    def error(self) -> str | None:
        for t in reversed(self.transitions):
            if t.error is not None:
                return t.error
        return None

    @property
    def duration_ns(self) -> int:
        return self.transitions[-1].at_ns if self.transitions else 0

    def path(self) -> tuple[tuple[str, str, str], ...]:
        """``(source, trigger, dest)`` per transition: the timing-free identity of the run."""
        return tuple((t.source, t.trigger, t.dest) for t in self.transitions)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "format": TRACE_FORMAT, "machine": self.machine, "engine": self.engine,
            "started_at": self.started_at, "initial": self.initial,
            "states": self.states, "exit": self.exit,
            "transitions": [t.to_dict() for t in self.transitions],
            "meta": to_jsonable(self.meta),
        }
        if self.actions:
            d["actions"] = [a.to_dict() for a in self.actions]
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any], definition: MachineDefinition | None = None) -> Trace:
        """Build a trace from :meth:`to_dict`'s output, checked against its
        machine (``definition``, default: the shipped ``operate`` machine).

        Raises:
            TraceFormatError (a ValueError): not an object, an unsupported format, a missing or
                mistyped field, an unknown machine, state or trigger, a step
                that is not a declared edge or does not start where the
                previous one ended, guards other than those the step's source
                evaluates until the fired one, ``at_ns`` going backwards, a
                non-finite ``started_at``, or ``states``/``exit`` that
                disagree with the transitions.
        """
        _check_trace(d, definition)
        return cls(
            machine=d.get("machine", "operate"), engine=d.get("engine", "compiled"),
            started_at=float(d.get("started_at", 0.0)), initial=d.get("initial", "prepare"),
            transitions=[TransitionRecord.from_dict(t) for t in d.get("transitions", [])],
            meta=dict(d.get("meta", {})),
            actions=_actions(d.get("actions")),
        )

    @classmethod
    def from_json(cls, text: str | bytes, definition: MachineDefinition | None = None) -> Trace:
        """Parse the output of :meth:`to_json` (checked as :meth:`from_dict` says).

        Raises:
            TraceFormatError (a ValueError): not JSON (or nested too deep to read), or not a trace
                of the machine (see :meth:`from_dict`).
        """
        return cls.from_dict(read_json(text), definition)

    def table(self) -> str:
        """A readable table: one row per transition."""
        rows = [("#", "source", "trigger", "dest", "phase ms", "guards evaluated")]
        for i, t in enumerate(self.transitions, 1):
            guards = ", ".join(f"{k}={'T' if v else 'F'}" for k, v in t.guards.items())
            if t.error:
                guards += f"  [{t.error[:80]}]"
            rows.append((str(i), t.source, t.trigger, t.dest, f"{t.phase_ns / 1e6:.3f}", guards))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = []
        for r in rows:
            lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r[:5])) + "  " + r[5])
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Trace({' -> '.join(self.states)}, exit={self.exit!r})"


_new = object.__new__


def read_json(text: str | bytes, what: str = "trace") -> Any:
    """The JSON value of ``text`` (read within the bounded loader's limits);
    :class:`TraceFormatError` when it is not JSON text, not JSON, or too deep or large."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise TraceFormatError(f"a {what} is JSON text (str or bytes), got {type(text).__name__}")
    try:
        return bounded_json(text, what=f"{what} JSON")
    except JSONLimitError as exc:
        raise TraceFormatError(f"{what} JSON is nested too deep to read: {exc}") from None
    except ValueError as exc:
        raise TraceFormatError(f"{what} is not JSON: {exc}") from None


def started_trace(machine: str, engine: str, started_at: float, initial: str, meta: dict[str, Any],
                  actions: list[ActionRecord]) -> Trace:
    """``Trace(machine, engine, started_at, initial, None, meta, actions)``,
    each slot set as ``__init__`` sets it, without the constructor call (an
    operation starts one per call)."""
    trace = _new(Trace)
    trace.machine = machine
    trace.engine = engine
    trace.started_at = started_at
    trace.initial = initial
    trace.meta = meta
    trace.actions = actions
    trace._records = []
    trace._rows = []
    trace._t0 = 0
    return trace


def _fail(where: str, problem: str) -> TraceFormatError:
    return TraceFormatError(f"not a valid trace: {where}{': ' if where else ''}{problem}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _field(d: dict[str, Any], key: str, types: type | tuple[type, ...], where: str, *, required: bool) -> Any:
    if key not in d:
        if required:
            raise _fail(where, f"missing {key!r}")
        return None
    value = d[key]
    # bool is an int to Python, never to a trace
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)) \
            or not isinstance(value, types):
        raise _fail(where, f"{key!r} is {_kind(value)}")
    return value


def _check_record(d: Any, where: str = "transition") -> None:
    """Types of one transition's JSON (:meth:`TransitionRecord.to_dict`)."""
    if not isinstance(d, dict):
        raise _fail(where, f"a transition is a JSON object, got {_kind(d)}")
    for key in ("trigger", "source", "dest"):
        _field(d, key, str, where, required=True)
    guards = _field(d, "guards", dict, where, required=False) or {}
    for name, value in guards.items():
        if not isinstance(value, bool):
            raise _fail(where, f"guard {name!r} is {_kind(value)}, not a boolean")
    for key in ("at_ns", "phase_ns"):
        value = _field(d, key, int, where, required=False)
        if value is not None and value < 0:
            raise _fail(where, f"{key!r} is negative")
    _field(d, "error", (str, type(None)), where, required=False)


def _check_trace(d: Any, definition: MachineDefinition | None) -> None:
    """The JSON of a trace (:meth:`Trace.to_dict`), checked against its machine."""
    if not isinstance(d, dict):
        raise _fail("", f"a trace is a JSON object, got {_kind(d)}")
    fmt = d.get("format", TRACE_FORMAT)
    if fmt != TRACE_FORMAT or type(fmt) is not int:  # noqa: E721 - true and 1.0 are not the format 1
        raise TraceFormatError(f"unsupported trace format {fmt!r}")
    machine = _field(d, "machine", str, "", required=True)
    initial = _field(d, "initial", str, "", required=True)
    rows = _field(d, "transitions", list, "", required=True)
    _field(d, "engine", str, "", required=False)
    started = _field(d, "started_at", (int, float), "", required=False)
    if started is not None and not math.isfinite(started):
        raise _fail("", f"'started_at' is {started!r}, not a time")
    _field(d, "meta", dict, "", required=False)
    if definition is None:
        definition = default_definition()
    if machine != definition.name:
        raise _fail("", f"machine {machine!r} is not {definition.name!r}")
    if initial != definition.initial:
        raise _fail("", f"it starts at {initial!r}, the machine at {definition.initial!r}")
    declared = _declared_edges(definition)
    at, last_ns = initial, 0
    for n, row in enumerate(rows, 1):
        where = f"step {n}"
        _check_record(row, where)
        source, trigger, dest = row["source"], row["trigger"], row["dest"]
        if source != at:
            raise _fail(where, f"it leaves {source!r}, but the previous step ended in {at!r}")
        if (source, trigger, dest) not in declared:
            unknown = [f"state {name!r}" for name in (source, dest) if name not in definition.state_names]
            if trigger not in definition.triggers:
                unknown.append(f"trigger {trigger!r}")
            why = f" (unknown {', '.join(dict.fromkeys(unknown))})" if unknown else ""
            raise _fail(where, f"{source} --{trigger}--> {dest} is not a declared edge of machine {machine!r}{why}")
        if "guards" in row and row["guards"] != (tried := _guards_tried(definition, source, trigger, dest)):
            raise _fail(where, f"guards {row['guards']} are not those {source!r} evaluates before "
                               f"{trigger!r} fires: {tried}")
        at_ns = row.get("at_ns", last_ns)
        if at_ns < last_ns:
            raise _fail(where, f"'at_ns' {at_ns} is before the previous step's {last_ns}")
        at, last_ns = dest, at_ns
    states = [initial, *(row["dest"] for row in rows)]
    if "states" in d and d["states"] != states:
        raise _fail("", "'states' disagrees with the transitions")
    if "exit" in d and d["exit"] != (rows[-1]["trigger"] if rows else None):
        raise _fail("", "'exit' disagrees with the transitions")


@functools.cache
def _guards_tried(definition: MachineDefinition, source: str, trigger: str, dest: str) -> dict[str, bool]:
    """The guards ``source`` evaluates, in table order, until the one of
    ``source --trigger--> dest`` holds: each false but that last one."""
    tried: dict[str, bool] = {}
    for t in definition.candidates(source):
        fired = (t.trigger, t.dest) == (trigger, dest)
        tried[t.guard] = fired
        if fired:
            break
    return tried


@functools.cache
def _declared_edges(definition: MachineDefinition) -> frozenset[tuple[str, str, str]]:
    """``(source, trigger, dest)`` of every edge, the wildcard ones expanded."""
    return frozenset((src, t.trigger, t.dest) for t in definition.transitions for src in definition.sources(t))


def _actions(value: Any) -> list[ActionRecord]:
    """The ``"actions"`` of a trace's JSON form; raises ``ValueError`` unless a list of records."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TraceFormatError(f"trace actions must be a list, got {type(value).__name__}")
    return [ActionRecord.from_dict(a) for a in value]


class Traced(NamedTuple):
    """``(result, trace)`` returned by ``Branch.operate_traced``."""

    result: Any
    trace: Trace
