"""Signatures a Tool derives from that pydantic does not take as they are:
quoted annotations under postponed evaluation, positional-only parameters,
``Field(...)`` defaults, a typed ``**kwargs`` and parameter names in
pydantic's own namespace. Real functions, the public API only (``Tool``,
``Branch(tools=...)``, ``branch.act``, ``branch.acts.get_tool_schema()``).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Annotated, Any

import pytest
from pydantic import Field

from lionops import Branch, Tool
from lionops.errors import ConfigurationError
from tests import postponed_tools
from tests.helpers import ScriptedMiddle


async def run(branch: Branch, function: str, arguments: dict[str, Any]) -> tuple[str, Any]:
    [response] = await branch.act([{"function": function, "arguments": arguments}])
    return response.record.decision, response.output


def parameters(func: Any) -> dict[str, Any]:
    [schema] = Branch(tools=[func]).acts.get_tool_schema()["tools"]
    return schema["function"]["parameters"]


# ---------------------------------------------------------------- quoted annotations


@pytest.mark.anyio
async def test_a_quoted_annotation_under_postponed_evaluation_names_the_modules_type():
    branch = Branch(tools=[postponed_tools.norm, postponed_tools.total])
    assert parameters(postponed_tools.norm) == {
        "$defs": {"Point": {"properties": {"x": {"title": "X", "type": "integer"}},
                            "required": ["x"], "title": "Point", "type": "object"}},
        "additionalProperties": False,
        "properties": {"p": {"$ref": "#/$defs/Point"}},
        "required": ["p"], "type": "object"}
    assert await run(branch, "norm", {"p": {"x": -4}}) == ("allowed", 4)
    assert await run(branch, "total", {"points": [{"x": 1}, {"x": 2}], "scale": "3"}) == ("allowed", 9)


@pytest.mark.anyio
async def test_a_quoted_annotation_works_through_operate():
    branch = Branch(tools=[postponed_tools.norm])
    out = await branch.operate(instruction="norm?", actions=True, middle=ScriptedMiddle(
        {"action_requests": [{"function": "norm", "arguments": {"p": {"x": 7}}}]}))
    assert [r.output for r in out["action_responses"]] == [7]


def load(tmp_path, name: str, source: str) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@pytest.mark.parametrize("annotation", ['"Hidden"', "Hidden", "list[Hidden]", '"Optional[Hidden]"', "hidden.Thing"])
def test_a_type_imported_only_under_type_checking_is_refused_at_construction(tmp_path, annotation):
    module = load(tmp_path, f"hidden_types_{abs(hash(annotation))}", f'''
from __future__ import annotations
from typing import TYPE_CHECKING, Optional
if TYPE_CHECKING:
    from decimal import Decimal as Hidden
    import hidden

def price(amount: int, value: {annotation}) -> int:
    return amount
''')
    with pytest.raises(ConfigurationError) as info:
        Branch(tools=[module.price])
    assert str(info.value).startswith("tool 'price': parameter 'value' is annotated with ")
    assert "imports only under TYPE_CHECKING" in str(info.value)


UNDEFINED = ("tool 'price': an argument is annotated with 'Later', which module '{module}' does not define, "
             "so its arguments cannot be validated; define or import it there")


@pytest.mark.anyio
async def test_a_type_its_module_never_defines_is_named_when_the_tool_is_offered_or_called(tmp_path):
    module = load(tmp_path, "undefined_types", """
from __future__ import annotations

def price(amount: int, value: Later) -> int:
    return amount
""")
    branch = Branch(tools=[module.price])  # made: the module may still define the type later
    message = UNDEFINED.format(module="undefined_types")
    with pytest.raises(ConfigurationError) as offered:
        branch.acts.get_tool_schema()
    assert str(offered.value) == message
    with pytest.raises(ConfigurationError) as operated:
        await branch.operate(instruction="price?", actions=True, middle=ScriptedMiddle({"action_requests": []}))
    assert str(operated.value) == message
    [response] = await branch.act([{"function": "price", "arguments": {"amount": 1, "value": 2}}])
    assert (response.record.decision, response.record.reason) == ("rejected", message)
    assert response.record.invoked is False


@pytest.mark.anyio
async def test_a_type_its_module_defines_after_the_tool_is_made_is_used_once_defined(tmp_path):
    module = load(tmp_path, "later_types", """
from __future__ import annotations
from pydantic import BaseModel
from lionops import Tool

def price(amount: int, value: Later) -> int:
    return amount * value.rate

tool = Tool(price)

class Later(BaseModel):
    rate: int
""")
    branch = Branch(tools=[module.tool])
    [schema] = branch.acts.get_tool_schema()["tools"]
    assert schema["function"]["parameters"]["required"] == ["amount", "value"]
    assert await run(branch, "price", {"amount": 3, "value": {"rate": "4"}}) == ("allowed", 12)


class Plain:
    def __init__(self, size: int) -> None:
        self.size = size


def measure(item: Plain, scale: int = 1) -> int:
    return item.size * scale


@pytest.mark.anyio
async def test_a_plain_class_argument_is_refused_only_when_offered_to_a_model():
    branch = Branch(tools=[measure])
    with pytest.raises(ConfigurationError) as info:
        branch.acts.get_tool_schema()
    assert str(info.value).startswith(
        "tool 'measure': an argument's type has no JSON schema, so the tool cannot be offered to a model (")
    assert "Plain" in str(info.value)
    # the caller's own request, with the object itself, still runs it
    assert await run(branch, "measure", {"item": Plain(5), "scale": 2}) == ("allowed", 10)


# ---------------------------------------------------------------- positional-only parameters


def posonly(a: int, /, b: int) -> str:
    return f"{a}-{b}"


def posonly_defaulted(a: int, b: str = "b", /, *, c: int = 0) -> str:
    return f"{a}-{b}-{c}"


@pytest.mark.anyio
async def test_positional_only_parameters_are_passed_positionally_in_order():
    branch = Branch(tools=[posonly, posonly_defaulted])
    assert parameters(posonly) == {
        "additionalProperties": False,
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"], "type": "object"}
    assert await run(branch, "posonly", {"b": 2, "a": "1"}) == ("allowed", "1-2")
    assert await run(branch, "posonly_defaulted", {"a": 1, "c": 3}) == ("allowed", "1-b-3")
    assert await run(branch, "posonly_defaulted", {"a": 1, "b": "x"}) == ("allowed", "1-x-0")
    assert await Tool(posonly).invoke({"a": 5, "b": 6}) == "5-6"


# ---------------------------------------------------------------- Field(...) defaults


def counted(n: int = Field(3, description="how many", ge=1)) -> int:
    return n


def described(n: int = Field(3, description="from the default")) -> int:
    """Described.

    Args:
        n: from the docstring.
    """
    return n


def annotated(n: Annotated[int, Field(description="from Annotated")] = Field(2, le=5)) -> int:
    return n


def required_field(n: int = Field(..., description="needed")) -> int:
    return n


@pytest.mark.anyio
async def test_a_field_default_is_the_fields_own_spec():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[counted, required_field])
    branch.gate(lambda invocation: seen.append(dict(invocation.arguments)) or True)
    assert parameters(counted) == {
        "additionalProperties": False,
        "properties": {"n": {"default": 3, "description": "how many", "minimum": 1, "type": "integer"}},
        "type": "object"}
    assert await run(branch, "counted", {}) == ("allowed", 3)
    assert seen == [{"n": 3}]
    decision, output = await run(branch, "counted", {"n": 0})
    assert decision == "rejected" and "greater than or equal to 1" in output["message"]
    assert parameters(required_field) == {
        "additionalProperties": False,
        "properties": {"n": {"description": "needed", "type": "integer"}},
        "required": ["n"], "type": "object"}
    assert (await run(branch, "required_field", {}))[0] == "rejected"


def test_a_docstring_description_still_comes_first_and_annotated_is_kept():
    assert parameters(described)["properties"] == {
        "n": {"default": 3, "description": "from the docstring.", "type": "integer"}}
    assert parameters(annotated)["properties"] == {
        "n": {"default": 2, "description": "from Annotated", "maximum": 5, "type": "integer"}}


# ---------------------------------------------------------------- a typed **kwargs


def typed_extras(x: int, **kwargs: str) -> dict[str, Any]:
    return {"x": x, **kwargs}


def numbered_extras(**kwargs: int) -> dict[str, Any]:
    return kwargs


def untyped_extras(x: int, **kwargs) -> dict[str, Any]:
    return {"x": x, **kwargs}


@pytest.mark.anyio
async def test_extra_arguments_are_validated_against_the_kwargs_annotation():
    branch = Branch(tools=[typed_extras, numbered_extras, untyped_extras])
    decision, output = await run(branch, "typed_extras", {"x": 1, "extra": 5})
    assert decision == "rejected" and "extra" in output["message"] and "valid string" in output["message"]
    assert await run(branch, "typed_extras", {"x": 1, "extra": "five"}) == ("allowed", {"x": 1, "extra": "five"})
    assert await run(branch, "numbered_extras", {"a": "2"}) == ("allowed", {"a": 2})
    assert await run(branch, "untyped_extras", {"x": 1, "extra": [5]}) == ("allowed", {"x": 1, "extra": [5]})


# ---------------------------------------------------------------- names in pydantic's namespace


def config_named(model_config: str, _x: int = 1, model_dump: bool = False, copy: int = 0,
                 arg0_: str = "") -> dict[str, Any]:
    return {"model_config": model_config, "_x": _x, "model_dump": model_dump, "copy": copy, "arg0_": arg0_}


@pytest.mark.anyio
async def test_parameters_named_in_pydantics_namespace_keep_their_names():
    seen: list[dict[str, Any]] = []
    branch = Branch(tools=[config_named])
    branch.gate(lambda invocation: seen.append(dict(invocation.arguments)) or True)
    assert parameters(config_named) == {
        "additionalProperties": False,
        "properties": {
            "model_config": {"type": "string"},
            "_x": {"default": 1, "type": "integer"},
            "model_dump": {"default": False, "type": "boolean"},
            "copy": {"default": 0, "type": "integer"},
            "arg0_": {"default": "", "type": "string"}},
        "required": ["model_config"], "type": "object"}
    expected = {"model_config": "c", "_x": 2, "model_dump": True, "copy": 3, "arg0_": "a"}
    assert await run(branch, "config_named", {"model_config": "c", "_x": "2", "model_dump": True,
                                              "copy": 3, "arg0_": "a"}) == ("allowed", expected)
    assert seen == [expected]
    decision, output = await run(branch, "config_named", {"model_config": "c", "arg1_": 2})
    assert decision == "rejected" and "arg1_" in output["message"]


@pytest.mark.anyio
async def test_quoted_annotations_of_methods_partials_and_callable_objects_resolve():
    scaler = postponed_tools.Scaler()
    assert await Tool(scaler.scale).invoke({"p": {"x": 3}}) == 6
    assert await Tool(scaler, name="bump").invoke({"p": {"x": 3}}) == 4
    assert await Tool(functools.partial(postponed_tools.total, scale=10), name="tens").invoke(
        {"points": [{"x": 1}]}) == 10


@pytest.mark.anyio
async def test_an_alias_of_the_functions_own_is_shown_and_the_function_gets_its_parameter():
    def shipped(weight: Annotated[float, Field(alias="weightKg")], _note: str = "") -> str:
        return f"{weight}/{_note}"

    assert parameters(shipped)["properties"] == {
        "weightKg": {"type": "number"}, "_note": {"default": "", "type": "string"}}
    assert await run(Branch(tools=[shipped]), "shipped", {"weightKg": 2, "_note": "n"}) == ("allowed", "2.0/n")
