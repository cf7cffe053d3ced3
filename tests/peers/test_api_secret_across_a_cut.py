"""A secret quoted by a refused answer is scrubbed before the quote is cut:
a cut first could keep a part of the key the scrub no longer recognises.
The real endpoint against the loopback server, on asyncio and trio.
"""

from __future__ import annotations

import pytest

from lionops import Branch
from lionops.errors import EndpointResponseError
from lionops.testing import OpenAIServer
from tests.openai_server import make_model

pytestmark = pytest.mark.anyio

SECRET = "zz-private-credential-0042-abcdef"


def choice(index: int, call_id: str) -> dict[str, object]:
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"index": index, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": [call]}}


async def test_a_secret_in_a_repeated_tool_call_id_is_scrubbed_before_any_cut():
    call_id = "x" * 60 + SECRET  # the old cut at 64 characters kept "zz-p" and dropped the rest
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m", "choices": [choice(0, call_id),
                                                                                         choice(1, call_id)]}
    with OpenAIServer([body]) as server:
        model = make_model(server, api_key=SECRET)
        try:
            with pytest.raises(EndpointResponseError) as info:
                await Branch(chat_model=model).operate(instruction="x")
        finally:
            await model.aclose()
    text = str(info.value)
    assert "tool-call id" in text and "x" * 60 in text
    assert SECRET[:4] not in text.replace("x" * 60, "")
