"""The Anthropic Messages endpoint: ``POST {base_url}/v1/messages``.

The key goes in ``x-api-key`` with ``anthropic-version``; everything else
(bounds, retries on 429 / 529 ``overloaded_error`` / 5xx honouring
``retry-after``, caps, redaction) is the shared transport's
(:mod:`lionops.endpoints._native`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .._native import Folder, NativeAnswers, NativeEndpoint
from .request import API_VERSION, messages_body
from .response import normalize
from .stream import MessagesFolder

__all__ = ["MessagesEndpoint"]


class MessagesEndpoint(NativeEndpoint):
    """``iModel(provider="anthropic", model=..., api_key=..., base_url=...)``.

    ``base_url`` is the API root (default ``https://api.anthropic.com``, or
    ``ANTHROPIC_BASE_URL``); the key defaults to ``ANTHROPIC_API_KEY``.
    ``max_tokens`` (required by the API) defaults to 4096. A pydantic
    ``response_format`` is asked for by forcing one answer tool whose input
    schema is the answer's. Extended thinking (``thinking={"type":
    "enabled", "budget_tokens": ...}``) is kept as reasoning, and its blocks
    go back unchanged, signatures included, with the tool results.
    """

    provider_name: ClassVar[str] = "anthropic"
    native_protocol: ClassVar[str] = "anthropic"
    key_header: ClassVar[str | None] = "x-api-key"
    fixed_headers: ClassVar[dict[str, str]] = {"anthropic-version": API_VERSION}
    folder_class: ClassVar[type[Folder]] = MessagesFolder
    normalizer: ClassVar[Callable[[dict[str, Any], NativeAnswers], dict[str, Any]]] = staticmethod(normalize)

    def _path(self, stream: bool) -> str:
        return "/v1/messages"

    def _build(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
               stream: bool) -> dict[str, Any]:
        return messages_body(model, messages, options, stream=stream)
