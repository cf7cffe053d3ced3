"""The records of the governed ``act()`` path, field by field: hook payloads,
event-log entries, action messages and error responses.

Every expected value is written out literally (not derived from the code), so
a dropped or renamed field, a swapped sender/recipient or a lost ``call_id``
fails here. Real tool functions, the public API only.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from lionops import ActionParam, Branch, HookPoint, act
from lionops.errors import RequestLimitError
from tests.helpers import ToolBox

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
    before = time.perf_counter()  # durations lie inside the call
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
    assert isinstance(duration, float) and 0 <= duration <= time.perf_counter() - before
    assert post == {
        "function": "get_weather", "arguments": "{'city': 'Paris'}", "index": 0, "decision": "allowed",
        "call_id": "c-1", "branch": branch.id, "output": "{'city': 'Paris', 'temp_c': 20}",
    }
    assert seen["error"] == []
    assert response.output == {"city": "Paris", "temp_c": 20}


async def test_hook_payload_of_a_failing_tool_names_every_field():
    before = time.perf_counter()  # durations lie inside the call
    branch = Branch(tools=[failing])
    seen = hooked(branch)
    [response] = await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}}],
                           ActionParam(suppress_errors=True))
    assert seen["post"] == []
    [error] = seen["error"]
    duration = error.pop("duration_s")
    assert isinstance(duration, float) and 0 <= duration <= time.perf_counter() - before
    assert error == {
        "function": "failing", "arguments": "{'city': 'Oslo'}", "index": 0, "decision": "error",
        "call_id": None, "branch": branch.id, "type": "RuntimeError", "error": "no weather for Oslo",
    }
    assert response.output == {
        "error": "no weather for Oslo", "type": "RuntimeError",
        "message": "Error invoking action 'failing': no weather for Oslo",
    }


async def test_a_failing_tool_is_logged_with_stage_error_type_and_invoked():
    before = time.perf_counter()  # durations lie inside the call
    branch = Branch(tools=[failing])
    await act(branch, [{"function": "failing", "arguments": {"city": "Oslo"}}], ActionParam(suppress_errors=True))
    [entry] = list(branch.logs)
    assert entry.kind == "action_error"
    content = dict(entry.content)
    duration = content.pop("duration_s")
    assert isinstance(duration, float) and 0 <= duration <= time.perf_counter() - before
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
    before = time.perf_counter()  # durations lie inside the call
    box = ToolBox()
    branch = Branch(tools=box.tools())
    await act(branch, [{"function": "get_weather", "arguments": {"city": "Rome"}, "call_id": "c-9"}],
              ActionParam())
    [entry] = list(branch.logs)
    assert entry.kind == "action"
    content = dict(entry.content)
    duration = content.pop("duration_s")
    assert isinstance(duration, float) and 0 <= duration <= time.perf_counter() - before
    assert content == {
        "function": "get_weather", "arguments": {"city": "Rome"}, "index": 0, "decision": "allowed",
        "branch": branch.id, "call_id": "c-9", "output": {"city": "Rome", "temp_c": 20},
    }


async def test_an_allowed_call_without_call_id_is_logged_field_by_field():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    await act(branch, [{"function": "search", "arguments": {"q": "x"}}], ActionParam())
    [entry] = list(branch.logs)
    assert entry.kind == "action"
    content = dict(entry.content)
    duration = content.pop("duration_s")
    assert type(duration) is float and duration >= 0
    assert list(content.items()) == [
        ("function", "search"), ("arguments", {"q": "x"}), ("index", 0), ("decision", "allowed"),
        ("branch", branch.id), ("output", ["x"]),
    ]
    assert list(entry.content)[-1] == "duration_s"


async def test_a_failed_or_denied_call_s_log_entry_carries_its_call_id():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    branch.gate(lambda inv: inv.function != "send_message")
    await act(branch, [
        {"function": "nope", "arguments": {}, "call_id": "c-1"},
        {"function": "send_message", "arguments": {"to": "a", "body": "b"}, "call_id": "c-2"},
    ], ActionParam(suppress_errors=True))
    rejected, denied = sorted(branch.logs, key=lambda e: e.content["index"])
    assert (rejected.kind, denied.kind) == ("action_error", "denied")
    assert list(rejected.content)[:6] == ["function", "arguments", "index", "decision", "branch", "call_id"]
    assert rejected.content["call_id"] == "c-1" and rejected.content["stage"] == "rejected"
    assert list(denied.content.items()) == [
        ("function", "send_message"), ("arguments", {"to": "a", "body": "b"}), ("index", 1),
        ("decision", "denied"), ("branch", branch.id), ("call_id", "c-2"),
        ("reason", "denied by gate test_a_failed_or_denied_call_s_log_entry_carries_its_call_id.<locals>.<lambda>"),
    ]


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


async def test_the_gate_sees_every_field_of_the_invocation():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    asked: list[Any] = []

    def gate(inv: Any) -> bool:
        asked.append(inv)
        return True

    branch.gate(gate)
    await act(branch, [{"function": "search", "arguments": {"q": "a"}},
                       {"function": "get_weather", "arguments": '{"city": "Rome"}', "call_id": "c-2"}],
              ActionParam(strategy="sequential"), offered=["search", "get_weather"])
    got = [(i.function, dict(i.arguments), i.branch_id, i.index, i.offered, i.raw_arguments, i.call_id)
           for i in asked]
    assert got == [
        ("search", {"q": "a"}, branch.id, 0, frozenset({"search", "get_weather"}), {"q": "a"}, None),
        ("get_weather", {"city": "Rome"}, branch.id, 1, frozenset({"search", "get_weather"}), {"city": "Rome"},
         "c-2"),
    ]
    assert [i.tool.name for i in asked] == ["search", "get_weather"]


async def test_a_tool_registered_anew_since_it_was_offered_never_runs_and_keeps_its_arguments():
    first, second = ToolBox(), ToolBox()
    branch = Branch(tools=first.tools())
    offered = branch.acts.select(["search"])
    branch.register_tools(second.tools()[2], update=True)
    [response] = await act(branch, [{"function": "search", "arguments": '{"q": "a"}'}],
                           ActionParam(suppress_errors=True), offered=offered)
    assert first.total == 0 and second.total == 0
    rec = response.record
    assert (rec.decision, rec.raw_arguments, rec.invoked) == ("not_offered", {"q": "a"}, False)
    assert rec.output["type"] == "ToolNotOfferedError"
