"""Recorded answers of the three native protocols, and a loopback peer that serves them.

The shapes and the servers are :mod:`lionops.testing.native` (the public
loopback servers); this module names them as the tests use them:
``ScriptPeer`` answers each POST with the next scripted answer (the last one
repeats) and keeps every path, header set (as sent) and body; ``render`` is
:func:`~lionops.testing.native.native_reply`, ``error_answer``
:func:`~lionops.testing.native.native_error`.
"""

from __future__ import annotations

from typing import Any

from lionops.testing.native import (
    ENCRYPTED,
    PROTOCOLS,
    SIGNATURE,
    THOUGHT_SIGNATURE,
    USAGE,
    NativeServer,
    Turn,
    anthropic_body,
    anthropic_content,
    anthropic_events,
    google_body,
    google_chunks,
    google_parts,
    native_error,
    native_reply,
    responses_body,
    responses_events,
    responses_output,
)

__all__ = ["ENCRYPTED", "PROTOCOLS", "SIGNATURE", "THOUGHT_SIGNATURE", "USAGE", "ScriptPeer", "Turn",
           "anthropic_body", "anthropic_content", "anthropic_events", "google_body", "google_chunks",
           "google_parts", "render", "error_answer", "responses_body", "responses_events", "responses_output",
           "endpoint_options", "SECRET_KEY"]

render = native_reply
error_answer = native_error


class ScriptPeer(NativeServer):
    """Answers each POST with the next of ``script`` (the last one repeats); headers kept as sent."""

    def __init__(self, *script: Any) -> None:
        super().__init__(*script, redact=False)


def endpoint_options(protocol: str, peer: ScriptPeer, **kw: Any) -> dict[str, Any]:
    """``iModel`` keywords pointing ``protocol`` at ``peer``."""
    model = {"anthropic": "claude-peer", "openai_responses": "gpt-peer", "google": "gemini-peer"}[protocol]
    base = peer.base_url + ("/v1" if protocol == "openai_responses" else "")
    return {"provider": protocol, "model": model, "base_url": base, "api_key": SECRET_KEY, **kw}


#: The key every test endpoint sends; it must never appear in an error, log, span or recording.
SECRET_KEY = "sk-peer-SECRET-0123456789abcdef"
