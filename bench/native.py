"""H1, H2 and H4 over the three native protocols: lionops, the floor and the SDK.

    python bench/native.py                 # three rounds, the table to out/bench/native.md
    python bench/native.py --quick         # one pass of everything (smoke)
    python bench/native.py --profile anthropic:H4   # pyinstrument, lionops alone, to out/bench/

Per protocol (``openai_responses``: ``POST /responses``; ``anthropic``:
``POST /v1/messages``; ``google``: ``generateContent`` and
``streamGenerateContent?alt=sse``) and scenario (H1 structured answer; H2 the
answer with two tool calls, run and attached; H4 H2 streamed), three systems in
ONE worker process against ``bench/native_peer.py`` (its own process):

- floor: httpx2.AsyncClient + pydantic, no lionops import. It sends the body
  lionops sends (the same model, schema, prompt and options; the fixed parts
  built once, the messages per call), reads the answer (the text, the forced
  answer tool's input on the Messages API, the streamed events folded), and
  does the parse and tool work of ``bench/floor.py``'s ``finish``.
- sdk: the same request and work through the official SDK
  (``AsyncOpenAI().responses.create``, ``AsyncAnthropic().messages.create``,
  ``genai.Client().aio.models.generate_content`` / ``_stream``), one client
  per scenario, no retries.
- lionops: a fresh ``Branch(chat_model=..., tools=[add, echo, flag])`` per
  call on one shared ``iModel(provider=...)``.

The paired method of ``bench/run.py``, for three: each pass times one block of
each system back to back (all of the floor's block size, about 20 ms), the
order rotating from pass to pass, each block after ``gc.collect()``; a pass
gives the ratios lionops/floor and sdk/lionops of per-call process CPU time. A
figure is the median of the per-pass ratios over ``--rounds`` workers (round
r with ``PYTHONHASHSEED=r``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from common import API_KEY, INSTRUCTION, MODEL, TOOLS  # noqa: E402

PROTOCOLS = ("openai_responses", "anthropic", "google")
#: scenario -> (peer path prefix, tools registered, streamed)
SCENARIOS: dict[str, tuple[str, bool, bool]] = {"H1": ("h1", False, False), "H2": ("h2", True, False),
                                                 "H4": ("h2", True, True)}
SYSTEMS = ("floor", "lionops", "sdk")
ANSWER_TOOL = "lionops_answer_ForecastRequest"
PEER_ENV = "LIONOPS_BENCH_NATIVE_PEER"
BLOCK_S = 0.02
WARMUP_S = 0.15
Call = Callable[[], Awaitable[Any]]


# ---------------------------------------------------------------- the request lionops sends


def _content(tools: bool) -> str:
    import floor

    return f"{INSTRUCTION}\n\n{floor._TOOLS_PROMPT}" if tools else INSTRUCTION


def _schema(tools: bool) -> tuple[dict[str, Any], bool]:
    """The answer's JSON schema and whether it is strict (no tools: every field required)."""
    import floor

    return floor._FORMATS[tools]["json_schema"]["schema"], not tools


def fixed_body(protocol: str, tools: bool, stream: bool) -> dict[str, Any]:
    """Everything of the request body but the messages."""
    schema, strict = _schema(tools)
    if protocol == "openai_responses":
        body: dict[str, Any] = {"model": MODEL, "text": {"format": {
            "type": "json_schema", "name": schema["title"], "schema": schema, "strict": strict}}}
    elif protocol == "anthropic":
        body = {"model": MODEL, "max_tokens": 4096, "tool_choice": {"type": "tool", "name": ANSWER_TOOL},
                "tools": [{"name": ANSWER_TOOL,
                           "description": "Give the final answer as this tool's input (the answer's JSON schema).",
                           "input_schema": schema}]}
    else:
        return {"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}}
    if stream:
        body["stream"] = True
    return body


def messages(protocol: str, tools: bool) -> dict[str, Any]:
    text = _content(tools)
    if protocol == "openai_responses":
        return {"input": [{"role": "user", "content": text}]}
    if protocol == "anthropic":
        return {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


async def finish(answer: str | dict[str, Any], tools: bool, history: list[Any]) -> Any:
    """``bench/floor.py``'s ``finish`` for an answer given as JSON text or as a mapping
    (the Messages API's tool input)."""
    import floor

    if isinstance(answer, str):
        return await floor.finish(answer, [], tools, history)
    history.append({"role": "assistant", "content": answer})
    if not tools:
        return floor.ForecastPlain.model_validate(answer)
    return await floor.finish(json.dumps(answer), [], tools, history[:-1])


# ---------------------------------------------------------------- floor: httpx2 + pydantic


def _sse_data(line: str) -> Any:
    return json.loads(line[5:]) if line.startswith("data:") else None


def _fold(protocol: str, event: Any, text: list[str]) -> None:
    """One streamed event into the answer's text fragments."""
    if protocol == "openai_responses":
        if event.get("type") == "response.output_text.delta":
            text.append(event["delta"])
    elif protocol == "anthropic":
        delta = event.get("delta") if event.get("type") == "content_block_delta" else None
        if delta is not None:
            text.append(delta.get("partial_json") or delta.get("text") or "")
    else:
        for candidate in event.get("candidates") or ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                if "text" in part and not part.get("thought"):
                    text.append(part["text"])


def _answer(protocol: str, data: dict[str, Any]) -> str | dict[str, Any]:
    if protocol == "openai_responses":
        return "".join(c["text"] for item in data["output"] if item["type"] == "message"
                       for c in item["content"] if c["type"] == "output_text")
    if protocol == "anthropic":
        return next(b["input"] for b in data["content"] if b["type"] == "tool_use" and b["name"] == ANSWER_TOOL)
    text: list[str] = []
    _fold(protocol, data, text)
    return "".join(text)


class Floor:
    """httpx2.AsyncClient + pydantic, one client per process."""

    client: Any = None

    def __init__(self, root: str, protocol: str, scenario: str) -> None:
        path, self.tools, self.stream = SCENARIOS[scenario]
        self.protocol = protocol
        self.body = fixed_body(protocol, self.tools, self.stream)
        self.text = _content(self.tools)
        if protocol == "openai_responses":
            self.url = f"{root}/{path}/v1/responses"
            self.headers = {"Authorization": f"Bearer {API_KEY}"}
        elif protocol == "anthropic":
            self.url = f"{root}/{path}/v1/messages"
            self.headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
        else:
            method = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
            self.url = f"{root}/{path}/v1beta/models/{MODEL}:{method}"
            self.headers = {"x-goog-api-key": API_KEY}

    async def __call__(self) -> Any:
        import httpx2

        if Floor.client is None:
            Floor.client = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0))
        turn = messages(self.protocol, self.tools)
        body = {**self.body, **turn}
        history = list(next(iter(turn.values())))
        if not self.stream:
            response = await Floor.client.post(self.url, json=body, headers=self.headers)
            response.raise_for_status()
            return await finish(_answer(self.protocol, response.json()), self.tools, history)
        text: list[str] = []
        async with Floor.client.stream("POST", self.url, json=body, headers=self.headers) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                event = _sse_data(line)
                if event is not None:
                    _fold(self.protocol, event, text)
        return await finish("".join(text), self.tools, history)


# ---------------------------------------------------------------- the official SDKs


class Sdk:
    """The same request and work through the provider's official SDK, one client
    per protocol and peer path (H2 and H4 share one)."""

    clients: dict[tuple[str, str], Any] = {}

    def __init__(self, root: str, protocol: str, scenario: str) -> None:
        path, self.tools, self.stream = SCENARIOS[scenario]
        self.protocol = protocol
        self.body = fixed_body(protocol, self.tools, self.stream)
        self.client = self.clients.get((protocol, f"{root}/{path}"))
        if self.client is None:
            self.client = self.clients[protocol, f"{root}/{path}"] = self._client(root, path)
        if protocol == "google":
            from google.genai import types

            self.config = types.GenerateContentConfig(
                response_mime_type="application/json", response_json_schema=_schema(self.tools)[0])

    def _client(self, root: str, path: str) -> Any:
        protocol = self.protocol
        if protocol == "openai_responses":
            from openai import AsyncOpenAI

            return AsyncOpenAI(base_url=f"{root}/{path}/v1", api_key=API_KEY, max_retries=0)
        if protocol == "anthropic":
            from anthropic import AsyncAnthropic

            return AsyncAnthropic(base_url=f"{root}/{path}", api_key=API_KEY, max_retries=0)
        from google import genai
        from google.genai import types

        return genai.Client(api_key=API_KEY, http_options=types.HttpOptions(
            base_url=f"{root}/{path}", api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)))

    async def __call__(self) -> Any:
        turn = messages(self.protocol, self.tools)
        history = list(next(iter(turn.values())))
        if self.protocol == "openai_responses":
            return await finish(await self._responses(turn), self.tools, history)
        if self.protocol == "anthropic":
            return await finish(await self._messages(turn), self.tools, history)
        return await finish(await self._gemini(turn), self.tools, history)

    async def _responses(self, turn: dict[str, Any]) -> str:
        if not self.stream:
            return str((await self.client.responses.create(**self.body, **turn)).output_text)
        text: list[str] = []
        async for event in await self.client.responses.create(**self.body, **turn):
            if event.type == "response.output_text.delta":
                text.append(event.delta)
        return "".join(text)

    async def _messages(self, turn: dict[str, Any]) -> str | dict[str, Any]:
        if not self.stream:
            message = await self.client.messages.create(**self.body, **turn)
            return next(b.input for b in message.content if b.type == "tool_use" and b.name == ANSWER_TOOL)
        text: list[str] = []
        async for event in await self.client.messages.create(**self.body, **turn):
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                text.append(event.delta.partial_json)
        return "".join(text)

    async def _gemini(self, turn: dict[str, Any]) -> str:
        models = self.client.aio.models
        if not self.stream:
            return str((await models.generate_content(model=MODEL, contents=turn["contents"],
                                                      config=self.config)).text)
        text: list[str] = []
        async for chunk in await models.generate_content_stream(model=MODEL, contents=turn["contents"],
                                                                config=self.config):
            text.append(chunk.text or "")
        return "".join(text)


# ---------------------------------------------------------------- lionops


class Lionops:
    """A fresh Branch per call on one shared iModel per protocol and scenario."""

    def __init__(self, root: str, protocol: str, scenario: str) -> None:
        from common import Forecast
        from lionops import Branch, iModel

        path, tools, stream = SCENARIOS[scenario]
        base = f"{root}/{path}" + ("/v1" if protocol == "openai_responses" else "")
        self.model = iModel(provider=protocol, model=MODEL, base_url=base, api_key=API_KEY, stream=stream)
        self.Branch, self.tools = Branch, list(TOOLS) if tools else None
        self.kw: dict[str, Any] = {"instruction": INSTRUCTION, "response_format": Forecast}
        if tools:
            self.kw["actions"] = True

    async def __call__(self) -> Any:
        return await self.Branch(chat_model=self.model, tools=self.tools).operate(**self.kw)


BUILD = {"floor": Floor, "sdk": Sdk, "lionops": Lionops}


# ---------------------------------------------------------------- the paired worker


async def _warm(call: Call, quick: bool) -> int:
    """Warm ``call`` up; the calls in a block of about ``BLOCK_S``."""
    await call()
    if quick:
        return 1
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_S:
        await call()
        n += 1
    return max(1, round(BLOCK_S / ((time.perf_counter() - t0) / n)))


async def _block(call: Call, n: int, quick: bool) -> float:
    if not quick:  # a smoke run skips it: under pytest one collection takes tens of ms
        gc.collect()
    t0 = time.process_time_ns()
    for _ in range(n):
        await call()
    return (time.process_time_ns() - t0) / n / 1000


async def paired(root: str, seconds: float, quick: bool, cases: list[tuple[str, str]]) -> dict[str, Any]:
    """Per case: the per-call CPU samples (µs) of each system and the per-pass ratios."""
    out: dict[str, Any] = {}
    for protocol, scenario in cases:
        calls = {s: BUILD[s](root, protocol, scenario) for s in SYSTEMS}
        n = 1
        for s in SYSTEMS:
            size = await _warm(calls[s], quick)
            n = size if s == "floor" else n
        res: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        res.update({"lionops/floor": [], "sdk/lionops": [], "sdk/floor": []})
        deadline, k = time.perf_counter() + seconds, 0
        while True:
            cpu: dict[str, float] = {}
            for s in SYSTEMS[k % 3:] + SYSTEMS[:k % 3]:
                cpu[s] = await _block(calls[s], n, quick)
            for s in SYSTEMS:
                res[s].append(cpu[s])
            res["lionops/floor"].append(cpu["lionops"] / cpu["floor"])
            res["sdk/lionops"].append(cpu["sdk"] / cpu["lionops"])
            res["sdk/floor"].append(cpu["sdk"] / cpu["floor"])
            k += 1
            if quick or time.perf_counter() > deadline:
                break
        out[f"{protocol} {scenario}"] = res
    return out


# ---------------------------------------------------------------- parent side


def _median(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return (xs[0] if xs else float("nan")), 0.0
    q = statistics.quantiles(xs, n=4)
    return statistics.median(xs), (q[2] - q[0]) / 2


def render(merged: dict[str, dict[str, list[float]]]) -> str:
    lines = ["| protocol | | floor µs | lionops µs | SDK µs | lionops / floor | SDK / lionops | pairs |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, res in merged.items():
        protocol, scenario = key.split()
        cells = [f"{_median(res[s])[0]:,.0f}" for s in SYSTEMS]
        ratios = [f"{m:.2f}× ±{h:.2f}" for m, h in (_median(res[r]) for r in ("lionops/floor", "sdk/lionops"))]
        lines.append(f"| {protocol} | {scenario} | {cells[0]} | {cells[1]} | {cells[2]} | "
                     f"{ratios[0]} | {ratios[1]} | {len(res['floor'])} |")
    return "\n".join(lines)


def profile_case(root: str, spec: str, seconds: float, out: Path, system: str = "lionops") -> str:
    """``bench/profile.py``'s profile of one system on ``protocol:scenario``."""
    import importlib.util

    spec_ = importlib.util.spec_from_file_location("bench_profile", HERE / "profile.py")
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)  # bench/profile.py (its name is the standard library's too)
    protocol, scenario = spec.split(":")
    call = BUILD[system](root, protocol, scenario)

    async def once(_: Any) -> Any:
        return await call()

    text = asyncio.run(module.profile((lambda: None, once), f"{system} {protocol} {scenario} (HTTP)", seconds))
    (out / f"profile-native-{system}-{protocol}-{scenario}.txt").write_text(text)
    return text


def _all_cases() -> list[tuple[str, str]]:
    return [(p, s) for p in PROTOCOLS for s in SCENARIOS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per case and worker")
    ap.add_argument("--quick", action="store_true", help="one pass of each case")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench"))
    ap.add_argument("--profile", metavar="PROTOCOL:SCENARIO", action="append", default=[],
                    help="profile lionops (and with --profile-system, another system) on a case instead")
    ap.add_argument("--profile-system", default="lionops", choices=SYSTEMS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        result = asyncio.run(paired(os.environ[PEER_ENV], args.seconds, args.quick, _all_cases()))
        Path(args.worker).write_text(json.dumps(result))
        return 0
    from native_peer import Peer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    merged: dict[str, dict[str, list[float]]] = {}
    if args.profile:
        with Peer() as peer:
            for spec in args.profile:
                print(profile_case(peer.root, spec, args.seconds, out, args.profile_system))
        return 0
    with Peer() as peer:
        for r in range(1 if args.quick else args.rounds):
            print(f"  native round {r + 1}", file=sys.stderr, flush=True)
            part = out / f"native-{r}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(part),
                   "--seconds", str(args.seconds)] + (["--quick"] if args.quick else [])
            subprocess.run(cmd, check=True, env={**os.environ, PEER_ENV: peer.root, "PYTHONHASHSEED": str(r)})
            for key, res in json.loads(part.read_text()).items():
                for name, xs in res.items():
                    merged.setdefault(key, {}).setdefault(name, []).extend(xs)
    table = render(merged)
    print(table)
    (out / "native.md").write_text(table + "\n")
    (out / "native.json").write_text(json.dumps(merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
