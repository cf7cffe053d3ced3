"""``make demo``: the recorded conversation through the real HTTP adapter."""

from __future__ import annotations

import json

import pytest

from lionops import Branch, iModel
from lionops.cli.demo import RECORDING, TripPlan, run
from lionops.errors import EndpointStatusError
from lionops.testing import OpenAIServer, completion, load_recording, replay, tool_call

pytestmark = pytest.mark.anyio


async def test_demo_replays_the_recorded_conversation(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outcome = await run(tmp_path)
    assert outcome["replayed"]
    trace, result = outcome["trace"], outcome["result"]
    assert trace.exit == "enriched"
    assert outcome["ran"] == ["get_weather"] and outcome["denied"] == ["book_flight"]
    assert isinstance(result, TripPlan) and result.city == "Lisbon" and result.reason.confidence_score == 0.82
    assert [r.is_error for r in result.action_responses] == [False, True]
    assert trace.meta["usage"]["total_tokens"] == 1013 and trace.meta["middle"] == "communicate"
    saved = json.loads(outcome["path"].read_text())
    assert saved["exit"] == "enriched" and "sk-local-demo" not in outcome["path"].read_text()
    out = capsys.readouterr().out
    assert "loopback replay" in out and "requests_found" in out


async def test_replay_refuses_a_request_that_was_not_recorded():
    from importlib import resources

    recording = load_recording(resources.files("lionops.testing") / "recordings" / RECORDING)
    with OpenAIServer(replay(recording)) as server:
        m = iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url, api_key="k")
        with pytest.raises(EndpointStatusError, match="differs from the recorded one"):
            await Branch(chat_model=m).operate(instruction="something else")
        await m.aclose()


PLAN = {"city": "Lisbon", "summary": "Alfama, Baixa, Belém.", "highlights": ["Castelo", "Pastéis", "Ferry"]}
CALLS = [("get_weather", {"city": "Lisbon"}), ("book_flight", {"city": "Lisbon", "date": "2026-10-03"})]


def live_model(kind: str):
    """A model behind a live OpenAI-compatible endpoint, as a loopback server.

    ``as-asked``: native tool calls when the tools are sent natively, else the
    requests inside the JSON answer. ``beside``: the JSON plan and native tool
    calls side by side (a server whose tool parser emits them). ``only``: native
    tool calls only, whatever was asked."""

    def reply(request):
        native = [tool_call(name, args) for name, args in CALLS]
        if kind == "only" or (kind == "as-asked" and request.body.get("tools")):
            return completion(None, tool_calls=native)
        if kind == "beside":
            return completion(json.dumps(PLAN), tool_calls=native)
        requests = [{"function": name, "arguments": args} for name, args in CALLS]
        return completion(json.dumps({**PLAN, "action_requests": requests}))

    return reply


@pytest.mark.parametrize("kind", ["as-asked", "beside"])
async def test_demo_against_a_live_endpoint_runs_the_tools(tmp_path, monkeypatch, capsys, kind):
    with OpenAIServer(live_model(kind)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-live-demo-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        outcome = await run(tmp_path)
        body = server.chat_requests[0].body
    assert not outcome["replayed"] and "tools" not in body
    assert outcome["trace"].exit == "enriched"
    assert outcome["ran"] == ["get_weather"] and outcome["denied"] == ["book_flight"]
    assert isinstance(outcome["result"], TripPlan) and outcome["result"].city == "Lisbon"
    out = capsys.readouterr().out
    assert "(OPENAI_API_KEY)" in out and "sk-live-demo-key" not in out


async def test_demo_against_a_tool_calls_only_endpoint_says_why(tmp_path, monkeypatch, capsys):
    with OpenAIServer(live_model("only")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-live-demo-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        outcome = await run(tmp_path)
    assert outcome["ran"] == [] and outcome["trace"].exit == "mismatch_return_value"
    assert "tool_calls_only: tool calls only, no answer fields" in capsys.readouterr().out
