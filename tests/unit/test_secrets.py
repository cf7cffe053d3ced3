"""One notion of a secret: the CLI endpoints and the cassette redactor
recognise the same secret variables, and the test server records every
credential header redacted."""

from __future__ import annotations

import httpx2
import pytest

from lionops.endpoints.cli import REDACTED, ClaudeCodeEndpoint
from lionops.replay import Redactor
from lionops.testing import OpenAIServer, Reply, completion

#: variable name -> recognised by (CLI endpoint, cassette redactor) before they shared one rule.
NAMES = ["DB_PASSWD", "SERVICE_CREDENTIAL", "PROXY_AUTH", "GH_TOKEN", "OPENAI_API_KEY", "SIGNING_KEY"]


@pytest.mark.parametrize("name", NAMES)
def test_cli_endpoint_and_cassettes_agree_on_secret_variables(name, monkeypatch):
    value = f"{name.lower()}-value-1234"
    endpoint = ClaudeCodeEndpoint(cli_command=["claude"], env={name: value})
    assert endpoint.redact(f"failed with {value}") == f"failed with {REDACTED}"
    assert endpoint.scrub(f"failed with {value}") == "failed with ***"
    monkeypatch.setenv(name, value)
    assert Redactor().text(f"sent {value}") == "sent ***"


def test_ordinary_variables_are_left_alone(monkeypatch):
    monkeypatch.setenv("LIONOPS_PLAIN_SETTING", "plain-value-1234")
    endpoint = ClaudeCodeEndpoint(cli_command=["claude"], env={"LIONOPS_PLAIN_SETTING": "plain-value-1234"})
    assert endpoint.redact("plain-value-1234") == "plain-value-1234"
    assert Redactor().text("plain-value-1234") == "plain-value-1234"


def test_the_test_server_records_every_credential_header_redacted():
    with OpenAIServer([Reply(body=completion("hi"))]) as server:
        httpx2.post(f"{server.base_url}/chat/completions?api-key=q-secret", json={"model": "m", "messages": []},
                   headers={"Authorization": "Bearer sk-live-123456", "x-api-key": "xk-live-123456"})
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer ***"
    assert request.headers["x-api-key"] == "***"
    assert "q-secret" not in request.path
