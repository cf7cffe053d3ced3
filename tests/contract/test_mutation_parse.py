"""The inner parse, written out literally: which requests may run, when an
answer is cut, what reasoning is, how keys match, where JSON is found.

Pure functions of :mod:`lionops.parse` are called with literal inputs and
literal expected values, in families (prose around JSON, fences, nested
brackets, strings holding brackets, quotes and escapes, cuts at each kind of
position, reasoning tags, keys cut, misspelled and mis-cased). What a user
sees end to end (a cut answer runs no tool; a native call joins the body's
requests once) goes through ``Branch.operate`` and a real HTTP server on
loopback, with real tools that count their calls.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from pydantic import BaseModel, Field

from lionops import ActionRequestModel, Branch
from lionops.models import RawOutput
from lionops.operative import Step
from lionops.params import FuzzyMatchKeysParams
from lionops.parse import (
    REASONING_REQUEST_ERROR,
    REPAIRED_REQUEST_ERROR,
    _span_end,
    ends_inside_json,
    extract_json,
    local_parse,
    match_keys,
    merge_action_requests,
    repair_json,
    split_reasoning,
)
from lionops.testing import completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures


def generated(base: type[BaseModel] | None = None) -> type[BaseModel]:
    """The response type ``operate()`` builds for ``base`` with actions on."""
    return Step.respond_operative(Step.request_operative(base_type=base, actions=True)).response_type


WITH_ACTIONS = generated(Answer)
ONLY_ACTIONS = generated()


# ---------------------------------------------------------------- requests: which may run


def test_native_calls_join_the_body_once_whatever_the_key_order():
    body = {"action_requests": [{"function": "send_message", "arguments": {"body": "hi", "to": "ana"}}]}
    native = [ActionRequestModel(function="send_message", arguments={"to": "ana", "body": "hi"})]
    merged = merge_action_requests(body, native)["action_requests"]
    assert merged == [{"function": "send_message", "arguments": {"body": "hi", "to": "ana"}}]


def test_a_native_call_with_other_arguments_is_not_dropped():
    body = {"action_requests": [{"function": "get_weather", "arguments": {"city": "Oslo"}}]}
    paris = ActionRequestModel(function="get_weather", arguments={"city": "Paris"})
    merged = merge_action_requests(body, [paris])["action_requests"]
    assert merged == [{"function": "get_weather", "arguments": {"city": "Oslo"}}, paris]


@pytest.mark.parametrize(("body_day", "native_day", "count"), [
    (date(2026, 1, 1), date(2026, 1, 1), 1),   # equal values that JSON cannot hold: still one call
    (date(2026, 1, 1), date(2026, 1, 2), 2),   # different ones: both calls
])
def test_arguments_that_json_cannot_hold_are_compared_by_their_text(body_day, native_day, count):
    body = {"action_requests": [{"name": "log", "parameters": {"day": body_day}}]}
    native = [ActionRequestModel(function="log", arguments={"day": native_day})]
    merged = merge_action_requests(body, native)["action_requests"]
    assert len(merged) == count
    assert merged[0] == {"name": "log", "parameters": {"day": body_day}}


def test_requests_of_repaired_json_are_all_invalid_whatever_their_shape():
    # A trailing comma and single quotes: the JSON needs repair.
    text = ("{'answer': 1, 'action_requests': ['get_weather', {'function': 5, 'arguments': {}}, "
            "{'name': 'search', 'parameters': {'q': 'x'}}, {'function': 'send_message', 'arguments': "
            "{'to': 'a', 'body': 'b'}}],}")
    value, found = local_parse(text, WITH_ACTIONS)
    assert found is True and value.answer == 1
    assert [(r.function, r.arguments, r.invalid) for r in value.action_requests] == [
        (None, None, REPAIRED_REQUEST_ERROR),
        (None, None, REPAIRED_REQUEST_ERROR),
        ("search", None, REPAIRED_REQUEST_ERROR),
        ("send_message", None, REPAIRED_REQUEST_ERROR),
    ]


def test_a_single_repaired_request_object_is_dropped():
    value, found = local_parse("{'answer': 2, 'action_requests': {'function': 'search', 'arguments': {'q': 'x'}},}",
                               WITH_ACTIONS)
    assert found is True and value.answer == 2 and value.action_requests is None


def test_a_repaired_mapping_that_fails_validation_keeps_the_invalid_mark_in_plain_json():
    value, found = local_parse("{'action_requests': [{'function': 'search', 'arguments': {'q': 'x'}}],}",
                               WITH_ACTIONS)
    assert found is True
    assert value == {"action_requests": [{"function": "search", "arguments": None, "invalid": REPAIRED_REQUEST_ERROR}]}
    assert json.loads(json.dumps(value)) == value


def test_a_mapping_that_fails_validation_keeps_its_plain_requests():
    text = '{"action_requests": [{"function": "search", "arguments": {"q": "x"}}]}'
    value, found = local_parse(text, WITH_ACTIONS)
    assert (value, found) == ({"action_requests": [{"function": "search", "arguments": {"q": "x"}}]}, True)


def test_native_calls_with_prose_make_the_model_when_it_validates():
    call = ActionRequestModel(function="search", arguments={"q": "lions"})
    value, found = local_parse("I will look it up.", ONLY_ACTIONS, action_requests=[call])
    assert found is False
    assert isinstance(value, ONLY_ACTIONS) and value.action_requests == [call]


def test_native_calls_with_prose_give_the_prose_when_the_model_fails():
    call = ActionRequestModel(function="search", arguments={"q": "lions"})
    assert local_parse("I will look it up.", WITH_ACTIONS, action_requests=[call]) == ("I will look it up.", False)


def test_local_parse_without_parse_param_matches_keys_by_default():
    assert local_parse('{"Answer": 3}', Answer) == (Answer(answer=3), True)
    assert local_parse('Sure: {"answr": 4}.', Answer) == (Answer(answer=4), True)


def test_json_too_deep_is_a_raw_output_with_its_text_and_reason():
    deep = '{"answer": ' + "[" * 50_000 + "]" * 50_000 + "}"
    value, found = local_parse(deep, Answer)
    assert found is True and isinstance(value, RawOutput)
    assert str(value) == deep
    assert (value.reason, value.detail) == ("too_deep", "the answer's JSON is nested too deep to decode")


# ---------------------------------------------------------------- cut answers

CUT = {
    "object_from_the_first_character": '{"answer": 7, "note": "cut',
    "inside_a_nested_array": 'Sure:\n{"answer": 7, "items": [1, 2',
    "after_a_key": '{"answer": 7, "note"',
    "after_a_comma": '{"answer": 7,',
    "array_of_arrays": '[1, [2, 3], "cut',
    "array_from_the_first_character": '[1, 2, "cu',
    "inside_infinity": "Values: [Infin",
    "inside_infinity_then_blanks": "Scores: [NaN, Infin \n\t",
    "broken_early_then_never_closed": 'Here: {"answer": 7, "n": 01, "note": "cut',
    "after_a_doubled_brace": 'Oops {{"answer": 7, "note": "cut',
    "after_a_bracket_in_prose": 'I read {city}. [see] {"answer": 7, "note": "\\u00e',
    "after_a_reasoning_block": '<think>{"answer": 1}</think>\n{"answer": 7, "note": "cu',
    "an_open_fence": "Here:\n```python\nprint(1)",
    "the_third_of_five_fences": "```\na\n```\n```\nb\n```\n```\nc",
    "an_open_fence_before_a_broken_value_holding_one": 'Open:\n```text\n{"code": "```", oops}',
    "past_the_bound_of_values": "{x} " * 300,
}


WHOLE = {
    "none": None,
    "empty": "",
    "blank": "  \n ",
    "only_a_cut_reasoning_block": '<think>{"draft": ',
    "complete_after_a_cut_reasoning_block": '<think>{"draft": </think>\n{"answer": 7}',
    "one_object": '{"answer": 7}',
    "one_string_with_a_fence_and_a_raw_newline": '"wrap code in ```\nfences"',
    "two_values": '{"a": 1} and {"b": 2}',
    "a_fence_inside_a_string": '{"note": "use ``` here"} done',
    "a_fenced_value": '```json\n{"a": 1}\n```',
    "a_fenced_value_then_another": '```json\n{"a": 1}\n```\nAlso {"b": 2}.',
    "a_brace_in_a_fenced_template": "```\nUse {name} here\n```",
    "two_closed_fences": "```\na\n```\nand\n```\nb\n```",
    "bracketed_words": "Pick [a] or [b]",
    "a_closed_value_with_a_bad_token": 'Result: {"a": 1 2}',
    "a_closed_value_with_a_bad_escape": '{"a": "\\uZZZZ"}',
    "a_closed_value_with_a_bad_escape_near_its_end": '{"a": "\\uZZ"}',
    "a_closed_value_with_a_wrong_last_bracket": '{"answer": 7]',
    "a_closed_list_with_a_wrong_last_bracket": "[1, 2}",
    "a_broken_value_holding_a_fence_marker": 'Note {"code": "```", oops} end',
    "too_deep_to_follow": "[" * 100_000,
}


@pytest.mark.parametrize(("text", "cut"), [*((t, True) for t in CUT.values()), *((t, False) for t in WHOLE.values())],
                         ids=[*(f"cut-{k}" for k in CUT), *(f"whole-{k}" for k in WHOLE)])
def test_a_cut_answer_is_detected_and_a_whole_one_is_not(text, cut):
    assert ends_inside_json(text) is cut


@pytest.mark.parametrize(("text", "start", "end"), [
    ("{}", 0, 2),
    ("[]", 0, 2),
    ('{"a": {"b": [1]}}', 0, 17),
    ('{"": 1}', 0, 7),                  # an empty string first
    ('{"ab": 1}', 0, 9),
    ('{"a}": 1}', 0, 9),                # a closing brace inside a string
    ('{"a\\"}": 1}', 0, 11),            # an escaped quote, then a brace, inside a string
    ('{"a\\nb": 1}', 0, 11),            # an escape, then more of the string
    ("{X}", 0, 3),
    ('x]{"a": 1}', 2, 10),              # a closing bracket before the start does not count
    ('{"a": 1', 0, None),
    ('{"a": "}', 0, None),
    ("{} {", 3, None),
])
def test_the_span_of_a_bracket(text, start, end):
    assert _span_end(text, start) == end


# ---------------------------------------------------------------- cut answers end to end

async def operate_with_tools(server: Any, **kw: Any) -> tuple[Any, ToolBox]:
    """``operate()`` with actions on against the loopback server, and the tools it offered."""
    box = ToolBox()
    model = make_model(server)
    try:
        out = await Branch(chat_model=model, tools=box.tools()).operate(
            instruction="x", response_format=Answer, actions=True, **kw)
    finally:
        await model.aclose()
    return out, box


CALL = '{"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Oslo"}}]'


@pytest.mark.anyio
@pytest.mark.parametrize("text", [
    CALL + ', "note": "cut',
    "Values: [Infin",
    'Oops {' + CALL + ', "note": "cut',
], ids=["cut_string", "cut_token", "after_a_doubled_brace"])
async def test_a_cut_answer_reported_as_whole_runs_no_tool(server, text):  # noqa: F811
    server.push(completion(text, finish_reason="stop"))
    out, box = await operate_with_tools(server, handle_validation="return_value")
    assert isinstance(out, RawOutput) and out.reason == "length" and str(out) == text
    assert box.total == 0


@pytest.mark.anyio
async def test_a_closed_answer_with_a_wrong_last_bracket_is_repaired_not_cut_and_runs_no_tool(server):  # noqa: F811
    server.push(completion(CALL + "]", finish_reason="stop"))
    out, box = await operate_with_tools(server)
    assert out.answer == 7
    assert box.total == 0


@pytest.mark.anyio
async def test_a_fenced_answer_then_prose_runs_its_tool(server):  # noqa: F811
    server.push(completion("```json\n" + CALL + "}\n```\nAlso see {the docs}.", finish_reason="stop"))
    out, box = await operate_with_tools(server)
    assert out.answer == 7 and box.calls == {"get_weather": 1}


@pytest.mark.anyio
@pytest.mark.parametrize(("native", "calls"), [
    ({"to": "ana", "body": "hi"}, {"send_message": 1}),     # the body's call in another key order: once
    ({"to": "ana", "body": "bye"}, {"send_message": 2}),    # another call: both run
])
async def test_a_native_call_joins_the_body_requests_once(server, native, calls):  # noqa: F811
    text = json.dumps({"answer": 1, "action_requests": [
        {"function": "send_message", "arguments": {"body": "hi", "to": "ana"}}]})
    server.push(completion(text, tool_calls=[tool_call("send_message", native)]), completion('{"answer": 1}'))
    _, box = await operate_with_tools(server)
    assert box.calls == calls


# ---------------------------------------------------------------- requests beside a reasoning tag, end to end

REQUEST = '{"function": "get_weather", "arguments": {"city": "Oslo"}}'
CALLED = '{"answer": 7, "action_requests": [' + REQUEST + ']}'


@pytest.mark.anyio
@pytest.mark.parametrize("text", [
    'Sure. <think>a</think> ok <think>maybe ' + CALLED + '</think> {"answer": 7}',   # mid-line, closed
    'ok\nthen <thinking>' + CALLED,                                                # mid-line, never closed
    'ok <think>x</think> then <think>maybe ' + CALLED,                             # closed, then one left open
    '```json\n' + CALLED[:-1] + ', "note": "<Reasoning>"}\n```',                  # one in a fenced value
    '<think >plan ' + CALLED + '</think >\n{"answer": 7}',                          # a space in the tags
    '< Thinking type="plan">plan ' + CALLED + '</ thinking>\n{"answer": 7}',         # attributes, spaces
    'ok <think type="plan">maybe ' + CALLED,                                       # mid-line, with an attribute
], ids=["mid-line-closed", "mid-line-open", "closed-then-open", "in-a-fenced-string", "spaced-tags",
        "tag-attributes", "mid-line-attribute"])
async def test_body_requests_beside_a_reasoning_tag_run_no_tool(server, text):  # noqa: F811
    server.push(completion(text))
    out, box = await operate_with_tools(server, handle_validation="return_value")
    assert box.total == 0
    # the request is dropped with the reasoning around it, or kept and marked
    requests = (out.action_requests if isinstance(out, BaseModel) else (out or {}).get("action_requests")) or []
    marks = [r.invalid if isinstance(r, BaseModel) else r["invalid"] for r in requests]
    assert marks == [REASONING_REQUEST_ERROR] * len(marks)
    assert [r.record.decision for r in getattr(out, "action_responses", None) or []] == ["invalid"] * len(marks)


@pytest.mark.anyio
@pytest.mark.parametrize("text", [
    '{"answer": 7, "note": "uses <think> tags", "action_requests": [' + REQUEST + ']}',  # one JSON value
    '{"answer": 7, "note": "line one\nuses <think>", "action_requests": [' + REQUEST + ']}',  # a raw newline in it
    '<think>plan ' + CALLED + '</think>\n' + CALLED,                                   # a block at line start
    'Here: ' + CALLED,                                                                  # no tag at all
    'plan</think>\nmore</think> ' + CALLED,        # all before the last closing tag is reasoning
], ids=["tag-inside-the-whole-json", "raw-newline-in-the-whole-json", "line-start-block", "no-tag",
        "two-closing-tags"])
async def test_body_requests_of_an_answer_without_a_stray_tag_run_once(server, text):  # noqa: F811
    server.push(completion(text))
    out, box = await operate_with_tools(server, handle_validation="return_value")
    assert (out.answer, box.calls["get_weather"], box.total) == (7, 1, 1)
    assert [r.invalid for r in out.action_requests] == [None]


@pytest.mark.anyio
async def test_a_number_past_the_digit_limit_is_no_crash_and_runs_nothing(server):  # noqa: F811
    text = '{"answer": 7, "n": ' + "9" * 5000 + ', "action_requests": [' + REQUEST + ']}'
    assert ends_inside_json(text) is False and ends_inside_json(text[:-3]) is True
    server.push(completion(text))
    out, box = await operate_with_tools(server, handle_validation="return_value")
    assert box.total == 0  # a value Python cannot decode is repaired JSON: its requests never run
    assert [r.record.decision for r in getattr(out, "action_responses", None) or []] in ([], ["invalid"])


# ---------------------------------------------------------------- reasoning

CHANNELS = ("<|channel|>analysis<|message|>Check the weather.<|end|>"
            "<|start|>assistant<|channel|>commentary<|message|>Then answer.<|end|>"
            '<|start|>assistant<|channel|>final<|message|>{"answer": <|end|>'
            "<|start|>assistant<|channel|>Final<|message|>7}<|return|>")


@pytest.mark.parametrize(("text", "answer", "reasoning"), [
    (CHANNELS, '{"answer": 7}', "Check the weather.\nThen answer."),
    ("<|channel|>final<|message|> done <|return|>", "done", None),
    ("<|channel|>analysis<|message|>only thinking<|end|>", "", "only thinking"),
    ('<think>one</think>\n<Reasoning>two</Reasoning>\n{"answer": 7}', '{"answer": 7}', "one\ntwo"),
    ('<THINK>plan</think>\n{"answer": 7}', '{"answer": 7}', "plan"),
    ('  <thought>\nplan\n</thought>\n{"answer": 7}', '{"answer": 7}', "plan"),
    ('<reflection>plan', "", "plan"),
    ('{"note": "line one\n<think>kept</think>"}', '{"note": "line one\n<think>kept</think>"}', None),
    ("no tags here", "no tags here", None),
])
def test_split_reasoning(text, answer, reasoning):
    assert split_reasoning(text) == (answer, reasoning)


# ---------------------------------------------------------------- keys


class Profile(BaseModel):
    first_name: str | None = None
    city: str | None = None


class Shade(BaseModel):
    color: str | None = None
    colour: str | None = None


class Aliased(BaseModel):
    answer: int | None = None
    action_requests: list[Any] | None = Field(default=None, alias="toolCalls")


EXACT = FuzzyMatchKeysParams(fuzzy_match=False)


@pytest.mark.parametrize(("data", "fmt", "params", "expected"), [
    # case-insensitive, without fuzzy matching
    ({"CITY": "Lima", "first_name": "Ana"}, Profile, EXACT, {"city": "Lima", "first_name": "Ana"}),
    ({"City": "Lima"}, Profile, EXACT, {"city": "Lima"}),
    # a second spelling of a field already set is not matched to it
    ({"city": "Lima", "CITY": "Cusco"}, Profile, FuzzyMatchKeysParams(fuzzy_match=False, handle_unmatched="ignore"),
     {"city": "Lima", "CITY": "Cusco"}),
    ({"city": "Lima", "CITY": "Cusco"}, Profile, FuzzyMatchKeysParams(), {"city": "Lima"}),
    # an action field under its alias: exact only
    ({"answer": 1, "TOOLCALLS": [1]}, Aliased, FuzzyMatchKeysParams(), {"answer": 1}),
    ({"answer": 1, "toolcall": [1]}, Aliased, FuzzyMatchKeysParams(), {"answer": 1}),
    ({"answer": 1, "toolCalls": [1]}, Aliased, FuzzyMatchKeysParams(), {"answer": 1, "toolCalls": [1]}),
    # the threshold: "firstname" is 0.98 like "first_name"
    ({"firstname": "Ana"}, Profile, FuzzyMatchKeysParams(), {"first_name": "Ana"}),
    ({"firstname": "Ana"}, Profile, FuzzyMatchKeysParams(similarity_threshold=0.98), {"first_name": "Ana"}),
    ({"firstname": "Ana"}, Profile, FuzzyMatchKeysParams(similarity_threshold=0.99), {}),
    ({"firstname": "Ana"}, Profile, FuzzyMatchKeysParams(similarity_threshold=None), {"first_name": "Ana"}),
    # one key near two fields goes to the nearer; the other field stays open
    ({"colr": "red"}, Shade, FuzzyMatchKeysParams(), {"color": "red"}),
    ({"colr": "red", "color": "blue"}, Shade, FuzzyMatchKeysParams(), {"color": "blue", "colour": "red"}),
])
def test_match_keys(data, fmt, params, expected):
    assert match_keys(data, fmt, params) == expected


# ---------------------------------------------------------------- where JSON is found


@pytest.mark.parametrize(("text", "expected"), [
    ('["a\nb"]', ["a\nb"]),                                   # a raw newline in a whole list
    ("```json\n[1, 2]\n```", [1, 2]),
    ("Here:\n```json\n\n[1, 2]\n```", [1, 2]),                # a blank line after the fence
    ("Here:\n```\n\n\n\n[3]\n```", [3]),
    ('Use {X} then {"a": 1}', {"a": 1}),
    ('{"a": [1, {"b": 2}], oops} {"c": 3}', {"c": 3}),        # the broken object's inner one is skipped
    ('{"a": {"b": 1}, "c": {"d": 2}, oops}', None),           # and never the answer
    ("{x} " * 31 + '{"a": 1}', {"a": 1}),
    ("{x} " * 16 + '{"a": 1}', {"a": 1}),
    ("{x} " * 32 + '{"a": 1}', None),                         # past the bound of candidates
])
def test_extract_json(text, expected):
    assert extract_json(text) == expected


def test_past_the_bound_of_candidates_repair_is_the_last_resort():
    assert extract_json("{x} " * 32 + '{"a": 1}', repair=True) == {"a": 1}


@pytest.mark.parametrize(("text", "expected"), [
    ('Use {name} in prose.\n```json\n{"a": 1,\n```', {"a": 1}),               # the fence, not the first brace
    ("Use {'x': 0} style.\n```json\n{'a': 1,\n```", {"a": 1}),
    ('```json\n{"a": "use ``` here", "b": 1,\n```', {"a": "use ``` here", "b": 1}),
    ('```json\n{"a": 1,\n```\nThen {"b": 2}', {"a": 1}),                     # the fence ends the candidate
    ("{'a': 1, 'b': 'x```y'", {"a": 1, "b": "x```y"}),                       # no fence: nothing is cut
    ("```\nXML is not JSON\n```\n{'a': 1", {"a": 1}),                        # a fence holding no JSON
    ("```json\n{```\n{'a': 1}", None),                                       # the fenced block is only a brace
    ("no braces at all", None),
])
def test_repair_json(text, expected):
    assert repair_json(text) == expected


def test_a_stray_closing_tag_before_a_reasoning_block_ends_the_split():
    # The text before the first stray closing tag is reasoning; a block that
    # opens on its own line after a second stray closing tag is searched for
    # its own closing tag after its opening, so the split ends.
    assert split_reasoning('a</think>b</think>\n<think>c</think>{}') == ("b</think>\n{}", "a\nc")
