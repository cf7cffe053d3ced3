"""Usage limits against what a hostile caller or endpoint does: concurrent
operations on one branch (and its forks), and requests that fail after they
were sent. A limit is checked before the effect it limits, and every request
made counts (DESIGN "Rulings for the new doors")."""

from __future__ import annotations

import anyio
import pytest

from lionops import Branch, UsageLimitExceeded, UsageLimits
from lionops.testing import completion
from lionops.testing.openai_server import Reply, error_body
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("fork", [False, True])
async def test_concurrent_operations_never_pass_the_request_limit(server, fork):
    server.push(*(completion(str(i)) for i in range(4)))
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(requests=1))
    outcomes: list[object] = []

    async def one(i: int) -> None:
        target = branch.fork() if fork else branch
        try:
            outcomes.append(await target.operate(instruction=f"q{i}"))
        except UsageLimitExceeded as exc:
            outcomes.append(exc)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
    finally:
        await model.aclose()
    assert len(server.chat_requests) == 1  # the others were never sent
    assert sum(isinstance(o, UsageLimitExceeded) for o in outcomes) == 3
    assert branch.usage.requests == 1 and branch.usage.total_tokens == 69


async def test_a_request_that_failed_after_it_was_sent_counts(server):
    """An endpoint that answers every request with an error still received
    them: a loop of failing operations stops at the request limit."""
    for _ in range(5):
        server.push(Reply(error_body("bad request"), status=400))
    model = make_model(server)
    branch = Branch(chat_model=model, limits=UsageLimits(requests=2))
    raised: list[type[BaseException]] = []
    try:
        for i in range(5):
            try:
                await branch.operate(instruction=f"q{i}")
            except Exception as exc:  # noqa: BLE001 - which error is the point
                raised.append(type(exc))
    finally:
        await model.aclose()
    assert len(server.chat_requests) == 2
    assert raised[2:] == [UsageLimitExceeded] * 3
    assert branch.usage.requests == 2
