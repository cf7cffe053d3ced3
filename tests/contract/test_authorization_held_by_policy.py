"""The authorization hook holds whatever form the policy takes (ADR-0022 D4):
an ``authorize`` or ``authorization`` set on a branch that is another
branch's (a branch delegating to a policy branch) is asked, never mistaken
for the branch's own; a subclass's policy held in ``__slots__`` is kept by
``fork()`` and by a fork of a fork; an ``authorize`` set to the branch's own
bound method follows the fork's gates, not the original's. Through
``operate()`` against the loopback server, with real tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from lionops import Branch
from lionops.testing import OpenAIServer, completion, tool_call
from tests.openai_server import make_model

pytestmark = pytest.mark.anyio


def _tool(ran: list[str]) -> Callable[..., Any]:
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"
    return delete_file


async def _run(branch: Branch) -> None:
    answer = completion(None, tool_calls=[tool_call("delete_file", {"path": "/etc/passwd"})])
    with OpenAIServer([answer]) as server:
        model = make_model(server)
        branch.chat_model = model
        await branch.operate(instruction="clean up", actions=True)
        await model.aclose()


def _deny_all() -> Branch:
    policy = Branch()
    policy.gate(lambda invocation: False)
    return policy


@pytest.mark.parametrize("hook", ["authorize", "authorization"])
async def test_a_policy_branch_s_hook_set_on_another_branch_is_asked(hook: str, anyio_backend: str) -> None:
    ran: list[str] = []
    branch = Branch(tools=[_tool(ran)])
    setattr(branch, hook, getattr(_deny_all(), hook))
    assert branch.needs_authorization()
    for each in (branch, branch.fork(), branch.fork().fork()):
        await _run(each)
    assert ran == []


class SlotPolicy(Branch):
    __slots__ = ("blocked", "__hidden")

    def hide(self, names: tuple[str, ...]) -> None:
        self.__hidden = names

    async def authorize(self, invocation: Any) -> bool:
        return invocation.function not in getattr(self, "blocked", ()) + getattr(self, "_SlotPolicy__hidden", ())


@pytest.mark.parametrize("where", ["blocked", "hidden"])
async def test_a_policy_held_in_slots_is_kept_by_fork(where: str, anyio_backend: str) -> None:
    ran: list[str] = []
    branch = SlotPolicy(tools=[_tool(ran)])
    if where == "blocked":
        branch.blocked = ("delete_file",)
    else:
        branch.hide(("delete_file",))
    for each in (branch, branch.fork(), branch.fork().fork()):
        await _run(each)
    assert ran == []


async def test_an_authorize_bound_to_the_branch_itself_follows_the_fork_s_gates(anyio_backend: str) -> None:
    ran: list[str] = []
    branch = Branch(tools=[_tool(ran)])
    branch.authorize = branch.authorize  # type: ignore[method-assign]
    fork = branch.fork()
    fork.gate(lambda invocation: False)
    await _run(fork)
    await _run(fork.fork())
    assert ran == []


async def _raises(invocation: Any) -> Any:
    raise KeyError("owner")


async def _hangs(invocation: Any) -> Any:
    await anyio.sleep_forever()


def _odd(invocation: Any) -> Any:
    return ("allowed", None, "extra")


AUTHORIZATIONS = {"raises": _raises, "hangs": _hangs, "answers no Authorization": _odd}


@pytest.mark.filterwarnings("ignore:gate authorization returned:UserWarning")
@pytest.mark.parametrize("how", ["subclass", "set on the branch"])
@pytest.mark.parametrize("kind", list(AUTHORIZATIONS))
async def test_an_authorization_of_its_own_fails_closed_within_the_gate_timeout(
        kind: str, how: str, anyio_backend: str) -> None:
    ran: list[str] = []
    check = AUTHORIZATIONS[kind]
    if how == "subclass":
        class Own(Branch):
            async def authorization(self, invocation: Any) -> Any:
                answer = check(invocation)
                return await answer if not isinstance(answer, tuple) else answer
        branch: Branch = Own(tools=[_tool(ran)], gate_timeout=0.2)
    else:
        branch = Branch(tools=[_tool(ran)], gate_timeout=0.2)
        branch.authorization = check  # type: ignore[method-assign]
    for each in (branch, branch.fork(), branch.fork().fork()):
        await _run(each)
    assert ran == []
    decisions = [e.record.decision for e in branch.logs if e.record is not None]
    assert decisions and set(decisions) <= {"denied", "timed_out"}

