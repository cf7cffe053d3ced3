"""Cancellation: anyio cancel scopes and timeouts around operate().

Cancelled in the adapter: no tool runs, the gate is never asked. Cancelled
during act: every running tool task is cancelled, none starts afterwards,
none outlives the call (worker threads included), a retry never repeats a
cancelled call. In every case the trace ends ``... → raised`` via ``failed``
with the cancellation recorded, and the cancellation propagates: the
enclosing scope reports ``cancelled_caught``; ``fail_after`` raises
TimeoutError. Deterministic: scopes are cancelled once the test has seen the
phase start, never by racing a clock (the deadlines used are safety nets or
the subject of the test, never asserted on).
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from lionops import AlcallParams, Branch, Tool
from tests.helpers import cancel_once

pytestmark = pytest.mark.anyio


class Probe:
    """Real tools and a Middle that report what started, finished or was cancelled."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.asked: list[str] = []
        self.live = 0
        self.in_phase = anyio.Event()
        self.threads_release = threading.Event()
        self.signal_after = 2  # tool starts after which the test may cancel

    def note_start(self, tag: str, *, in_thread: bool = False) -> None:
        self.started.append(tag)
        if len(self.started) >= self.signal_after:
            if in_thread:
                anyio.from_thread.run_sync(self.in_phase.set)
            else:
                self.in_phase.set()

    def tools(self) -> list[Any]:
        probe = self

        async def hang(tag: str) -> str:
            """Hangs until cancelled."""
            probe.note_start(tag)
            probe.live += 1
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                probe.cancelled.append(tag)
                raise
            finally:
                probe.live -= 1
            return "never"

        def block(tag: str) -> str:
            """Blocks a worker thread until released."""
            probe.note_start(tag, in_thread=True)
            probe.threads_release.wait(10)
            probe.finished.append(tag)
            return tag

        return [hang, Tool(block, blocking=True)]

    def gate(self, inv: Any) -> bool:
        self.asked.append(inv.function)
        return True

    def middle(self, value: Any, *, hang: bool = False):
        async def middle(branch, instruction, chat_param, parse_param=None,
                         clear_messages=False, skip_validation=False):
            if hang:
                self.in_phase.set()
                await anyio.sleep_forever()
            return value

        return middle

    def branch(self) -> Branch:
        b = Branch(tools=self.tools())
        b.gate(self.gate)
        return b


def requests(function: str, n: int) -> dict[str, Any]:
    return {"action_requests": [{"function": function, "arguments": {"tag": f"t{i}"}} for i in range(n)]}


async def cancel_when_in_phase(probe: Probe, call) -> anyio.CancelScope:
    """Run ``call`` in a cancel scope; cancel it once the probe saw the phase start."""
    return await cancel_once(probe.in_phase.wait, call, after=probe.threads_release.set)


def check_trace_failed_by_cancellation(b: Branch, phase: str) -> None:
    trace = b.traces[-1]
    assert trace.states[-2:] == [phase, "raised"]
    assert trace.exit == "failed"
    assert trace.error.startswith(anyio.get_cancelled_exc_class().__name__)


async def test_cancelled_in_adapter_no_tool_runs():
    probe = Probe()
    b = probe.branch()
    scope = await cancel_when_in_phase(probe, lambda: b.operate(
        instruction="x", actions=True, middle=probe.middle(requests("hang", 3), hang=True)))
    assert scope.cancelled_caught  # propagated to the scope, not swallowed
    assert probe.asked == [] and probe.started == []
    check_trace_failed_by_cancellation(b, "adapter")


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
async def test_cancelled_during_act_cancels_running_tools_and_starts_none(strategy):
    """Five hanging tools, at most two at once (or one at a time, sequentially):
    cancel once they run: each started task is cancelled before operate()
    gives up, none starts afterwards, retries never repeat a cancelled call."""
    probe = Probe()
    b = probe.branch()
    params = AlcallParams(max_concurrent=2, retry_attempts=3)
    probe.signal_after = 1 if strategy == "sequential" else 2
    scope = await cancel_when_in_phase(probe, lambda: b.operate(
        instruction="x", actions=True, action_strategy=strategy, call_params=params,
        middle=probe.middle(requests("hang", 5))))
    assert scope.cancelled_caught
    n = 1 if strategy == "sequential" else 2
    assert len(probe.started) == n and sorted(probe.cancelled) == sorted(probe.started)
    assert probe.live == 0  # no tool task outlived the call
    for _ in range(10):
        await anyio.sleep(0)
    assert len(probe.started) == n  # and none started afterwards
    check_trace_failed_by_cancellation(b, "act")
    # nothing reported as done: each started call is recorded as cancelled
    done = b.messages.by_role("action_response")
    assert len(done) == n and all(m.metadata["decision"] == "error" for m in done)
    assert all(a.reason == "tool cancelled" and a.invoked for a in b.traces[-1].actions)
    # what the model may read of it is a fixed text: no scope's address, no source path
    assert [m.content["output"]["error"] for m in done] == ["cancelled"] * n
    assert all("0x" not in str(m.content) and ".py" not in str(m.content) for m in done)


async def test_cancelled_while_worker_threads_run_waits_for_them():
    """Blocking tools in worker threads cannot be interrupted: the cancelled
    call waits for each started thread, starts no other, then propagates."""
    probe = Probe()
    b = probe.branch()
    scope = await cancel_when_in_phase(probe, lambda: b.operate(
        instruction="x", actions=True, call_params=AlcallParams(max_concurrent=2),
        middle=probe.middle(requests("block", 6))))
    assert scope.cancelled_caught
    assert sorted(probe.finished) == sorted(probe.started) and len(probe.started) == 2
    check_trace_failed_by_cancellation(b, "act")


async def test_cancelled_while_the_gate_decides_never_invokes():
    probe = Probe()
    b = Branch(tools=probe.tools())

    async def slow_gate(inv: Any) -> bool:
        probe.in_phase.set()
        await anyio.sleep_forever()
        return True

    b.gate(slow_gate)
    scope = await cancel_when_in_phase(probe, lambda: b.operate(
        instruction="x", actions=True, middle=probe.middle(requests("hang", 3))))
    assert scope.cancelled_caught and probe.started == []
    check_trace_failed_by_cancellation(b, "act")


@pytest.mark.parametrize("phase", ["adapter", "act"])
async def test_timeouts_around_operate_are_not_swallowed(phase):
    """``move_on_after`` reports cancelled_caught; ``fail_after`` raises
    TimeoutError; the branch stays usable and keeps every trace."""
    probe = Probe()
    b = probe.branch()
    middle = probe.middle(requests("hang", 2), hang=phase == "adapter")
    with anyio.move_on_after(0.05) as scope:
        await b.operate(instruction="x", actions=True, middle=middle)
    assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            await b.operate(instruction="x", actions=True, middle=middle)
    out = await b.operate(instruction="x", actions=True, middle=probe.middle({"answer": 1}))
    assert out == {"answer": 1}
    assert [t.exit for t in b.traces] == ["failed", "failed", "no_requests"]
    assert all(t.states[-2] == phase for t in b.traces[:2])
    assert probe.live == 0
