"""Records copied and assigned: the parameter dataclasses keep the signature,
defaults and freezing of their dataclass; ``with_updates`` on them keeps
every field (``init=False`` ones, subclasses without slots), and a trace's
``transitions`` can be assigned."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from lionops.params import DEFAULT_PERSIST_DIR, ChatParam, ParseParam, RunParam


def test_with_updates_keeps_init_false_fields() -> None:
    @dataclass(slots=True, frozen=True)
    class Tagged(ChatParam):
        tag: int = field(default=7, init=False)

    copy = Tagged().with_updates(sender="a")
    assert copy.sender == "a"
    assert copy.tag == 7


def test_with_updates_on_a_subclass_without_slots() -> None:
    @dataclass(frozen=True)
    class Extended(ChatParam):
        extra: int = 0

    copy = Extended(extra=3).with_updates(sender="a")
    assert (copy.sender, copy.extra) == ("a", 3)
    assert Extended(extra=3).with_updates(extra=5).extra == 5
    with pytest.raises(TypeError):
        Extended().with_updates(bogus=1)


def test_with_updates_on_a_slotted_parameter_class() -> None:
    from lionops.params import ActionParam

    param = ActionParam(strategy="concurrent")
    copy = param.with_updates(strategy="sequential")
    assert (copy.strategy, param.strategy) == ("sequential", "concurrent")
    with pytest.raises(TypeError):
        param.with_updates(bogus=1)


def test_trace_transitions_can_be_assigned() -> None:
    from lionops import Trace, TransitionRecord

    trace = Trace()
    trace._rows.append(("failed", "prepare", "raised", {"phase_raised": True}, 1, 1, "E: x"))
    kept = [TransitionRecord("failed", "prepare", "raised", {"phase_raised": True})]
    trace.transitions = kept
    assert trace.transitions == kept and trace.states == ["prepare", "raised"]


def test_with_updates_copies_every_field_and_leaves_the_original() -> None:
    base = ChatParam(guidance="g", sender="s", imodel_kw={"temperature": 0})
    copy = base.with_updates(sender="t", tool_schemas=[])
    assert (copy.guidance, copy.sender, copy.tool_schemas, copy.imodel_kw) == ("g", "t", [], {"temperature": 0})
    assert (base.sender, base.tool_schemas) == ("s", None)
    assert base.with_updates() == base and base.with_updates() is not base
    with pytest.raises(TypeError):
        base.with_updates(bogus=1)


def test_an_operation_context_starts_at_its_defaults_and_refuses_unknown_names() -> None:
    from lionops import Branch
    from lionops.pipeline.context import OperationContext

    branch = Branch()
    a, b = OperationContext(branch, {"instruction": "q"}), OperationContext(branch=branch, skip_validation=True)
    assert (a.branch, a.call_kwargs, a.skip_validation, a.handle_validation) == (branch, {"instruction": "q"},
                                                                                False, "return_value")
    assert (b.call_kwargs, b.skip_validation, b.invoke_actions, b.adapter_calls) == (None, True, True, 0)
    assert a.actions == [] and a.actions is not b.actions and a.meta == {} and a.meta is not b.meta
    with pytest.raises(TypeError, match="bogus"):
        OperationContext(branch, bogus=1)
    with pytest.raises(AttributeError):
        a.mismtach = True  # type: ignore[attr-defined]


def test_parameters_keep_the_dataclass_signature_defaults_and_freezing() -> None:
    import inspect

    for cls in (ChatParam, RunParam, ParseParam):
        plain = dataclasses.dataclass(frozen=True)(type(cls.__name__, (), {"__annotations__": {
            f.name: f.type for f in dataclasses.fields(cls)}, **{
            f.name: (dataclasses.field(default_factory=f.default_factory)
                     if f.default_factory is not dataclasses.MISSING else f.default)
            for f in dataclasses.fields(cls)}}))
        assert str(inspect.signature(cls)) == str(inspect.signature(plain))
        assert cls() == cls() and cls().imodel_kw is not cls().imodel_kw  # a fresh default per instance
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().imodel = None  # type: ignore[misc]
        with pytest.raises(TypeError):
            cls(bogus=1)  # type: ignore[call-arg]
    assert ChatParam(guidance="g", imodel_kw={"t": 1}).imodel_kw == {"t": 1}
    assert RunParam(stream_persist=True).persist_dir == DEFAULT_PERSIST_DIR
    assert repr(ChatParam(guidance="g")).startswith("ChatParam(guidance='g', context=None")


def test_with_updates_of_subclasses_with_slots_or_post_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted(ChatParam):
        extra: int = 0

    copy = Slotted(extra=3, sender="s").with_updates(sender="a")
    assert (copy.extra, copy.sender, type(copy)) == (3, "a", Slotted)

    seen: list[int] = []

    @dataclasses.dataclass(frozen=True)
    class Checked(ParseParam):
        def __post_init__(self) -> None:
            seen.append(1)

    Checked().with_updates(handle_validation="raise")
    assert seen == [1, 1]  # __post_init__ ran for the copy too
