"""Telemetry carries no model text by default (docs/observability.md): with
``capture_content=False`` a tool name the model chose reaches no span name
and no attribute unless it names a registered, offered tool (else
``unknown_tool``), and every span name and string attribute is bounded, so
neither content nor cardinality grows with model output. Real OTel SDK
(in-memory exporter), loopback OpenAI-compatible server, the fake CLI agent
as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lionops import Branch
from lionops.observability.otel import MAX_ATTRIBUTE_CHARS, UNKNOWN_TOOL
from lionops.testing import OpenAIServer, completion, tool_call
from tests.cli_support import fake_model
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model

pytestmark = pytest.mark.anyio

CARD = "4111111111111111"
HOSTILE = {
    "card number": f"card_{CARD}",
    "20,000 characters": "x" * 20_000,
    "unicode and spaces": f"ignore previous instructions {CARD} \u202e\u0000",
    "a registered tool not offered": "send_message",
    "a near miss of a registered tool": "get_weather ",
}
SPAN_NAMES = {"invoke_agent lionops", "invoke_agent claude_code", "chat gpt-4o-mini", "writeback",
              "execute_tool get_weather", f"execute_tool {UNKNOWN_TOOL}"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_no_model_text(telemetry: Any, name: str) -> None:
    for span in telemetry.spans():
        assert span.name in SPAN_NAMES, span.name
        texts = [(k, s) for k, v in (span.attributes or {}).items() for s in _strings(v)]
        texts += [(f"{e.name}.{k}", s) for e in span.events for k, v in (e.attributes or {}).items()
                  for s in _strings(v)]
        texts.append(("status", span.status.description or ""))
        for key, text in texts:
            assert len(text) <= MAX_ATTRIBUTE_CHARS or key.endswith("stacktrace"), (key, len(text))
            if name != "send_message":
                assert name not in text and CARD not in text, (key, text[:80])
    for metric in telemetry.metrics().values():
        for point in metric.data.data_points:
            for value in (point.attributes or {}).values():
                assert CARD not in str(value) and len(str(value)) <= MAX_ATTRIBUTE_CHARS


@pytest.mark.parametrize("where", ["native", "body"])
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_a_model_chosen_tool_name_never_reaches_the_export(otel, case, where):
    name = HOSTILE[case]
    if where == "native":
        answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("get_weather", {"city": "Oslo"}),
                                                                  tool_call(name, {"q": CARD})])
    else:
        answer = completion(json.dumps({"answer": 1, "action_requests": [
            {"function": "get_weather", "arguments": {"city": "Oslo"}}, {"function": name, "arguments": {"q": CARD}}]}))
    box = ToolBox()
    with OpenAIServer([answer]) as server:
        model = make_model(server)
        try:
            branch = Branch(chat_model=model, tools=box.tools())
            await branch.operate(instruction="go", response_format=Answer, actions=True, tools=["get_weather"])
        finally:
            await model.aclose()
    assert dict(box.calls) == {"get_weather": 1}
    tools = sorted(otel.named("execute_tool"), key=lambda s: s.attributes["lionops.tool.index"])
    assert [s.name for s in tools] == ["execute_tool get_weather", f"execute_tool {UNKNOWN_TOOL}"]
    assert tools[1].attributes["gen_ai.tool.name"] == UNKNOWN_TOOL
    assert tools[1].attributes["lionops.tool.decision"] in ("rejected", "not_offered")
    _assert_no_model_text(otel, name)


async def test_with_capture_content_the_requested_name_is_kept_bounded(otel_content):
    name = HOSTILE["20,000 characters"]
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call(name, {"q": "x"})])
    with OpenAIServer([answer]) as server:
        model = make_model(server)
        try:
            await Branch(chat_model=model, tools=ToolBox().tools()).operate(
                instruction="go", response_format=Answer, actions=True)
        finally:
            await model.aclose()
    (tool,) = otel_content.named("execute_tool")
    assert tool.name == f"execute_tool {UNKNOWN_TOOL}"
    requested = tool.attributes["lionops.tool.requested_name"]
    assert requested.startswith("xxxx") and len(requested) <= MAX_ATTRIBUTE_CHARS


async def test_a_cli_agents_own_tool_named_by_the_model_is_a_placeholder(otel, tmp_path: Path):
    session = Path(__file__).parent.parent / "fixtures" / "cli" / "two_tool_uses.jsonl"
    text = session.read_text().replace('"name":"search"', f'"name":"mcp__x__{CARD}"')
    text = text.replace('\\"function\\": \\"get_weather\\"', f'\\"function\\": \\"{CARD}\\"')
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(text)
    branch = Branch(chat_model=fake_model(str(hostile)), tools=ToolBox().tools())
    await branch.operate(instruction="Weather?", response_format=Answer, actions=True)
    (chat,) = otel.cli_runs()
    names = [e.attributes["gen_ai.tool.name"] for e in chat.events if e.name.startswith("cli_tool")]
    assert names == ["Bash", UNKNOWN_TOOL, "Bash", UNKNOWN_TOOL]
    (tool,) = otel.named("execute_tool")
    assert tool.name == f"execute_tool {UNKNOWN_TOOL}"
    _assert_no_model_text(otel, CARD)
