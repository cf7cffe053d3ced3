"""Per-tool bounds: a timeout cuts the call (a blocking tool is abandoned),
retries only for idempotent tools, each attempt recorded."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest

from lionops import Branch, ConfigurationError, Tool
from lionops.clock import RecordingClock, use_clock

pytestmark = pytest.mark.anyio


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event a blocking tool waits on; set at the end so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


async def test_a_blocking_tool_past_its_timeout_is_cut_and_recorded_timed_out(release):
    def stuck(order: str) -> str:
        """Never answers in time."""
        release.wait(30)
        return order

    def quick(order: str) -> str:
        """Answers."""
        return order

    branch = Branch(tools=[Tool(stuck, timeout=0.05), Tool(quick, timeout=5)])
    responses = await branch.act([{"function": "stuck", "arguments": {"order": "A"}},
                                  {"function": "quick", "arguments": {"order": "B"}}])
    cut, fine = (r.record for r in responses)
    assert (cut.decision, cut.invoked, cut.error_type) == ("timed_out", True, "TimeoutError")
    assert cut.output["error"] == "'stuck' did not return within 0.05s"
    assert (fine.decision, fine.output) == ("allowed", "B")
    assert [e.content["decision"] for e in branch.logs.of_kind("action_error")] == ["timed_out"]


async def test_an_async_tool_past_its_timeout_is_cut():
    async def hangs() -> None:
        """Waits forever."""
        await anyio.sleep_forever()

    [response] = await Branch(tools=[Tool(hangs, timeout=0.01)]).act({"function": "hangs", "arguments": {}})
    assert response.record.decision == "timed_out"


async def test_an_idempotent_tool_is_retried_with_backoff_and_every_attempt_is_logged():
    calls: list[int] = []

    def fetch(page: int) -> list[int]:
        """Fetch a page; the backend fails twice."""
        calls.append(page)
        if len(calls) < 3:
            raise ConnectionError("backend down")
        return [page]

    branch = Branch(tools=[Tool(fetch, retries=3, idempotent=True, retry_on=(ConnectionError,),
                                retry_delay=0.5, retry_backoff=3)])
    with use_clock(RecordingClock()) as clock:
        [response] = await branch.act({"function": "fetch", "arguments": {"page": 2}})
    assert response.record.decision == "allowed" and response.output == [2]
    assert calls == [2, 2, 2] and clock.sleeps == [0.5, 1.5]
    attempts = [e.content for e in branch.logs.of_kind("tool_attempt")]
    assert [(a["attempt"], a["of"], a["type"]) for a in attempts] == [(1, 4, "ConnectionError"),
                                                                     (2, 4, "ConnectionError")]


async def test_retries_end_and_other_failures_are_not_retried():
    calls: list[str] = []

    def flaky(kind: str) -> None:
        """Always fails."""
        calls.append(kind)
        raise ConnectionError("down") if kind == "net" else ValueError("bad")

    branch = Branch(tools=[Tool(flaky, retries=2, idempotent=True, retry_on=(ConnectionError,), retry_delay=0)])
    with use_clock(RecordingClock()):
        net, bad = await branch.act([{"function": "flaky", "arguments": {"kind": "net"}},
                                     {"function": "flaky", "arguments": {"kind": "bad"}}], strategy="sequential")
    assert calls == ["net", "net", "net", "bad"]
    assert (net.record.decision, net.record.error_type) == ("error", "ConnectionError")
    assert (bad.record.decision, bad.record.error_type) == ("error", "ValueError")
    assert len(branch.logs.of_kind("tool_attempt")) == 4


async def test_each_attempt_is_bounded_by_the_timeout(release):
    def stuck() -> None:
        """Never answers in time."""
        release.wait(30)

    branch = Branch(tools=[Tool(stuck, timeout=0.02, retries=1, idempotent=True, retry_delay=0)])
    with use_clock(RecordingClock()):
        [response] = await branch.act({"function": "stuck", "arguments": {}})
    assert response.record.decision == "timed_out"
    assert [e.content["timed_out"] for e in branch.logs.of_kind("tool_attempt")] == [True, True]


def test_bounds_that_cannot_hold_are_refused():
    def pay(amount: int) -> int:
        """Pay."""
        return amount

    with pytest.raises(ConfigurationError, match="idempotent=True"):
        Tool(pay, retries=2)
    with pytest.raises(ConfigurationError, match="timeout must be a number > 0"):
        Tool(pay, timeout=0)
    with pytest.raises(ConfigurationError, match="retries must be an int"):
        Tool(pay, retries=-1, idempotent=True)
    with pytest.raises(TypeError, match="retry_on"):
        Tool(pay, retries=1, idempotent=True, retry_on=(KeyboardInterrupt,))
