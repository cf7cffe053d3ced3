"""Usage limits: checked before the model request or tool call they limit
(DESIGN "Rulings for the new doors"), with the model's reported usage."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lionops import Approve, Branch, ConfigurationError, Defer, UsageLimitExceeded, UsageLimits
from lionops.clock import RecordingClock, use_clock
from lionops.testing import completion, tool_call
from tests.cli_support import fake_model
from tests.helpers import ScriptedMiddle
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio

#: each completion() reports 52 prompt and 17 completion tokens
PER_CALL = {"input_tokens": 52, "output_tokens": 17, "total_tokens": 69}


@pytest.mark.parametrize(("limit", "value"), [
    ("requests", 1), ("input_tokens", 52), ("output_tokens", 10), ("total_tokens", 60),
])
async def test_a_request_past_a_limit_is_never_made(server, limit, value):
    server.push(completion("one"), completion("two"))
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(**{limit: value}))
    try:
        assert await branch.operate(instruction="first") == "one"
        with pytest.raises(UsageLimitExceeded) as info:
            await branch.operate(instruction="second")
    finally:
        await model.aclose()
    assert len(server.chat_requests) == 1  # the second request was never sent
    err = info.value
    assert (err.limit, err.value) == (limit, value)
    assert err.usage["requests"] == 1 and all(err.usage[k] == v for k, v in PER_CALL.items())
    assert f"{limit}={value}" in str(err)
    trace = branch.traces[-1]
    assert trace.path()[-1] == ("adapter", "over_limit", "raised")
    assert trace.meta["usage_limit"]["limit"] == limit
    assert "UsageLimitExceeded" in (trace.transitions[-1].error or "")


async def test_usage_adds_up_over_calls_and_is_shared_with_forks(server):
    server.push(completion("a"), completion("b"))
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(requests=2))
    try:
        await branch.operate(instruction="a")
        await branch.fork().operate(instruction="b")
        with pytest.raises(UsageLimitExceeded, match="requests"):
            await branch.operate(instruction="c")
    finally:
        await model.aclose()
    assert branch.usage.requests == 2 and branch.usage.total_tokens == 138


async def test_a_tool_call_past_the_limit_is_an_over_limit_decision(server):
    ran: list[str] = []

    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(order)
        return "paid"

    server.push(completion(tool_calls=[tool_call("lookup", {"order": o}) for o in ("A", "B", "C")]))
    model = make_model(server)
    branch = Branch(chat_model=model, tools=[lookup], limits=UsageLimits(tool_calls=2))
    try:
        out = await branch.operate_traced(instruction="look", actions=True, action_strategy="sequential")
    finally:
        await model.aclose()
    assert ran == ["A", "B"]
    assert [a.decision for a in out.trace.actions] == ["allowed", "allowed", "over_limit"]
    over = out.trace.actions[2]
    assert over.invoked is False and over.error_type == "UsageLimitExceeded"
    assert "tool_calls=2" in over.reason and out.trace.exit == "enriched"
    assert branch.usage.tool_calls == 2


async def test_a_cost_limit_prices_the_reported_usage(server, tmp_path):
    server.push(completion("a"), completion("b"))
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(cost=1e-6))
    try:
        await branch.operate(instruction="a")
        assert branch.usage.cost > 0  # gpt-4o-mini, 52 in / 17 out, from genai-prices
        with pytest.raises(UsageLimitExceeded, match="cost"):
            await branch.operate(instruction="b")
    finally:
        await model.aclose()
    restored = Branch.restore(branch.snapshot(tmp_path / "b.json"), chat_model=model,
                              limits=UsageLimits(cost=1e-6))
    assert restored.usage == branch.usage


async def test_an_unknown_price_under_a_cost_limit_is_an_error_never_zero(server):
    server.push(completion("a", model="house-model-7"))
    model = make_model(server, model="house-model-7")
    branch = Branch(chat_model=model, limits=UsageLimits(cost=5.0))
    try:
        with pytest.raises(ConfigurationError, match="no price is known for 'house-model-7'"):
            await branch.operate(instruction="a")
    finally:
        await model.aclose()
    assert branch.usage.cost == 0 and branch.traces[-1].exit == "failed"


def test_limits_are_checked_when_made():
    with pytest.raises(TypeError, match="requests must be an int"):
        UsageLimits(requests=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cost must be >= 0"):
        UsageLimits(cost=-1)
    with pytest.raises(TypeError, match="UsageLimits"):
        Branch(limits={"requests": 1})  # type: ignore[arg-type]




async def test_a_cli_agent_reports_its_tokens_and_its_own_cost():
    model = fake_model("plain_answer.jsonl")
    branch = Branch(chat_model=model, limits=UsageLimits(cost=0.003))
    await branch.operate(instruction="hello")
    # the normalized record when the adapter gives one (cache reads inside input), else as reported
    tokens = branch.traces[-1].meta.get("tokens") or {"input_tokens": 1200, "output_tokens": 45}
    assert (branch.usage.input_tokens, branch.usage.output_tokens) == (tokens["input_tokens"], 45)
    assert branch.usage.cost == pytest.approx(0.00321)  # the CLI's own total_cost_usd, not a table price
    with pytest.raises(UsageLimitExceeded, match="cost"):
        await branch.operate(instruction="again")


async def test_an_approved_call_past_the_tool_call_limit_does_not_run():
    ran: list[str] = []

    def refund(order: str) -> str:
        """Refund."""
        ran.append(order)
        return order

    branch = Branch(tools=[refund], limits=UsageLimits(tool_calls=1))
    branch.gate(lambda inv: Defer(reason="ask") if inv.arguments["order"] == "B" else True)
    await branch.operate(instruction="go", actions=True, action_strategy="sequential", middle=ScriptedMiddle(
        {"action_requests": [{"function": "refund", "arguments": {"order": o}} for o in ("A", "B")]}))
    [call] = branch.pending_calls()
    result = await branch.resume({call.call_id: Approve(by="ann")})
    assert ran == ["A"]
    assert [r.record.decision for r in result["action_responses"]] == ["allowed", "over_limit"]


def test_the_normalized_token_record_is_counted_before_the_raw_one():
    from lionops._limits import UsageSoFar, count_request

    used = UsageSoFar()
    count_request(UsageLimits(cost=1.0), used, {
        "tokens": {"input_tokens": 1500, "output_tokens": 45, "cache_read_tokens": 300},
        "usage": {"input_tokens": 1200, "output_tokens": 45}, "provider": "anthropic", "model": "claude-3-5-haiku",
    })
    assert (used.requests, used.input_tokens, used.output_tokens, used.total_tokens) == (1, 1500, 45, 1545)
    assert 0 < used.cost < 0.01


class Restated(BaseModel):
    answer: str


@pytest.mark.parametrize(("limit", "value", "sent"), [("requests", 3, 3), ("total_tokens", 100, 2)])
async def test_a_parse_model_request_past_a_limit_is_never_made(server, limit, value, sent):
    """Prose under a response model: the parse model is asked to restate it;
    each re-ask counts and is checked before it is made."""
    server.push(completion("Let me think."))
    for _ in range(4):
        server.push(completion('{"answer": null}'))  # the parse model cannot restate prose
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(**{limit: value}))
    try:
        with use_clock(RecordingClock()), pytest.raises(UsageLimitExceeded) as info:
            await branch.operate(instruction="q", response_format=Restated)
    finally:
        await model.aclose()
    assert len(server.chat_requests) == sent  # the next re-ask was never sent
    assert info.value.limit == limit and info.value.usage["requests"] == sent
    trace = branch.traces[-1]
    assert trace.path()[-1] == ("adapter", "over_limit", "raised")
    assert len(trace.meta["parse_requests"]) == sent - 1 == trace.meta["parse_model_calls"]
    assert branch.usage.requests == sent and branch.usage.total_tokens == 69 * sent


async def test_parse_model_requests_count_against_the_limits(server):
    server.push(completion("It is Paris."), completion('{"answer": "Paris"}'))
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(requests=2))
    try:
        assert (await branch.operate(instruction="q", response_format=Restated)).answer == "Paris"
        with pytest.raises(UsageLimitExceeded, match="requests"):
            await branch.operate(instruction="again")
    finally:
        await model.aclose()
    assert branch.usage.requests == 2 and branch.usage.total_tokens == 138
    assert len(server.chat_requests) == 2
