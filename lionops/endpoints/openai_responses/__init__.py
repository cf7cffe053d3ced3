"""OpenAI Responses (``iModel(provider="openai_responses")``): ``POST /responses``.

:mod:`.request` (a body from Chat Completions-shaped messages, pure),
:mod:`.response` (a ``response`` to a normalized completion, pure),
:mod:`.stream` (the event stream folded into one ``response``, pure) and
:mod:`.endpoint` (the IO, through the shared transport).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ResponsesEndpoint"]


def __getattr__(name: str) -> Any:
    if name == "ResponsesEndpoint":  # imports the HTTP library only when first used
        from .endpoint import ResponsesEndpoint

        return ResponsesEndpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
