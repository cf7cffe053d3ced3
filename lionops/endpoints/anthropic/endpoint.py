"""The Anthropic Messages endpoint: ``POST {base_url}/v1/messages``.

The key goes in ``x-api-key`` with ``anthropic-version``; everything else
(bounds, retries on 429 / 529 ``overloaded_error`` / 5xx honouring
``retry-after``, caps, redaction) is the shared transport's
(:mod:`lionops.endpoints._native`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...errors import ConfigurationError
from .._native import NativeAnswers, NativeEndpoint, ProviderFacts
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

    facts: ClassVar[ProviderFacts] = ProviderFacts(
        "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
    native_protocol: ClassVar[str] = "anthropic"

    @property
    def url(self) -> str:
        return f"{self._root}/v1/messages"

    def _request_url(self) -> str:
        base, query = self._base_and_query()
        return f"{base}/v1/messages" + (f"?{query}" if query else "")

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "anthropic-version": API_VERSION}
        headers.update({k: v.get_secret_value() for k, v in self._extra_headers.items()})
        if self.has_api_key:
            assert self._api_key is not None
            headers["x-api-key"] = self._api_key.get_secret_value()
        return headers

    def request_body(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        stream = options.pop("stream", None)
        merged = {**self.default_options, **options}
        model = merged.pop("model", None) or self.model
        if not model:
            raise ConfigurationError(f"{self.provider}: no model name; pass iModel(model=...)")
        return messages_body(model, messages, merged, stream=self.stream if stream is None else bool(stream))

    def _folder(self, status: int) -> MessagesFolder:
        return MessagesFolder(self._answers, status)

    @staticmethod
    def _normalize(data: dict[str, Any], answers: NativeAnswers) -> dict[str, Any]:
        return normalize(data, answers)
