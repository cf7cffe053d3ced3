"""Foreign JSON nested past the bound never raises an untyped RecursionError
on the native endpoints: an HTTP error body (read for the provider's error
type) is a typed EndpointStatusError on every protocol, and a tool result
that is deeply nested JSON text is sent back to Gemini as text, against the
loopback peer, with real tools, on asyncio and trio."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lionops import Branch, iModel
from lionops.errors import EndpointStatusError
from tests.loopback_peer import Answer
from tests.native_recordings import PROTOCOLS, ScriptPeer, endpoint_options

pytestmark = pytest.mark.anyio

DEPTH = 100_000
DEEP = "[" * DEPTH + "]" * DEPTH


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("where", ["error", "error.type"])
async def test_a_deep_error_body_is_a_typed_status_error(protocol: str, where: str, anyio_backend: str) -> None:
    body = f'{{"error": {DEEP}}}' if where == "error" else f'{{"error": {{"type": {DEEP}}}}}'
    with ScriptPeer(Answer(400, body.encode())) as peer:
        model = iModel(**endpoint_options(protocol, peer, max_retries=0))
        with pytest.raises(EndpointStatusError) as caught:
            await Branch(chat_model=model).operate(instruction="x")
        await model.aclose()
    assert caught.value.status == 400


def _gemini(parts: list[dict[str, Any]]) -> Answer:
    body = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2}}
    return Answer(200, json.dumps(body).encode())


async def test_a_deep_tool_result_goes_back_to_gemini_as_text(anyio_backend: str) -> None:
    def fetch_page(url: str) -> str:
        """Fetch a page."""
        return DEEP

    call = _gemini([{"functionCall": {"id": "c1", "name": "fetch_page", "args": {"url": "u"}}}])
    with ScriptPeer(call, _gemini([{"text": "done"}])) as peer:
        model = iModel(**endpoint_options("google", peer, max_retries=0))
        branch = Branch(chat_model=model, tools=[fetch_page])
        await branch.operate(instruction="fetch", actions=True)
        assert await branch.operate(instruction="and?") == "done"
        await model.aclose()
        sent = peer.requests[-1]["contents"]
    responses = [p["functionResponse"] for c in sent for p in c["parts"] if "functionResponse" in p]
    assert responses[0]["id"] == "c1"
    assert isinstance(responses[0]["response"]["result"], str)
