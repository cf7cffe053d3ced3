"""A branch reuses the parameters it prepared for a call configuration
(ADR-0022 D1, D2) only while the call's keywords are the same immutable
values and classes and the branch still holds what they were made from;
every other call is prepared anew."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel

from lionops import Branch
from lionops.errors import ArgumentTypeError
from lionops.pipeline.prepare import PREPARED_PER_BRANCH, prepared_key


class Answer(BaseModel):
    city: str


def recording_middle(seen: list[dict[str, Any]], value: Any = None) -> Any:
    """A plain coroutine function (a Middle the cache may key on) that notes what it is handed."""

    async def middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                     skip_validation=False):
        seen.append({"instruction": instruction, "chat_param": chat_param, "parse_param": parse_param})
        if value is not None:
            return value
        return parse_param.response_format.model_validate({"city": "Lisbon"})

    return middle


@pytest.mark.anyio
async def test_the_same_configuration_reuses_its_parameters_and_each_call_keeps_its_instruction(
        anyio_backend: str) -> None:
    seen: list[dict[str, Any]] = []
    middle = recording_middle(seen)
    branch = Branch()
    for text in ("first", "second", "first"):
        result = await branch.operate(instruction=text, response_format=Answer, middle=middle)
        assert isinstance(result, Answer) and result.city == "Lisbon"
    assert [s["instruction"] for s in seen] == ["first", "second", "first"]
    # kept from the configuration's second call on (the first is remembered by its key's hash only)
    assert seen[1]["chat_param"] is seen[2]["chat_param"]
    assert seen[1]["parse_param"] is seen[2]["parse_param"]
    assert len(branch.traces) == 3  # every call is traced all the same
    assert [r.source for r in branch.traces[0].transitions] == [r.source for r in branch.traces[2].transitions]


@pytest.mark.anyio
@pytest.mark.parametrize("context", [["a"], {"k": "v"}])
async def test_a_mutable_keyword_is_never_reused_and_its_change_is_seen(anyio_backend: str, context: Any) -> None:
    seen: list[dict[str, Any]] = []
    middle = recording_middle(seen)
    branch = Branch()
    for _ in range(2):
        await branch.operate(instruction="x", context=context, response_format=Answer, middle=middle)
    if isinstance(context, list):
        context.append("b")
    else:
        context["k2"] = "w"
    await branch.operate(instruction="x", context=context, response_format=Answer, middle=middle)
    assert seen[1]["chat_param"] is not seen[2]["chat_param"]
    assert seen[2]["chat_param"].context == context


class Tagged(str):
    """The caller's own str: it may carry state of its own."""


def test_keys_tell_bool_from_int_and_refuse_subclasses_and_containers() -> None:
    assert prepared_key({"reason": True}) != prepared_key({"reason": 1})
    assert prepared_key({"reason": 1.0}) != prepared_key({"reason": 1})
    assert prepared_key({"guidance": Tagged("g")}) is None
    assert prepared_key({"tools": ["add"]}) is None
    assert prepared_key({"instruct": {"instruction": "x"}}) is None
    assert prepared_key({"middle": lambda *a: None}) is not None
    # a plain instruction is no part of the key
    assert prepared_key({"instruction": "a", "response_format": Answer}) == prepared_key(
        {"instruction": "b", "response_format": Answer})
    # an instruction of another type is
    assert prepared_key({"instruction": 1}) != prepared_key({"instruction": 2})


def test_keys_tell_negative_zero_from_zero() -> None:
    # equal and of one hash, yet JSON writes them apart: -0.0 is sent as the caller gave it
    assert prepared_key({"temperature": -0.0}) != prepared_key({"temperature": 0.0})
    assert prepared_key({"temperature": 0.5}) == prepared_key({"temperature": 0.5})


@pytest.mark.anyio
async def test_a_negative_zero_after_a_zero_is_sent_as_given(anyio_backend: str) -> None:
    seen: list[dict[str, Any]] = []
    middle = recording_middle(seen)
    branch = Branch()
    for value in (0.0, 0.0, -0.0):
        await branch.operate(instruction="x", response_format=Answer, temperature=value, middle=middle)
    assert [math.copysign(1.0, s["chat_param"].imodel_kw["temperature"]) for s in seen] == [1.0, 1.0, -1.0]


@pytest.mark.anyio
async def test_a_bad_flag_after_a_good_one_of_equal_value_is_refused(anyio_backend: str) -> None:
    middle = recording_middle([])
    branch = Branch()
    for _ in range(2):
        await branch.operate(instruction="x", response_format=Answer, reason=True, middle=middle)
    with pytest.raises(ArgumentTypeError):
        await branch.operate(instruction="x", response_format=Answer, reason=1, middle=middle)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_change_on_the_branch_prepares_anew(anyio_backend: str) -> None:
    seen: list[dict[str, Any]] = []
    middle = recording_middle(seen)
    branch = Branch(user="ana")
    for _ in range(2):
        await branch.operate(instruction="x", response_format=Answer, middle=middle)
    branch.user = "bea"
    await branch.operate(instruction="x", response_format=Answer, middle=middle)
    assert [s["chat_param"].sender for s in seen] == ["ana", "ana", "bea"]
    fork = branch.fork()
    for _ in range(2):
        await fork.operate(instruction="x", response_format=Answer, middle=middle)
    assert seen[3]["chat_param"].recipient == seen[4]["chat_param"].recipient == fork.id != branch.id


@pytest.mark.anyio
async def test_parameters_a_middle_changed_are_not_handed_on(anyio_backend: str) -> None:
    seen: list[dict[str, Any]] = []
    inner = recording_middle(seen)

    async def meddling(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                       skip_validation=False):
        chat_param.imodel_kw["temperature"] = 2.0  # the mapping inside a frozen parameter
        return await inner(branch, instruction, chat_param, parse_param, clear_messages, skip_validation)

    branch = Branch()
    for _ in range(3):
        await branch.operate(instruction="x", response_format=Answer, middle=meddling, top_p=0.5)
    assert seen[1]["chat_param"] is not seen[2]["chat_param"]
    assert seen[2]["chat_param"].imodel_kw == {"top_p": 0.5, "temperature": 2.0}  # changed again by this call


@pytest.mark.anyio
async def test_tools_registered_between_calls_are_offered(anyio_backend: str) -> None:
    def add(x: int, y: int) -> int:
        """Add."""
        return x + y

    def echo(text: str) -> str:
        """Echo."""
        return text

    seen: list[dict[str, Any]] = []
    middle = recording_middle(seen)
    branch = Branch(tools=[add])
    for _ in range(2):
        await branch.operate(instruction="x", response_format=Answer, actions=True, middle=middle)
    branch.register_tools(echo)
    await branch.operate(instruction="x", response_format=Answer, actions=True, middle=middle)
    names = [[s["function"]["name"] for s in call["chat_param"].tool_schemas] for call in seen]
    assert names == [["add"], ["add"], ["add", "echo"]]


@pytest.mark.anyio
async def test_the_cache_is_bounded(anyio_backend: str) -> None:
    middle = recording_middle([], value="text")
    branch = Branch()
    await branch.operate(instruction="x", middle=middle)
    assert branch._prepared is None  # one call of a configuration keeps nothing
    for i in range(PREPARED_PER_BRANCH + 5):
        for _ in range(2):
            await branch.operate(instruction="x", guidance=f"g{i}", middle=middle)
    assert branch._prepared is not None and len(branch._prepared) == PREPARED_PER_BRANCH
