"""Secrets echoed by the provider in any field of its error never leave the endpoint.

A provider error's ``code``, ``type``, ``param``, other ``error.*`` fields
and ``finish_reason`` text go through the same scrub as its ``message``, on
every path a provider error takes: an error object in a 200 body, a body
with ``"object": "error"``, a stream chunk carrying an error, and a choice
that ended with ``finish_reason: "error"``. Checked against the loopback
server, for every form of a secret: the API key, a base-URL query value
(percent-encoded and decoded) and a key inside a longer text.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import pytest

from lionops import Branch, iModel
from lionops.errors import EndpointProviderError
from lionops.testing import OpenAIServer, Reply

API_KEY = "sk-live-abcdef123456"
QUERY_ENCODED = "SeCrEt%2FKey%2B123"
QUERY_DECODED = "SeCrEt/Key+123"

SECRETS = {
    "api key": (API_KEY, API_KEY),
    "query value, encoded": (QUERY_ENCODED, QUERY_ENCODED),
    "query value, decoded": (QUERY_DECODED, QUERY_DECODED),
    "key inside a longer text": (f"bad-key:{API_KEY}:end", API_KEY),
}


def _fields(echo: str) -> dict[str, Any]:
    return {"message": "m", "code": echo, "type": echo, "param": echo, "detail": {"hint": echo}}


def _reply(path: str, echo: str) -> Reply:
    fields = _fields(echo)
    if path == "error object":
        return Reply({"error": fields})
    if path == "object error":
        return Reply({"object": "error", **fields})
    if path == "stream error chunk":
        return Reply(stream=[{"error": fields}])
    assert path == "finish_reason error"
    return Reply({"object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "error",
         "error": fields}]})


PATHS = ["error object", "object error", "stream error chunk", "finish_reason error"]


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("form", list(SECRETS))
async def test_no_provider_field_carries_a_secret_into_the_error(path: str, form: str, caplog) -> None:
    echo, secret = SECRETS[form]
    caplog.set_level(logging.DEBUG)
    with OpenAIServer([_reply(path, echo)]) as server:
        m = iModel(provider="openai", model="m", base_url=f"{server.base_url}?api-key={QUERY_ENCODED}",
                   api_key=API_KEY, max_retries=0)
        branch = Branch(chat_model=m)
        with pytest.raises(EndpointProviderError) as info:
            await branch.operate(instruction="x")
        await m.aclose()
    err = info.value
    seen = "\n".join([
        str(err), repr(err), repr(vars(err)), repr(err.code), str(err.provider_message),
        "".join(traceback.format_exception(err)), repr(getattr(err, "__notes__", None)),
        repr(err.__cause__), repr(err.__context__),
        branch.traces[-1].to_json(), str(branch.traces[-1].error), caplog.text,
        json.dumps(branch.logs.to_list(), default=str),
    ])
    assert secret not in seen
    assert "***" in str(err) and "***" in str(err.code)  # scrubbed, not dropped
