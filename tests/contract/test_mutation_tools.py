"""What a Tool derives from its function, and which tools an operation offers
and runs: the argument schema a model is shown (defaulted, unannotated,
keyword-only, ``*args``/``**kwargs``, Optional, Annotated and model
parameters), the descriptions read from docstrings, when a changed function
is derived anew, the name check, and how ``ActionManager`` selects and
registers tools and ``Tool`` runs its function. Real functions, scripted
Middles (real objects), the loopback OpenAI server; the public API only.
Every expected schema and description is written out here.
"""

from __future__ import annotations

import inspect
import json
import threading
import warnings
from typing import Annotated, Any, Optional

import pytest
from pydantic import BaseModel, Field, PydanticUserError

from lionops import Branch, Tool
from lionops.errors import ConfigurationError, ToolArgumentsError
from lionops.runtime import use_runtime
from lionops.testing import completion, tool_call
from tests.helpers import ScriptedMiddle
from tests.openai_server import model, server  # noqa: F401 - fixtures

# ---------------------------------------------------------------- the functions


def forecast(city: str, days: int = 3, *, unit: str = "C", verbose) -> str:
    """Weather for a city."""
    return f"{city}/{days}/{unit}/{verbose}"


def collect(first, *rest: int, scale: float, **options: str) -> dict:
    """Collect."""
    return {"first": first, "scale": scale, "options": options}


class Location(BaseModel):
    lat: float
    lon: float = 0.0


def place(where: Location, note: Optional[str] = None,  # noqa: UP045 - the Optional spelling is a case
          count: Annotated[int, Field(ge=1, description="how many, at least one")] = 1) -> str:
    """Place."""
    return f"{where.lat}/{note}/{count}"


def nothing() -> str:
    """Nothing."""
    return "ok"


SCHEMAS = [
    pytest.param(forecast, {
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string"},
            "days": {"default": 3, "type": "integer"},
            "unit": {"default": "C", "type": "string"},
            "verbose": {},
        },
        "required": ["city", "verbose"],
        "type": "object",
    }, id="defaulted-unannotated-keyword-only"),
    pytest.param(collect, {
        # *rest is not an argument a model can name; **options lets unknown keys through
        "additionalProperties": True,
        "properties": {"first": {}, "scale": {"type": "number"}},
        "required": ["first", "scale"],
        "type": "object",
    }, id="var-positional-then-keyword-only-and-var-keyword"),
    pytest.param(place, {
        "$defs": {"Location": {
            "properties": {"lat": {"title": "Lat", "type": "number"},
                           "lon": {"default": 0.0, "title": "Lon", "type": "number"}},
            "required": ["lat"], "title": "Location", "type": "object",
        }},
        "additionalProperties": False,
        "properties": {
            "where": {"$ref": "#/$defs/Location"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "count": {"default": 1, "description": "how many, at least one", "minimum": 1, "type": "integer"},
        },
        "required": ["where"],
        "type": "object",
    }, id="model-optional-annotated"),
    pytest.param(nothing, {"additionalProperties": False, "properties": {}, "type": "object"}, id="no-parameters"),
]


@pytest.mark.parametrize(("func", "parameters"), SCHEMAS)
def test_the_schema_a_model_is_shown(func, parameters):
    tool = Tool(func)
    expected = {"type": "function", "function": {
        "name": func.__name__, "description": func.__doc__, "parameters": parameters}}
    assert tool.schema == expected
    assert json.loads(tool.offered_schema.json) == expected
    assert Branch(tools=[func]).acts.get_tool_schema() == {"tools": [expected]}


@pytest.mark.anyio
async def test_the_loopback_server_receives_the_derived_schema(server, model):  # noqa: F811
    server.push(completion(None, tool_calls=[tool_call("forecast", {"city": "Oslo", "verbose": 1})]))
    _, trace = await Branch(chat_model=model, tools=[forecast]).operate_traced(instruction="q", actions=True)
    assert [(r.decision, r.output) for r in trace.actions] == [("allowed", "Oslo/3/C/1")]
    [request] = server.chat_requests
    assert request.body["tools"] == [{"type": "function", "function": {
        "name": "forecast", "description": "Weather for a city.", "parameters": SCHEMAS[0].values[1]}}]


@pytest.mark.parametrize(("arguments", "validated"), [
    ({"city": "Oslo", "verbose": 1}, {"city": "Oslo", "days": 3, "unit": "C", "verbose": 1}),
    ({"city": "Oslo", "days": "5", "unit": "F", "verbose": None},
     {"city": "Oslo", "days": 5, "unit": "F", "verbose": None}),
], ids=["defaults-filled", "converted"])
def test_defaulted_and_keyword_only_arguments_validate(arguments, validated):
    assert Tool(forecast).validate_arguments(arguments) == validated


@pytest.mark.parametrize(("func", "arguments", "message"), [
    (forecast, {"city": "Oslo", "verbose": 1, "colour": "red"},
     "invalid arguments for 'forecast': colour: Extra inputs are not permitted"),
    (forecast, {"city": "Oslo"}, "invalid arguments for 'forecast': verbose: Field required"),
    (collect, {"first": 1}, "invalid arguments for 'collect': scale: Field required"),
    (place, {"where": {"lat": 1.0}, "count": 0},
     "invalid arguments for 'place': count: Input should be greater than or equal to 1"),
], ids=["unknown-key", "missing-keyword-only", "missing-after-var-positional", "annotated-constraint"])
def test_arguments_that_do_not_fit_are_refused(func, arguments, message):
    with pytest.raises(ToolArgumentsError) as info:
        Tool(func).validate_arguments(arguments)
    assert str(info.value) == message


def test_var_keyword_passes_unknown_keys_to_the_function():
    tool = Tool(collect)
    kwargs = tool.validate_arguments({"first": "a", "scale": "2", "mode": "fast", "tag": "x"})
    assert kwargs == {"first": "a", "scale": 2.0, "mode": "fast", "tag": "x"}
    assert collect(**kwargs) == {"first": "a", "scale": 2.0, "options": {"mode": "fast", "tag": "x"}}


class Handle:
    """Not a pydantic type: only an instance given from Python fits."""


def use_handle(handle: Handle, n: int = 1) -> int:
    return n


def test_a_parameter_of_a_plain_class_accepts_an_instance_of_it():
    tool = Tool(use_handle)
    handle = Handle()
    assert tool.validate_arguments({"handle": handle}) == {"handle": handle, "n": 1}
    with pytest.raises(ToolArgumentsError, match="handle: Input should be an instance of Handle"):
        tool.validate_arguments({"handle": "text"})


@pytest.mark.parametrize(("name", "model_name"), [
    ("get_weather", "GetWeatherArguments"),
    ("lookup", "LookupArguments"),
    ("send_a_message", "SendAMessageArguments"),
])
def test_the_argument_model_is_named_after_the_tool(name, model_name):
    assert Tool(forecast, name=name).arguments_model.__name__ == model_name


# ---------------------------------------------------------------- descriptions from docstrings


def documented(doc: str | None):
    def f(city: str, days: int = 3, unit: str = "C") -> str:
        return city

    f.__doc__ = doc
    return f


GOOGLE_TYPED = """Weather for a city.

Args:
    city (str): the city name.
    days(int): how many days.
    unit (str, optional): C or F.
"""

GOOGLE_SPACED = """Weather for a city.

Arguments:
    city: the city name.

    days: how many days.

Returns:
    a string.

Raises:
    unit: not a parameter, it is in another section.
"""

GOOGLE_CONTINUED = """Weather for a city.

Args:
    city: the city name, e.g.: Oslo, or
        a code: OSL.
    days: how many
        days ahead.
"""

NUMPY = """Weather for a city.

Parameters
----------
city : str
    the city name.
days : int, optional
    how many
    days ahead.
"""

SPHINX = """Weather for a city.

:param city: the city name.
:param days: how many days.
"""

EPYDOC = """Weather for a city.

@param unit: C or F.
@return: a string.
"""


@pytest.mark.parametrize(("doc", "description", "params"), [
    pytest.param(GOOGLE_TYPED, "Weather for a city.",
                 {"city": "the city name.", "days": "how many days.", "unit": "C or F."}, id="google-typed"),
    pytest.param(GOOGLE_SPACED, "Weather for a city.", {"city": "the city name.", "days": "how many days."},
                 id="google-blank-lines-and-later-sections"),
    pytest.param(GOOGLE_CONTINUED, "Weather for a city.",
                 # an entry's continued lines are part of it; "a code: OSL." is no parameter
                 {"city": "the city name, e.g.: Oslo, or a code: OSL.", "days": "how many days ahead."},
                 id="google-multi-line"),
    pytest.param(NUMPY, "Weather for a city.", {"city": "the city name.", "days": "how many days ahead."},
                 id="numpy"),
    pytest.param(SPHINX, "Weather for a city.", {"city": "the city name.", "days": "how many days."}, id="sphinx"),
    pytest.param(EPYDOC, "Weather for a city.", {"unit": "C or F."}, id="epydoc"),
    pytest.param("Weather: for a city.\n\nunit: not an argument section.\n", "Weather: for a city.", {},
                 id="colons-outside-any-section"),
    pytest.param("Weather for\n    a city, over\n    several lines.\n\n    Details.\n\n    More details.\n",
                 "Weather for a city, over several lines.", {}, id="multi-line-first-of-three-paragraphs"),
    pytest.param("Weather for a city.\n\nDetails.\n", "Weather for a city.", {}, id="two-paragraphs"),
    pytest.param(None, "", {}, id="no-docstring"),
])
def test_descriptions_from_the_docstring(doc, description, params):
    schema = Tool(documented(doc)).schema["function"]
    assert schema["description"] == description
    shown = {name: prop["description"] for name, prop in schema["parameters"]["properties"].items()
             if "description" in prop}
    assert shown == params


def test_an_annotated_description_stays_when_the_docstring_has_none():
    def f(count: Annotated[int, Field(description="how many")] = 1, size: int = 0) -> int:
        """Count.

        Args:
            size: the size.
        """
        return count

    assert Tool(f).schema["function"]["parameters"]["properties"] == {
        "count": {"default": 1, "description": "how many", "type": "integer"},
        "size": {"default": 0, "description": "the size.", "type": "integer"},
    }


def test_an_annotation_its_module_cannot_evaluate_still_makes_a_tool():
    # evaluated as written (pydantic resolves what it can), as before
    def f(x: NotDefinedAnywhere = 1) -> int:  # noqa: F821 - never evaluated by Python
        """F."""
        return x

    tool = Tool(f)
    assert (tool.name, tool.description) == ("f", "F.")


# ---------------------------------------------------------------- when a derivation is made again


def properties(tool: Tool) -> list[str]:
    return list(tool.schema["function"]["parameters"]["properties"])


def one(a: int) -> int:
    return a


def two(b: str, c: str = "") -> str:
    return b


def test_the_same_function_reuses_its_derivation():
    def f(x: int) -> int:
        """F."""
        return x

    first, second = Tool(f), Tool(f)
    assert first.arguments_model is second.arguments_model
    assert Tool(f, name="g").arguments_model is not first.arguments_model


def test_a_function_given_a_new_signature_is_derived_anew():
    def f(*args: Any, **kwargs: Any) -> Any:
        return args

    f.__signature__ = inspect.signature(one)
    assert properties(Tool(f)) == ["a"]
    f.__signature__ = inspect.signature(two)
    assert properties(Tool(f)) == ["b", "c"]


def test_a_function_wrapping_another_one_is_derived_anew():
    def f(*args: Any, **kwargs: Any) -> Any:
        return args

    f.__wrapped__ = one
    assert properties(Tool(f)) == ["a"]
    f.__wrapped__ = two
    assert properties(Tool(f)) == ["b", "c"]


class Greeter:
    """Greets."""

    def __call__(self, name: str) -> str:
        return f"hello {name}"


def test_a_callable_object_changed_since_is_derived_anew():
    greeter = Greeter()
    assert Tool(greeter, name="greet").description == "Greets."
    greeter.__doc__ = "Says hello."
    assert Tool(greeter, name="greet").description == "Says hello."
    assert properties(Tool(greeter, name="greet")) == ["name"]
    greeter.__signature__ = inspect.signature(one)
    assert properties(Tool(greeter, name="greet")) == ["a"]


def test_a_callable_object_wrapping_another_one_is_derived_anew():
    greeter = Greeter()
    greeter.__wrapped__ = one
    assert properties(Tool(greeter, name="greet")) == ["a"]
    greeter.__wrapped__ = two
    assert properties(Tool(greeter, name="greet")) == ["b", "c"]


# ---------------------------------------------------------------- is_async and the name


async def coroutine_tool(x: int) -> int:
    return x + 1


class AsyncCallable:
    async def __call__(self, x: int) -> int:
        return x + 2


@pytest.mark.parametrize(("func", "is_async"), [
    (coroutine_tool, True), (AsyncCallable(), True), (Greeter(), False), (one, False),
], ids=["async-def", "async-__call__", "sync-__call__", "sync-def"])
def test_is_async_tells_coroutine_functions_and_async_callables(func, is_async):
    assert Tool(func, name="t").is_async is is_async


def test_a_nameless_callable_needs_a_name():
    with pytest.raises(ValueError, match=r"^tool name must be an identifier, got ''$"):
        Tool(Greeter())
    assert Tool(Greeter(), name="greet").name == "greet"


# ---------------------------------------------------------------- running a tool


def record_to(calls: list[Any]):
    def search(q: str, limit: int = 2) -> str:
        """Search."""
        calls.append((q, limit, threading.current_thread() is threading.main_thread()))
        return f"found {q}"

    return search


@pytest.mark.anyio
async def test_a_blocking_tool_runs_in_a_worker_thread_and_returns_its_value():
    calls: list[Any] = []
    tool = Tool(record_to(calls), blocking=True)
    assert await tool.invoke({"q": "lion"}) == "found lion"
    assert calls == [("lion", 2, False)]
    assert await Tool(record_to(calls)).invoke({"q": "cat", "limit": 1}) == "found cat"
    assert calls[-1] == ("cat", 1, True)


@pytest.mark.anyio
async def test_an_installed_tool_runner_is_given_the_tool_and_its_validated_arguments():
    calls: list[Any] = []
    seen: list[tuple[str, dict[str, Any]]] = []

    async def runner(tool: Tool, kwargs: dict[str, Any]) -> str:
        seen.append((tool.name, kwargs))
        return "from runner"

    tool = Tool(record_to(calls))
    with use_runtime(tool_runner=runner):
        assert await tool.invoke({"q": "lion", "limit": "4"}) == "from runner"
    assert seen == [("search", {"q": "lion", "limit": 4})] and calls == []


@pytest.mark.anyio
async def test_through_operate_a_request_that_does_not_fit_runs_nothing():
    calls: list[Any] = []
    branch = Branch(tools=[record_to(calls)])
    mid = ScriptedMiddle({"answer": 1, "action_requests": [
        {"function": "search", "arguments": {"q": "a", "colour": "red"}},
        {"function": "search", "arguments": {"q": "b"}},
    ]})
    _, trace = await branch.operate_traced(instruction="q", actions=True, middle=mid)
    assert [(r.decision, r.arguments) for r in trace.actions] == [
        ("rejected", None), ("allowed", {"q": "b", "limit": 2})]
    assert trace.actions[0].reason == "invalid arguments for 'search': colour: Extra inputs are not permitted"
    assert calls == [("b", 2, True)]


# ---------------------------------------------------------------- registering and selecting


def alpha(x: int) -> int:
    """Alpha."""
    return x


def beta(y: str) -> str:
    """Beta."""
    return y


def test_registering_a_name_twice_is_refused_unless_updating():
    branch = Branch(tools=[alpha])
    with pytest.raises(ValueError, match="^a tool named 'alpha' is already registered$"):
        branch.acts.register(Tool(beta, name="alpha"))
    assert branch.acts.get("alpha").description == "Alpha."
    branch.acts.register(Tool(beta, name="alpha"), update=True)
    assert branch.acts.get("alpha").description == "Beta."


class Named:
    def __init__(self, name: Any) -> None:
        self.name = name


@pytest.mark.parametrize(("selector", "names"), [
    pytest.param(True, ["alpha", "beta"], id="true"),
    pytest.param(None, ["alpha", "beta"], id="none"),
    pytest.param("beta", ["beta"], id="name"),
    pytest.param(beta, ["beta"], id="callable"),
    pytest.param(["beta", Tool(alpha)], ["beta", "alpha"], id="list-of-name-and-tool"),
    pytest.param(("alpha",), ["alpha"], id="tuple"),
])
def test_a_selector_picks_registered_tools(selector, names):
    acts = Branch(tools=[alpha, beta]).acts
    assert [t.name for t in acts.select(selector)] == names
    assert [s["function"]["name"] for s in acts.get_tool_schema(selector)["tools"]] == names


def test_by_default_every_registered_tool_is_selected():
    acts = Branch(tools=[alpha, beta]).acts
    assert [t.name for t in acts.select()] == ["alpha", "beta"]
    assert [s["function"]["description"] for s in acts.get_tool_schema()["tools"]] == ["Alpha.", "Beta."]


def test_only_the_selected_schema_is_given():
    acts = Branch(tools=[alpha, beta]).acts
    assert acts.get_tool_schema("beta") == {"tools": [{"type": "function", "function": {
        "name": "beta", "description": "Beta.", "parameters": {
            "additionalProperties": False, "properties": {"y": {"type": "string"}},
            "required": ["y"], "type": "object"}}}]}


@pytest.mark.parametrize(("selector", "message"), [
    ("gamma", "tool 'gamma' is not registered"),
    (7, "tool 7 is not registered"),
    (Named(["alpha"]), "tool ['alpha'] is not registered"),
    (Named(3), "tool 3 is not registered"),
], ids=["unknown-name", "nameless", "unhashable-name", "non-string-name"])
def test_a_selector_naming_no_registered_tool_is_refused(selector, message):
    acts = Branch(tools=[alpha, beta]).acts
    with pytest.raises(ValueError) as info:
        acts.select(selector)
    assert str(info.value) == message


@pytest.mark.anyio
async def test_the_middle_is_offered_only_the_selected_tools():
    mid = ScriptedMiddle({"answer": 1})
    await Branch(tools=[alpha, beta]).operate(instruction="q", actions=True, tools=["beta"], middle=mid)
    [seen] = mid.seen
    assert [json.loads(s.json)["function"]["name"] for s in seen["chat_param"].tool_schemas] == ["beta"]


# ---------------------------------------------------------------- annotations: where they are evaluated


def test_a_function_made_in_its_own_namespace_has_its_annotations_evaluated_there():
    # ``exec`` with a namespace that is no module: only the function's own globals know Point
    namespace: dict[str, Any] = {"__name__": "made_by_exec"}
    exec(  # noqa: S102 - a function built the way plugin loaders build them
        "from __future__ import annotations\n"
        "from pydantic import BaseModel\n"
        "class Point(BaseModel):\n"
        "    x: int\n"
        "def norm(p: Point) -> int:\n"
        "    return abs(p.x)\n", namespace)
    tool = Tool(namespace["norm"])
    assert tool.schema["function"]["parameters"]["properties"] == {"p": {"$ref": "#/$defs/Point"}}
    assert tool.validate_arguments({"p": {"x": -3}})["p"].x == -3


EXEC_SOURCE = (
    "from __future__ import annotations\n"
    "from pydantic import BaseModel\n"
    "class Point(BaseModel):\n"
    "    x: int\n"
    "class Scaler:\n"
    "    def __call__(self, p: Point, factor: 'int' = 2) -> int:\n"
    "        return p.x * factor\n"
    "class Mover:\n"
    "    def __init__(self, p: Point) -> None:\n"
    "        self.x = p.x\n"
    "class Empty:\n"
    "    pass\n")


@pytest.mark.anyio
async def test_callable_objects_and_classes_made_in_their_own_namespace_resolve_there():
    namespace: dict[str, Any] = {"__name__": "made_by_exec_too"}
    exec(EXEC_SOURCE, namespace)  # noqa: S102 - classes built the way plugin loaders build them
    scaler, mover = Tool(namespace["Scaler"](), name="scale"), Tool(namespace["Mover"], name="move")
    assert scaler.schema["function"]["parameters"]["properties"] == {
        "p": {"$ref": "#/$defs/Point"}, "factor": {"default": 2, "type": "integer"}}
    assert await scaler.invoke({"p": {"x": 3}}) == 6
    assert (await mover.invoke({"p": {"x": 5}})).x == 5
    assert await Tool(namespace["Empty"], name="make").invoke({}) is not None


def test_names_pydantic_would_warn_about_are_held_under_another_name():
    def export(copy: int, json: str = "", schema: str = "", _private: int = 0) -> int:
        return copy

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "shadows an attribute in parent BaseModel" would fail here
        tool = Tool(export)
    assert list(tool.schema["function"]["parameters"]["properties"]) == ["copy", "json", "schema", "_private"]
    assert tool.validate_arguments({"copy": 1, "_private": 2}) == {"copy": 1, "json": "", "schema": "", "_private": 2}


@pytest.mark.anyio
async def test_a_typed_kwargs_tool_resolves_a_later_type_and_takes_plain_classes(tmp_path):
    module = module_with(tmp_path, "typed_extras_later", """
from __future__ import annotations
from pydantic import BaseModel
from lionops import Tool

class Plain:
    def __init__(self, size: int) -> None:
        self.size = size

def place(where: Later, item: Plain | None = None, **counts: int) -> dict:
    return {"where": where.name, "size": item.size if item else 0, **counts}

tool = Tool(place)  # made before Later is defined

class Later(BaseModel):
    name: str
""")
    assert await module.tool.invoke({"where": {"name": "a"}, "item": module.Plain(4), "n": "2"}) == {
        "where": "a", "size": 4, "n": 2}
    with pytest.raises(ToolArgumentsError):
        module.tool.validate_arguments({"where": {"name": "a"}, "n": "two"})


def module_with(tmp_path: Any, name: str, source: str) -> Any:
    from tests.contract.test_tool_signatures import load

    return load(tmp_path, name, source)


def test_a_type_imported_under_a_plain_flag_is_not_taken_for_type_checking(tmp_path):
    module = module_with(tmp_path, "flagged_types", """
from __future__ import annotations
import typing
from pydantic import BaseModel
from lionops import Tool

FLAG = False
if FLAG:
    from decimal import Decimal as Later
if typing.TYPE_CHECKING:
    import hidden

def price(value: Later) -> int:
    return value.rate

tool = Tool(price)  # made: Later is defined below

class Later(BaseModel):
    rate: int
""")
    assert module.tool.validate_arguments({"value": {"rate": 2}})["value"].rate == 2


@pytest.mark.parametrize(("imports", "annotation", "hidden"), [
    pytest.param("import typing\nif typing.TYPE_CHECKING:\n    import hidden\n", "hidden.Thing", "hidden",
                 id="typing-attribute"),
    pytest.param("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import hidden.sub\n", "hidden.sub.Thing",
                 "hidden", id="dotted-import"),
    pytest.param("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from decimal import Decimal, Context\n",
                 "dict[Decimal, Context]", "Context, Decimal", id="two-hidden-names"),
])
def test_a_type_checking_import_is_named_exactly_in_the_refusal(tmp_path, imports, annotation, hidden):
    module = module_with(tmp_path, f"refused_{abs(hash(imports + annotation))}",
                         f"from __future__ import annotations\n{imports}\n"
                         f"def price(first: Later, value: {annotation}) -> int:\n    return 1\n")
    with pytest.raises(ConfigurationError) as info:
        Tool(module.price)
    # the first parameter's type may still be defined later: the second one is refused
    assert str(info.value) == (
        f"tool 'price': parameter 'value' is annotated with {hidden}, which its module imports only under "
        "TYPE_CHECKING, so its arguments cannot be validated; import it at run time")


@pytest.mark.parametrize("annotation", ["'not valid('", "'1 +'", "'x y'"])
def test_a_quoted_annotation_that_is_no_expression_is_a_configuration_error(tmp_path, annotation):
    module = module_with(tmp_path, f"bad_text_{abs(hash(annotation))}",
                         f"from __future__ import annotations\ndef price(value: {annotation}) -> int:\n    return 1\n")
    with pytest.raises(ConfigurationError) as info:
        Tool(module.price)
    assert str(info.value) == ("tool 'price': its signature cannot be validated: "
                               f"Forward reference must be an expression -- got {annotation}")


class Kind(BaseModel):
    kind: str


def discriminated_int(x: Annotated[int, Field(discriminator="kind")]) -> int:
    return x


def bad_pattern(x: Annotated[str, Field(pattern=5)]) -> str:
    return x


@pytest.mark.parametrize(("func", "start"), [
    (discriminated_int, "tool 'discriminated_int': its signature cannot be validated: The core schema type 'int' "
                        "is not a valid discriminated union variant."),
    (bad_pattern, 'tool \'bad_pattern\': its signature cannot be validated: Error building "model" validator:'),
], ids=["type-error", "schema-error"])
def test_annotations_no_model_can_be_built_of_are_a_configuration_error(func, start):
    with pytest.raises(ConfigurationError) as info:
        Tool(func)
    assert str(info.value).startswith(start), str(info.value)
    assert len(str(info.value)) <= len("tool '': its signature cannot be validated: ") + len(func.__name__) + 300


# ---------------------------------------------------------------- pydantic's own errors from a user's type


class Opaque:
    """A user's type whose JSON schema hook and validator raise pydantic's user error."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def check(value: Any) -> Any:
            raise PydanticUserError("Opaque values are checked by their owner", code=None)

        return core_schema.no_info_plain_validator_function(check)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Any:
        raise PydanticUserError("Opaque has no JSON form", code=None)


def opaque(value: Opaque) -> str:
    return "ran"


def test_a_user_types_own_pydantic_error_is_raised_as_it_is():
    tool = Tool(opaque)
    with pytest.raises(PydanticUserError, match="^Opaque has no JSON form$"):
        _ = tool.schema
    with pytest.raises(PydanticUserError, match="^Opaque values are checked by their owner$"):
        tool.validate_arguments({"value": 1})


def test_the_offered_schema_carries_its_own_json_text():
    tool = Tool(forecast)
    offered = tool.offered_schema
    assert json.loads(offered.json) == tool.schema
    assert offered.json == json.dumps(offered)


# ---------------------------------------------------------------- positional-only, async and in a thread


async def scaled(a: int, /, factor: int = 2) -> int:
    return a * factor


def joined(a: str, b: str = "b", /) -> str:
    return f"{a}+{b}"


@pytest.mark.anyio
async def test_positional_only_parameters_reach_async_and_blocking_tools_positionally():
    assert await Tool(scaled).invoke({"a": 4, "factor": 3}) == 12
    assert await Tool(joined, blocking=True).invoke({"a": "x"}) == "x+b"
    assert await Tool(joined, blocking=True).invoke({"a": "x", "b": "y"}) == "x+y"


# ---------------------------------------------------------------- signatures no model can use, classes as tools


def pick(n: Annotated[int, Field(max_length=3)]) -> int:  # a constraint pydantic cannot apply to an int
    return n


def other(x: int) -> int:
    return x


@pytest.mark.anyio
async def test_a_constraint_pydantic_cannot_apply_is_a_rejected_request_and_the_batch_is_kept():
    branch = Branch(tools=[pick, other])
    out = await branch.operate(instruction="x", actions=True, middle=ScriptedMiddle({"action_requests": [
        {"function": "other", "arguments": {"x": 1}}, {"function": "pick", "arguments": {"n": 1}}]}))
    assert [(r.record.decision, r.record.invoked) for r in out["action_responses"]] == [
        ("allowed", True), ("rejected", False)]
    assert out["action_responses"][1].record.reason == (
        "tool 'pick': its arguments cannot be validated: Unable to apply constraint 'max_length' to supplied value 1")


@pytest.mark.parametrize("namespace", [{}, {"__name__": "not_imported_anywhere"}], ids=["no-name", "not-imported"])
def test_a_name_an_exec_namespace_does_not_define_is_refused_when_the_tool_is_made(namespace):
    exec("from __future__ import annotations\n"  # noqa: S102 - a function made the way plugin loaders make them
         "def save(schema: ToolSchema) -> str:\n    return 'saved'\n", namespace)
    with pytest.raises(ConfigurationError) as info:
        Tool(namespace["save"])
    module = namespace.get("__name__", "<no module>")
    assert str(info.value) == (
        "tool 'save': parameter 'schema' is annotated with 'ToolSchema', which the function's globals do not "
        f"define; its module {module!r} is not imported, so it cannot be resolved later")


@pytest.mark.parametrize(("annotation", "reason"), [
    ("'1/0'", "division by zero"),
    ("'int.nope'", "type object 'int' has no attribute 'nope'"),
    ("'{}[\"k\"]'", "'k'"),
])
def test_a_quoted_annotation_that_raises_is_a_configuration_error(tmp_path, annotation, reason):
    module = module_with(tmp_path, f"raising_{abs(hash(annotation))}",
                         f"from __future__ import annotations\ndef t(x: {annotation}) -> int:\n    return 1\n")
    with pytest.raises(ConfigurationError) as info:
        Tool(module.t)
    assert str(info.value) == f"tool 't': its signature cannot be validated: {reason}"


@pytest.mark.parametrize("builtin", [dict, int])
def test_a_callable_without_a_readable_signature_is_a_configuration_error(builtin):
    with pytest.raises(ConfigurationError) as info:
        Tool(builtin, name="t")
    assert str(info.value) == f"tool 't': its signature cannot be read: no signature found for builtin type {builtin}"


def test_a_name_bound_to_its_own_name_ends(tmp_path):
    module = module_with(tmp_path, "self_named", 'X = "X"\ndef f(p: "X") -> int:\n    return 1\n')
    tool = Tool(module.f)  # made: the evaluation stops (a string evaluated again and again stays one)
    with pytest.raises(ConfigurationError, match="^tool 'f': an argument is annotated with 'X'"):
        tool.validate_arguments({"p": 2})


@pytest.mark.anyio
async def test_classes_as_tools_namedtuples_new_and_an_async_call_method(tmp_path):
    module = module_with(tmp_path, "classes_as_tools", """
from __future__ import annotations
from typing import NamedTuple
from pydantic import BaseModel

class P(BaseModel):
    x: int

class Move(NamedTuple):
    p: P

class Jump:
    def __new__(cls, p: P):
        return p.x

class Later:
    def __init__(self, n: int) -> None:
        self.n = n

    async def __call__(self) -> int:
        return self.n
""")
    assert (await Tool(module.Move).invoke({"p": {"x": 2}})).p.x == 2
    assert await Tool(module.Jump).invoke({"p": {"x": 3}}) == 3
    made = Tool(module.Later)  # the class is called, not awaited: its instance is the output
    assert made.is_async is False
    assert (await made.invoke({"n": 4})).n == 4


def test_a_builtin_function_is_a_tool_with_its_own_signature():
    tool = Tool(sorted, name="sort")
    assert tool.schema["function"]["parameters"] == {
        "additionalProperties": False,
        "properties": {"iterable": {}, "key": {"default": None}, "reverse": {"default": False}},
        "required": ["iterable"], "type": "object"}


def test_a_long_reason_is_cut_at_300_characters(tmp_path):
    name = "x" * 400
    module = module_with(tmp_path, "long_reason", f"from __future__ import annotations\n"
                                                  f"def t(v: 'int.{name}') -> int:\n    return 1\n")
    with pytest.raises(ConfigurationError) as info:
        Tool(module.t)
    reason = f"type object 'int' has no attribute '{name}'"
    assert str(info.value) == f"tool 't': its signature cannot be validated: {reason[:300]}..."


class Strict:
    """A user's type whose validator raises a TypeError with a long message."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def check(value: Any) -> Any:
            raise TypeError("y" * 400)

        return core_schema.no_info_plain_validator_function(check)


def strict(value: Strict) -> str:
    return "ran"


def test_a_type_error_while_validating_is_a_configuration_error_cut_at_300_characters():
    with pytest.raises(ConfigurationError) as info:
        Tool(strict).validate_arguments({"value": 1})
    assert str(info.value) == "tool 'strict': its arguments cannot be validated: " + "y" * 300 + "..."


def test_a_starred_annotation_text_does_not_hide_a_later_type_checking_one(tmp_path):
    module = module_with(tmp_path, "starred_first", """
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from decimal import Decimal as Hidden

def f(x: "*Later", y: "Hidden") -> int:
    return 1
""")
    with pytest.raises(ConfigurationError, match="^tool 'f': parameter 'y' is annotated with Hidden, which"):
        Tool(module.f)


# ---------------------------------------------------------------- what a sync tool returns


class _Later:
    """An awaitable that is not a coroutine (its own ``__await__``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Any:
        if False:  # pragma: no cover - a generator that returns at once
            yield
        return self.value


class _Thing:
    """A plain object: neither a scalar nor awaitable."""


def _returns(value: Any) -> Any:
    def give() -> Any:
        """Give it."""
        return value() if callable(value) else value
    return give


@pytest.mark.anyio
@pytest.mark.parametrize("make", [lambda: coroutine_tool(1), lambda: _Later(2)], ids=["coroutine", "__await__"])
async def test_an_awaitable_a_sync_tool_returns_is_awaited(make):
    expected = 2
    assert await Tool(_returns(make), name="give").invoke({}) == expected


@pytest.mark.anyio
@pytest.mark.parametrize("value", [3, "s", None, True, 1.5, {"a": 1}, [1], (1,), {1, 2}, _Thing()],
                         ids=lambda v: type(v).__name__)
async def test_anything_else_a_sync_tool_returns_is_returned_as_it_is(value):
    assert await Tool(_returns(lambda: value), name="give").invoke({}) is value
