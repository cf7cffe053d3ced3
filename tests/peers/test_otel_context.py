"""OpenTelemetry: CLI agents (a real subprocess replaying recorded sessions),
context propagation under 1,000 concurrent operations, and the optional extra."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from lionops import Branch
from lionops.endpoints.cli import CLIProcessError
from tests.cli_support import fake_model
from tests.helpers import Answer, ToolBox
from tests.otel_support import events

pytestmark = pytest.mark.anyio

SESSION = "5f0c1e2a-7d4b-4c1e-9a3f-2b8d6e4c1a90"


async def test_cli_agent_session_and_its_own_tool_uses(otel_content):
    box = ToolBox()
    branch = Branch(chat_model=fake_model("two_tool_uses.jsonl"), tools=box.tools())
    result = await branch.operate(instruction="Weather?", response_format=Answer, actions=True)
    assert result.answer == 7
    root = otel_content.root()
    (chat,) = otel_content.cli_runs()
    assert chat.name == "invoke_agent claude_code" and chat.kind is SpanKind.CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert chat.attributes["gen_ai.agent.name"] == "claude_code"
    assert chat.parent.span_id == root.context.span_id
    a = chat.attributes
    assert a["gen_ai.provider.name"] == "anthropic" and a["lionops.provider"] == "claude_code"
    assert a["gen_ai.conversation.id"] == str(branch.id) and a["lionops.cli.session_id"] == SESSION
    assert a["lionops.cli.exit_code"] == 0 and a["lionops.cli.tool_calls"] == 2
    assert a["lionops.middle"] == "run_and_collect"
    assert isinstance(a["gen_ai.usage.input_tokens"], int)
    # the CLI's own tool uses, in stream order, on the chat span; lionops ran none of them
    cli_events = [e for e in chat.events if e.name.startswith("cli_tool")]
    assert [(e.name, e.attributes["gen_ai.tool.name"]) for e in cli_events] == [
        ("cli_tool_call", "Bash"), ("cli_tool_call", "search"),
        ("cli_tool_result", "Bash"), ("cli_tool_result", "search"),
    ]
    assert cli_events[0].attributes["gen_ai.tool.call.id"] == "toolu_01"
    assert json.loads(cli_events[0].attributes["gen_ai.tool.call.arguments"])["command"] == "ls"
    # the model's own action request went through act(): one execute_tool span
    (tool,) = otel_content.named("execute_tool")
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"
    assert tool.attributes["lionops.tool.decision"] == "allowed"
    assert dict(box.calls) == {"get_weather": 1}


async def test_cli_failure_is_an_error_span_without_the_secret(otel):
    secret = "sk-ant-SENTINEL-123"
    model = fake_model("exit1.jsonl", "--exit", "1", "--stderr", f"Error: invalid x-api-key {secret}\n",
                       env={"ANTHROPIC_API_KEY": secret})
    branch = Branch(chat_model=model)
    with pytest.raises(CLIProcessError):
        await branch.operate(instruction="hi")
    root = otel.root()
    (chat,) = otel.cli_runs()
    for span in (root, chat):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == f"{CLIProcessError.__module__}.{CLIProcessError.__qualname__}"
        assert "exception" in events(span)
    assert chat.attributes["lionops.cli.exit_code"] == 1
    assert root.attributes["lionops.exit"] == "failed"
    assert secret not in otel.dump()


N = 1000


async def test_concurrent_operations_never_share_or_cross_spans(otel_content):
    """1,000 operate() calls at once, each under its own caller span: every
    operation's spans are in its caller's trace, parented correctly, and
    carry its own tool call (arguments name the operation)."""

    async def middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                     skip_validation=False):
        branch.messages.add("user", instruction)
        await anyio.sleep(0)  # let the other operations interleave
        n = int(instruction)
        return parse_param.response_format.model_validate(
            {"answer": n, "action_requests": [{"function": "echo", "arguments": {"text": str(n)}}]})

    async def echo(text: str) -> str:
        """Echo after a checkpoint."""
        await anyio.sleep(0)
        return text

    tracer = otel_content.tracer_provider.get_tracer("caller")
    callers: dict[int, Any] = {}
    results: dict[int, Any] = {}

    async def one(n: int) -> None:
        with tracer.start_as_current_span(f"caller {n}") as span:
            callers[n] = span.get_span_context()
            branch = Branch(tools=[echo])
            results[n] = await branch.operate(instruction=str(n), response_format=Answer, actions=True,
                                              middle=middle)

    async with anyio.create_task_group() as tg:
        for n in range(N):
            tg.start_soon(one, n)
    assert all(results[n].answer == n for n in range(N))
    spans = otel_content.spans()
    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    assert len(by_trace) == N and len({s.context.span_id for s in spans}) == len(spans)
    for n, caller in callers.items():
        mine = {s.name.split(" ")[0]: s for s in by_trace[caller.trace_id]}
        assert set(mine) == {"caller", "invoke_agent", "chat", "execute_tool", "writeback"}
        assert mine["invoke_agent"].parent.span_id == caller.span_id
        root = mine["invoke_agent"].context.span_id
        for kind in ("chat", "execute_tool", "writeback"):
            assert mine[kind].parent.span_id == root
        assert json.loads(mine["execute_tool"].attributes["gen_ai.tool.call.arguments"]) == {"text": str(n)}
        assert json.loads(mine["invoke_agent"].attributes["lionops.result"])["answer"] == n


def test_import_lionops_loads_no_opentelemetry_and_instrument_names_the_extra():
    """Without the OpenTelemetry API installed (its import blocked in a fresh
    interpreter), ``import lionops`` works and ``instrument()`` says which extra to install."""
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "import lionops\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry') and sys.modules[m]]\n"
        "try:\n"
        "    lionops.instrument()\n"
        "except lionops.InstrumentationError as exc:\n"
        "    assert isinstance(exc, ImportError) and isinstance(exc, lionops.LionopsError)\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('instrument() did not raise')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'lionops[otel]'" in out.stdout
