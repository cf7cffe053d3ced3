"""The run machine as data: states/run.toml names exactly the run's guards,
phase handlers and outcomes, and runs on the same engine classes as operate."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from lionops.engine import engines
from lionops.engine.definition import WILDCARD, definition_path, run_definition
from lionops.pipeline.loop import RUN_FAILURE_GUARD, RUN_GUARDS, RUN_OUTCOMES, RUN_PHASES, run_engine

ROOT = Path(__file__).resolve().parents[2]
D = run_definition()

ROWS = [  # (source, trigger, dest) in table order, the failure transition aside
    ("start", "started", "round"),
    ("start", "resumed", "round"),
    ("round", "over_limit", "raised"),
    ("round", "deferred", "suspended"),
    ("round", "answered", "returned"),
    ("round", "max_rounds", "raised"),
    ("round", "next_round", "round"),
]


def test_states_exits_and_rows():
    assert D.name == "run" and D.initial == "start"
    assert D.nonterminal == ["start", "round"]
    assert list(D.terminals) == ["returned", "suspended", "raised"]
    assert [(t.source, t.trigger, t.dest) for t in D.transitions if t.source != WILDCARD] == ROWS
    (failed,) = [t for t in D.transitions if t.source == WILDCARD]
    assert (failed.trigger, failed.dest, failed.guard) == ("failed", "raised", RUN_FAILURE_GUARD)
    exits = {t.trigger for t in D.transitions if t.dest in D.terminals}
    assert exits == {"answered", "max_rounds", "deferred", "over_limit", "failed"}


def test_names_in_run_toml_match_code_both_ways():
    assert D.guard_names == set(RUN_GUARDS)
    assert D.handler_names == set(RUN_PHASES)
    assert D.outcome_names == set(RUN_OUTCOMES)
    assert definition_path("run") == ROOT / "states" / "run.toml"


def test_the_run_engines_are_the_operate_engine_classes():
    assert type(run_engine("compiled")) is engines.CompiledEngine
    assert type(run_engine("transitions")) is engines.TransitionsEngine


class _Ctx:
    def __init__(self, values: dict[str, bool]) -> None:
        self.values = values
        self.error: Any = None


def test_compiled_and_reference_engines_fire_alike_over_every_guard_combination():
    names = sorted(D.guard_names)
    guards = {n: (lambda ctx, n=n: ctx.values[n]) for n in names}
    tables = {"definition": D, "guards": guards, "phases": RUN_PHASES, "outcomes": RUN_OUTCOMES,
              "failure_guard": RUN_FAILURE_GUARD}
    compiled, reference = engines.CompiledEngine(**tables), engines.TransitionsEngine(**tables)
    for bits in itertools.product([False, True], repeat=len(names)):
        for state in D.nonterminal:
            ctx = _Ctx(dict(zip(names, bits, strict=True)))
            a, b = compiled.begin(ctx, state), reference.begin(ctx, state)
            fa, fb = a.fire(), b.fire()
            b.close()
            assert (fa[0], fa[1]) == (fb[0], fb[1]), (state, bits)


def test_docs_api_shows_the_run_machine_as_generated():
    from lionops.cli.diagram import render_mermaid

    text = (ROOT / "docs" / "api.md").read_text()
    assert "```mermaid\n" + render_mermaid(D) + "```" in text


def test_a_run_trace_is_drawn_on_the_run_machine(tmp_path):
    from lionops.__main__ import main
    from lionops.run import RunTrace
    from lionops.trace import Trace, TransitionRecord

    loop = Trace("run", "compiled", 0.0, "start", [
        TransitionRecord("started", "start", "round", {"run_phase_raised": False, "run_arguments_checked": True},
                         1, 1),
        TransitionRecord("answered", "round", "returned",
                         {"run_phase_raised": False, "round_over_limit": False, "round_deferred": False,
                          "round_ran_no_tool": True}, 2, 1),
    ])
    rnd = Trace("operate", "compiled", 0.0, "prepare", [
        TransitionRecord("failed", "prepare", "raised", {"phase_raised": True}, 1, 1, "ValueError: x")])
    path = tmp_path / "run.json"
    path.write_text(RunTrace(loop, [rnd]).to_json())
    assert main(["diagram", "--trace", str(path), "--out", str(tmp_path / "out"), "--no-svg"]) == 0
    drawn = (tmp_path / "out" / "run.md").read_text()
    assert "start → round → returned (exit `answered`" in drawn


def test_every_test_named_by_a_run_invariant_exists():
    import ast

    from lionops.cli.diagram import RUN_INVARIANTS_FILE, load_invariants

    invariants = load_invariants(ROOT / "states" / RUN_INVARIANTS_FILE)
    assert [i.number for i in invariants] == [1, 2, 3, 4]
    for inv in invariants:
        assert inv.tests
        for node_id in inv.tests:
            path, _, func = node_id.partition("::")
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            assert func in defined, node_id
    assert "Safety invariants" in (ROOT / "diagrams" / "run.md").read_text()
