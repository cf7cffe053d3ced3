"""ADR-0022 D2: one generated Operative separates model-request and runtime-response fields."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lionops import ActionRequestModel, ActionResponseModel, Branch, Reason, Spec, Step
from lionops.operative import Operative, request_type_of
from tests.helpers import Answer, ScriptedMiddle, as_response

pytestmark = pytest.mark.anyio


async def test_model_class_recognition():
    """D2: a BaseModel subclass or the type of a BaseModel instance is the caller
    model class; a dict response format is passed on but is not model_class."""
    for fmt, expect_mismatch in ((Answer, True), (Answer(answer=1), True), ({"type": "object"}, False)):
        mid = ScriptedMiddle("not a model")
        b = Branch()
        _, trace = await b.operate_traced(instruction="x", response_format=fmt, middle=mid)
        assert (trace.exit == "mismatch_return_value") is expect_mismatch
        if not expect_mismatch:
            assert mid.seen[0]["chat_param"].response_format == {"type": "object"}


@pytest.mark.parametrize("kw, built", [
    ({}, False),
    ({"response_format": Answer}, True),
    ({"actions": True}, True),
    ({"field_models": [Spec(int, name="n")]}, True),
    ({"reason": True}, True),
])
async def test_operative_built_when_needed(kw, built):
    """D2: an internal Operative is constructed when a base model class, action
    enablement, named field specs, or reasoning is present."""
    mid = ScriptedMiddle({"x": 1})
    await Branch().operate(instruction="x", middle=mid, **kw)
    fmt = mid.seen[0]["chat_param"].response_format
    assert (isinstance(fmt, type) and fmt.__name__.endswith("Response")) is built


def test_generated_fields():
    """D2: reason=True adds the nullable Reason field; actions=True adds
    action_required, action_requests, action_responses; named specs by name."""
    op = Step.respond_operative(Step.request_operative(
        reason=True, actions=True, fields={"n": Spec(int, name="n", default=0)}))
    fields = op.response_type.model_fields
    assert list(fields) == ["reason", "action_required", "action_requests", "n", "action_responses"]
    inst = op.response_type()
    assert inst.reason is None and inst.action_requests is None and inst.n == 0
    assert op.response_type.model_validate({"reason": {"title": "t"}}).reason == Reason(title="t")
    r = op.response_type.model_validate({"action_requests": [{"function": "f", "arguments": {}}]})
    assert r.action_requests == [ActionRequestModel(function="f", arguments={})]
    assert op.response_type.model_validate({"action_responses": [{"function": "f"}]}).action_responses == [
        ActionResponseModel(function="f")]


def test_request_exclude_and_superset():
    """D2: request_operative sets request_exclude={"action_responses"} with
    actions; respond_operative materializes the superset response model."""
    op = Step.request_operative(actions=True)
    assert op.request_exclude == {"action_responses"}
    assert Step.request_operative(reason=True).request_exclude == set()
    op = Step.respond_operative(op)
    assert set(op.response_type.model_fields) - set(op.request_type.model_fields) == {"action_responses"}
    assert request_type_of(op.response_type) is op.request_type


def test_generated_names():
    """D2: names from the explicit name, the base type name, or "Operative",
    with Request and Response suffixes; only the "pydantic" adapter ships."""
    assert Step.request_operative(name="Plan").request_type.__name__ == "PlanRequest"
    assert Step.request_operative(base_type=Answer).response_type.__name__ == "AnswerResponse"
    assert Step.request_operative(reason=True).request_type.__name__ == "OperativeRequest"
    with pytest.raises(ValueError, match="only 'pydantic' ships"):
        Step.request_operative(adapter="attrs")  # type: ignore[arg-type]


def test_generated_types_are_cached_per_configuration():
    """cache generated types per distinct configuration; per-call state
    never lives on a shared object."""
    a = Step.request_operative(base_type=Answer, actions=True)
    b = Step.request_operative(base_type=Answer, actions=True)
    assert a is not b and a.response_type is b.response_type
    assert Step.request_operative(base_type=Answer, reason=True).response_type is not a.response_type
    a.response_model = a.response_type(answer=1)
    assert b.response_model is None


async def test_response_type_replaces_chat_and_parse_formats():
    """D2: the generated response type replaces the chat and parse response_format,
    so provider rendering and parsing target the same superset model."""
    mid = ScriptedMiddle({"x": 1})
    await Branch().operate(instruction="x", response_format=Answer, reason=True, middle=mid)
    cp, pp = mid.seen[0]["chat_param"], mid.seen[0]["parse_param"]
    assert cp.response_format is pp.response_format
    assert issubclass(cp.response_format, Answer) and "reason" in cp.response_format.model_fields


async def test_tool_schemas_for_selected_or_all_tools_unwrapped():
    """D2: with an ActionParam, get_tool_schema() for the selected tools (or all)
    is unwrapped from {"tools": [...]} into the chat parameter."""

    def alpha(x: int) -> int:
        """Alpha tool.

        Args:
            x: a number.
        """
        return x

    def beta(y: str) -> str:
        """Beta tool."""
        return y

    b = Branch(tools=[alpha, beta])
    schema = b.acts.get_tool_schema(tools=["alpha"])
    assert list(schema) == ["tools"] and schema["tools"][0]["function"]["name"] == "alpha"
    params = schema["tools"][0]["function"]["parameters"]
    assert params["properties"]["x"] == {"type": "integer", "description": "a number."}
    assert params["required"] == ["x"]
    mid = ScriptedMiddle({})
    await b.operate(instruction="x", actions=True, middle=mid)
    assert [t["function"]["name"] for t in mid.seen[0]["chat_param"].tool_schemas] == ["alpha", "beta"]
    await b.operate(instruction="x", actions=True, tools=["beta"], middle=mid)
    assert [t["function"]["name"] for t in mid.seen[1]["chat_param"].tool_schemas] == ["beta"]


async def test_max_retries_default_and_no_middle_loop():
    """D2: Operative.max_retries defaults to 3, but operate() never loops over the Middle."""
    assert Operative().max_retries == 3
    mid = ScriptedMiddle("garbage")
    await Branch().operate(instruction="x", response_format=Answer, middle=mid)
    assert mid.calls == 1


async def test_coordinator_caller_operative_suppresses_construction():
    """D2 seam: the coordinator builds an Operative only when none was given;
    a caller Operative passed to operate() directly is kept as is and the
    chat response format is not replaced."""
    from lionops import operate
    from lionops.params import ChatParam

    op = Step.request_operative(base_type=Answer, reason=True)
    mid = ScriptedMiddle(Answer(answer=1))
    out = await operate(Branch(), "x", ChatParam(response_format=Answer), operative=op, middle=mid)
    assert out == Answer(answer=1)
    assert mid.seen[0]["chat_param"].response_format is Answer


class Base(BaseModel):
    title: str


def test_response_instances_pass_the_callers_instance_check():
    """D2/D3: generated models subclass the caller's model, so a parsed response
    is an instance of the caller's model class."""
    op = Step.request_operative(base_type=Base, actions=True)
    inst = op.response_type(title="t")
    assert isinstance(inst, Base) and isinstance(inst, op.request_type)


def test_coordinator_operative_is_a_fresh_copy_of_one_configuration():
    """D2: the coordinator's Operative equals the Step factories'
    result; each call gets its own object (per-call state never shared)."""
    from lionops.operative import operative_for

    a = operative_for(Answer, reason=True, actions=True)
    b = operative_for(Answer, reason=True, actions=True)
    ref = Step.respond_operative(Step.request_operative(base_type=Answer, reason=True, actions=True))
    assert a is not b
    assert a.response_type is b.response_type is ref.response_type
    assert (a.name, a.request_exclude, list(a.fields)) == (ref.name, ref.request_exclude, list(ref.fields))
    a.response_model = a.response_type(answer=1)
    assert b.response_model is None
    with_fields = operative_for(None, reason=False, actions=False, fields={"n": Spec(int, name="n")})
    assert list(with_fields.response_type.model_fields) == ["n"]


async def test_the_shared_operative_of_a_configuration_is_never_written_to():
    """D2/D4: operate() reads the configuration's one shared Operative (types,
    fields) and enriches through a copy of its own, so no call's result is
    left on the object every call of that configuration reads."""
    from lionops.operative import shared_operative

    def add(x: int, y: int) -> int:
        return x + y

    shared = shared_operative(Answer, reason=False, actions=True)
    assert shared is shared_operative(Answer, reason=False, actions=True)
    branch = Branch(tools=[add])
    requests = [{"function": "add", "arguments": {"x": 1, "y": 2}}]
    mid = ScriptedMiddle(as_response({"answer": 1, "action_requests": requests}))
    out = await branch.operate(instruction="x", response_format=Answer, actions=True, middle=mid)
    assert mid.seen[0]["chat_param"].response_format is shared.response_type
    assert isinstance(out, shared.response_type) and [r.output for r in out.action_responses] == [3]
    assert shared.response_model is None


def test_for_result_copies_only_a_shared_operative():
    """D4: the coordinator sets ``response_model`` on the call's own Operative:
    one of the caller's (or built with named fields) in place; a shared one
    is copied first and stays as it was."""
    from lionops.operative import operative_for, shared_operative

    own = Step.request_operative(base_type=Answer, actions=True)
    result = own.response_type(answer=1)
    assert own.for_result(result) is own and own.response_model is result
    shared = shared_operative(Answer, reason=False, actions=True)
    copy = shared.for_result(result)
    assert copy is not shared and copy.response_model is result and shared.response_model is None
    assert (copy.response_type, copy.fields, copy.request_exclude) == (
        shared.response_type, shared.fields, shared.request_exclude)
    again = copy.for_result(result)
    assert again is copy  # a copy is the call's own: written in place
    assert operative_for(Answer, reason=False, actions=True).for_result(result).response_model is result


async def test_the_coordinator_sets_response_model_on_a_caller_operative():
    """ADR-0022 D4: for a generated result the coordinator sets the Operative's
    response_model and attaches action_responses; a caller's Operative passed to
    operate() directly is that Operative."""
    from lionops import operate
    from lionops.params import ActionParam, ChatParam

    def add(x: int, y: int) -> int:
        return x + y

    op = Step.respond_operative(Step.request_operative(base_type=Answer, actions=True))
    mid = ScriptedMiddle(lambda _: op.response_type.model_validate(
        {"answer": 1, "action_requests": [{"function": "add", "arguments": {"x": 1, "y": 2}}]}))
    out = await operate(Branch(tools=[add]), "x", ChatParam(response_format=op.response_type),
                        action_param=ActionParam(), operative=op, middle=mid)
    assert op.response_model is out and [r.output for r in out.action_responses] == [3]


@pytest.mark.parametrize("kw, added", [
    ({"reason": True}, {"reason"}),
    ({"actions": True}, {"action_required", "action_requests", "action_responses"}),
    ({}, set()),
])
async def test_named_fields_keep_the_generated_fields_of_reason_and_actions(kw, added):
    """D2: with named field specs the call's Operative is built for it alone,
    and still carries the fields reason=True and actions=True add."""
    mid = ScriptedMiddle({"n": 1})
    await Branch().operate(instruction="x", response_format=Answer, field_models=[Spec(int, name="n", default=0)],
                           middle=mid, **kw)
    fmt = mid.seen[0]["chat_param"].response_format
    assert set(fmt.model_fields) == {"answer", "n"} | added
