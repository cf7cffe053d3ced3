"""Diagrams and the doc page are rendered from states/ alone, and never drift."""

from __future__ import annotations

import ast
import copy
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from transitions.extensions import GraphMachine

from lionops import Branch, Trace, TransitionRecord
from lionops.cli.commands import main
from lionops.cli.diagram import (
    Overlay,
    edges,
    exit_paths,
    load_invariants,
    render_all,
    render_doc,
    render_dot,
    render_mermaid,
    render_svg,
    render_trace_files,
    stale_files,
)
from lionops.engine.definition import default_definition, definition_path, parse_definition
from tests.helpers import Answer, ScriptedMiddle

ROOT = Path(__file__).resolve().parents[2]
DIAGRAMS = ROOT / "diagrams"

_EDGE = re.compile(r"^\s+(\w+) --> (\w+): (?:\(([\d,]+)\) )?(\w+) \[(\w+)\]$")


def _edge_lines(mermaid: str) -> list[tuple[str, str, str, str, str | None]]:
    """(source, dest, trigger, guard, step numbers) for every labelled edge line."""
    return [(m[1], m[2], m[4], m[5], m[3]) for m in map(_EDGE.match, mermaid.splitlines()) if m]


def _section(doc: str, title: str) -> str:
    return doc.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _table_rows(doc: str, title: str) -> list[list[str]]:
    rows = [line.strip("|").split(" | ") for line in _section(doc, title).splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row] for row in rows[1:]]


def _data() -> dict:
    with definition_path().open("rb") as fh:
        return tomllib.load(fh)


# ------------------------------------------------------------ the committed files

def test_committed_diagrams_match_states():
    d = default_definition()
    files = render_all(d, load_invariants())
    assert set(files) == {"operate.mmd", "operate.dot", "operate.md"}
    assert stale_files(DIAGRAMS, files) == []


#: The main flow of ADR-0022 as Mermaid edges, written out by hand (state,
#: trigger, guard), in the order the definition declares them.
MAIN_FLOW_EDGES = """\
    [*] --> prepare
    prepare --> schema: prepared [preparation_succeeded]
    prepare --> act: resumed [resume_requested]
    schema --> adapter: schema_ready [schema_published]
    adapter --> validate: adapter_returned [adapter_awaited_once]
    adapter --> raised: over_limit [request_limit_reached]
    validate --> returned: skip_validation [skip_validation_set]
    validate --> returned: mismatch_return_value [mismatch_policy_return_value]
    validate --> returned: mismatch_return_none [mismatch_policy_return_none]
    validate --> raised: mismatch_raise [mismatch_policy_raise]
    validate --> gate: validated [validation_passed]
    gate --> returned: actions_disabled [invoke_actions_false]
    gate --> returned: no_action_param [action_param_absent]
    gate --> returned: no_requests [requests_absent]
    gate --> act: requests_found [requests_present]
    gate --> returned: no_response_slot [responses_unattachable]
    act --> enrich: acted [all_requests_acted]
    act --> suspended: deferred [calls_deferred]
    enrich --> returned: no_responses [responses_empty]
    enrich --> returned: enriched [result_enriched]
"""


def test_rendering_is_deterministic_and_draws_the_main_flow_in_order():
    d = default_definition()
    files = render_all(d, load_invariants())
    assert files == render_all(default_definition(), load_invariants())
    assert MAIN_FLOW_EDGES in files["operate.mmd"]


def test_mermaid_has_every_state_terminal_and_trigger_with_its_guard():
    d = default_definition()
    text = render_mermaid(d)
    assert text.splitlines()[1] == "stateDiagram-v2"
    for s in d.states:
        assert f'state "{s.name} · {s.adr}" as {s.name}' in text  # Enum-like names are the labels
    assert f"[*] --> {d.initial}" in text
    for term in d.terminals:
        assert f"{term} --> [*]" in text
    drawn = {(src, dst, trig, guard) for src, dst, trig, guard, _ in _edge_lines(text)}
    declared = {(src, t.dest, t.trigger, t.guard) for t in d.transitions for src in d.sources(t)}
    assert drawn == declared
    assert {trig for _, _, trig, _ in drawn} == set(d.triggers)


def test_failed_wildcard_is_drawn_from_every_nonterminal_state_after_the_main_flow():
    d = default_definition()
    lines = _edge_lines(render_mermaid(d))
    failed = [(src, dst) for src, dst, trig, _, _ in lines if trig == "failed"]
    assert failed == [(s, "raised") for s in d.nonterminal]
    first_failed = next(i for i, line in enumerate(lines) if line[2] == "failed")
    assert all(line[2] == "failed" for line in lines[first_failed:])
    assert "note left of raised: failed [phase_raised] leaves every non-terminal state" in render_mermaid(d)


def test_edges_agree_with_transitions_own_mermaid_diagram():
    """transitions' GraphMachine (mermaid backend) over the same data draws the same edges."""
    d = default_definition()

    class Model:
        pass

    model = Model()
    machine = GraphMachine(model=model, states=d.state_names, initial=d.initial, auto_transitions=False,
                           graph_engine="mermaid", show_conditions=True)
    for t in d.transitions:
        machine.add_transition(t.trigger, d.sources(t), t.dest, conditions=[t.guard])
    theirs: set[tuple[str, str, str, str]] = set()
    source = model.get_graph().draw(None)
    for line in source.splitlines():
        m = re.match(r"^\s*(\w+) --> (\w+): (.+)$", line)
        if m:
            for label in m[3].split(" | "):
                trig, guard = re.fullmatch(r"(\w+) \[(\w+)\]", label).groups()
                theirs.add((m[1], m[2], trig, guard))
    for s in d.state_names:  # state names render as their labels there too
        assert f'state "{s}" as {s}' in source
    ours = {(src, dst, trig, guard) for src, dst, trig, guard, _ in _edge_lines(render_mermaid(d))}
    assert ours == theirs


def test_graph_machine_condition_returning_false_never_fires():
    """A transition whose guard is False does not fire, on the machine we draw from."""
    d = default_definition()

    class Model:
        def no(self, *a, **k) -> bool:
            return False

    model = Model()
    machine = GraphMachine(model=model, states=d.state_names, initial=d.initial,
                           auto_transitions=False, graph_engine="mermaid")
    for t in d.transitions:
        machine.add_transition(t.trigger, d.sources(t), t.dest, conditions=["no"])
    for trigger in ("failed", "prepared"):
        assert model.trigger(trigger) is False
        assert model.state == d.initial


def test_dot_matches_the_definition():
    d = default_definition()
    text = render_dot(d)
    for e in edges(d):
        assert f'"{e.source}" -> "{e.dest}" [label="{e.trigger}\\n[{e.transition.guard}]"' in text
    assert text.count("peripheries=2") == len(d.terminals)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed (make diagrams installs it)")
def test_svg_through_graphviz():
    svg = render_svg(render_dot(default_definition())).decode()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for s in default_definition().state_names:
        assert f"{s} · " in svg


# ------------------------------------------------------------------- the doc page

def test_doc_embeds_the_diagram_and_tables_cover_the_definition():
    d = default_definition()
    doc = render_doc(d, load_invariants())
    assert f"```mermaid\n{render_mermaid(d)}```" in doc
    states = _table_rows(doc, "States")
    assert [r[0].split("`")[1] for r in states] == d.state_names
    assert [r[1] for r in states] == [s.adr for s in d.states]
    transitions = _table_rows(doc, "Transitions")
    assert [(r[1], r[2], r[3], r[4]) for r in transitions] == [
        (f"`{t.trigger}`", f"`{t.source}`", f"`{t.dest}`", f"`{t.guard}`") for t in d.transitions
    ]
    assert all(r[7] != "—" for r in transitions)  # what the caller gets, for every row


def test_doc_lists_every_early_return_path():
    d = default_definition()
    rows = _table_rows(render_doc(d), "Early returns and other exits")
    exits = [r[0].strip("`") for r in rows]
    into_terminal = [t.trigger for t in d.transitions if t.dest in d.terminals]
    assert sorted(set(exits)) == sorted(into_terminal)
    by_exit: dict[str, str] = {}
    for r in rows:  # the first path of an exit; a resumed operation's (prepare → act → ...) follows
        by_exit.setdefault(r[0].strip("`"), r[1])
    assert [r[1] for r in rows if r[0] == "`enriched`"] == [
        "prepare → schema → adapter → validate → gate → act → enrich → returned", "prepare → act → enrich → returned"]
    assert by_exit["actions_disabled"] == "prepare → schema → adapter → validate → gate → returned"
    assert by_exit["skip_validation"] == "prepare → schema → adapter → validate → returned"
    assert [p[-1].trigger for p in exit_paths(d)][:2] == ["skip_validation", "mismatch_return_value"]


def test_doc_names_seven_invariants_each_with_a_test():
    invariants = load_invariants()
    assert [i.number for i in invariants] == [1, 2, 3, 4, 5, 6, 7]
    rows = _table_rows(render_doc(default_definition(), invariants), "Safety invariants")
    assert len(rows) == 7
    for inv, row in zip(invariants, rows, strict=True):
        assert inv.tests and all(f"`{t}`" in row[2] for t in inv.tests)


_NAMED_TESTS = [t for inv in load_invariants() for t in inv.tests]


@pytest.mark.parametrize("node_id", _NAMED_TESTS)
def test_test_named_in_doc_exists(node_id: str):
    path, _, func = node_id.partition("::")
    file = ROOT / path
    if not file.is_file():
        pytest.skip(f"{path} does not exist yet (the invariant tests land separately); "
                    f"{func} is checked once it does")
    tree = ast.parse(file.read_text(encoding="utf-8"))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert func in defined, f"{node_id} is named in diagrams/operate.md but {path} does not define {func}"


# -------------------------------------------- a changed definition changes the output

def _extended() -> dict:
    """The shipped data plus a state `review` (gate → review → returned) and a trigger `cancelled`."""
    data = copy.deepcopy(_data())
    enrich_at = next(i for i, s in enumerate(data["states"]) if s["name"] == "enrich")
    data["states"].insert(enrich_at + 1, {
        "name": "review", "adr": "D4", "handler": "review",
        "summary": "A human reviews the proposed requests.", "touches": "the review queue",
    })
    found_at = next(i for i, t in enumerate(data["transitions"]) if t["trigger"] == "requests_found")
    data["transitions"].insert(found_at, {
        "trigger": "needs_review", "source": "gate", "dest": "review", "guard": "review_required",
        "adr": "D4", "summary": "A request needs a human first.",
    })
    data["transitions"] += [
        {"trigger": "reviewed", "source": "review", "dest": "returned", "guard": "review_done",
         "outcome": "return_result", "adr": "D4", "summary": "The reviewer answered.",
         "caller_gets": "the reviewed result"},
        {"trigger": "cancelled", "source": "act", "dest": "returned", "guard": "act_cancelled",
         "outcome": "return_none", "adr": "D4", "summary": "The caller cancelled the tools.",
         "caller_gets": "None"},
    ]
    return data


def test_adding_a_state_and_a_trigger_changes_diagram_and_tables():
    base = default_definition()
    d = parse_definition(_extended(), source="states/operate.toml")
    before, after = render_all(base), render_all(d)
    assert stale_files(DIAGRAMS, after) == ["operate.mmd", "operate.dot", "operate.md"]

    mmd = after["operate.mmd"]
    assert 'state "review · D4" as review' in mmd
    new_edges = set(_edge_lines(mmd)) - set(_edge_lines(before["operate.mmd"]))
    assert new_edges == {
        ("gate", "review", "needs_review", "review_required", None),
        ("review", "returned", "reviewed", "review_done", None),
        ("act", "returned", "cancelled", "act_cancelled", None),
        ("review", "raised", "failed", "phase_raised", None),  # the wildcard reaches the new state
    }
    assert '"act" -> "returned" [label="cancelled\\n[act_cancelled]"' in after["operate.dot"]

    doc = after["operate.md"]
    assert f"```mermaid\n{mmd}```" in doc
    review = next(r for r in _table_rows(doc, "States") if r[0] == "`review`")
    assert review[1:] == ["D4", "`review`", "A human reviews the proposed requests.", "the review queue"]
    rows = {r[1]: r for r in _table_rows(doc, "Transitions")}
    assert rows["`needs_review`"][2:6] == ["`gate`", "`review`", "`review_required`", "A request needs a human first."]
    assert rows["`cancelled`"][7] == "None"
    assert len(rows) == len(base.transitions) + 3
    exits: dict[str, str] = {}
    for r in _table_rows(doc, "Early returns and other exits"):
        exits.setdefault(r[0], r[1])
    assert exits["`reviewed`"] == "prepare → schema → adapter → validate → gate → review → returned"
    assert exits["`cancelled`"] == "prepare → schema → adapter → validate → gate → act → returned"


def test_cli_renders_a_given_definition_and_check_sees_it_stale(tmp_path: Path, capsys):
    toml = tmp_path / "operate.toml"
    toml.write_text(definition_path().read_text(encoding="utf-8").replace(
        'summary = "Every request went through act()."',
        'summary = "Every request went through act(), and nothing else."'))
    assert main(["diagram", "--definition", str(toml), "--out", str(tmp_path / "d"), "--no-svg"]) == 0
    assert "and nothing else." in (tmp_path / "d" / "operate.md").read_text()
    assert main(["diagram", "--definition", str(toml), "--check", str(tmp_path / "d")]) == 0
    assert main(["diagram", "--check", str(tmp_path / "d")]) == 1
    assert "stale diagrams" in capsys.readouterr().err


# --------------------------------------------------------------------- the CLI

def test_cli_writes_and_checks(tmp_path: Path, capsys):
    out = tmp_path / "diagrams"
    assert main(["diagram", "--out", str(out), "--no-svg"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "operate.dot", "operate.md", "operate.mmd", "run.dot", "run.md", "run.mmd"]
    assert main(["diagram", "--check", str(out)]) == 0
    for name in ("operate.mmd", "run.md"):
        (out / name).write_text((out / name).read_text() + "%% hand edit\n")
        assert main(["diagram", "--check", str(out)]) == 1
        (out / name).unlink()
        assert main(["diagram", "--check", str(out)]) == 1
        assert name in capsys.readouterr().err
        assert main(["diagram", "--out", str(out), "--no-svg"]) == 0


def test_check_ignores_the_svg(tmp_path: Path):
    out = tmp_path / "diagrams"
    assert main(["diagram", "--out", str(out), "--no-svg"]) == 0
    (out / "operate.svg").write_text("<svg>laid out by another Graphviz</svg>")
    assert main(["diagram", "--check", str(out)]) == 0


# ------------------------------------------------------------------ drawn traces

def _guards(source: str, trigger: str, dest: str) -> dict[str, bool]:
    """The guards the machine evaluates in ``source`` until this edge fires."""
    tried: dict[str, bool] = {}
    for t in default_definition().candidates(source):
        tried[t.guard] = (t.trigger, t.dest) == (trigger, dest)
        if tried[t.guard]:
            break
    return tried


def _trace(*steps: tuple[str, str, str]) -> Trace:
    return Trace(transitions=[TransitionRecord(trigger=t, source=s, dest=d, guards=_guards(s, t, d))
                              for s, t, d in steps])


_EARLY = _trace(("prepare", "prepared", "schema"), ("schema", "schema_ready", "adapter"),
                ("adapter", "adapter_returned", "validate"), ("validate", "validated", "gate"),
                ("gate", "no_requests", "returned"))


def test_trace_overlay_numbers_taken_edges_and_marks_states():
    d = default_definition()
    text = render_mermaid(d, Overlay.from_trace(d, _EARLY))
    numbered = [(src, trig, steps) for src, _, trig, _, steps in _edge_lines(text) if steps]
    assert numbered == [("prepare", "prepared", "1"), ("schema", "schema_ready", "2"),
                        ("adapter", "adapter_returned", "3"), ("validate", "validated", "4"),
                        ("gate", "no_requests", "5")]
    assert "    class prepare,schema,adapter,validate,gate visited" in text
    assert "    class act,enrich,raised,suspended unvisited" in text
    assert "    class returned exit" in text
    assert "note right of returned: exit no_requests after 5 steps" in text
    # everything else is the same diagram
    strip = re.compile(r": \([\d,]+\) ")
    base = [line for line in render_mermaid(d).splitlines() if not line.startswith("%%")]
    assert [strip.sub(": ", line) for line in text.splitlines() if line.startswith("    state ")
            or " --> " in line] == [line for line in base if line.startswith("    state ") or " --> " in line]


def test_trace_of_a_failure_marks_the_failed_edge_of_its_state():
    d = default_definition()
    trace = _trace(("prepare", "prepared", "schema"), ("schema", "schema_ready", "adapter"),
                   ("adapter", "failed", "raised"))
    text = render_mermaid(d, Overlay.from_trace(d, trace))
    assert "    adapter --> raised: (3) failed [phase_raised]" in text
    assert "    prepare --> raised: failed [phase_raised]" in text
    assert render_dot(d, Overlay.from_trace(d, trace)).count("penwidth=2.5") == 4  # start + 3 steps


def test_trace_with_an_undeclared_edge_is_refused(tmp_path: Path, capsys):
    d = default_definition()
    bad = _trace(("prepare", "prepared", "schema"), ("schema", "requests_found", "act"))
    with pytest.raises(ValueError, match="step 2: schema --requests_found--> act is not a declared edge"):
        Overlay.from_trace(d, bad)
    path = tmp_path / "bad.json"
    path.write_text(bad.to_json())
    assert main(["diagram", "--trace", str(path), "--out", str(tmp_path)]) == 2
    assert "not a declared edge" in capsys.readouterr().err
    with pytest.raises(ValueError, match="machine 'other'"):
        Overlay.from_trace(d, Trace(machine="other"))


@pytest.mark.anyio
async def test_cli_draws_a_real_run_and_shows_its_early_return(tmp_path: Path):
    branch = Branch()
    middle = ScriptedMiddle(lambda parse_param: parse_param.response_format.model_validate({"answer": 2}))
    _, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True,
                                           invoke_actions=False, middle=middle)
    assert trace.exit == "actions_disabled"
    run = tmp_path / "run.json"
    run.write_text(trace.to_json())
    out = tmp_path / "out"
    assert main(["diagram", "--trace", str(run), "--out", str(out), "--no-svg"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["run.dot", "run.md", "run.mmd"]
    mmd = (out / "run.mmd").read_text()
    assert "    gate --> returned: (5) actions_disabled [invoke_actions_false]" in mmd
    assert "note right of returned: exit actions_disabled after 5 steps" in mmd
    page = (out / "run.md").read_text()
    assert f"```mermaid\n{mmd}```" in page
    assert "| 5 | `gate` | `actions_disabled` | `returned` | phase_raised=F, invoke_actions_false=T | — |" in page
    assert render_trace_files(default_definition(), trace, "run.json")["run.mmd"] == mmd


def test_trace_output_defaults_to_out(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("early.json").write_text(_EARLY.to_json())
    assert main(["diagram", "--trace", "early.json", "--no-svg"]) == 0
    assert sorted(p.name for p in Path("out").iterdir()) == ["early.dot", "early.md", "early.mmd"]
    assert not Path("diagrams").exists()
