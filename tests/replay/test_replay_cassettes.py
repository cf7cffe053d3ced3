"""Committed cassettes (tests/replay/cassettes/test_replay_cassettes/), replayed on every run.

Each test is written as an application test would be: it operates through
the ``lionops_cassette`` fixture. The loopback server, or the fake CLI
(tests/fake_cli.py), is used only when the fixture records
(``--lionops-record-mode=all`` re-records them); a normal run replays
offline, the server never exists and the CLI's path does not either.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest

from lionops import Branch, iModel
from lionops.endpoints.cli import CLIResultError
from lionops.testing import OpenAIServer, Reply, completion
from tests.cli_support import ADAPTER_FAILED, HERE, WITH_ACTIONS, fake_model
from tests.helpers import Answer, Score, ToolBox
from tests.peers.test_api_operate import Forecast

pytestmark = [pytest.mark.anyio, pytest.mark.lionops_cassette(record_mode="none")]

DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens: a replay never connects


@contextlib.contextmanager
def model_for(cassette, *replies) -> Iterator[iModel]:
    with contextlib.ExitStack() as stack:
        base_url = DEAD_URL
        if cassette.recording:
            base_url = stack.enter_context(OpenAIServer(list(replies))).base_url
        yield iModel(provider="openai", model="gpt-4o-mini", base_url=base_url, api_key="sk-committed-cassette-key")


async def test_tools_gate_and_enrichment(lionops_cassette):
    box = ToolBox()
    answer = completion(json.dumps({"city": "Porto", "temp_c": 19, "action_requests": [
        {"function": "get_weather", "arguments": {"city": "Porto"}},
        {"function": "send_message", "arguments": {"to": "rui", "body": "19 C"}},
    ]}))
    with model_for(lionops_cassette, answer) as model:
        branch = Branch(chat_model=model, system="Be brief.", tools=box.tools())
        branch.gate(lambda inv: inv.function != "send_message")
        result, trace = await lionops_cassette.operate_traced(
            branch, instruction="Weather in Porto? Tell Rui.", response_format=Forecast, actions=True)
    assert trace.exit == "enriched" and result.city == "Porto"
    assert [r.output for r in result.action_responses] == [
        {"city": "Porto", "temp_c": 20}, {"error": "denied by governance gate", "function": "send_message"}]
    assert box.total == 0 and lionops_cassette.replayed == 1


async def test_two_turns_on_one_branch(lionops_cassette):
    with model_for(lionops_cassette, completion('{"answer": 4}'), completion('{"answer": 8}')) as model:
        branch = Branch(chat_model=model)
        first = await lionops_cassette.operate(branch, instruction="2+2?", response_format=Answer)
        second = await lionops_cassette.operate(branch, instruction="Double it.", response_format=Answer)
    assert (first.answer, second.answer) == (4, 8)
    assert lionops_cassette.replayed == 2


async def test_cut_off_answer_under_return_none(lionops_cassette):
    cut = Reply(completion('{"answer": 1', finish_reason="length"))
    with model_for(lionops_cassette, cut) as model:
        result, trace = await lionops_cassette.operate_traced(
            Branch(chat_model=model), instruction="Count.", response_format=Answer, handle_validation="return_none")
    assert result is None and trace.exit == "mismatch_return_none"
    assert lionops_cassette.replayed == 1


def cli_model_for(cassette, session: str) -> iModel:
    """The fake CLI replaying ``session`` when recording; else an executable that does not exist."""
    if cassette.recording:
        return fake_model(session)
    return iModel(provider="claude_code", model="claude-sonnet-4-5", cli_command=[str(HERE / "no-such-cli")])


async def test_cli_agent_with_its_own_tool_calls_and_ours(lionops_cassette):
    box = ToolBox()
    branch = Branch(chat_model=cli_model_for(lionops_cassette, "two_tool_uses.jsonl"), system="Be brief.",
                    tools=box.tools())
    branch.gate(lambda inv: inv.function != "send_message")
    result, trace = await lionops_cassette.operate_traced(
        branch, instruction="Weather in Paris?", response_format=Answer, actions=True)
    assert trace.states == WITH_ACTIONS and result.answer == 7
    assert result.action_responses[0].output == {"city": "Paris", "temp_c": 20}
    assert trace.meta["cli"]["cli_tool_calls"] == 2 and trace.meta["usage"]["total_tokens"] == 1245
    assert box.total == 0 and lionops_cassette.replayed == 1


async def test_a_cli_agent_reporting_failure(lionops_cassette):
    branch = Branch(chat_model=cli_model_for(lionops_cassette, "result_error.jsonl"), tools=ToolBox().tools())
    with pytest.raises(CLIResultError, match="error_max_turns"):
        await lionops_cassette.operate(branch, instruction="Go.", response_format=Score, actions=True)
    assert branch.traces[-1].states == ADAPTER_FAILED
    assert lionops_cassette.replayed == 1
