"""The public loopback servers of the native protocols (``lionops.testing``)."""

from __future__ import annotations

import httpx2
import pytest

from lionops import Branch, iModel
from lionops.errors import ConfigurationError, EndpointStatusError, NotStartedError
from lionops.testing import (
    AnthropicServer,
    GeminiServer,
    NativeReply,
    NativeServer,
    ResponsesServer,
    Turn,
    native_error,
)

pytestmark = pytest.mark.anyio

SERVERS = [(ResponsesServer, "openai_responses"), (AnthropicServer, "anthropic"), (GeminiServer, "google")]
IDS = [provider for _, provider in SERVERS]
KEY = "sk-served-SECRET-0123456789"


def _model(server: NativeServer, provider: str, **kw: object) -> iModel:
    options: dict[str, object] = {"max_retries": 1, "backoff_initial": 0.0, **kw}
    return iModel(provider=provider, model="m", base_url=server.base_url, api_key=KEY, **options)


@pytest.mark.parametrize(("Server", "provider"), SERVERS, ids=IDS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_each_server_answers_its_protocol_plain_or_streamed_as_asked(Server, provider, stream):
    with Server(Turn(thinking="think", text="first"), Turn(text="again")) as server:
        model = _model(server, provider, stream=stream)
        branch = Branch(chat_model=model)
        assert await branch.operate(instruction="x") == "first"
        assert await branch.operate(instruction="y") == "again"
        assert await branch.operate(instruction="z") == "again"  # the last item repeats
        await model.aclose()
    assert len(server.requests) == 3 and server.connections == 1
    assert branch.messages[1].metadata["reasoning"] == "think"


@pytest.mark.parametrize(("Server", "provider"), SERVERS, ids=IDS)
async def test_errors_in_the_protocols_shape_and_credentials_recorded_redacted(Server, provider):
    with Server(native_error(provider, 400, "invalid_request_error", "bad field")) as server:
        with pytest.raises(EndpointStatusError, match="bad field"):
            await Branch(chat_model=_model(server, provider)).operate(instruction="x")
    assert KEY not in repr(server.headers) and KEY not in repr(server)
    assert any("***" in value for value in server.headers[-1].values())


async def test_a_function_of_the_request_answers_and_the_server_stays_typed_and_shown():
    seen: list[dict[str, object]] = []

    def reply(request: dict[str, object]) -> Turn:
        seen.append(request)
        return Turn(calls=[("toolu_1", "lookup", {"q": "x"})])

    server = AnthropicServer(reply)
    assert "stopped" in repr(server)
    with pytest.raises(NotStartedError):
        server.base_url  # noqa: B018 - the property raises
    with server:
        assert repr(server).startswith(f"AnthropicServer({server.url}, requests=0")

        def lookup(q: str) -> str:
            """Look up."""
            return q

        result = await Branch(chat_model=_model(server, "anthropic"), tools=[lookup]).operate(
            instruction="x", actions=True)
    assert [r.output for r in result.action_responses] == ["x"] and seen[0]["model"] == "m"


async def test_a_server_without_a_protocol_takes_ready_replies_only():
    with pytest.raises(ConfigurationError, match="no protocol"):
        NativeServer(Turn(text="x"))
    with NativeServer(NativeReply(418, b'{"error": {"message": "teapot"}}')) as server:
        async with httpx2.AsyncClient() as client:
            answer = await client.post(server.url + "/anything", json={})
    assert answer.status_code == 418 and repr(NativeReply(200, b"{}")) == "NativeReply(200, application/json, 2 bytes)"


async def test_an_empty_script_answers_a_server_error():
    with ResponsesServer() as server:
        with pytest.raises(EndpointStatusError, match="script is empty"):
            await Branch(chat_model=_model(server, "openai_responses", max_retries=0)).operate(instruction="x")


@pytest.mark.parametrize("server_class", [ResponsesServer, AnthropicServer, GeminiServer, NativeServer])
@pytest.mark.parametrize("item", [[Turn(text="x")], (Turn(text="x"),), "hello", {"text": "x"}, None])
def test_a_script_item_of_the_wrong_kind_is_refused_with_the_right_call(server_class, item):
    # OpenAIServer takes a list; these take the items as arguments: a list (or
    # anything else) is refused when given, never a server error at the first request
    name = server_class.__name__
    with pytest.raises(ConfigurationError, match=rf"give the items as separate arguments: {name}\(Turn"):
        server_class(item)
    server = server_class(NativeReply(200, b"{}"))
    with pytest.raises(ConfigurationError, match="is not a Turn"):
        server.push(Turn(text="y"), item)
    assert len(server.script) == 1
