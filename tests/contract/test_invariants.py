"""The safety invariants 1–6, proved exhaustively and by properties.

Invariant 1 is checked over *every* combination of guard inputs (not
sampled): skip_validation, response format kind, reasoning, actions,
invoke_actions, handle_validation, and the kind of value the Middle returns
(or raises). Each run is compared with a straight-line oracle written from
ADR-0022 D3/D4, on both engines, and the two engines' traces must be equal.

The governance property adds the inputs at the machine's edges: offered
subsets of the registered tools, arguments pydantic converts, results enrich
cannot attach to, and tools that raise a stray cancellation or another
BaseException in the middle of a batch.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import anyio
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from lionops import ActionResponseModel, Branch, MismatchError, Tool
from lionops.engine.definition import default_definition
from lionops.operative import Step
from tests.helpers import Answer

D = default_definition()
EDGES = {(src, t.trigger, t.dest) for t in D.transitions for src in D.sources(t)}
ORDER = ["adapter", "validate", "gate", "act"]


class Other(BaseModel):
    """A model that is not the caller's model but carries action_requests."""

    action_requests: list[dict[str, Any]] | None = None


REQ = {"function": "probe", "arguments": {"x": 1}}
RESULT_KINDS = [
    "model_with_requests", "model_requests_none", "model_requests_empty",
    "mapping_with_requests", "mapping_without", "text", "none", "other_model", "raises",
    "readonly_mapping",
]
FORMATS = ["none", "model", "dict_schema"]
POLICIES = ["return_value", "return_none", "raise"]


def probe(x: int) -> dict[str, int]:
    """A side-effecting probe."""
    Harness.current.invoked += 1
    return {"x": x}


#: The probe as one real Tool, registered on every harness's branch: its
#: arguments model is derived once, not once per case (thousands of cases).
PROBE = Tool(probe)


class Harness:
    """A real branch with a real tool and a real gate that count what happens.
    Harnesses are used one after another: the probe counts into the newest."""

    current: ClassVar[Harness]

    def __init__(self, engine: str) -> None:
        self.invoked = 0
        self.asked = 0
        self.branch = Branch(engine=engine)

        def gate(inv) -> bool:
            self.asked += 1
            return True

        Harness.current = self
        self.branch.register_tools(PROBE)
        self.branch.gate(gate)


def build_result(kind: str, parse_param: Any) -> Any:
    fmt = getattr(parse_param, "response_format", None)
    data: dict[str, Any] = {"answer": 1}
    if kind == "model_with_requests":
        data["action_requests"] = [REQ]
    elif kind == "model_requests_empty":
        data["action_requests"] = []
    if kind.startswith("model"):
        if isinstance(fmt, type) and issubclass(fmt, BaseModel):
            keep = {k: v for k, v in data.items() if k in fmt.model_fields}
            return fmt.model_validate(keep)
        return dict(data)  # no generated model: the middle returns a mapping
    if kind == "mapping_with_requests":
        return {"answer": 1, "action_requests": [REQ]}
    if kind == "mapping_without":
        return {"answer": 1}
    if kind == "text":
        return "plain text"
    if kind == "none":
        return None
    if kind == "other_model":
        return Other(action_requests=[REQ])
    if kind == "readonly_mapping":
        return MappingProxyType({"answer": 1, "action_requests": [REQ]})
    raise AssertionError(kind)


def oracle(skip: bool, fmt: str, actions: bool, invoke: bool, policy: str, result: Any,
           raised: bool) -> str:
    """ADR-0022 D3/D4 as straight-line code: the expected exit trigger."""
    if raised:
        return "failed"
    if skip:
        return "skip_validation"
    model_class = Answer if fmt == "model" else None
    if model_class is not None and not isinstance(result, model_class):
        return {"return_value": "mismatch_return_value", "return_none": "mismatch_return_none",
                "raise": "mismatch_raise"}[policy]
    if not invoke:
        return "actions_disabled"
    if not actions:
        return "no_action_param"
    if isinstance(result, BaseModel):
        requests = getattr(result, "action_requests", None)
    elif isinstance(result, Mapping):
        requests = result.get("action_requests")
    else:
        requests = None
    if requests is None:
        return "no_requests"
    # enrich attaches to a plain dict or the generated response type only
    if not (isinstance(result, dict) or type(result).__name__.endswith("Response")):
        return "no_response_slot"
    return "enriched" if requests else "no_responses"


async def run_case(engine: str, skip: bool, fmt: str, reason: bool, actions: bool,
                   invoke: bool, policy: str, kind: str):
    h = Harness(engine)
    seen: dict[str, Any] = {"calls": 0}

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        seen["calls"] += 1
        if kind == "raises":
            raise RuntimeError("adapter failed")
        seen["result"] = build_result(kind, parse_param)
        return seen["result"]

    kw: dict[str, Any] = dict(
        instruction="q", middle=middle, skip_validation=skip, reason=reason,
        actions=actions, invoke_actions=invoke, handle_validation=policy,
    )
    if fmt == "model":
        kw["response_format"] = Answer
    elif fmt == "dict_schema":
        kw["response_format"] = {"type": "object"}
    error: BaseException | None = None
    out: Any = None
    try:
        out = await h.branch.operate(**kw)
    except (RuntimeError, MismatchError) as exc:
        error = exc
    trace = h.branch.traces[-1]
    return h, seen, trace, out, error


def check_invariant_1(h: Harness, trace, skip: bool, fmt: str, actions: bool, invoke: bool,
                      result: Any) -> None:
    if h.invoked == 0 and h.asked == 0:
        return
    states = trace.states
    positions = [states.index(s) for s in ORDER]
    assert positions == sorted(positions), states
    assert not skip and invoke and actions
    model_class = Answer if fmt == "model" else None
    assert model_class is None or isinstance(result, model_class)
    assert trace.exit == "enriched"


def check_invariant_6(trace) -> None:
    states = trace.states
    assert states[0] == "prepare"
    assert states[-1] in D.terminals
    assert sum(s in D.terminals for s in states) == 1
    for rec in trace.transitions:
        assert (rec.source, rec.trigger, rec.dest) in EDGES, rec


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_invariant_1_exhaustive(backend):
    """Invariant 1 over every combination of guard inputs, on both engines."""
    combos = list(itertools.product(
        [False, True], FORMATS, [False, True], [False, True], [False, True], POLICIES, RESULT_KINDS,
    ))

    async def main() -> Counter[str]:
        exits: Counter[str] = Counter()
        for skip, fmt, reason, actions, invoke, policy, kind in combos:
            paths = []
            for engine in ("compiled", "transitions"):
                h, seen, trace, out, error = await run_case(
                    engine, skip, fmt, reason, actions, invoke, policy, kind)
                result = seen.get("result")
                expected = oracle(skip, fmt, actions, invoke, policy, result, kind == "raises")
                assert trace.exit == expected, (skip, fmt, reason, actions, invoke, policy, kind, trace)
                check_invariant_1(h, trace, skip, fmt, actions, invoke, result)
                check_invariant_6(trace)
                assert seen["calls"] == 1  # invariant 4
                if expected == "enriched":
                    assert h.invoked == 1 and h.asked == 1
                else:
                    assert h.invoked == 0 and h.asked == 0
                paths.append((trace.path(), [r.guards for r in trace.transitions]))
            assert paths[0] == paths[1]  # trace-for-trace equality of the engines
            exits[expected] += 1
        return exits

    exits = anyio.run(main, backend=backend)
    assert sum(exits.values()) == len(combos) == 1440
    # every exit of the machine is reached by the enumeration (a gate's Defer
    # and its resumption: tests/contract/test_deferred.py)
    assert set(exits) == {t.trigger for t in D.transitions} - {"prepared", "schema_ready",
                                                               "adapter_returned", "validated",
                                                               "requests_found", "acted",
                                                               "resumed", "deferred", "over_limit"}


# ---------------------------------------------------------------- properties

#: One request as a model may write it: a name (the registered tool, an
#: unknown or empty one), arguments (fitting or not, as an object or as JSON
#: text, or not an object) and the key spelling (ADR names or aliases).
def request_st(object_arguments: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """One request as a model may write it: a name (the registered tool, an
    unknown or empty one), arguments (fitting or not, as an object or as JSON
    text, or, unless ``object_arguments``, not an object) and the key
    spelling (ADR names or aliases)."""
    objects = [
        st.fixed_dictionaries({"x": st.integers()}),
        st.fixed_dictionaries({"x": st.integers()}).map(json.dumps),
        st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers() | st.text(max_size=3), max_size=2),
    ]
    others = [] if object_arguments else [st.sampled_from(["[1]", "", "{", 7, None])]
    return st.builds(
        lambda name, args, keys: {keys[0]: name, keys[1]: args},
        st.one_of(st.just("probe"), st.just("probe"), st.sampled_from(["nope", ""]), st.text(max_size=6)),
        st.one_of(*objects, *others),
        st.sampled_from([("function", "arguments"), ("name", "parameters"), ("function", "args")]),
    )


requests_st = st.lists(request_st(), min_size=1, max_size=4)
#: requests the generated response type accepts (arguments that are objects)
model_requests_st = st.lists(request_st(object_arguments=True), min_size=1, max_size=4)


def runnable(request: dict[str, Any]) -> bool:
    """Whether ``probe(x: int)`` runs for this request (written from ADR-0022 D4,
    not from lionops): the registered name and exactly an integer ``x``."""
    name, args = list(request.values())
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return False
    return name == "probe" and isinstance(args, dict) and set(args) == {"x"} and type(args["x"]) is int


class AnswerWithRequests(Answer):
    """The caller's model with action fields of its own: not the generated
    response type, so act() has no slot to attach responses to."""

    action_requests: list[dict[str, Any]] | None = None


class Setter(dict):
    """A dict whose item assignment is its own: no slot either."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)


#: Every exit of the machine (its terminal triggers). Each example is built
#: for one of them, so every exit is reached about equally often.
VALIDATE_EXITS = ["failed", "skip_validation", "mismatch_return_value", "mismatch_return_none", "mismatch_raise"]
GATE_EXITS = ["actions_disabled", "no_action_param", "no_requests", "no_response_slot", "no_responses", "enriched"]
MISMATCH_POLICY = {"mismatch_return_value": "return_value", "mismatch_return_none": "return_none",
                   "mismatch_raise": "raise"}


@st.composite
def case_st(draw: st.DrawFn, exit_: str) -> dict[str, Any]:
    """A configuration and a Middle result built to end in ``exit_``.

    ``result`` is ``(kind, payload)``: ``"model"`` is validated into the
    generated response type by the Middle (a mapping when that fails)."""
    config: dict[str, Any] = {
        "skip_validation": False, "response_format": draw(st.sampled_from([None, Answer])),
        "actions": draw(st.booleans()), "invoke_actions": True, "reason": draw(st.booleans()),
        "handle_validation": draw(st.sampled_from(POLICIES)),
        "action_strategy": draw(st.sampled_from(["concurrent", "sequential"])),
    }
    anything = st.one_of(st.none(), st.text(max_size=10), st.integers(),
                         st.builds(lambda r: {"answer": 1, "action_requests": r}, requests_st))
    if exit_ in ("failed", "skip_validation"):
        config["skip_validation"] = exit_ == "skip_validation"
        config["invoke_actions"] = draw(st.booleans())
        result = ("raise", None) if exit_ == "failed" else ("value", draw(anything))
    elif exit_ in MISMATCH_POLICY:
        config.update(response_format=Answer, handle_validation=MISMATCH_POLICY[exit_],
                      invoke_actions=draw(st.booleans()))
        result = ("value", draw(st.one_of(anything, st.builds(lambda r: Other(action_requests=r), requests_st))))
    else:
        model_fmt = config["response_format"] is Answer
        requests = [] if exit_ == "no_responses" else draw(model_requests_st if model_fmt else requests_st)
        # a result of the caller's model is a model; otherwise a model or a mapping
        carrier = "model" if model_fmt else draw(st.sampled_from(["model", "dict"]))
        if exit_ == "actions_disabled":
            config["invoke_actions"] = False
        elif exit_ == "no_action_param":
            config["actions"] = False
        else:
            config["actions"] = True
        if exit_ == "no_requests":
            result = (carrier, {"answer": 1, **draw(st.sampled_from([{}, {"action_requests": None}]))})
            if config["response_format"] is None:
                result = draw(st.sampled_from([result, ("value", "plain text"), ("value", None), ("value", 3)]))
        elif exit_ == "no_response_slot":
            foreign = "own_model" if model_fmt else draw(st.sampled_from(["own_model", "mapping_proxy", "setter"]))
            if foreign == "own_model":
                result = ("own_model", {"answer": 1, "action_requests": requests})
            else:
                result = (foreign, {"answer": 1, "action_requests": requests})
        else:
            result = (carrier, {"answer": 1, "action_requests": requests})
    # the instruction varies every case, so few cases repeat (a repeat is not run)
    return {"exit": exit_, "config": config, "result": result, "instruction": draw(st.text(min_size=1, max_size=30))}


def _materialize(result: tuple[str, Any], parse_param: Any) -> Any:
    kind, payload = result
    if kind == "raise":
        raise RuntimeError("adapter failed")
    if kind == "model":
        fmt = getattr(parse_param, "response_format", None)
        if isinstance(fmt, type) and issubclass(fmt, BaseModel) and "action_requests" in fmt.model_fields:
            try:
                return fmt.model_validate(payload)
            except ValueError:  # requests the generated type refuses: the Middle returns the mapping
                return dict(payload)
        if isinstance(fmt, type) and issubclass(fmt, BaseModel):
            return fmt.model_validate({k: v for k, v in payload.items() if k in fmt.model_fields})
        return dict(payload)
    if kind == "dict":
        return dict(payload)
    if kind == "own_model":
        return AnswerWithRequests.model_validate(payload)
    if kind == "mapping_proxy":
        return MappingProxyType(dict(payload))
    if kind == "setter":
        return Setter(payload)
    return payload


async def _run_property_case(case: dict[str, Any]) -> None:
    """Invariants 1, 4, 5, 6 on one case: the drawn exit is the exit; tools
    run exactly for the runnable requests of an enriched result."""
    h = Harness("compiled")
    config = case["config"]
    calls: dict[str, Any] = {"n": 0, "result": None}

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        calls["n"] += 1
        calls["result"] = _materialize(case["result"], parse_param)
        return calls["result"]

    expected = case["exit"]
    out: Any = None
    if expected == "failed":
        with pytest.raises(RuntimeError, match="adapter failed"):
            await h.branch.operate(instruction=case["instruction"], middle=middle, **config)
    elif expected == "mismatch_raise":
        with pytest.raises(MismatchError):
            await h.branch.operate(instruction=case["instruction"], middle=middle, **config)
    else:
        out = await h.branch.operate(instruction=case["instruction"], middle=middle, **config)
    trace = h.branch.traces[-1]
    event(f"exit={trace.exit}")
    original = calls["result"]
    assert trace.exit == expected, (case, trace.states)
    fmt = "model" if config["response_format"] is Answer else "none"
    check_invariant_1(h, trace, config["skip_validation"], fmt, config["actions"],
                      config["invoke_actions"], original)
    check_invariant_6(trace)
    assert calls["n"] == 1  # invariant 4
    # invariant 5: never the list of responses; the original object when enriched
    assert not (isinstance(out, list) and out and all(isinstance(r, ActionResponseModel) for r in out))
    if expected == "enriched":
        requests = case["result"][1]["action_requests"]
        assert h.invoked == h.asked == sum(map(runnable, requests))
        assert out is original and len(out["action_responses"] if isinstance(out, dict)
                                       else out.action_responses) == len(requests)
        assert [r.invoked for r in trace.actions] == [runnable(r) for r in requests]
    else:
        assert h.invoked == 0 and h.asked == 0 and trace.actions == []
        if expected == "mismatch_return_none":
            assert out is None
        elif expected not in ("failed", "mismatch_raise"):
            assert out is original
    # a model never supplies action_responses: only act() fills them
    if expected != "enriched" and isinstance(out, BaseModel):
        assert getattr(out, "action_responses", None) is None


def _per_exit(exits: list[str]) -> int:
    """Examples per exit: the profile's budget shared equally, so each exit
    gets the same share of a property's examples (at least 10 each)."""
    return max(10, settings.default.max_examples // len(exits))


@pytest.mark.parametrize("exit_", GATE_EXITS)
@settings(max_examples=_per_exit(GATE_EXITS))
@given(data=st.data())
def test_invariant_1_property(exit_, data):
    """Invariants 1, 4, 5, 6 over random configurations and validated Middle
    results, each built for one exit of the gate or of enrich; every exit
    gets the same number of examples (``--hypothesis-show-statistics``
    shows each exit reached by all of its examples)."""
    anyio.run(_run_property_case, data.draw(case_st(exit_), label="case"))


@pytest.mark.parametrize("exit_", VALIDATE_EXITS)
@settings(max_examples=_per_exit(VALIDATE_EXITS))
@given(data=st.data())
def test_invariant_1_validation_property(exit_, data):
    """The same invariants for the exits before the gate: a Middle that
    raises, skip_validation, and each mismatch policy."""
    anyio.run(_run_property_case, data.draw(case_st(exit_), label="case"))


# ---------------------------------------------------------------- governance at the edges


class Abort(BaseException):
    """A BaseException that is not a cancellation."""


class FrozenAnswer(BaseModel):
    model_config = {"frozen": True}
    answer: int


TOOL_NAMES = ["probe", "flip", "stray", "abort"]

gov_request_st = st.one_of(
    st.fixed_dictionaries({"function": st.just("probe"),
                           "arguments": st.fixed_dictionaries({"x": st.sampled_from([1, "2", "x", 3.0, True])})}),
    st.fixed_dictionaries({"function": st.just("flip"),
                           "arguments": st.fixed_dictionaries({"on": st.sampled_from(
                               [True, False, "false", "true", "no", 0, 1, "maybe"])})}),
    st.fixed_dictionaries({"function": st.sampled_from(["stray", "abort", "unknown"]), "arguments": st.just({})}),
)

gov_st = st.fixed_dictionaries({
    "offered": st.one_of(st.none(), st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=4, unique=True)),
    "requests": st.lists(gov_request_st, max_size=5),
    "container": st.sampled_from(["dict", "model", "readonly_mapping", "dict_subclass", "frozen_model"]),
    "strategy": st.sampled_from(["concurrent", "sequential"]),
    "deny_flip_off": st.booleans(),
})


class _NoSetItem(dict):
    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("read-only")


@given(case=gov_st)
def test_governance_property(case):  # noqa: C901 - one Hypothesis case drives one whole oracle
    """Only offered tools run; the gate is asked about exactly the arguments
    the tool receives; nothing runs for a result enrich cannot attach to;
    whatever ran is recorded (trace, messages in request order, log), also
    when a tool raises a stray cancellation or another BaseException, which
    then surfaces as itself."""

    async def main() -> None:  # noqa: C901 - the oracle of one case, step by step
        asked: list[tuple[int, str, dict[str, Any]]] = []
        got: list[tuple[str, dict[str, Any]]] = []
        branch = Branch()

        def probe(x: int) -> int:
            """Probe."""
            got.append(("probe", {"x": x}))
            return x

        def flip(on: bool) -> bool:
            """Flip."""
            got.append(("flip", {"on": on}))
            return on

        async def stray() -> None:
            """A stray cancellation (not from a cancel scope)."""
            got.append(("stray", {}))
            raise asyncio.CancelledError("stray")

        async def abort() -> None:
            """A BaseException."""
            got.append(("abort", {}))
            raise Abort("stop")

        branch.register_tools([probe, flip, stray, abort])

        def gate(inv) -> bool:
            asked.append((inv.index, inv.function, dict(inv.arguments)))
            return not (case["deny_flip_off"] and inv.function == "flip" and inv.arguments["on"] is False)

        branch.gate(gate)
        data = {"answer": 1, "action_requests": case["requests"]}
        container = case["container"]

        async def middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                         skip_validation=False):
            if container == "model":
                return parse_param.response_format.model_validate(data)
            if container == "frozen_model":
                return parse_param.response_format.model_validate(data)
            if container == "readonly_mapping":
                return MappingProxyType(data)
            if container == "dict_subclass":
                return _NoSetItem(data)
            return dict(data)

        kw: dict[str, Any] = {"instruction": "q", "middle": middle, "actions": True,
                              "action_strategy": case["strategy"]}
        if container == "model":
            kw["response_format"] = Answer
        elif container == "frozen_model":
            kw["response_format"] = FrozenAnswer
        if case["offered"] is not None:
            kw["tools"] = case["offered"]
        offered = set(case["offered"] or TOOL_NAMES)
        error: BaseException | None = None
        try:
            await branch.operate(**kw)
        except (asyncio.CancelledError, Abort) as exc:
            error = exc
        trace = branch.traces[-1]
        check_invariant_6(trace)
        attachable = container in ("dict", "model")
        if not attachable:
            assert trace.exit == "no_response_slot" and got == [] and asked == [] and not trace.actions
            return
        # only offered tools run, each after the gate saw exactly its arguments
        assert {name for name, _ in got} <= offered
        assert all(inv_fn in offered for _, inv_fn, _ in asked)
        by_index = {a.index: a for a in trace.actions}
        for name, args in got:
            assert any(fn == name and a == args for _, fn, a in asked)
        for a in trace.actions:
            if a.invoked:
                assert (a.index, a.function, a.arguments) in asked
                assert (a.function, a.arguments) in got
            if a.decision == "not_offered":
                assert a.function not in offered and not a.invoked
        # whatever ran is recorded, and messages are in request order
        assert sum(a.invoked for a in trace.actions) == len(got)
        indices = [m.metadata["index"] for m in branch.messages.by_role("action_response")]
        assert indices == sorted(by_index)
        logged = {e.content["index"] for e in branch.logs if "decision" in e.content}
        assert logged == set(by_index)
        if error is not None:
            assert trace.exit == "failed"
            assert any(a.error_type == type(error).__name__ for a in trace.actions)
        else:
            assert len(trace.actions) == len(case["requests"])

    for backend in ("asyncio", "trio"):
        anyio.run(main, backend=backend)


def test_invariant_2_authorization():
    """Invariant 2: authorize before every invocation; denial never invokes;
    a raising or non-bool authorizer denies (fail closed)."""

    async def main() -> None:
        for verdict in (False, "raise", "yes", None):
            h = Harness("compiled")

            def deny(inv, verdict=verdict):
                if verdict == "raise":
                    raise RuntimeError("authorizer down")
                return verdict

            h.branch.gate(deny)
            out = await h.branch.act([REQ, REQ], strategy="sequential")
            assert h.invoked == 0 and h.asked == 2
            for r in out:
                assert isinstance(r, ActionResponseModel)
                assert r.output == {"error": "denied by governance gate", "function": "probe"}
            roles = [m.role for m in h.branch.messages]
            assert roles == ["action_request", "action_response"] * 2
            assert len(h.branch.logs.of_kind("denied")) == 2

    for backend in ("asyncio", "trio"):
        anyio.run(main, backend=backend)


def test_invariant_3_request_excludes_responses():
    """Invariant 3: the request model never has action_responses; the response model does."""
    for base in (None, Answer):
        op = Step.respond_operative(Step.request_operative(base_type=base, actions=True, reason=True))
        assert "action_responses" not in op.request_type.model_fields
        assert "action_responses" not in op.request_type.model_json_schema().get("properties", {})
        assert "action_responses" in op.response_type.model_fields
        assert issubclass(op.response_type, op.request_type)
        if base is not None:
            assert issubclass(op.response_type, base)


def test_invariant_4_adapter_awaited_once():
    """Invariant 4: one await per operate(), also when the adapter fails."""

    async def main() -> None:
        h = Harness("compiled")
        calls = []

        async def failing(*a, **k):
            calls.append(1)
            raise ConnectionError("down")

        with pytest.raises(ConnectionError):
            await h.branch.operate(instruction="q", middle=failing, actions=True)
        assert calls == [1]
        assert h.branch.traces[-1].states == ["prepare", "schema", "adapter", "raised"]
        assert "ConnectionError: down" in h.branch.traces[-1].transitions[-1].error

    anyio.run(main)


def test_invariant_5_result_never_replaced():
    """Invariant 5: enrichment keeps the original result object."""

    async def main() -> None:
        h = Harness("compiled")
        original = {"answer": 1, "action_requests": [REQ]}

        async def middle(*a, **k):
            return original

        out = await h.branch.operate(instruction="q", middle=middle, actions=True)
        assert out is original
        assert out["action_responses"][0].output == {"x": 1}

        holder = {}

        async def model_middle(branch, instruction, chat_param, parse_param=None, *a, **k):
            holder["r"] = parse_param.response_format.model_validate({"answer": 1, "action_requests": [REQ]})
            return holder["r"]

        out = await h.branch.operate(instruction="q", middle=model_middle, actions=True,
                                     response_format=Answer)
        assert out is holder["r"] and out.action_responses[0].output == {"x": 1}

    anyio.run(main)


def test_invariant_6_trace_shape():
    """Invariant 6 for each early return: starts at prepare, declared edges, one terminal."""

    async def main() -> None:
        h = Harness("compiled")
        with pytest.raises(TypeError):
            await h.branch.operate(instruction="q", imodel="x")
        t = h.branch.traces[-1]
        assert t.states == ["prepare", "raised"] and t.exit == "failed"
        check_invariant_6(t)

    anyio.run(main)
