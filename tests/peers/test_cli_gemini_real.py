"""The real Gemini CLI (npm ``@google/gemini-cli``) against a loopback Gemini API peer.

``make gemini-cli`` installs the pinned CLI into ``.cache/gemini-cli``
(``make test`` does it first). The CLI is pointed at the peer with the
server preset (``iModel(provider="gemini", base_url=..., api_key=...,
home=...)``), and a tripwire proxy catches any attempt to reach another
host. Skipped, saying why, only when the npm registry cannot be reached.
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
from tests.gemini_peer import GeminiPeer, Turn, call, has_function_response, text
from tests.helpers import Answer, ToolBox
from tests.loopback_peer import Tripwire

pytestmark = pytest.mark.anyio

DUMMY_KEY = "gem-dummy-SENTINEL-0099"
NOTE = "the lion sleeps tonight"
FINAL = {"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}}]}


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return installed("gemini")


@pytest.fixture(scope="module")
def gemini_home(tmp_path_factory) -> Path:
    """One GEMINI_CLI_HOME for the module (the preset writes its settings there once)."""
    return tmp_path_factory.mktemp("gemini-home")


def gemini_model(gemini_bin: Path | str, base_url: str, home: Path, work: Path, tripwire: Tripwire | None = None,
                 **options) -> iModel:
    env = {**base_env(home), "GEMINI_CLI_NO_RELAUNCH": "true"}  # one node process: a faster start
    if tripwire is not None:
        env.update(tripwire.proxy_env())
    return iModel(provider="gemini", cli_command=[str(gemini_bin)], model="gemini-2.5-pro", timeout=90, cwd=work,
                  inherit_env=False, env=env, base_url=base_url, api_key=DUMMY_KEY, home=home, kill_grace=1.0,
                  **options)


def work_dir(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    note.write_text(NOTE + "\n")
    return work, note


def scripted(note: Path, final: dict):
    """First request: read the note (the CLI's own tool); after its result: the answer in two deltas."""

    def reply(request: dict) -> Turn:
        if has_function_response(request):
            body = json.dumps(final)
            return Turn([text(body[:20]), text(body[20:])])
        return Turn([call("read_file", {"file_path": str(note)})])

    return reply


async def test_real_gemini_turn_runs_lionops_tools_through_act(gemini_bin, gemini_home, tmp_path):
    work, note = work_dir(tmp_path)
    box = ToolBox()
    with Tripwire() as tripwire, GeminiPeer(scripted(note, FINAL)) as peer:
        branch = Branch(chat_model=gemini_model(gemini_bin, peer.base_url, gemini_home, work, tripwire),
                        tools=box.tools())
        result, trace = await branch.operate_traced(
            instruction=f"Read {note} and report the weather in Paris.", response_format=Answer, actions=True,
            stream_persist=True, persist_dir=str(tmp_path / "streams"))

    assert result.answer == 7
    assert [r.output for r in result.action_responses] == [{"city": "Paris", "temp_c": 20}]
    assert dict(box.calls) == {"get_weather": 1}
    assert trace.states == WITH_ACTIONS and trace.exit == "enriched"

    # The CLI read the note itself: provenance only.
    cli = [m for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert [(m.role, m.content["function"]) for m in cli] == [("action_request", "read_file"),
                                                              ("action_response", "read_file")]
    assert cli[0].content["arguments"] == {"file_path": str(note)} and cli[1].metadata["is_error"] is False
    # (the CLI prints no output for read_file; the file reached the model in its function response)
    assert NOTE in json.dumps(peer.requests[1]["contents"][-1])
    assert roles(branch)[-3:] == ["assistant", "action_request", "action_response"]

    # Only loopback: both model calls reached the peer with the key, the tripwire saw nothing.
    assert [p.split("?")[0] for p in peer.paths] == ["/v1beta/models/gemini-2.5-pro:streamGenerateContent"] * 2
    assert tripwire.paths == []
    assert all(h.get("x-goog-api-key") == DUMMY_KEY for h in peer.headers)
    assert "action_requests" in json.dumps(peer.requests[0]["contents"])

    usage = trace.meta["usage"]
    assert usage["cache_read_input_tokens"] == 1200 and usage["input_tokens"] == 600
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    stream = Path(trace.meta["cli"]["stream_path"])
    events = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    assert events[0]["type"] == "init" and events[-1]["type"] == "result"
    for blob in (trace.to_json(), json.dumps(branch.messages.to_list()), json.dumps(branch.logs.to_list()),
                 stream.read_text()):
        assert DUMMY_KEY not in blob


@pytest.mark.parametrize("status", [400, "truncated"])
async def test_real_gemini_failures_are_result_errors_whatever_the_exit(gemini_bin, gemini_home, tmp_path, status):
    work, _ = work_dir(tmp_path)
    box = ToolBox()

    def reply(request: dict) -> Turn:
        if status == "truncated":  # the stream stops with no finish reason: exit 0, status error
            return Turn([text('{"answer": 7, "action_requests": [')], cut_stream=True)
        return Turn(status=status, error="the peer refuses")

    with GeminiPeer(reply) as peer:
        branch = Branch(chat_model=gemini_model(gemini_bin, peer.base_url, gemini_home, work), tools=box.tools())
        with pytest.raises(CLIResultError) as info:
            await branch.operate(instruction="go", response_format=Answer, actions=True)
    err = info.value
    assert err.subtype == "error"
    if status == "truncated":
        assert err.returncode == 0 and "without a finish reason" in err.summary
    else:
        assert err.returncode == 400 % 256 and "the peer refuses" in err.summary
    assert len(peer.requests) == 1  # one attempt (the preset's default)
    assert branch.traces[-1].states == ADAPTER_FAILED and box.total == 0
    assert DUMMY_KEY not in str(err)


async def test_real_gemini_max_tokens_cut_never_runs_a_tool(gemini_bin, gemini_home, tmp_path):
    """The CLI reports a MAX_TOKENS finish as success with the partial text
    and no reason: an answer that stops inside its JSON is taken as a cut."""
    work, _ = work_dir(tmp_path)
    box = ToolBox()
    partial = '{"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Pa'

    def reply(request: dict) -> Turn:
        return Turn([text(partial)], finish="MAX_TOKENS")

    with GeminiPeer(reply) as peer:
        branch = Branch(chat_model=gemini_model(gemini_bin, peer.base_url, gemini_home, work), tools=box.tools())
        with pytest.raises(TruncatedOutputError, match="reports no finish reason"):
            await branch.operate(instruction="go", response_format=Answer, actions=True, handle_validation="raise")
    (answer,) = [m for m in branch.messages if m.role == "assistant"]
    assert isinstance(answer.content, RawOutput) and answer.content.reason == "length"
    assert str(answer.content) == partial
    assert box.total == 0 and branch.traces[-1].meta["cli"]["exit_code"] == 0


async def test_real_gemini_run_records_and_replays_offline(gemini_bin, gemini_home, tmp_path):
    work, note = work_dir(tmp_path)
    kw = dict(instruction=f"Read {note} and report the weather in Paris.", response_format=Answer, actions=True)
    path = tmp_path / "gemini.json"
    with GeminiPeer(scripted(note, FINAL)) as peer:
        recorded = await record(path, Branch(chat_model=gemini_model(gemini_bin, peer.base_url, gemini_home, work),
                                             tools=ToolBox().tools()), **kw)
    assert DUMMY_KEY.encode() not in path.read_bytes()
    (exchange,) = Cassette.load(path).operations[0].exchanges
    assert exchange.command[:2] == ["gemini", "-p"] and exchange.returncode == 0

    box = ToolBox()  # the peer is stopped and the CLI's path does not exist
    branch = Branch(chat_model=gemini_model(tmp_path / "no-such-cli", "http://127.0.0.1:9", gemini_home, work),
                    tools=box.tools())
    replayed = await replay(path, branch, **kw)
    assert replayed.trace.path() == recorded.trace.path() and replayed.trace.exit == "enriched"
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert [m.content["function"] for m in branch.messages if m.metadata.get("executed_by") == "cli"] == [
        "read_file"] * 2
    assert box.total == 0
