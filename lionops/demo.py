"""``make demo``: one governed operate() call, its result and its trace.

Runs a structured operation with reasoning and two proposed tool calls, one
of which the governance gate denies, then prints the result and the
transition trace and writes the trace JSON to ``out/demo-trace.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from lionops import Branch, ToolInvocation


class TripPlan(BaseModel):
    """What the model is asked to produce."""

    city: str
    summary: str


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"city": city, "temp_c": 21, "sky": "clear"}


def book_flight(city: str, date: str) -> str:
    """Book a flight (side effect: denied by the demo's gate)."""
    raise AssertionError("the gate must deny this tool")


async def scripted_model(branch, instruction, chat_param, parse_param=None,
                         clear_messages=False, skip_validation=False):
    """A Middle that answers like a model would, without a network."""
    branch.messages.add("user", instruction)
    answer = {
        "city": "Lisbon",
        "summary": "Check the weather, then book.",
        "reason": {"title": "plan", "content": "weather first", "confidence_score": 0.8},
        "action_required": True,
        "action_requests": [
            {"function": "get_weather", "arguments": {"city": "Lisbon"}},
            {"function": "book_flight", "arguments": {"city": "Lisbon", "date": "2026-12-01"}},
        ],
    }
    branch.messages.add("assistant", json.dumps(answer))
    return parse_param.response_format.model_validate(answer)


async def main(out_dir: str = "out") -> None:
    branch = Branch(system="You plan trips.", tools=[get_weather, book_flight])
    branch.gate(lambda inv: inv.function != "book_flight")  # governance: no bookings
    result, trace = await branch.operate_traced(
        instruction="Plan a day in Lisbon.",
        response_format=TripPlan,
        reason=True,
        actions=True,
        middle=scripted_model,
    )
    print("result:")
    print(json.dumps(result.model_dump(mode="json"), indent=2))
    print("\ntrace:", " -> ".join(trace.states), f"(exit: {trace.exit})")
    print(trace.table())
    path = Path(out_dir) / "demo-trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trace.to_json(indent=2))
    print(f"\ntrace written to {path}")


if __name__ == "__main__":
    anyio.run(main)
