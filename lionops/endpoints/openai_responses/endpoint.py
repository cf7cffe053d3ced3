"""The OpenAI Responses endpoint: ``POST {base_url}/responses``.

The key goes in ``Authorization: Bearer``; bounds, retries, caps and
redaction are the shared transport's (:mod:`lionops.endpoints._native`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .._native import Folder, NativeAnswers, NativeEndpoint
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

    provider_name: ClassVar[str] = "openai_responses"
    native_protocol: ClassVar[str] = "openai_responses"
    folder_class: ClassVar[type[Folder]] = ResponsesFolder
    normalizer: ClassVar[Callable[[dict[str, Any], NativeAnswers], dict[str, Any]]] = staticmethod(normalize)

    def _path(self, stream: bool) -> str:
        return "/responses"

    def _build(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
               stream: bool) -> dict[str, Any]:
        return responses_body(model, messages, options, stream=stream)
