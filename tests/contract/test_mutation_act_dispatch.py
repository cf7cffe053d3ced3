"""The governed ``act()`` path around dispatch: the runtime's check before
dispatch sees every request and what it raises runs nothing; an observer is
told the branch of each tool call; an invalid mark is named in words; a gate
that times out is logged with its reason. Real tool functions, the public API.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionops import ActionParam, Branch, act
from lionops.observability.observe import add_observer, remove_observer
from lionops.runtime import use_runtime
from lionops.testing import completion
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


class Refused(Exception):
    pass


@pytest.mark.parametrize("strategy", ["sequential", "concurrent"])
async def test_the_check_before_dispatch_sees_each_request_and_can_stop_them_all(strategy):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    seen: list[Any] = []

    def check(requests: list[Any]) -> None:
        seen.append(requests)
        raise Refused("not in the recording")

    with use_runtime(before_dispatch=check), pytest.raises(Refused):
        await act(branch, [{"function": "search", "arguments": {"q": "a"}},
                           {"function": "search", "arguments": {"q": "b"}, "invalid": "cut"}],
                  ActionParam(strategy=strategy))
    assert seen == [[(0, "search", {"q": "a"}, None), (1, "search", {"q": "b"}, "cut")]]
    assert box.total == 0 and branch.logs.of_kind("action") == []


async def test_a_check_before_dispatch_that_returns_lets_the_requests_run():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    seen: list[Any] = []
    with use_runtime(before_dispatch=seen.append):
        out = await act(branch, [{"function": "search", "arguments": {"q": "a"}}], ActionParam())
    assert seen == [[(0, "search", {"q": "a"}, None)]]
    assert [r.output for r in out] == [["a"]]


class ToolWatcher:
    """An observer that keeps the branch and function of each tool call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any]] = []

    def tool_start(self, branch: Any, request: Any) -> None:
        self.calls.append((branch, request.function))

    def tool_end(self, handle: Any, result: Any, error: BaseException | None) -> None:
        return None


@pytest.mark.parametrize("strategy", ["sequential", "concurrent"])
async def test_an_observer_is_told_the_branch_of_each_tool_call(strategy):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    watcher = ToolWatcher()
    add_observer(watcher)
    try:
        await act(branch, [{"function": "search", "arguments": {"q": "a"}}], ActionParam(strategy=strategy))
    finally:
        remove_observer(watcher)
    assert watcher.calls == [(branch, "search")]


@pytest.mark.parametrize(("mark", "reason"), [
    (True, "request marked invalid (bool True)"),
    (1, "request marked invalid (int 1)"),
    ("  ", "request marked invalid (str '  ')"),
    ("x" * 200, "x" * 200),
    (["y" * 200], "request marked invalid (list ['" + "y" * 78 + ")"),
])
async def test_an_invalid_mark_is_named_in_words_and_runs_nothing(mark, reason):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    (out,) = await act(branch, [{"function": "search", "arguments": {"q": "a"}, "invalid": mark}],
                       ActionParam(suppress_errors=True))
    assert box.total == 0
    assert out.record.decision == "invalid" and out.record.reason == reason
    assert out.record.error_type == "InvalidActionRequest"


async def test_a_gate_that_times_out_is_logged_with_its_reason_as_the_error():
    box = ToolBox()
    branch = Branch(tools=box.tools(), gate_timeout=0.05)

    async def hangs(inv: Any) -> bool:
        await anyio.sleep_forever()
        return True

    branch.gate(hangs)
    with anyio.fail_after(10):
        (out,) = await branch.act([{"function": "search", "arguments": {"q": "a"}}])
    assert box.total == 0 and out.record.decision == "timed_out"
    (entry,) = [e for e in branch.logs.of_kind("action_error") if e.content.get("stage") == "timed_out"]
    assert entry.content["error"] == out.record.reason and "within 0.05s" in entry.content["error"]


class Uncopyable(float):
    """A number the argument model converts, but that refuses to be copied as given."""

    def __deepcopy__(self, memo: Any) -> Any:
        raise RuntimeError("no copy")


async def test_raw_arguments_that_cannot_be_copied_are_rejected_under_the_tool_name():
    ran: list[int] = []

    def add(x: int) -> int:
        """Add one."""
        ran.append(x)
        return x + 1

    branch = Branch(tools=[add])
    (out,) = await branch.act([{"function": "add", "arguments": {"x": Uncopyable(3.0)}}])
    assert ran == [] and out.record.decision == "rejected"
    assert out.output["error"] == "invalid arguments for 'add': arguments cannot be copied (RuntimeError)"


class OwnRequest(BaseModel):
    """A caller's own request model: it declares the two fields and no mark."""

    function: str
    arguments: dict[str, Any]


async def test_a_request_model_of_the_callers_own_has_no_invalid_mark():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    seen: list[Any] = []
    with use_runtime(before_dispatch=seen.append):
        (out,) = await act(branch, [OwnRequest(function="search", arguments={"q": "a"})], ActionParam())
    assert seen == [[(0, "search", {"q": "a"}, None)]]
    assert out.output == ["a"]


class MarkedRequest(BaseModel):
    """A caller's own request model that declares a mark of any type."""

    function: str
    arguments: dict[str, Any]
    invalid: Any = None


class OpenRequest(BaseModel, extra="allow"):
    """A caller's own request model that keeps undeclared keys as extras."""

    function: str
    arguments: dict[str, Any]


MARKS = [True, 0, "", "  ", "cut", [], {}, object()]


@pytest.mark.parametrize("mark", MARKS, ids=lambda m: type(m).__name__ + repr(m)[:6])
@pytest.mark.parametrize("model", [MarkedRequest, OpenRequest], ids=["field", "extra"])
async def test_a_mark_on_a_callers_own_request_model_keeps_it_from_running(model, mark):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    (out,) = await act(branch, [model(function="search", arguments={"q": "a"}, invalid=mark)],
                       ActionParam(suppress_errors=True))
    assert box.total == 0 and out.record.decision == "invalid"


@pytest.mark.parametrize("mark", [None, False])
@pytest.mark.parametrize("model", [MarkedRequest, OpenRequest], ids=["field", "extra"])
async def test_no_mark_on_a_callers_own_request_model_lets_it_run(model, mark):
    box = ToolBox()
    branch = Branch(tools=box.tools())
    (out,) = await act(branch, [model(function="search", arguments={"q": "a"}, invalid=mark)], ActionParam())
    assert box.total == 1 and out.output == ["a"]


@pytest.mark.parametrize(("mark", "runs"), [("false", True), ("null", True), ("true", False), ("0", False),
                                            ('"cut"', False)])
async def test_a_model_answer_marking_its_own_request_stays_an_answer(server, mark, runs):  # noqa: F811
    # The answer is the caller's model either way; a request the model
    # itself marks (anything but null or false) never runs.
    text = '{"answer": 1, "action_requests": [{"function": "search", "arguments": {"q": "a"}, "invalid": MARK}]}'
    text = text.replace("MARK", mark)
    server.push(completion(text))
    box = ToolBox()
    model = make_model(server)
    try:
        branch = Branch(chat_model=model, tools=box.tools())
        out, trace = await branch.operate_traced(instruction="q", response_format=Answer, actions=True)
    finally:
        await model.aclose()
    assert isinstance(out, Answer) and out.answer == 1
    assert box.total == (1 if runs else 0)
    assert [a.decision for a in trace.actions] == ["allowed" if runs else "invalid"]
