"""The machine as data: states/operate.toml is the single source of truth."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lionops.engine.definition import WILDCARD, default_definition, load_definition, parse_definition
from lionops.pipeline.machine import PHASES
from lionops.pipeline.outcomes import OUTCOMES
from lionops.pipeline.validate import GUARDS

ROOT = Path(__file__).resolve().parents[2]
D = default_definition()

DESIGN_STATES = ["prepare", "schema", "adapter", "validate", "gate", "act", "enrich"]
DESIGN_ROWS = [  # (source, trigger, dest): the machine's published transition table
    ("prepare", "prepared", "schema"),
    ("prepare", "resumed", "act"),
    ("schema", "schema_ready", "adapter"),
    ("adapter", "adapter_returned", "validate"),
    ("adapter", "over_limit", "raised"),
    ("validate", "skip_validation", "returned"),
    ("validate", "mismatch_return_value", "returned"),
    ("validate", "mismatch_return_none", "returned"),
    ("validate", "mismatch_raise", "raised"),
    ("validate", "validated", "gate"),
    ("gate", "actions_disabled", "returned"),
    ("gate", "no_action_param", "returned"),
    ("gate", "no_requests", "returned"),
    ("gate", "requests_found", "act"),
    ("gate", "no_response_slot", "returned"),
    ("act", "acted", "enrich"),
    ("act", "deferred", "suspended"),
    ("enrich", "no_responses", "returned"),
    ("enrich", "enriched", "returned"),
]


def test_states_and_terminals_follow_design():
    assert D.nonterminal == DESIGN_STATES
    assert list(D.terminals) == ["returned", "raised", "suspended"]
    assert D.initial == "prepare"


def test_every_design_row_is_declared_in_table_order():
    rows = [(t.source, t.trigger, t.dest) for t in D.transitions if t.source != WILDCARD]
    assert rows == DESIGN_ROWS
    failed = [t for t in D.transitions if t.trigger == "failed"]
    assert len(failed) == 1 and failed[0].source == WILDCARD and failed[0].dest == "raised"
    # `failed` is tried first in every non-terminal state.
    for state in D.nonterminal:
        assert D.candidates(state)[0].trigger == "failed"


def test_names_in_states_match_code_both_ways():
    assert D.guard_names == set(GUARDS)
    assert D.handler_names == set(PHASES)
    assert D.outcome_names == set(OUTCOMES)


def test_every_transition_names_its_adr_clause():
    for t in D.transitions:
        assert t.adr.startswith("D"), t
    for s in D.states:
        assert s.adr.startswith("D"), s


def test_broken_definitions_are_rejected_with_clear_errors(tmp_path):
    base = (ROOT / "states" / "operate.toml").read_text()
    bad = base.replace('dest = "schema"', 'dest = "nowhere"', 1)
    p = tmp_path / "bad.toml"
    p.write_text(bad)
    with pytest.raises(ValueError, match="unknown dest 'nowhere'"):
        load_definition(p)
    with pytest.raises(ValueError, match="lacks key"):
        parse_definition({"machine": {"initial": "x"}})


def test_engine_refuses_a_definition_naming_a_missing_guard(tmp_path):
    from lionops.pipeline.machine import CompiledEngine

    base = (ROOT / "states" / "operate.toml").read_text()
    p = tmp_path / "op.toml"
    p.write_text(base.replace('guard = "result_enriched"', 'guard = "no_such_guard"'))
    with pytest.raises(ValueError, match="guard 'no_such_guard'"):
        CompiledEngine(load_definition(p))


def test_definition_ships_in_the_wheel(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True,
    )
    if out.returncode != 0 and "hatchling" in (out.stderr + out.stdout):
        pytest.skip("hatchling is not importable for an isolated-free build")
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("lionops-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "lionops/_states/operate.toml" in names
    assert "lionops/py.typed" in names
    shipped = zipfile.ZipFile(wheel).read("lionops/_states/operate.toml").decode()
    assert shipped == (ROOT / "states" / "operate.toml").read_text()
