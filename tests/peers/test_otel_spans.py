"""OpenTelemetry spans of operate(): the real SDK's in-memory exporter, the
public API, a real HTTP server on loopback and real tool functions.

Each exit trigger gives its own span tree; the adapter call carries the GenAI
attributes; tool spans carry the decision; a raised call is an ERROR span
with its exception; secrets never reach a span, content only when asked.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

import lionops
from lionops import ActionParam, Branch, MismatchError
from lionops.errors import EndpointAuthError
from lionops.pipeline.act import DENIAL_ERROR
from lionops.testing import Reply, completion, error_body, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures
from tests.otel_support import events

pytestmark = pytest.mark.anyio

#: An API key no built-in pattern knows: only the endpoint's own scrub can remove it.
SECRET = "zz-private-credential-0042"

CHAT = "chat gpt-4o-mini"
TOOL_ANSWER = completion('{"answer": 1}', tool_calls=[tool_call("get_weather", {"city": "Paris"}, "call_w1")])

# exit trigger -> (reply, operate keywords, child span names of the root, raised)
EXITS: dict[str, tuple[Any, dict[str, Any], list[str], type[BaseException] | None]] = {
    "no_action_param": (completion('{"answer": 1}'), {"response_format": Answer}, [CHAT], None),
    "skip_validation": (completion("free text"), {"response_format": Answer, "skip_validation": True}, [CHAT], None),
    "mismatch_return_value": (completion('{"answer": "high"}'), {"response_format": Answer}, [CHAT], None),
    "mismatch_return_none": (completion('{"answer": "high"}'),
                             {"response_format": Answer, "handle_validation": "return_none"}, [CHAT], None),
    "mismatch_raise": (completion('{"answer": "high"}'), {"response_format": Answer, "handle_validation": "raise"},
                       [CHAT], MismatchError),
    "actions_disabled": (TOOL_ANSWER, {"response_format": Answer, "actions": True, "invoke_actions": False},
                         [CHAT], None),
    "no_requests": (completion('{"answer": 1}'), {"response_format": Answer, "actions": True}, [CHAT], None),
    "no_responses": (completion('{"answer": 1, "action_requests": []}'), {"response_format": Answer, "actions": True},
                     [CHAT], None),
    "enriched": (TOOL_ANSWER, {"response_format": Answer, "actions": True},
                 [CHAT, "execute_tool get_weather", "writeback"], None),
    "failed": (Reply(error_body("Incorrect API key provided"), status=401), {"response_format": Answer},
               [CHAT], EndpointAuthError),
}


async def run(server, reply: Any, **kw: Any) -> tuple[Branch, Any, ToolBox]:
    server.push(reply)
    box = ToolBox()
    model = make_model(server, api_key=SECRET)
    branch = Branch(chat_model=model, tools=box.tools())
    try:
        try:
            result = await branch.operate(instruction="What is the answer?", **kw)
        except Exception as exc:  # noqa: BLE001 - returned for the caller to check
            result = exc
    finally:
        await model.aclose()
    return branch, result, box


@pytest.mark.parametrize("exit_trigger", list(EXITS))
async def test_span_tree_per_exit_trigger(server, otel, exit_trigger):
    reply, kw, children, raised = EXITS[exit_trigger]
    branch, result, _ = await run(server, reply, **kw)
    trace = branch.traces[-1]
    assert trace.exit == exit_trigger
    root = otel.root()
    assert root.name == "invoke_agent lionops" and root.kind is SpanKind.INTERNAL and root.parent is None
    assert [s.name for s in otel.children(root)] == children
    assert {s.context.trace_id for s in otel.spans()} == {root.context.trace_id}
    attrs = root.attributes
    assert attrs["lionops.exit"] == exit_trigger
    assert list(attrs["lionops.states"]) == trace.states
    assert attrs["lionops.terminal"] == trace.terminal
    assert attrs["lionops.engine"] == "compiled"
    assert attrs["lionops.middle"] == "communicate"
    assert attrs["lionops.caller_model"] == "Answer"
    # every fired transition is an event named by its trigger, with the guards evaluated
    assert [e for e in events(root) if e != "exception"] == trace.triggers
    for event, record in zip(root.events, trace.transitions, strict=False):
        assert {k.removeprefix("lionops.guard."): v for k, v in event.attributes.items()
                if k.startswith("lionops.guard.")} == record.guards
        assert event.attributes["lionops.transition.source"] == record.source
        assert event.attributes["lionops.transition.dest"] == record.dest
    assert [e.timestamp for e in root.events] == sorted(e.timestamp for e in root.events)
    if raised is None:
        assert not isinstance(result, BaseException)
        assert root.status.status_code is StatusCode.UNSET
    else:
        assert isinstance(result, raised)
        assert root.status.status_code is StatusCode.ERROR
        assert root.attributes["error.type"].endswith(type(result).__name__)
        (exc_event,) = [e for e in root.events if e.name == "exception"]
        assert type(result).__name__ in exc_event.attributes["exception.message"]
        assert exc_event.attributes["exception.stacktrace"]


async def test_chat_span_follows_the_genai_conventions(server, otel):
    await run(server, TOOL_ANSWER, response_format=Answer, actions=True, temperature=0.2, max_tokens=64)
    (chat,) = otel.named("chat")
    assert chat.kind is SpanKind.CLIENT
    a = chat.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert a["gen_ai.response.id"].startswith("chatcmpl-")
    assert list(a["gen_ai.response.finish_reasons"]) == ["tool_calls"]
    assert a["gen_ai.usage.input_tokens"] == 52 and a["gen_ai.usage.output_tokens"] == 17
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == int(server.url.rsplit(":", 1)[1])
    assert a["lionops.http.attempts"] == 1 and a["lionops.http.retries"] == 0
    assert a["gen_ai.request.temperature"] == 0.2 and a["gen_ai.request.max_tokens"] == 64
    assert a["gen_ai.output.type"] == "json" and "gen_ai.request.stream" not in a
    (tool,) = otel.named("execute_tool")
    t = tool.attributes
    assert tool.kind is SpanKind.INTERNAL
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "get_weather" and t["gen_ai.tool.type"] == "function"
    assert t["gen_ai.tool.call.id"] == "call_w1"
    assert t["lionops.tool.decision"] == "allowed"
    assert tool.status.status_code is StatusCode.UNSET


async def test_retries_are_counted_and_each_is_an_event(server, otel):
    from lionops.clock import RecordingClock, use_clock

    server.push(Reply(error_body("Rate limit reached", "requests"), status=429, headers={"Retry-After": "2"}))
    with use_clock(RecordingClock()):
        await run(server, completion('{"answer": 5}'), response_format=Answer)
    (chat,) = otel.named("chat")
    assert chat.attributes["lionops.http.attempts"] == 2 and chat.attributes["lionops.http.retries"] == 1
    (retry,) = [e for e in chat.events if e.name == "http_retry"]
    assert retry.attributes["http.response.status_code"] == 429
    assert retry.attributes["lionops.http.retry_delay_s"] == 2.0


async def test_a_denial_is_a_decision_not_an_error(server, otel):
    server.push(TOOL_ANSWER)
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=box.tools())
    branch.gate(lambda inv: False)
    result = await branch.operate(instruction="q", response_format=Answer, actions=True)
    await model.aclose()
    assert box.total == 0 and result.action_responses[0].output["error"] == DENIAL_ERROR
    (tool,) = otel.named("execute_tool")
    assert tool.attributes["lionops.tool.decision"] == "denied"
    assert tool.status.status_code is StatusCode.UNSET
    assert "hook" not in events(tool)  # a denial emits no hooks
    assert otel.root().attributes["lionops.exit"] == "enriched"


async def test_decisions_of_each_failed_request(server, otel):
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("tool broke")

    server.push(completion(None, tool_calls=[
        tool_call("get_weather", '{"city": '),          # arguments are not JSON: invalid
        tool_call("launch_rockets", {"n": 1}),           # not a registered tool
        tool_call("get_weather", {"town": "Paris"}),    # arguments miss the signature
        tool_call("broken", {"x": 1}),                   # the tool raises
        tool_call("search", {"q": "lion"}),              # allowed
    ]))
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=[*box.tools(), broken])
    for point in ("tool_pre", "tool_post", "tool_error"):
        branch.on(point, lambda payload: None)
    await branch.operate(instruction="q", actions=True, action_strategy="sequential")
    await model.aclose()
    spans = sorted(otel.named("execute_tool"), key=lambda s: s.attributes["lionops.tool.index"])
    assert [s.attributes["lionops.tool.decision"] for s in spans] == [
        "invalid", "rejected", "rejected", "error", "allowed"]
    assert [s.status.status_code for s in spans] == [
        StatusCode.UNSET, StatusCode.UNSET, StatusCode.UNSET, StatusCode.ERROR, StatusCode.UNSET]
    assert spans[3].attributes["error.type"] == "RuntimeError"
    assert spans[3].status.description == "RuntimeError"  # its message only with capture_content
    # hooks are events on the tool span they belong to
    assert events(spans[3]) == ["hook", "hook"]  # tool_pre, tool_error
    assert [e.attributes["lionops.hook.point"] for e in spans[3].events] == ["tool_pre", "tool_error"]
    assert [e.attributes["lionops.hook.point"] for e in spans[4].events] == ["tool_pre", "tool_post"]


async def test_a_registered_tool_not_offered_is_a_not_offered_span(server, otel):
    """A registered tool left out of this call's ``tools=`` selector: its span
    says ``not_offered`` (from the record act() made) and the tool never ran."""
    server.push(completion(None, tool_calls=[
        tool_call("send_message", {"to": "all", "body": "hi"}), tool_call("search", {"q": "lion"})]))
    box = ToolBox()
    model = make_model(server)
    branch = Branch(chat_model=model, tools=box.tools())
    await branch.operate(instruction="q", actions=True, tools=["search"], action_strategy="sequential")
    await model.aclose()
    spans = sorted(otel.named("execute_tool"), key=lambda s: s.attributes["lionops.tool.index"])
    assert [s.attributes["lionops.tool.decision"] for s in spans] == ["not_offered", "allowed"]
    assert box.calls["send_message"] == 0 and box.calls["search"] == 1


async def test_a_raised_tool_call_outside_operate(otel):
    """act() called directly: its spans nest under the caller's span; a raised
    failure (suppress_errors=False) is an ERROR span with the exception."""
    from opentelemetry import trace

    box = ToolBox()
    branch = Branch(tools=box.tools())
    tracer = otel.tracer_provider.get_tracer("caller")
    with tracer.start_as_current_span("caller") as caller:
        with pytest.raises(lionops.tools.ToolArgumentsError):
            await lionops.act(branch, [{"function": "get_weather", "arguments": {"town": "x"}}],
                              ActionParam(strategy="sequential", suppress_errors=False))
    (tool,) = otel.named("execute_tool")
    assert tool.parent.span_id == caller.get_span_context().span_id
    assert tool.attributes["lionops.tool.decision"] == "rejected"
    assert tool.status.status_code is StatusCode.ERROR
    assert [e.name for e in tool.events] == ["exception"]
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_a_tool_past_its_timeout_is_timed_out(otel):
    """The per-invocation bound (``AlcallParams.retry_timeout``) cuts a tool
    that never returns: decision ``timed_out``, status ERROR."""
    from lionops import AlcallParams

    async def stuck() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "never"

    branch = Branch(tools=[stuck])
    (response,) = await lionops.act(branch, [{"function": "stuck", "arguments": {}}],
                                    ActionParam(action_call_params=AlcallParams(retry_timeout=0.05)))
    assert response.output["type"] == "TimeoutError"
    (tool,) = otel.named("execute_tool")
    assert tool.attributes["lionops.tool.decision"] == "timed_out"
    assert tool.status.status_code is StatusCode.ERROR and tool.attributes["error.type"] == "TimeoutError"


async def test_secrets_never_reach_a_span_even_with_content(server, otel_content):
    """The API key in the instruction, in a credential-named tool argument and
    in a raised exception's chain is scrubbed from every span, event and status."""

    async def leaky_middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                           skip_validation=False):
        try:
            raise ValueError(f"upstream said: bad key {SECRET}")
        except ValueError as inner:
            raise RuntimeError(f"call failed for key={SECRET}") from inner

    server.push(completion(None, tool_calls=[tool_call("login", {"user": "ann", "api_key": "hunter2-hunter2"})]))
    model = make_model(server, api_key=SECRET)

    def login(user: str, api_key: str) -> str:
        """Log in."""
        raise PermissionError(f"rejected key {SECRET}")

    branch = Branch(chat_model=model, tools=[login])
    await branch.operate(instruction=f"use the key {SECRET} please", actions=True)
    with pytest.raises(RuntimeError):
        await branch.operate(instruction="again", middle=leaky_middle)
    await model.aclose()
    dump = otel_content.dump()
    assert "please" in dump  # content is captured ...
    assert SECRET not in dump and "hunter2-hunter2" not in dump  # ... secrets are not
    assert "upstream said" in dump  # the chained exception is there, scrubbed
    roots = otel_content.roots()
    assert [r.status.status_code for r in roots] == [StatusCode.UNSET, StatusCode.ERROR]


async def search_turn(server, query: str) -> None:
    """One operate() with a system message whose answer asks for one search."""
    server.push(completion('{"answer": 1}', tool_calls=[tool_call("search", {"q": query})]))
    model = make_model(server)
    branch = Branch(chat_model=model, tools=ToolBox().tools(), system="You are terse.")
    await branch.operate(instruction="The instruction text", response_format=Answer, actions=True)
    await model.aclose()


async def test_content_is_absent_by_default(server, otel):
    await search_turn(server, "secret-sauce-query")
    dump = otel.dump()
    for text in ("The instruction text", "You are terse", "secret-sauce-query", "gen_ai.input.messages",
                 "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
                 "lionops.result"):
        assert text not in dump
    assert otel.named("execute_tool")[0].attributes["lionops.tool.decision"] == "allowed"


async def test_content_when_asked(server, otel_content):
    await search_turn(server, "lion")
    (chat,) = otel_content.named("chat")
    system = json.loads(chat.attributes["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": "You are terse."}]
    (user,) = json.loads(chat.attributes["gen_ai.input.messages"])
    assert user["role"] == "user" and user["parts"][0]["content"].startswith("The instruction text")
    (answer,) = json.loads(chat.attributes["gen_ai.output.messages"])
    assert answer["finish_reason"] == "tool_calls"
    assert answer["parts"][1] == {"type": "tool_call", "id": answer["parts"][1]["id"], "name": "search",
                                  "arguments": {"q": "lion"}}
    (tool,) = otel_content.named("execute_tool")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"q": "lion"}
    assert json.loads(tool.attributes["gen_ai.tool.call.result"]) == ["lion"]
    assert json.loads(otel_content.root().attributes["lionops.result"])["answer"] == 1


async def test_spans_nest_under_the_callers_span(server, otel):
    tracer = otel.tracer_provider.get_tracer("caller")
    with tracer.start_as_current_span("request handler") as caller:
        await run(server, completion('{"answer": 1}'), response_format=Answer)
    root = otel.root()
    assert root.parent.span_id == caller.get_span_context().span_id
    assert root.context.trace_id == caller.get_span_context().trace_id


async def test_instrument_again_replaces_the_previous_one(server, otel):
    from tests.otel_support import telemetry

    second = telemetry()
    other = next(second)
    try:
        await run(server, completion('{"answer": 1}'), response_format=Answer)
    finally:
        second.close()
    assert otel.spans() == []
    assert [s.name for s in other.spans()] == [CHAT, "invoke_agent lionops"]


async def test_uninstrument_stops_export(server, otel):
    lionops.uninstrument()
    await run(server, completion('{"answer": 1}'), response_format=Answer)
    assert otel.spans() == []


async def test_metrics(server, otel):
    await run(server, TOOL_ANSWER, response_format=Answer, actions=True)
    await run(server, completion('{"answer": "high"}'), response_format=Answer, handle_validation="return_none")
    metrics = otel.metrics()
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    (point,) = duration.data.data_points
    assert point.count == 2
    assert list(point.explicit_bounds) == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                                           10.24, 20.48, 40.96, 81.92]
    assert point.attributes["gen_ai.operation.name"] == "chat"
    assert point.attributes["gen_ai.provider.name"] == "openai"
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p for p in usage.data.data_points}
    assert by_type["input"].sum == 104 and by_type["output"].sum == 34
    assert list(by_type["input"].explicit_bounds)[:3] == [1, 4, 16]
    exits = {p.attributes["lionops.exit"]: p.value for p in metrics["lionops.operation.exits"].data.data_points}
    assert exits == {"enriched": 1, "mismatch_return_none": 1}
    assert metrics["lionops.operation.duration"].unit == "s"


@pytest.mark.parametrize("fault", ["exporter", "tracer"])
async def test_failing_telemetry_never_changes_the_outcome(server, fault, caplog):
    """An exporter that raises (the SDK logs it) or a tracer provider whose
    spans cannot even start (the seam logs it): same result, tools, trace."""
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

    class Broken(SpanExporter):
        def export(self, spans):
            raise OSError("collector down")

    class NoSpans(trace_api.Tracer):
        def start_span(self, *args, **kw):
            raise RuntimeError("tracer broken")

        def start_as_current_span(self, *args, **kw):
            raise RuntimeError("tracer broken")

    class NoSpansProvider(trace_api.TracerProvider):
        def get_tracer(self, *args, **kw):
            return NoSpans()

    if fault == "exporter":
        provider: Any = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(Broken()))
    else:
        provider = NoSpansProvider()
    lionops.instrument(provider)
    try:
        branch, result, box = await run(server, TOOL_ANSWER, response_format=Answer, actions=True)
    finally:
        lionops.uninstrument()
    assert result.answer == 1 and box.calls == {"get_weather": 1}
    assert branch.traces[-1].exit == "enriched"
    if fault == "tracer":
        assert "observer OpenTelemetryObserver.operation_start failed: RuntimeError: tracer broken" in caplog.text


async def test_writeback_span_counts_the_responses_offered(server, otel):
    # Two tool calls answered: the writeback step offers both responses.
    answer = completion('{"answer": 1}', tool_calls=[tool_call("get_weather", {"city": "Paris"}, "call_w1"),
                                                    tool_call("get_weather", {"city": "Oslo"}, "call_w2")])
    await run(server, answer, response_format=Answer, actions=True)
    (writeback,) = otel.named("writeback")
    assert writeback.kind is SpanKind.INTERNAL
    assert writeback.attributes["lionops.writeback.responses"] == 2
