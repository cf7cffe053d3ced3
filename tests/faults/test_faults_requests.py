"""Bad action requests: any shape a model can produce.

Either the ADR-0022 D4 ValueError before anything is authorized or invoked,
or one response per request in request order, error payloads for the ones
that cannot run; never a partial invocation of an invalid request, never a
fan-out past ``max_concurrent``. The hostile payloads come from
``tests/strategies.py``; the safety invariants checked on each are:

- a tool is invoked only with arguments that validated against its
  signature, and only after ``branch.authorize`` allowed it;
- invocations == valid requests the gate allows; the gate is asked exactly
  about the valid requests;
- responses are in request order; every request leaves one
  ``action_request`` and one ``action_response`` message and one log entry.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import anyio
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lionops import ActionRequestModel, AlcallParams, Branch
from lionops.pipeline.act import DENIAL_ERROR
from tests.helpers import ScriptedMiddle, as_response
from tests.strategies import (
    Labeled,
    Recorder,
    allowed,
    deep_json,
    expected_output,
    labeled_requests,
    make_tools,
    model_result,
)

pytestmark = pytest.mark.anyio

STRATEGIES = st.sampled_from(["concurrent", "sequential"])


def governed_branch() -> tuple[Branch, Recorder]:
    rec = Recorder()
    b = Branch(tools=make_tools(rec))
    b.gate(rec.gate)
    return b, rec


def _key(function: str, arguments: dict[str, Any]) -> str:
    return json.dumps([function, arguments], sort_keys=True)


def check_nothing_ran(b: Branch, rec: Recorder) -> None:
    assert rec.asked == [] and rec.invoked == []
    assert not b.messages.by_role("action_request") and not b.messages.by_role("action_response")


def check_responses(b: Branch, rec: Recorder, reqs: list[Labeled], out: list[Any], strategy: str) -> None:
    valid = [r for r in reqs if r.kind == "valid"]
    ran = [r for r in valid if allowed(r.function, r.arguments)]
    assert Counter(_key(f, a) for f, a in rec.asked) == Counter(_key(r.function, r.arguments) for r in valid)
    assert Counter(_key(f, a) for f, a in rec.invoked) == Counter(_key(r.function, r.arguments) for r in ran)
    if strategy == "sequential":
        assert rec.invoked == [(r.function, r.arguments) for r in ran]
    assert len(out) == len(reqs)
    for req, resp in zip(reqs, out, strict=True):
        if req.kind != "valid":
            assert resp.is_error and set(resp.output) == {"error", "type", "message"}, resp
        elif allowed(req.function, req.arguments):
            assert (resp.function, resp.arguments) == (req.function, req.arguments)
            assert resp.output == expected_output(req.function, req.arguments)
        else:
            assert resp.output == {"error": DENIAL_ERROR, "function": req.function}
    assert len(b.messages.by_role("action_request")) == len(reqs)
    assert len(b.messages.by_role("action_response")) == len(reqs)
    kinds = Counter(e.kind for e in b.logs)
    assert kinds["action"] + kinds["denied"] + kinds["action_error"] == len(reqs)
    json.dumps(b.logs.to_list()) and json.dumps(b.messages.to_list())  # serializable, whatever came in


@given(reqs=labeled_requests, strategy=STRATEGIES)
@example(reqs=[Labeled({"function": "echo", "arguments": deep_json(100_000)}, "invalid")], strategy="sequential")
async def test_hostile_requests_through_act(reqs, strategy):
    b, rec = governed_branch()
    payload = [r.payload for r in reqs]
    if any(r.kind == "shape" for r in reqs):
        with pytest.raises(ValueError, match="action_request must be"):
            await b.act(payload, strategy=strategy)
        check_nothing_ran(b, rec)
        return
    out = await b.act(payload, strategy=strategy)
    check_responses(b, rec, reqs, out, strategy)


@given(result=model_result(), strategy=STRATEGIES)
async def test_hostile_model_results_through_operate(result, strategy):
    value, reqs = result
    b, rec = governed_branch()
    kw = dict(instruction="q", actions=True, action_strategy=strategy, middle=ScriptedMiddle(value))
    if reqs is not None and any(r.kind == "shape" for r in reqs):
        with pytest.raises(ValueError, match="action_request must be"):
            await b.operate(**kw)
        assert b.traces[-1].states[-2:] == ["act", "raised"]
        check_nothing_ran(b, rec)
        return
    out = await b.operate(**kw)
    trace = b.traces[-1]
    if not reqs:
        assert out is value and trace.exit in ("no_requests", "no_responses")
        check_nothing_ran(b, rec)
        return
    assert out is value and trace.exit == "enriched"
    check_responses(b, rec, reqs, out["action_responses"], strategy)


# ---------------------------------------------------------------- arguments as JSON text or not an object


ARGUMENTS_AS_TEXT = {
    "a_string_object": ('{"city": "Paris"}', {"city": "Paris"}),
    "b_double_encoded": (json.dumps(json.dumps({"city": "Paris"})), {"city": "Paris"}),
    "c_list": (["Paris"], None),
    "d_number": (42, None),
}


def weather_branch() -> tuple[Branch, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def get_weather(city: str) -> str:
        """Weather for a city."""
        seen.append({"city": city})
        return "sunny"

    return Branch(tools=[get_weather]), seen


def check_argument_variant(out: list[Any], seen: list[dict[str, Any]], expected: dict[str, Any] | None) -> None:
    (resp,) = out
    if expected is not None:
        assert seen == [expected] and resp.arguments == expected and resp.output == "sunny"
    else:
        assert seen == []
        assert resp.is_error and "arguments must be a JSON object" in resp.output["error"]
        assert resp.output["type"] == "InvalidActionRequest"


@pytest.mark.parametrize("variant", sorted(ARGUMENTS_AS_TEXT))
async def test_arguments_as_text_list_or_number_through_act(variant):
    """Arguments as JSON text or not an object, through act(): (a)/(b) decode to the object; (c)/(d) are invalid
    requests with an error naming the non-object arguments, never run."""
    arguments, expected = ARGUMENTS_AS_TEXT[variant]
    b, seen = weather_branch()
    out = await b.act([{"function": "get_weather", "arguments": arguments}])
    check_argument_variant(out, seen, expected)


@pytest.mark.parametrize("variant", sorted(ARGUMENTS_AS_TEXT))
async def test_arguments_as_text_list_or_number_through_operate(variant):
    """Arguments as JSON text or not an object, through operate(): a Middle returning the mapping as a model would
    (no parse in between), so act() sees the arguments as sent; nothing escapes."""
    arguments, expected = ARGUMENTS_AS_TEXT[variant]
    b, seen = weather_branch()
    out = await b.operate(instruction="weather?", actions=True, middle=ScriptedMiddle(
        {"action_requests": [{"function": "get_weather", "arguments": arguments}]}))
    check_argument_variant(out["action_responses"], seen, expected)
    assert b.traces[-1].exit == "enriched"


@pytest.mark.parametrize("variant", sorted(ARGUMENTS_AS_TEXT))
async def test_arguments_as_text_list_or_number_through_operate_with_the_generated_model(variant):
    """Arguments as JSON text or not an object, where the Middle validates into the generated response type: (a)/(b)
    decode into the ActionRequestModel; (c)/(d) fail that validation, so the
    Middle's value is the raw mapping and act() answers it with the error."""
    arguments, expected = ARGUMENTS_AS_TEXT[variant]
    data = {"action_requests": [{"function": "get_weather", "arguments": arguments}]}

    def build(parse_param):
        try:
            return as_response(data)(parse_param)
        except ValueError:
            return data

    b, seen = weather_branch()
    out = await b.operate(instruction="weather?", actions=True, middle=ScriptedMiddle(build))
    responses = out["action_responses"] if isinstance(out, dict) else out.action_responses
    check_argument_variant(responses, seen, expected)


# ---------------------------------------------------------------- volume


async def test_ten_thousand_requests_all_answered_in_order():
    """10k requests in one list (mixed valid, unknown, non-object): one response
    each, in order; bounded by max_concurrent=64 throughout."""
    live = {"now": 0, "max": 0}

    async def slow_echo(text: str) -> str:
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        await anyio.sleep(0)
        live["now"] -= 1
        return text

    b = Branch(tools=[slow_echo], max_requests=10_000)  # the default cap is lower
    reqs: list[Any] = []
    for i in range(10_000):
        if i % 10 == 3:
            reqs.append({"function": "nope", "arguments": {"text": str(i)}})
        elif i % 10 == 7:
            reqs.append({"function": "slow_echo", "arguments": [str(i)]})
        else:
            reqs.append({"function": "slow_echo", "arguments": {"text": str(i)}})
    with anyio.fail_after(30):
        out = await b.act(reqs, call_params=AlcallParams(max_concurrent=64))
    assert len(out) == 10_000
    for i, r in enumerate(out):
        if i % 10 in (3, 7):
            assert r.is_error
        else:
            assert r.output == str(i)
    assert 1 <= live["max"] <= 64


async def test_ten_megabytes_of_arguments():
    """10 MB of arguments, as an object and as JSON text: invoked once with the
    whole value; hook and log summaries stay bounded (ADR-0022 D4: 200 chars)."""
    got: list[int] = []

    def store(blob: str) -> int:
        got.append(len(blob))
        return len(blob)

    blob = "x" * 10_000_000
    b = Branch(tools=[store])
    payloads: list[dict[str, Any]] = []
    b.on("tool_pre", payloads.append)
    out = await b.act([{"function": "store", "arguments": {"blob": blob}},
                       {"function": "store", "arguments": json.dumps({"blob": blob})}])
    assert [r.output for r in out] == [10_000_000, 10_000_000] and got == [10_000_000] * 2
    assert all(len(p["arguments"]) <= 203 for p in payloads)


async def test_ten_megabytes_of_non_object_arguments_error_is_bounded():
    """10 MB of arguments that are not an object: the error names them by a
    bounded preview, the tool never runs."""
    b, seen = weather_branch()
    (r,) = await b.act([{"function": "get_weather", "arguments": json.dumps(["y" * 10_000_000])}])
    assert seen == [] and r.is_error and len(r.output["error"]) < 1000


@pytest.mark.parametrize("max_concurrent", [1, 3])
async def test_fan_out_never_exceeds_max_concurrent(max_concurrent):
    """alcall's spawning loop holds a slot per running call: counting live
    act() tasks (entered at the gate, left when the tool returns) never passes
    max_concurrent, also while requests are denied, unknown or invalid."""
    live = {"now": 0, "max": 0}

    async def gate(inv) -> bool:
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        await anyio.sleep(0)
        if inv.arguments["n"] % 5 == 0:
            live["now"] -= 1
            return False
        return True

    async def work(n: int) -> int:
        await anyio.sleep(0.001)
        live["now"] -= 1
        return n

    b = Branch(tools=[work])
    b.gate(gate)
    reqs = [{"function": "work", "arguments": {"n": n}} if n % 7 else {"function": "work", "arguments": "bad"}
            for n in range(60)]
    out = await b.act(reqs, call_params=AlcallParams(max_concurrent=max_concurrent))
    assert [r.output for r in out if not r.is_error] == [n for n in range(60) if n % 7 and n % 5]
    assert live == {"now": 0, "max": max_concurrent}


async def test_action_request_model_marked_invalid_is_never_run():
    """An adapter's invalid native tool call: error payload, valid sibling runs."""
    b, seen = weather_branch()
    out = await b.act([ActionRequestModel(function="get_weather", arguments={"city": "x"}, invalid="cut off"),
                       ActionRequestModel(function="get_weather", arguments={"city": "Oslo"})])
    assert out[0].is_error and out[0].output["error"] == "cut off"
    assert out[1].output == "sunny" and seen == [{"city": "Oslo"}]
