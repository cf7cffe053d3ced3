"""``Branch.act()`` shares one frozen ActionParam per (strategy, suppress_errors,
verbose_action) when neither ``call_params`` nor ``tools`` is given; every
other call builds its own, and each call's keywords still decide. A request
given as a plain dict is read as any mapping: aliases, its own ``call_id``,
a missing key refused, the caller's dict left as it was."""

from __future__ import annotations

import types

import pytest

from lionops import AlcallParams, Branch
from lionops.errors import ConfigurationError, InvalidActionRequest

pytestmark = pytest.mark.anyio


def boom(x: int) -> int:
    """Fail."""
    raise KeyError("boom")


def double(x: int) -> int:
    """Double x."""
    return 2 * x


async def test_each_calls_keywords_decide_after_a_shared_call():
    branch = Branch(tools=[boom, double])
    req = {"function": "boom", "arguments": {"x": 1}}
    (suppressed,) = await branch.act([req])  # suppress_errors=True: a payload
    assert suppressed is not None and suppressed.output["type"] == "KeyError"
    with pytest.raises(KeyError, match="boom"):
        await branch.act([req], suppress_errors=False)
    (again,) = await branch.act([req])
    assert again is not None and again.output["type"] == "KeyError"


async def test_call_params_given_are_the_ones_used():
    """Their ``retry_timeout`` bounds each tool call; without them nothing does."""
    import anyio

    async def slow(x: int) -> int:
        """Take a while."""
        await anyio.sleep(0.05)
        return x

    branch = Branch(tools=[slow])
    reqs = [{"function": "slow", "arguments": {"x": 1}}, {"function": "slow", "arguments": {"x": 2}}]
    own = await branch.act(reqs, call_params=AlcallParams(retry_timeout=0.001))
    assert [r.record.decision for r in own if r is not None] == ["timed_out", "timed_out"]
    shared = await branch.act(reqs)
    assert [r.output for r in shared if r is not None] == [1, 2]


async def test_tools_given_are_the_offered_set():
    branch = Branch(tools=[boom, double])
    (resp,) = await branch.act([{"function": "double", "arguments": {"x": 1}}], tools=["boom"])
    assert resp is not None and resp.record.decision == "not_offered"
    (resp,) = await branch.act([{"function": "double", "arguments": {"x": 1}}])
    assert resp is not None and resp.record.decision == "allowed"


@pytest.mark.parametrize("strategy", ["bogus", "Sequential"])
async def test_an_unknown_strategy_is_refused(strategy):
    branch = Branch(tools=[double])
    with pytest.raises(ConfigurationError, match="strategy"):
        await branch.act([{"function": "double", "arguments": {"x": 1}}], strategy=strategy)


async def test_the_sequential_strategy_keeps_its_order():
    seen: list[int] = []

    def note(x: int) -> int:
        """Note x."""
        seen.append(x)
        return x

    branch = Branch(tools=[note])
    out = await branch.act([{"function": "note", "arguments": {"x": i}} for i in range(4)], strategy="sequential")
    assert [r.output for r in out if r is not None] == [0, 1, 2, 3] == seen


async def test_a_plain_dict_request_is_read_as_a_mapping():
    branch = Branch(tools=[double])
    given = {"name": "double", "parameters": {"x": 3}, "call_id": "c-1"}
    (resp,) = await branch.act([given])
    assert resp is not None and resp.output == 6 and resp.record.call_id == "c-1"
    assert given == {"name": "double", "parameters": {"x": 3}, "call_id": "c-1"}  # left as it was
    (resp,) = await branch.act([types.MappingProxyType({"function": "double", "arguments": {"x": 4}})])
    assert resp is not None and resp.output == 8
    (resp,) = await branch.act([{"function": "double", "arguments": {"x": 5}, "call_id": 7}])
    assert resp is not None and resp.record.call_id is None  # a call id that is not text is dropped
    with pytest.raises(InvalidActionRequest, match="has keys"):
        await branch.act([{"function": "double"}])
