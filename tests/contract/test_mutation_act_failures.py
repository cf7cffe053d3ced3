"""What the governed ``act()`` path records when a request fails or is cut
short: the error response, the ``ActionRecord``, the log entry and the
``verbose_action`` log lines, each written out literally.

Real tool functions, gates and hooks; the public API only.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from lionops import ActionParam, Branch, HookPoint, act
from tests.helpers import ToolBox

pytestmark = pytest.mark.anyio


class Stop(BaseException):
    """A BaseException that is not an Exception (like KeyboardInterrupt)."""


def opaque(city: str) -> object:
    """A tool whose output does not serialize to JSON."""
    return object()


def failing(city: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"no weather for {city}")


def stopping(city: str) -> str:
    """A tool that raises a BaseException."""
    raise Stop(f"stop at {city}")


async def test_a_non_json_output_is_a_tool_failure_naming_the_serializer_error():
    branch = Branch(tools=[opaque])
    [response] = await act(branch, [{"function": "opaque", "arguments": {"city": "Oslo"}}],
                           ActionParam(suppress_errors=True))
    output = response.output
    assert output["type"] == "ToolOutputError"
    assert output["error"].startswith("output of 'opaque' is not JSON-serializable (object): ")
    assert "Unable to serialize unknown type" in output["error"]
    assert response.record.invoked is True and response.record.decision == "error"


@pytest.mark.parametrize("output", ["text", 3, 2.5, True, None, ["a"], {"k": 1}])
async def test_json_outputs_are_answered_unchanged(output):
    def echo(city: str) -> Any:
        """Echo a fixed output."""
        return output

    branch = Branch(tools=[echo])
    [response] = await act(branch, [{"function": "echo", "arguments": {"city": "x"}}], ActionParam())
    assert response.output == output
    assert response.record.decision == "allowed"


@pytest.mark.parametrize(("arguments", "error"), [
    ("{not json", "arguments are not a JSON object: '{not json'"),
    ("[1, 2]", "arguments must be a JSON object, got list: '[1, 2]'"),
    (7, "arguments must be a JSON object, got int: 7"),
])
async def test_undecodable_arguments_are_invalid_and_never_run(arguments, error):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [{"function": "search", "arguments": arguments}],
                           ActionParam(suppress_errors=True))
    assert box.total == 0
    assert response.output["type"] == "InvalidActionRequest"
    assert response.output["error"].startswith(error)
    assert response.record.decision == "invalid" and response.record.invoked is False


async def test_verbose_action_logs_a_failure_with_function_and_error(caplog):
    branch = Branch(tools=[failing])
    with caplog.at_level(logging.DEBUG, logger="lionops.act"):
        await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}},
                           {"function": "missing", "arguments": {}}],
                  ActionParam(suppress_errors=True, verbose_action=True))
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert sorted(errors) == [
        "Action failing failed: no weather for Oslo",
        "Action missing failed: unknown function 'missing'; registered tools: ['failing']",
    ]


async def test_verbose_action_logs_an_invocation(caplog):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    with caplog.at_level(logging.DEBUG, logger="lionops.act"):
        await act(branch, [{"function": "search", "arguments": {"q": "a"}}], ActionParam(verbose_action=True))
    messages = [r.getMessage() for r in caplog.records if r.name == "lionops.act"]
    assert messages[0] == "Invoking action search with {'q': 'a'}."
    assert messages[1].startswith("Action search invoked in ") and messages[1].endswith("s.")


async def test_quiet_action_logs_nothing(caplog):
    branch = Branch(tools=[failing])
    with caplog.at_level(logging.DEBUG, logger="lionops.act"):
        await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}},
                           {"function": "missing", "arguments": {}}], ActionParam(suppress_errors=True))
    assert [r for r in caplog.records if r.name == "lionops.act"] == []


def _only_record(records: list[Any]) -> Any:
    assert len(records) == 1
    return records[0]


async def test_a_tool_raising_a_base_exception_is_recorded_then_reraised():
    before = time.perf_counter()  # durations lie inside the call
    branch = Branch(tools=[stopping])
    records: list[Any] = []
    with pytest.raises(Stop, match="stop at Oslo"):
        await act(branch, [{"function": "stopping", "arguments": '{"city": "Oslo"}'}],
                  ActionParam(suppress_errors=True), records=records)
    rec = _only_record(records)
    assert rec.decision == "error"
    assert rec.reason == "tool raised Stop"
    assert rec.invoked is True
    assert rec.raw_arguments == {"city": "Oslo"}
    assert rec.arguments == {"city": "Oslo"}
    assert rec.error_type == "Stop"
    assert isinstance(rec.duration_s, float) and 0 <= rec.duration_s <= time.perf_counter() - before
    assert rec.output == {"error": "stop at Oslo", "type": "Stop",
                          "message": "Error invoking action 'stopping': stop at Oslo"}
    [entry] = list(branch.logs)
    content = dict(entry.content)
    content.pop("duration_s")
    assert entry.kind == "action_error"
    assert content == {
        "function": "stopping", "arguments": {"city": "Oslo"}, "index": 0, "decision": "error",
        "branch": branch.id, "stage": "error", "error": "stop at Oslo", "type": "Stop",
        "reason": "tool raised Stop", "invoked": True,
    }


def _stop(*args: Any) -> bool:
    raise Stop("stopped")


@pytest.mark.parametrize(("where", "reason"), [("gate", "gate raised Stop"), ("hook", "TOOL_PRE hook raised Stop")])
async def test_a_gate_or_pre_hook_raising_a_base_exception_is_recorded_uninvoked(where, reason):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    if where == "gate":
        branch.gate(_stop)
    else:
        branch.on(HookPoint.TOOL_PRE, _stop)
    records: list[Any] = []
    with pytest.raises(Stop):
        await act(branch, [{"function": "search", "arguments": {"q": "a"}}],
                  ActionParam(suppress_errors=True), records=records)
    assert box.total == 0
    rec = _only_record(records)
    assert (rec.decision, rec.reason, rec.invoked, rec.duration_s) == ("error", reason, False, None)
    assert rec.raw_arguments == {"q": "a"}
    assert rec.arguments == {"q": "a"}
    assert rec.output == {"error": "stopped", "type": "Stop",
                          "message": "Error invoking action 'search': stopped"}
    assert [m.role for m in branch.messages] == ["action_request", "action_response"]
