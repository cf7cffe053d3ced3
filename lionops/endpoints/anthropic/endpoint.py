"""The Anthropic Messages endpoint: ``POST {base_url}/v1/messages``.

The key goes in ``x-api-key`` with ``anthropic-version``. A turn the API
pauses (``stop_reason`` ``pause_turn``: a long-running server tool loop,
such as web search) is continued as documented: the request is sent again
with the paused content appended as the assistant turn, at most
``pause_turn_limit`` times within the call's deadline; the answer is the
whole turn. Everything else
(bounds, retries on 429 / 529 ``overloaded_error`` / 5xx honouring
``retry-after``, caps, redaction) is the shared transport's
(:mod:`lionops.endpoints._native`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import httpx2

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

    A paused turn (``pause_turn``) is continued by sending its content back
    as the assistant turn, at most :attr:`pause_turn_limit` times; the
    answer joins the turn's content and adds up its usage. A turn still
    paused after that is returned as a cut answer (``finish_reason``
    ``"length"``, a :class:`~lionops.models.RawOutput`, never parsed).
    """

    #: Continuations of a paused turn in one call (each one a request within the call's deadline).
    pause_turn_limit: int = 4

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

    async def _exchange(self, client: httpx2.AsyncClient, body: dict[str, Any], attempt: int) -> dict[str, Any]:
        data = await super()._exchange(client, body, attempt)
        paused: list[dict[str, Any]] = []
        while _paused(data) and len(paused) < self.pause_turn_limit:
            paused.append(data)
            body = continued(body, paused)
            data = await super()._exchange(client, body, attempt)
        return joined(paused, data) if paused else data


def _paused(data: Any) -> bool:
    return isinstance(data, dict) and data.get("stop_reason") == "pause_turn" and isinstance(data.get("content"), list)


def _blocks(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content blocks as they are sent back (no reader's own keys)."""
    return [{k: v for k, v in b.items() if not k.startswith("_")} for b in data["content"] if isinstance(b, dict)]


def continued(body: dict[str, Any], paused: list[dict[str, Any]]) -> dict[str, Any]:
    """``body`` continuing the paused turn: the content so far as the last
    (assistant) message, and the paused answer's ``container`` when it has one."""
    content = [block for data in paused for block in _blocks(data)]
    messages = list(body["messages"])
    if len(paused) > 1:
        messages.pop()  # the assistant turn of the earlier continuation, sent again whole
    out = {**body, "messages": [*messages, {"role": "assistant", "content": content}]}
    container = paused[-1].get("container")
    if isinstance(container, dict) and isinstance(container.get("id"), str):
        out["container"] = container["id"]
    return out


def joined(paused: list[dict[str, Any]], last: dict[str, Any]) -> dict[str, Any]:
    """One message of a continued turn: every part's content in order, the
    last part's stop reason, and the parts' token counts added up."""
    if not isinstance(last.get("content"), list):
        return last
    parts = [*paused, last]
    usage: dict[str, Any] = {}
    for part in parts:
        for key, value in (part.get("usage") or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                usage[key] = usage.get(key, 0) + value
            else:
                usage.setdefault(key, value)
    content = [block for part in parts for block in part["content"] if isinstance(block, dict)]
    return {**last, "content": content, "usage": usage}
