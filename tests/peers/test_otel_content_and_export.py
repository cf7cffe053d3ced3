"""OpenTelemetry content and export: tool outputs that look like denials or
errors, error messages that quote content (absent by default), cached input
tokens, and an exporter that blocks (the real SDK's in-memory exporter, the
public API, a real loopback HTTP server, real tool functions)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from lionops import Branch
from lionops.pipeline.act import DENIAL_ERROR
from lionops.testing import completion, tool_call
from tests.openai_server import make_model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_a_tool_output_that_looks_like_a_denial_or_an_error_is_allowed(server, otel):
    """The decision is what act() recorded, never read back from the output."""

    def lookup(q: str) -> dict[str, Any]:
        """Returns what a denial looks like."""
        return {"error": DENIAL_ERROR, "function": "lookup"}

    def fetch(q: str) -> dict[str, Any]:
        """Returns what a timed-out call's payload looks like."""
        return {"error": "late", "type": "TimeoutError", "message": "Error invoking action 'fetch': late"}

    def probe(q: str) -> dict[str, Any]:
        """Returns what a failed call's payload looks like."""
        return {"error": "x", "type": "RuntimeError", "message": "Error invoking action 'probe': x"}

    server.push(completion(None, tool_calls=[tool_call(name, {"q": "a"}) for name in ("lookup", "fetch", "probe")]))
    model = make_model(server)
    branch = Branch(chat_model=model, tools=[lookup, fetch, probe])
    await branch.operate(instruction="q", actions=True, action_strategy="sequential")
    await model.aclose()
    spans = sorted(otel.named("execute_tool"), key=lambda s: s.attributes["lionops.tool.index"])
    assert [s.attributes["lionops.tool.decision"] for s in spans] == ["allowed", "allowed", "allowed"]
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET] * 3
    assert all("error.type" not in s.attributes for s in spans)


async def _failing_calls(server) -> None:
    """A mismatch whose error quotes the answer, a tool whose error quotes its
    arguments (an error payload), and the same error raised (unsuppressed)."""
    from lionops import MismatchError
    from tests.helpers import Answer

    def lookup(q: str) -> str:
        """Fails, quoting its argument."""
        raise RuntimeError(f"no result for {q}")

    model = make_model(server)
    branch = Branch(chat_model=model, tools=[lookup])
    server.push(completion('{"answer": "answer-text-7f3"}'))
    with pytest.raises(MismatchError, match="answer-text-7f3"):
        await branch.operate(instruction="q", response_format=Answer, handle_validation="raise")
    server.push(completion(None, tool_calls=[tool_call("lookup", {"q": "argument-text-9c1"})]))
    await branch.operate(instruction="q", actions=True)
    await model.aclose()
    with pytest.raises(RuntimeError, match="argument-text-2d8"):
        await branch.act({"function": "lookup", "arguments": {"q": "argument-text-2d8"}}, suppress_errors=False)


CONTENT_IN_ERRORS = ("answer-text-7f3", "argument-text-9c1", "argument-text-2d8")


async def test_error_messages_that_quote_content_are_absent_by_default(server, otel):
    await _failing_calls(server)
    dump = otel.dump()
    for text in CONTENT_IN_ERRORS:
        assert text not in dump, text
    roots = otel.roots()
    assert [r.status.status_code for r in roots] == [StatusCode.ERROR, StatusCode.UNSET]
    assert roots[0].status.description == "MismatchError"
    (event,) = [e for e in roots[0].events if e.name == "exception"]
    assert event.attributes["exception.type"] == "lionops.errors.MismatchError"
    stack = event.attributes["exception.stacktrace"]
    assert stack.startswith("Traceback") and stack.endswith("lionops.errors.MismatchError\n")  # frames, no message
    errors = [e.attributes["lionops.transition.error"] for r in roots for e in r.events
              if "lionops.transition.error" in e.attributes]
    assert errors == ["MismatchError"]
    tools = otel.named("execute_tool")
    assert [s.attributes["lionops.tool.decision"] for s in tools] == ["error", "error"]
    assert [s.status.description for s in tools] == ["RuntimeError", "RuntimeError"]


async def test_error_messages_are_kept_with_content(server, otel_content):
    await _failing_calls(server)
    dump = otel_content.dump()
    for text in CONTENT_IN_ERRORS:
        assert text in dump, text


@pytest.mark.parametrize("provider, session, expected", [
    # Anthropic's input_tokens leave out cache reads and writes; the conventions count them in
    ("claude_code", "plain_answer.jsonl", {"input": 1500, "cache_read": 300, "output": 45}),
    # OpenAI's input_tokens already hold the cached ones
    ("codex", "codex_session.jsonl", {"input": 2400, "cache_read": 1200, "output": 60}),
])
async def test_input_tokens_include_cached_tokens_as_the_conventions_say(otel, provider, session, expected):
    from tests.cli_support import fake_model

    model = fake_model(session, provider=provider, **({"model": "gpt-5-codex"} if provider == "codex" else {}))
    await Branch(chat_model=model).operate(instruction="hi")
    (chat,) = otel.cli_runs()
    assert chat.attributes["gen_ai.usage.input_tokens"] == expected["input"]
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == expected["cache_read"]
    assert chat.attributes["gen_ai.usage.output_tokens"] == expected["output"]
    points = otel.metrics()["gen_ai.client.token.usage"].data.data_points
    assert {p.attributes["gen_ai.token.type"]: p.sum for p in points} == {"input": expected["input"],
                                                                           "output": expected["output"]}


async def test_an_exporter_that_blocks_does_not_block_operate_behind_a_batch_processor(server):
    """The setup docs/observability.md shows (BatchSpanProcessor): export runs
    on the processor's thread, so an exporter stuck on a dead collector never
    holds an operation (a generous bound fails the test instead of hanging it)."""
    import threading

    import anyio
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    import lionops

    release = threading.Event()
    entered = threading.Event()

    class Stuck(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            entered.set()
            release.wait(60)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Stuck(), schedule_delay_millis=1, max_export_batch_size=1))
    lionops.instrument(provider)
    model = make_model(server)
    try:
        with anyio.fail_after(30):
            for _ in range(3):
                server.push(completion("ok"))
                assert await Branch(chat_model=model).operate(instruction="q") == "ok"
            await anyio.to_thread.run_sync(entered.wait, 30)
        assert entered.is_set()  # the exporter was stuck while the operations ran
    finally:
        lionops.uninstrument()
        release.set()
        await model.aclose()
        provider.shutdown()
