"""What every CLI agent shares, through real subprocesses (tests/fake_cli.py):
a result ends the turn, split messages join exactly, hostile lines cost
bounded work, secrets in argv are redacted, and the server presets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lionops import Branch, iModel
from lionops.endpoints.cli import (
    CODEX_KEY_ENV,
    CLIProcessError,
    CLIResultError,
    CLIStreamError,
    GeminiEndpoint,
    argv_secrets,
)
from lionops.replay import record
from tests.cli_support import ADAPTER_FAILED, NO_ACTIONS, WITH_ACTIONS, alive, fake_model, read_pid, recorded
from tests.helpers import Answer, ToolBox

pytestmark = pytest.mark.anyio

SESSION_ID = "5f0c1e2a-7d4b-4c1e-9a3f-2b8d6e4c1a90"


class Note(BaseModel):
    text: str


def assistant(msg_id: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": msg_id, "role": "assistant", "content": list(blocks),
                                             "stop_reason": None}, "parent_tool_use_id": None}


def write(path: Path, *events: Any) -> Path:
    path.write_bytes(b"".join(e if isinstance(e, bytes) else json.dumps(e).encode() + b"\n" for e in events))
    return path


INIT = {"type": "system", "subtype": "init", "session_id": SESSION_ID, "model": "claude-sonnet-4-5"}


def result(text: str = "") -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": text, "session_id": SESSION_ID,
            "usage": {"input_tokens": 10, "output_tokens": 2}}


# ---------------------------------------------------------------- a result ends the turn


@pytest.mark.parametrize("extra", [[], ["--close-stdout"], ["--exit-on-term", "143"]],
                         ids=["keeps_stdout_open", "closes_stdout", "exits_143_on_sigterm"])
async def test_a_cli_that_lingers_after_its_result_returns_the_answer(tmp_path, extra):
    pid, child = tmp_path / "pid", tmp_path / "child"
    model = fake_model("plain_answer.jsonl", "--hang-after", "99", "--pidfile", str(pid),
                       "--child-pidfile", str(child), *extra, timeout=600, linger=0.2)
    branch = Branch(chat_model=model)
    out, trace = await branch.operate_traced(instruction="Capital of France?")
    assert out == "Paris is the capital of France." and trace.states == NO_ACTIONS
    assert trace.meta["cli"]["ended_after_result"] is True and trace.meta["cli"]["exit_code"] < 0
    assert not alive(read_pid(pid)) and not alive(read_pid(child))


async def test_a_codex_turn_ends_at_turn_completed_even_when_the_cli_lingers(tmp_path):
    box = ToolBox()
    model = fake_model("codex_session.jsonl", "--hang-after", "99", provider="codex", model="gpt-5-codex",
                       timeout=600, linger=0.2)
    result_, trace = await Branch(chat_model=model, tools=box.tools()).operate_traced(
        instruction="Find", response_format=Answer, actions=True)
    assert result_.answer == 8 and trace.states == WITH_ACTIONS and box.calls == {"search": 1}


# ---------------------------------------------------------------- Claude: one message over several events


async def test_events_sharing_a_message_id_join_exactly(tmp_path):
    """The answer's JSON string is cut between two events of one message:
    joined as printed (no inserted newline), it parses."""
    session = write(tmp_path / "s.jsonl", INIT,
                    assistant("msg_a", {"type": "text", "text": '{"text": "line one, '}),
                    assistant("msg_a", {"type": "text", "text": 'line two"}'}),
                    result())
    out = await Branch(chat_model=fake_model(str(session))).operate(instruction="n", response_format=Note)
    assert out.text == "line one, line two"


async def test_only_the_last_message_after_the_tools_is_the_answer(tmp_path):
    session = write(tmp_path / "s.jsonl", INIT,
                    assistant("msg_a", {"type": "text", "text": '{"text": "draft"}'}),
                    assistant("msg_b", {"type": "text", "text": '{"text": '}, {"type": "text", "text": '"final"}'}),
                    result())
    out = await Branch(chat_model=fake_model(str(session))).operate(instruction="n", response_format=Note)
    assert out.text == "final"


# ---------------------------------------------------------------- hostile lines


async def test_a_broken_line_made_of_event_markers_is_a_clear_error(tmp_path):
    hostile = ('{"type":"assistant","x":"' + '{"type":' * 200_000).encode() + b"\n"
    session = write(tmp_path / "s.jsonl", INIT, hostile, result("x"))
    branch = Branch(chat_model=fake_model(str(session), timeout=120))
    with pytest.raises(CLIStreamError) as info:
        await branch.operate(instruction="go")
    assert info.value.line == 2 and info.value.preview.startswith('{"type":"assistant"')
    assert branch.traces[-1].states == ADAPTER_FAILED


async def test_a_line_that_never_ends_is_bounded_and_ends_the_turn(tmp_path):
    pid = tmp_path / "pid"
    session = tmp_path / "s.jsonl"
    session.write_bytes(json.dumps(INIT).encode() + b"\n" + b'{"type":"assistant","x":"' + b"y" * 3_000_000)
    model = fake_model(str(session), "--hang-after", "99", "--pidfile", str(pid), "--chunk", "65536",
                       timeout=600, max_line_bytes=1_000_000)
    branch = Branch(chat_model=model)
    with pytest.raises(CLIStreamError, match="longer than max_line_bytes") as info:
        await branch.operate(instruction="go")
    assert info.value.line == 2 and not alive(read_pid(pid))
    assert branch.traces[-1].states == ADAPTER_FAILED


def test_line_bounds_are_validated():
    with pytest.raises(ValueError):
        iModel(provider="claude_code", max_line_bytes=0)


# ---------------------------------------------------------------- secrets in argv


def test_argv_secrets_finds_every_form():
    argv = ["--api-key", "s1-secret", "--api-key=s2-secret", "-k", "s3-secret", "MY_TOKEN=s4-secret",
            "-c", 'model_providers.x.api_key="s5-secret"', "--model", "gpt-5", "--max-tokens", "100",
            "-c", "model_providers.x.env_key=PEER_KEY"]
    assert sorted(argv_secrets(argv)) == sorted(["s1-secret", "s2-secret", "s3-secret", "s4-secret",
                                                 '"s5-secret"', "s5-secret"])


async def test_secrets_in_args_are_redacted_from_errors_logs_traces_and_cassettes(tmp_path):
    secrets = ["sekrit-one-111", "sekrit-two-222", "sekrit-three-333", "sekrit-four-444", "sekrit-five-555"]
    args = ["--api-key", secrets[0], f"--auth-token={secrets[1]}", "-k", secrets[2], f"SERVICE_TOKEN={secrets[3]}"]
    stderr = "bad credentials: " + " ".join(secrets) + "\n"
    model = fake_model("result_error.jsonl", "--stderr", stderr, "--exit", "1", args=args)
    branch = Branch(chat_model=model)
    path = tmp_path / "run.json"
    with pytest.raises(CLIResultError) as info:
        await record(path, branch, instruction="go", cli_args=["--api-key", secrets[4]])
    err = info.value
    written = [str(err), repr(err), err.stderr_tail, path.read_text(), branch.traces[-1].to_json(),
               json.dumps(branch.logs.to_list()), repr(model.endpoint)]
    for secret in secrets:
        assert all(secret not in text for text in written), secret
    assert "[redacted]" in err.stderr_tail


# ---------------------------------------------------------------- server presets


def test_codex_preset_builds_the_loopback_provider(tmp_path):
    model = iModel(provider="codex", model="gpt-5-codex", base_url="http://127.0.0.1:8000/v1",
                   api_key="sk-preset-key-0001", home=tmp_path / "codex")
    argv = model.endpoint.argv()
    assert argv[:3] == ["codex", "exec", "--json"] and argv[-1] == "-"
    assert ["--disable", "plugins"] == argv[argv.index("--disable"):argv.index("--disable") + 2]
    assert "--skip-git-repo-check" in argv and "--ephemeral" in argv and "model_provider=lionops" in argv
    assert not any("model_providers" in a or "127.0.0.1" in a for a in argv)  # the provider is in a 0600 file
    model.endpoint.prepare()
    config = tmp_path / "codex" / "config.toml"
    provider = config.read_text()
    assert 'base_url = "http://127.0.0.1:8000/v1"' in provider and f'env_key = "{CODEX_KEY_ENV}"' in provider
    assert 'wire_api = "responses"' in provider and "request_max_retries = 0" in provider
    assert config.stat().st_mode & 0o777 == 0o600
    env = model.endpoint._environ()
    assert env[CODEX_KEY_ENV] == "sk-preset-key-0001" and env["CODEX_HOME"] == str(tmp_path / "codex")
    assert "sk-preset-key-0001" not in repr(model.endpoint)


async def test_gemini_preset_writes_its_settings_and_runs(tmp_path):
    record_file, home = tmp_path / "call.json", tmp_path / "gemini"
    session = write(tmp_path / "g.jsonl",
                    {"type": "init", "session_id": "g1", "model": "gemini-2.5-pro"},
                    {"type": "message", "role": "user", "content": "echo"},
                    {"type": "message", "role": "assistant", "content": '{"answer": ', "delta": True},
                    {"type": "message", "role": "assistant", "content": "5}", "delta": True},
                    {"type": "result", "status": "success", "stats": {"input_tokens": 90, "input": 30, "cached": 60,
                                                                      "output_tokens": 4, "duration_ms": 12}})
    model = fake_model(str(session), "--record", str(record_file), provider="gemini", model="gemini-2.5-pro",
                       base_url="http://127.0.0.1:9999", api_key="gem-preset-key-1", home=home)
    out, trace = await Branch(chat_model=model).operate_traced(instruction="n?", response_format=Answer)
    assert out.answer == 5
    assert trace.meta["usage"] == {"input_tokens": 30, "output_tokens": 4, "cache_read_input_tokens": 60,
                                   "total_tokens": 34}
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["general"]["maxAttempts"] == 1 and settings["telemetry"]["enabled"] is False
    argv = recorded(record_file)["argv"]
    assert argv[-7:] == ["-p", "", "-o", "stream-json", "-m", "gemini-2.5-pro", "--skip-trust"]
    env = model.endpoint._environ()
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9999" and env["GEMINI_CLI_HOME"] == str(home)


async def test_gemini_error_result_fails_whatever_the_exit_and_keeps_warnings(tmp_path):
    session = write(tmp_path / "g.jsonl",
                    {"type": "init", "session_id": "g1", "model": "m"},
                    {"type": "message", "role": "assistant", "content": '{"answer": 1}', "delta": True},
                    {"type": "error", "severity": "warning", "message": "retrying soon"},
                    {"type": "error", "severity": "error", "message": "Model stream ended without a finish reason."},
                    {"type": "result", "status": "error", "stats": {}})
    box = ToolBox()
    branch = Branch(chat_model=fake_model(str(session), provider="gemini"), tools=box.tools())
    with pytest.raises(CLIResultError) as info:
        await branch.operate(instruction="go", response_format=Answer, actions=True)
    err = info.value
    assert err.returncode == 0 and err.subtype == "error"
    assert err.summary.count("without a finish reason") == 1 and err.run.warnings == ["retrying soon"]
    assert box.total == 0 and branch.traces[-1].states == ADAPTER_FAILED


def test_gemini_defaults_to_one_attempt():
    assert GeminiEndpoint().max_attempts == 1
    with pytest.raises(ValueError):
        GeminiEndpoint(max_attempts=0)
    with pytest.raises(ValueError, match="base_url"):
        iModel(provider="gemini", api_key="k-1234")


async def test_a_codex_process_error_without_a_result_is_still_a_process_error(tmp_path):
    session = write(tmp_path / "c.jsonl", {"type": "thread.started", "thread_id": "t"})
    with pytest.raises(CLIProcessError):
        await Branch(chat_model=fake_model(str(session), "--exit", "2", provider="codex")).operate(instruction="x")


# ---------------------------------------------------------------- Codex answer and usage


async def test_codex_phase_marks_the_final_answer_and_usage_keeps_extra_fields(tmp_path):
    box = ToolBox()
    session = write(tmp_path / "c.jsonl",
                    {"type": "thread.started", "thread_id": "t1"},
                    {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "phase": "final_answer",
                                                        "text": '{"answer": 3}'}},
                    {"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "phase": "commentary",
                                                        "text": '{"answer": 9, "action_requests": '
                                                                '[{"function": "search", "arguments": {"q": "x"}}]}'}},
                    {"type": "turn.completed", "usage": {"input_tokens": 500, "cached_input_tokens": 300,
                                                         "cache_write_input_tokens": 7, "output_tokens": 20,
                                                         "reasoning_output_tokens": 5}})
    model = fake_model(str(session), provider="codex", model="gpt-5-codex")
    out, trace = await Branch(chat_model=model, tools=box.tools()).operate_traced(
        instruction="n", response_format=Answer, actions=True)
    assert out.answer == 3 and box.total == 0
    assert trace.meta["usage"] == {"input_tokens": 200, "cache_read_input_tokens": 300,
                                   "cache_creation_input_tokens": 7, "output_tokens": 20,
                                   "reasoning_output_tokens": 5, "total_tokens": 220}


# ---------------------------------------------------------------- streams printed by the real CLIs


@pytest.mark.parametrize(("session", "provider", "tool"), [
    ("real_codex_0.169.0.jsonl", "codex", "command_execution"),
    ("real_gemini_0.61.0.jsonl", "gemini", "read_file"),
], ids=["codex", "gemini"])
async def test_streams_printed_by_the_real_clis_run_through_act(session, provider, tool):
    """Recorded from the real CLIs against the loopback peers (the tests
    named test_cli_*_real run them live): the same result without npm."""
    box = ToolBox()
    model = fake_model(session, "--chunk", "13", provider=provider, model="m")
    branch = Branch(chat_model=model, tools=box.tools())
    out, trace = await branch.operate_traced(instruction="Weather in Paris?", response_format=Answer, actions=True)
    assert out.answer == 7 and box.calls == {"get_weather": 1} and trace.states == WITH_ACTIONS
    cli = [m for m in branch.messages if m.metadata.get("executed_by") == "cli"]
    assert [(m.role, m.content["function"]) for m in cli] == [("action_request", tool), ("action_response", tool)]
    usage = trace.meta["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == {"codex": 2400, "gemini": 1800}[provider]


async def test_secrets_written_inside_arguments_are_redacted(tmp_path):
    """A key inside a ``-c`` config string or a JSON argument, an
    authorization header, a camel-case flag: redacted like ``--api-key V``."""
    secrets = ["inline-key-0001", "bearer-tok-0002", "basic-cred-0003", "json-key-0004", "camel-tok-0005",
               "call-bearer-0006"]
    args = ["-c", f'model_providers.x={{api_key="{secrets[0]}", name="x"}}',
            "--header", f"Authorization: Bearer {secrets[1]}", "-H", f"authorization={secrets[2]}",
            "--settings", json.dumps({"apiKey": secrets[3], "model": "m"}), "--accessToken", secrets[4]]
    stderr = "bad credentials: " + " ".join(secrets) + "\n"
    model = fake_model("result_error.jsonl", "--stderr", stderr, "--exit", "1", args=args)
    branch = Branch(chat_model=model)
    path = tmp_path / "run.json"
    with pytest.raises(CLIResultError) as info:
        await record(path, branch, instruction="go", cli_args=["--header", f"Authorization: Bearer {secrets[5]}"])
    err = info.value
    written = [str(err), repr(err), err.stderr_tail, path.read_text(), branch.traces[-1].to_json(),
               json.dumps(branch.logs.to_list())]
    for secret in secrets:
        assert all(secret not in text for text in written), secret
    # Names that only name a variable, and ordinary options, are kept.
    assert argv_secrets(["-c", 'model_providers.p={name="p", env_key="PEER_KEY", base_url="http://h"}',
                         "--max-tokens", "100", "-c", "model_reasoning_effort=high"]) == []


FAILED_THEN_SUCCESS = {
    "claude_code": [INIT, {"type": "result", "subtype": "error_during_execution", "is_error": True, "errors": ["boom"]},
                    assistant("m9", {"type": "text", "text": '{"answer": 3, "action_requests": '
                                     '[{"function": "search", "arguments": {"q": "x"}}]}'}),
                    result('{"answer": 3}')],
    "codex": [{"type": "thread.started", "thread_id": "t1"}, {"type": "turn.failed", "error": {"message": "boom"}},
              {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": '{"answer": 3}'}},
              {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}}],
    "gemini": [{"type": "init", "session_id": "g1", "model": "m"},
               {"type": "result", "status": "error", "error": {"message": "boom"}, "stats": {}},
               {"type": "message", "role": "assistant", "content": '{"answer": 3}', "delta": True},
               {"type": "result", "status": "success", "stats": {}}],
}


@pytest.mark.parametrize("provider", list(FAILED_THEN_SUCCESS))
async def test_a_reported_failure_is_not_undone_by_a_later_result(tmp_path, provider):
    session = write(tmp_path / "s.jsonl", *FAILED_THEN_SUCCESS[provider])
    box = ToolBox()
    branch = Branch(chat_model=fake_model(str(session), provider=provider), tools=box.tools())
    with pytest.raises(CLIResultError) as info:
        await branch.operate(instruction="go", response_format=Answer, actions=True)
    assert "boom" in info.value.summary and info.value.subtype != "success"
    assert box.total == 0 and branch.traces[-1].states == ADAPTER_FAILED


DRAFT = '{"answer": 1, "action_requests": [{"function": "send_message", "arguments": {"to": "x", "body": "y"}}]}'
THOUGHT = f"<think>I could send {DRAFT}</think>\n"


def thinking_session(path: Path, provider: str, answer: str) -> Path:
    if provider == "gemini":
        return write(path, {"type": "init", "session_id": "g1", "model": "m"},
                     {"type": "message", "role": "assistant", "content": THOUGHT, "delta": True},
                     {"type": "message", "role": "assistant", "content": answer, "delta": True},
                     {"type": "result", "status": "success", "stats": {}})
    return write(path, INIT, assistant("m1", {"type": "text", "text": THOUGHT}, {"type": "text", "text": answer}),
                 result(THOUGHT + answer))


@pytest.mark.parametrize("provider", ["claude_code", "gemini"])
async def test_reasoning_in_a_cli_answer_is_never_the_answer(tmp_path, provider):
    box = ToolBox()
    session = thinking_session(tmp_path / "s.jsonl", provider, '{"answer": 7}')
    branch = Branch(chat_model=fake_model(str(session), provider=provider), tools=box.tools())
    out = await branch.operate(instruction="go", response_format=Answer, actions=True)
    assert out.answer == 7 and box.total == 0
    (message,) = [m for m in branch.messages if m.role == "assistant"]
    assert message.content == '{"answer": 7}' and DRAFT in message.metadata["reasoning"]
    # The raw answer under skip_validation holds no reasoning either.
    session = thinking_session(tmp_path / "t.jsonl", provider, "The answer is 7.")
    raw = await Branch(chat_model=fake_model(str(session), provider=provider)).operate(
        instruction="go", skip_validation=True)
    assert raw == "The answer is 7."


@pytest.mark.parametrize("provider", ["codex", "gemini"])
async def test_a_notice_after_the_result_is_kept_as_a_warning(tmp_path, provider):
    if provider == "codex":
        events = [{"type": "thread.started", "thread_id": "t1"},
                  {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": '{"answer": 3}'}},
                  {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}},
                  {"type": "error", "message": "late notice"}]
    else:
        events = [{"type": "init", "session_id": "g1", "model": "m"},
                  {"type": "message", "role": "assistant", "content": '{"answer": 3}', "delta": True},
                  {"type": "result", "status": "success", "stats": {}},
                  {"type": "error", "severity": "warning", "message": "late notice"}]
    session = write(tmp_path / "s.jsonl", *events)
    out, trace = await Branch(chat_model=fake_model(str(session), provider=provider)).operate_traced(
        instruction="go", response_format=Answer)
    assert out.answer == 3 and trace.meta["cli"]["warnings"] == ["late notice"]


async def test_a_credential_inside_an_env_value_is_redacted(tmp_path):
    secret = "hdr-bearer-0007"
    echo = "import os, sys; sys.stderr.write('sent ' + os.environ['ANTHROPIC_CUSTOM_HEADERS']); sys.exit(1)"
    model = iModel(provider="claude_code", cli_command=[sys.executable, "-c", echo], timeout=30,
                   env={"ANTHROPIC_CUSTOM_HEADERS": f"Authorization: Bearer {secret}"})
    branch = Branch(chat_model=model)
    with pytest.raises(CLIProcessError) as info:
        await record(tmp_path / "run.json", branch, instruction="go")
    for text in (str(info.value), (tmp_path / "run.json").read_text(), branch.traces[-1].to_json(),
                 json.dumps(branch.logs.to_list())):
        assert secret not in text
