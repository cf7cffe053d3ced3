"""Schemas generated once per type and shared, read-only, by every call.

The request schema of a response model, its strict-mode conversion and the
``response_format`` option built from them are made once per model class
(again after ``model_rebuild()``); every call sends the same objects, and a
caller that tries to change one gets a ``TypeError`` instead of changing
what the next call sends.
"""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from pydantic import BaseModel

from lionops import Branch
from lionops._frozen import FrozenDict, FrozenList, freeze, thaw
from lionops.middles.common import request_schema, schema_prompt
from lionops.middles.shaping import structured_options
from lionops.testing import completion, tool_call
from tests.openai_server import model, sent, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


class Forecast(BaseModel):
    city: str
    temp_c: int


def add(x: int, y: int) -> int:
    """Add two integers."""
    return x + y


def test_the_request_schema_is_generated_once_and_read_only():
    first, second = request_schema(Forecast), request_schema(Forecast)
    assert first is second and first == Forecast.model_json_schema()
    with pytest.raises(TypeError, match="read-only"):
        first["properties"]["city"]["type"] = "integer"
    with pytest.raises(TypeError, match="read-only"):
        first["required"].append("x")
    assert request_schema(Forecast) == Forecast.model_json_schema()
    assert schema_prompt(Forecast) is schema_prompt(Forecast)
    assert schema_prompt(Forecast).endswith(json.dumps(Forecast.model_json_schema()))


def test_a_rebuilt_model_gets_its_schema_anew():
    class Later(BaseModel):
        child: Child | None = None  # noqa: F821 - defined below

    class Child(BaseModel):
        name: str

    Later.model_rebuild(_types_namespace={"Child": Child})
    before = request_schema(Later)
    Later.model_rebuild(force=True, _types_namespace={"Child": Child})
    after = request_schema(Later)
    assert after is not before and after == before == Later.model_json_schema()


async def test_every_call_sends_the_same_schema_and_a_call_without_tools_sends_none(server, model):
    """The options mapping is each call's own: tools sent natively once are not sent again."""
    branch = Branch(chat_model=model, tools=[add])
    server.push(completion(json.dumps({"city": "Lisbon", "temp_c": 21}),
                           tool_calls=[tool_call("add", {"x": 1, "y": 2})]))
    first = await branch.operate(instruction="a", response_format=Forecast, actions=True, native_tools=True)
    server.push(completion(json.dumps({"city": "Lisbon", "temp_c": 21})))
    second = await branch.operate(instruction="b", response_format=Forecast)
    server.push(completion(json.dumps({"city": "Porto", "temp_c": 19})))
    third = await branch.operate(instruction="c", response_format=Forecast)
    assert [r.output for r in first.action_responses] == [3]
    assert (second.city, third.city) == ("Lisbon", "Porto")
    bodies = [sent(server, i) for i in range(3)]
    assert "tools" in bodies[0] and "tools" not in bodies[1] and "tools" not in bodies[2]
    assert bodies[1]["response_format"] == bodies[2]["response_format"]
    assert bodies[1]["response_format"]["json_schema"]["strict"] is True
    assert bodies[1]["response_format"]["json_schema"]["schema"]["additionalProperties"] is False


async def test_the_shared_response_format_option_refuses_changes(model):
    endpoint = model.endpoint
    options, in_prompt = structured_options(endpoint, Forecast)
    again, _ = structured_options(endpoint, Forecast)
    assert options is not again and options["response_format"] is again["response_format"] and not in_prompt
    options["tools"] = []  # the top level is the caller's own
    assert "tools" not in structured_options(endpoint, Forecast)[0]
    with pytest.raises(TypeError, match="read-only"):
        options["response_format"]["json_schema"]["strict"] = False
    mutable = thaw(options["response_format"])
    mutable["json_schema"]["strict"] = False
    assert structured_options(endpoint, Forecast)[0]["response_format"]["json_schema"]["strict"] is True


def test_frozen_containers_are_plain_json_to_everything_that_reads_them():
    data = {"a": [1, {"b": (2, 3)}], "c": None}
    frozen = freeze(data)
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    assert frozen == {"a": [1, {"b": [2, 3]}], "c": None}
    assert json.loads(json.dumps(frozen)) == frozen
    for clone in (copy.copy(frozen), copy.deepcopy(frozen), pickle.loads(pickle.dumps(frozen))):
        assert clone == frozen and isinstance(clone, FrozenDict) and isinstance(clone["a"], FrozenList)
    plain = thaw(frozen)
    plain["a"].append(4)
    plain["c"] = 1
    assert type(plain) is dict and type(plain["a"]) is list and frozen["c"] is None
    for change in (lambda: frozen.update(x=1), lambda: frozen.pop("a"), lambda: frozen["a"].sort(),
                   lambda: frozen["a"].__setitem__(0, 9), lambda: frozen.setdefault("z", 1)):
        with pytest.raises(TypeError):
            change()
    assert repr(frozen).startswith("FrozenDict({") and "FrozenList([" in repr(frozen)
