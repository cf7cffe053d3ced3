"""The act path's shortcuts, each pinned against the general path it stands for:
an allowed record's log entry (``keep_allowed``, written out), an event-log
entry filled field by field (against ``LogEntry``'s own ``__init__``), the usual
response filled directly (against the validated model), a request's tuple made
without its ``__new__``, the output check skipped for plain scalars, and the
messages of a batch written in request order whatever order its requests end in."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import anyio
import pytest

from lionops import ActionParam, Branch, act
from lionops.messages import EventLog, LogEntry
from lionops.models import ActionRecord, ActionResponseModel
from lionops.pipeline import act as act_module


def _batch(branch: Branch) -> Any:
    return act_module._Batch(branch, ActionParam(), {})


@pytest.mark.parametrize("call_id", [None, "call-7"])
def test_an_allowed_record_is_logged_with_its_output_and_duration(call_id: str | None) -> None:
    branch = Branch()
    rec = ActionRecord(3, "add", {"x": 1}, {"x": 1}, "allowed", None, 2, None, 0.25, call_id, True)
    batch = _batch(branch)
    assert batch.keep_allowed(rec) is rec
    [entry] = list(branch.logs)
    assert entry.kind == "action" and entry.record is rec
    assert list(entry.content.items()) == [  # the keys in this order
        ("function", "add"), ("arguments", {"x": 1}), ("index", 3), ("decision", "allowed"),
        ("branch", branch.id), *([("call_id", call_id)] if call_id is not None else []),
        ("output", 2), ("duration_s", 0.25),
    ]
    assert batch.records == {3: rec} and batch.errors == {}


def test_the_general_keep_takes_every_decision_but_allowed() -> None:
    rec = ActionRecord(0, "add", {}, {}, "allowed", None, 2, None, 0.25, None, True)
    with pytest.raises(KeyError):
        _batch(Branch()).keep(rec)


def test_an_event_log_entry_is_filled_as_its_dataclass_init_fills_it() -> None:
    log, seen = EventLog(), []
    log.subscribe(seen.append)
    rec = ActionRecord(0, "f", {}, {}, "allowed")
    entry = log.log("action", {"a": 1}, record=rec)
    plain = log.log("note", {"b": 2})
    for made, kind, content, record in ((entry, "action", {"a": 1}, rec), (plain, "note", {"b": 2}, None)):
        values = {f.name: getattr(made, f.name) for f in dataclasses.fields(made)}
        assert type(made) is LogEntry and type(values["timestamp"]) is float
        assert (values["kind"], values["content"], values["record"]) == (kind, content, record)
        assert made == LogEntry(**values) and made.to_dict() == LogEntry(**values).to_dict()
    assert list(log) == [entry, plain] and seen == [entry, plain]


@pytest.mark.parametrize("arguments", [{"x": 1, "y": [1, 2]}, {}, {"s": "t"}])
def test_the_usual_response_is_the_model_validation_makes(arguments: dict[str, Any]) -> None:
    rec = ActionRecord(0, "add", arguments, arguments, "allowed", None, {"out": 1})
    fast = rec.response()
    validated = ActionResponseModel(function="add", arguments=arguments, output={"out": 1})
    assert type(fast) is ActionResponseModel
    assert fast == validated and fast.model_dump() == validated.model_dump()
    assert fast.model_fields_set == validated.model_fields_set
    assert fast.model_extra == validated.model_extra and fast.__pydantic_private__ == {"_record": rec}
    assert fast.record is rec and fast.arguments == arguments and fast.arguments is not arguments
    assert fast.output is rec.output
    assert fast.model_dump_json() == validated.model_dump_json()


def test_a_normalized_request_is_the_named_tuple_its_constructor_makes() -> None:
    req = act_module._normalize(2, {"function": "f", "arguments": {"a": 1}, "call_id": "c"})
    assert type(req) is act_module._Request
    assert req == act_module._Request(2, "f", {"a": 1}, None, "c")
    assert (req.index, req.function, req.arguments, req.invalid, req.call_id) == (2, "f", {"a": 1}, None, "c")
    bare = act_module._normalize(0, {"function": "f", "arguments": {}, "call_id": 5})
    assert bare.call_id is None and bare == act_module._Request(0, "f", {}, None)


class Level(enum.IntEnum):
    LOW = 1


class Text(str):
    pass


@pytest.mark.anyio
@pytest.mark.parametrize("value", [None, 0, 1.5, "", "word", True, False, Level.LOW, Text("sub")])
async def test_a_scalar_output_is_recorded_as_the_tool_returned_it(value: Any) -> None:
    def give() -> Any:
        return value

    branch = Branch(tools=[give])
    out = await act(branch, [{"function": "give", "arguments": {}}], ActionParam(suppress_errors=False))
    assert out[0] is not None and out[0].record is not None
    assert out[0].record.decision == "allowed" and out[0].record.output is value
    assert out[0].output == value and type(out[0].output) is type(value)


@pytest.mark.anyio
async def test_an_opaque_output_is_still_a_tool_failure() -> None:
    def opaque() -> Any:
        return object()

    branch = Branch(tools=[opaque])
    out = await act(branch, [{"function": "opaque", "arguments": {}}], ActionParam(suppress_errors=True))
    assert out[0] is not None and out[0].record is not None
    assert out[0].record.decision == "error" and out[0].record.error_type == "ToolOutputError"


@pytest.mark.anyio
async def test_messages_follow_request_order_when_requests_end_out_of_order() -> None:
    ended: list[str] = []
    first_may_end = anyio.Event()

    async def first(tag: str) -> str:
        await first_may_end.wait()
        ended.append(tag)
        return tag

    def second(tag: str) -> str:
        ended.append(tag)
        return tag

    async def third(tag: str) -> str:
        ended.append(tag)
        first_may_end.set()
        return tag

    branch = Branch(tools=[first, second, third])
    records: list[ActionRecord] = []
    requests = [{"function": name, "arguments": {"tag": name}, "call_id": f"c{i}"}
                for i, name in enumerate(["first", "second", "third"])]
    out = await act(branch, requests, ActionParam(strategy="concurrent"), records=records)
    assert ended[0] != "first" and ended[-1] == "first"  # the first request ended last
    assert [r.output for r in out if r is not None] == ["first", "second", "third"]
    assert [r.index for r in records] == [0, 1, 2]
    assert [(m.role, m.content["function"], m.metadata) for m in branch.messages] == [
        (role, name, {"index": i, "decision": "allowed", "call_id": f"c{i}"})
        for i, name in enumerate(["first", "second", "third"])
        for role in ("action_request", "action_response")
    ]
    assert [(m.sender, m.recipient) for m in branch.messages] == [
        (sender, recipient) for name in ["first", "second", "third"]
        for sender, recipient in ((branch.id, name), (name, branch.id))
    ]
    # the log took the records as they ended
    assert [e.content["function"] for e in branch.logs.of_kind("action")] == ended
