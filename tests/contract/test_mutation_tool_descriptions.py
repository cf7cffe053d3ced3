"""What a Tool tells the model about a callable that is not a plain function:
a ``functools.partial`` is described and named by the function it wraps (never
by ``functools.partial``'s own docstring), a callable object by its class's
docstring, else its ``__call__``'s; and the bound arguments leave the schema's
required list."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from lionops import Branch, Tool, act
from lionops.params import ActionParam

pytestmark = pytest.mark.anyio


def scale(value: float, factor: float) -> float:
    """Scale a value by a factor.

    Args:
        value: the number to scale.
        factor: what to multiply it by.
    """
    return value * factor


class Documented:
    """Look a word up."""

    def __call__(self, word: str) -> str:
        """Not this one."""
        return word


class CallOnly:
    def __call__(self, word: str) -> str:
        """Echo a word back.

        Args:
            word: the word.
        """
        return word


class Bare:
    def __call__(self, word: str) -> str:
        return word


def test_a_partial_is_described_and_named_by_the_function_it_wraps() -> None:
    for func in (functools.partial(scale, factor=2.0), functools.partial(functools.partial(scale, factor=2.0))):
        tool = Tool(func)
        assert tool.name == "scale"
        assert tool.description == "Scale a value by a factor."
        params = tool.schema["function"]["parameters"]
        assert params["required"] == ["value"]
        assert params["properties"]["value"]["description"] == "the number to scale."
        assert params["properties"]["factor"]["description"] == "what to multiply it by."
        assert "partial" not in str(tool.schema)


def test_a_partial_keeps_a_name_and_description_given() -> None:
    tool = Tool(functools.partial(scale, factor=3.0), name="triple", description="Triple a value.")
    assert (tool.name, tool.description) == ("triple", "Triple a value.")


def test_a_callable_object_is_described_by_its_class_else_its_call() -> None:
    assert Tool(Documented(), name="lookup").description == "Look a word up."
    call_only = Tool(CallOnly(), name="echo")
    assert call_only.description == "Echo a word back."
    assert call_only.schema["function"]["parameters"]["properties"]["word"]["description"] == "the word."
    assert Tool(Bare(), name="bare").description == ""
    assert Tool(functools.partial(CallOnly()), name="echo").description == "Echo a word back."


def test_a_class_and_a_builtin_keep_their_own_docstrings() -> None:
    class Point:
        """A point on the plane."""

        def __init__(self, x: int) -> None:
            self.x = x

    assert Tool(Point).description == "A point on the plane."

    class Plain:
        def __init__(self, x: int) -> None:
            self.x = x

    assert Tool(Plain).description == ""


async def test_a_partial_runs_with_its_bound_arguments() -> None:
    branch = Branch(tools=[functools.partial(scale, factor=2.0)])
    (out,) = await act(branch, [{"function": "scale", "arguments": {"value": 4}}], ActionParam(suppress_errors=True))
    assert out.record.decision == "allowed" and out.output == 8.0


def test_a_nameless_partial_of_a_nameless_callable_still_needs_a_name() -> None:
    with pytest.raises(ValueError, match=r"^tool name must be an identifier, got ''$"):
        Tool(functools.partial(Bare()))


def test_a_docstring_that_is_not_text_is_no_description() -> None:
    class Odd:
        __doc__: Any = 42

        def __call__(self, word: str) -> str:
            return word

    assert Tool(Odd(), name="odd").description == ""
