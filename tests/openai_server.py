"""Fixtures for tests against a real OpenAI-compatible server on loopback.

The server is :class:`lionops.testing.OpenAIServer` (stdlib ``http.server``
in a thread on 127.0.0.1, free port); the model is a real
``iModel(provider="openai", ...)`` pointed at it. Nothing of lionops is mocked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from lionops import iModel
from lionops.testing import OpenAIServer

API_KEY = "sk-test-local-key"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def make_model(server: OpenAIServer, **kw: Any) -> iModel:
    options: dict[str, Any] = {"model": "gpt-4o-mini", "base_url": server.base_url, "api_key": API_KEY, "timeout": 5}
    options.update(kw)
    return iModel(provider="openai", **options)


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[iModel]:
    m = make_model(server)
    yield m
    await m.aclose()


async def operate_under(branch: Any, policy: str, error: type[BaseException], **kw: Any) -> Any:
    """``branch.operate(**kw)`` under ``handle_validation=policy``: the raised
    ``error`` for ``"raise"``, else the result."""
    if policy == "raise":
        with pytest.raises(error) as info:
            await branch.operate(handle_validation=policy, **kw)
        return info.value
    return await branch.operate(handle_validation=policy, **kw)


async def failing_operate(server: OpenAIServer, error: type[BaseException], model_kw: dict[str, Any],
                          **kw: Any) -> tuple[Any, Any, Any, Any]:
    """Run ``operate(**kw)`` with tools and a RecordingClock, expecting ``error``.

    Returns ``(exception, branch, toolbox, clock)``.
    """
    from lionops import Branch
    from lionops.clock import RecordingClock, use_clock

    from .helpers import ToolBox

    box = ToolBox()
    m = make_model(server, **model_kw)
    branch = Branch(chat_model=m, tools=box.tools())
    try:
        with use_clock(RecordingClock()) as clk:
            with pytest.raises(error) as info:
                await branch.operate(**kw)
    finally:
        await m.aclose()
    return info.value, branch, box, clk


def sent(server: OpenAIServer, index: int = -1) -> dict[str, Any]:
    """The JSON body of a chat request the server received."""
    body: dict[str, Any] = server.chat_requests[index].body
    return body


def user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a request body."""
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content)
    text: str = content
    return text


def dumps(value: Any) -> str:
    return json.dumps(value)
