"""Record CLI agent runs through a real subprocess (tests/fake_cli.py), replay them with none.

Every replay points ``cli_command`` at a path that does not exist, so a
replay that started a process would fail with "could not start".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lionops import Branch, iModel
from lionops.endpoints.cli import CLIEndpoint, CLIProcessError, CLIResultError, CLITimeoutError
from lionops.replay import Cassette, ReplayDivergence, record, replay
from tests.anthropic_peer import MessagesPeer
from tests.cli_support import ADAPTER_FAILED, WITH_ACTIONS, fake_model, fixture, roles
from tests.helpers import Answer, Score, ToolBox
from tests.peers.test_cli_claude_code_real import DUMMY_KEY, claude_bin, claude_model, scripted_reply, work_dirs  # noqa: F401

pytestmark = pytest.mark.anyio

CLAUDE = dict(session="two_tool_uses.jsonl", provider="claude_code", model="claude-sonnet-4-5")
CODEX = dict(session="codex_session.jsonl", provider="codex", model="gpt-5-codex")
KW = dict(instruction="Weather?", response_format=Answer, actions=True)


def missing_cli(tmp_path: Path, provider: str = "claude_code", model: str = "claude-sonnet-4-5", **options) -> iModel:
    """A CLI model whose executable does not exist: it can only be replayed."""
    return iModel(provider=provider, model=model, cli_command=[str(tmp_path / "no-such-cli")], **options)


def make_branch(model: iModel, box: ToolBox) -> Branch:
    branch = Branch(chat_model=model, system="Be brief.", tools=box.tools())
    branch.gate(lambda inv: inv.function != "send_message")
    return branch


def edit_lines(path: Path, change) -> None:
    data = json.loads(path.read_text())
    exchange = data["operations"][0]["exchanges"][0]
    exchange["lines"] = [change(line) for line in exchange["lines"]]
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("agent", [CLAUDE, CODEX], ids=["claude_code", "codex"])
async def test_replay_without_a_subprocess_gives_the_same_result_and_trace(agent, tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    box = ToolBox()
    live = make_branch(
        fake_model(agent["session"], "--chunk", "7", provider=agent["provider"], model=agent["model"]), box)
    recorded = await record(path, live, **KW)
    assert box.total == 1 and recorded.trace.states == WITH_ACTIONS

    (exchange,) = Cassette.load(path).operations[0].exchanges
    assert exchange.kind == "cli" and exchange.returncode == 0 and exchange.stderr == ""
    assert exchange.command[0] == {"claude_code": "claude", "codex": "codex"}[agent["provider"]]
    assert "fake_cli" not in " ".join(exchange.command)  # where the CLI lives is not recorded
    assert "Weather?" in exchange.input
    assert "\n".join(exchange.lines) == fixture(agent["session"]).read_text()

    async def no_spawn(*args, **kwargs):
        raise AssertionError("replay started a subprocess")

    monkeypatch.setattr(CLIEndpoint, "spawn", no_spawn)
    replay_box = ToolBox()
    branch = make_branch(missing_cli(tmp_path, agent["provider"], agent["model"]), replay_box)
    replayed = await replay(path, branch, **KW)
    assert replayed.trace.path() == recorded.trace.path()
    assert [t.guards for t in replayed.trace.transitions] == [t.guards for t in recorded.trace.transitions]
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert replayed.trace.meta["cli"] == recorded.trace.meta["cli"]
    assert replayed.trace.meta["usage"] == recorded.trace.meta["usage"]
    assert replay_box.total == 0  # tool outputs served from the cassette
    assert roles(branch) == roles(live)  # the CLI's own tool calls are provenance again


async def test_a_changed_recorded_answer_diverges_at_validate(tmp_path):
    path = tmp_path / "run.json"
    await record(path, Branch(chat_model=fake_model("fenced_json.jsonl")), instruction="n?", response_format=Answer)
    edit_lines(path, lambda line: line.replace('{\\"answer\\": 42}', '{\\"answer\\": \\"many\\"}'))
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, Branch(chat_model=missing_cli(tmp_path)), instruction="n?", response_format=Answer)
    err = info.value
    assert (err.kind, err.index) == ("transition", 3)
    assert err.expected == "validate --validated--> gate"
    assert err.actual == "validate --mismatch_return_value--> returned"


async def test_a_recorded_cli_failure_replays_as_the_same_error_and_trace(tmp_path):
    path = tmp_path / "run.json"
    kw = dict(instruction="go", response_format=Score, actions=True)
    model = fake_model("result_error.jsonl", "--exit", "1", "--stderr", "max turns reached\n")
    with pytest.raises(CLIResultError) as recorded:
        await record(path, Branch(chat_model=model, tools=ToolBox().tools()), **kw)
    op = Cassette.load(path).operations[0]
    assert op.outcome.error.type == "CLIResultError" and op.trace_obj().states == ADAPTER_FAILED
    assert (op.exchanges[0].returncode, op.exchanges[0].stderr) == (1, "max turns reached\n")

    box = ToolBox()
    branch = Branch(chat_model=missing_cli(tmp_path), tools=box.tools())
    with pytest.raises(CLIResultError) as replayed:
        await replay(path, branch, **kw)
    err = replayed.value
    assert str(err) == str(recorded.value)
    assert (err.subtype, err.returncode, err.stderr_tail) == ("error_max_turns", 1, "max turns reached\n")
    assert branch.traces[-1].path() == op.trace_obj().path()
    assert roles(branch) == ["user"] and box.total == 0
    assert [e.kind for e in branch.logs] == ["cli_error"]


async def test_a_recorded_timeout_and_a_start_failure_replay_as_themselves(tmp_path):
    path = tmp_path / "run.json"
    with pytest.raises(CLIProcessError, match="could not start"):
        await record(path, Branch(chat_model=missing_cli(tmp_path)), instruction="hi")
    assert Cassette.load(path).operations[0].exchanges[0].error.type == "OSError"
    with pytest.raises(CLIProcessError, match="could not start"):
        await replay(path, Branch(chat_model=missing_cli(tmp_path)), instruction="hi")

    # A timed-out run (made by editing a recording: a real one would take a timeout to record).
    await record(path, Branch(chat_model=fake_model("plain_answer.jsonl")), instruction="hi")
    data = json.loads(path.read_text())
    data["operations"][0]["exchanges"][0].update(timed_out=True, returncode=-15, lines=[])
    path.write_text(json.dumps(data))
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, Branch(chat_model=missing_cli(tmp_path)), instruction="hi")
    assert (info.value.kind, info.value.index) == ("transition", 2)
    assert info.value.actual == "adapter --failed--> raised [CLITimeoutError]"
    assert isinstance(info.value.__cause__, CLITimeoutError)


async def test_stream_persistence_on_replay_only_when_the_call_asks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, streams = tmp_path / "run.json", tmp_path / "streams"
    kw = dict(instruction="n?", response_format=Answer)
    model = fake_model("fenced_json.jsonl", "--chunk", "11")
    await record(path, Branch(chat_model=model), stream_persist=True, persist_dir=str(tmp_path / "recorded"), **kw)

    # Asked for: the persisted JSONL holds the recorded stdout, byte for byte.
    replayed = await replay(path, Branch(chat_model=missing_cli(tmp_path)), stream_persist=True,
                            persist_dir=str(streams), **kw)
    (stream,) = streams.glob("*.jsonl")
    assert stream.read_bytes() == fixture("fenced_json.jsonl").read_bytes()
    assert replayed.trace.meta["cli"]["stream_path"] == str(stream)

    # Not asked for: the same recording replays and writes nothing.
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    replayed = await replay(path, Branch(chat_model=missing_cli(tmp_path)), **kw)
    assert replayed.result.answer == 42 and "stream_path" not in replayed.trace.meta["cli"]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


async def test_cli_secrets_never_reach_the_cassette(tmp_path):
    env_secret, planted_key, custom = "env-secret-value-5150", "sk-planted-key-0123456789", "tok_918273"
    session = tmp_path / "session.jsonl"
    session.write_text(fixture("plain_answer.jsonl").read_text().replace(
        "Paris is the capital of France.", f"Paris. Keys seen: {env_secret} {planted_key} {custom}"))
    options = dict(env={"SERVICE_TOKEN": env_secret}, args=["--token", env_secret])
    model = fake_model(str(session), "--stderr", f"auth {env_secret} {planted_key}\n", **options)
    instruction = f"Use {planted_key} and {custom}."
    recorded = await record(tmp_path / "run.json", Branch(chat_model=model), instruction=instruction,
                            patterns=[r"tok_\d{6}"])
    assert env_secret in recorded.result
    data = (tmp_path / "run.json").read_bytes()
    for secret in (env_secret, planted_key, custom):
        assert secret.encode() not in data
    exchange = Cassette.load(tmp_path / "run.json").operations[0].exchanges[0]
    assert exchange.command[-2:] == ["--token", "***"] and exchange.stderr == "auth *** ***\n"
    # the live run is redacted the same way, so the replay matches; the served answer is the redacted one
    replayed = await replay(tmp_path / "run.json", Branch(chat_model=missing_cli(tmp_path, **options)),
                            instruction=instruction)
    assert replayed.result == "Paris. Keys seen: *** *** ***"


async def test_a_run_the_recording_lacks_or_leaves_unused_diverges(tmp_path):
    path = tmp_path / "run.json"
    kw = dict(instruction="Capital of France?")
    await record(path, Branch(chat_model=fake_model("plain_answer.jsonl"), system="Be brief."), **kw)
    with pytest.raises(ReplayDivergence) as info:  # another system prompt: another argv
        await replay(path, Branch(chat_model=missing_cli(tmp_path), system="Be verbose."), **kw)
    err = info.value
    assert (err.kind, err.index) == ("exchange", 0)
    assert "CLI run 0 (claude -p" in str(err)
    assert "run.command[8]: expected 'Be brief.', actual 'Be verbose.'" in str(err)
    assert err.trace.transitions[2].trigger == "failed"

    data = json.loads(path.read_text())
    exchanges = data["operations"][0]["exchanges"]
    exchanges[0]["input"] = exchanges[0]["input"].replace("France", "Spain")
    path.write_text(json.dumps(data))
    with pytest.raises(ReplayDivergence, match=r"run\.input: expected 'Capital of Spain\?"):
        await replay(path, Branch(chat_model=missing_cli(tmp_path), system="Be brief."), **kw)

    exchanges[0]["input"] = exchanges[0]["input"].replace("Spain", "France")
    exchanges.append(exchanges[0])
    path.write_text(json.dumps(data))
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, Branch(chat_model=missing_cli(tmp_path), system="Be brief."), **kw)
    assert (info.value.kind, info.value.index) == ("unused_exchange", 1)
    assert info.value.expected.startswith("CLI claude -p --output-format stream-json")


async def test_a_cli_cassette_replays_from_the_cassette_alone(tmp_path):
    path = tmp_path / "run.json"
    recorded = await record(path, make_branch(fake_model("two_tool_uses.jsonl"), ToolBox()), **KW)
    replayed = await replay(path)  # rebuilt: model, tools, gate and response model from the cassette
    assert replayed.trace.path() == recorded.trace.path()
    assert replayed.result.model_dump() == recorded.result.model_dump()


async def test_a_real_claude_code_run_replays_without_the_cli(claude_bin, tmp_path):  # noqa: F811
    work, home, note = work_dirs(tmp_path)
    final = {"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}}]}
    kw = dict(instruction=f"Read {note} and report the weather in Paris.", response_format=Answer, actions=True)
    path = tmp_path / "real.json"
    with MessagesPeer(scripted_reply(note, final)) as peer:
        recorded = await record(path, Branch(chat_model=claude_model(claude_bin, peer.base_url, work, home),
                                             tools=ToolBox().tools()), **kw)
    assert DUMMY_KEY.encode() not in path.read_bytes()
    (exchange,) = Cassette.load(path).operations[0].exchanges
    assert exchange.command[0] == "claude" and exchange.returncode == 0

    box = ToolBox()  # the peer is stopped and the CLI's path does not exist
    branch = Branch(chat_model=claude_model(tmp_path / "no-such-cli", "http://127.0.0.1:9", work, home),
                    tools=box.tools())
    replayed = await replay(path, branch, **kw)
    assert replayed.trace.path() == recorded.trace.path() and replayed.trace.exit == "enriched"
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert [m.content["function"] for m in branch.messages if m.metadata.get("executed_by") == "cli"] == ["Read"] * 2
    assert box.total == 0
