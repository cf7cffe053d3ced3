"""Gemini API (``iModel(provider="google")``): ``:generateContent`` and ``:streamGenerateContent?alt=sse``.

:mod:`.request` (a body from Chat Completions-shaped messages, pure),
:mod:`.response` (a ``GenerateContentResponse`` to a normalized completion, pure),
:mod:`.stream` (the event stream folded into one answer, pure) and
:mod:`.endpoint` (the IO, through the shared transport).
"""

from __future__ import annotations

from typing import Any

from ..registry import ProviderSpec, register_provider

__all__ = ["GenerateContentEndpoint", "PROVIDER"]

#: This package's provider, registered when the package is imported.
PROVIDER = register_provider(ProviderSpec(
    "google", "lionops.endpoints.google:GenerateContentEndpoint", "gcp.gemini",
    "https://generativelanguage.googleapis.com", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
))


def __getattr__(name: str) -> Any:
    if name == "GenerateContentEndpoint":  # imports the HTTP library only when first used
        from .endpoint import GenerateContentEndpoint

        return GenerateContentEndpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
