"""A ``response_format`` that is a dataclass or a ``TypedDict`` runs through
pydantic's TypeAdapter with the same exits and the same validation as a model;
any other value that is not a model is a typed error before a request."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, NotRequired

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from lionops import Branch, MismatchError
from lionops.errors import ArgumentTypeError
from lionops.testing import OpenAIServer, completion
from tests.openai_server import make_model, sent

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class Trip:
    """A planned trip."""

    city: str
    days: int = 2
    stops: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Stay:
    city: str
    days: int = 2


class TripDict(TypedDict):
    """A planned trip."""

    city: str
    days: int
    note: NotRequired[str]


class PlainTripDict(typing.TypedDict):  # typing's own: no TypeAdapter before Python 3.12
    city: str
    days: int


class TripModel(BaseModel):
    """A planned trip."""

    city: str
    days: int = 2


FORMATS = [Trip, TripDict]


async def _operate(answer: Any, **kw: Any) -> tuple[Any, Branch, dict[str, Any]]:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    with OpenAIServer([completion(text)]) as server:
        model = make_model(server)
        branch = Branch(chat_model=model)
        try:
            result = await branch.operate(instruction="Plan a trip", **kw)
        finally:
            await model.aclose()
        return result, branch, sent(server)


async def test_a_dataclass_answer_is_validated_into_the_dataclass(anyio_backend):
    result, branch, body = await _operate({"city": "Lisbon", "days": "3"}, response_format=Trip)
    assert result == Trip(city="Lisbon", days=3, stops=[]) and type(result) is Trip
    assert branch.traces[-1].exit == "no_action_param"
    schema = body["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"city", "days", "stops"} and schema["required"] == ["city"]


async def test_a_typeddict_answer_is_validated_into_a_dict(anyio_backend):
    plain, _, _ = await _operate({"city": "Porto", "days": "4"}, response_format=PlainTripDict)
    assert plain == {"city": "Porto", "days": 4} and type(plain) is dict
    result, branch, body = await _operate({"city": "Porto", "days": 4}, response_format=TripDict)
    assert result == {"city": "Porto", "days": 4} and type(result) is dict
    assert branch.traces[-1].exit == "no_action_param"
    assert set(body["response_format"]["json_schema"]["schema"]["properties"]) == {"city", "days", "note"}


@pytest.mark.parametrize("fmt", [Trip, TripDict, TripModel], ids=lambda f: f.__name__)
@pytest.mark.parametrize(("policy", "exit"), [
    ("return_value", "mismatch_return_value"), ("return_none", "mismatch_return_none"), ("raise", "mismatch_raise"),
])
async def test_an_answer_that_does_not_validate_takes_the_same_mismatch_exit_as_a_model(
        fmt, policy, exit, anyio_backend):
    answer = {"city": "Lisbon", "days": "many"}
    if policy == "raise":
        with pytest.raises(MismatchError, match=f"into '{fmt.__name__}'"):
            await _operate(answer, response_format=fmt, handle_validation=policy)
        return
    result, branch, _ = await _operate(answer, response_format=fmt, handle_validation=policy)
    assert branch.traces[-1].exit == exit
    assert result == (answer if policy == "return_value" else None)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.__name__)
async def test_added_fields_are_kept_on_the_generated_model(fmt, anyio_backend):
    result, _, _ = await _operate({"city": "Lisbon", "days": 3, "reason": {"title": "warm"}},
                                  response_format=fmt, reason=True)
    assert isinstance(result, BaseModel) and result.city == "Lisbon" and result.reason.title == "warm"


def test_a_dataclass_instance_stands_for_its_class():
    from lionops._formats import check_response_format, model_of_format

    assert check_response_format(Trip(city="x")) is model_of_format(Trip)
    assert check_response_format(Trip) is model_of_format(Trip)  # made once per class


@pytest.mark.parametrize("fmt", [
    "TripModel", 42, {"city": str, "days": int}, {"city": "text"}, ["city"], int, object,
], ids=["str", "int", "dict-of-types", "dict-not-a-schema", "list", "int-type", "object-type"])
async def test_any_other_value_is_refused_before_a_request(fmt, anyio_backend):
    with OpenAIServer([completion("{}")]) as server:
        model = make_model(server)
        branch = Branch(chat_model=model)
        try:
            with pytest.raises(ArgumentTypeError, match="response_format takes a pydantic model class") as ei:
                await branch.operate(instruction="Plan a trip", response_format=fmt)
        finally:
            await model.aclose()
        assert server.chat_requests == []
    assert isinstance(ei.value, TypeError)


async def test_a_json_schema_dict_is_still_passed_to_the_adapter(anyio_backend):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    result, branch, body = await _operate({"city": "Faro"}, response_format=schema)
    assert result == {"city": "Faro"} or result == '{"city": "Faro"}'
    assert body["response_format"]["json_schema"]["schema"]["properties"] == schema["properties"]


async def test_a_dataclass_call_records_and_replays_also_from_the_cassette_alone(tmp_path, anyio_backend):
    from lionops import iModel
    from lionops.replay import record, replay

    path = tmp_path / "trip.json"
    with OpenAIServer([completion(json.dumps({"city": "Lisbon", "days": 3}))]) as server:
        model = make_model(server)
        try:
            recorded = await record(path, Branch(chat_model=model), instruction="Plan", response_format=Stay)
        finally:
            await model.aclose()
    assert recorded.result == Stay(city="Lisbon", days=3)
    offline = iModel(provider="openai", model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="k")
    again = await replay(path, Branch(chat_model=offline), instruction="Plan", response_format=Stay)
    assert again.result == Stay(city="Lisbon", days=3)
    rebuilt = await replay(path)  # the response model is rebuilt from the recorded schema
    assert rebuilt.result.model_dump() == {"city": "Lisbon", "days": 3}


@dataclasses.dataclass
class Booking:
    nights: int

    def __post_init__(self) -> None:
        if self.nights < 1:
            raise ValueError("a booking is at least one night")


@pytest.mark.parametrize(("answer", "exit"), [
    ({"nights": 2}, "no_action_param"), ({"nights": 0}, "mismatch_return_value")])
async def test_the_dataclasses_own_checks_decide_too(answer, exit, anyio_backend):
    result, branch, _ = await _operate(answer, response_format=Booking)
    assert branch.traces[-1].exit == exit
    assert result == (Booking(nights=2) if exit == "no_action_param" else answer)
