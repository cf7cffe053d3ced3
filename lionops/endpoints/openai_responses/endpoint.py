"""The OpenAI Responses endpoint: ``POST {base_url}/responses``.

The key goes in ``Authorization: Bearer``; bounds, retries, caps and
redaction are the shared transport's (:mod:`lionops.endpoints._native`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...errors import ConfigurationError
from .._native import NativeAnswers, NativeEndpoint, ProviderFacts
from .request import responses_body
from .response import normalize
from .stream import ResponsesFolder

__all__ = ["ResponsesEndpoint"]


class ResponsesEndpoint(NativeEndpoint):
    """``iModel(provider="openai_responses", model=..., api_key=..., base_url=...)``.

    ``base_url`` is the API root (default ``https://api.openai.com/v1``, or
    ``OPENAI_BASE_URL``); the key defaults to ``OPENAI_API_KEY``. A pydantic
    ``response_format`` goes as ``text.format`` (``json_schema``, strict when
    the schema allows it). Reasoning items are kept as reasoning and sent
    back with the tool results; pass ``include=["reasoning.encrypted_content"]``
    and ``store=False`` for stateless encrypted reasoning.
    """

    facts: ClassVar[ProviderFacts] = ProviderFacts(
        "openai_responses", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    native_protocol: ClassVar[str] = "openai_responses"

    @property
    def url(self) -> str:
        return f"{self._root}/responses"

    def _request_url(self) -> str:
        base, query = self._base_and_query()
        return f"{base}/responses" + (f"?{query}" if query else "")

    def request_body(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        stream = options.pop("stream", None)
        merged = {**self.default_options, **options}
        model = merged.pop("model", None) or self.model
        if not model:
            raise ConfigurationError(f"{self.provider}: no model name; pass iModel(model=...)")
        return responses_body(model, messages, merged, stream=self.stream if stream is None else bool(stream))

    def _folder(self, status: int) -> ResponsesFolder:
        return ResponsesFolder(self._answers, status)

    @staticmethod
    def _normalize(data: dict[str, Any], answers: NativeAnswers) -> dict[str, Any]:
        return normalize(data, answers)
