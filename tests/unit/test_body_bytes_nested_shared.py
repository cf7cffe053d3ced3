"""The request body is written part by part so a shared read-only schema inside
a plain dict or list is encoded once: the text stays ``json.dumps``'s, byte for
byte, and the cases where the shared text must not be used still encode anew."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from lionops._frozen import freeze
from lionops.endpoints.openai.transport import _body_bytes


def dumped(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


SCHEMA = freeze({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


class Count(int):
    def __repr__(self) -> str:
        return "Count!"


class Text(str):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


BODIES = {
    "messages tools": {"model": "m", "max_tokens": 4096, "stream": True, "tool_choice": {"type": "any"},
                       "tools": [{"name": "t", "description": "é \"q\"", "input_schema": SCHEMA}],
                       "messages": [{"role": "user", "content": [{"type": "text", "text": "hi\n"}]}]},
    "responses format": {"model": "m", "text": {"format": {"type": "json_schema", "schema": SCHEMA, "strict": True}},
                         "input": [{"role": "user", "content": "x"}]},
    "gemini config": {"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA},
                      "contents": [{"role": "user", "parts": [{"text": "x"}]}]},
    "scalars": {"a": 0, "b": -7, "c": 2**80, "d": 1.5, "e": None, "f": False, "g": True, "h": [None, 1, 2.0]},
    "empty": {"a": {}, "b": [], "c": "", "d": {"e": {}}},
    "non-text keys below": {"a": {1: "one", None: "none"}, "b": [{2.5: "x"}]},
    "caller's subclasses": {"a": Count(3), "b": {"c": Count(4)}, "d": Text("t"), "e": Mapping(x=Count(1)),
                            "f": [True, Count(5)]},
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_the_body_is_json_dumps_text_byte_for_byte(body):
    assert _body_bytes(body) == dumped(body)
    assert _body_bytes(body) == dumped(body)  # and again, from the shared text


def test_a_shared_schema_holding_a_plain_list_is_encoded_anew_after_the_list_changes():
    required: list[str] = ["city"]
    schema = freeze({"type": "object"})
    mixed = type(schema)({**schema, "required": required})  # read-only outside, a plain list inside
    body = {"tools": [{"name": "t", "input_schema": mixed}]}
    assert _body_bytes(body) == dumped(body)
    required.append("sky")
    assert b'"required":["city","sky"]' in _body_bytes(body)
    assert _body_bytes(body) == dumped(body)


def test_a_plain_wrapper_changed_between_calls_is_sent_as_it_is_now():
    body = {"text": {"format": {"schema": SCHEMA, "strict": True}}}
    first = _body_bytes(body)
    body["text"]["format"]["strict"] = False
    assert _body_bytes(body) != first and _body_bytes(body) == dumped(body)


@pytest.mark.parametrize("bad", [{"a": {"b": math.nan}}, {"a": [math.inf]}, {"a": {"b": [-math.inf]}}])
def test_a_number_json_cannot_hold_is_refused_at_any_depth(bad):
    with pytest.raises(ValueError, match="not JSON compliant"):
        _body_bytes(bad)


def test_a_cycle_is_refused_as_json_refuses_it():
    loop: dict[str, Any] = {}
    loop["again"] = {"deeper": loop}
    with pytest.raises(ValueError, match="Circular reference"):
        _body_bytes({"a": loop})
