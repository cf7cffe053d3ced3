"""The records of the governed ``act()`` path, field by field: hook payloads,
event-log entries, action messages and error responses.

Every expected value is written out literally (not derived from the code), so
a dropped or renamed field, a swapped sender/recipient or a lost ``call_id``
fails here. Real tool functions, the public API only.
"""

from __future__ import annotations

from typing import Any

import pytest

from lionops import ActionParam, Branch, HookPoint, act
from lionops.errors import RequestLimitError

from .helpers import ToolBox

pytestmark = pytest.mark.anyio


def hooked(branch: Branch) -> dict[str, list[dict[str, Any]]]:
    seen: dict[str, list[dict[str, Any]]] = {"pre": [], "post": [], "error": []}
    branch.on(HookPoint.TOOL_PRE, seen["pre"].append)
    branch.on(HookPoint.TOOL_POST, seen["post"].append)
    branch.on(HookPoint.TOOL_ERROR, seen["error"].append)
    return seen


def failing(city: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"no weather for {city}")


async def test_hook_payloads_of_an_allowed_call_name_every_field():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    seen = hooked(branch)
    request = {"function": "get_weather", "arguments": {"city": "Paris"}, "call_id": "c-1"}
    [response] = await act(branch, [request], ActionParam())
    assert box.calls == {"get_weather": 1}
    assert seen["pre"] == [{
        "function": "get_weather", "arguments": "{'city': 'Paris'}", "index": 0,
        "call_id": "c-1", "branch": branch.id,
    }]
    [post] = seen["post"]
    duration = post.pop("duration_s")
    assert isinstance(duration, float) and duration >= 0
    assert post == {
        "function": "get_weather", "arguments": "{'city': 'Paris'}", "index": 0, "decision": "allowed",
        "call_id": "c-1", "branch": branch.id, "output": "{'city': 'Paris', 'temp_c': 20}",
    }
    assert seen["error"] == []
    assert response.output == {"city": "Paris", "temp_c": 20}


async def test_hook_payload_of_a_failing_tool_names_every_field():
    branch = Branch(tools=[failing])
    seen = hooked(branch)
    [response] = await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}}],
                           ActionParam(suppress_errors=True))
    assert seen["post"] == []
    [error] = seen["error"]
    duration = error.pop("duration_s")
    assert isinstance(duration, float) and duration >= 0
    assert error == {
        "function": "failing", "arguments": "{'city': 'Oslo'}", "index": 0, "decision": "error",
        "call_id": None, "branch": branch.id, "type": "RuntimeError", "error": "no weather for Oslo",
    }
    assert response.output == {
        "error": "no weather for Oslo", "type": "RuntimeError",
        "message": "Error invoking action 'failing': no weather for Oslo",
    }


async def test_a_failing_tool_is_logged_with_stage_error_type_and_invoked():
    branch = Branch(tools=[failing])
    await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}}], ActionParam(suppress_errors=True))
    [entry] = list(branch.logs)
    assert entry.kind == "action_error"
    content = dict(entry.content)
    duration = content.pop("duration_s")
    assert isinstance(duration, float) and duration >= 0
    assert content == {
        "function": "failing", "arguments": {"city": "Oslo"}, "index": 0, "decision": "error",
        "branch": branch.id, "stage": "error", "error": "no weather for Oslo", "type": "RuntimeError",
        "reason": "no weather for Oslo", "invoked": True,
    }


async def test_a_failing_tool_without_suppression_raises_the_original_error_after_recording():
    branch = Branch(tools=[failing])
    seen = hooked(branch)
    with pytest.raises(RuntimeError, match="no weather for Oslo"):
        await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}}],
                  ActionParam(suppress_errors=False))
    assert [e["type"] for e in seen["error"]] == ["RuntimeError"]
    assert [m.role for m in branch.messages] == ["action_request", "action_response"]


async def test_an_allowed_call_is_logged_with_output_duration_and_call_id():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    await act(branch, [{"function": "get_weather", "arguments": {"city": "Rome"}, "call_id": "c-9"}],
              ActionParam())
    [entry] = list(branch.logs)
    assert entry.kind == "action"
    content = dict(entry.content)
    duration = content.pop("duration_s")
    assert isinstance(duration, float) and duration >= 0
    assert content == {
        "function": "get_weather", "arguments": {"city": "Rome"}, "index": 0, "decision": "allowed",
        "branch": branch.id, "call_id": "c-9", "output": {"city": "Rome", "temp_c": 20},
    }


async def test_action_messages_name_sender_recipient_and_metadata():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    await act(branch, [
        {"function": "get_weather", "arguments": {"city": "Rome"}, "call_id": "c-1"},
        {"function": "search", "arguments": {"q": "x"}},
    ], ActionParam())
    got = [(m.role, m.content, m.sender, m.recipient, m.metadata) for m in branch.messages]
    assert got == [
        ("action_request", {"function": "get_weather", "arguments": {"city": "Rome"}}, branch.id, "get_weather",
         {"index": 0, "decision": "allowed", "call_id": "c-1"}),
        ("action_response", {"function": "get_weather", "arguments": {"city": "Rome"},
                             "output": {"city": "Rome", "temp_c": 20}}, "get_weather", branch.id,
         {"index": 0, "decision": "allowed", "call_id": "c-1"}),
        ("action_request", {"function": "search", "arguments": {"q": "x"}}, branch.id, "search",
         {"index": 1, "decision": "allowed"}),
        ("action_response", {"function": "search", "arguments": {"q": "x"}, "output": ["x"]}, "search",
         branch.id, {"index": 1, "decision": "allowed"}),
    ]


async def test_a_denied_call_is_logged_with_its_reason_and_emits_no_hook():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    seen = hooked(branch)
    branch.gate(lambda inv: False)
    [response] = await act(branch, [{"function": "send_message", "arguments": {"to": "a", "body": "b"}}],
                           ActionParam())
    assert box.total == 0
    assert seen == {"pre": [], "post": [], "error": []}
    assert response.output == {"error": "denied by governance gate", "function": "send_message"}
    denied = [e for e in branch.logs if e.kind == "denied"]
    assert len(denied) == 1
    content = dict(denied[0].content)
    assert set(content) == {"function", "arguments", "index", "decision", "branch", "reason"}
    assert content["decision"] == "denied"
    assert content["function"] == "send_message"
    assert content["arguments"] == {"to": "a", "body": "b"}


async def test_requests_past_the_cap_are_recorded_and_never_run():
    box = ToolBox()
    branch = Branch(tools=box.tools(), max_requests=1)
    responses = await act(branch, [
        {"function": "search", "arguments": {"q": "a"}},
        {"function": "search", "arguments": {"q": "b"}},
        {"function": "search", "arguments": {"q": "c"}},
    ], ActionParam(suppress_errors=True))
    assert box.args == [("search", {"q": "a"})]
    assert [r.output for r in responses[1:]] == [
        {"error": "request 1 is past the cap of 1 action requests per call; not run", "type": "RequestLimitError",
         "message": "Error invoking action 'search': request 1 is past the cap of 1 action requests per call;"
                    " not run"},
        {"error": "request 2 is past the cap of 1 action requests per call; not run", "type": "RequestLimitError",
         "message": "Error invoking action 'search': request 2 is past the cap of 1 action requests per call;"
                    " not run"},
    ]
    over = [dict(e.content) for e in branch.logs if e.content["index"] > 0]
    assert [(c["index"], c["decision"], c["stage"], c["invoked"]) for c in over] == [
        (1, "rejected", "rejected", False), (2, "rejected", "rejected", False)]


async def test_requests_past_the_cap_without_suppression_raise_and_run_nothing():
    box = ToolBox()
    branch = Branch(tools=box.tools(), max_requests=1)
    with pytest.raises(RequestLimitError, match="request 1 is past the cap of 1"):
        await act(branch, [
            {"function": "search", "arguments": {"q": "a"}},
            {"function": "search", "arguments": {"q": "b"}},
        ], ActionParam(suppress_errors=False))
    assert box.total == 0


@pytest.mark.parametrize("strategy", ["sequential", "concurrent"])
async def test_records_are_appended_in_request_order(strategy):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    records: list[Any] = []
    responses = await act(branch, [
        {"function": "search", "arguments": {"q": "a"}},
        {"function": "nope", "arguments": {}},
        {"function": "search", "arguments": {"q": "b"}},
    ], ActionParam(strategy=strategy, suppress_errors=True), records=records)
    assert [(r.index, r.function, r.decision, r.invoked) for r in records] == [
        (0, "search", "allowed", True), (1, "nope", "rejected", False), (2, "search", "allowed", True)]
    assert [r.output for r in responses] == [["a"], records[1].output, ["b"]]
    assert records[1].output["type"] == "UnknownToolError"
