"""Load ``states/operate.toml``: the machine as data (the single source of truth).

The file ships inside the wheel as ``lionops/_states/operate.toml``; in a
source checkout it is read from ``states/`` at the repository root.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MachineDefinitionError, UnknownStateError

__all__ = ["StateDef", "TransitionDef", "MachineDefinition", "load_definition",
           "default_definition", "run_definition", "definition_path", "WILDCARD"]

WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class StateDef:
    name: str
    adr: str
    summary: str
    handler: str | None = None
    terminal: bool = False
    touches: str = ""


@dataclass(frozen=True, slots=True)
class TransitionDef:
    trigger: str
    source: str
    dest: str
    guard: str
    adr: str
    summary: str
    outcome: str | None = None
    caller_gets: str = ""


@dataclass(frozen=True, slots=True)
class MachineDefinition:
    """A parsed, checked machine definition."""

    name: str
    adr: str
    initial: str
    terminals: tuple[str, ...]
    states: tuple[StateDef, ...]
    transitions: tuple[TransitionDef, ...]
    source: str = ""

    @property
    def state_names(self) -> list[str]:
        return [s.name for s in self.states]

    @property
    def nonterminal(self) -> list[str]:
        return [s.name for s in self.states if not s.terminal]

    def state(self, name: str) -> StateDef:
        for s in self.states:
            if s.name == name:
                return s
        raise UnknownStateError(name, [s.name for s in self.states])

    def sources(self, t: TransitionDef) -> list[str]:
        return self.nonterminal if t.source == WILDCARD else [t.source]

    def candidates(self, state: str) -> list[TransitionDef]:
        """Transitions tried in ``state``, in table order."""
        return [t for t in self.transitions if state in self.sources(t)]

    @property
    def guard_names(self) -> set[str]:
        return {t.guard for t in self.transitions}

    @property
    def handler_names(self) -> set[str]:
        return {s.handler for s in self.states if s.handler}

    @property
    def outcome_names(self) -> set[str]:
        return {t.outcome for t in self.transitions if t.outcome}

    @property
    def triggers(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in self.transitions:
            seen.setdefault(t.trigger, None)
        return list(seen)


def definition_path(name: str = "operate") -> Path:
    """Where the shipped definition ``<name>.toml`` lives (wheel first, then
    source checkout): ``operate`` (one operation) or ``run`` (the loop of rounds)."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_states" / f"{name}.toml"
    if packaged.exists():
        return packaged
    return here.parent / "states" / f"{name}.toml"


def _check(d: MachineDefinition) -> None:
    names = d.state_names
    if len(set(names)) != len(names):
        raise MachineDefinitionError("duplicate state names")
    if d.initial not in names:
        raise MachineDefinitionError(f"initial state {d.initial!r} is not declared")
    for term in d.terminals:
        if term not in names or not d.state(term).terminal:
            raise MachineDefinitionError(f"terminal {term!r} must be a declared state with terminal = true")
    seen: set[tuple[str, str]] = set()
    for t in d.transitions:
        if t.source != WILDCARD and t.source not in names:
            raise MachineDefinitionError(f"transition {t.trigger!r}: unknown source {t.source!r}")
        if t.source != WILDCARD and d.state(t.source).terminal:
            raise MachineDefinitionError(f"transition {t.trigger!r} leaves terminal state {t.source!r}")
        if t.dest not in names:
            raise MachineDefinitionError(f"transition {t.trigger!r}: unknown dest {t.dest!r}")
        if d.state(t.dest).terminal and not t.outcome:
            raise MachineDefinitionError(f"transition {t.trigger!r} enters a terminal state without an outcome")
        for src in d.sources(t):
            if (src, t.trigger) in seen:
                raise MachineDefinitionError(f"trigger {t.trigger!r} declared twice from {src!r}")
            seen.add((src, t.trigger))
    for s in d.nonterminal:
        if not d.candidates(s):
            raise MachineDefinitionError(f"state {s!r} has no outgoing transition")


def parse_definition(data: dict[str, Any], source: str = "") -> MachineDefinition:
    """Build and check a definition from parsed TOML data. Raises ``ValueError``."""
    m = data.get("machine", {})
    try:
        states = tuple(
            StateDef(
                name=s["name"], adr=s.get("adr", ""), summary=s.get("summary", ""),
                handler=s.get("handler") or None, terminal=bool(s.get("terminal", False)),
                touches=s.get("touches", ""),
            )
            for s in data.get("states", [])
        )
        transitions = tuple(
            TransitionDef(
                trigger=t["trigger"], source=t["source"], dest=t["dest"], guard=t["guard"],
                adr=t.get("adr", ""), summary=t.get("summary", ""),
                outcome=t.get("outcome") or None, caller_gets=t.get("caller_gets", ""),
            )
            for t in data.get("transitions", [])
        )
        d = MachineDefinition(
            name=m["name"], adr=m.get("adr", ""), initial=m["initial"],
            terminals=tuple(m.get("terminals", ())), states=states,
            transitions=transitions, source=source,
        )
    except KeyError as exc:
        raise MachineDefinitionError(f"machine definition {source or ''} lacks key {exc}") from None
    _check(d)
    return d


def load_definition(path: str | Path | None = None) -> MachineDefinition:
    """Read and check a machine definition (default: the shipped ``operate.toml``)."""
    p = Path(path) if path is not None else definition_path()
    with p.open("rb") as fh:
        data = tomllib.load(fh)
    return parse_definition(data, source=str(p))


@functools.cache
def default_definition() -> MachineDefinition:
    """The shipped definition, loaded once per process."""
    return load_definition()


@functools.cache
def run_definition() -> MachineDefinition:
    """The shipped ``run`` machine (``states/run.toml``), loaded once per process."""
    return load_definition(definition_path("run"))
