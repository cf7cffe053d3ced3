"""run_and_collect through a real subprocess replaying recorded stream-json sessions."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from lionops import Branch, iModel, run_and_collect
from lionops.endpoints.cli import (
    CLIProcessError,
    CLIResultError,
    CLIStreamError,
    CLITimeoutError,
)
from lionops.errors import ConfigurationError
from lionops.middles.common import begin_turn, finish_turn
from lionops.params import ChatParam, RunParam
from tests.cli_support import (
    ADAPTER_FAILED,
    NO_ACTIONS,
    WITH_ACTIONS,
    alive,
    fake_model,
    fixture,
    read_pid,
    recorded,
    roles,
)
from tests.helpers import Answer, Score, ToolBox

pytestmark = pytest.mark.anyio


async def test_plain_answer_is_text_with_usage_cost_and_trace_facts():
    branch = Branch(chat_model=fake_model("plain_answer.jsonl"))
    result, trace = await branch.operate_traced(instruction="Capital of France?")
    assert result == "Paris is the capital of France."
    assert trace.states == NO_ACTIONS
    assert trace.exit == "no_action_param"
    assert trace.meta["middle"] == "run_and_collect"
    assert trace.meta["usage"] == {
        "input_tokens": 1200, "output_tokens": 45, "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 0, "total_tokens": 1245,
    }
    assert trace.meta["cost_usd"] == pytest.approx(0.00321)
    assert trace.meta["cli"]["session_id"] == "5f0c1e2a-7d4b-4c1e-9a3f-2b8d6e4c1a90"
    assert trace.meta["cli"]["exit_code"] == 0
    assert roles(branch) == ["user", "assistant"]
    assistant = branch.messages[-1]
    assert assistant.content == result
    assert assistant.metadata["usage"]["output_tokens"] == 45
    assert assistant.metadata["cost_usd"] == pytest.approx(0.00321)
    assert json.loads(trace.to_json())["meta"]["cli"]["provider"] == "claude_code"


async def test_fenced_json_answer_parses_into_the_model(tmp_path):
    record = tmp_path / "call.json"
    branch = Branch(chat_model=fake_model("fenced_json.jsonl", "--record", str(record)))
    result, trace = await branch.operate_traced(instruction="Pick a number", response_format=Answer)
    assert isinstance(result, Answer) and result.answer == 42
    assert trace.exit == "no_action_param"
    call = recorded(record)
    # The prompt went to stdin, with the request JSON schema (schema_in_prompt).
    assert call["stdin"].startswith("Pick a number")
    assert "Answer with one JSON object only" in call["stdin"]
    assert '"answer"' in call["stdin"]
    assert call["argv"][-6:] == ["-p", "--output-format", "stream-json", "--verbose",
                                 "--model", "claude-sonnet-4-5"]


async def test_cli_tool_uses_are_provenance_and_model_requests_go_through_act(tmp_path):
    box = ToolBox()
    record = tmp_path / "call.json"
    branch = Branch(chat_model=fake_model("two_tool_uses.jsonl", "--record", str(record)), tools=box.tools())
    result, trace = await branch.operate_traced(
        instruction="Weather?", response_format=Answer, actions=True,
    )
    assert result.answer == 7
    assert [r.output for r in result.action_responses] == [{"city": "Paris", "temp_c": 20}]
    assert trace.states == WITH_ACTIONS
    assert trace.exit == "enriched"
    # The CLI ran Bash and a tool named "search" itself: lionops never re-ran them.
    assert dict(box.calls) == {"get_weather": 1}
    assert roles(branch) == [
        "user", "action_request", "action_request", "action_response", "action_response",
        "assistant", "action_request", "action_response",
    ]
    cli_requests = [m for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert [(m.role, m.content["function"]) for m in cli_requests] == [
        ("action_request", "Bash"), ("action_request", "search"),
        ("action_response", "Bash"), ("action_response", "search"),
    ]
    assert cli_requests[3].metadata["is_error"] is True
    assert cli_requests[1].content["arguments"] == {"q": "lion"}
    assert [e.content["function"] for e in branch.logs.of_kind("cli_tool")] == ["Bash", "search", "Bash", "search"]
    assert len(branch.logs.of_kind("action")) == 1
    assert trace.meta["cli"]["cli_tool_calls"] == 2
    # lionops' own tools reached the CLI model as schemas in the prompt.
    prompt = recorded(record)["stdin"]
    assert "get_weather" in prompt and "send_message" in prompt
    assert "action_requests" in prompt and "action_responses" not in prompt


async def test_a_split_line_is_recovered():
    branch = Branch(chat_model=fake_model("split_line.jsonl", "--chunk", "7"))
    result, trace = await branch.operate_traced(instruction="n?", response_format=Answer)
    assert isinstance(result, Answer) and result.answer == 16
    assert trace.meta["cli"]["stream"]["recovered"] == 1
    assert trace.meta["cli"]["stream"]["rate_limit_events"] == 1


async def test_an_unrecoverable_line_raises_naming_it():
    box = ToolBox()
    branch = Branch(chat_model=fake_model("corrupt_line.jsonl"), tools=box.tools())
    with pytest.raises(CLIStreamError) as info:
        await branch.operate(instruction="n?", response_format=Answer, actions=True)
    assert info.value.line == 3
    assert info.value.preview.startswith('{"type":"assistant"')
    assert "stdout line 3" in str(info.value)
    trace = branch.traces[-1]
    assert trace.states == ADAPTER_FAILED and trace.exit == "failed"
    assert "CLIStreamError" in trace.error
    assert roles(branch) == ["user"]
    assert box.total == 0


async def test_garbage_lines_and_rate_limit_events_are_ignored_quietly():
    branch = Branch(chat_model=fake_model("garbage_lines.jsonl", "--chunk", "5"))
    result, trace = await branch.operate_traced(instruction="n?", response_format=Answer)
    assert isinstance(result, Answer) and result.answer == 5
    stream = trace.meta["cli"]["stream"]
    assert stream["noise"] == 4 and stream["rate_limit_events"] == 1 and stream["recovered"] == 0
    assert stream["blank"] == 3


async def test_exit_1_carries_the_stderr_tail_without_secrets():
    secret = "sk-ant-SENTINEL-123"
    model = fake_model(
        "exit1.jsonl", "--exit", "1", "--stderr", f"starting\nError: invalid x-api-key {secret}\n",
        env={"ANTHROPIC_API_KEY": secret},
    )
    assert secret not in repr(model) and secret not in repr(model.endpoint)
    branch = Branch(chat_model=model)
    with pytest.raises(CLIProcessError) as info:
        await branch.operate(instruction="hi")
    err = info.value
    assert err.returncode == 1
    assert "exited with status 1" in str(err)
    assert "Error: invalid x-api-key [redacted]" in str(err)
    trace = branch.traces[-1]
    assert trace.states == ADAPTER_FAILED
    for text in (str(err), repr(err), trace.to_json(), json.dumps(branch.logs.to_list())):
        assert secret not in text


async def test_a_stderr_echoing_part_of_the_key_shows_none_of_it():
    secret = "sk-ant-SENTINEL-0123456789"
    model = fake_model("exit1.jsonl", "--exit", "1", "--stderr", "Error: invalid x-api-key sk-ant-SENT...23456789\n",
                       env={"ANTHROPIC_API_KEY": secret})
    branch = Branch(chat_model=model)
    with pytest.raises(CLIProcessError) as info:
        await branch.operate(instruction="hi")
    for text in (str(info.value), repr(info.value), branch.traces[-1].to_json(), json.dumps(branch.logs.to_list())):
        assert "SENT" not in text and "23456789" not in text
    assert "Error: invalid x-api-key [redacted]" in str(info.value)


async def test_hang_past_timeout_kills_the_process_group(tmp_path):
    pid_file, child_file = tmp_path / "pid", tmp_path / "child"
    model = fake_model("hang.jsonl", "--hang-after", "1", "--pidfile", str(pid_file),
                       "--child-pidfile", str(child_file), timeout=1.0, kill_grace=0.2)
    branch = Branch(chat_model=model)
    with pytest.raises(CLITimeoutError) as info:
        await branch.operate(instruction="hi")
    assert "no result within 1.0 s" in str(info.value)
    assert isinstance(info.value, TimeoutError)
    assert not alive(read_pid(pid_file))
    assert not alive(read_pid(child_file))
    assert branch.traces[-1].exit == "failed"


async def test_kill_mid_stream_is_an_error_and_the_stream_file_keeps_every_line(tmp_path):
    streams = tmp_path / "streams"
    branch = Branch(chat_model=fake_model("killed.jsonl", "--kill-after", "2"))
    with pytest.raises(CLIProcessError) as info:
        await branch.operate(instruction="hi", response_format=Answer, stream_persist=True,
                             persist_dir=str(streams))
    assert "killed by signal SIGKILL" in str(info.value)
    files = list(streams.glob("*.jsonl"))
    assert len(files) == 1 and info.value.stream_path == str(files[0])
    expected = b"".join(fixture("killed.jsonl").read_bytes().splitlines(keepends=True)[:2])
    assert files[0].read_bytes() == expected
    assert all(json.loads(line) for line in files[0].read_text().splitlines())
    assert branch.traces[-1].meta["cli"]["stream_path"] == str(files[0])


@pytest.mark.parametrize("code", [0, 1])
async def test_an_error_result_fails_whatever_the_exit_code(code, tmp_path):
    box = ToolBox()
    branch = Branch(chat_model=fake_model("result_error.jsonl", "--exit", str(code)), tools=box.tools())
    with pytest.raises(CLIResultError) as info:
        await branch.operate(instruction="go", response_format=Score, actions=True,
                             handle_validation="return_value", snapshot_dir=str(tmp_path))
    err = info.value
    assert err.subtype == "error_max_turns"
    assert err.returncode == code
    assert "error_max_turns" in str(err) and "no error message" in str(err)
    assert box.total == 0
    trace = branch.traces[-1]
    assert trace.states == ADAPTER_FAILED and trace.exit == "failed"
    assert roles(branch) == ["user"]  # nothing parsed, no assistant turn recorded
    snap = json.loads((tmp_path / f"{branch.id}.json").read_text())
    assert [e["kind"] for e in snap["logs"]] == ["cli_error"]


async def test_cancellation_leaves_no_child_running(tmp_path):
    pid_file, child_file = tmp_path / "pid", tmp_path / "child"
    model = fake_model("hang.jsonl", "--hang-after", "1", "--pidfile", str(pid_file),
                       "--child-pidfile", str(child_file), kill_grace=0.2)
    branch = Branch(chat_model=model)

    async def cancel_once_started(scope: anyio.CancelScope) -> None:
        while not child_file.exists():
            await anyio.sleep(0.01)
        scope.cancel()

    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_started, scope)
            await branch.operate(instruction="hi")
    assert scope.cancelled_caught
    assert not alive(read_pid(pid_file))
    assert not alive(read_pid(child_file))
    assert branch.traces[-1].exit == "failed"


async def test_stream_persist_and_snapshot(tmp_path):
    streams, snaps = tmp_path / "streams", tmp_path / "snaps"
    branch = Branch(chat_model=fake_model("fenced_json.jsonl", "--chunk", "11"))
    result, trace = await branch.operate_traced(
        instruction="n?", response_format=Answer, stream_persist=True,
        persist_dir=str(streams), snapshot_dir=str(snaps),
    )
    assert result.answer == 42
    (stream,) = streams.glob("*.jsonl")
    assert stream.read_bytes() == fixture("fenced_json.jsonl").read_bytes()
    snap = json.loads((snaps / f"{branch.id}.json").read_text())
    assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]
    assert snap["messages"][1]["metadata"]["cli"]["stream_path"] == str(stream)
    assert trace.meta["cli"]["snapshot_path"] == str(snaps / f"{branch.id}.json")
    assert not list(snaps.glob(".*.tmp"))


async def test_no_persistence_without_stream_persist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    branch = Branch(chat_model=fake_model("plain_answer.jsonl"))
    await branch.operate(instruction="hi")
    assert not (tmp_path / ".lionops").exists()
    assert "stream_path" not in branch.traces[-1].meta["cli"]


async def test_run_param_and_chat_param_runs_agree(tmp_path):
    """One conversation, two transports: same result, same trace path."""
    text = [json.loads(line) for line in fixture("two_tool_uses.jsonl").read_text().splitlines()][-1]["result"]
    seen: list[object] = []

    async def same_text(branch, instruction, chat_param, parse_param=None,
                        clear_messages=False, skip_validation=False):
        seen.append(chat_param)
        begin_turn(branch, instruction, chat_param, clear_messages, schema_in_prompt=True)
        return await finish_turn(branch, text, parse_param, skip_validation)

    outcomes = []
    for kw in (
        {"chat_model": fake_model("two_tool_uses.jsonl"), "stream_persist": True, "persist_dir": str(tmp_path)},
        {"middle": same_text},
    ):
        box = ToolBox()
        branch = Branch(tools=box.tools())
        result, trace = await branch.operate_traced(
            instruction="Weather?", response_format=Answer, actions=True, **kw,
        )
        outcomes.append((result.model_dump(), trace.path(), dict(box.calls)))
    assert type(seen[0]) is ChatParam and not isinstance(seen[0], RunParam)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1][-1] == ("enrich", "enriched", "returned")


async def test_skip_validation_returns_the_raw_text():
    branch = Branch(chat_model=fake_model("fenced_json.jsonl"))
    result, trace = await branch.operate_traced(instruction="n?", response_format=Answer, skip_validation=True)
    assert result.startswith("Here is the answer:")
    assert trace.exit == "skip_validation"


async def test_codex_exec_json_session(tmp_path):
    box = ToolBox()
    record = tmp_path / "call.json"
    model = fake_model("codex_session.jsonl", "--record", str(record), provider="codex", model="gpt-5-codex")
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="Find", response_format=Answer, actions=True)
    assert result.answer == 8 and result.action_responses[0].output == ["lion"]
    assert dict(box.calls) == {"search": 1}
    assert trace.exit == "enriched"
    # Codex counts cached tokens inside input_tokens: lionops reports them apart, once.
    assert trace.meta["usage"] == {"input_tokens": 1200, "output_tokens": 60,
                                   "cache_read_input_tokens": 1200, "total_tokens": 1260}
    assert trace.meta["cli"]["session_id"] == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    cli = [m for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert [(m.role, m.content["function"]) for m in cli] == [
        ("action_request", "command_execution"), ("action_response", "command_execution"),
    ]
    assert cli[0].content["arguments"] == {"command": "bash -lc ls"}
    argv = recorded(record)["argv"]
    assert argv[-5:] == ["exec", "--json", "-m", "gpt-5-codex", "-"]


async def test_codex_turn_failed_is_an_error():
    branch = Branch(chat_model=fake_model("codex_failed.jsonl", provider="codex"))
    with pytest.raises(CLIResultError) as info:
        await branch.operate(instruction="go")
    assert info.value.subtype == "turn.failed"
    assert "retry limit reached" in str(info.value)


async def test_missing_executable_is_a_clear_error():
    branch = Branch(chat_model=iModel(provider="claude_code", cli_command=["/nonexistent/claude"]))
    with pytest.raises(CLIProcessError, match="could not start '/nonexistent/claude'"):
        await branch.operate(instruction="hi")


async def test_run_param_without_a_cli_model_is_a_configuration_error(tmp_path):
    branch = Branch()
    with pytest.raises(ConfigurationError, match="CLI-backed model"):
        await branch.operate(instruction="hi", stream_persist=True, persist_dir=str(tmp_path))
    assert branch.traces[-1].states == ADAPTER_FAILED


async def test_run_and_collect_called_directly_with_a_chat_param():
    branch = Branch()
    param = ChatParam(imodel=fake_model("plain_answer.jsonl"))
    assert await run_and_collect(branch, "hi", param) == "Paris is the capital of France."
    assert roles(branch) == ["user", "assistant"]


def test_imodel_is_cli_and_accepts_a_command_string():
    model = iModel(provider="claude_code", cli_command=f"{sys.executable} -m claude", model="m", timeout=5)
    assert model.is_cli
    assert model.endpoint.cli_command == [sys.executable, "-m", "claude"]
    assert iModel(provider="codex").endpoint.argv() == ["codex", "exec", "--json", "-"]


async def test_replay_of_a_session_recorded_from_the_real_cli():
    """tests/fixtures/cli/real_claude_code_2.1.328.jsonl was printed by Claude Code
    2.1.328 against the loopback peer of test_cli_claude_code_real.py."""
    box = ToolBox()
    model = fake_model("real_claude_code_2.1.328.jsonl", "--chunk", "64")
    branch = Branch(chat_model=model, tools=box.tools())
    result, trace = await branch.operate_traced(instruction="Weather?", response_format=Answer, actions=True)
    assert result.answer == 7 and dict(box.calls) == {"get_weather": 1}
    assert trace.states == WITH_ACTIONS
    cli = [(m.role, m.content["function"]) for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert cli == [("action_request", "Read"), ("action_response", "Read")]
    assert trace.meta["usage"]["input_tokens"] == 642
    assert trace.meta["cli"]["model"] == "claude-sonnet-4-5"


async def test_a_failing_sink_surfaces_as_itself_and_stops_the_cli(tmp_path):
    pid_file = tmp_path / "pid"
    endpoint = fake_model("hang.jsonl", "--hang-after", "1", "--pidfile", str(pid_file)).endpoint

    async def full_disk(chunk: bytes) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await endpoint.run("hi", sink=full_disk)
    assert not alive(read_pid(pid_file))


async def test_per_call_cli_args_are_appended(tmp_path):
    record = tmp_path / "call.json"
    branch = Branch(chat_model=fake_model("plain_answer.jsonl", "--record", str(record), args=["--max-turns", "3"]))
    await branch.operate(instruction="hi", cli_args=["--permission-mode", "plan"])
    assert recorded(record)["argv"][-4:] == ["--max-turns", "3", "--permission-mode", "plan"]


@pytest.mark.parametrize("provider", ["claude_code", "codex"])
async def test_the_branch_system_message_reaches_the_cli(provider, tmp_path):
    record = tmp_path / "call.json"
    session = "plain_answer.jsonl" if provider == "claude_code" else "codex_session.jsonl"
    branch = Branch(chat_model=fake_model(session, "--record", str(record), provider=provider),
                    system="Answer tersely.")
    await branch.operate(instruction="hi")
    call = recorded(record)
    if provider == "claude_code":
        assert call["argv"][-2:] == ["--append-system-prompt", "Answer tersely."]
        assert call["stdin"].startswith("hi")
    else:
        assert call["stdin"].startswith("Answer tersely.\n\nhi")


async def test_cli_stop_reason_is_that_of_the_latest_message(tmp_path):
    """An earlier message cut at max_tokens, followed by a complete final
    answer, is not a cut-off: the stop reason is the latest message's."""
    import json as _json

    from lionops import Branch
    from tests.cli_support import FIXTURES, fake_model
    from tests.helpers import Answer

    lines = [_json.loads(x) for x in (FIXTURES / "fenced_json.jsonl").read_text().splitlines() if x.strip()]
    early = _json.loads(_json.dumps(lines[1]))
    early["message"]["content"][0]["text"] = "thinking..."
    early["message"]["stop_reason"] = "max_tokens"
    final = lines[1]  # stop_reason null, the complete fenced answer
    result = dict(lines[2])
    result.pop("stop_reason", None)
    session = tmp_path / "late_answer.jsonl"
    session.write_text("".join(_json.dumps(x) + "\n" for x in (lines[0], early, final, result)))
    out = await Branch(chat_model=fake_model(str(session))).operate(instruction="x", response_format=Answer)
    assert isinstance(out, Answer) and out.answer == 42
