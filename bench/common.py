"""What every benchmarked system shares: the caller model, the tools, the
zero-latency Middles, the scenario list and the timing statistics.

Imports only the standard library and pydantic, so it loads in the peers'
virtual environments too. No ``from __future__ import annotations`` here:
some peers read the tools' annotations as real types.
"""

import asyncio
import statistics
from typing import Any

from pydantic import BaseModel


class Forecast(BaseModel):
    """The 3-field caller model of every structured scenario."""

    city: str
    temp_c: float
    sunny: bool


ANSWER: dict[str, Any] = {"city": "Lisbon", "temp_c": 21.5, "sunny": True}


def add(x: int, y: int) -> int:
    """Add two integers."""
    return x + y


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def flag(on: bool) -> bool:
    """Return the flag."""
    return on


TOOLS = (add, echo, flag)
_ARGS: dict[str, dict[str, Any]] = {"add": {"x": 1, "y": 2}, "echo": {"text": "hi"}, "flag": {"on": True}}


def action_requests(k: int) -> list[dict[str, Any]]:
    """``k`` requests cycling over the three tools."""
    names = [t.__name__ for t in TOOLS]
    return [{"function": names[i % 3], "arguments": dict(_ARGS[names[i % 3]])} for i in range(k)]


def structured_middle(payload: dict[str, Any], sleep: float = 0.0) -> Any:
    """A Middle (the ADR-0022 D3 adapter contract) that returns ``payload`` validated into the
    response format it was handed: the parse a real adapter does, no I/O."""

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        if sleep:
            await asyncio.sleep(sleep)
        return parse_param.response_format.model_validate(payload)

    return middle


def raw_middle(payload: dict[str, Any]) -> Any:
    """A Middle whose output is a mapping, not the caller model (S3 mismatch)."""

    async def middle(branch, instruction, chat_param, parse_param=None,
                     clear_messages=False, skip_validation=False):
        return dict(payload)

    return middle


#: Timed scenarios: name -> (shape, action requests per call).
SCENARIOS: dict[str, tuple[str, int]] = {
    "S1": ("structured", 0),
    "S2": ("actions", 3),
    "S3": ("mismatch", 0),
    "S5-1": ("actions", 1),
    "S5-10": ("actions", 10),
    "S5-100": ("actions", 100),
}

#: The S1 case of the lionops worker that runs without trace recording.
UNTRACED = "S1-untraced"

#: S4: concurrent calls and the Middle's sleep (seconds).
S4_CALLS = 1000
S4_SLEEP = 0.010


#: End-to-end scenarios over HTTP (``bench/peer.py``): the instruction every
#: system sends, the tool calls the H2 answer asks for (two of the three
#: registered tools), and name -> (peer path, tools registered, streamed).
INSTRUCTION = "Forecast for Lisbon?"
H2_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (("add", {"x": 1, "y": 2}), ("echo", {"text": "hi"}))
H2_OUTPUTS = [3, "hi"]
H_SCENARIOS: dict[str, tuple[str, bool, bool]] = {
    "H1": ("h1", False, False),
    "H2": ("h2", True, False),
    "H4": ("h2", True, True),
}
#: H3: concurrent H2 calls (wall time and peak RSS), and the repetitions of each.
H3_CALLS: dict[int, int] = {200: 5, 1000: 2}
MODEL = "bench-model"
API_KEY = "bench-key"


def summary(samples: list[float]) -> dict[str, float]:
    """Median, quartiles and count of per-call samples."""
    xs = sorted(samples)
    if len(xs) == 1:
        return {"median": xs[0], "p25": xs[0], "p75": xs[0], "n": 1}
    q = statistics.quantiles(xs, n=4)
    return {"median": statistics.median(xs), "p25": q[0], "p75": q[2], "n": len(xs)}
