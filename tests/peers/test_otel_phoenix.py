"""A real GenAI backend reads what lionops exports: Arize Phoenix.

Opt-in: set ``LIONOPS_PHOENIX`` to a ``phoenix`` executable
(``pip install arize-phoenix`` in a separate environment). Phoenix is a
large install with its own server and database, so it is not a development
dependency and the suite skips this test without it.

The test starts ``phoenix serve`` on loopback (its own ports and working
directory), exports over OTLP/HTTP an operation with tools, a denial by the
gate, and a streamed call, then reads Phoenix's REST API: the run is an
AGENT span, its chat (LLM) and tool (TOOL) spans nest under it, tokens are
counted, and the branch is the session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

import lionops
from lionops import Branch
from lionops.testing import OpenAIServer, Reply, chunked, completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model

PHOENIX = os.environ.get("LIONOPS_PHOENIX")
#: Longest wait for Phoenix to start and to show the exported spans (s); settable for slow machines.
WAIT_S = float(os.environ.get("LIONOPS_PHOENIX_WAIT_S", "180"))

pytestmark = pytest.mark.skipif(not PHOENIX, reason="set LIONOPS_PHOENIX to a phoenix executable "
                                                    "(arize-phoenix is a large optional install)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            value = check()
        except httpx2.HTTPError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"Phoenix: {what} not within {WAIT_S:g} s (LIONOPS_PHOENIX_WAIT_S)")
        time.sleep(0.5)


@pytest.fixture
def phoenix(tmp_path: Path) -> Any:
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_HOST": "127.0.0.1"}
    log = (tmp_path / "phoenix.log").open("wb")
    process = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: process.poll() is None and httpx2.get(f"{url}/v1/projects", timeout=5).status_code == 200,
              "the server")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()


async def _operate() -> Branch:
    answer = completion('{"answer": 1}', tool_calls=[
        tool_call("get_weather", {"city": "Paris"}, "c1"), tool_call("send_message", {"to": "a", "body": "b"}, "c2")])
    with OpenAIServer([answer, Reply(stream=chunked(completion('{"answer": 2}')))]) as server:
        model, streaming = make_model(server), make_model(server, stream=True)
        try:
            branch = Branch(chat_model=model, tools=ToolBox().tools(), name="weather")
            branch.gate(lambda invocation: invocation.function != "send_message")
            await branch.operate(instruction="Weather in Paris? Tell the team.", response_format=Answer,
                                 actions=True)
            branch.chat_model = streaming
            await branch.operate(instruction="And now?", response_format=Answer)
        finally:
            await model.aclose()
            await streaming.aclose()
    return branch


def test_phoenix_shows_an_agent_run_with_its_chat_and_tool_spans_and_tokens(phoenix):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    project = "lionops-test"
    provider = TracerProvider(resource=Resource.create({"service.name": project,
                                                        "openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces", timeout=30)))
    lionops.instrument(provider)
    try:
        branch = anyio.run(_operate)
    finally:
        lionops.uninstrument()
        provider.shutdown()

    def stored() -> list[dict[str, Any]] | None:
        response = httpx2.get(f"{phoenix}/v1/projects/{project}/spans", params={"limit": 100}, timeout=10)
        spans = response.json().get("data", []) if response.status_code == 200 else []
        return spans if len(spans) >= 7 else None  # 2 agent runs, 2 chats, 2 tools, 1 writeback

    spans = _wait(stored, "the exported spans")
    agents = [s for s in spans if s["span_kind"] == "AGENT"]
    assert sorted(s["name"] for s in agents) == ["invoke_agent weather", "invoke_agent weather"]
    by_parent: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_parent.setdefault(span["parent_id"] or "", []).append(span)
    for agent in agents:
        assert agent["attributes"]["session.id"] == str(branch.id)  # gen_ai.conversation.id -> the session
        kids = by_parent[agent["context"]["span_id"]]
        (llm,) = [k for k in kids if k["span_kind"] == "LLM"]
        assert llm["attributes"]["llm.token_count.prompt"] > 0 and llm["attributes"]["llm.token_count.completion"] > 0
        assert agent["attributes"]["llm.token_count.total"] > 0  # tokens counted on the run too
    tools = {s["attributes"]["gen_ai.tool.name"]: s for s in spans if s["span_kind"] == "TOOL"}
    assert tools["send_message"]["attributes"]["lionops.tool.decision"] == "denied"
    assert tools["get_weather"]["attributes"]["lionops.tool.decision"] == "allowed"
    assert {t["parent_id"] for t in tools.values()} <= {a["context"]["span_id"] for a in agents}
    streamed = [s for s in spans if s["span_kind"] == "LLM" and s["attributes"].get("gen_ai.request.stream")]
    assert len(streamed) == 1 and streamed[0]["attributes"]["gen_ai.response.time_to_first_chunk"] >= 0
