"""Transition traces: what ran, in what order, and why.

Every ``operate()`` call yields a :class:`Trace`; ``branch.traces`` keeps
them (also when the call raises) and ``operate_traced`` returns
``Traced(result, trace)``. A trace round-trips through JSON.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from .messages import to_jsonable
from .models import ActionRecord

__all__ = ["TransitionRecord", "Trace", "Traced", "TRACE_FORMAT", "annotate", "current_meta"]

_meta: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("lionops_trace_meta", default=None)


def current_meta() -> dict[str, Any] | None:
    """The ``meta`` dict of the trace being recorded in this context, if any."""
    return _meta.get()


def annotate(**facts: Any) -> None:
    """Record JSON-compatible facts (token usage, latency, ...) on the trace of
    the ``operate()`` call running in this context; a no-op outside one.

    Adapters call this; values must not contain secrets.
    """
    meta = _meta.get()
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
        at_ns: monotonic nanoseconds from the trace start to the firing.
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

    The driver records each transition as a plain row; rows become
    :class:`TransitionRecord` objects the first time ``transitions`` is read,
    so recording stays cheap on the hot path.
    """

    __slots__ = ("machine", "engine", "started_at", "initial", "meta", "actions", "_records", "_rows")

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
        #: rows ``(trigger, source, dest, guards, at_ns, phase_ns, error)`` not yet materialized
        self._rows: list[tuple[Any, ...]] = []

    @property
    def transitions(self) -> list[TransitionRecord]:
        if self._rows:
            self._records.extend(TransitionRecord(*row) for row in self._rows)
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
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        if d.get("format", TRACE_FORMAT) != TRACE_FORMAT:
            raise ValueError(f"unsupported trace format {d.get('format')!r}")
        return cls(
            machine=d.get("machine", "operate"), engine=d.get("engine", "compiled"),
            started_at=float(d.get("started_at", 0.0)), initial=d.get("initial", "prepare"),
            transitions=[TransitionRecord.from_dict(t) for t in d.get("transitions", [])],
            meta=dict(d.get("meta", {})),
            actions=_actions(d.get("actions")),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Trace:
        """Parse the output of :meth:`to_json`. Raises ``ValueError`` on bad input."""
        return cls.from_dict(json.loads(text))

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


def _actions(value: Any) -> list[ActionRecord]:
    """The ``"actions"`` of a trace's JSON form; raises ``ValueError`` unless a list of records."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"trace actions must be a list, got {type(value).__name__}")
    return [ActionRecord.from_dict(a) for a in value]


class Traced(NamedTuple):
    """``(result, trace)`` returned by ``Branch.operate_traced``."""

    result: Any
    trace: Trace
