"""What ``act()`` writes for a batch and what it refuses, through the real
``act()``, ``MessageLog`` and ``Tool``: the messages of a batch written in one
pass (``MessageLog.add_action_exchanges``, through a subclass's own writers),
offered tools given as any iterable, the tool's own copy of its arguments when
no gate is asked, a one-shot iterator output refused before anything reads
it, and a Tool's schema and renames read again after its fields change."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, BeforeValidator

from lionops import Branch, Tool, act
from lionops.messages import Message, MessageLog
from lionops.params import ActionParam

pytestmark = pytest.mark.anyio

SUPPRESS = ActionParam(strategy="concurrent", suppress_errors=True)


def add(x: int, y: int = 0) -> int:
    """Add two integers."""
    return x + y


def _plain(log: MessageLog) -> list[tuple[Any, ...]]:
    return [(m.role, m.content, m.sender, m.recipient, m.metadata) for m in log]


# ---------------------------------------------------------------- messages of a batch


def test_exchanges_append_what_one_exchange_at_a_time_appends() -> None:
    rows = [("add", {"x": 1}, 1, "add", {"index": 0, "decision": "allowed"}),
            ("nope", {}, {"error": "x"}, "nope", {"index": 1, "decision": "rejected", "call_id": "c"})]
    one, many = MessageLog(), MessageLog()
    singles = [one.add_action_exchange(f, a, o, sender="b", recipient=r, metadata=dict(m)) for f, a, o, r, m in rows]
    pairs = many.add_action_exchanges(rows, sender="b")
    assert _plain(many) == _plain(one)
    assert [list(p) for p in pairs] == [[many[0], many[1]], [many[2], many[3]]]
    assert len(singles) == len(pairs) == 2
    ids = [m.id for m in many]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert all(type(m.timestamp) is float for m in many)
    request, response = pairs[1]
    assert response.metadata is rows[1][4] and request.metadata == rows[1][4] and request.metadata is not rows[1][4]
    assert (request.sender, request.recipient, response.sender, response.recipient) == ("b", "nope", "nope", "b")
    assert request.content == {"function": "nope", "arguments": {}}
    assert response.content == {"function": "nope", "arguments": {}, "output": {"error": "x"}}
    assert many.add_action_exchanges([], sender="b") == [] and len(many) == 4


def test_exchanges_go_through_a_subclass_s_own_exchange_writer() -> None:
    class Tagged(MessageLog):
        def add_action_exchange(self, function: Any, arguments: Any, output: Any, *, sender: Any,
                                recipient: Any, metadata: dict[str, Any]) -> tuple[Message, Message]:
            pair = super().add_action_exchange(function, arguments, output, sender=sender, recipient=recipient,
                                               metadata={**metadata, "tagged": True})
            return pair

    log = Tagged()
    pairs = log.add_action_exchanges([("f", {}, 1, "f", {"index": 0}), ("g", {}, 2, "g", {"index": 1})], sender="b")
    assert [m.metadata.get("tagged") for m in log] == [True] * 4
    assert [p[0].content["function"] for p in pairs] == ["f", "g"]


@pytest.mark.parametrize("writer", ["add", "add_action_request", "add_action_response"])
def test_exchanges_go_through_a_subclass_s_own_message_writers(writer: str) -> None:
    seen: list[str] = []

    def own(self: MessageLog, *args: Any, **kw: Any) -> Any:
        seen.append(writer)
        return getattr(MessageLog, writer)(self, *args, **kw)

    log = type("Own", (MessageLog,), {writer: own})()
    log.add_action_exchanges([("f", {}, 1, "f", {"index": 0}), ("g", {}, 2, "g", {"index": 1})], sender="b")
    assert len(log) == 4 and [m.role for m in log] == ["action_request", "action_response"] * 2
    assert len(seen) == (4 if writer == "add" else 2)


async def test_act_writes_a_batch_through_a_subclass_s_exchange_writer() -> None:
    class Counting(MessageLog):
        calls = 0

        def add_action_exchange(self, *args: Any, **kw: Any) -> tuple[Message, Message]:
            type(self).calls += 1
            return super().add_action_exchange(*args, **kw)

    branch = Branch(tools=[add])
    branch.messages = Counting()
    requests = [{"function": "add", "arguments": {"x": i}} for i in range(3)]
    out = await act(branch, requests, SUPPRESS)
    assert [r.output for r in out] == [0, 1, 2]
    assert Counting.calls == 3
    assert [m.metadata["index"] for m in branch.messages] == [0, 0, 1, 1, 2, 2]


# ---------------------------------------------------------------- the offered tools


def shout(text: str) -> str:
    """Shout."""
    return text.upper()


async def test_offered_tools_may_be_any_iterable_of_names_and_tools() -> None:
    branch = Branch(tools=[add, shout])
    tool = branch.acts.get("add")
    requests = [{"function": "add", "arguments": {"x": 2}}, {"function": "shout", "arguments": {"text": "hi"}}]
    out = await act(branch, requests, SUPPRESS, offered=(t for t in [tool, "shout"]))
    assert [r.record.decision for r in out] == ["allowed", "allowed"]
    assert [r.output for r in out] == [2, "HI"]
    only = await act(branch, requests, SUPPRESS, offered=iter(["shout"]))
    assert [r.record.decision for r in only] == ["not_offered", "allowed"]


async def test_a_name_offered_beside_a_tool_of_that_name_binds_the_registered_one() -> None:
    branch = Branch(tools=[add])
    stranger = Tool(add)  # same name, never registered
    out = await act(branch, [{"function": "add", "arguments": {"x": 1}}], SUPPRESS, offered=[stranger, "add"])
    assert out[0].record.decision == "allowed" and out[0].output == 1
    lone = await act(branch, [{"function": "add", "arguments": {"x": 1}}], SUPPRESS, offered=[stranger])
    assert lone[0].record.decision == "not_offered"


# ---------------------------------------------------------------- the tool's own copy, no gate


async def test_without_a_gate_a_tool_changing_nested_arguments_leaves_record_and_request_alone() -> None:
    def tamper(paths: list[str], options: dict[str, bool]) -> int:
        """Change what it was given."""
        paths.append("/etc/passwd")
        options["force"] = True
        return len(paths)

    branch = Branch(tools=[tamper])
    request = {"function": "tamper", "arguments": {"paths": ["a"], "options": {"force": False}}}
    first, second = await act(branch, [request, request], ActionParam(strategy="sequential", suppress_errors=True))
    assert first.output == second.output == 2
    assert request["arguments"] == {"paths": ["a"], "options": {"force": False}}
    assert first.record.arguments == first.record.raw_arguments == request["arguments"]


async def test_without_a_gate_flat_arguments_reach_the_tool_as_a_copy_of_its_own() -> None:
    got: list[dict[str, Any]] = []

    def keep(**kw: int) -> int:
        """Keep what it was given."""
        got.append(kw)
        kw["x"] = 99
        return 1

    branch = Branch(tools=[keep])
    (out,) = await act(branch, [{"function": "keep", "arguments": {"x": 1}}], SUPPRESS)
    assert out.record.decision == "allowed"
    assert out.record.arguments == {"x": 1} and out.record.raw_arguments == {"x": 1}


class _NoCopy(float):
    def __deepcopy__(self, memo: Any) -> Any:
        raise RuntimeError("no copy")


async def test_without_a_gate_validated_arguments_that_cannot_be_copied_are_rejected() -> None:
    ran: list[Any] = []

    def take(value: Any) -> int:
        """Take anything."""
        ran.append(value)
        return 1

    branch = Branch(tools=[take])
    (out,) = await act(branch, [{"function": "take", "arguments": {"value": [_NoCopy(1.0)]}}], SUPPRESS)
    assert ran == [] and out.record.decision == "rejected"
    assert out.output["error"] == "invalid arguments for 'take': arguments cannot be copied (RuntimeError)"


# ---------------------------------------------------------------- one-shot iterators


def numbers(n: int) -> Any:
    """Yield numbers."""
    yield from range(n)


def listed(n: int) -> Any:
    """An iterator over a list."""
    return iter(list(range(n)))


def mapped(n: int) -> Any:
    """A map object."""
    return map(str, range(n))


async def counted(n: int) -> Any:
    """An async generator."""
    for i in range(n):
        yield i


def ranged(n: int) -> Any:
    """A range: iterable, not an iterator."""
    return range(n)


@pytest.mark.parametrize(("tool", "kind"), [(numbers, "generator"), (listed, "list_iterator"), (mapped, "map"),
                                            (counted, "async_generator")])
async def test_a_one_shot_iterator_output_is_refused_unread(tool: Any, kind: str) -> None:
    branch = Branch(tools=[tool])
    name = tool.__name__
    (out,) = await act(branch, [{"function": name, "arguments": {"n": 3}}], SUPPRESS)
    assert out.record.decision == "error" and out.record.invoked is True
    assert out.output["type"] == "ToolOutputError"
    assert out.output["error"] == (
        f"output of {name!r} is a one-shot iterator ({kind}): it cannot be both recorded"
        " and shown to the model; return a list (for example list(...)) instead")
    assert [e.kind for e in branch.logs] == ["action_error"]
    assert [m.role for m in branch.messages] == ["action_request", "action_response"]
    with pytest.raises(TypeError, match="one-shot iterator"):
        await act(branch, [{"function": name, "arguments": {"n": 3}}], ActionParam(suppress_errors=False))


async def test_an_iterable_that_is_not_an_iterator_is_judged_as_any_output() -> None:
    branch = Branch(tools=[ranged])
    (out,) = await act(branch, [{"function": "ranged", "arguments": {"n": 3}}], SUPPRESS)
    assert out.record.decision == "error" and "not JSON-serializable (range)" in out.output["error"]


async def test_a_generator_output_is_left_unread() -> None:
    made: list[Any] = []

    def lazy(n: int) -> Any:
        """A generator the test can inspect afterwards."""
        gen = (i for i in range(n))
        made.append(gen)
        return gen

    branch = Branch(tools=[lazy])
    (out,) = await act(branch, [{"function": "lazy", "arguments": {"n": 3}}], SUPPRESS)
    assert out.record.decision == "error"
    assert list(made[0]) == [0, 1, 2]


# ---------------------------------------------------------------- a Tool's fields changed


def test_the_offered_schema_follows_a_changed_name_description_or_model() -> None:
    tool = Tool(add)
    first = tool.offered_schema
    assert tool.offered_schema is first
    tool.description = "Add, differently."
    second = tool.offered_schema
    assert second is not first and second["function"]["description"] == "Add, differently."
    tool.name = "plus"
    third = tool.offered_schema
    assert third["function"]["name"] == "plus" and third["function"]["description"] == "Add, differently."

    class Other(BaseModel):
        z: str

    tool.arguments_model = Other
    assert list(tool.offered_schema["function"]["parameters"]["properties"]) == ["z"]
    assert Tool(add).offered_schema is first  # shared per model, name and description


def test_validate_arguments_reads_the_renames_of_the_model_it_validates_with() -> None:
    def tally(schema: str, copy: int = 0) -> str:
        """Parameters whose names a model field cannot take as they are."""
        return f"{schema}{copy}"

    tool = Tool(tally)
    assert tool.validate_arguments({"schema": "s", "copy": 2}) == {"schema": "s", "copy": 2}

    class Plain(BaseModel):
        schema_: str = "x"

    tool.arguments_model = Plain
    assert tool.validate_arguments({}) == {"schema_": "x"}
    tool.arguments_model = Tool(tally).arguments_model
    assert tool.validate_arguments({"schema": "t"}) == {"schema": "t", "copy": 0}


# ---------------------------------------------------------------- copies that fail name the tool


def _lock_of(value: Any) -> Any:
    import threading

    return threading.Lock()


def hold(value: Annotated[Any, BeforeValidator(_lock_of)]) -> int:
    """Validation turns any value into an object that has no copy."""
    return 1


@pytest.mark.parametrize("gated", [False, True])
async def test_validated_arguments_with_no_copy_from_flat_raw_ones_are_rejected_under_the_tool_name(
        gated: bool) -> None:
    branch = Branch(tools=[hold])
    asked: list[str] = []
    if gated:
        branch.gate(lambda inv: asked.append(inv.function) or True)
    (out,) = await act(branch, [{"function": "hold", "arguments": {"value": 1}}], SUPPRESS)
    assert out.record.decision == "rejected" and asked == []
    assert out.output["error"] == "invalid arguments for 'hold': arguments cannot be copied (TypeError)"


async def test_with_a_gate_raw_arguments_with_no_copy_are_rejected_under_the_tool_name() -> None:
    ran: list[int] = []

    def bump(x: int) -> int:
        """Add one."""
        ran.append(x)
        return x + 1

    branch = Branch(tools=[bump])
    branch.gate(lambda inv: True)
    (out,) = await act(branch, [{"function": "bump", "arguments": {"x": _NoCopy(3.0)}}], SUPPRESS)
    assert ran == [] and out.record.decision == "rejected"
    assert out.output["error"] == "invalid arguments for 'bump': arguments cannot be copied (RuntimeError)"


# ---------------------------------------------------------------- selectors and offered tools of any shape


@pytest.mark.parametrize("make", [lambda: {"shout"}, lambda: frozenset({"shout"}), lambda: {"shout": 1}.keys(),
                                  lambda: (n for n in ["shout"]), lambda: iter(["shout"])],
                         ids=["set", "frozenset", "dict-keys", "generator", "iterator"])
async def test_a_tools_selector_may_be_any_iterable_of_names(make: Any) -> None:
    branch = Branch(tools=[add, shout])
    assert [t.name for t in branch.acts.select(make())] == ["shout"]
    requests = [{"function": "add", "arguments": {"x": 2}}, {"function": "shout", "arguments": {"text": "hi"}}]
    out = await branch.act(requests, tools=make())
    assert [r.record.decision for r in out] == ["not_offered", "allowed"]


def test_a_selector_of_one_tool_a_callable_or_a_name_selects_that_one() -> None:
    branch = Branch(tools=[add, shout])
    tool = branch.acts.get("add")
    assert branch.acts.select(tool) == [tool]
    assert branch.acts.select(add) == [tool]
    assert branch.acts.select("add") == [tool]
    with pytest.raises(ValueError, match=r"^tool 'a' is not registered$"):
        branch.acts.select(["a", "d"])
    with pytest.raises(ValueError, match=r"^tool 7 is not registered$"):
        branch.acts.select({7})


def f(text: str) -> str:
    """A tool whose name is one character of another tool's name."""
    return text


async def test_one_name_offered_alone_is_that_name_not_its_characters() -> None:
    branch = Branch(tools=[f, shout])
    requests = [{"function": "f", "arguments": {"text": "a"}}, {"function": "shout", "arguments": {"text": "b"}}]
    out = await act(branch, requests, SUPPRESS, offered="shout")
    assert [r.record.decision for r in out] == ["not_offered", "allowed"]
    one = await act(branch, requests, SUPPRESS, offered=branch.acts.get("f"))
    assert [r.record.decision for r in one] == ["allowed", "not_offered"]
