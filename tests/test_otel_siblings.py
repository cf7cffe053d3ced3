"""Siblings of the OpenTelemetry cases: outputs, texts and call patterns the
named tests do not try (the real SDK's in-memory exporter, the public API,
a real loopback HTTP server, real tool functions)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from lionops import Branch
from lionops.act import DENIAL_ERROR
from lionops.testing import completion, tool_call

from .openai_server import make_model, server  # noqa: F401 - fixtures
from .otel_support import otel, otel_content  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_a_tool_output_that_looks_like_a_denial_or_an_error_is_allowed(server, otel):
    """The decision is what act() recorded, never read back from the output."""

    def lookup(q: str) -> dict[str, Any]:
        """Returns what a denial looks like."""
        return {"error": DENIAL_ERROR, "function": "lookup"}

    def fetch(q: str) -> dict[str, Any]:
        """Returns what a timed-out call's payload looks like."""
        return {"error": "late", "type": "TimeoutError", "message": "Error invoking action 'fetch': late"}

    def probe(q: str) -> dict[str, Any]:
        """Returns what a failed call's payload looks like."""
        return {"error": "x", "type": "RuntimeError", "message": "Error invoking action 'probe': x"}

    server.push(completion(None, tool_calls=[tool_call(name, {"q": "a"}) for name in ("lookup", "fetch", "probe")]))
    model = make_model(server)
    branch = Branch(chat_model=model, tools=[lookup, fetch, probe])
    await branch.operate(instruction="q", actions=True, action_strategy="sequential")
    await model.aclose()
    spans = sorted(otel.named("execute_tool"), key=lambda s: s.attributes["lionops.tool.index"])
    assert [s.attributes["lionops.tool.decision"] for s in spans] == ["allowed", "allowed", "allowed"]
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET] * 3
    assert all("error.type" not in s.attributes for s in spans)
