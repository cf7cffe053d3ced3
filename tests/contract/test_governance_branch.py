"""A Branch's history: bounded on request, clearable, and forkable so
independent calls share nothing."""

from __future__ import annotations

import anyio
import pytest

from lionops import Branch, HookPoint
from lionops.testing import completion
from tests.helpers import ScriptedMiddle, ToolBox
from tests.openai_server import make_model, sent, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio


async def test_max_messages_bounds_what_is_kept_and_what_is_sent(server):
    for i in range(6):
        server.push(completion(f"answer {i}"))
    model = make_model(server)
    branch = Branch(chat_model=model, system="Be brief.", max_messages=4)
    try:
        for i in range(6):
            await branch.operate(instruction=f"question {i}")
    finally:
        await model.aclose()
    roles = [m.role for m in branch.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert branch.messages[-1].content == "answer 5"
    # what the last call sent: the system message and at most four earlier
    # messages besides its own user turn
    body = sent(server, -1)
    assert body["messages"][0]["role"] == "system"
    assert len(body["messages"]) <= 1 + 4 + 1
    assert "question 0" not in str(body["messages"])


async def test_without_a_window_the_history_grows_and_is_resent(server):
    for i in range(3):
        server.push(completion(f"answer {i}"))
    model = make_model(server)
    branch = Branch(chat_model=model)
    try:
        for i in range(3):
            await branch.operate(instruction=f"question {i}")
    finally:
        await model.aclose()
    assert len(branch.messages) == 6
    assert "question 0" in str(sent(server, -1)["messages"])


async def test_clear_logs_and_traces_and_keep_the_newest_traces():
    box = ToolBox()
    branch = Branch(tools=box.tools(), max_traces=2)
    seen = []
    branch.logs.subscribe(seen.append)
    for _ in range(3):
        await branch.operate(instruction="go", actions=True, middle=ScriptedMiddle(
            {"action_requests": [{"function": "search", "arguments": {"q": "x"}}]}))
    assert len(branch.traces) == 2 and len(branch.logs) == 3
    branch.clear_logs()
    branch.clear_traces()
    assert len(branch.logs) == 0 and branch.traces == []
    await branch.act({"function": "search", "arguments": {"q": "y"}})
    assert len(branch.logs) == 1 and len(seen) == 4  # the subscriber stays subscribed


async def test_max_logs_keeps_the_newest_entries_and_subscribers_see_every_one():
    box = ToolBox()
    branch = Branch(tools=box.tools(), max_logs=2)
    seen = []
    branch.logs.subscribe(seen.append)
    middle = ScriptedMiddle({"action_requests": [{"function": "search", "arguments": {"q": "x"}},
                                                 {"function": "search", "arguments": {"q": "y"}}]})
    for _ in range(3):  # three operations of two logged actions each
        await branch.operate(instruction="go", actions=True, middle=middle)
    assert len(seen) == 6 and list(branch.logs) == seen[-2:]
    await branch.act({"function": "search", "arguments": {"q": "z"}})  # act() trims too
    assert len(seen) == 7 and list(branch.logs) == seen[-2:]
    assert branch.fork().max_logs == 2
    with pytest.raises(TypeError):
        Branch(max_logs="2")  # type: ignore[arg-type]


async def test_forks_run_concurrently_without_seeing_each_other():
    box = ToolBox()
    hooked: list[str] = []
    parent = Branch(tools=box.tools(), system="Be brief.")
    parent.gate(lambda inv: inv.function != "send_message")
    parent.on(HookPoint.TOOL_POST, lambda p: hooked.append(p["function"]))
    first_in = anyio.Event()
    histories: dict[str, list[str]] = {}

    class Middle:
        def __init__(self, name: str) -> None:
            self.name = name

        async def __call__(self, branch, instruction, chat_param, parse_param=None,
                           clear_messages=False, skip_validation=False):
            branch.messages.add("user", instruction)
            if self.name == "a":
                first_in.set()
                await anyio.sleep(0)
            else:
                await first_in.wait()
            histories[self.name] = [str(m.content) for m in branch.messages]
            return {"action_requests": [{"function": "search", "arguments": {"q": self.name}},
                                        {"function": "send_message", "arguments": {"to": "x", "body": "y"}}]}

    a, b = parent.fork(name="a"), parent.fork(name="b")
    results = {}

    async def run(branch: Branch, name: str) -> None:
        results[name] = await branch.operate(instruction=f"from {name}", actions=True, middle=Middle(name))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, a, "a")
            tg.start_soon(run, b, "b")
    assert histories["a"] == ["Be brief.", "from a"] and histories["b"] == ["Be brief.", "from b"]
    assert [r.record.decision for r in results["a"]["action_responses"]] == ["allowed", "denied"]
    assert sorted(hooked) == ["search", "search"]  # gates and hooks came along
    assert len(parent.messages) == 1 and parent.traces == [] and len(parent.logs) == 0
    assert len(a.traces) == 1 and len(b.traces) == 1
    # registering on a fork does not change the parent
    def only_on_a() -> int:
        """A tool registered on a fork."""
        return 1

    a.register_tools(only_on_a)
    assert "only_on_a" in a.acts and "only_on_a" not in parent.acts
    extra = a.fork(messages=True)
    assert [m.content for m in extra.messages] == [m.content for m in a.messages]
    extra.messages.add("user", "only in the copy")
    assert len(extra.messages) == len(a.messages) + 1


# ---------------------------------------------------------------- who is asked when no gate is registered


async def _act_twice(branch: Branch) -> list[str]:
    from lionops import act
    from lionops.params import ActionParam

    requests = [{"function": "first", "arguments": {"x": 1}}, {"function": "second", "arguments": {"x": 2}}]
    out = await act(branch, requests, ActionParam(strategy="sequential"))
    return [r.decision for r in out]


def _two_tools(ran: list[str], on_first=None) -> list:
    def first(x: int) -> int:
        """First."""
        ran.append("first")
        if on_first is not None:
            on_first()
        return x

    def second(x: int) -> int:
        """Second."""
        ran.append("second")
        return x

    return [first, second]


async def test_a_gate_added_by_an_earlier_request_is_asked_for_the_later_ones():
    """D4: authorization is decided per request: a gate registered while a
    sequential batch runs (here by its first tool) is asked for every later
    request of the batch, though none was registered when the batch began."""
    ran: list[str] = []
    asked: list[str] = []
    branch = Branch()

    def deny(inv) -> bool:
        asked.append(inv.function)
        return False

    branch.register_tools(_two_tools(ran, on_first=lambda: branch.gate(deny)))
    assert await _act_twice(branch) == ["allowed", "denied"]
    assert ran == ["first"] and asked == ["second"]


async def test_an_authorize_of_a_subclass_or_of_the_branch_is_asked_without_any_gate():
    """D4: with no gate registered, a Branch subclass's public authorize() (or one
    set on the branch) still decides every request, and fails closed as a gate does."""
    ran: list[str] = []

    class Audited(Branch):
        async def authorize(self, invocation):
            return invocation.function != "second"

    branch = Audited(tools=_two_tools(ran))
    assert await _act_twice(branch) == ["allowed", "denied"] and ran == ["first"]

    async def deny_all(invocation):
        return False

    plain = Branch(tools=_two_tools(ran))
    plain.authorize = deny_all
    assert await _act_twice(plain) == ["denied", "denied"] and ran == ["first"]

    for verdict in (None, "yes", 1):
        odd = Branch(tools=_two_tools(ran))
        odd.authorize = lambda invocation, v=verdict: v
        assert await _act_twice(odd) == ["denied", "denied"] and ran == ["first"]
        assert [e.kind for e in odd.logs][:1] == ["gate_error"]

    def raising(invocation):
        raise RuntimeError("policy service down")

    broken = Branch(tools=_two_tools(ran))
    broken.authorize = raising
    assert await _act_twice(broken) == ["denied", "denied"] and ran == ["first"]


async def test_no_gate_records_what_an_allowing_gate_records():
    """D4: a branch without gates records, logs and writes the same as one whose
    gate allows everything (apart from ids and times)."""
    def shape(branch: Branch) -> tuple:
        return ([(e.kind, {k: v for k, v in e.content.items() if k not in ("branch", "duration_s")})
                 for e in branch.logs],
                [(m.role, m.content, {k: v for k, v in m.metadata.items()}) for m in branch.messages])

    ran: list[str] = []
    bare, gated = Branch(tools=_two_tools(ran)), Branch(tools=_two_tools(ran))
    gated.gate(lambda inv: True)
    assert await _act_twice(bare) == await _act_twice(gated) == ["allowed", "allowed"]
    assert shape(bare) == shape(gated) and ran == ["first", "second"] * 2
