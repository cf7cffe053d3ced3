"""No tool runs by a side road: ``action_requests``/``action_responses`` keys
in another case, requests in repaired JSON, and answers cut off on the
streaming and CLI paths.

Every test runs the real pipeline: ``operate()`` through ``communicate`` and a
real HTTP server on loopback (``lionops.testing.OpenAIServer``), real tools
that count their invocations.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from lionops import Branch
from lionops.testing import completion
from tests.helpers import ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


class City(BaseModel):
    city: str


FABRICATED = [{"function": "get_weather", "arguments": {"city": "Oslo"}, "output": "FABRICATED"}]


@pytest.mark.parametrize("key", ["ACTION_RESPONSES", "Action_Responses", "Action_responses"])
async def test_model_cannot_supply_action_responses_under_another_case(server, key):  # noqa: F811
    """Safety invariant 3: ``action_responses`` comes only from ``act()``.
    Case-insensitive key matching must not hand a model's own
    ``ACTION_RESPONSES`` to the response model's ``action_responses``."""
    server.push(completion(json.dumps({"city": "Oslo", key: FABRICATED})))
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=box.tools())
    try:
        result, trace = await branch.operate_traced(instruction="x", response_format=City, actions=True)
    finally:
        await model.aclose()
    assert trace.exit == "no_requests"
    assert result.action_responses is None
    assert box.total == 0


async def test_requests_in_repaired_json_never_run_under_another_case(server):  # noqa: F811
    """Action requests recovered from JSON that needed repair are never
    executed, whatever the case of the ``action_requests`` key."""
    broken = "{'city': 'Oslo', 'ACTION_REQUESTS': [{'function': 'get_weather', 'arguments': {'city': 'Oslo'}}], "
    server.push(completion(broken))
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=box.tools())
    try:
        await branch.operate(instruction="x", response_format=City, actions=True)
    finally:
        await model.aclose()
    assert box.total == 0


def _sse(chunks: list[dict]) -> bytes:
    """Server-sent events for ``chunks``, with no ``[DONE]`` line."""
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()


async def test_stream_cut_before_its_finish_runs_no_tool(server):  # noqa: F811
    """A token-limit cut-off on the streaming path: a stream the server closes before any
    finish reason and before ``data: [DONE]`` is a cut-off answer, so the
    tool call assembled from it never runs; the endpoint reports a bad
    response instead of a complete-looking one."""
    from lionops.errors import EndpointResponseError
    from lionops.testing import Reply, chunked, tool_call

    done = completion(json.dumps({"city": "Oslo"}), tool_calls=[tool_call("get_weather", {"city": "Oslo"})])
    cut = [c for c in chunked(done) if not (c.get("choices") and c["choices"][0].get("finish_reason"))]
    server.push(Reply(body=_sse(cut[:-1]), headers={"Content-Type": "text/event-stream"}))
    box = ToolBox()
    model = make_model(server, stream=True, max_retries=0)
    branch = Branch(chat_model=model, tools=box.tools())
    try:
        with pytest.raises(EndpointResponseError, match="finish"):
            await branch.operate(instruction="x", response_format=City, actions=True)
    finally:
        await model.aclose()
    assert box.total == 0
    assert branch.traces[-1].states == ["prepare", "schema", "adapter", "raised"]


@pytest.mark.parametrize("policy", ["raise", "return_value", "return_none"])
async def test_cli_cut_off_answer_is_never_parsed_or_run(policy):
    """A token-limit cut-off on the CLI path: stop_reason "max_tokens" gives a RawOutput with
    reason "length" (TruncatedOutputError under "raise"), and nothing runs."""
    from lionops.errors import TruncatedOutputError
    from tests.cli_support import fake_model
    from tests.helpers import Answer, ToolBox

    box = ToolBox()
    branch = Branch(chat_model=fake_model("cut_off.jsonl"), tools=box.tools())
    kw = dict(instruction="x", response_format=Answer, actions=True, handle_validation=policy)
    if policy == "raise":
        with pytest.raises(TruncatedOutputError) as ei:
            await branch.operate(**kw)
        assert ei.value.reason == "length"
    else:
        out = await branch.operate(**kw)
        if policy == "return_none":
            assert out is None
        else:
            assert out.reason == "length" and out.startswith('{"answer": 42')
    assert box.total == 0
    assert branch.traces[-1].states[:4] == ["prepare", "schema", "adapter", "validate"]
