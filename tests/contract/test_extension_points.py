"""Every public extension point of a Branch that docs/governance.md names is
honoured through ``operate()`` (loopback OpenAI-compatible server, real tools)
on the branch, on its fork and on a fork of the fork (ADR-0022 D4)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from lionops import Branch, HookPoint
from lionops.testing import OpenAIServer, completion, tool_call
from tests.openai_server import make_model

pytestmark = pytest.mark.anyio


@dataclass
class Seen:
    ran: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)


def _tools(seen: Seen) -> list[Callable[..., Any]]:
    def read_file(path: str) -> str:
        """Read a file."""
        seen.ran.append("read_file")
        return "text"

    def delete_file(path: str) -> str:
        """Delete a file."""
        seen.ran.append("delete_file")
        return "deleted"

    def explode(path: str) -> str:
        """Fail."""
        seen.ran.append("explode")
        raise RuntimeError("boom")

    return [read_file, delete_file, explode]


def _no_delete(seen: Seen) -> Callable[[Any], bool]:
    def check(invocation: Any) -> bool:
        seen.asked.append(invocation.function)
        return invocation.function != "delete_file"
    return check


class Audited(Branch):
    """A policy held by a subclass: its constructor takes what Branch's does not."""

    def __init__(self, seen: Seen, *, denied: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen, self.denied = seen, denied

    async def authorize(self, invocation: Any) -> bool:
        self.seen.asked.append(invocation.function)
        return invocation.function != self.denied and await super().authorize(invocation)


class Tagged(Branch):
    async def operate_traced(self, **kw: Any) -> Any:
        traced = await super().operate_traced(**kw)
        traced.trace.meta["tagged"] = True
        return traced


class Provider:
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    def writeback(self, response: Any) -> None:
        self.seen.written.append(response.function)


def _gate(seen: Seen, model: Any) -> Branch:
    branch = Branch(chat_model=model, tools=_tools(seen))
    branch.gate(_no_delete(seen))
    return branch


def _blocking_gate(seen: Seen, model: Any) -> Branch:
    branch = Branch(chat_model=model, tools=_tools(seen))
    branch.gate(_no_delete(seen), blocking=True)
    return branch


def _subclass_authorize(seen: Seen, model: Any) -> Branch:
    return Audited(seen, denied="delete_file", chat_model=model, tools=_tools(seen))


def _instance_authorize(seen: Seen, model: Any) -> Branch:
    branch = Branch(chat_model=model, tools=_tools(seen))
    branch.authorize = _no_delete(seen)  # type: ignore[method-assign]
    return branch


def _hooks(seen: Seen, model: Any) -> Branch:
    branch = Branch(chat_model=model, tools=_tools(seen))
    for point in (HookPoint.TOOL_PRE, HookPoint.TOOL_POST, HookPoint.TOOL_ERROR):
        branch.on(point, lambda payload, p=point: seen.hooks.append(f"{p.value}:{payload['function']}"))
    return branch


def _provider(seen: Seen, model: Any) -> Branch:
    branch = Branch(chat_model=model, tools=_tools(seen))
    branch.add_context_provider(Provider(seen))
    return branch


def _limits(seen: Seen, model: Any) -> Branch:
    return Branch(chat_model=model, tools=_tools(seen), max_requests=1, gate_timeout=7, observer_timeout=8,
                  max_messages=4, max_traces=1, system="Be brief.", user="ana", engine="transitions")


def _operate_traced(seen: Seen, model: Any) -> Branch:
    return Tagged(chat_model=model, tools=_tools(seen))


def _denies_delete(branch: Branch, seen: Seen) -> None:
    assert sorted(seen.ran) == ["explode", "read_file"]
    assert "delete_file" in seen.asked
    assert [a.decision for a in branch.traces[-1].actions][:2] == ["allowed", "denied"]


def _hooks_heard(branch: Branch, seen: Seen) -> None:
    assert sorted(seen.hooks) == sorted(["tool_pre:read_file", "tool_post:read_file", "tool_pre:delete_file",
                                         "tool_post:delete_file", "tool_pre:explode", "tool_error:explode"])


def _provider_heard(branch: Branch, seen: Seen) -> None:
    assert sorted(seen.written) == ["delete_file", "explode", "read_file"]


def _limits_kept(branch: Branch, seen: Seen) -> None:
    assert (branch.max_requests, branch.gate_timeout, branch.observer_timeout) == (1, 7, 8)
    assert (branch.max_messages, branch.max_traces, branch.user, branch.engine) == (4, 1, "ana", "transitions")
    assert seen.ran == ["read_file"]  # the other two are past max_requests
    assert [a.decision for a in branch.traces[-1].actions] == ["allowed", "rejected", "rejected"]
    assert branch.messages[0].role == "system" and branch.messages[0].content == "Be brief."


def _tagged(branch: Branch, seen: Seen) -> None:
    assert branch.traces[-1].meta.get("tagged") is True


POINTS: dict[str, tuple[Callable[[Seen, Any], Branch], Callable[[Branch, Seen], None]]] = {
    "gate": (_gate, _denies_delete),
    "gate(blocking=True)": (_blocking_gate, _denies_delete),
    "subclass authorize()": (_subclass_authorize, _denies_delete),
    "authorize set on the branch": (_instance_authorize, _denies_delete),
    "on(TOOL_PRE/TOOL_POST/TOOL_ERROR)": (_hooks, _hooks_heard),
    "add_context_provider": (_provider, _provider_heard),
    "limits, system, user, engine": (_limits, _limits_kept),
    "subclass operate_traced()": (_operate_traced, _tagged),
}


@pytest.mark.parametrize("point", list(POINTS))
async def test_every_extension_point_holds_on_the_branch_and_its_forks(point: str) -> None:
    build, probe = POINTS[point]
    answer = completion(None, tool_calls=[tool_call("read_file", {"path": "a"}),
                                          tool_call("delete_file", {"path": "/etc/passwd"}),
                                          tool_call("explode", {"path": "b"})])
    with OpenAIServer([answer, answer, answer, answer]) as server:
        model = make_model(server)
        seen = Seen()
        branch = build(seen, model)
        fork = branch.fork(name="fork")
        branches = [branch, fork, fork.fork(messages=True), branch.fork(messages=True)]
        try:
            for b in branches:
                assert type(b) is type(branch)
                seen.__init__()  # type: ignore[misc]
                await b.operate(instruction="tidy up", actions=True)
                probe(b, seen)
        finally:
            await model.aclose()
    assert len({b.id for b in branches}) == len(branches)
    assert fork.name == "fork" and all(len(b.traces) == 1 for b in branches)
