"""A Tool's argument model and schema are derived once per function.

A request handler that builds ``Branch(tools=[f, g])`` per request makes new
Tool objects every time; what they derive from the function (the argument
model, its JSON schema) is reused, unless the function changed since.
"""

from __future__ import annotations

import pytest

from lionops import Branch, Tool
from lionops.tools import ToolArgumentsError


def lookup(city: str, days: int = 3) -> dict:
    """Weather for a city.

    Args:
        city: the city name.
    """
    return {"city": city, "days": days}


def test_branches_built_from_the_same_function_share_its_argument_model():
    first = Branch(tools=[lookup]).acts.get("lookup")
    second = Branch(tools=[lookup]).acts.get("lookup")
    assert first is not second
    assert first.arguments_model is second.arguments_model
    assert first.schema == second.schema
    assert first.schema["function"]["parameters"]["properties"]["city"] == {
        "description": "the city name.", "type": "string"}


def test_each_schema_is_a_copy_a_caller_may_change():
    a, b = Tool(lookup), Tool(lookup)
    schema = a.schema
    schema["function"]["parameters"]["properties"].clear()
    schema["function"]["description"] = "changed"
    assert b.schema["function"]["parameters"]["properties"]
    assert a.schema["function"]["parameters"]["properties"]
    assert Tool(lookup).description == "Weather for a city."


def test_another_name_or_description_is_its_own():
    named = Tool(lookup, name="forecast", description="Forecast.")
    assert named.arguments_model is not Tool(lookup).arguments_model
    assert named.arguments_model.__name__ == "ForecastArguments"
    assert named.description == "Forecast." and Tool(lookup).description == "Weather for a city."


def test_a_function_changed_since_is_derived_anew():
    def f(x: int) -> int:
        """One."""
        return x

    before = Tool(f)
    f.__defaults__ = (5,)
    f.__doc__ = "Two."
    after = Tool(f)
    assert after.arguments_model is not before.arguments_model
    assert after.validate_arguments({}) == {"x": 5}
    assert after.description == "Two."
    with pytest.raises(ToolArgumentsError):
        before.validate_arguments({})


def test_a_callable_that_cannot_be_weakly_referenced_still_makes_a_tool():
    class Adder(dict):  # unhashable: a dict subclass with a __call__
        def __call__(self, x: int, y: int) -> int:
            return x + y

    tool = Tool(Adder(), name="adder")
    assert tool.validate_arguments({"x": 1, "y": 2}) == {"x": 1, "y": 2}
    assert set(tool.schema["function"]["parameters"]["properties"]) == {"x", "y"}


def test_the_offered_schema_is_shared_read_only_and_carries_its_json():
    import json

    offered = Tool(lookup).offered_schema
    assert offered is Branch(tools=[lookup]).acts.get("lookup").offered_schema
    assert offered == Tool(lookup).schema and offered.json == json.dumps(Tool(lookup).schema)
    with pytest.raises(TypeError, match="read-only"):
        offered["function"]["name"] = "other"
    with pytest.raises(TypeError, match="read-only"):
        offered["function"]["parameters"]["required"].append("days")
    assert Tool(lookup, description="Other.").offered_schema["function"]["description"] == "Other."


@pytest.mark.anyio
async def test_a_middle_is_handed_the_shared_offered_schemas():
    from tests.helpers import ScriptedMiddle

    mid = ScriptedMiddle({})
    await Branch(tools=[lookup]).operate(instruction="x", actions=True, middle=mid)
    await Branch(tools=[lookup]).operate(instruction="y", actions=True, middle=mid)
    first, second = (seen["chat_param"].tool_schemas for seen in mid.seen)
    assert first[0] is second[0] is Tool(lookup).offered_schema


_SOURCE = '''
from __future__ import annotations

from pydantic import BaseModel


class Item(BaseModel):
    name: str


def lookup(city: str, days: int = {days}) -> dict:
    """Weather for a city."""
    return {{"city": city, "days": days}}


def order(item: Item) -> str:
    """Order an item."""
    return item.name
'''


def _import_anew(tmp_path, name: str, days: str = "3"):
    """The module ``name`` imported again from its source, as Temporal's workflow
    sandbox imports a workflow's module for every run (new function and class objects)."""
    import importlib.util
    import sys

    path = tmp_path / f"{name}.py"
    path.write_text(_SOURCE.format(days=days))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_module_imported_again_shares_what_its_functions_derived(tmp_path):
    first = _import_anew(tmp_path, "lionops_reimported_tools")
    second = _import_anew(tmp_path, "lionops_reimported_tools")
    assert first.lookup is not second.lookup
    assert Tool(second.lookup).arguments_model is Tool(first.lookup).arguments_model
    assert Tool(second.lookup).validate_arguments({"city": "Oslo"}) == {"city": "Oslo", "days": 3}


def test_an_annotation_naming_a_class_made_again_is_derived_anew(tmp_path):
    first = _import_anew(tmp_path, "lionops_reimported_models")
    second = _import_anew(tmp_path, "lionops_reimported_models")
    assert first.Item is not second.Item
    old, new = Tool(first.order), Tool(second.order)
    assert new.arguments_model is not old.arguments_model
    assert type(new.validate_arguments({"item": {"name": "teapot"}})["item"]) is second.Item
    assert type(old.validate_arguments({"item": {"name": "teapot"}})["item"]) is first.Item


@pytest.mark.parametrize("days", ["4", "3.0", "-0.0", "None", "'3'"])
def test_another_default_in_the_same_source_is_derived_anew(tmp_path, days):
    first = _import_anew(tmp_path, f"lionops_reimported_default_{abs(hash(days))}", "0.0" if days == "-0.0" else "3")
    second = _import_anew(tmp_path, first.__name__, days)
    assert Tool(second.lookup).arguments_model is not Tool(first.lookup).arguments_model
    assert Tool(second.lookup).validate_arguments({"city": "Oslo"})["days"] == eval(days)  # noqa: S307
    assert repr(Tool(second.lookup).validate_arguments({"city": "Oslo"})["days"]) == repr(eval(days))  # noqa: S307
