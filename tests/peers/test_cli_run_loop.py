"""``branch.run()`` with a real CLI agent (the Codex CLI, npm ``@openai/codex``)
against a loopback Responses API peer: each round is a new CLI session, so a
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
from tests.cli_real import installed
from tests.helpers import Answer, ToolBox
from tests.loopback_peer import Tripwire
from tests.peers.test_cli_codex_real import codex_model
from tests.responses_peer import ResponsesPeer, Turn, message

pytestmark = pytest.mark.anyio

ASK = {"answer": 0, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}},
                                        {"function": "send_message", "arguments": {"to": "ana", "body": "hi"}}]}


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return installed("codex")


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


async def test_a_run_with_a_real_cli_agent_carries_the_tool_results_to_the_next_round(anyio_backend, codex_bin,
                                                                                        tmp_path):
    prompts: list[str] = []

    def reply(request: dict[str, Any]) -> Turn:
        text = _texts(request)
        prompts.append(text)
        if CLI_NEXT_ROUND_PREFIX in text:
            return Turn([message(json.dumps({"answer": 20}), "final_answer")])
        return Turn([message(json.dumps(ASK), "final_answer")])

    box = ToolBox()
    with Tripwire() as tripwire, ResponsesPeer(reply) as peer:
        model = codex_model(codex_bin, peer.base_url, tmp_path / "home", tmp_path, tripwire)
        branch = Branch(chat_model=model, tools=box.tools())
        branch.gate(lambda call: Deny(by="policy", reason="no messages today")
                    if call.function == "send_message" else True)
        result, run = await branch.run_traced("What is the temperature in Paris? Tell Ana.",
                                              response_format=Answer, max_rounds=3)
        assert tripwire.paths == []
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
