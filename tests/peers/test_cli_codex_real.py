"""The real Codex CLI (npm ``@openai/codex``) against a loopback Responses API peer.

``make codex`` installs the pinned CLI into ``.cache/codex`` (``make test``
does it first). The CLI is pointed at the peer with the server preset
(``iModel(provider="codex", base_url=..., api_key=..., home=...)``), and a
tripwire proxy catches any attempt to reach another host. Skipped, saying
why, only when the npm registry cannot be reached.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lionops import Branch, iModel
from lionops.endpoints.cli import CLIResultError
from lionops.errors import TruncatedOutputError
from lionops.models import RawOutput
from lionops.replay import Cassette, record, replay
from tests.cli_real import base_env, installed
from tests.cli_support import ADAPTER_FAILED, WITH_ACTIONS, roles
from tests.helpers import Answer, ToolBox
from tests.loopback_peer import Tripwire
from tests.responses_peer import ResponsesPeer, Turn, function_call, has_function_output, message

pytestmark = pytest.mark.anyio

DUMMY_KEY = "sk-codex-dummy-SENTINEL-0077"
NOTE = "the-lion-sleeps-tonight"
FINAL = {"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}}]}


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return installed("codex")


@pytest.fixture(scope="module")
def codex_home(tmp_path_factory) -> Path:
    """One CODEX_HOME for the module (runs are ephemeral: nothing carries over)."""
    return tmp_path_factory.mktemp("codex-home")


def codex_model(codex_bin: Path | str, base_url: str, home: Path, work: Path, tripwire: Tripwire | None = None,
                **options) -> iModel:
    env = base_env(home)
    if tripwire is not None:
        env.update(tripwire.proxy_env())
    return iModel(provider="codex", cli_command=[str(codex_bin)], model="gpt-5-codex", timeout=60, cwd=work,
                  inherit_env=False, env=env, base_url=f"{base_url}/v1", api_key=DUMMY_KEY, home=home,
                  kill_grace=1.0, **options)


def scripted(final: dict, *, commentary: str | None = None):
    """First request: run a command (the CLI's own tool); after its output: the answer."""

    def reply(request: dict) -> Turn:
        if has_function_output(request):
            items = [message(commentary, "commentary")] if commentary else []
            return Turn([*items, message(json.dumps(final), "final_answer")])
        return Turn([function_call("exec_command", {"cmd": f"echo {NOTE}", "yield_time_ms": 2000})])

    return reply


async def test_real_codex_turn_runs_lionops_tools_through_act(codex_bin, codex_home, tmp_path):
    box = ToolBox()
    commentary = 'Checking first: {"answer": 0, "action_requests": [{"function": "send_message", "arguments": {}}]}'
    with Tripwire() as tripwire, ResponsesPeer(scripted(FINAL, commentary=commentary)) as peer:
        model = codex_model(codex_bin, peer.base_url, codex_home, tmp_path, tripwire)
        branch = Branch(chat_model=model, tools=box.tools())
        result, trace = await branch.operate_traced(
            instruction="Report the weather in Paris.", response_format=Answer, actions=True,
            stream_persist=True, persist_dir=str(tmp_path / "streams"))

    # Only the final answer is the answer: JSON in the commentary never runs.
    assert result.answer == 7
    assert [r.output for r in result.action_responses] == [{"city": "Paris", "temp_c": 20}]
    assert dict(box.calls) == {"get_weather": 1}
    assert trace.states == WITH_ACTIONS and trace.exit == "enriched"

    # The CLI ran its own command: provenance only.
    cli = [m for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert [(m.role, m.content["function"]) for m in cli] == [
        ("action_request", "command_execution"), ("action_response", "command_execution")]
    assert NOTE in cli[1].content["output"]["aggregated_output"]
    assert roles(branch)[-3:] == ["assistant", "action_request", "action_response"]

    # Only loopback was reached: the peer got both requests, the tripwire nothing.
    assert [p for p in peer.paths] == ["/v1/responses", "/v1/responses"]
    assert tripwire.paths == []
    assert all(h.get("authorization") == f"Bearer {DUMMY_KEY}" for h in peer.headers)
    prompt = json.dumps(peer.requests[0]["input"])
    assert "get_weather" in prompt and "action_requests" in prompt

    # Usage: cached input is reported apart, never inside input_tokens; extra fields kept.
    usage = trace.meta["usage"]
    assert usage["cache_read_input_tokens"] == 2000 and usage["input_tokens"] == 400
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["reasoning_output_tokens"] == 16
    # The CLI's model-metadata notice is kept as a fact, not an error.
    assert any("Model metadata" in w for w in trace.meta["cli"]["warnings"])

    stream = Path(trace.meta["cli"]["stream_path"])
    events = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    assert events[0]["type"] == "thread.started" and events[-1]["type"] == "turn.completed"
    for text in (trace.to_json(), json.dumps(branch.messages.to_list()), json.dumps(branch.logs.to_list()),
                 stream.read_text()):
        assert DUMMY_KEY not in text


async def test_real_codex_provider_error_is_one_fatal_reason(codex_bin, codex_home, tmp_path):
    box = ToolBox()

    def reply(request: dict) -> Turn:
        return Turn([], end="failed", error={"code": "server_error", "message": "the peer is down"})

    with ResponsesPeer(reply) as peer:
        branch = Branch(chat_model=codex_model(codex_bin, peer.base_url, codex_home, tmp_path), tools=box.tools())
        with pytest.raises(CLIResultError) as info:
            await branch.operate(instruction="go", response_format=Answer, actions=True)
    err = info.value
    assert err.subtype == "turn.failed" and err.returncode == 1
    assert err.summary.count("the peer is down") == 1 and "Reconnecting" not in err.summary
    assert any(w.startswith("Reconnecting") for w in err.run.warnings)
    assert branch.traces[-1].states == ADAPTER_FAILED and box.total == 0
    assert DUMMY_KEY not in str(err)


@pytest.mark.parametrize("cut", ["max_output_tokens", "context_window"])
async def test_real_codex_cut_is_a_length_cut(codex_bin, codex_home, tmp_path, cut):
    box = ToolBox()
    partial = '{"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Pa'

    def reply(request: dict) -> Turn:
        if cut == "max_output_tokens":
            return Turn([message(partial)], end="incomplete")
        return Turn([], end="failed", error={"code": "context_length_exceeded",
                                             "message": "Your input exceeds the context window of this model."})

    with ResponsesPeer(reply) as peer:
        model = codex_model(codex_bin, peer.base_url, codex_home, tmp_path)
        branch = Branch(chat_model=model, tools=box.tools())
        raw, trace = await branch.operate_traced(instruction="go", response_format=Answer, actions=True,
                                                 handle_validation="return_value")
        assert isinstance(raw, RawOutput) and raw.reason == "length"
        assert str(raw) == (partial if cut == "max_output_tokens" else "")
        assert trace.meta["cli"]["stop_reason"] == (
            "max_output_tokens" if cut == "max_output_tokens" else "model_context_window_exceeded")
        with pytest.raises(TruncatedOutputError):
            await branch.operate(instruction="go", response_format=Answer, actions=True, handle_validation="raise")
    assert box.total == 0


async def test_real_codex_run_records_and_replays_offline(codex_bin, codex_home, tmp_path):
    kw = dict(instruction="Report the weather in Paris.", response_format=Answer, actions=True)
    path = tmp_path / "codex.json"
    with ResponsesPeer(scripted(FINAL)) as peer:
        base_url = peer.base_url
        recorded = await record(path, Branch(chat_model=codex_model(codex_bin, base_url, codex_home, tmp_path),
                                             tools=ToolBox().tools()), **kw)
    assert DUMMY_KEY.encode() not in path.read_bytes()
    (exchange,) = Cassette.load(path).operations[0].exchanges
    assert exchange.command[:3] == ["codex", "exec", "--json"] and exchange.returncode == 0

    box = ToolBox()  # the peer is stopped and the CLI's path does not exist
    branch = Branch(chat_model=codex_model(tmp_path / "no-such-cli", base_url, codex_home, tmp_path),
                    tools=box.tools())
    replayed = await replay(path, branch, **kw)
    assert replayed.trace.path() == recorded.trace.path() and replayed.trace.exit == "enriched"
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert [m.content["function"] for m in branch.messages if m.metadata.get("executed_by") == "cli"] == [
        "command_execution"] * 2
    assert box.total == 0
