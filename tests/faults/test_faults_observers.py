"""Observer faults: a hook, a context-provider writeback or a log
sink that raises is logged and never changes the operation's outcome; an
authorizer that raises or returns a non-bool denies (fail closed).

Each test runs the same operation twice, once with well-behaved observers and
once with faulty ones, and compares what the caller gets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, HookPoint
from lionops.pipeline.act import DENIAL_ERROR
from tests.helpers import ScriptedMiddle

pytestmark = pytest.mark.anyio


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


REQUESTS = {"action_requests": [
    {"function": "add", "arguments": {"a": 1, "b": 2}},
    {"function": "add", "arguments": {"a": "x", "b": 2}},
    {"function": "fail", "arguments": {}},
]}


def make_branch() -> tuple[Branch, list[str]]:
    ran: list[str] = []

    def add(a: int, b: int) -> int:
        """Add."""
        ran.append("add")
        return a + b

    def fail() -> None:
        """Fail."""
        ran.append("fail")
        raise ValueError("tool failed")

    return Branch(tools=[add, fail]), ran


async def run(b: Branch) -> tuple[Any, str, list[Any]]:
    out = await b.operate(instruction="x", actions=True, middle=ScriptedMiddle(json.loads(json.dumps(REQUESTS))))
    return [r.output for r in out["action_responses"]], b.traces[-1].exit, sorted(m.role for m in b.messages)


def raising(exc: BaseException, is_async: bool):
    if is_async:
        async def handler(*_: Any) -> None:
            raise exc
    else:
        def handler(*_: Any) -> None:
            raise exc
    return handler


#: (exception, async handler?) for every faulty observer.
FAULTY = [pytest.param(exc, is_async, id=f"{name}-{'async' if is_async else 'sync'}")
          for name, exc in (("plain", RuntimeError("observer down")), ("unprintable", Unprintable()))
          for is_async in (False, True)]


async def baseline() -> tuple[tuple[Any, str, list[Any]], list[str]]:
    """The outcome with no faulty observer, and the tools that ran."""
    b, ran = make_branch()
    return await run(b), ran


@pytest.mark.parametrize("exc,is_async", FAULTY)
async def test_raising_hooks_are_logged_and_change_nothing(exc, is_async):
    expected, ran0 = await baseline()
    b, ran = make_branch()
    for point in HookPoint:
        b.on(point, raising(exc, is_async))
    assert await run(b) == expected and sorted(ran) == sorted(ran0)
    errors = b.logs.of_kind("hook_error")
    # TOOL_PRE for add and fail, TOOL_POST for add, TOOL_ERROR for fail
    assert sorted(e.content["hook"] for e in errors) == ["tool_error", "tool_post", "tool_pre", "tool_pre"]
    assert {e.content["type"] for e in errors} == {type(exc).__name__}


@pytest.mark.parametrize("exc,is_async", FAULTY)
async def test_raising_writeback_is_logged_and_change_nothing(exc, is_async):
    expected, _ = await baseline()
    b, _ = make_branch()
    offered: list[Any] = []

    class Faulty:
        writeback = staticmethod(raising(exc, is_async))

    class Good:
        def writeback(self, response: Any) -> None:
            offered.append(response.output)

    b.add_context_provider(Faulty())
    b.add_context_provider(Good())
    assert await run(b) == expected
    assert offered == expected[0]  # the provider after the faulty one is still offered every response
    assert len(b.logs.of_kind("writeback_error")) == 3


VERDICTS = {
    "raises": RuntimeError("authorizer down"),
    "unprintable": Unprintable(),
    "none": None,
    "string": "yes",
    "int_one": 1,
    "list": [True],
}


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("verdict", sorted(VERDICTS))
async def test_authorizer_that_raises_or_returns_non_bool_denies(verdict, is_async):
    b, ran = make_branch()
    value = VERDICTS[verdict]

    if isinstance(value, BaseException):
        check = raising(value, is_async)
    elif is_async:
        async def check(inv: Any) -> Any:
            return value
    else:
        def check(inv: Any) -> Any:
            return value

    b.gate(check)
    outputs, exit_, _ = await run(b)
    assert exit_ == "enriched" and ran == []  # nothing runs; the operation still returns
    assert outputs[0] == {"error": DENIAL_ERROR, "function": "add"}
    assert outputs[2] == {"error": DENIAL_ERROR, "function": "fail"}
    assert outputs[1]["type"] == "ToolArgumentsError"  # never reaches the gate
    assert len(b.logs.of_kind("gate_error")) == 2


@pytest.mark.parametrize("exc,is_async", [p for p in FAULTY if not p.values[1]])
async def test_raising_log_sink_is_logged_and_changes_nothing(exc, is_async):
    """A log sink (``branch.logs.subscribe``) that raises: a ``sink_error``
    entry per failure, the other sinks still get every entry, same outcome."""
    expected, _ = await baseline()
    b, _ = make_branch()
    seen: list[str] = []
    b.logs.subscribe(raising(exc, is_async))
    b.logs.subscribe(lambda entry: seen.append(entry.kind))
    assert await run(b) == expected
    forwarded = [e.kind for e in b.logs if e.kind != "sink_error"]
    assert sorted(seen) == sorted(forwarded) and len(forwarded) == 3
    assert len(b.logs.of_kind("sink_error")) == 3  # not forwarded, so no cascade


async def test_unsubscribed_sink_gets_nothing_more():
    b, _ = make_branch()
    seen: list[str] = []
    unsubscribe = b.logs.subscribe(lambda entry: seen.append(entry.kind))
    await run(b)
    unsubscribe()
    unsubscribe()  # idempotent
    await run(b)
    assert len(seen) == 3 and len(b.logs) == 6


async def test_async_log_sink_is_refused():
    async def sink(entry: Any) -> None:
        pass

    with pytest.raises(TypeError, match="sync callable"):
        Branch().logs.subscribe(sink)
