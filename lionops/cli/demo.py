"""``make demo``: one governed ``operate()`` through the real HTTP adapter.

Without ``OPENAI_API_KEY`` the demo starts a loopback OpenAI-compatible
server (:mod:`lionops.testing.openai_server`, stdlib only) that replays a
recorded conversation: a structured trip plan with reasoning and two action
requests inside the structured answer (the tools are described in the
prompt, ADR-0022 D2). ``operate_traced`` sends the request over httpx2, the
gate denies ``book_flight``, ``get_weather`` runs, and the result is enriched.

With ``OPENAI_API_KEY`` set (and optionally ``OPENAI_BASE_URL`` and
``LIONOPS_MODEL``, default ``gpt-4o-mini``) the same operation runs against
that endpoint instead. A model that answers with native tool calls beside
its JSON answer runs the same tools; a reply of tool calls only (no plan) is
printed with the reason it is not a plan, and no tool runs.

The result, the trace as a table and the adapter's facts (model, tokens,
latency) are printed; the trace JSON is written to ``out/demo-trace.json``
and a cassette of the run to ``out/demo-cassette.json`` (replay it offline
with the command the demo prints, ``.venv/bin/python -m lionops replay
out/demo-cassette.json`` after ``make demo``).
Exit status 1 when the loopback run does not take the recorded path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from lionops import Branch, ToolInvocation, iModel
from lionops.governance import Deny
from lionops.messages import to_jsonable
from lionops.replay import record
from lionops.testing.openai_server import OpenAIServer, load_recording, replay

RECORDING = "demo_trip.json"
LOCAL_KEY = "sk-local-demo"


class TripPlan(BaseModel):
    """What the model is asked to produce."""

    city: str
    summary: str
    highlights: list[str]


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"city": city, "temp_c": 21, "sky": "clear", "rain_chance": 0.1}


def book_flight(city: str, date: str) -> str:
    """Book a flight to a city on a date (YYYY-MM-DD). Side effect: the demo's gate denies it."""
    return f"booked {city} on {date}"


@contextlib.contextmanager
def endpoint() -> Iterator[tuple[iModel, str, OpenAIServer | None]]:
    """The model to talk to: the environment's endpoint, else a loopback replay."""
    if os.environ.get("OPENAI_API_KEY"):
        model = iModel(provider="openai", model=os.environ.get("LIONOPS_MODEL", "gpt-4o-mini"))
        yield model, f"{model.endpoint.base_url} (OPENAI_API_KEY)", None
        return
    with resources.as_file(resources.files("lionops.testing") / "recordings" / RECORDING) as path:
        recording = load_recording(path)
    with OpenAIServer(replay(recording)) as server:
        model = iModel(provider="openai", model=recording["model"], base_url=server.base_url, api_key=LOCAL_KEY)
        yield model, f"{server.base_url} (loopback replay of {RECORDING})", server


def no_bookings(invocation: ToolInvocation) -> bool | Deny:
    """The demo's gate: every tool but ``book_flight``; a booking is denied
    with a reason the model is told."""
    if invocation.function == "book_flight":
        return Deny(by="demo policy", reason="bookings need a person's approval")
    return True


async def run(out_dir: str | Path = "out") -> dict[str, Any]:
    """Run the demo; returns ``{"result", "trace", "denied", "ran", "path"}``."""
    with endpoint() as (model, where, server):
        branch = Branch(
            chat_model=model,
            system="You plan short city trips. Use tools when facts or bookings are needed.",
            tools=[get_weather, book_flight],
        )

        branch.gate(no_bookings)  # governance: a booking is never made by the model alone

        try:
            cassette = Path(out_dir) / "demo-cassette.json"
            result, trace = await record(
                cassette, branch,
                instruction="Plan a day in Lisbon for Saturday 3 October 2026 and book the flight.",
                guidance="Return the plan; request the tools you need.",
                response_format=TripPlan,
                reason=True,
                actions=True,
                temperature=0.2,
            )
        finally:
            await model.aclose()
    ran = [e.content["function"] for e in branch.logs.of_kind("action")]
    denied = [e.content["function"] for e in branch.logs.of_kind("denied")]
    path = Path(out_dir) / "demo-trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trace.to_json(indent=2), encoding="utf-8")

    print(f"endpoint: {where}")
    print("\nresult:")
    shown = result.model_dump(mode="json") if isinstance(result, BaseModel) else to_jsonable(result)
    print(json.dumps(shown, indent=2, ensure_ascii=False, default=str))
    raw = trace.meta.get("raw_output")
    if raw:
        print(f"not a {TripPlan.__name__}: {raw.get('reason')}: {raw.get('detail')}")
    print(f"\ntools run: {ran or 'none'}; denied by the gate: {denied or 'none'}")
    print("\ntrace:", " -> ".join(trace.states), f"(exit: {trace.exit})")
    print(trace.table())
    facts = {k: trace.meta.get(k) for k in ("model", "usage", "latency_ms", "http_attempts", "structured_output")}
    print("\nadapter:", json.dumps(facts))
    print(f"\ntrace written to {path}")
    print(f"cassette written to {cassette}; replay it offline: {replay_command(cassette)}")
    return {"result": result, "trace": trace, "denied": denied, "ran": ran, "path": path, "cassette": cassette,
            "replayed": server is not None}


def replay_command(cassette: Path) -> str:
    """The command that replays ``cassette``, as it works when typed in this
    directory: the interpreter running the demo (``.venv/bin/python`` after
    ``make demo``), or ``python`` when that is the one on ``PATH``."""
    exe = Path(sys.executable).absolute()
    for name in ("python", "python3"):
        found = shutil.which(name)
        if found is not None and Path(found).absolute() == exe:
            return f"{name} -m lionops replay {shlex.quote(str(cassette))}"
    shown = exe.relative_to(Path.cwd()) if exe.is_relative_to(Path.cwd()) else exe
    return f"{shlex.quote(str(shown))} -m lionops replay {shlex.quote(str(cassette))}"


def main(out_dir: str = "out") -> int:
    outcome = anyio.run(run, out_dir)
    if outcome["replayed"]:
        expected = (outcome["trace"].exit, outcome["ran"], outcome["denied"])
        if expected != ("enriched", ["get_weather"], ["book_flight"]):
            print(f"unexpected path: {expected}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
