"""A response model that is not fully defined yet (ADR-0022 D2).

A caller's model whose annotation names a type not defined yet cannot have
its response type built. The schema phase refuses it with a
``ConfigurationError`` naming the caller's model, the name it lacks and what
to do, before the Middle is awaited; nothing built from the incomplete model
is kept, so once the name is defined and ``model_rebuild()`` called, the
next ``operate()`` works. The same holds with ``reason=``, ``actions=``,
named fields, a field's own model, a nested model and a tool's arguments.

Every model here is made inside its test (a fresh class on each backend), so
no cache is shared between tests; a name a test puts into the module's
globals is taken out again when it ends.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest
from pydantic import BaseModel, PydanticUserError

from lionops import Branch, ConfigurationError, Spec
from lionops import operative as operative_module
from lionops._classcache import class_cache
from lionops.models import Reason
from lionops.operative import Step, field_clashes, operative_for, shared_operative
from tests.helpers import Answer, ScriptedMiddle, as_response

pytestmark = pytest.mark.anyio


def refused(owner: str, missing: str, name: str | None = None) -> str:
    """The message of the refusal of ``owner``, which names ``missing``."""
    return (
        f"{owner} is not fully defined: it names {missing!r}, which is not defined where it is named, "
        f"so the response model of {name or owner} cannot be built; define {missing}, then call "
        f"{owner}.model_rebuild()"
    )


def assert_refused_before_the_middle(branch: Branch, mid: ScriptedMiddle, err: BaseException, message: str) -> None:
    assert isinstance(err, ConfigurationError) and isinstance(err, ValueError)
    assert str(err) == message
    assert err.__cause__ is None and err.__suppress_context__
    assert mid.calls == 0  # the model was never asked
    assert len(branch.messages) == 0  # nothing recorded, nothing lost
    trace = branch.traces[-1]
    assert trace.states == ["prepare", "schema", "raised"] and trace.exit == "failed"
    assert trace.error == f"ConfigurationError: {message}"


@pytest.mark.parametrize(("reason", "actions"), [(True, False), (False, False), (False, True), (True, True)])
async def test_a_model_not_fully_defined_is_refused_then_works_once_rebuilt(reason, actions):
    class Outer(BaseModel):
        inner: Inner  # defined below, after the first call

    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    answer: dict[str, Any] = {"inner": {"x": 1}}
    if actions:
        answer["action_requests"] = [{"function": "double", "arguments": {"n": 4}}]
    branch = Branch(tools=[double])
    mid = ScriptedMiddle(as_response(answer))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Outer, middle=mid, reason=reason, actions=actions)
    assert_refused_before_the_middle(branch, mid, info.value, refused("Outer", "Inner"))

    class Inner(BaseModel):
        x: int

    assert Outer.model_rebuild() is True
    out = await branch.operate(instruction="q", response_format=Outer, middle=mid, reason=reason, actions=actions)
    assert isinstance(out, Outer) and out.inner == Inner(x=1)
    assert ("reason" in type(out).model_fields) is reason
    assert ("action_responses" in type(out).model_fields) is actions
    if actions:
        assert [(r.function, r.output) for r in out.action_responses] == [("double", 8)]
    assert mid.calls == 1 and branch.traces[-1].exit != "failed"
    # the shared Operative of the rebuilt model is built once and kept
    assert shared_operative(Outer, reason=reason, actions=actions) is shared_operative(
        Outer, reason=reason, actions=actions)


async def test_a_name_put_into_the_module_globals_before_model_rebuild(monkeypatch):
    class GlobalOuter(BaseModel):
        inner: GlobalInner  # noqa: F821 - put into the globals below

    branch = Branch()
    mid = ScriptedMiddle(as_response({"inner": {"y": "a"}, "reason": {"title": "t", "content": "c"}}))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=GlobalOuter, middle=mid, reason=True)
    assert_refused_before_the_middle(branch, mid, info.value, refused("GlobalOuter", "GlobalInner"))

    class Defined(BaseModel):
        y: str

    monkeypatch.setitem(globals(), "GlobalInner", Defined)
    assert GlobalOuter.model_rebuild() is True
    out = await branch.operate(instruction="q", response_format=GlobalOuter, middle=mid, reason=True)
    assert isinstance(out, GlobalOuter) and out.inner == Defined(y="a") and out.reason.title == "t"


async def test_a_model_rebuilt_before_its_first_call_is_never_refused():
    class Fresh(BaseModel):
        inner: FreshInner  # defined below, before any call

    class FreshInner(BaseModel):
        x: int

    Fresh.model_rebuild()
    branch = Branch()
    mid = ScriptedMiddle(as_response({"inner": {"x": 5}}))
    out = await branch.operate(instruction="q", response_format=Fresh, middle=mid, reason=True)
    assert isinstance(out, Fresh) and out.inner.x == 5 and mid.calls == 1


async def test_named_fields_on_a_model_not_fully_defined():
    class Named(BaseModel):
        inner: NamedInner  # defined below

    fields = [Spec(int, name="score", default=0)]
    branch = Branch()
    mid = ScriptedMiddle(as_response({"inner": {"x": 1}, "score": 9}))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Named, middle=mid, field_models=fields)
    assert_refused_before_the_middle(branch, mid, info.value, refused("Named", "NamedInner"))

    class NamedInner(BaseModel):
        x: int

    Named.model_rebuild()
    out = await branch.operate(instruction="q", response_format=Named, middle=mid, field_models=fields)
    assert isinstance(out, Named) and out.inner.x == 1 and out.score == 9


@pytest.mark.parametrize("with_base", [True, False])
async def test_a_field_model_not_fully_defined_is_named(with_base):
    # The caller's model is complete; the model of a named field is not.
    class Part(BaseModel):
        sub: PartSub  # defined below

    fields = [Spec(Part, name="part")]
    base = Answer if with_base else None
    branch = Branch()
    data = {"answer": 2, "part": {"sub": {"z": 3}}} if with_base else {"part": {"sub": {"z": 3}}}
    mid = ScriptedMiddle(as_response(data))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=base, middle=mid, field_models=fields)
    name = "Answer" if with_base else "Operative"
    assert_refused_before_the_middle(branch, mid, info.value, refused("Part", "PartSub", name))

    class PartSub(BaseModel):
        z: int

    Part.model_rebuild()
    out = await branch.operate(instruction="q", response_format=base, middle=mid, field_models=fields)
    assert out.part == Part(sub=PartSub(z=3))
    assert isinstance(out, Answer) is with_base


def used_model_refused(name: str, missing: str) -> str:
    return (
        f"the response model of {name} cannot be built: {missing!r} is named by a model it uses, or by a "
        f"field typed by a name, and is not defined where it is named; define {missing} in the module that "
        f"names it, or call model_rebuild() on the model that names it where {missing} is defined"
    )


async def test_a_nested_model_not_fully_defined_with_a_local_name():
    class Leaf(BaseModel):
        value: LeafValue  # defined below

    class Tree(BaseModel):
        leaf: Leaf

    branch = Branch()
    mid = ScriptedMiddle(as_response({"leaf": {"value": {"v": 1}}}))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Tree, middle=mid, reason=True)
    # Tree is not complete either (its field's model is not): it is the one named
    assert_refused_before_the_middle(branch, mid, info.value, refused("Tree", "LeafValue"))

    class LeafValue(BaseModel):
        v: int

    # Rebuilt here, Tree sees the local name; Leaf, still not complete, is
    # built again for the response type where the name is not defined.
    assert Tree.model_rebuild() is True and Leaf.__pydantic_complete__ is False
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Tree, middle=mid, reason=True)
    assert_refused_before_the_middle(branch, mid, info.value, used_model_refused("Tree", "LeafValue"))

    assert Leaf.model_rebuild() is True
    out = await branch.operate(instruction="q", response_format=Tree, middle=mid, reason=True)
    assert isinstance(out, Tree) and out.leaf.value == LeafValue(v=1)


async def test_a_nested_model_not_fully_defined_with_a_module_name(monkeypatch):
    class Leaf(BaseModel):
        value: ModuleLeafValue  # noqa: F821 - put into the globals below

    class Tree(BaseModel):
        leaf: Leaf

    branch = Branch()
    mid = ScriptedMiddle(as_response({"leaf": {"value": {"v": 2}}}))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Tree, middle=mid, actions=True)
    assert_refused_before_the_middle(branch, mid, info.value, refused("Tree", "ModuleLeafValue"))

    class Value(BaseModel):
        v: int

    monkeypatch.setitem(globals(), "ModuleLeafValue", Value)
    Tree.model_rebuild()  # as the message says: enough when the name is the module's
    out = await branch.operate(instruction="q", response_format=Tree, middle=mid, actions=True)
    assert isinstance(out, Tree) and out.leaf.value == Value(v=2)


async def test_a_model_still_not_fully_defined_is_refused_on_every_call():
    class Stuck(BaseModel):
        inner: NeverDefined  # noqa: F821 - never defined

    branch = Branch()
    mid = ScriptedMiddle(as_response({"inner": {}}))
    for _ in range(2):
        with pytest.raises(ConfigurationError) as info:
            await branch.operate(instruction="q", response_format=Stuck, middle=mid, reason=True)
        assert_refused_before_the_middle(branch, mid, info.value, refused("Stuck", "NeverDefined"))
    assert len(branch.traces) == 2


async def test_a_field_typed_by_a_name_is_refused():
    # A Spec whose type is a string: the generated model cannot resolve it,
    # and no caller's model is incomplete to be named.
    branch = Branch()
    mid = ScriptedMiddle({"extra": 1})
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", middle=mid, field_models=[Spec("Nowhere", name="extra")])
    message = used_model_refused("Operative", "Nowhere")
    assert_refused_before_the_middle(branch, mid, info.value, message)


async def test_a_name_only_the_library_knows_does_not_complete_a_model():
    # Resolving the name goes through the namespaces the response type was
    # built in and none other: a local variable of the code that builds it
    # (here: base_type) never stands in for the caller's undefined name.
    class Odd(BaseModel):
        me: base_type  # noqa: F821 - an undefined name

    branch = Branch()
    mid = ScriptedMiddle(as_response({"me": {}}))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Odd, middle=mid, reason=True)
    assert_refused_before_the_middle(branch, mid, info.value, refused("Odd", "base_type"))


@pytest.mark.parametrize("missing", ["Operative", "create_model", "default_field", "request_type_of"])
async def test_a_name_the_library_s_module_defines_does_not_complete_a_model(missing):
    # The response type is made in the caller's model's module, so an
    # undefined name is looked up there: one lionops' own module happens to
    # define never stands in for it.
    Named = type(BaseModel)(f"Named{missing}", (BaseModel,), {"__module__": __name__, "__annotations__": {
        "me": missing}})

    branch = Branch()
    mid = ScriptedMiddle(as_response({"me": {}}))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Named, middle=mid, reason=True)
    assert_refused_before_the_middle(branch, mid, info.value, refused(f"Named{missing}", missing))


async def test_a_generated_response_type_lives_in_the_caller_s_module():
    class Plain(BaseModel):
        city: str

    branch = Branch()
    mid = ScriptedMiddle(as_response({"city": "Lisbon"}))
    result = await branch.operate(instruction="q", response_format=Plain, middle=mid, reason=True)
    assert type(result).__module__ == __name__ and isinstance(result, Plain)
    assert result.city == "Lisbon"


def test_the_operative_factories_refuse_a_model_not_fully_defined():
    class Direct(BaseModel):
        inner: DirectInner  # defined below

    with pytest.raises(ConfigurationError, match=r"^Direct is not fully defined: it names 'DirectInner'"):
        Step.respond_operative(Step.request_operative(base_type=Direct, reason=True))
    with pytest.raises(ConfigurationError, match=r"call Direct\.model_rebuild\(\)$"):
        operative_for(Direct, reason=False, actions=True, fields={"n": Spec(int, name="n")})
    with pytest.raises(ConfigurationError, match=r"^Direct is not fully defined"):
        shared_operative(Direct, reason=False, actions=False)
    # nothing of the incomplete model is cached
    assert not [key for key in operative_module._TYPE_CACHE if Direct in key]
    assert not [key for key in operative_module._TEMPLATES if Direct in key]
    assert not class_cache(Direct)  # the generated types of a caller model are kept on it

    class DirectInner(BaseModel):
        x: int

    Direct.model_rebuild()
    op = operative_for(Direct, reason=False, actions=True, fields={"n": Spec(int, name="n")})
    assert issubclass(op.response_type, Direct) and op.response_type.__pydantic_complete__
    assert op.response_type.model_validate({"inner": {"x": 1}, "n": 2}).inner.x == 1
    assert shared_operative(Direct, reason=True, actions=False).response_type.__pydantic_complete__


def test_field_clashes_of_a_model_not_fully_defined_are_worked_out_again_once_rebuilt():
    # While its annotation is a name, ``reason`` looks like another type than
    # the generated one; once it is defined as that type, it is none.
    class Clashing(BaseModel):
        reason: MaybeReason  # defined below
        action_required: str

    [clash] = field_clashes(Clashing, reason=True)
    assert clash.startswith("reason=True adds the field 'reason', but Clashing already has a field 'reason'")
    [action_clash] = field_clashes(Clashing, actions=True)
    assert action_clash.startswith("actions=True adds the field 'action_required'")
    assert field_clashes(Clashing) == []
    assert Clashing not in operative_module._CLASHES  # a model not complete yet is not cached

    MaybeReason = Optional[Reason]  # noqa: UP045 - the very type the generated field has
    assert MaybeReason
    Clashing.model_rebuild()
    assert field_clashes(Clashing, reason=True) == []
    assert Clashing in operative_module._CLASHES  # complete now: worked out once and kept
    assert field_clashes(Clashing, reason=True, actions=True) == [action_clash]
    assert shared_operative(Clashing, reason=True, actions=False).response_type.__pydantic_complete__


def test_field_clashes_of_what_is_not_a_model_class_are_worked_out_uncached():
    class Plain:
        reason: int

    assert field_clashes(Plain, reason=True, actions=True) == []
    assert Plain not in operative_module._CLASHES
    assert field_clashes(None, reason=True) == []
    assert field_clashes({"type": "object"}, reason=True) == []


def test_a_complete_model_is_cached_as_before():
    class Done(BaseModel):
        reason: str

    first = field_clashes(Done, reason=True)
    assert Done in operative_module._CLASHES and field_clashes(Done, reason=True) == first and len(first) == 1


async def test_a_tool_whose_argument_type_is_not_defined_yet():
    # A tool's argument model is made once per function and rebuilt in place
    # by pydantic: refused in the schema phase while the name is undefined,
    # offered and run once it is defined.
    def lookup(query: LookupQuery) -> str:  # put into the globals below
        """Look a query up."""
        return query.text.upper()

    branch = Branch(tools=[lookup])
    answer = {"answer": 1, "action_requests": [{"function": "lookup", "arguments": {"query": {"text": "hi"}}}]}
    mid = ScriptedMiddle(as_response(answer))
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=Answer, middle=mid, actions=True)
    message = (
        f"tool 'lookup': an argument is annotated with 'LookupQuery', which module {__name__!r} does not define, "
        "so its arguments cannot be validated; define or import it there"
    )
    assert_refused_before_the_middle(branch, mid, info.value, message)

    class LookupQuery(BaseModel):
        text: str

    globals()["LookupQuery"] = LookupQuery
    try:
        out = await branch.operate(instruction="q", response_format=Answer, middle=mid, actions=True)
    finally:
        del globals()["LookupQuery"]
    assert [(r.function, r.output) for r in out.action_responses] == [("lookup", "HI")]


def test_the_generated_type_never_leaks_pydantics_own_error():
    # Before the refusal, the Middle's validation raised pydantic's error
    # naming the generated class; now no generated type is ever incomplete.
    class Leaky(BaseModel):
        inner: LeakyInner  # noqa: F821 - never defined

    with pytest.raises(ConfigurationError) as info:
        shared_operative(Leaky, reason=True, actions=False)
    assert not isinstance(info.value, PydanticUserError) and "LeakyResponse" not in str(info.value)
