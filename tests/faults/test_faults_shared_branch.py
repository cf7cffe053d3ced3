"""Shared branch: many concurrent operate() calls on one Branch lose
no message, no log entry and no trace; each trace stays whole and carries
only its own facts, also when some of the calls are cancelled or fail."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from lionops import Branch
from lionops.trace import annotate

pytestmark = pytest.mark.anyio

CALLS = 60


def shared_branch() -> Branch:
    async def ok(tag: str) -> str:
        """Yields, then answers."""
        await anyio.sleep(0)
        return tag

    def boom(tag: str) -> str:
        """Fails."""
        raise RuntimeError(tag)

    def secret(tag: str) -> str:
        """Denied by the gate."""
        return tag

    b = Branch(tools=[ok, boom, secret], system="shared")

    async def gate(inv: Any) -> bool:
        await anyio.sleep(0)
        return inv.function != "secret"

    b.gate(gate)
    return b


def middle_for(i: int, kind: str):
    tag = f"c{i}"

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        annotate(tag=tag)
        branch.messages.add("user", instruction)
        await anyio.sleep(0)
        if kind == "hang":
            await anyio.sleep_forever()
        if kind == "adapter_error":
            raise ConnectionError(tag)
        branch.messages.add("assistant", tag)
        return {"action_requests": [{"function": f, "arguments": {"tag": tag}} for f in ("ok", "boom", "secret")]}

    return middle


def kind_of(i: int) -> str:
    return {0: "hang", 1: "adapter_error"}.get(i % 6, "ok")


async def test_concurrent_operates_on_one_branch_lose_nothing():
    b = shared_branch()
    sunk: list[Any] = []
    b.logs.subscribe(sunk.append)
    results: dict[int, Any] = {}
    scopes: dict[int, anyio.CancelScope] = {}
    arrived = {"n": 0}
    all_in = anyio.Event()

    async def call(i: int) -> None:
        with anyio.CancelScope() as scope:
            scopes[i] = scope
            try:
                results[i] = await b.operate(
                    instruction=f"c{i}", actions=True, middle=middle_for(i, kind_of(i)),
                    action_strategy="sequential" if i % 2 else "concurrent")
            except ConnectionError as exc:
                results[i] = exc
            finally:
                arrived["n"] += 1
                if arrived["n"] == CALLS - CALLS // 6:
                    all_in.set()

    with anyio.fail_after(20):  # safety net only
        async with anyio.create_task_group() as tg:
            for i in range(CALLS):
                tg.start_soon(call, i)
            await all_in.wait()  # every call that can finish has finished
            for i, scope in scopes.items():
                if kind_of(i) == "hang":
                    scope.cancel()

    # one whole trace per call, each with its own facts
    assert len(b.traces) == CALLS
    by_tag = {t.meta["tag"]: t for t in b.traces}
    assert len(by_tag) == CALLS
    for i in range(CALLS):
        t = by_tag[f"c{i}"]
        assert t.states[0] == "prepare" and t.states[-1] in ("returned", "raised")
        if kind_of(i) == "ok":
            assert t.exit == "enriched" and t.states[-3:] == ["act", "enrich", "returned"]
            outputs = [r.output for r in results[i]["action_responses"]]
            assert outputs[0] == f"c{i}" and outputs[1]["error"] == f"c{i}" and "denied" in outputs[2]["error"]
        else:
            assert t.exit == "failed" and t.states[-2:] == ["adapter", "raised"]
            assert scopes[i].cancelled_caught == (kind_of(i) == "hang")

    # no message lost: every call's messages are there, once
    roles = Counter((m.role, _tag(m)) for m in b.messages)
    for i in range(CALLS):
        tag = f"c{i}"
        expected = 1 if kind_of(i) == "ok" else 0
        assert roles[("user", tag)] == 1
        assert roles[("assistant", tag)] == expected
        assert roles[("action_request", tag)] == roles[("action_response", tag)] == 3 * expected
    assert len(b.messages.by_role("system")) == 1

    # no log entry lost, and the sink saw every one, in order
    ok_calls = sum(kind_of(i) == "ok" for i in range(CALLS))
    kinds = Counter(e.kind for e in b.logs)
    assert kinds == {"action": ok_calls, "action_error": ok_calls, "denied": ok_calls}
    assert sunk == list(b.logs)


def _tag(message: Any) -> str | None:
    content = message.content
    if isinstance(content, str):
        return content
    return content.get("arguments", {}).get("tag")
