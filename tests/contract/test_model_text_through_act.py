"""What the model's text can and cannot make ``act()`` do: cut-off arguments
never run, the validation policy applies before any side effect, no tool
starts before the gate decides, an unknown function is reported, request keys
are read by the alias table, and concurrent results keep request order.

The model's text goes through the real inner parse (lionops.middles.common.finish_turn).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionops import ActionParam, Branch, MismatchError, act
from lionops.middles.common import begin_turn, finish_turn

pytestmark = pytest.mark.anyio


class TextModel:
    """A Middle that answers with fixed model text and parses it for real."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def __call__(self, branch, instruction, chat_param, parse_param=None,
                       clear_messages=False, skip_validation=False):
        begin_turn(branch, instruction, chat_param, clear_messages, schema_in_prompt=True)
        return await finish_turn(branch, self.text, parse_param, skip_validation)


class Model(BaseModel):
    answer: int


class ScoreModel(BaseModel):
    score: int


def counting(name: str, counter: dict[str, int], fn=None):
    def tool(**kw: Any) -> Any:
        counter[name] = counter.get(name, 0) + 1
        return fn(**kw) if fn else {"ok": kw}

    tool.__name__ = name
    return tool


async def operate_under(policy: str, branch: Branch, model: type[BaseModel], text: str,
                        raises: str) -> Any:
    """operate() with actions on under ``policy``: the MismatchError (matching
    ``raises``) under "raise", else the returned value; the trace exit is a mismatch."""
    kw = dict(instruction="x", response_format=model, actions=True, handle_validation=policy,
              middle=TextModel(text))
    out: Any = None
    if policy == "raise":
        with pytest.raises(MismatchError, match=raises):
            await branch.operate(**kw)
    else:
        out = await branch.operate(**kw)
        if policy == "return_none":
            assert out is None
    assert branch.traces[-1].exit == f"mismatch_{policy}"
    return out


@pytest.mark.parametrize("policy", ["raise", "return_value", "return_none"])
async def test_cut_off_arguments_never_run_as_empty_input(policy):
    """A request whose arguments were cut off is invalid; the tool is never
    run with {}; the validation policy decides the result."""
    calls: dict[str, int] = {}

    def get_weather(city: str) -> str:
        """Weather."""
        calls["get_weather"] = calls.get("get_weather", 0) + 1
        return "sunny"

    text = json.dumps({"answer": 1, "action_requests": [
        {"function": "get_weather", "arguments": "{\"city\": \"Par"}]})
    out = await operate_under(policy, Branch(tools=[get_weather]), Model, text, raises="get_weather")
    if policy == "return_value":
        assert out["action_requests"][0]["arguments"] == "{\"city\": \"Par"
    assert calls == {}


@pytest.mark.parametrize("policy", ["raise", "return_value", "return_none"])
async def test_the_validation_policy_applies_before_side_effects(policy):
    """`score` fails validation; under every policy send_message is never
    invoked and no action_responses are attached."""
    calls: dict[str, int] = {}
    send = counting("send_message", calls)
    text = json.dumps({"score": "high", "action_requests": [
        {"function": "send_message", "arguments": {"to": "team", "body": "done"}}]})
    out = await operate_under(policy, Branch(tools=[send]), ScoreModel, text, raises="ScoreModel")
    if policy == "return_value":
        assert "action_responses" not in out
    assert calls == {}


async def test_no_tool_starts_before_the_gate_decides():
    """Concurrent requests; an async gate taking 200 ms denies delete_file;
    delete_file never starts; read_file runs; responses in request order."""
    log: list[str] = []

    async def delete_file(path: str) -> str:
        """Delete."""
        log.append(f"start delete_file {path}")
        return "deleted"

    async def read_file(path: str) -> str:
        """Read."""
        log.append(f"start read_file {path}")
        return "content"

    async def slow_gate(inv) -> bool:
        await anyio.sleep(0.2)
        log.append(f"decided {inv.function}")
        return inv.function != "delete_file"

    b = Branch(tools=[delete_file, read_file])
    b.gate(slow_gate)
    out = await act(b, [{"function": "delete_file", "arguments": {"path": "a"}},
                        {"function": "read_file", "arguments": {"path": "b"}}],
                    ActionParam(strategy="concurrent"))
    assert "start delete_file a" not in log
    assert log.index("decided read_file") < log.index("start read_file b")
    assert [r.function for r in out] == ["delete_file", "read_file"]
    assert out[0].output == {"error": "denied by governance gate", "function": "delete_file"}
    assert out[1].output == "content"


async def test_an_unknown_function_is_reported_not_remapped():
    """Execute_python is unknown: an "unknown function" error payload, not
    fuzzy-remapped to run_shell; run_shell runs; nothing escapes act()."""
    calls: dict[str, int] = {}
    b = Branch(tools=[counting("run_shell", calls)])
    out = await b.operate(instruction="x", actions=True, middle=TextModel(json.dumps({"action_requests": [
        {"function": "execute_python", "arguments": {"code": "print(1)"}},
        {"function": "run_shell", "arguments": {"cmd": "echo hi"}}]})))
    bad, good = out.action_responses
    assert "unknown function 'execute_python'" in bad.output["error"]
    assert bad.output["type"] == "UnknownToolError"
    assert good.output == {"ok": {"cmd": "echo hi"}}
    assert calls == {"run_shell": 1}


async def test_request_aliases_by_table_and_wrapped_arguments_rejected():
    """{"name", "parameters"} is normalized to function/arguments by an
    explicit table, never by fuzzy matching; arguments nested under an
    unexpected wrapper are rejected with a missing-q error, not unwrapped;
    search runs exactly once."""
    calls: dict[str, int] = {}

    def search(q: str) -> list[str]:
        """Search."""
        calls["search"] = calls.get("search", 0) + 1
        return [q]

    b = Branch(tools=[search])
    out = await b.operate(instruction="x", actions=True, middle=TextModel(json.dumps({"action_requests": [
        {"name": "search", "parameters": {"q": "lion"}},
        {"function": "search", "arguments": {"_": {"q": "lion"}}}]})))
    first, second = out.action_responses
    assert first.output == ["lion"] and first.arguments == {"q": "lion"}
    assert "q: Field required" in second.output["error"]
    assert calls == {"search": 1}
    # near-miss names are not fuzzily accepted either
    (r,) = await b.act([{"functon": "search", "arguments": {"q": "x"}, "function": "serch"}])
    assert "unknown function 'serch'" in r.output["error"] and calls == {"search": 1}


async def test_concurrent_results_in_request_order():
    """Concurrent [slow 300 ms, fast 50 ms, mid 150 ms] → responses in
    request order, each with its own function and arguments."""
    finished: list[str] = []

    def timed(name: str, delay: float):
        async def tool(tag: str) -> str:
            await anyio.sleep(delay)
            finished.append(name)
            return f"{name}:{tag}"

        tool.__name__ = name
        return tool

    b = Branch(tools=[timed("slow", 0.3), timed("fast", 0.05), timed("mid", 0.15)])
    out = await b.act([{"function": "slow", "arguments": {"tag": "a"}},
                       {"function": "fast", "arguments": {"tag": "b"}},
                       {"function": "mid", "arguments": {"tag": "c"}}])
    assert finished == ["fast", "mid", "slow"]  # completion order differs...
    assert [(r.function, r.arguments, r.output) for r in out] == [  # ...request order is kept
        ("slow", {"tag": "a"}, "slow:a"), ("fast", {"tag": "b"}, "fast:b"), ("mid", {"tag": "c"}, "mid:c")]
    responses = [m.content for m in b.messages if m.role == "action_response"]
    assert sorted(r["output"] for r in responses) == ["fast:b", "mid:c", "slow:a"]


async def test_one_parallel_failure_with_and_without_suppression():
    """Concurrent [ok1, boom ValueError("x"), ok2]: suppressed → three
    responses in order with boom's error payload; unsuppressed → the exception
    surfaces, never lost, no partial result attached."""

    async def ok1() -> str:
        return "one"

    async def boom() -> str:
        raise ValueError("x")

    async def ok2() -> str:
        await anyio.sleep(0.01)
        return "two"

    reqs = [{"function": n, "arguments": {}} for n in ("ok1", "boom", "ok2")]
    b = Branch(tools=[ok1, boom, ok2])
    out = await b.act(reqs)
    assert [r.output for r in out] == ["one", {"error": "x", "type": "ValueError",
                                               "message": "Error invoking action 'boom': x"}, "two"]
    with pytest.raises(ValueError, match="^x$"):
        await b.act(reqs, suppress_errors=False)
    # through operate: ActionParam always suppresses (D1); a raw act() policy shows the other path
    raw = {"action_requests": reqs}
    result = await b.operate(instruction="x", actions=True, middle=TextModel(json.dumps(raw)))
    assert [r.output for r in result.action_responses][0::2] == ["one", "two"]
