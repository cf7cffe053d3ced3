"""Test helpers: scripted Middles and counting tools (real functions, no mocks of lionops)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel


class ScriptedMiddle:
    """A Middle that returns a fixed value and counts its awaits.

    ``value`` may be a callable ``(parse_param) -> result`` to build a model
    of the generated response type.
    """

    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls = 0
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, branch, instruction, chat_param, parse_param=None,
                       clear_messages=False, skip_validation=False):
        self.calls += 1
        self.seen.append({
            "instruction": instruction, "chat_param": chat_param, "parse_param": parse_param,
            "clear_messages": clear_messages, "skip_validation": skip_validation,
        })
        if clear_messages:
            branch.clear_messages()
        branch.messages.add("user", instruction)
        value = self.value(parse_param) if callable(self.value) else self.value
        branch.messages.add("assistant", repr(value))
        return value


def as_response(data: dict[str, Any]):
    """A ScriptedMiddle value: validate ``data`` into the generated response type."""

    def build(parse_param):
        return parse_param.response_format.model_validate(data)

    return build


class ToolBox:
    """Real tool functions that count their invocations."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.args: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[Any]:
        box = self

        def get_weather(city: str) -> dict[str, Any]:
            """Weather for a city."""
            box.calls["get_weather"] += 1
            box.args.append(("get_weather", {"city": city}))
            return {"city": city, "temp_c": 20}

        def send_message(to: str, body: str) -> str:
            """Send a message (side effect)."""
            box.calls["send_message"] += 1
            box.args.append(("send_message", {"to": to, "body": body}))
            return "sent"

        def search(q: str) -> list[str]:
            """Search."""
            box.calls["search"] += 1
            box.args.append(("search", {"q": q}))
            return [q]

        async def run_shell(cmd: str) -> str:
            """Run a shell command (pretend)."""
            box.calls["run_shell"] += 1
            box.args.append(("run_shell", {"cmd": cmd}))
            return f"ran {cmd}"

        return [get_weather, send_message, search, run_shell]

    @property
    def total(self) -> int:
        return sum(self.calls.values())


class Answer(BaseModel):
    answer: int


class Score(BaseModel):
    score: int


async def cancel_once(ready: Callable[[], Awaitable[Any]], call: Callable[[], Awaitable[Any]],
                      after: Callable[[], Any] | None = None) -> anyio.CancelScope:
    """Run ``call()`` in a cancel scope; once ``await ready()`` returns, cancel
    the scope (then run ``after()``). Returns the scope; the call must not return."""
    holder: dict[str, anyio.CancelScope] = {}

    async def runner() -> None:
        with anyio.CancelScope() as scope:
            holder["scope"] = scope
            await call()
            raise AssertionError("the call returned instead of being cancelled")

    with anyio.fail_after(10):  # safety net only
        async with anyio.create_task_group() as tg:
            tg.start_soon(runner)
            await ready()
            holder["scope"].cancel()
            if after is not None:
                after()
    return holder["scope"]


def polled(condition: Callable[[], bool]) -> Callable[[], Awaitable[None]]:
    """An async ``ready`` for :func:`cancel_once` that polls ``condition()``
    (for events outside the event loop: a server thread, a child process)."""

    async def wait() -> None:
        while not condition():
            await anyio.sleep(0.005)

    return wait


class CountedMiddle:
    """A real Middle (``communicate``, ``run_and_collect``), counting its awaits
    (safety invariant 4: one await per operate())."""

    def __init__(self, middle: Callable[..., Awaitable[Any]]) -> None:
        self.middle = middle
        self.calls = 0

    async def __call__(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return await self.middle(*args, **kw)


class Governed:
    """A branch with ToolBox tools, a gate that records what it was asked, and
    a counted Middle; ``operate`` fills in ``defaults`` (``actions=True``, ...)."""

    def __init__(self, chat_model: Any, middle: Callable[..., Awaitable[Any]], **defaults: Any) -> None:
        from lionops import Branch

        self.box = ToolBox()
        self.asked: list[str] = []
        self.branch = Branch(chat_model=chat_model, tools=self.box.tools())
        self.branch.gate(self.gate)
        self.middle = CountedMiddle(middle)
        self.defaults = {"instruction": "q", "actions": True, **defaults}

    def gate(self, inv: Any) -> bool:
        self.asked.append(inv.function)
        return True

    async def operate(self, **kw: Any) -> Any:
        return await self.branch.operate(middle=self.middle, **{**self.defaults, **kw})

    def check_failed(self, error: type[BaseException] | None = None) -> None:
        """The one adapter await failed: no tool, no gate, no answer recorded,
        trace ``adapter → raised`` via ``failed`` (with ``error``'s name first)."""
        assert self.middle.calls == 1
        assert self.box.total == 0 and self.asked == []
        assert "assistant" not in [m.role for m in self.branch.messages]
        trace = self.branch.traces[-1]
        assert trace.exit == "failed" and trace.states[-2:] == ["adapter", "raised"]
        if error is not None:
            assert trace.error.startswith(error.__name__)
