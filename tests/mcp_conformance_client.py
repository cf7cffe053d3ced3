"""The client the MCP conformance suite's client scenarios run:

    python -m tests.mcp_conformance_client URL

(``conformance client --command ... --scenario NAME`` appends the URL of its
test server and names the scenario in ``MCP_CONFORMANCE_SCENARIO``). It
connects with ``lionops.mcp.MCPServer(url=...)``, lists the tools and calls
each one the scenario expects through ``Branch.act`` (the governed path).
Elicitation is opted in with a callback that accepts the requested schema's
defaults; every other server request stays refused.

The ``auth/*`` scenarios connect through ``MCPServer(url=..., auth=...)`` with
the SDK's OAuth providers: the authorization-code flow (metadata discovery,
client registration or a pre-registered client, PKCE), whose consent page the
suite's authorization server answers with a redirect that is read here, and
the client-credentials flows with the credentials the suite hands over in
``MCP_CONFORMANCE_CONTEXT``. Each lists the tools and calls the first one.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import httpx2
import mcp.types as mt
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from lionops import Branch
from lionops.mcp import MCPServer

#: scenario -> the calls it expects (tool name, arguments)
CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "initialize": [],
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
    "sse-retry": [("test_reconnection", {})],
}


async def accept_defaults(context: Any, params: Any) -> mt.ElicitResult:
    """Accept an elicitation with the defaults its requested schema gives."""
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {name: spec["default"] for name, spec in properties.items()
               if isinstance(spec, dict) and "default" in spec}
    return mt.ElicitResult(action="accept", content=content)


class MemoryTokens(TokenStorage):
    """Tokens and client registration kept for the life of the process."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Consent:
    """Reads the authorization server's redirect in place of a user's browser."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=10) as client:
            answer = await client.get(authorization_url, follow_redirects=False)
        query = httpx2.URL(answer.headers.get("location", "")).params
        if "code" not in query:
            raise RuntimeError(f"no authorization code in the redirect (status {answer.status_code})")
        self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("the authorization redirect was not read")
        return self.result


REDIRECT = AnyUrl("http://localhost:3000/callback")


async def oauth(url: str, scenario: str) -> httpx2.Auth:
    """The SDK's OAuth provider a scenario asks for."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    storage = MemoryTokens()
    if scenario == "auth/client-credentials-basic":
        return ClientCredentialsOAuthProvider(
            server_url=url, storage=storage, client_id=context["client_id"],
            client_secret=context["client_secret"], token_endpoint_auth_method="client_secret_basic")
    if scenario == "auth/client-credentials-jwt":
        signed = SignedJWTParameters(issuer=context["client_id"], subject=context["client_id"],
                                     signing_algorithm=context.get("signing_algorithm", "ES256"),
                                     signing_key=context["private_key_pem"])
        return PrivateKeyJWTOAuthProvider(server_url=url, storage=storage, client_id=context["client_id"],
                                          assertion_provider=signed.create_assertion_provider())
    if context.get("client_id"):  # a client registered beforehand
        secret = context.get("client_secret")
        await storage.set_client_info(OAuthClientInformationFull(
            client_id=context["client_id"], client_secret=secret, redirect_uris=[REDIRECT],
            token_endpoint_auth_method="client_secret_basic" if secret else "none"))
    consent = Consent()
    return OAuthClientProvider(
        server_url=url, storage=storage, redirect_handler=consent.redirect, callback_handler=consent.callback,
        client_metadata=OAuthClientMetadata(client_name="lionops-conformance", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"]),
        client_metadata_url="https://conformance-test.local/client-metadata.json")


async def main(url: str, scenario: str) -> int:
    auth = await oauth(url, scenario) if scenario.startswith("auth/") else None
    async with MCPServer(url=url, name="conformance", auth=auth, elicitation=accept_defaults,
                         call_timeout=20) as server:
        tools = await server.tools()
        branch = Branch(tools=tools)
        calls = CALLS.get(scenario, [(tools[0].name, {})] if tools else [])
        requests = [{"function": name, "arguments": arguments} for name, arguments in calls]
        responses = await branch.act(requests, strategy="sequential") if requests else []
    for response in responses:
        print(json.dumps({"function": response.function, "decision": response.record.decision,
                          "output": response.output}, default=str))
    return 0 if all(r.record.decision == "allowed" for r in responses) else 1


if __name__ == "__main__":
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    sys.exit(anyio.run(main, sys.argv[-1], scenario))
