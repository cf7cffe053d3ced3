"""The real Claude Code CLI (npm ``@anthropic-ai/claude-code``) against a loopback peer.

``make claude-code`` installs the pinned CLI into ``.cache/claude-code``
(``make test`` does it first). The CLI is pointed at a Messages API peer on
127.0.0.1 with a dummy key and a temporary HOME, so nothing leaves the
machine. Skipped, saying why, only when the npm registry cannot be reached.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lionops import Branch, iModel
from lionops.endpoints.cli import CLIResultError
from lionops.errors import TruncatedOutputError
from lionops.models import RawOutput
from tests.anthropic_peer import MessagesPeer, last_turn_has_tool_result
from tests.cli_real import installed
from tests.cli_support import ADAPTER_FAILED, WITH_ACTIONS, roles
from tests.helpers import Answer, ToolBox
from tests.loopback_peer import Tripwire

pytestmark = pytest.mark.anyio

DUMMY_KEY = "sk-ant-dummy-SENTINEL-0042"
NOTE = "the lion sleeps tonight"


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return installed("claude")


def scripted_reply(note_path: Path, final: dict[str, Any]):
    """First main-loop request: ask the CLI to Read ``note_path`` (its own tool);
    after the tool result: the structured answer. Side requests (no tools): short text."""

    def reply(request: dict[str, Any]) -> list[dict[str, Any]]:
        if not request.get("tools"):
            return [{"type": "text", "text": "ok"}]
        if last_turn_has_tool_result(request):
            return [{"type": "text", "text": json.dumps(final)}]
        return [{"type": "tool_use", "id": "toolu_peer_01", "name": "Read", "input": {"file_path": str(note_path)}}]

    return reply


def work_dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``(work, home, note)``: the CLI's working folder, its HOME, and the note it reads."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    note = work / "note.txt"
    note.write_text(NOTE + "\n")
    return work, home, note


def claude_model(claude_bin: Path | str, base_url: str, work: Path, home: Path,
                 tripwire: Tripwire | None = None) -> iModel:
    """The CLI pointed at the peer at ``base_url`` with the server preset: the
    dummy key, a private HOME (and, with ``tripwire``, proxies that catch any
    other traffic)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if tripwire is not None:
        env.update(tripwire.proxy_env())
    return iModel(
        provider="claude_code", cli_command=[str(claude_bin)], model="claude-sonnet-4-5",
        timeout=120, cwd=work, inherit_env=False, env=env, base_url=base_url, api_key=DUMMY_KEY, home=home,
    )


async def test_real_claude_code_turn_runs_lionops_tools_through_act(claude_bin, tmp_path):
    work, home, note = work_dirs(tmp_path)
    final = {"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}}]}
    box = ToolBox()
    with Tripwire() as tripwire, MessagesPeer(scripted_reply(note, final)) as peer:
        model = claude_model(claude_bin, peer.base_url, work, home, tripwire)
        branch = Branch(chat_model=model, tools=box.tools())
        result, trace = await branch.operate_traced(
            instruction=f"Read {note} and report the weather in Paris.", response_format=Answer,
            actions=True, stream_persist=True, persist_dir=str(tmp_path / "streams"),
            snapshot_dir=str(tmp_path / "snaps"),
        )

    # The structured answer, validated, then its request run through act().
    assert result.answer == 7
    assert [r.output for r in result.action_responses] == [{"city": "Paris", "temp_c": 20}]
    assert dict(box.calls) == {"get_weather": 1}
    assert trace.states == WITH_ACTIONS and trace.exit == "enriched"

    # The CLI ran Read itself: recorded for provenance, never run by lionops.
    cli = [m for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert [(m.role, m.content["function"]) for m in cli] == [("action_request", "Read"), ("action_response", "Read")]
    assert NOTE in json.dumps(cli[1].content["output"])
    assert roles(branch)[-3:] == ["assistant", "action_request", "action_response"]

    # lionops' tool schemas and the request schema reached the model through the CLI.
    main = [r for r in peer.requests if r.get("tools")]
    assert len(main) == 2 and all(r.get("stream") is True for r in main)
    prompt = json.dumps(main[0]["messages"])
    assert "get_weather" in prompt and "action_requests" in prompt and "action_responses" not in prompt

    # Only loopback: the tripwire proxy saw nothing.
    assert tripwire.paths == []

    # Usage and cost from the CLI's result event.
    assert trace.meta["usage"]["output_tokens"] >= 17
    assert trace.meta["cost_usd"] > 0
    assert trace.meta["cli"]["exit_code"] == 0

    # The persisted stream is the CLI's genuine stream-json, line by line.
    stream = Path(trace.meta["cli"]["stream_path"])
    events = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    assert events[0]["type"] == "system" and events[0]["subtype"] == "init"
    assert events[0]["claude_code_version"]
    assert events[-1]["type"] == "result" and events[-1]["is_error"] is False
    assert any(e["type"] == "user" for e in events)  # the Read tool_result
    # The snapshot is the branch after the CLI turn, before act() ran.
    snap = json.loads(Path(trace.meta["cli"]["snapshot_path"]).read_text())
    assert [m["role"] for m in snap["messages"]] == ["user", "action_request", "action_response", "assistant"]

    # The dummy key shows up nowhere lionops writes.
    for text in (trace.to_json(), json.dumps(branch.messages.to_list()), json.dumps(branch.logs.to_list()),
                 stream.read_text()):
        assert DUMMY_KEY not in text


async def test_real_claude_code_provider_error_is_a_result_error(claude_bin, tmp_path):
    work, home, _ = work_dirs(tmp_path)
    box = ToolBox()

    def reply(request: dict[str, Any]) -> Any:
        return {"status": 400, "message": "the peer refuses"}

    with MessagesPeer(reply) as peer:
        branch = Branch(chat_model=claude_model(claude_bin, peer.base_url, work, home), tools=box.tools())
        with pytest.raises(CLIResultError) as info:
            await branch.operate(instruction="go", response_format=Answer, actions=True)
    err = info.value
    assert "the peer refuses" in err.summary and "API error status 400" in err.summary
    assert branch.traces[-1].states == ADAPTER_FAILED and box.total == 0
    assert DUMMY_KEY not in str(err)


async def test_real_claude_code_output_limit_is_a_cut(claude_bin, tmp_path):
    """The CLI asks the model to resume after each max_tokens stop and then
    gives up with a failed result: a cut (RawOutput "length"), nothing runs."""
    work, home, _ = work_dirs(tmp_path)
    box = ToolBox()
    partial = '{"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Pa'

    def reply(request: dict[str, Any]) -> Any:
        if not request.get("tools"):
            return [{"type": "text", "text": "ok"}]
        return {"blocks": [{"type": "text", "text": partial}], "stop_reason": "max_tokens"}

    with MessagesPeer(reply) as peer:
        branch = Branch(chat_model=claude_model(claude_bin, peer.base_url, work, home), tools=box.tools())
        with pytest.raises(TruncatedOutputError, match="output token maximum"):
            await branch.operate(instruction="go", response_format=Answer, actions=True, handle_validation="raise")
    (answer,) = [m for m in branch.messages if m.role == "assistant"]
    assert isinstance(answer.content, RawOutput) and answer.content.reason == "length"
    assert str(answer.content) == partial  # the last message's text, exactly as printed
    assert box.total == 0 and branch.traces[-1].meta["cli"]["stop_reason"] == "max_tokens"
