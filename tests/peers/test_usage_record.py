"""The one usage record on every existing endpoint, through the public API.

Chat Completions over a loopback server (plain and streamed, the detailed
counts ``prompt_tokens_details.cached_tokens`` and
``completion_tokens_details.reasoning_tokens`` kept) and the three CLI agents
(the streams their real binaries printed, replayed by a real subprocess):
each fills ``tokens`` the same way, in the message metadata and the trace.
"""

from __future__ import annotations

import pytest

from lionops import Branch
from lionops.testing import Reply, chunked, completion
from tests.cli_support import fake_model
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_chat_completions_keep_cache_and_reasoning_counts(server, stream) -> None:  # noqa: F811
    done = completion("hello", prompt_tokens=1200, completion_tokens=300, cached_tokens=1024, reasoning_tokens=256)
    server.push(Reply(stream=chunked(done)) if stream else done)
    model = make_model(server, stream=stream)
    branch = Branch(chat_model=model)
    out, trace = await branch.operate_traced(instruction="hi")
    await model.aclose()
    expected = {"input_tokens": 1200, "output_tokens": 300, "cache_read_tokens": 1024, "reasoning_tokens": 256,
                "total_tokens": 1500}
    assert out == "hello" and trace.meta["tokens"] == expected
    assert branch.messages[-1].metadata["tokens"] == expected
    # The server's own counts stay as they were.
    assert trace.meta["usage"] == {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}


async def test_the_endpoint_answer_carries_the_record_with_the_raw_counts(server) -> None:  # noqa: F811
    server.push(completion("ok", prompt_tokens=10, completion_tokens=4, cached_tokens=8, reasoning_tokens=3))
    model = make_model(server)
    done = await model.endpoint.chat([{"role": "user", "content": "x"}])
    await model.aclose()
    assert (done.tokens.input_tokens, done.tokens.cache_read_tokens, done.tokens.reasoning_tokens) == (10, 8, 3)
    assert done.tokens.raw["completion_tokens_details"]["reasoning_tokens"] == 3


@pytest.mark.parametrize(("session", "provider", "expected"), [
    ("real_claude_code_2.1.328.jsonl", "claude_code",
     {"input_tokens": 642, "output_tokens": 34, "cache_read_tokens": 0, "cache_write_tokens": 0,
      "reasoning_tokens": 0, "total_tokens": 676}),
    ("real_codex_0.169.0.jsonl", "codex",
     {"input_tokens": 2400, "output_tokens": 80, "cache_read_tokens": 2000, "cache_write_tokens": 0,
      "reasoning_tokens": 16, "total_tokens": 2480}),
    ("real_gemini_0.61.0.jsonl", "gemini",
     {"input_tokens": 1800, "output_tokens": 60, "cache_read_tokens": 1200, "total_tokens": 1860}),
], ids=["claude_code", "codex", "gemini"])
async def test_cli_agents_fill_the_same_record(session, provider, expected) -> None:
    model = fake_model(session, provider=provider, model="m")
    branch = Branch(chat_model=model, tools=ToolBox().tools())
    _, trace = await branch.operate_traced(instruction="Weather in Paris?", response_format=Answer, actions=True)
    assert trace.meta["tokens"] == expected
    assistant = [m for m in branch.messages if m.role == "assistant"][-1]
    assert assistant.metadata["tokens"] == expected


@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "google"])
async def test_counts_that_are_no_token_counts_are_left_out_of_both_records(protocol) -> None:
    import json

    from lionops import iModel
    from lionops.testing import NativeReply, Turn, native_reply
    from tests.native_recordings import ScriptPeer, endpoint_options

    body = json.loads(native_reply(protocol, Turn(text="ok"), stream=False).body)
    bad = {"anthropic": ("usage", {"input_tokens": -5000, "output_tokens": -7, "cache_read_input_tokens": -1}),
           "openai_responses": ("usage", {"input_tokens": -5000, "output_tokens": -7, "total_tokens": -5007}),
           "google": ("usageMetadata", {"promptTokenCount": -5000, "candidatesTokenCount": -7,
                                        "totalTokenCount": -5007})}[protocol]
    body[bad[0]] = bad[1]
    with ScriptPeer(NativeReply(200, json.dumps(body).encode())) as peer:
        branch = Branch(chat_model=iModel(**endpoint_options(protocol, peer, max_retries=0)))
        assert await branch.operate(instruction="x") == "ok"
    meta = branch.messages[-1].metadata
    counts = [v for v in (meta.get("usage") or {}).values() if isinstance(v, int)]
    counts += [v for v in (meta.get("tokens") or {}).values() if isinstance(v, int)]
    assert all(v >= 0 for v in counts), meta
