"""A concurrent batch of ``act()`` attacked with tools that stress where its
calls run (on asyncio: in the caller's task until one first waits, then a
task each; on trio: a task each): tools that raise before their first wait,
never wait, only checkpoint, enter a cancel scope and wait across it while a
sibling fails, share a lock, set a context variable before their first wait;
the caller's own cancellation. Records and responses come in request order,
with the same decisions on both backends; nothing a tool sets reaches the
caller or a sibling; the caller's cancellation ends the batch as itself."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import pytest

from lionops import Branch, Tool
from lionops.models import ActionRecord

pytestmark = pytest.mark.anyio

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")


async def raises_first(x: int) -> int:
    raise ValueError(f"before any wait {x}")


def raises_plain(x: int) -> int:
    raise KeyError(f"plain {x}")


def plain(x: int) -> int:
    return x


async def never_waits(x: int) -> int:
    var.set(f"set by {x}")
    return x


async def checkpoints(x: int) -> int:
    var.set(f"set by {x}")
    await anyio.sleep(0)
    await anyio.lowlevel.checkpoint()
    return x


async def raises_later(x: int) -> int:
    await anyio.sleep(0)
    raise RuntimeError(f"after a wait {x}")


async def scoped(x: int) -> int:
    """A cancel scope entered before the first wait and left after several."""
    with anyio.move_on_after(30):
        for _ in range(3):
            await anyio.sleep(0)
    return x


async def sees(x: int) -> str:
    return var.get()


MIXED = ["plain", "never_waits", "checkpoints", "raises_first", "raises_plain", "raises_later", "scoped", "sees"]


def _branch(*extra: Any) -> Branch:
    return Branch(tools=[raises_first, raises_plain, plain, never_waits, checkpoints, raises_later, scoped, sees,
                         *extra])


def _requests(names: list[str]) -> list[dict[str, Any]]:
    return [{"function": name, "arguments": {"x": i}} for i, name in enumerate(names)]


def _decided(branch: Branch) -> list[tuple[int, str, str]]:
    records = [e.record for e in branch.logs if isinstance(e.record, ActionRecord)]
    return sorted((r.index, r.function, r.decision) for r in records)


async def test_a_mixed_batch_with_errors_suppressed_answers_every_request_in_order():
    branch = _branch()
    responses = await branch.act(_requests(MIXED))
    assert [r.function for r in responses] == MIXED
    outputs = [r.output if not isinstance(r.output, dict) else r.output["type"] for r in responses]
    assert outputs == [0, 1, 2, "ValueError", "KeyError", "RuntimeError", 6, "caller"]
    assert [r.record.decision for r in responses] == ["allowed"] * 3 + ["error"] * 3 + ["allowed"] * 2
    assert var.get() == "caller"


async def test_a_mixed_batch_raising_keeps_every_record_and_raises_the_first_failure():
    branch, records = _branch(), []
    from lionops import ActionParam, act

    with pytest.raises(ValueError, match="before any wait 3"):
        await act(branch, _requests(MIXED), ActionParam(suppress_errors=False), records=records)
    assert [r.index for r in records] == sorted(r.index for r in records)  # request order
    decided = {r.index: (r.decision, r.reason) for r in records}
    # what ran before the failure, and each call's part before its first wait, is decided;
    # the calls waiting when it came are cancelled (their cancel scopes left in their own task)
    assert decided[0][0] == decided[1][0] == "allowed"
    assert decided[3][0] == decided[4][0] == "error"
    assert all(decided[i] == ("error", "tool cancelled") for i in (2, 5, 6))
    assert var.get() == "caller"


async def test_a_context_variable_set_before_a_first_wait_reaches_no_sibling_started_at_it():
    async def sets_then_waits(x: int) -> str:
        seen = var.get()
        var.set(f"set by {x}")
        await anyio.sleep(0)
        return f"{seen} -> {var.get()}"

    branch = Branch(tools=[sets_then_waits])
    responses = await branch.act(_requests(["sets_then_waits"] * 3))
    assert [r.output for r in responses] == [f"caller -> set by {i}" for i in range(3)]
    assert var.get() == "caller"


async def test_calls_sharing_a_lock_all_finish():
    lock = anyio.Lock()

    async def locked(x: int) -> int:
        async with lock:
            await anyio.sleep(0)
        return x

    branch = Branch(tools=[locked])
    with anyio.fail_after(5):
        responses = await branch.act(_requests(["locked"] * 3))
    assert [r.output for r in responses] == [0, 1, 2]


async def test_a_per_tool_timeout_cuts_a_waiting_call_not_its_siblings():
    async def waits(x: int) -> int:
        await anyio.sleep(30)
        return x

    branch = _branch(Tool(func=waits, timeout=0.05))
    with anyio.fail_after(5):
        responses = await branch.act(_requests(["never_waits", "waits", "checkpoints"]))
    assert [r.record.decision for r in responses] == ["allowed", "timed_out", "allowed"]
    assert var.get() == "caller"


@pytest.mark.parametrize("how", ["move_on_after", "fail_after"])
async def test_the_callers_cancellation_ends_the_batch_as_itself_with_every_record(how):
    started = anyio.Event()

    async def waits(x: int) -> int:
        started.set()
        await anyio.sleep(30)
        return x

    branch = _branch(waits)
    with anyio.fail_after(5):
        if how == "move_on_after":
            with anyio.move_on_after(30) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(branch.act, _requests(["never_waits", "waits", "plain"]))
                    await started.wait()
                    scope.cancel()
            assert scope.cancelled_caught
        else:
            with pytest.raises(TimeoutError), anyio.fail_after(0.05):
                await branch.act(_requests(["never_waits", "waits", "plain"]))
    assert _decided(branch) == [(0, "never_waits", "allowed"), (1, "waits", "error"), (2, "plain", "allowed")]
    assert var.get() == "caller"
    await anyio.sleep(0)  # no cancellation is left pending on the caller
