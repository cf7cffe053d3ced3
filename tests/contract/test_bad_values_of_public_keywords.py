"""A value of the wrong type for a public keyword or registration is a typed
:class:`~lionops.errors.LionopsError` at once (never a bare ``TypeError`` or a
pydantic ``ValidationError`` from deep inside, never accepted to fail every call
later): ``instruction``/``guidance``/``context``/``instruct``, ``middle``,
``field_models``, a ``tools=`` selector of bytes, a gate check, hook handler,
context provider or ``authorize`` that is not callable; a provider or message
role misspelled (the closest names suggested) or not text; a ``keep_last``
count, a tool name or trace text of the wrong type."""

from __future__ import annotations

from typing import Any

import pytest

from lionops import Branch, HookPoint, Tool, Trace, iModel
from lionops.errors import (
    ArgumentTypeError,
    ConfigurationError,
    GateSignatureError,
    LionopsError,
    TraceFormatError,
    UnknownToolError,
)

pytestmark = pytest.mark.anyio


def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


async def _never_called(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                        clear_messages: bool = False, skip_validation: bool = False) -> Any:
    raise AssertionError("the Middle must not be awaited for a refused call")


@pytest.mark.parametrize("kw", [
    {"instruction": 3}, {"instruction": ["a"]}, {"guidance": object()},
    {"instruct": {"instruction": 3}}, {"instruct": {"context": object(), "instruction": {"a"}}},
], ids=["instruction-int", "instruction-list", "guidance-object", "instruct-map", "instruct-map-two"])
async def test_an_instruction_keyword_of_the_wrong_type_is_an_argument_type_error(kw, anyio_backend):
    branch = Branch(tools=[refund])
    with pytest.raises(ArgumentTypeError, match="instruction keywords of the wrong type") as ei:
        await branch.operate(middle=_never_called, **kw)
    assert isinstance(ei.value, TypeError) and ei.value.__cause__ is None
    assert len(branch.messages) == 0


@pytest.mark.parametrize("middle", [3, "communicate", ["x"]], ids=["int", "str", "list"])
async def test_a_middle_that_is_not_callable_is_refused_before_anything_runs(middle, anyio_backend):
    branch = Branch(tools=[refund])
    with pytest.raises(ArgumentTypeError, match="middle must be an async callable"):
        await branch.operate(instruction="hi", middle=middle)
    assert len(branch.messages) == 0


@pytest.mark.parametrize("field_models", [3, "name", object()], ids=["int", "str", "object"])
async def test_field_models_that_is_not_a_list_is_an_argument_type_error(field_models, anyio_backend):
    with pytest.raises(ArgumentTypeError, match="field_models"):
        await Branch().operate(instruction="hi", middle=_never_called, field_models=field_models)


@pytest.mark.parametrize("selector", [b"refnd", bytearray(b"refnd")], ids=["bytes", "bytearray"])
def test_a_bytes_selector_is_one_value_not_a_list_of_integers(selector):
    with pytest.raises(ArgumentTypeError, match="tools= selector names tools by name") as ei:
        Branch(tools=[refund]).acts.select(selector)
    assert "114" not in str(ei.value) and "refnd" in str(ei.value)
    with pytest.raises(UnknownToolError, match="did you mean 'refund'"):
        Branch(tools=[refund]).acts.select("refnd")


@pytest.mark.parametrize("value", ["refund", None, 3, [lambda invocation: True]], ids=["str", "None", "int", "list"])
def test_a_gate_hook_or_provider_that_is_not_callable_is_refused_when_registered(value):
    branch = Branch(tools=[refund])
    with pytest.raises(GateSignatureError, match="must be callable"):
        branch.gate(value)
    with pytest.raises(GateSignatureError, match="must be callable"):
        branch.gate(value, blocking=True)
    with pytest.raises(GateSignatureError, match="must be callable"):
        branch.on(HookPoint.TOOL_PRE, value)
    assert not branch.needs_authorization()

    class Provider:
        writeback = value

    with pytest.raises(ArgumentTypeError, match="callable writeback"):
        branch.add_context_provider(Provider())
    assert isinstance(GateSignatureError("x"), LionopsError)


@pytest.mark.parametrize("value", [lambda: True, "x", None, 3], ids=["no-argument", "str", "None", "int"])
async def test_an_authorize_set_on_the_branch_is_checked_as_a_gate_is(value, anyio_backend):
    branch = Branch(tools=[refund])
    with pytest.raises(GateSignatureError, match=r"authorize\(invocation\) -> bool"):
        branch.authorize = value
    assert not branch.needs_authorization()  # the branch's own is kept
    [out] = await branch.act({"function": "refund", "arguments": {"order_id": "1"}})
    assert out is not None and out.record.decision == "allowed"

    def deny_all(invocation: Any) -> bool:
        return False

    branch.authorize = deny_all  # one argument: taken, asked, and it denies
    assert branch.needs_authorization() and branch.fork().authorize is deny_all
    [out] = await branch.act({"function": "refund", "arguments": {"order_id": "2"}})
    assert out is not None and out.record.decision == "denied"


# --------------------------------------------------------------------------- names and values looked up elsewhere


def test_a_misspelled_or_non_text_provider_is_typed_and_suggests_the_closest():
    with pytest.raises(ConfigurationError, match=r"unknown provider 'opnai' \(did you mean 'openai'\?\)"):
        iModel(provider="opnai", model="m")
    with pytest.raises(ConfigurationError, match=r"did you mean 'ollama'\?"):
        iModel(provider="olama", model="m")
    for provider in (3, ["openai"]):
        with pytest.raises(ArgumentTypeError, match="provider must be a provider name"):
            iModel(provider=provider, model="m")


@pytest.mark.parametrize("role", ["asistant", "usr", 3, ["user"]], ids=["assistant", "user", "int", "list"])
def test_a_misspelled_or_non_text_role_is_refused_when_messages_are_looked_up_or_added(role):
    messages = Branch(system="be brief").messages
    with pytest.raises(ConfigurationError, match="unknown message role") as looked_up:
        messages.by_role(role)
    with pytest.raises(ConfigurationError, match="unknown message role"):
        messages.add(role, "hi")
    assert ("did you mean" in str(looked_up.value)) == isinstance(role, str)
    assert [m.role for m in messages.by_role("system")] == ["system"]


@pytest.mark.parametrize(("n", "error"), [("2", ArgumentTypeError), (2.0, ArgumentTypeError), (True, ArgumentTypeError),
                                          (-1, ConfigurationError)])
def test_keep_last_takes_a_count(n, error):
    branch = Branch(system="s")
    branch.messages.add("user", "a")
    with pytest.raises(error, match="keep_last takes"):
        branch.messages.keep_last(n)
    assert len(branch.messages) == 2  # nothing dropped


def test_a_tool_name_that_is_not_text_and_a_trace_that_is_not_json_text_are_typed():
    with pytest.raises(ArgumentTypeError, match="tool name must be a str"):
        Tool(refund, name=3)  # type: ignore[arg-type]
    for text in (3, None, {"machine": "operate"}):
        with pytest.raises(TraceFormatError, match="a trace is JSON text"):
            Trace.from_json(text)  # type: ignore[arg-type]


async def test_false_as_a_selector_is_an_argument_type_error_and_zero_is_no_tool(anyio_backend):
    # Neither means "every tool": False says how to select none, 0 names no tool.
    branch = Branch(tools=[refund])
    with pytest.raises(ArgumentTypeError, match=r"tools= selector names tools by name.*\[\] for none"):
        branch.acts.select(False)
    with pytest.raises(ArgumentTypeError, match="tools= selector"):
        await branch.operate(instruction="hi", middle=_never_called, actions=True, tools=False)
    for selector in (0, 1.5, [None]):
        with pytest.raises(UnknownToolError, match="is not registered"):
            await branch.operate(instruction="hi", middle=_never_called, actions=True, tools=selector)


def test_a_tool_named_twice_in_a_selector_is_offered_once():
    branch = Branch(tools=[refund])
    assert [t.name for t in branch.acts.select(["refund", refund, "refund"])] == ["refund"]
    assert len(branch.acts.get_tool_schema(("refund", "refund"))["tools"]) == 1
