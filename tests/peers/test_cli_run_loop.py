"""``branch.run()`` with real CLI agents (the Codex CLI against a loopback
Responses API peer, Claude Code against a Messages API peer, the Gemini CLI
against a Gemini API peer): each round is a new CLI session, so a
later round's prompt carries the run's task and every tool call of the run
with the payload the model reads (``cli_next_instruction``). Skipped, saying
why, only when the npm registry cannot be reached (tests/cli_real.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lionops import Branch, Deny
from lionops.pipeline.loop import CLI_NEXT_ROUND_PREFIX
from tests.anthropic_peer import MessagesPeer
from tests.cli_real import installed
from tests.gemini_peer import GeminiPeer
from tests.gemini_peer import Turn as GeminiTurn
from tests.gemini_peer import text as gemini_text
from tests.helpers import Answer, ToolBox
from tests.loopback_peer import Tripwire
from tests.peers.test_cli_claude_code_real import claude_model
from tests.peers.test_cli_codex_real import codex_model
from tests.peers.test_cli_gemini_real import gemini_model
from tests.responses_peer import ResponsesPeer, Turn, message

pytestmark = pytest.mark.anyio

ASK = {"answer": 0, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}},
                                        {"function": "send_message", "arguments": {"to": "ana", "body": "hi"}}]}


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return installed("codex")


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return installed("claude")


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return installed("gemini")


def _texts(request: dict[str, Any]) -> str:
    """Every text of a Responses request's input, joined."""
    out = []
    for item in request.get("input") or []:
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if isinstance(content, list) else [content]:
            text = part.get("text") if isinstance(part, dict) else part
            if isinstance(text, str):
                out.append(text)
    return "\n".join(out)


def _messages_texts(request: dict[str, Any]) -> str:
    """Every text of a Messages request's messages, joined."""
    out = []
    for m in request.get("messages") or []:
        content = m.get("content")
        for part in content if isinstance(content, list) else [content]:
            text = part.get("text") if isinstance(part, dict) else part
            if isinstance(text, str):
                out.append(text)
    return "\n".join(out)


async def test_a_run_with_real_codex_carries_the_tool_results_to_the_next_round(anyio_backend, codex_bin, tmp_path):
    prompts: list[str] = []

    def reply(request: dict[str, Any]) -> Turn:
        text = _texts(request)
        prompts.append(text)
        return Turn([message(json.dumps({"answer": 20} if CLI_NEXT_ROUND_PREFIX in text else ASK), "final_answer")])

    with Tripwire() as tripwire, ResponsesPeer(reply) as peer:
        model = codex_model(codex_bin, peer.base_url, tmp_path / "home", tmp_path, tripwire)
        await _run_and_check(model, prompts)
        assert tripwire.paths == []


async def test_a_run_with_real_claude_code_carries_the_tool_results_to_the_next_round(anyio_backend, claude_bin,
                                                                                        tmp_path):
    prompts: list[str] = []

    def reply(request: dict[str, Any]) -> list[dict[str, Any]]:
        if not request.get("tools"):  # the CLI's side requests
            return [{"type": "text", "text": "ok"}]
        text = _messages_texts(request)
        prompts.append(text)
        return [{"type": "text", "text": json.dumps({"answer": 20} if CLI_NEXT_ROUND_PREFIX in text else ASK)}]

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    with Tripwire() as tripwire, MessagesPeer(reply) as peer:
        await _run_and_check(claude_model(claude_bin, peer.base_url, work, home, tripwire), prompts)
        assert tripwire.paths == []


async def test_a_run_with_the_real_gemini_cli_carries_the_tool_results_to_the_next_round(anyio_backend, gemini_bin,
                                                                                           tmp_path):
    prompts: list[str] = []

    def reply(request: dict[str, Any]) -> GeminiTurn:
        text = "\n".join(p["text"] for c in request.get("contents") or [] for p in c.get("parts") or []
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
        prompts.append(text)
        return GeminiTurn([gemini_text(json.dumps({"answer": 20} if CLI_NEXT_ROUND_PREFIX in text else ASK))])

    work = tmp_path / "work"
    work.mkdir()
    with Tripwire() as tripwire, GeminiPeer(reply) as peer:
        await _run_and_check(gemini_model(gemini_bin, peer.base_url, tmp_path / "home", work, tripwire), prompts)
        assert tripwire.paths == []


async def _run_and_check(model: Any, prompts: list[str]) -> None:
    box = ToolBox()
    branch = Branch(chat_model=model, tools=box.tools())
    branch.gate(lambda call: Deny(by="policy", reason="no messages today")
                if call.function == "send_message" else True)
    result, run = await branch.run_traced("What is the temperature in Paris? Tell Ana.",
                                          response_format=Answer, max_rounds=3)
    assert result.answer == 20
    assert run.states == ["start", "round", "round", "returned"]
    assert [r.exit for r in run.rounds][-1] in ("no_requests", "no_action_param", "enriched")
    assert box.args == [("get_weather", {"city": "Paris"})]
    # round 2 is a new CLI session: its prompt holds the task and round 1's calls as the model reads them
    second = next(p for p in prompts if CLI_NEXT_ROUND_PREFIX in p)
    assert "What is the temperature in Paris? Tell Ana." in second
    start = second.index("Tool calls and their results:\n") + len("Tool calls and their results:\n")
    calls = json.loads(second[start:].split("\n\n", 1)[0])
    assert calls[0] == {"function": "get_weather", "arguments": {"city": "Paris"},
                        "output": {"city": "Paris", "temp_c": 20}}
    assert calls[1]["function"] == "send_message"
    assert calls[1]["output"]["reason"] == "no messages today"  # the denial the model can read
    assert run.usage["requests"] == 2 and run.usage["tool_calls"] == 1
