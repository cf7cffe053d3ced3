"""The inner parse: JSON extraction, repair, fuzzy keys, parse-model retries."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from lionops import ActionRequestModel, ParseParam
from lionops.clock import RecordingClock, use_clock
from lionops.middles.parsing import parse_response
from lionops.operative import Step
from lionops.params import FuzzyMatchKeysParams
from lionops.parse import (
    REPAIRED_REQUEST_ERROR,
    extract_json,
    match_keys,
    merge_action_requests,
    repair_json,
)
from lionops.testing import completion
from tests.helpers import Answer
from tests.openai_server import model, sent, server  # noqa: F401 - fixtures


class Person(BaseModel):
    bio: str
    age: int


class Profile(BaseModel):
    first_name: str
    city: str | None = None


def generated(base: type[BaseModel], **kw) -> type[BaseModel]:
    return Step.respond_operative(Step.request_operative(base_type=base, **kw)).response_type


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize("text", [
    '{"a": 1}',
    '  {"a": 1}\n',
    'Sure! ```json\n{"a": 1}\n``` Done.',
    "```\n{\"a\": 1}\n```",
    'Result: {"a": 1} (as asked) and {"b": 2}',
    'I think {braces} are fine. {"a": 1}',
    '```json {"a": 1}```',
])
def test_extract_json_forms(text):
    assert extract_json(text) == {"a": 1}


def test_a_fence_with_inner_triple_backticks():
    text = '```json\n{"bio": "```html<p>hi</p>```", "age": 3}\n```'
    assert extract_json(text) == {"bio": "```html<p>hi</p>```", "age": 3}
    multi = '```json\n{\n  "bio": "```python\\nprint(1)\\n```",\n  "age": 3\n}\n```'
    assert extract_json(multi)["bio"] == "```python\nprint(1)\n```"


@pytest.mark.anyio
async def test_a_fence_with_inner_triple_backticks_parses_into_the_model():
    text = 'Here:\n```json\n{"bio": "```html<p>hi</p>```", "age": 3}\n```'
    result = await parse_response(text, ParseParam(response_format=Person))
    assert result == Person(bio="```html<p>hi</p>```", age=3)


def test_no_json_gives_none():
    assert extract_json("The answer is 42.") is None
    assert extract_json("no json here {oops", repair=True) is None


@pytest.mark.parametrize("text, expected", [
    ("{'answer': 4,}", {"answer": 4}),
    ('{"answer": 4', {"answer": 4}),
    ('```json\n{"answer": 4, }\n```', {"answer": 4}),
])
def test_repair_slightly_broken_json(text, expected):
    assert extract_json(text) is None
    assert repair_json(text) == expected
    assert extract_json(text, repair=True) == expected


@pytest.mark.anyio
async def test_repaired_json_validates_but_its_requests_never_run():
    fmt = generated(Answer, actions=True)
    text = "{'answer': 1, 'action_requests': [{'function': 'send_message', 'arguments': {'to': 'x', 'body': 'y'}}],}"
    result = await parse_response(text, ParseParam(response_format=fmt))
    assert result.answer == 1
    [req] = result.action_requests
    assert req.function == "send_message" and req.invalid == REPAIRED_REQUEST_ERROR and req.arguments is None


# ---------------------------------------------------------------- keys


def test_fuzzy_keys_jaro_winkler():
    params = FuzzyMatchKeysParams()
    assert match_keys({"firstname": "Ana", "CITY": "Lima"}, Profile, params) == {"first_name": "Ana", "city": "Lima"}
    # below the 0.85 threshold: dropped by the default "remove"
    assert match_keys({"first_name": "Ana", "town": "Lima"}, Profile, params) == {"first_name": "Ana"}
    keep = FuzzyMatchKeysParams(handle_unmatched="ignore")
    assert match_keys({"first_name": "Ana", "town": "Lima"}, Profile, keep) == {"first_name": "Ana", "town": "Lima"}
    strict = FuzzyMatchKeysParams(handle_unmatched="raise")
    assert match_keys({"first_name": "Ana", "town": "Lima"}, Profile, strict) is None
    off = FuzzyMatchKeysParams(fuzzy_match=False)
    assert match_keys({"firstname": "Ana"}, Profile, off) == {}


def test_action_fields_are_never_fuzzy_targets():
    fmt = generated(Answer, actions=True)
    data = {"answer": 1, "action_request": [{"function": "search", "arguments": {"q": "x"}}]}
    assert match_keys(data, fmt, FuzzyMatchKeysParams()) == {"answer": 1}


@pytest.mark.anyio
async def test_parse_with_fuzzy_keys_and_unmatched_raise():
    assert await parse_response('{"firstname": "Ana"}', ParseParam(response_format=Profile)) == Profile(
        first_name="Ana")
    pp = ParseParam(response_format=Profile, fuzzy_match_params=FuzzyMatchKeysParams(handle_unmatched="raise"))
    assert await parse_response('{"first_name": "Ana", "zzz": 1}', pp) == {"first_name": "Ana", "zzz": 1}


@pytest.mark.anyio
async def test_request_keys_use_the_alias_table_not_fuzzy_matching():
    fmt = generated(Answer, actions=True)
    text = json.dumps({"answer": 1, "action_requests": [
        {"name": "search", "parameters": {"q": "lion"}},
        {"function": "search", "arguments": {"_": {"q": "lion"}}},
    ]})
    result = await parse_response(text, ParseParam(response_format=fmt))
    assert [(r.function, r.arguments) for r in result.action_requests] == [
        ("search", {"q": "lion"}), ("search", {"_": {"q": "lion"}}),
    ]


# ---------------------------------------------------------------- native requests


def test_merge_keeps_body_order_and_skips_identical_native():
    body = {"action_requests": [{"name": "a", "arguments": {"x": 1}}]}
    native = [ActionRequestModel(function="a", arguments={"x": 1}), ActionRequestModel(function="b", arguments={})]
    merged = merge_action_requests(body, native)["action_requests"]
    assert merged[0] == {"name": "a", "arguments": {"x": 1}} and merged[1:] == native[1:]
    assert merge_action_requests({"action_requests": "bad"}, native) == {"action_requests": "bad"}
    assert merge_action_requests({}, native) == {"action_requests": native}


@pytest.mark.anyio
async def test_native_requests_without_text():
    fmt = generated(Answer, actions=True)
    req = ActionRequestModel(function="search", arguments={"q": "x"})
    assert await parse_response(None, ParseParam(response_format=fmt)) is None
    # the caller's required field is missing: the mapping comes back for the outer policy,
    # as plain JSON (a caller under return_value can serialize it)
    out = await parse_response(None, ParseParam(response_format=fmt), action_requests=[req])
    assert out == {"action_requests": [{"function": "search", "arguments": {"q": "x"}}]}
    assert json.loads(json.dumps(out)) == out
    only_actions = Step.respond_operative(Step.request_operative(actions=True)).response_type
    result = await parse_response(None, ParseParam(response_format=only_actions), action_requests=[req])
    assert result.action_requests == [req]


# ---------------------------------------------------------------- contract


@pytest.mark.anyio
async def test_values_that_do_not_validate_come_back_unchanged():
    pp = ParseParam(response_format=Answer)
    assert await parse_response('{"answer": "high"}', pp) == {"answer": "high"}
    assert await parse_response("[1, 2]", pp) == [1, 2]
    assert await parse_response("plain", ParseParam(response_format=None)) == "plain"
    assert await parse_response('{"answer": 1}', None) == '{"answer": 1}'
    fmt = generated(Answer, actions=True)
    fabricated = '{"answer": 1, "action_responses": [{"function": "f", "output": 1}]}'
    result = await parse_response(fabricated, ParseParam(response_format=fmt))
    assert result.answer == 1 and result.action_responses is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
#: prose that holds no brace, bracket, quote or backtick: it cannot start or end a JSON value
_prose = st.text(alphabet="ab1 \n:,.", max_size=20)


@given(st.text(max_size=200))
def test_extraction_of_whole_json_text_is_the_json_value(text):
    """Text that is JSON as a whole (surrounding blanks aside) extracts to
    exactly what the standard decoder reads; any other text gives a JSON
    object, a JSON value or ``None``, never an exception."""
    try:
        expected = json.loads(text.strip(), strict=False)
    except ValueError:
        value = extract_json(text, repair=True)
        assert value is None or isinstance(value, (dict, list, str, int, float, bool))
    else:
        assert extract_json(text, repair=True) == expected


@given(_prose, st.dictionaries(st.text(max_size=5), _json_values, min_size=1, max_size=4), _prose)
def test_extraction_finds_an_object_in_prose(before, obj, after):
    assert extract_json(f"{before}{json.dumps(obj)}{after}", repair=True) == obj
    assert extract_json(f"{before}```json\n{json.dumps(obj)}\n```{after}") == obj


@pytest.mark.anyio
@given(st.text(alphabet='{}[]",:ab1 \n`', max_size=60))
async def test_parse_of_text_without_a_matching_key(text):
    """No key over this alphabet can match ``answer``: the parse returns the
    text, or a JSON value found in it, never a model; text with no brace and
    no backtick gives what the standard decoder reads, or the text itself."""
    value = await parse_response(text, ParseParam(response_format=Answer))
    assert not isinstance(value, BaseModel)
    if isinstance(value, str):  # the text itself, or a JSON string decoded from it
        assert value == text or value in text.replace("\\", "")
    if "{" not in text and "`" not in text:
        try:
            expected = json.loads(text.strip(), strict=False)
        except ValueError:
            expected = text
        assert value == expected


@pytest.mark.anyio
@given(_prose, st.integers(), _prose)
async def test_parse_of_an_answer_in_prose_is_the_model(before, n, after):
    value = await parse_response(f'{before}{{"answer": {n}}}{after}', ParseParam(response_format=Answer))
    assert value == Answer(answer=n)


# ---------------------------------------------------------------- parse-model retries


@pytest.mark.anyio
async def test_parse_model_restates_prose(server, model):
    server.push(completion('{"answer": 42, "action_requests": [{"function": "send_message", "arguments": {}}]}'))
    fmt = generated(Answer, actions=True)
    pp = ParseParam(response_format=fmt, imodel=model)
    with use_clock(RecordingClock()) as clk:
        result = await parse_response("The answer is forty-two.", pp)
    assert result.answer == 42
    assert result.action_requests is None  # the parse model never proposes calls
    assert clk.sleeps == []
    body = sent(server)
    assert "forty-two" in body["messages"][-1]["content"] and "tools" not in body
    assert "action_responses" not in json.dumps(body["response_format"])


@pytest.mark.anyio
async def test_parse_model_retries_with_adr_defaults_then_returns_text(server, model):
    server.push(completion("I cannot"), completion('{"answer": "x"}'), completion("{}"), completion("still no"))
    pp = ParseParam(response_format=Answer, imodel=model)
    with use_clock(RecordingClock()) as clk:
        result = await parse_response("The answer is unknown.", pp)
    assert result == "The answer is unknown."
    assert clk.sleeps == pytest.approx([1, 1.85, 1.85**2])  # retry_initial_delay=1, backoff=1.85
    assert len(server.chat_requests) == 4  # first try + retry_attempts=3


@pytest.mark.anyio
async def test_no_parse_model_for_json_that_fails_validation(server, model):
    result = await parse_response('{"answer": "high"}', ParseParam(response_format=Answer, imodel=model))
    assert result == {"answer": "high"}
    assert server.requests == []


# ---------------------------------------------------------------- outermost object, reasoning, depth


@pytest.mark.parametrize("text", [
    '{"answer": "a\nb", "inner": {"k": 1}}',                       # a raw newline inside a string
    'Sure: {"answer": "tab\there", "inner": {"k": 1}} done',
    '```json\n{"answer": "x\ny", "inner": {"k": 1}}\n```',
])
def test_control_characters_keep_the_outer_object(text):
    value = extract_json(text)
    assert set(value) == {"answer", "inner"}


@pytest.mark.parametrize("text", [
    '{"answer": 1, "inner": {"k": 1}, oops}',
    'Result: {"answer": 1, "inner": {"k": 1}',
    '```json\n{"answer": 1 "inner": {"k": 1}}\n```',
    '{"answer": [1, {"k": 1}, }',
])
def test_a_broken_outer_object_yields_no_inner_fragment(text):
    assert extract_json(text) is None


def test_an_object_after_a_broken_one_is_still_found():
    assert extract_json('I think {braces} are fine; {"a": {"b": 1}}') == {"a": {"b": 1}}


@pytest.mark.parametrize("text, answer, reasoning", [
    ('<think>{"a": 0}</think>\n{"a": 1}', '{"a": 1}', '{"a": 0}'),
    ('<Thinking>\n{"a": 0}\n</Thinking>{"a": 1}', '{"a": 1}', '{"a": 0}'),
    ('draft {"a": 0}</reasoning>\n{"a": 1}', '{"a": 1}', 'draft {"a": 0}'),
    ('<think>{"a": 0} and on', '', '{"a": 0} and on'),
    ('{"a": "<think>kept</think>"}', '{"a": "<think>kept</think>"}', None),
    ('Prose with an inline <think> tag, no block.', 'Prose with an inline <think> tag, no block.', None),
])
def test_split_reasoning(text, answer, reasoning):
    from lionops.parse import split_reasoning

    assert split_reasoning(text) == (answer, reasoning)


@pytest.mark.anyio
async def test_deep_nesting_is_a_raw_output_never_a_recursion_error():
    deep = '{"answer": ' + "[" * 50_000 + "]" * 50_000 + "}"
    assert extract_json(deep) is None and extract_json("x " + deep, repair=True) is None
    result = await parse_response(deep, ParseParam(response_format=Answer))
    assert result.reason == "too_deep"
