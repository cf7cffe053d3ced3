"""The compiled hot path equals transitions' own runner (the engine is swappable).

Every combination of guard values in every state is fired through both
engines; the fired trigger, destination and evaluated guards must match.
Whole driven traces are compared in tests/contract/test_invariants.py over every
combination of real guard inputs.
"""

from __future__ import annotations

import itertools

import pytest

from lionops import Branch
from lionops.engine.definition import default_definition
from lionops.pipeline.machine import CompiledEngine, TransitionsEngine, get_engine
from tests.helpers import Answer, ScriptedMiddle

D = default_definition()


def _value_guards():
    return {name: (lambda ctx, n=name: ctx[n]) for name in D.guard_names}


def _state_guard_names(state):
    names = []
    for t in D.candidates(state):
        if t.guard not in names:
            names.append(t.guard)
    return names


#: Each state's candidate transitions in firing order (trigger, dest, guard),
#: written out by hand from ADR-0022 D1-D4: ``failed`` first, then the
#: validation policy, then the gate's checks in order.
FIRING_ORDER = {
    "prepare": [("failed", "raised", "phase_raised"), ("prepared", "schema", "preparation_succeeded"),
                ("resumed", "act", "resume_requested")],
    "schema": [("failed", "raised", "phase_raised"), ("schema_ready", "adapter", "schema_published")],
    "adapter": [("failed", "raised", "phase_raised"), ("adapter_returned", "validate", "adapter_awaited_once"),
                ("over_limit", "raised", "request_limit_reached")],
    "validate": [("failed", "raised", "phase_raised"), ("skip_validation", "returned", "skip_validation_set"),
                 ("mismatch_return_value", "returned", "mismatch_policy_return_value"),
                 ("mismatch_return_none", "returned", "mismatch_policy_return_none"),
                 ("mismatch_raise", "raised", "mismatch_policy_raise"), ("validated", "gate", "validation_passed")],
    "gate": [("failed", "raised", "phase_raised"), ("actions_disabled", "returned", "invoke_actions_false"),
             ("no_action_param", "returned", "action_param_absent"), ("no_requests", "returned", "requests_absent"),
             ("requests_found", "act", "requests_present"),
             ("no_response_slot", "returned", "responses_unattachable")],
    "act": [("failed", "raised", "phase_raised"), ("acted", "enrich", "all_requests_acted"),
            ("deferred", "suspended", "calls_deferred")],
    "enrich": [("failed", "raised", "phase_raised"), ("no_responses", "returned", "responses_empty"),
               ("enriched", "returned", "result_enriched")],
}


def test_compiled_table_is_read_off_the_transitions_machine():
    eng = CompiledEngine()
    assert sorted(D.nonterminal) == sorted(FIRING_ORDER)
    for state in D.nonterminal:
        rows = [(r.transition.trigger, r.transition.dest, r.guard_name) for r in eng.table[state]]
        declared = [(t.trigger, t.dest, t.guard) for t in D.candidates(state)]
        assert rows == declared == FIRING_ORDER[state]


def test_every_guard_combination_fires_identically_in_both_engines():
    guards = _value_guards()
    compiled = CompiledEngine(guards=guards)
    reference = TransitionsEngine(guards=guards)
    checked = 0
    for state in D.nonterminal:
        names = _state_guard_names(state)
        for values in itertools.product([False, True], repeat=len(names)):
            ctx = dict(zip(names, values, strict=True))
            runs = [compiled.begin(ctx, initial=state), reference.begin(ctx, initial=state)]
            fired = []
            for run in runs:
                tdef, evaluated = run.fire()
                fired.append((tdef and (tdef.trigger, tdef.dest), dict(evaluated), run.state))
                run.close()
            assert fired[0] == fired[1], (state, ctx)
            # first true guard in the declared order wins (an independent oracle)
            expected = next(((t, d) for t, d, g in FIRING_ORDER[state] if ctx[g]), None)
            assert fired[0][0] == expected, (state, ctx)
            # first-true-wins: nothing after the fired guard was evaluated
            if fired[0][0] is not None:
                evaluated_names = list(fired[0][1])
                assert fired[0][1][evaluated_names[-1]] is True
                assert not any(list(fired[0][1].values())[:-1])
            checked += 1
    assert checked == sum(2 ** len(_state_guard_names(s)) for s in D.nonterminal)


def test_no_guard_holding_is_reported_not_guessed():
    guards = _value_guards()
    for engine in (CompiledEngine(guards=guards), TransitionsEngine(guards=guards)):
        ctx = {name: False for name in D.guard_names}
        run = engine.begin(ctx, initial="validate")
        tdef, evaluated = run.fire()
        assert tdef is None and run.state == "validate"
        assert list(evaluated) == _state_guard_names("validate")
        run.close()


def test_engines_are_built_once_per_process():
    assert get_engine() is get_engine()
    assert get_engine("transitions") is get_engine("transitions")
    with pytest.raises(ValueError, match="unknown engine 'nope'"):
        get_engine("nope")


def test_trigger_names_do_not_shadow_context_fields():
    """the transitions model is a carrier, not the context."""
    eng = get_engine("transitions")
    from lionops.pipeline.context import OperationContext

    ctx = OperationContext(branch=Branch(), skip_validation=True)
    run = eng.begin(ctx)
    assert callable(run.carrier.skip_validation)  # the trigger method
    assert ctx.skip_validation is True  # the data, untouched
    run.close()


@pytest.mark.anyio
async def test_both_engines_give_the_same_trace_for_a_real_call():
    traces = []
    for engine in ("compiled", "transitions"):
        branch = Branch(engine=engine)
        mid = ScriptedMiddle(lambda pp: pp.response_format.model_validate({"answer": 2}))
        _, trace = await branch.operate_traced(instruction="x", response_format=Answer, middle=mid)
        assert trace.engine == engine
        traces.append(trace)
    assert traces[0].path() == traces[1].path()
    assert [t.guards for t in traces[0].transitions] == [t.guards for t in traces[1].transitions]
    # the path ADR-0022 gives a validated result without actions
    assert traces[0].states == ["prepare", "schema", "adapter", "validate", "gate", "returned"]
    assert traces[0].exit == "no_action_param"
    assert traces[0].transitions[3].guards == {
        "phase_raised": False, "skip_validation_set": False, "mismatch_policy_return_value": False,
        "mismatch_policy_return_none": False, "mismatch_policy_raise": False, "validation_passed": True}


@pytest.mark.anyio
@pytest.mark.parametrize("engine_cls", [CompiledEngine, TransitionsEngine])
async def test_no_guard_holding_takes_failed_with_an_invariant_error(engine_cls):
    """if no guard holds in a state, the machine takes `failed` with an
    internal-invariant error."""
    from lionops.errors import InternalInvariantError
    from lionops.pipeline.validate import GUARDS

    guards = dict(GUARDS, validation_passed=lambda ctx: False)
    engine = engine_cls(guards=guards)
    b = Branch(engine=engine)
    with pytest.raises(InternalInvariantError, match="no guard holds in state 'validate'"):
        await b.operate(instruction="x", middle=ScriptedMiddle("t"))
    t = b.traces[-1]
    assert t.path()[-1] == ("validate", "failed", "raised")
    assert t.transitions[-1].guards["validation_passed"] is False


@pytest.mark.anyio
@pytest.mark.parametrize("engine_cls", [CompiledEngine, TransitionsEngine])
async def test_a_guard_that_raises_fails_the_phase(engine_cls):
    from lionops.pipeline.validate import GUARDS

    def broken(ctx):
        raise KeyError("guard bug")

    engine = engine_cls(guards=dict(GUARDS, requests_absent=broken))
    b = Branch(engine=engine)
    with pytest.raises(KeyError, match="guard bug"):
        await b.operate(instruction="x", actions=True, middle=ScriptedMiddle({"action_requests": []}))
    assert b.traces[-1].path()[-1] == ("gate", "failed", "raised")
