"""The pieces ``act()`` builds per request: both messages of a request written
at once (``MessageLog.add_action_exchange``, through a subclass's own ``add``),
and the frozen records whose ``__init__`` sets their slots directly
(``ActionRecord``, ``ToolInvocation``: same parameters, defaults, freezing)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from lionops import Branch, act
from lionops.messages import Message, MessageLog
from lionops.models import ActionRecord
from lionops.params import ActionParam
from lionops.tools import ToolInvocation


def _without_stamps(log: MessageLog) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.to_dict().items() if k not in ("id", "timestamp")} for m in log]


def test_an_exchange_appends_what_a_request_then_a_response_append() -> None:
    meta = {"index": 0, "decision": "allowed", "call_id": "c1"}
    one, two = MessageLog(), MessageLog()
    one.add_action_request("add", {"x": 1}, sender="b", recipient="add", metadata=dict(meta))
    one.add_action_response("add", {"x": 1}, 2, sender="add", recipient="b", metadata=dict(meta))
    request, response = two.add_action_exchange("add", {"x": 1}, 2, sender="b", recipient="add", metadata=meta)
    assert _without_stamps(two) == _without_stamps(one)
    assert list(two) == [request, response]
    assert response.id == request.id + 1
    assert response.metadata is meta and request.metadata == meta and request.metadata is not meta
    for message in (request, response):  # every field of the dataclass is set
        values = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
        assert type(values["timestamp"]) is float and type(values["id"]) is int
        assert message == Message(**values)


def test_an_exchange_goes_through_a_subclass_s_own_add() -> None:
    class Numbered(MessageLog):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def add(self, role: Any, content: Any, **kw: Any) -> Any:
            self.seen.append(role)
            kw["id"] = 100 + len(self.seen)
            return super().add(role, content, **kw)

    log = Numbered()
    request, response = log.add_action_exchange("f", {}, None, sender="b", recipient="f", metadata={})
    assert log.seen == ["action_request", "action_response"]
    assert (request.id, response.id) == (101, 102)
    assert (request.sender, request.recipient, response.sender, response.recipient) == ("b", "f", "f", "b")


@pytest.mark.anyio
async def test_act_writes_its_messages_through_the_branch_log_s_own_add() -> None:
    class Counting(MessageLog):
        roles: list[str]

        def add(self, role: Any, content: Any, **kw: Any) -> Any:
            self.roles = [*getattr(self, "roles", []), role]
            return super().add(role, content, **kw)

    def add(x: int, y: int) -> int:
        return x + y

    branch = Branch(tools=[add])
    branch.messages = Counting()
    requests = [{"function": "add", "arguments": {"x": 1, "y": 2}}, {"function": "add", "arguments": {"x": 3}}]
    out = await act(branch, requests, ActionParam(strategy="concurrent", suppress_errors=True))
    assert [r.output for r in out][0] == 3
    assert branch.messages.roles == ["action_request", "action_response"] * 2
    assert [m.metadata["decision"] for m in branch.messages] == ["allowed", "allowed", "rejected", "rejected"]


@pytest.mark.parametrize("cls", [ActionRecord, ToolInvocation])
def test_a_record_keeps_its_dataclass_parameters_defaults_and_freezing(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default for f in fields]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"


def test_a_record_made_positionally_or_by_keyword_is_the_same_frozen_value() -> None:
    rec = ActionRecord(2, "add", {"x": 1}, {"x": 1}, "allowed", None, 3, None, 0.5, "c", True)
    same = ActionRecord(index=2, function="add", raw_arguments={"x": 1}, arguments={"x": 1}, decision="allowed",
                        output=3, duration_s=0.5, call_id="c", invoked=True)
    assert rec == same and (rec.reason, rec.error_type) == (None, None)
    assert ActionRecord(0, "f", {}, None, "invalid").invoked is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.decision = "denied"  # type: ignore[misc]
    assert dataclasses.replace(rec, index=5).index == 5
    assert pickle.loads(pickle.dumps(rec)) == rec and copy.deepcopy(rec) == rec
    with pytest.raises(TypeError, match="missing 3 required positional arguments"):
        ActionRecord(0, "f")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        ActionRecord(0, "f", {}, None, "allowed", bogus=1)  # type: ignore[call-arg]
    invocation = ToolInvocation("f", {"a": 1})
    assert (invocation.tool, invocation.offered, invocation.call_id) == (None, frozenset(), None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        invocation.function = "g"  # type: ignore[misc]
