"""A cassette replayed alone (``replay(path)``, the stand-in gate repeating
the recorded decisions) gives the recorded result for every kind of refusal:
a gate's ``Deny(by=..., reason=...)`` whose reason the model was told, a
plain ``False``, and a gate past its ``gate_timeout`` (which the stand-in,
never waiting, repeats as a denial telling the recorded reason); the tools
never run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionops import Branch, iModel
from lionops.governance import Deny
from lionops.replay import record, replay
from lionops.testing import OpenAIServer, completion, tool_call

pytestmark = pytest.mark.anyio

RAN: list[str] = []


class Plan(BaseModel):
    answer: int


def get_weather(city: str) -> dict[str, str]:
    """Weather for a city."""
    RAN.append("get_weather")
    return {"city": city}


def book_flight(city: str) -> str:
    """Book a flight."""
    RAN.append("book_flight")
    return "booked"


def deny_with_reason(invocation: Any) -> Any:
    return Deny(by="policy", reason="bookings need a human") if invocation.function == "book_flight" else True


def deny_plainly(invocation: Any) -> bool:
    return invocation.function != "book_flight"


async def slow_on_bookings(invocation: Any) -> bool:
    if invocation.function == "book_flight":
        await anyio.sleep(10)
    return True


GATES = {"Deny with a reason": deny_with_reason, "plain False": deny_plainly, "past gate_timeout": slow_on_bookings}


@pytest.mark.parametrize("gate", list(GATES))
async def test_a_refusal_replays_from_the_cassette_alone(gate: str, tmp_path: Path, anyio_backend: str) -> None:
    path = tmp_path / "run.json"
    answer = completion(json.dumps({"answer": 1}), tool_calls=[
        tool_call("get_weather", {"city": "Oslo"}, "c1"), tool_call("book_flight", {"city": "Oslo"}, "c2")])
    with OpenAIServer([answer]) as server:
        model = iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url, api_key="k")
        branch = Branch(chat_model=model, tools=[get_weather, book_flight], gate_timeout=0.2)
        branch.gate(GATES[gate])
        recorded = await record(path, branch, instruction="plan", response_format=Plan, actions=True)
        await model.aclose()
    RAN.clear()
    replayed = await replay(path)
    assert RAN == []
    assert replayed.result.model_dump() == recorded.result.model_dump()
    decisions = [(a.function, a.decision) for a in recorded.trace.actions]
    if gate == "past gate_timeout":  # the stand-in cannot time out: it denies with the recorded reason
        assert decisions[1] == ("book_flight", "timed_out")
        decisions[1] = ("book_flight", "denied")
    assert [(a.function, a.decision) for a in replayed.trace.actions] == decisions


async def test_a_rebuilt_replay_that_diverges_says_how_to_replay_with_your_own_branch(
        tmp_path: Path, anyio_backend: str) -> None:
    from lionops.replay import ReplayDivergence

    path = tmp_path / "run.json"
    answer = completion(json.dumps({"answer": 1}), tool_calls=[tool_call("book_flight", {"city": "Oslo"}, "c2")])
    with OpenAIServer([answer, answer]) as server:
        model = iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url, api_key="k")
        branch = Branch(chat_model=model, tools=[get_weather, book_flight])
        branch.gate(deny_with_reason)
        await record(path, branch, instruction="plan", response_format=Plan, actions=True)
        data = json.loads(path.read_text())
        data["operations"][0]["outcome"]["result"]["action_responses"][0]["output"]["reason"] = "edited"
        path.write_text(json.dumps(data))
        with pytest.raises(ReplayDivergence, match=r"rebuilt from the cassette alone.*replay\(path, branch"):
            await replay(path)
        own = Branch(chat_model=model, tools=[get_weather, book_flight])
        own.gate(deny_with_reason)
        with pytest.raises(ReplayDivergence) as info:
            await replay(path, own, instruction="plan", response_format=Plan, actions=True)
        assert "rebuilt" not in str(info.value)
        await model.aclose()
