"""The benchmarked systems, each behind one small interface.

``build(name)`` returns a :class:`System`; ``system.scenario(shape, k, sleep)``
returns ``(new_branch, call)``: ``new_branch()`` makes a fresh conversation
(not timed) and ``await call(branch)`` is one operate call (timed). Each
system's library is imported only when that system is built, so a worker
process loads one system only.

Setup differences (also printed under the table):

- lionops, lionops-transitions, reference and lionagi get
  the same caller-supplied Middle, which validates the canned answer into the
  response type it is handed.
- pydantic-ai has no Middle: a ``FunctionModel`` answers through the agent's
  output tool and the agent validates it. With tools, the agent runs the
  requested tools, sends their results back and asks the model again, so an
  actions scenario costs two model turns and the result carries no
  ``action_responses``; it has no governance gate, hooks or event log.
  A mismatch returned as a value (S3) cannot be expressed: an invalid answer
  is retried or raised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from common import ANSWER, TOOLS, Forecast, action_requests, raw_middle, structured_middle

NewBranch = Callable[[], Any]
Call = Callable[[Any], Awaitable[Any]]

#: systems whose worker runs in this project's virtual environment.
LOCAL = ("reference", "lionops", "lionops-transitions")
#: peers, each in its own virtual environment (``make bench-peers``).
PEERS = ("lionagi", "pydantic-ai")


class Unsupported(Exception):
    """The system cannot express this scenario."""


def _middle_kw(shape: str, k: int, sleep: float) -> dict[str, Any]:
    """operate() keywords of a scenario for the systems that take a Middle."""
    kw: dict[str, Any] = {"instruction": "Forecast for Lisbon?", "response_format": Forecast}
    if shape == "structured":
        kw["middle"] = structured_middle(ANSWER, sleep)
    elif shape == "actions":
        kw["middle"] = structured_middle({**ANSWER, "action_requests": action_requests(k)}, sleep)
        kw["actions"] = True
        kw["action_strategy"] = "concurrent"
    elif shape == "mismatch":
        kw["middle"] = raw_middle(ANSWER)
        kw["handle_validation"] = "return_value"
    else:
        raise ValueError(shape)
    return kw


@dataclass
class System:
    name: str
    make_branch: Callable[[bool], Any]
    operate: Callable[..., Awaitable[Any]]

    def scenario(self, shape: str, k: int = 0, sleep: float = 0.0) -> tuple[NewBranch, Call]:
        kw = _middle_kw(shape, k, sleep)
        with_tools = shape == "actions"

        async def call(branch: Any) -> Any:
            return await self.operate(branch, **kw)

        return (lambda: self.make_branch(with_tools)), call


def _lionops(engine: str) -> System:
    from lionops import Branch, Tool

    tools = [Tool(f) for f in TOOLS]
    # The unbound method, as the reference's operate() is handed over: no
    # wrapper coroutine of the benchmark's own between the call and the library.
    return System(f"lionops-{engine}" if engine != "compiled" else "lionops",
                  lambda t: Branch(tools=list(tools) if t else None, engine=engine), Branch.operate)


def _untraced() -> System:
    from lionops import Tool
    from untraced import UntracedBranch

    tools = [Tool(f) for f in TOOLS]
    return System("lionops-untraced", lambda t: UntracedBranch(tools=list(tools) if t else None),
                  UntracedBranch.operate)


def _reference() -> System:
    import reference

    tools = [reference.Tool(f) for f in TOOLS]
    return System("reference", lambda t: reference.Branch(tools if t else ()), reference.operate)


def _lionagi() -> System:
    import logging

    from lionagi import Branch

    logging.getLogger("lionagi").setLevel(logging.WARNING)

    async def operate(branch: Any, **kw: Any) -> Any:
        return await branch.operate(**kw)

    return System("lionagi", lambda t: Branch(tools=list(TOOLS) if t else None), operate)


class _PydanticAI:
    """pydantic-ai: one Agent per scenario (built once), a FunctionModel as the model."""

    name = "pydantic-ai"

    def scenario(self, shape: str, k: int = 0, sleep: float = 0.0) -> tuple[NewBranch, Call]:
        import asyncio

        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel

        if shape == "mismatch":
            raise Unsupported("an invalid answer is retried or raised, never returned as a value")
        requests = action_requests(k) if shape == "actions" else []

        async def model(messages: list[Any], info: Any) -> Any:
            if sleep:
                await asyncio.sleep(sleep)
            answered = any(isinstance(p, ToolReturnPart) for p in messages[-1].parts)
            if requests and not answered:
                return ModelResponse(parts=[ToolCallPart(r["function"], dict(r["arguments"])) for r in requests])
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, dict(ANSWER))])

        agent = Agent(FunctionModel(model), output_type=Forecast, tools=list(TOOLS) if requests else ())

        async def call(branch: Any) -> Any:
            return (await agent.run("Forecast for Lisbon?")).output

        return (lambda: None), call


def build(name: str) -> Any:
    if name == "lionops":
        return _lionops("compiled")
    if name == "lionops-transitions":
        return _lionops("transitions")
    if name == "lionops-untraced":
        return _untraced()
    if name == "reference":
        return _reference()
    if name == "lionagi":
        return _lionagi()
    if name == "pydantic-ai":
        return _PydanticAI()
    raise ValueError(f"unknown system {name!r}")
