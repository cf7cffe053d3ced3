"""State diagrams and their doc page, rendered from ``states/`` alone.

``python -m lionops diagram`` (``make diagrams``) writes into ``diagrams/``:

- ``operate.mmd``: a Mermaid ``stateDiagram-v2`` of every state, terminal and
  trigger, each edge labelled ``trigger [guard]``;
- ``operate.dot``: the same graph for Graphviz;
- ``operate.md``: the doc page (diagram, states, transitions, exit paths, the
  safety invariants from ``states/invariants.toml`` with the tests proving them);
- ``operate.svg``: ``operate.dot`` laid out by Graphviz ``dot`` when installed.

``--check DIR`` exits 1 when the text files in DIR differ from a fresh
rendering. The SVG is left out of that check: its layout and header depend on
the Graphviz version, while ``operate.dot`` (checked) fixes its content.

``--trace run.json`` draws a recorded :class:`~lionops.trace.Trace` on the same
diagram: visited states highlighted, taken edges numbered in the order fired.

The Mermaid text is rendered here from the definition rather than through
``transitions``' ``GraphMachine(graph_engine="mermaid")``, which the tests use
as a cross-check of the edge set: that backend styles the model's current
state, knows no terminal states, merges parallel edges into one label (so a
taken edge cannot be numbered on its own) and does not sort the wildcard
``failed`` edges apart from the main flow.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..engine.definition import WILDCARD, MachineDefinition, TransitionDef, definition_path, load_definition
from ..errors import TraceFormatError
from ..trace import Trace

__all__ = [
    "Invariant", "Edge", "Overlay", "load_invariants", "edges", "exit_paths",
    "render_mermaid", "render_dot", "render_doc", "render_trace_doc", "render_trace_files", "render_all",
    "render_svg", "stale_files", "add_parser",
]

INVARIANTS_FILE = "invariants.toml"
#: The invariants of the run machine, beside ``run.toml``.
RUN_INVARIANTS_FILE = "run_invariants.toml"

# Words the stateDiagram grammar reserves; a state of that name gets a prefixed id.
_MERMAID_RESERVED = frozenset({
    "state", "note", "end", "class", "classdef", "style", "direction", "click",
    "hide", "scale", "as", "left", "right", "of", "default",
})


@dataclass(frozen=True, slots=True)
class Invariant:
    """One safety invariant (``states/invariants.toml``) and the tests (``path::function``) that prove it."""

    number: int
    statement: str
    tests: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Edge:
    """One drawn edge: a transition from one concrete source state."""

    source: str
    transition: TransitionDef

    @property
    def dest(self) -> str:
        return self.transition.dest

    @property
    def trigger(self) -> str:
        return self.transition.trigger

    @property
    def wildcard(self) -> bool:
        return self.transition.source == WILDCARD

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.trigger, self.dest)


@dataclass(frozen=True, slots=True)
class Overlay:
    """A trace drawn on the diagram: step numbers per taken edge, states visited."""

    steps: Mapping[tuple[str, str, str], tuple[int, ...]]
    visited: tuple[str, ...]
    terminal: str | None
    exit: str | None

    @classmethod
    def from_trace(cls, d: MachineDefinition, trace: Trace) -> Overlay:
        """Raises ``ValueError`` when the trace does not run on ``d``."""
        if trace.machine != d.name:
            raise TraceFormatError(f"trace is of machine {trace.machine!r}, not {d.name!r}")
        if trace.initial != d.initial:
            raise TraceFormatError(f"trace starts at {trace.initial!r}, the machine at {d.initial!r}")
        declared = {e.key for e in edges(d)}
        steps: dict[tuple[str, str, str], tuple[int, ...]] = {}
        for n, rec in enumerate(trace.transitions, 1):
            key = (rec.source, rec.trigger, rec.dest)
            if key not in declared:
                raise TraceFormatError(f"step {n}: {rec.source} --{rec.trigger}--> {rec.dest} is not a declared edge")
            steps[key] = (*steps.get(key, ()), n)
        return cls(steps=steps, visited=tuple(dict.fromkeys(trace.states)),
                   terminal=trace.terminal, exit=trace.exit)


def _source_name(d: MachineDefinition) -> str:
    return f"states/{Path(d.source).name}" if d.source else "states/"


def load_invariants(path: str | Path | None = None) -> tuple[Invariant, ...]:
    """Read ``states/invariants.toml`` (default: beside the shipped definition)."""
    p = Path(path) if path is not None else definition_path().parent / INVARIANTS_FILE
    with p.open("rb") as fh:
        data = tomllib.load(fh)
    return tuple(
        Invariant(number=int(i["number"]), statement=i["statement"], tests=tuple(i.get("tests", ())))
        for i in data.get("invariants", [])
    )


def edges(d: MachineDefinition) -> list[Edge]:
    """Every edge in table order; the wildcard edges last, one per non-terminal state."""
    concrete = [Edge(t.source, t) for t in d.transitions if t.source != WILDCARD]
    wild = [Edge(s, t) for t in d.transitions if t.source == WILDCARD for s in d.nonterminal]
    return concrete + wild


def exit_paths(d: MachineDefinition) -> list[list[TransitionDef]]:
    """Every simple path from the initial state to a terminal, without wildcard edges.

    Paths come in table order of their transitions, so early returns come
    before the transitions that lead further.
    """
    out: list[list[TransitionDef]] = []

    def walk(state: str, path: list[TransitionDef], seen: set[str]) -> None:
        if state in d.terminals:
            out.append(path)
            return
        for t in d.candidates(state):
            if t.source != WILDCARD and t.dest not in seen:
                walk(t.dest, [*path, t], seen | {t.dest})

    walk(d.initial, [], {d.initial})
    return out


# ------------------------------------------------------------------ Mermaid

def _mid(name: str) -> str:
    """The Mermaid id of a state: its name when that is a plain, unreserved identifier."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) and name.lower() not in _MERMAID_RESERVED:
        return name
    return "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _mtext(text: str) -> str:
    """Text safe inside a Mermaid label or note (one line, no separators or entities)."""
    return re.sub(r"\s+", " ", text).replace(";", ",").replace("#", "no. ").replace('"', "'").strip()


def _step_prefix(overlay: Overlay | None, key: tuple[str, str, str]) -> str:
    if overlay is None or key not in overlay.steps:
        return ""
    return "(" + ",".join(str(n) for n in overlay.steps[key]) + ") "


def _state_label(d: MachineDefinition, name: str) -> str:
    s = d.state(name)
    return f"{name} · {s.adr}" if s.adr else name


def render_mermaid(d: MachineDefinition, overlay: Overlay | None = None, *, note: str = "") -> str:
    """The Mermaid stateDiagram-v2 of ``d``, with ``overlay`` drawn on it when given."""
    wild = [t for t in d.transitions if t.source == WILDCARD]
    lines = [
        f"%% {d.name} machine ({d.adr}), generated from {_source_name(d)}: do not edit, run make diagrams.",
    ]
    if note:
        lines.append(f"%% {_mtext(note)}")
    lines += ["stateDiagram-v2", "    classDef terminal font-weight:bold,stroke-width:3px"]
    if overlay is not None:
        lines += [
            "    classDef visited fill:#d9f2d9,stroke:#2e7d32,stroke-width:2px",
            "    classDef unvisited fill:#f4f4f4,stroke:#bbbbbb,color:#9e9e9e",
            "    classDef exit fill:#ffe0b2,stroke:#e65100,stroke-width:3px,font-weight:bold",
        ]
    for s in d.states:
        lines.append(f'    state "{_mtext(_state_label(d, s.name))}" as {_mid(s.name)}')
    lines.append(f"    [*] --> {_mid(d.initial)}")
    for e in edges(d):
        label = _mtext(f"{_step_prefix(overlay, e.key)}{e.trigger} [{e.transition.guard}]")
        lines.append(f"    {_mid(e.source)} --> {_mid(e.dest)}: {label}")
    for term in d.terminals:
        lines.append(f"    {_mid(term)} --> [*]")
    for t in wild:
        lines.append(
            f"    note left of {_mid(t.dest)}: {_mtext(t.trigger)} [{_mtext(t.guard)}] leaves every "
            f"non-terminal state, tried first"
        )
    lines.append(f"    class {','.join(_mid(t) for t in d.terminals)} terminal")
    if overlay is not None:
        seen = [s for s in d.state_names if s in overlay.visited and s != overlay.terminal]
        unseen = [s for s in d.state_names if s not in overlay.visited]
        if seen:
            lines.append(f"    class {','.join(_mid(s) for s in seen)} visited")
        if unseen:
            lines.append(f"    class {','.join(_mid(s) for s in unseen)} unvisited")
        if overlay.terminal:
            lines.append(f"    class {_mid(overlay.terminal)} exit")
            lines.append(f"    note right of {_mid(overlay.terminal)}: exit {_mtext(str(overlay.exit))} "
                         f"after {sum(len(v) for v in overlay.steps.values())} steps")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------- Graphviz

def _dq(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_dot(d: MachineDefinition, overlay: Overlay | None = None) -> str:
    """The Graphviz source of ``d`` (failed edges dashed), ``overlay`` drawn when given."""
    lines = [
        f"// {d.name} machine ({d.adr}), generated from {_source_name(d)}: do not edit, run make diagrams.",
        f"digraph {_dq(d.name)} {{",
        '    graph [rankdir=TB, fontname="Helvetica", nodesep=0.5];',
        '    node [shape=box, style="rounded", fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
        '    "__start" [shape=point, width=0.15, label=""];',
    ]
    for s in d.states:
        attrs = [f"label={_dq(_state_label(d, s.name))}"]
        if s.terminal:
            attrs.append("peripheries=2")
        if overlay is not None:
            if s.name == overlay.terminal:
                attrs += ['style="rounded,filled,bold"', 'fillcolor="#ffe0b2"', 'color="#e65100"']
            elif s.name in overlay.visited:
                attrs += ['style="rounded,filled"', 'fillcolor="#d9f2d9"', 'color="#2e7d32"']
            else:
                attrs += ['color="#bbbbbb"', 'fontcolor="#9e9e9e"']
        lines.append(f"    {_dq(s.name)} [{', '.join(attrs)}];")
    start = ' [color="#2e7d32", penwidth=2.5]' if overlay is not None else ""
    lines.append(f"    \"__start\" -> {_dq(d.initial)}{start};")
    for e in edges(d):
        label = f"{_step_prefix(overlay, e.key)}{e.trigger}\\n[{e.transition.guard}]"
        attrs = [f'label="{label}"']
        if overlay is not None and e.key in overlay.steps:
            attrs += ['color="#2e7d32"', 'fontcolor="#2e7d32"', "penwidth=2.5"]
        elif e.wildcard or overlay is not None:
            attrs += ["style=dashed", 'color="#9e9e9e"', 'fontcolor="#757575"']
        lines.append(f"    {_dq(e.source)} -> {_dq(e.dest)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot_source: str) -> bytes | None:
    """Lay ``dot_source`` out with Graphviz ``dot``; ``None`` when it is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    return subprocess.run([dot, "-Tsvg"], input=dot_source.encode(), capture_output=True,
                          check=True, timeout=60).stdout


# ----------------------------------------------------------------- doc page

def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip() or "—"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _mermaid_block(text: str) -> list[str]:
    return ["```mermaid", text.rstrip("\n"), "```"]


def _caller_gets(t: TransitionDef) -> str:
    return t.caller_gets or f"nothing yet: continues in `{t.dest}`"


def _invariants_name(d: MachineDefinition) -> str:
    return RUN_INVARIANTS_FILE if d.name == "run" else INVARIANTS_FILE


def render_doc(d: MachineDefinition, invariants: tuple[Invariant, ...] = ()) -> str:
    """The doc page ``<name>.md`` of the machine."""
    src = _source_name(d)
    wild = [t for t in d.transitions if t.source == WILDCARD]
    out = [
        f"# The `{d.name}` machine ({d.adr})",
        "",
        f"<!-- Generated from {src}{f' and states/{_invariants_name(d)}' if invariants else ''}"
        " by `make diagrams`; do not edit. -->",
        "",
        f"Generated from [`{src}`](../{src}) by `make diagrams` (`python -m lionops diagram`);"
        " `make test` fails when this page or the diagrams beside it are stale.",
        "",
        f"Each call starts in `{d.initial}`. After a state's phase handler ran, the transitions"
        " leaving that state are tried in table order and the first whose guard holds fires;"
        " later guards are not evaluated. A call ends in exactly one terminal state"
        f" ({', '.join(f'`{t}`' for t in d.terminals)}).",
        "",
        "## Diagram",
        "",
        *_mermaid_block(render_mermaid(d)),
        "",
    ]
    if wild:
        out += [
            "Wildcard edges: "
            + "; ".join(f"`{t.trigger}` (guard `{t.guard}`) leaves every non-terminal state for `{t.dest}`"
                        for t in wild)
            + ". The diagram draws one such edge from each state, so a trace can mark the one a run took;"
            " they are tried before that state's other transitions.",
            "",
        ]
    out += [
        f"The same graph for Graphviz: [`{d.name}.dot`]({d.name}.dot), laid out as [`{d.name}.svg`]({d.name}.svg)"
        " when Graphviz is installed.",
        "",
        "## States",
        "",
        *_table(
            ["state", "ADR", "handler", "what it does", "what it may touch"],
            [[f"`{s.name}`" + (" (terminal)" if s.terminal else ""), s.adr,
              f"`{s.handler}`" if s.handler else ("—" if s.terminal else "decision only"),
              s.summary, s.touches] for s in d.states],
        ),
        "",
        "## Transitions",
        "",
        "In table order; `*` is every non-terminal state.",
        "",
        *_table(
            ["#", "trigger", "source", "dest", "guard", "fires when", "ADR", "caller gets"],
            [[str(n), f"`{t.trigger}`", f"`{t.source}`", f"`{t.dest}`", f"`{t.guard}`",
              t.summary, t.adr, _caller_gets(t)] for n, t in enumerate(d.transitions, 1)],
        ),
        "",
        "## Early returns and other exits",
        "",
        "Every path from the initial state to a terminal state, named by its exit trigger"
        " (the trace's `exit`). Early returns come first, in table order.",
        "",
    ]
    rows = [[f"`{p[-1].trigger}`", " → ".join([d.initial, *(t.dest for t in p)]), p[-1].caller_gets]
            for p in exit_paths(d)]
    rows += [[f"`{t.trigger}`", f"any non-terminal state → {t.dest}", t.caller_gets] for t in wild]
    out += [*_table(["exit", "states visited", "caller gets"], rows), ""]
    if invariants:
        out += [
            "## Safety invariants",
            "",
            f"From states/{_invariants_name(d)}, each with the tests that prove it.",
            "",
            *_table(["#", "invariant", "proved by"],
                    [[str(i.number), i.statement, "<br>".join(f"`{t}`" for t in i.tests)] for i in invariants]),
            "",
        ]
    out += [
        "## Drawing a run",
        "",
        "`python -m lionops diagram --trace run.json --out out` writes `out/run.mmd`, `out/run.md`"
        " (and `out/run.svg` with Graphviz): this diagram with the visited states highlighted and"
        " the taken edges numbered in firing order, so the early return a run took is visible."
        " `make demo` writes a trace to try it on: `out/demo-trace.json`.",
        "",
    ]
    return "\n".join(out)


def render_trace_doc(d: MachineDefinition, trace: Trace, name: str, mermaid: str) -> str:
    """A page for one recorded run: its overlaid diagram ``mermaid`` and its steps."""
    out = [
        f"# Run `{name}` on the `{d.name}` machine",
        "",
        f"{' → '.join(trace.states)} (exit `{trace.exit}`, engine `{trace.engine}`)",
        "",
        *_mermaid_block(mermaid),
        "",
        *_table(
            ["step", "source", "trigger", "dest", "guards evaluated", "error"],
            [[str(n), f"`{r.source}`", f"`{r.trigger}`", f"`{r.dest}`",
              ", ".join(f"{g}={'T' if v else 'F'}" for g, v in r.guards.items()), r.error or ""]
             for n, r in enumerate(trace.transitions, 1)],
        ),
        "",
    ]
    return "\n".join(out)


def render_all(d: MachineDefinition, invariants: tuple[Invariant, ...] = ()) -> dict[str, str]:
    """The checked text files of ``diagrams/`` (the SVG is derived from the ``.dot``)."""
    return {
        f"{d.name}.mmd": render_mermaid(d),
        f"{d.name}.dot": render_dot(d),
        f"{d.name}.md": render_doc(d, invariants),
    }


def stale_files(directory: str | Path, files: Mapping[str, str]) -> list[str]:
    """Names in ``files`` whose copy in ``directory`` is missing or differs."""
    base = Path(directory)
    return [n for n, text in files.items()
            if not (base / n).is_file() or (base / n).read_text(encoding="utf-8") != text]


# ---------------------------------------------------------------------- CLI

def _invariants_for(definition: str | None) -> tuple[Invariant, ...]:
    if definition is not None:
        beside = Path(definition).parent / INVARIANTS_FILE
        if beside.is_file():
            return load_invariants(beside)
    return load_invariants()


def _write(out: Path, name: str, data: str | bytes) -> None:
    path = out / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    print(f"wrote {path}")


def _write_svg(out: Path, name: str, dot_source: str, enabled: bool) -> None:
    if not enabled:
        return
    svg = render_svg(dot_source)
    if svg is None:
        print(f"Graphviz `dot` not found: {out / name} skipped (install Debian's graphviz)")
    else:
        _write(out, name, svg)


def render_trace_files(d: MachineDefinition, trace: Trace, name: str) -> dict[str, str]:
    """``<stem>.mmd``, ``.dot`` and ``.md`` of one recorded run named ``name`` (a file name)."""
    overlay = Overlay.from_trace(d, trace)
    stem = Path(name).stem
    mermaid = render_mermaid(d, overlay, note=f"trace {name}")
    return {
        f"{stem}.mmd": mermaid,
        f"{stem}.dot": render_dot(d, overlay),
        f"{stem}.md": render_trace_doc(d, trace, name, mermaid),
    }


def _shipped_files() -> dict[str, str]:
    """The files of every shipped machine: ``operate`` (with the safety
    invariants) and ``run`` (the loop of rounds)."""
    run = definition_path("run")
    return {**render_all(load_definition(), load_invariants()),
            **render_all(load_definition(run), load_invariants(run.parent / RUN_INVARIANTS_FILE))}


def _trace_files(d: MachineDefinition, path: Path, shipped: bool) -> dict[str, str]:
    """The drawn files of the trace at ``path``: a ``Trace`` on ``d``, or (with
    the shipped machines) a ``RunTrace``'s loop on the ``run`` machine."""
    data = path.read_bytes()
    if shipped and b'"lionops.run_trace/' in data[:200]:
        from ..run import RunTrace

        return render_trace_files(load_definition(definition_path("run")), RunTrace.from_json(data).trace, path.name)
    return render_trace_files(d, Trace.from_json(data, d), path.name)


def _run(args: argparse.Namespace) -> int:
    try:
        d = load_definition(args.definition)
        files = (_shipped_files() if args.definition is None
                 else render_all(d, _invariants_for(args.definition)))
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        print(f"error: cannot read the machine definition: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if args.check:
        stale = stale_files(args.check, files)
        if stale:
            print(f"stale diagrams in {args.check} (run make diagrams): {', '.join(stale)}", file=sys.stderr)
            return 1
        print(f"{args.check}/ is up to date with states/ (the SVG is not compared)")
        return 0
    out = Path(args.out or ("out" if args.trace else "diagrams"))
    if args.trace:
        path = Path(args.trace)
        try:
            files = _trace_files(d, path, args.definition is None)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: cannot draw trace {path}: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        _write(out, name, text)
    for dot_name in (n for n in files if n.endswith(".dot")):
        _write_svg(out, dot_name[:-4] + ".svg", files[dot_name], args.svg)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diagram", help="render state diagrams and their doc page from states/")
    p.add_argument("--definition", default=None, help="machine definition TOML (default: shipped)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", metavar="DIR", help="exit 1 if DIR is stale against states/")
    g.add_argument("--trace", metavar="RUN.json", help="draw a recorded trace on the diagram")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default: diagrams, or out with --trace)")
    p.add_argument("--no-svg", dest="svg", action="store_false", help="do not call Graphviz")
    p.set_defaults(func=_run)
