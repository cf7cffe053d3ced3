"""ADR-0022 D1: prepare_operate_kw() normalizes the public call into typed parameters.

One test per semantics bullet; each docstring names its clause.
"""

from __future__ import annotations

import pytest

from lionops import (
    ActionParam,
    Branch,
    ChatParam,
    FieldModel,
    Instruct,
    ParseParam,
    RunParam,
    Spec,
    prepare_operate_kw,
)
from lionops._defaults import DEFAULT_ACTION_CALL_PARAMS, DEFAULT_PARSE_CALL_PARAMS
from lionops.errors import ConfigurationError, RemovedKeywordError
from lionops.operative import Operative, Step
from lionops.params import DEFAULT_PERSIST_DIR
from tests.helpers import Answer, ScriptedMiddle


class FakeModel:
    """A stand-in chat model object (not a lionops part): only is_cli matters to D1."""

    def __init__(self, name: str, is_cli: bool = False) -> None:
        self.name = name
        self.is_cli = is_cli

    def __repr__(self) -> str:
        return f"FakeModel({self.name})"


def test_chat_model_defaults_to_branch_and_parse_model_to_selected_chat_model():
    """D1: chat_model defaults to branch.chat_model; parse_model defaults to that
    selected chat model, not independently to branch.parse_model."""
    chat, parse, override = FakeModel("chat"), FakeModel("parse"), FakeModel("override")
    b = Branch(chat_model=chat, parse_model=parse)
    p = prepare_operate_kw(b, instruction="x", response_format=Answer)
    assert p["chat_param"].imodel is chat
    assert p["parse_param"].imodel is chat  # not branch.parse_model
    p = prepare_operate_kw(b, instruction="x", response_format=Answer, chat_model=override)
    assert p["chat_param"].imodel is override and p["parse_param"].imodel is override


def test_mapping_instruct_is_validated_and_loose_values_build_one():
    """D1: a mapping passed as instruct is validated into Instruct; without one,
    it is built from the loose instruction, guidance and context."""
    b = Branch()
    p = prepare_operate_kw(b, instruct={"instruction": "from map", "guidance": "g"})
    assert p["instruction"] == "from map" and p["chat_param"].guidance == "g"
    p = prepare_operate_kw(b, instruction="loose", guidance={"k": 1}, context=[1, 2])
    assert p["instruction"] == "loose"
    assert p["chat_param"].guidance == {"k": 1} and p["chat_param"].context == [1, 2]
    with pytest.raises(Exception, match="action_strategy"):
        prepare_operate_kw(b, instruct={"action_strategy": "sometimes"})


def test_reason_and_actions_flags_set_the_instruction_model():
    """D1: explicit reason=True sets instruct.reason (returned as "reason");
    actions=True enables actions with the loose strategy. The copy of the
    strategy into the (private) instruction model is not observable on its
    own: ActionParam takes the loose keyword first either way."""
    b = Branch()
    p = prepare_operate_kw(b, instruction="x", reason=True)
    assert p["reason"] is True
    p = prepare_operate_kw(b, instruction="x", actions=True, action_strategy="sequential")
    assert p["action_param"].strategy == "sequential"


def test_caller_instruct_is_copied_never_mutated():
    """D1: a caller Instruct is copied, never mutated."""
    ins = Instruct(instruction="x")
    prepare_operate_kw(Branch(), instruct=ins, reason=True, actions=True)
    assert ins.reason is None and ins.actions is None and ins.action_strategy is None


@pytest.mark.parametrize("kw, expected", [
    ({}, ChatParam),
    ({"stream_persist": True}, RunParam),
    ({"persist_dir": "/tmp/x"}, RunParam),
    ({"snapshot_dir": "/tmp/y"}, RunParam),
    ({"chat_model": FakeModel("cli", is_cli=True)}, RunParam),
    ({"stream_persist": False, "persist_dir": None, "snapshot_dir": None}, ChatParam),
])
def test_run_param_selection(kw, expected):
    """D1: RunParam when the selected model is CLI-backed, stream_persist is true,
    or persist_dir/snapshot_dir is not None; otherwise ChatParam."""
    p = prepare_operate_kw(Branch(), instruction="x", **kw)
    assert type(p["chat_param"]) is expected


def test_run_param_copies_stream_persist_and_overrides_dirs_only_when_non_none():
    """D1: RunParam.stream_persist is copied even when false; persist_dir and
    snapshot_dir override their dataclass defaults only when explicitly non-None."""
    cli = FakeModel("cli", is_cli=True)
    p = prepare_operate_kw(Branch(), instruction="x", chat_model=cli, stream_persist=False)
    rp = p["chat_param"]
    assert rp.stream_persist is False
    assert rp.persist_dir == DEFAULT_PERSIST_DIR and rp.snapshot_dir is None
    p = prepare_operate_kw(Branch(), instruction="x", persist_dir="/p", snapshot_dir="/s")
    assert p["chat_param"].persist_dir == "/p" and p["chat_param"].snapshot_dir == "/s"


def test_response_format_copied_and_parse_param_only_when_validating():
    """D1: response_format is copied into the chat/run parameter; a ParseParam
    is created only when a response format exists and validation is not skipped."""
    b = Branch()
    p = prepare_operate_kw(b, instruction="x", response_format=Answer, handle_validation="raise")
    assert p["chat_param"].response_format is Answer
    pp = p["parse_param"]
    assert isinstance(pp, ParseParam) and pp.response_format is Answer
    assert pp.handle_validation == "raise" and pp.alcall_params is DEFAULT_PARSE_CALL_PARAMS
    assert prepare_operate_kw(b, instruction="x", response_format=Answer, skip_validation=True)["parse_param"] is None
    assert prepare_operate_kw(b, instruction="x")["parse_param"] is None


def test_action_param_creation_rules():
    """D1: ActionParam only when invoke_actions is true and actions are enabled
    (instruction or loose flag); strategy = action_strategy or
    instruct.action_strategy or "concurrent"; always suppress_errors=True."""
    b = Branch()
    assert prepare_operate_kw(b, instruction="x")["action_param"] is None
    assert prepare_operate_kw(b, instruction="x", actions=True, invoke_actions=False)["action_param"] is None
    ap = prepare_operate_kw(b, instruct={"instruction": "x", "actions": True})["action_param"]
    assert isinstance(ap, ActionParam)
    assert ap.suppress_errors is True and ap.strategy == "concurrent"
    assert ap.action_call_params is DEFAULT_ACTION_CALL_PARAMS
    assert DEFAULT_ACTION_CALL_PARAMS.output_dropna is True


def test_facade_default_shadows_instruct_action_strategy():
    """D1 (documented seam): Branch.operate's truthy "concurrent" default is
    always forwarded, so Instruct(action_strategy="sequential") does not select
    sequential execution; only a direct preparer call with a falsey strategy
    reaches the instruction fallback."""
    b = Branch()
    ins = {"instruction": "x", "actions": True, "action_strategy": "sequential"}
    # the facade's default, as Branch.operate forwards it
    assert prepare_operate_kw(b, instruct=ins, action_strategy="concurrent")["action_param"].strategy == "concurrent"
    # a direct internal call with a falsey strategy reaches the fallback
    assert prepare_operate_kw(b, instruct=ins, action_strategy=None)["action_param"].strategy == "sequential"


@pytest.mark.anyio
async def test_facade_default_shadowing_is_visible_through_branch_operate():
    """D1 seam through the public boundary: Instruct(action_strategy="sequential")
    still runs concurrently unless the loose keyword is also given."""
    import anyio

    events: list[str] = []

    async def first() -> str:
        """Waits until second has started (possible only when concurrent)."""
        events.append("first:start")
        with anyio.move_on_after(0.3):
            await started_second.wait()
        events.append("first:end")
        return "first"

    async def second() -> str:
        """Signals that it started."""
        events.append("second:start")
        started_second.set()
        return "second"

    reqs = {"action_requests": [{"function": "first", "arguments": {}},
                                {"function": "second", "arguments": {}}]}
    ins = {"instruction": "x", "actions": True, "action_strategy": "sequential"}

    b = Branch(tools=[first, second])
    started_second = anyio.Event()
    await b.operate(instruct=ins, middle=ScriptedMiddle(dict(reqs)))
    assert events.index("second:start") < events.index("first:end")  # concurrent: overlap

    events.clear()
    started_second = anyio.Event()
    with anyio.fail_after(5):
        await b.operate(instruct=ins, action_strategy="sequential", middle=ScriptedMiddle(dict(reqs)))
    assert events == ["first:start", "first:end", "second:start"]  # sequential


@pytest.mark.anyio
async def test_tool_schemas_copied_then_replaced_from_branch_tools():
    """D1/D2: public tool_schemas are copied into the initial parameter, but the
    schema phase replaces them from the selected branch tools when an ActionParam exists."""
    custom = [{"type": "function", "function": {"name": "custom"}}]
    b = Branch()
    assert prepare_operate_kw(b, instruction="x", tool_schemas=custom)["chat_param"].tool_schemas == custom

    def t1(a: int) -> int:
        """One."""
        return a

    b.register_tools(t1)
    mid = ScriptedMiddle({"ok": 1})
    await b.operate(instruction="x", tool_schemas=custom, middle=mid)
    assert mid.seen[-1]["chat_param"].tool_schemas == custom  # no ActionParam: kept
    await b.operate(instruction="x", tool_schemas=custom, actions=True, middle=mid)
    names = [s["function"]["name"] for s in mid.seen[-1]["chat_param"].tool_schemas]
    assert names == ["t1"]


@pytest.mark.parametrize("name, replacement", [
    ("request_model", "response_format="), ("operative_model", "response_format="), ("imodel", "chat_model="),
])
def test_removed_keywords_are_rejected_with_guidance(name, replacement):
    """D1: request_model, operative_model and imodel are rejected as removed
    names with guidance to response_format= or chat_model=."""
    with pytest.raises(TypeError, match=f"'{name}' was removed.*{replacement}") as ei:
        prepare_operate_kw(Branch(), instruction="x", **{name: object()})
    assert isinstance(ei.value, RemovedKeywordError)


def test_remaining_kwargs_become_model_invocation_options():
    """D1: remaining **kwargs become model invocation options."""
    p = prepare_operate_kw(Branch(), instruction="x", temperature=0.2, max_tokens=5)
    assert dict(p["chat_param"].imodel_kw) == {"temperature": 0.2, "max_tokens": 5}


def test_caller_operative_is_discarded():
    """D1 (documented seam): a caller-supplied operative is replaced with None."""
    op = Step.request_operative(base_type=Answer)
    p = prepare_operate_kw(Branch(), instruction="x", operative=op)
    assert p["operative"] is None
    assert isinstance(op, Operative)


def test_field_models_type_error_and_empty_names():
    """D1: field_models entries other than FieldModel/Spec raise TypeError;
    entries whose Spec name is empty do not enter the generated field map."""
    with pytest.raises(TypeError, match="Expected FieldModel or Spec"):
        prepare_operate_kw(Branch(), instruction="x", field_models=[{"name": "x"}])
    from lionops.fields import to_fields_dict

    fields = to_fields_dict([Spec(int, name="n"), FieldModel(str, name="s"), Spec(int, name="")])
    assert list(fields) == ["n", "s"]


def test_returned_mapping_has_the_fixed_shape():
    """D1: the returned mapping has one fixed shape."""
    p = prepare_operate_kw(Branch(), instruction="x")
    assert set(p) == {
        "instruction", "chat_param", "parse_param", "action_param", "handle_validation",
        "invoke_actions", "skip_validation", "clear_messages", "operative", "middle",
        "field_models", "reason",
    }


def test_default_parse_alcall_params():
    """D1: make_parse_param() defaults AlcallParams(1, 1.85, 3, 1, 1), kept in one module."""
    d = DEFAULT_PARSE_CALL_PARAMS
    assert (d.retry_initial_delay, d.retry_backoff, d.retry_attempts, d.max_concurrent,
            d.throttle_period) == (1, 1.85, 3, 1, 1)


def test_unknown_handle_validation_is_a_configuration_error():
    """D1/D3: an unknown policy is rejected in prepare (a deliberate difference:
    the shipped match statement let it fall through to the action phase)."""
    with pytest.raises(ConfigurationError, match="handle_validation must be one of"):
        prepare_operate_kw(Branch(), instruction="x", handle_validation="ignore")
