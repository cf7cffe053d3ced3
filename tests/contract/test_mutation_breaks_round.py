"""Inputs next to the newest rules, through the real ``act()``, ``operate()``,
``MessageLog`` and ``Tool``: a one-shot iterator held inside a tool's output
(a dict, list, tuple, model or dataclass) is refused unread like a bare one;
a message writer that raises loses no record and replaces no exception
already raised (a tool's, a cancellation); a response model whose missing
name is one lionops' own modules define is refused like any other name."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionops import Branch, Tool, act
from lionops.errors import ConfigurationError, ToolOutputError
from lionops.messages import MessageLog
from lionops.params import ActionParam

pytestmark = pytest.mark.anyio


def _pairs() -> Iterator[int]:
    yield 1
    yield 2


class Lazy(BaseModel):
    values: Iterable[int]


@dataclasses.dataclass
class Box:
    items: Any


#: outputs holding a one-shot iterator, each with the function that reads what is left of it
NESTED: dict[str, tuple[Any, Any]] = {
    "dict": (lambda: {"a": _pairs()}, lambda out: next(out["a"])),
    "dict_key_list": (lambda: {"a": [1, {"b": map(int, "12")}]}, lambda out: next(out["a"][1]["b"])),
    "list": (lambda: [_pairs()], lambda out: next(out[0])),
    "tuple": (lambda: (1, iter([1, 2])), lambda out: next(out[1])),
    "model": (lambda: Lazy(values=[1, 2]), lambda out: next(out.values)),
    "dataclass": (lambda: Box(items=zip([1], [2], strict=True)), lambda out: next(out.items)[0]),
}


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
@pytest.mark.parametrize("kind", sorted(NESTED))
async def test_a_one_shot_iterator_inside_an_output_is_refused_unread(kind: str, strategy: str) -> None:
    make, first = NESTED[kind]
    made: list[Any] = []

    def lookup() -> object:
        """Return a container holding a one-shot iterator."""
        made.append(make())
        return made[-1]

    branch = Branch(tools=[lookup])
    [response] = await act(branch, [{"function": "lookup", "arguments": {}}],
                           ActionParam(strategy=strategy, suppress_errors=True))
    assert response is not None and response.decision == "error"
    assert response.output["type"] == "ToolOutputError"
    assert "one-shot iterator" in response.output["error"] and "return a list" in response.output["error"]
    assert first(made[0]) == 1  # nothing was read from it

    with pytest.raises(ToolOutputError, match="one-shot iterator"):
        await act(branch, [{"function": "lookup", "arguments": {}}],
                  ActionParam(strategy=strategy, suppress_errors=False))
    assert first(made[1]) == 1


async def test_containers_without_iterators_still_serialize() -> None:
    shared = [1, 2]

    def lookup() -> object:
        """Return containers, one of them twice, and a model."""
        return {"a": shared, "b": shared, "c": ({1, 2}, frozenset({3})), "d": Box(items=[4]),
                "e": Lazy.model_construct()}

    branch = Branch(tools=[lookup])
    [response] = await branch.act({"function": "lookup", "arguments": {}})
    assert response.decision == "allowed"


async def test_a_nested_one_shot_iterator_through_operate_is_an_error_payload() -> None:
    left: list[Any] = []

    def rows() -> dict[str, Any]:
        """Rows of a table."""
        left.append(map(str, [1, 2]))
        return {"rows": left[-1]}

    class Answer(BaseModel):
        text: str

    async def middle(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                     clear_messages: bool = False, skip_validation: bool = False) -> Any:
        return parse_param.response_format.model_validate(
            {"text": "t", "action_requests": [{"function": "rows", "arguments": {}}]})

    branch = Branch(tools=[rows])
    result = await branch.operate(instruction="rows?", response_format=Answer, actions=True, middle=middle)
    assert isinstance(result, Answer)
    assert [r.decision for r in branch.traces[-1].actions] == ["error"]
    assert result.action_responses[0].output["type"] == "ToolOutputError"  # type: ignore[attr-defined]
    assert next(left[0]) == "1"


# ---------------------------------------------------------------- a message writer that raises


class FailingLog(MessageLog):
    """Fails to write the response of the request whose ``x`` is 2."""

    def add_action_response(self, function: Any, arguments: Any, output: Any, **kw: Any) -> Any:
        if arguments.get("x") == 2:
            raise RuntimeError("message store down")
        return super().add_action_response(function, arguments, output, **kw)


def echo(x: int) -> int:
    """Echo x."""
    return x


async def test_a_raising_message_writer_loses_no_record() -> None:
    branch = Branch(tools=[echo])
    branch.messages = FailingLog()
    records: list[Any] = []
    with pytest.raises(RuntimeError, match="message store down"):
        await act(branch, [{"function": "echo", "arguments": {"x": i}} for i in range(4)],
                  ActionParam(strategy="concurrent", suppress_errors=True), records=records)
    assert [(r.index, r.decision, r.output) for r in records] == [(i, "allowed", i) for i in range(4)]
    assert sorted(e.content["index"] for e in branch.logs.of_kind("action")) == [0, 1, 2, 3]


async def test_a_raising_message_writer_keeps_the_trace_actions_of_operate() -> None:
    class Answer(BaseModel):
        text: str

    async def middle(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                     clear_messages: bool = False, skip_validation: bool = False) -> Any:
        return parse_param.response_format.model_validate(
            {"text": "t", "action_requests": [{"function": "echo", "arguments": {"x": i}} for i in range(4)]})

    branch = Branch(tools=[echo])
    branch.messages = FailingLog()
    with pytest.raises(RuntimeError, match="message store down"):
        await branch.operate(instruction="echo", response_format=Answer, actions=True, middle=middle)
    trace = branch.traces[-1]
    assert trace.exit == "failed" and trace.states[-2:] == ["act", "raised"]
    assert [(r.index, r.decision) for r in trace.actions] == [(i, "allowed") for i in range(4)]


class DownLog(MessageLog):
    """Fails to write any request."""

    def add_action_request(self, function: Any, arguments: Any, **kw: Any) -> Any:
        raise RuntimeError("message store down")


def broken(x: int) -> int:
    """A tool whose backend is down."""
    raise KeyError("backend down")


async def slow(x: int) -> int:
    """A tool that takes its time."""
    await anyio.sleep(30)
    return x


async def test_a_raising_writer_does_not_replace_the_tool_s_own_exception() -> None:
    branch = Branch(tools=[broken])
    branch.messages = DownLog()
    records: list[Any] = []
    with pytest.raises(KeyError, match="backend down") as caught:
        await act(branch, [{"function": "broken", "arguments": {"x": 1}}],
                  ActionParam(strategy="sequential", suppress_errors=False), records=records)
    assert caught.value.__notes__ == [
        "writing the messages of the batch failed too: RuntimeError: message store down"]
    assert [(r.decision, r.error_type) for r in records] == [("error", "KeyError")]
    [entry] = branch.logs.of_kind("message_error")
    assert entry.content == {"error": "message store down", "type": "RuntimeError", "branch": branch.id}


async def test_a_raising_writer_does_not_turn_a_cancellation_into_its_error() -> None:
    branch = Branch(tools=[slow])
    branch.messages = DownLog()
    with anyio.move_on_after(0.05) as scope:
        await branch.act({"function": "slow", "arguments": {"x": 1}})
    assert scope.cancelled_caught
    assert [e.kind for e in branch.logs] == ["action_error", "message_error"]
    assert branch.logs.of_kind("action_error")[0].content["reason"] == "tool cancelled"


# ---------------------------------------------------------------- names lionops defines


@pytest.mark.parametrize("missing", ["Any", "Spec", "Operative", "BaseModel", "create_model"])
async def test_a_missing_name_lionops_defines_is_refused_before_the_middle(missing: str) -> None:
    namespace: dict[str, Any] = {"__name__": "caller_app"}
    exec(f"from pydantic import BaseModel\nclass Outer(BaseModel):\n    x: {missing!r}\n", namespace)
    outer = namespace["Outer"]
    asked: list[Any] = []

    async def middle(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                     clear_messages: bool = False, skip_validation: bool = False) -> Any:
        asked.append(parse_param.response_format)
        return parse_param.response_format.model_validate({"x": 3})

    branch = Branch()
    for kw in ({}, {"reason": True}, {"actions": True}):
        with pytest.raises(ConfigurationError, match=f"Outer is not fully defined: it names '{missing}'"):
            await branch.operate(instruction="x?", response_format=outer, middle=middle, **kw)
    assert asked == []

    namespace[missing] = int  # the caller defines the name in its own module, then rebuilds
    outer.model_rebuild(_types_namespace=namespace)
    result = await branch.operate(instruction="x?", response_format=outer, middle=middle)
    assert isinstance(result, outer) and result.x == 3
    assert asked[0].model_fields["x"].annotation is int


# ---------------------------------------------------------------- the walk over an output, exactly


async def _refused(output: Any) -> dict[str, Any]:
    """The error payload of a tool that returned ``output`` (decision ``error``)."""

    def give() -> Any:
        """Return what the test built."""
        return output

    branch = Branch(tools=[give])
    (out,) = await act(branch, [{"function": "give", "arguments": {}}], ActionParam(suppress_errors=True))
    assert out.record.decision == "error" and out.output["type"] == "ToolOutputError"
    payload: dict[str, Any] = out.output
    return payload


@pytest.mark.parametrize(("make", "kind", "inside"), [
    (lambda: {"rows": iter([1])}, "list_iterator", "dict"),
    (lambda: [iter([1]), 1], "list_iterator", "list"),
    (lambda: (map(str, [1]),), "map", "tuple"),
    (lambda: {(x for x in [1]): 1}, "generator", "dict"),
], ids=["dict-value", "list-iterator-first", "tuple", "dict-key"])
async def test_the_refusal_names_the_iterator_and_the_container_it_is_in(make: Any, kind: str, inside: str) -> None:
    payload = await _refused(make())
    assert payload["error"] == (
        f"output of 'give' is a one-shot iterator ({kind}) inside its {inside}: it cannot be both recorded"
        " and shown to the model; return a list (for example list(...)) instead")


async def test_a_part_met_twice_is_walked_once_and_the_walk_goes_on() -> None:
    shared = {"a": [1, 2]}
    payload = await _refused([iter([1]), shared, shared])
    assert "one-shot iterator (list_iterator) inside its list" in payload["error"]


async def test_a_cyclic_output_is_walked_to_its_end_and_refused_as_not_serializable() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop  # walked again and again without a memory of what was seen
    payload = await _refused(loop)
    assert "is not JSON-serializable (dict)" in payload["error"]


@dataclasses.dataclass
class Unset:
    later: int = dataclasses.field(init=False)


async def test_a_dataclass_with_an_unset_field_is_refused_as_not_serializable() -> None:
    payload = await _refused(Unset())
    assert "is not JSON-serializable (Unset)" in payload["error"]


class CallableAndIterable:
    """A callable object that is also iterable, selected by the name it carries."""

    name = "both"

    def __call__(self, x: int) -> int:
        return x

    def __iter__(self) -> Iterator[str]:
        return iter(["other"])


def test_a_callable_selector_is_one_selector_even_when_it_is_iterable() -> None:
    def other(x: int) -> int:
        """Other."""
        return x

    obj = CallableAndIterable()
    branch = Branch(tools=[other, Tool(obj, name="both")])
    assert [t.name for t in branch.acts.select(obj)] == ["both"]
