"""The systems of the end-to-end scenarios (H1–H4), over HTTP to ``bench/peer.py``.

``build(name, root)`` returns an object whose ``case(scenario)`` returns
``(new_conversation, call)`` like ``systems.System.scenario``:
``new_conversation()`` is not timed, ``await call(conversation)`` is one
whole call (timed), from building the request to the validated result with
its tool results attached. ``root`` is the peer's ``http://127.0.0.1:PORT``.

Setup differences (also printed under the table):

- floor: httpx2.AsyncClient + pydantic (``bench/floor.py``), one client per
  process; openai-sdk: the official SDK's ``chat.completions.create`` and
  ``model_validate_json``, one ``AsyncOpenAI`` per scenario. Both send the
  request lionops sends and do its parse and tool work by hand.
- lionops: a fresh ``Branch(chat_model=..., tools=[add, echo, flag])`` per
  call on one shared ``iModel``, as a server handling requests does; lionops-long: one
  ``Branch`` for a block of calls, each call with ``clear_messages=True``
  so every request is the same.
- lionagi: a fresh ``Branch`` per call on one shared ``iModel`` (token
  counting off, since it would load a tokenizer from the network; loopback
  allowed). Its ``operate()`` describes the tools and the schema in the
  prompt and reads ``action_requests`` from the answer; it has no streamed
  path through ``operate()`` (H4 n/a).
- pydantic-ai: one ``Agent`` per scenario, ``NativeOutput`` (the schema as
  ``response_format``). With tools it runs the requested tools, sends their
  results back and asks the model again, so H2 costs two HTTP round trips
  and the result carries no ``action_responses``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from common import API_KEY, H_SCENARIOS, INSTRUCTION, MODEL, TOOLS, Forecast

Case = tuple[Callable[[], Any], Callable[[Any], Awaitable[Any]]]

#: systems of the end-to-end set in this project's virtual environment, and peers.
E2E_LOCAL = ("floor", "openai-sdk", "lionops", "lionops-long")
E2E_PEERS = ("lionagi", "pydantic-ai")
#: the environment variable a worker reads the tool shape of the floors from,
#: and the default: lionops' own under a caller model (tools described in the
#: prompt, requests inside the structured answer).
SHAPE_ENV = "LIONOPS_BENCH_SHAPE"
DEFAULT_SHAPE = "in_body"


class Unsupported(Exception):
    """The system cannot express this scenario."""


def _path(root: str, scenario: str) -> str:
    return f"{root}/{H_SCENARIOS[scenario][0]}/v1"


class _Floor:
    def __init__(self, root: str, kind: str, shape: str) -> None:
        self.root, self.kind, self.shape = root, kind, shape

    def case(self, scenario: str) -> Case:
        import floor

        _, tools, stream = H_SCENARIOS[scenario]
        cls = floor.HttpxFloor if self.kind == "floor" else floor.OpenAIFloor
        run = cls(_path(self.root, scenario), tools, stream, self.shape)

        async def call(_: Any) -> Any:
            return await run()

        return (lambda: None), call


class _Lionops:
    def __init__(self, root: str, long_lived: bool) -> None:
        from lionops import Branch, iModel

        self.Branch = Branch
        self.root, self.long_lived = root, long_lived
        self.models = {p: iModel(provider="openai", model=MODEL, base_url=f"{root}/{p}/v1", api_key=API_KEY)
                       for p in ("h1", "h2")}

    def case(self, scenario: str) -> Case:
        path, with_tools, stream = H_SCENARIOS[scenario]
        model, Branch = self.models[path], self.Branch
        tools = list(TOOLS) if with_tools else None  # plain functions, as a request handler passes them
        kw: dict[str, Any] = {"instruction": INSTRUCTION, "response_format": Forecast}
        if with_tools:
            kw["actions"] = True
        if stream:
            kw["stream"] = True
        if self.long_lived:
            async def call_on(branch: Any) -> Any:
                return await branch.operate(clear_messages=True, **kw)

            return (lambda: Branch(chat_model=model, tools=tools)), call_on

        async def call(_: Any) -> Any:
            return await Branch(chat_model=model, tools=tools).operate(**kw)

        return (lambda: None), call


class _Lionagi:
    def __init__(self, root: str) -> None:
        import logging

        from lionagi import Branch, iModel

        for logger in ("lionagi", "httpx2"):  # it logs every request at INFO
            logging.getLogger(logger).setLevel(logging.WARNING)
        self.Branch = Branch
        self.models = {p: iModel(provider="openai", model=MODEL, base_url=f"{root}/{p}/v1", api_key=API_KEY,
                                 requires_tokens=False, allow_local_network=True) for p in ("h1", "h2")}

    def case(self, scenario: str) -> Case:
        path, with_tools, stream = H_SCENARIOS[scenario]
        if stream:
            raise Unsupported("operate() has no streamed API path (iModel.stream is separate)")
        model, Branch = self.models[path], self.Branch
        kw: dict[str, Any] = {"instruction": INSTRUCTION, "response_format": Forecast}
        if with_tools:
            kw["actions"] = True

        async def call(_: Any) -> Any:
            return await Branch(chat_model=model, tools=list(TOOLS) if with_tools else None).operate(**kw)

        return (lambda: None), call


class _PydanticAI:
    def __init__(self, root: str) -> None:
        self.root = root

    def case(self, scenario: str) -> Case:
        from pydantic_ai import Agent, NativeOutput
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        _, with_tools, stream = H_SCENARIOS[scenario]
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=_path(self.root, scenario), api_key=API_KEY))
        agent = Agent(model, output_type=NativeOutput(Forecast), tools=list(TOOLS) if with_tools else ())

        async def call(_: Any) -> Any:
            if not stream:
                return (await agent.run(INSTRUCTION)).output
            async with agent.run_stream(INSTRUCTION) as result:
                return await result.get_output()

        return (lambda: None), call


def build(name: str, root: str, shape: str = DEFAULT_SHAPE) -> Any:
    if name in ("floor", "openai-sdk"):
        return _Floor(root, name, shape)
    if name in ("lionops", "lionops-long"):
        return _Lionops(root, name == "lionops-long")
    if name == "lionagi":
        return _Lionagi(root)
    if name == "pydantic-ai":
        return _PydanticAI(root)
    raise ValueError(f"unknown end-to-end system {name!r}")
