"""Gemini API (``iModel(provider="google")``): ``:generateContent`` and ``:streamGenerateContent?alt=sse``.

:mod:`.request` (a body from Chat Completions-shaped messages, pure),
:mod:`.response` (a ``GenerateContentResponse`` to a normalized completion, pure),
:mod:`.stream` (the event stream folded into one answer, pure) and
:mod:`.endpoint` (the IO, through the shared transport).
"""

from __future__ import annotations

from typing import Any

__all__ = ["GenerateContentEndpoint"]


def __getattr__(name: str) -> Any:
    if name == "GenerateContentEndpoint":  # imports the HTTP library only when first used
        from .endpoint import GenerateContentEndpoint

        return GenerateContentEndpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
