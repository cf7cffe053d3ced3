"""The ``lionops_cassette`` fixture and its record modes, in a separate pytest run (pytester)."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

TEST_FILE = '''
import json
import pytest
from lionops import Branch, iModel
from lionops.testing import OpenAIServer, completion

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend():
    return "asyncio"

async def ask(cassette, *questions):
    """Operate once per question; a live loopback server only while recording."""
    replies = [completion(json.dumps({"answer": q})) for q in questions]
    with OpenAIServer(replies) as server:
        model = iModel(provider="openai", model="m", base_url=server.base_url, api_key="sk-plugin-test-key")
        branch = Branch(chat_model=model)
        for q in questions:
            live = cassette.recording
            result = await cassette.operate(branch, instruction=q)
            print(f"{q}: {'recorded' if live else 'replayed'} {result}")
        await model.aclose()
    return server.chat_requests

async def test_one(lionops_cassette):
    await ask(lionops_cassette, "one")

async def test_two(lionops_cassette):
    await ask(lionops_cassette, QUESTIONS)
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_app=TEST_FILE.replace("QUESTIONS", '"one", "two"'))
    return pytester


def cassette(pytester: pytest.Pytester, name: str) -> dict:
    return json.loads((pytester.path / "cassettes" / "test_app" / f"{name}.json").read_text())


def test_once_records_then_replays(project):
    first = project.runpytest("-s")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*one: recorded*", "*two: recorded*"])
    assert len(cassette(project, "test_two")["operations"]) == 2
    assert b"sk-plugin-test-key" not in (project.path / "cassettes" / "test_app" / "test_one.json").read_bytes()
    second = project.runpytest("-s")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["*one: replayed*", "*two: replayed*"])
    second.stdout.no_fnmatch_line("*recorded*")


def test_none_refuses_to_record(project):
    result = project.runpytest("--lionops-record-mode=none", "-k", "test_one")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CassetteNotFoundError: no cassette at *test_one.json*"])


def test_new_episodes_appends_and_all_rerecords(project):
    project.runpytest("-k", "test_one").assert_outcomes(passed=1)
    two = project.path / "cassettes" / "test_app" / "test_two.json"
    project.runpytest("-k", "test_two").assert_outcomes(passed=1)
    data = json.loads(two.read_text())
    data["operations"].pop()
    two.write_text(json.dumps(data))
    grown = project.runpytest("-s", "-k", "test_two", "--lionops-record-mode=new_episodes")
    grown.assert_outcomes(passed=1)
    grown.stdout.fnmatch_lines(["*one: replayed*", "*two: recorded*"])
    assert len(cassette(project, "test_two")["operations"]) == 2
    again = project.runpytest("-s", "-k", "test_one", "--lionops-record-mode=all")
    again.stdout.fnmatch_lines(["*one: recorded*"])


def test_marker_mode_and_unreplayed_operations(project):
    project.runpytest("-k", "test_two").assert_outcomes(passed=1)
    shorter = TEST_FILE.replace("QUESTIONS", '"one"').replace(
        "async def test_two", "@pytest.mark.lionops_cassette(record_mode='none')\nasync def test_two")
    project.makepyfile(test_app=shorter)
    result = project.runpytest("-k", "test_two")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*ReplayDivergence: operation 1: 1 recorded operation(s) of *test_two.json were not replayed*"])


CLI_TEST_FILE = '''
import sys
import pytest
from lionops import Branch, iModel

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend():
    return "asyncio"

async def test_cli_agent(lionops_cassette):
    command = [sys.executable, "FAKE_CLI", "--session", "SESSION"]
    model = iModel(provider="claude_code", model="claude-sonnet-4-5", cli_command=command)
    live = lionops_cassette.recording
    result = await lionops_cassette.operate(Branch(chat_model=model), instruction="Capital of France?")
    print(f"{'recorded' if live else 'replayed'}: {result}")
'''


def test_a_cli_agent_records_once_then_replays_without_it(pytester):
    from tests.cli_support import FAKE_CLI, fixture

    fake = pytester.path / "fake_cli.py"
    fake.write_bytes(FAKE_CLI.read_bytes())
    pytester.makepyfile(test_cli_app=CLI_TEST_FILE.replace("FAKE_CLI", str(fake)).replace(
        "SESSION", str(fixture("plain_answer.jsonl"))))
    first = pytester.runpytest("-s")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*recorded: Paris is the capital of France.*"])
    fake.unlink()  # the CLI is gone: only a replay can pass now
    second = pytester.runpytest("-s")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*replayed: Paris is the capital of France.*"])


#: The project's test file when the server may be down: the same imports
#: and backend fixture as TEST_FILE, whose header it reuses.
DOWN_TEST_FILE = TEST_FILE[: TEST_FILE.index("async def ask")] + '''import os

async def test_ask(lionops_cassette):
    live = lionops_cassette.recording
    with OpenAIServer([completion(json.dumps({"answer": "up"}))]) as server:
        url = server.base_url
        if os.environ.get("LIONOPS_TEST_SERVER_DOWN"):
            server.stop()
        model = iModel(provider="openai", model="m", base_url=url, api_key="sk-plugin-test-key", max_retries=0)
        result = await lionops_cassette.operate(Branch(chat_model=model), instruction="q")
    print(f"{'recorded' if live else 'replayed'} {result}")
'''


def test_a_recording_made_while_the_server_was_down_is_not_kept(pytester, monkeypatch):
    pytester.makepyfile(test_down=DOWN_TEST_FILE)
    path = pytester.path / "cassettes" / "test_down" / "test_ask.json"
    monkeypatch.setenv("LIONOPS_TEST_SERVER_DOWN", "1")
    down = pytester.runpytest()
    down.assert_outcomes(failed=1)
    down.stdout.fnmatch_lines(["*EndpointConnectionError*", "*was not saved*"])
    assert not path.exists()
    monkeypatch.delenv("LIONOPS_TEST_SERVER_DOWN")
    up = pytester.runpytest("-s")  # the server is up: records afresh
    up.assert_outcomes(passed=1)
    up.stdout.fnmatch_lines(['*recorded {"answer": "up"}*'])
    monkeypatch.setenv("LIONOPS_TEST_SERVER_DOWN", "1")
    again = pytester.runpytest("-s")  # down again: replayed from the good recording
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(['*replayed {"answer": "up"}*'])


def test_a_cli_agent_that_could_not_start_is_not_recorded(pytester):
    from tests.cli_support import FAKE_CLI, fixture

    fake = pytester.path / "fake_cli.py"
    pytester.makepyfile(test_cli_app=CLI_TEST_FILE.replace("[sys.executable, \"FAKE_CLI\"", f"[\"{fake}\"").replace(
        "SESSION", str(fixture("plain_answer.jsonl"))))
    path = pytester.path / "cassettes" / "test_cli_app" / "test_cli_agent.json"
    missing = pytester.runpytest()  # no such executable yet
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*CLIProcessError*"])
    assert not path.exists()
    fake.write_bytes(FAKE_CLI.read_bytes())
    fake.chmod(0o755)
    pytester.runpytest("-s").assert_outcomes(passed=1)
    assert path.exists()
