"""Anthropic Messages (``iModel(provider="anthropic")``): ``POST /v1/messages``.

:mod:`.request` (a body from Chat Completions-shaped messages, pure),
:mod:`.response` (a ``message`` to a normalized completion, pure),
:mod:`.stream` (the event stream folded into one ``message``, pure) and
:mod:`.endpoint` (the IO, through the shared transport).
"""

from __future__ import annotations

from typing import Any

from ..registry import ProviderSpec, register_provider

__all__ = ["MessagesEndpoint", "PROVIDER"]

#: This package's provider, registered when the package is imported.
PROVIDER = register_provider(ProviderSpec(
    "anthropic", "lionops.endpoints.anthropic:MessagesEndpoint", "anthropic", "https://api.anthropic.com",
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
))


def __getattr__(name: str) -> Any:
    if name == "MessagesEndpoint":  # imports the HTTP library only when first used
        from .endpoint import MessagesEndpoint

        return MessagesEndpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
