"""ADR-0022 D1, the prepare phase: what ``prepare_operate_kw`` hands on, and
what it refuses, each written out literally.

Through the public API where a user sees it (``Branch.operate``, the trace,
the branch's messages, the typed errors); by calling ``prepare_operate_kw``
where the typed parameters (ChatParam, ParseParam, ActionParam) are the
contract. Scripted Middles (real objects), real tool functions.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from lionops import Branch, ConfigurationError, Instruct, Spec, prepare_operate_kw
from lionops.errors import ArgumentTypeError, MisspelledKeywordError
from lionops.testing import completion
from tests.helpers import Answer, ScriptedMiddle, ToolBox, as_response
from tests.openai_server import make_model, sent, server  # noqa: F401 - fixtures

# ---------------------------------------------------------------- the typed parameters


def test_unset_flags_are_false_in_the_typed_parameters():
    p = prepare_operate_kw(Branch(), instruction="x", actions=True)
    assert p["clear_messages"] is False
    assert p["chat_param"].include_token_usage_to_model is False
    assert p["action_param"].verbose_action is False


def test_the_chat_param_carries_the_callers_values():
    branch = Branch()
    p = prepare_operate_kw(branch, instruction="x", sender="alice", recipient="tutor", progression=["m1", "m2"],
                           images=["data:image/png;base64,AAAA"], image_detail="low",
                           include_token_usage_to_model=True)
    cp = p["chat_param"]
    assert (cp.sender, cp.recipient, cp.progression) == ("alice", "tutor", ["m1", "m2"])
    assert cp.images == ["data:image/png;base64,AAAA"]
    assert cp.image_detail == "low" and cp.include_token_usage_to_model is True
    assert not hasattr(cp, "plain_content")


@pytest.mark.parametrize(("sender", "user", "expected"), [
    ("alice", "bob", "alice"), ("alice", None, "alice"), (None, "bob", "bob"), (None, None, "user"),
])
def test_the_sender_is_the_callers_then_the_branch_user_then_user(sender, user, expected):
    assert prepare_operate_kw(Branch(user=user), instruction="x", sender=sender)["chat_param"].sender == expected


def test_the_recipient_is_the_callers_then_the_branch():
    branch = Branch()
    assert prepare_operate_kw(branch, instruction="x", recipient="tutor")["chat_param"].recipient == "tutor"
    assert prepare_operate_kw(branch, instruction="x")["chat_param"].recipient == branch.id


def test_the_parse_param_matches_keys_fuzzily_and_takes_no_request_options():
    pp = prepare_operate_kw(Branch(), instruction="x", response_format=Answer, temperature=0.3)["parse_param"]
    fm = pp.fuzzy_match_params
    assert (fm.similarity_threshold, fm.fuzzy_match, fm.handle_unmatched) == (0.85, True, "remove")
    assert dict(pp.imodel_kw) == {} and pp.imodel_kw is not None


def test_the_action_param_carries_tools_and_verbose_action():
    ap = prepare_operate_kw(Branch(), instruction="x", actions=True, tools=["search"],
                            verbose_action=True)["action_param"]
    assert ap.tools == ["search"] and ap.verbose_action is True


def test_without_any_strategy_actions_run_concurrently():
    ap = prepare_operate_kw(Branch(), instruction="x", actions=True, action_strategy=None)["action_param"]
    assert ap.strategy == "concurrent"


@pytest.mark.anyio
@pytest.mark.parametrize("kw", [
    {"instruction": "x"},
    {"instruction": "x", "response_format": Answer, "actions": True, "reason": True, "clear_messages": True,
     "handle_validation": "raise", "field_models": [Spec(int, name="count")], "stream_persist": True},
    {"instruct": {"instruction": "y", "actions": True}, "invoke_actions": False, "skip_validation": True},
])
async def test_the_prepare_phase_sets_on_the_context_what_prepare_operate_kw_hands_on(kw):
    from lionops.pipeline import prepare
    from lionops.pipeline.context import OperationContext

    branch = Branch()
    ctx = OperationContext(branch=branch, call_kwargs=dict(kw))
    await prepare.phase(ctx)
    handed = prepare_operate_kw(branch, **kw)
    assert set(handed) == set(prepare.Prepared._fields)
    handed["reason"] = bool(handed["reason"])  # the context keeps a bool
    assert {name: getattr(ctx, name) for name in handed} == handed


# ---------------------------------------------------------------- through operate()

@pytest.mark.anyio
async def test_an_instruct_model_is_what_the_middle_is_asked_and_is_left_alone():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    ins = Instruct(instruction="weather in Oslo?", guidance="be brief", actions=True)
    mid = ScriptedMiddle({"action_requests": [{"function": "get_weather", "arguments": {"city": "Oslo"}}]})
    await branch.operate(instruct=ins, reason=True, middle=mid)
    (seen,) = mid.seen
    assert seen["instruction"] == "weather in Oslo?" and seen["chat_param"].guidance == "be brief"
    assert box.args == [("get_weather", {"city": "Oslo"})]
    assert (ins.instruction, ins.actions, ins.reason, ins.action_strategy) == ("weather in Oslo?", True, None, None)


@pytest.mark.anyio
async def test_reason_true_adds_a_reason_to_the_answer():
    reason = {"title": "sum", "content": "2+2", "confidence_score": 0.9}
    mid = ScriptedMiddle(as_response({"answer": 4, "reason": reason}))
    out = await Branch().operate(instruction="2+2?", response_format=Answer, reason=True, middle=mid)
    assert out.answer == 4 and (out.reason.title, out.reason.content) == ("sum", "2+2")


@pytest.mark.anyio
async def test_without_clear_messages_the_earlier_turns_stay():
    branch = Branch()
    mid = ScriptedMiddle("ok")
    await branch.operate(instruction="first", middle=mid)
    await branch.operate(instruction="second", middle=mid)
    assert [(m.role, m.content) for m in branch.messages] == [
        ("user", "first"), ("assistant", "'ok'"), ("user", "second"), ("assistant", "'ok'")]
    assert [s["clear_messages"] for s in mid.seen] == [False, False]


@pytest.mark.anyio
async def test_the_user_message_and_the_request_carry_sender_recipient_images_and_progression(server):
    server.push(completion("a cat"), completion("still a cat"))
    m = make_model(server)
    branch = Branch(chat_model=m, user="bob")
    await branch.operate(instruction="what is this?", recipient="tutor",
                         images=["https://img.example/cat.png"], image_detail="low")
    await branch.operate(instruction="and now?", progression=[])
    await m.aclose()
    first, _, second, _ = branch.messages
    assert (first.sender, first.recipient) == ("bob", "tutor")
    assert (second.sender, second.recipient) == ("bob", branch.id)
    (user,) = [msg for msg in sent(server, 0)["messages"] if msg["role"] == "user"]
    assert user["content"][1:] == [{"type": "image_url",
                                    "image_url": {"url": "https://img.example/cat.png", "detail": "low"}}]
    assert [msg["role"] for msg in sent(server, 1)["messages"]] == ["user"]  # progression=[]: only the new turn


@pytest.mark.anyio
async def test_only_the_tools_named_are_offered_and_run():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    mid = ScriptedMiddle({"action_requests": [{"function": "send_message", "arguments": {"to": "x", "body": "y"}},
                                              {"function": "search", "arguments": {"q": "a"}}]})
    _, trace = await branch.operate_traced(instruction="q", actions=True, tools="search", middle=mid)
    assert [s["function"]["name"] for s in mid.seen[0]["chat_param"].tool_schemas] == ["search"]
    assert box.args == [("search", {"q": "a"})]
    assert [a.decision for a in trace.actions] == ["not_offered", "allowed"]


# ---------------------------------------------------------------- refusals

SUPPRESS = ("suppress_errors is not an operate() keyword: operate() always turns a tool failure into an"
            " error payload (ADR-0022 D1); use branch.act(..., suppress_errors=False) to have it raise")


def test_suppress_errors_is_refused_with_the_way_to_have_tool_failures_raise():
    with pytest.raises(TypeError) as info:
        prepare_operate_kw(Branch(), instruction="x", actions=True, suppress_errors=False)
    assert type(info.value) is ArgumentTypeError and str(info.value) == SUPPRESS


def test_a_misspelled_instruct_key_names_the_key_the_suggestion_and_instruct():
    with pytest.raises(MisspelledKeywordError) as info:
        prepare_operate_kw(Branch(), instruct={"instrution": "q"})
    err = info.value
    assert (err.keyword, err.suggestion) == ("instrution", "instruction")
    assert str(err) == ("Instruct got an unexpected keyword 'instrution'; did you mean 'instruction'? "
                        "(other unknown keywords are sent to the model as request options)")


#: one non-bool value per boolean keyword, and the message naming it
NOT_BOOLS: dict[str, tuple[Any, str]] = {
    "invoke_actions": ("yes", "invoke_actions must be a bool, got str 'yes'"),
    "skip_validation": (0, "skip_validation must be a bool, got int 0"),
    "actions": ("false", "actions must be a bool, got str 'false'"),
    "reason": (1.0, "reason must be a bool, got float 1.0"),
    "verbose_action": ([], "verbose_action must be a bool, got list []"),
    "include_token_usage_to_model": ("no", "include_token_usage_to_model must be a bool, got str 'no'"),
    "clear_messages": (1, "clear_messages must be a bool, got int 1"),
    "stream_persist": ("on", "stream_persist must be a bool, got str 'on'"),
}


@pytest.mark.parametrize("flag", list(NOT_BOOLS))
def test_a_non_bool_flag_is_named_with_its_type_and_value(flag):
    value, message = NOT_BOOLS[flag]
    with pytest.raises(TypeError) as info:
        prepare_operate_kw(Branch(), instruction="x", **{flag: value})
    assert str(info.value) == message


def test_of_several_non_bool_flags_the_first_is_named():
    with pytest.raises(TypeError) as info:
        prepare_operate_kw(Branch(), instruction="x", stream_persist=1, invoke_actions="no")
    assert str(info.value) == "invoke_actions must be a bool, got str 'no'"


def test_a_non_bool_flag_of_an_instruct_is_named_with_its_type_and_value():
    with pytest.raises(TypeError) as info:
        prepare_operate_kw(Branch(), instruct=Instruct.model_construct(instruction="x", reason="no"))
    assert str(info.value) == "Instruct.reason must be a bool, got str 'no'"


@pytest.mark.parametrize(("instruct", "name"), [("go", "str"), (["go"], "list"), (7, "int")])
def test_an_instruct_of_another_type_is_refused_with_its_type(instruct, name):
    with pytest.raises(TypeError) as info:
        prepare_operate_kw(Branch(), instruct=instruct)
    assert str(info.value) == f"instruct must be an Instruct or a mapping, got {name}"


# ---------------------------------------------------------------- field clashes, refused in prepare


class Both(BaseModel):
    answer: int
    reason: str
    action_required: str = "no"


class WithRequests(BaseModel):
    answer: int
    action_requests: list[str] = []


def _replaces(source: str, field: str, owner: str, shown: str) -> str:
    return (f"{source} adds the field '{field}', but {owner} already has a field '{field}' ({shown}); "
            f"the generated field would replace it. Rename the field, or leave out {source}")


REASON_CLASH = _replaces("reason=True", "reason", "Both", "str")
ACTIONS_CLASH = _replaces("actions=True", "action_required", "Both", "str")


@pytest.mark.parametrize(("kw", "message"), [
    ({"response_format": Both, "reason": True}, REASON_CLASH),
    ({"response_format": Both(answer=1, reason="r"), "reason": True}, REASON_CLASH),
    ({"response_format": Both, "reason": True, "actions": True}, f"{REASON_CLASH}; {ACTIONS_CLASH}"),
    ({"response_format": Both(answer=1, reason="r"), "actions": True}, ACTIONS_CLASH),
    ({"response_format": Both, "instruct": {"instruction": "x", "reason": True}}, REASON_CLASH),
    ({"response_format": WithRequests, "instruct": {"instruction": "x", "actions": True}},
     _replaces("actions=True", "action_requests", "WithRequests", "list")),
    ({"response_format": Answer, "field_models": [Spec(str, name="answer")]},
     _replaces("field_models", "answer", "Answer", "int")),
], ids=["reason", "instance", "both", "instance-actions", "instruct-reason", "instruct-actions", "field_models"])
def test_a_field_clash_is_a_configuration_error_naming_every_clash(kw, message):
    kw.setdefault("instruction", "x")
    with pytest.raises(ConfigurationError) as info:
        prepare_operate_kw(Branch(), **kw)
    assert str(info.value) == message


@pytest.mark.anyio
async def test_a_clash_with_a_model_instance_stops_operate_in_prepare():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    mid = ScriptedMiddle({"action_requests": [{"function": "search", "arguments": {"q": "a"}}]})
    with pytest.raises(ConfigurationError):
        await branch.operate(instruction="q", response_format=Both(answer=1, reason="r"), actions=True, middle=mid)
    assert branch.traces[-1].states == ["prepare", "raised"]
    assert mid.calls == 0 and box.total == 0


@pytest.mark.anyio
async def test_skip_validation_reaches_the_middle_and_the_machine():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    mid = ScriptedMiddle({"answer": "not an int", "action_requests": [
        {"function": "get_weather", "arguments": {"city": "Oslo"}}]})
    out, trace = await branch.operate_traced(instruction="x", response_format=Answer, actions=True,
                                             skip_validation=True, middle=mid)
    assert out == {"answer": "not an int", "action_requests": [
        {"function": "get_weather", "arguments": {"city": "Oslo"}}]}
    assert [s["skip_validation"] for s in mid.seen] == [True]
    assert (trace.exit, box.total) == ("skip_validation", 0)


# ---------------------------------------------------------------- without an Instruct


def test_plain_keywords_are_handed_on_as_an_instruct_would_hold_them():
    branch = Branch()
    text = "forecast for " + "Lisbon"
    plain = prepare_operate_kw(branch, instruction=text, guidance="brief", context="today", reason=True)
    given = prepare_operate_kw(branch, instruct=Instruct(instruction=text, guidance="brief", context="today"),
                               reason=True)
    assert plain["instruction"] is text
    for key in ("instruction", "reason", "handle_validation", "invoke_actions", "middle"):
        assert plain[key] == given[key]
    assert plain["reason"] is True
    assert (plain["chat_param"].guidance, plain["chat_param"].context) == ("brief", "today")
    assert plain["chat_param"] == given["chat_param"]
    assert prepare_operate_kw(branch, instruction="x")["reason"] is None


def test_keywords_an_instruct_would_convert_or_refuse_still_go_through_it():
    branch = Branch()
    assert prepare_operate_kw(branch, instruction=b"x")["instruction"] == "x"
    assert prepare_operate_kw(branch, instruction="x", guidance=3)["chat_param"].guidance == 3
    with pytest.raises(ArgumentTypeError, match="of the wrong type"):
        prepare_operate_kw(branch, instruction="x", guidance=("a",))
    with pytest.raises(ArgumentTypeError, match="of the wrong type"):
        prepare_operate_kw(branch, instruction="x", context=object())
    with pytest.raises(ArgumentTypeError, match="of the wrong type"):
        prepare_operate_kw(branch, instruction=3)
