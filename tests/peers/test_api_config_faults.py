"""Configuration mistakes of an API model: a clear, early, typed error.

- ``base_url`` is checked whole when the ``iModel`` is built; the error names
  the fault (``BaseURLError.fault``) and never shows a query or user info.
- A cloud provider with no API key raises ``MissingAPIKeyError`` naming the
  variable to set, before any request; local providers stay keyless.
"""

from __future__ import annotations

import pytest

from lionops import BaseURLError, Branch, ConfigurationError, MissingAPIKeyError, iModel
from lionops.testing import completion
from tests.openai_server import server  # noqa: F401 - fixture

SECRET = "sk-query-SECRET-0123456789"

BAD_URLS = [
    ("localhost:8000/v1", "no_scheme", "no scheme"),
    ("api.example.com/v1", "no_scheme", "no scheme"),
    ("127.0.0.1:8000", "no_scheme", "no scheme"),
    (f"localhost:8000/v1?key={SECRET}", "no_scheme", "no scheme"),
    ("ftp://files.example.com/v1", "scheme", "only http and https"),
    ("http://", "no_host", "names no host"),
    ("http:///v1", "no_host", "names no host"),
    ("http://127.0.0.1:99999/v1", "port", "out of range"),
    ("http://127.0.0.1:80a/v1", "port", "bad port"),
    ("http://127.0.0.1:0/v1", "port", "port 0"),
    ("http://[::1/v1", "unreadable", "cannot be read"),
    ("http://api.example.com/v 1", "space", "position 24"),
    ("http://api.example.com/v1\n", "space", "control character"),
    (f"http://user:{SECRET}@api.example.com/v1", "user_info", "user info"),
]


@pytest.mark.parametrize(("url", "fault", "words"), BAD_URLS, ids=[u[0][:30] for u in BAD_URLS])
@pytest.mark.parametrize("provider", ["openai", "vllm"])
def test_a_bad_base_url_is_refused_when_the_model_is_built(url, fault, words, provider) -> None:
    with pytest.raises(BaseURLError) as info:
        iModel(provider=provider, model="m", api_key="k", base_url=url)
    assert info.value.fault == fault and words in str(info.value) and provider in str(info.value)
    assert isinstance(info.value, ConfigurationError) and SECRET not in str(info.value)
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.example.com/v1/", "HTTP://[::1]:8080/v1",
                                 "https://gateway.example.com/openai/v1?api-version=2024-10-21"])
def test_good_base_urls_are_kept(url) -> None:
    assert iModel(provider="openai", model="m", api_key="k", base_url=url).endpoint.base_url.startswith(
        url.split("?")[0].rstrip("/")[:4].lower())


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("openrouter", "OPENROUTER_API_KEY")])
async def test_a_cloud_provider_without_a_key_names_the_variable_and_sends_nothing(
        server, monkeypatch, provider, variable) -> None:  # noqa: F811
    monkeypatch.delenv(variable, raising=False)
    server.push(completion("never read"))
    model = iModel(provider=provider, model="m", base_url=server.base_url)
    with pytest.raises(MissingAPIKeyError) as info:
        await Branch(chat_model=model).operate(instruction="x")
    assert info.value.variable == variable and variable in str(info.value) and server.requests == []
    monkeypatch.setenv(variable, "sk-from-the-environment")
    keyed = iModel(provider=provider, model="m", base_url=server.base_url)
    assert await Branch(chat_model=keyed).operate(instruction="x") == "never read"
    await keyed.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["vllm", "ollama", "llamacpp", "lmstudio"])
async def test_local_providers_stay_keyless(server, monkeypatch, provider) -> None:  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cloud-key-never-sent")
    server.push(completion("ok"))
    model = iModel(provider=provider, model="m", base_url=server.base_url)
    assert await Branch(chat_model=model).operate(instruction="x") == "ok"
    await model.aclose()
    assert "authorization" not in server.requests[0].headers


@pytest.mark.anyio
async def test_a_credential_header_counts_as_a_key(server, monkeypatch) -> None:  # noqa: F811
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(completion("ok"))
    model = iModel(provider="openai", model="m", base_url=server.base_url, headers={"api-key": "azure-style-key"})
    assert await Branch(chat_model=model).operate(instruction="x") == "ok"
    await model.aclose()
