"""OpenAI Responses (``iModel(provider="openai_responses")``): ``POST /responses``.

:mod:`.request` (a body from Chat Completions-shaped messages, pure),
:mod:`.response` (a ``response`` to a normalized completion, pure),
:mod:`.stream` (the event stream folded into one ``response``, pure) and
:mod:`.endpoint` (the IO, through the shared transport).
"""

from __future__ import annotations

from typing import Any

from ..registry import ProviderSpec, register_provider

__all__ = ["ResponsesEndpoint", "PROVIDER"]

#: This package's provider, registered when the package is imported.
PROVIDER = register_provider(ProviderSpec(
    "openai_responses", "lionops.endpoints.openai_responses:ResponsesEndpoint", "openai",
    "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL",
))


def __getattr__(name: str) -> Any:
    if name == "ResponsesEndpoint":  # imports the HTTP library only when first used
        from .endpoint import ResponsesEndpoint

        return ResponsesEndpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
