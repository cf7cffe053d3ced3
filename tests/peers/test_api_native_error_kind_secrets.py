"""A native provider's error type (``error.type``, ``error.status``,
``error.code``) that echoes a credential never keeps it, in the message nor
in the ``code`` of the typed error, on every native protocol, for the API
key and for a base-URL query value (as written and decoded)."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from lionops import Branch, iModel
from lionops.errors import EndpointStatusError
from tests.native_recordings import PROTOCOLS, SECRET_KEY, ScriptPeer, endpoint_options, error_answer

pytestmark = pytest.mark.anyio

QUERY_ENCODED = "qSeCrEt%2FVal%2B99"
QUERY_DECODED = "qSeCrEt/Val+99"
ECHOES = {"api key": SECRET_KEY, "query, encoded": QUERY_ENCODED, "query, decoded": QUERY_DECODED}


def _options(protocol: str, peer: ScriptPeer) -> dict[str, Any]:
    options = endpoint_options(protocol, peer, max_retries=0, backoff_initial=0.0)
    options["base_url"] += f"?sig={QUERY_ENCODED}"
    return options


async def _refused(protocol: str, answer: Any) -> str:
    """What a caller can see of the error one refused call raises: its traceback, attributes and args."""
    with ScriptPeer(answer) as peer:
        model = iModel(**_options(protocol, peer))
        with pytest.raises(EndpointStatusError) as caught:
            await Branch(chat_model=model).operate(instruction="hi")
        await model.aclose()
    err = caught.value
    return "".join(traceback.format_exception(err)) + repr(vars(err)) + repr(err.args)


@pytest.mark.parametrize("echo", list(ECHOES), ids=list(ECHOES))
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_error_type_echoing_a_secret_is_scrubbed_in_message_and_code(
        protocol: str, echo: str, anyio_backend: str) -> None:
    shown = await _refused(protocol, error_answer(protocol, 400, f"bad_{ECHOES[echo]}", "refused"))
    for value in (SECRET_KEY, QUERY_ENCODED, QUERY_DECODED):
        assert value not in shown


#: what providers echo of a key they refuse: a prefix and a suffix around stars, or one end of it
PARTIAL = {
    "middle starred": SECRET_KEY[:12] + "*" * 12 + SECRET_KEY[-4:],
    "prefix": SECRET_KEY[:20] + "...",
    "suffix": "..." + SECRET_KEY[-16:],
}


@pytest.mark.parametrize("echo", list(PARTIAL), ids=list(PARTIAL))
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_error_echoing_part_of_the_key_shows_no_run_of_eight(
        protocol: str, echo: str, anyio_backend: str) -> None:
    shown = await _refused(protocol, error_answer(protocol, 401, "authentication_error",
                                                  f"Incorrect API key provided: {PARTIAL[echo]}"))
    assert "Incorrect API key provided: " in shown and "***" in shown
    assert not [SECRET_KEY[i:i + 8] for i in range(len(SECRET_KEY) - 7) if SECRET_KEY[i:i + 8] in shown]
