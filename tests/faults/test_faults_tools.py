"""Tool faults: a tool that raises, hangs past its timeout, returns
something that is not JSON-serializable, or is unknown.

Under ``suppress_errors=True`` each gives an error-payload response and the
other tools of the same batch are unaffected; under ``suppress_errors=False``
the original exception surfaces (the first in request order), never an
ExceptionGroup. The one-failure case is in
tests/contract/test_model_text_through_act.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from lionops import AlcallParams, Branch, HookPoint
from lionops.pipeline.act import ToolOutputError
from lionops.tools import Tool, UnknownToolError

pytestmark = pytest.mark.anyio

#: Generous for the tools that answer at once (a loaded machine), tiny next to a tool that never returns.
TIMEOUT = AlcallParams(retry_timeout=1.0, output_dropna=True)


class Unprintable(Exception):
    """An exception whose ``str()`` itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _tools(ran: list[str]) -> list[Any]:
    async def ok(n: int) -> int:
        """Fine."""
        await anyio.sleep(0)
        ran.append(f"ok{n}")
        return n

    def raises() -> str:
        """Raises."""
        ran.append("raises")
        raise KeyError("missing")

    async def hangs() -> str:
        """Never returns."""
        ran.append("hangs")
        await anyio.sleep_forever()
        return "never"

    def opaque() -> Any:
        """Returns an object JSON cannot hold."""
        ran.append("opaque")
        return object()

    def cyclic() -> Any:
        """Returns a self-referencing dict."""
        ran.append("cyclic")
        d: dict[str, Any] = {}
        d["self"] = d
        return d

    def unprintable() -> str:
        """Raises an exception that cannot be printed."""
        ran.append("unprintable")
        raise Unprintable()

    return [ok, raises, hangs, opaque, cyclic, unprintable]


FAULTS: dict[str, tuple[type[BaseException], str]] = {
    "raises": (KeyError, "KeyError"),
    "hangs": (TimeoutError, "TimeoutError"),
    "opaque": (ToolOutputError, "ToolOutputError"),
    "cyclic": (ToolOutputError, "ToolOutputError"),
    "unprintable": (Unprintable, "Unprintable"),
    "nope": (UnknownToolError, "UnknownToolError"),
}


def batch(fault: str) -> list[dict[str, Any]]:
    return [{"function": "ok", "arguments": {"n": 1}}, {"function": fault, "arguments": {}},
            {"function": "ok", "arguments": {"n": 2}}]


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_fault_suppressed_is_an_error_payload_and_siblings_run(fault, strategy):
    ran: list[str] = []
    b = Branch(tools=_tools(ran))
    errors: list[dict[str, Any]] = []
    b.on(HookPoint.TOOL_ERROR, errors.append)
    with anyio.fail_after(10):
        out = await b.act(batch(fault), strategy=strategy, call_params=TIMEOUT)
    first, bad, last = out
    assert (first.output, last.output) == (1, 2)
    assert bad.function == fault and bad.is_error
    assert bad.output["type"] == FAULTS[fault][1]
    assert isinstance(bad.output["error"], str) and fault in bad.output["message"]
    assert sorted(r for r in ran if r.startswith("ok")) == ["ok1", "ok2"]
    # recorded: one request and one response message per request, logs serializable
    assert len(b.messages.by_role("action_response")) == 3
    assert [e.content["type"] for e in b.logs.of_kind("action_error")] == [FAULTS[fault][1]]
    json.dumps(b.logs.to_list()), json.dumps(b.messages.to_list())
    if fault != "nope":  # an invoked tool that failed fires TOOL_ERROR; an unknown one is never invoked
        assert [e["type"] for e in errors] == [FAULTS[fault][1]]
    else:
        assert errors == [] and fault not in ran


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_fault_unsuppressed_raises_the_original_exception(fault, strategy):
    ran: list[str] = []
    b = Branch(tools=_tools(ran))
    with anyio.fail_after(10), pytest.raises(FAULTS[fault][0]):
        await b.act(batch(fault), strategy=strategy, suppress_errors=False, call_params=TIMEOUT)
    # the hook and log path ran before the exception surfaced; siblings the
    # failure cancelled while they ran are recorded as cancelled
    errors = b.logs.of_kind("action_error")
    assert [e.content["type"] for e in errors if not e.content["reason"].endswith("cancelled")] == [FAULTS[fault][1]]
    assert all(e.content["function"] == "ok" for e in errors if e.content["reason"].endswith("cancelled"))
    if strategy == "sequential":
        assert "ok2" not in ran  # nothing after the failure starts


async def test_timeout_applies_per_invocation_not_per_batch():
    """retry_timeout bounds each tool call: ten 0.3 s calls under a 1 s limit
    all succeed even when run one after another (3 s in all)."""

    async def nap(n: int) -> int:
        await anyio.sleep(0.3)
        return n

    b = Branch(tools=[nap])
    reqs = [{"function": "nap", "arguments": {"n": n}} for n in range(10)]
    out = await b.act(reqs, strategy="sequential", call_params=TIMEOUT)
    assert [r.output for r in out] == list(range(10))


async def test_blocking_tool_past_its_timeout_is_waited_for_not_abandoned():
    """A ``blocking=True`` sync tool runs in a worker thread, which cannot be
    interrupted: past its timeout the call waits for the thread, so nothing
    outlives act(), and the result it produced (its side effect happened) is
    reported, not replaced by a timeout. Async tools are cut at the timeout."""
    finished: list[str] = []

    def slow_io() -> str:
        time.sleep(0.2)
        finished.append("slow_io")
        return "late"

    b = Branch(tools=[Tool(slow_io, blocking=True)])
    (r,) = await b.act([{"function": "slow_io", "arguments": {}}],
                       call_params=AlcallParams(retry_timeout=0.05, output_dropna=True))
    assert finished == ["slow_io"]  # the thread ended before act() returned
    assert r.output == "late"


async def test_non_serializable_output_through_operate_keeps_the_result_serializable():
    """Through operate(): the opaque output becomes an error payload, so the
    enriched result, the snapshot and every response hash cleanly."""
    ran: list[str] = []
    b = Branch(tools=_tools(ran))

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        return parse_param.response_format.model_validate({"action_requests": batch("opaque")})

    out = await b.operate(instruction="x", actions=True, middle=middle)
    assert [r.output for r in out.action_responses][0::2] == [1, 2]
    assert out.action_responses[1].output["type"] == "ToolOutputError"
    json.loads(out.model_dump_json())
    assert len({hash(r) for r in out.action_responses}) == 3
