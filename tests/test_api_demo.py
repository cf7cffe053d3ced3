"""``make demo``: the recorded conversation through the real HTTP adapter."""

from __future__ import annotations

import json

import pytest

from lionops import Branch, iModel
from lionops.demo import RECORDING, TripPlan, run
from lionops.errors import EndpointStatusError
from lionops.testing import OpenAIServer, load_recording, replay

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
        m = iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url)
        with pytest.raises(EndpointStatusError, match="differs from the recorded one"):
            await Branch(chat_model=m).operate(instruction="something else")
        await m.aclose()
