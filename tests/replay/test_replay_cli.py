"""``python -m lionops replay`` and ``trace show`` on cassettes; ``make demo``'s cassette."""

from __future__ import annotations

import json

import anyio.to_thread
import pytest

from lionops.cli.commands import main as cli
from lionops.cli.demo import run

pytestmark = pytest.mark.anyio


async def main(argv: list[str]) -> int:
    """The command in a worker thread: it runs its own event loop."""
    return await anyio.to_thread.run_sync(cli, argv)


async def test_demo_writes_a_cassette_that_replays_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outcome = await run(tmp_path)  # the loopback server is stopped when run() returns
    cassette = outcome["cassette"]
    assert "sk-local-demo" not in cassette.read_text()
    capsys.readouterr()
    assert await main(["replay", str(cassette)]) == 0
    out = capsys.readouterr().out
    assert "prepare -> schema -> adapter -> validate -> gate -> act -> enrich -> returned" in out
    assert "requests_found" in out and "denied by governance gate" in out
    assert "same path, tool calls and result as recorded" in out


async def test_replay_command_reports_a_divergence(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cassette = (await run(tmp_path))["cassette"]
    data = json.loads(cassette.read_text())
    message = data["operations"][0]["exchanges"][0]["response"]["body"]["choices"][0]["message"]
    message["content"] = '{"city": "Lisbon"}'
    cassette.write_text(json.dumps(data))
    capsys.readouterr()
    assert await main(["replay", str(cassette)]) == 1
    captured = capsys.readouterr()
    assert "DIVERGED: operation 0: transition 3 differs" in captured.err
    assert "mismatch_return_value" in captured.out


def test_replay_command_refuses_an_invalid_cassette(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "lionops-cassette", "version": 99}')
    assert cli(["replay", str(bad)]) == 2
    assert "version 99 is not supported" in capsys.readouterr().err


async def test_trace_show_reads_traces_snapshots_and_cassettes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outcome = await run(tmp_path)
    capsys.readouterr()
    for path in (outcome["path"], outcome["cassette"]):
        assert await main(["trace", "show", str(path)]) == 0
        out = capsys.readouterr().out
        assert out.startswith("prepare -> schema") and "enriched" in out
