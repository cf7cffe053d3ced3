"""The Gemini API endpoint: ``POST {base_url}/v1beta/models/{model}:generateContent``
(``:streamGenerateContent?alt=sse`` when streaming).

The key goes in ``x-goog-api-key`` (a ``?key=`` in ``base_url`` is kept
secret too); bounds, retries, caps and redaction are the shared transport's
(:mod:`lionops.endpoints._native`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import quote

import httpx2
from pydantic import SecretStr

from .._native import Folder, NativeAnswers, NativeEndpoint
from ..openai.transport import _SHOWN_URLS
from .request import generate_body
from .response import normalize
from .stream import GenerateFolder

__all__ = ["GenerateContentEndpoint"]

#: The flag :meth:`GenerateContentEndpoint._build` leaves for the URL; never sent.
_STREAM = "__lionops_stream__"
#: The call's own model, when it is not the endpoint's (never sent in the body).
_MODEL = "__lionops_model__"


class GenerateContentEndpoint(NativeEndpoint):
    """``iModel(provider="google", model=..., api_key=..., base_url=...)``.

    ``base_url`` is the API root (default
    ``https://generativelanguage.googleapis.com``, or ``GOOGLE_GEMINI_BASE_URL``);
    the key defaults to ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``). A pydantic
    ``response_format`` goes as ``responseJsonSchema`` with
    ``responseMimeType: application/json``. Thought parts are kept as
    reasoning; every part goes back unchanged (``thoughtSignature`` included)
    with the function responses.
    """

    provider_name: ClassVar[str] = "google"
    native_protocol: ClassVar[str] = "google"
    key_header: ClassVar[str | None] = "x-goog-api-key"
    folder_class: ClassVar[type[Folder]] = GenerateFolder
    normalizer: ClassVar[Callable[[dict[str, Any], NativeAnswers], dict[str, Any]]] = staticmethod(normalize)

    def __init__(self, provider: str | None = None, model: str | None = None, base_url: str | None = None,
                 api_key: str | SecretStr | None = None, *args: Any, **kw: Any) -> None:
        if api_key is None and not os.environ.get("GEMINI_API_KEY"):
            api_key = os.environ.get("GOOGLE_API_KEY") or None
        if isinstance(model, str):
            model = model.removeprefix("models/")
        super().__init__(provider, model, base_url, api_key, *args, **kw)
        self._target = None  # the method (and alt=sse) follow the stream flag and the call's model
        self._public = self.base_url == self._base_url.get_secret_value().rstrip("/")
        self._targets: dict[bool, httpx2.URL] = {}
        if self.base_url != self._base_url.get_secret_value().rstrip("/"):  # the log shows the public form
            _SHOWN_URLS[str(httpx2.URL(self._request_url(True)))] = f"{self._root}{self._path(True)}"

    def _path(self, stream: bool, model: str | None = None) -> str:
        return f"/v1beta/models/{quote(str(model or self.model or ''), safe='')}:" + (
            "streamGenerateContent" if stream else "generateContent")

    def _model_url(self, stream: bool, model: str) -> str:
        base, query = self._base_and_query()
        query = "&".join(q for q in (query, self._stream_query(stream)) if q)
        return f"{base}{self._path(stream, model)}" + (f"?{query}" if query else "")

    def _stream_query(self, stream: bool) -> str:
        return "alt=sse" if stream else ""

    def _target_for(self, body: dict[str, Any]) -> httpx2.URL | str:
        """The method's URL: the model (the call's own when it names one) and
        the stream flag are in it. A URL without credentials is parsed once
        per flag; one with a query secret is built per request."""
        stream, model = bool(body.get(_STREAM)), body.get(_MODEL)
        if model is not None:
            return self._model_url(stream, str(model))
        if not self._public:
            return self._request_url(stream)
        target = self._targets.get(stream)
        if target is None:
            target = self._targets[stream] = httpx2.URL(self._request_url(stream))
        return target

    def _wire_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k not in (_STREAM, _MODEL)}

    def _build(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
               stream: bool) -> dict[str, Any]:
        body = generate_body(messages, options)
        if stream:
            body[_STREAM] = True
        if model != self.model:  # a call's own model: the URL names it
            body[_MODEL] = model
        return body
