"""State diagrams rendered from ``states/operate.toml`` (placeholder renderer).

``python -m lionops diagram --out diagrams`` writes ``diagrams/operate.mmd``;
``--check diagrams`` exits 1 when the committed files differ.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .engine.definition import MachineDefinition, load_definition

__all__ = ["render_mermaid", "render_all", "add_parser"]


def render_mermaid(d: MachineDefinition) -> str:
    lines = ["stateDiagram-v2", f"    [*] --> {d.initial}"]
    for t in d.transitions:
        for src in d.sources(t):
            lines.append(f"    {src} --> {t.dest}: {t.trigger} [{t.guard}]")
    for term in d.terminals:
        lines.append(f"    {term} --> [*]")
    return "\n".join(lines) + "\n"


def render_all(d: MachineDefinition) -> dict[str, str]:
    return {"operate.mmd": render_mermaid(d)}


def _run(args: argparse.Namespace) -> int:
    d = load_definition(args.definition)
    files = render_all(d)
    if args.check:
        stale = [n for n, text in files.items()
                 if not (Path(args.check) / n).exists() or (Path(args.check) / n).read_text() != text]
        if stale:
            print(f"stale diagrams (run make diagrams): {', '.join(stale)}")
            return 1
        print("diagrams up to date")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diagram", help="render state diagrams from states/")
    p.add_argument("--definition", default=None, help="machine definition TOML (default: shipped)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--out", default="diagrams")
    g.add_argument("--check", metavar="DIR", help="exit 1 if DIR is stale")
    p.set_defaults(func=_run)
