"""The shared HTTP seam of the native provider endpoints.

:class:`NativeEndpoint` is the Chat Completions endpoint's transport
(:mod:`lionops.endpoints.openai.transport`: one reused client per event loop,
the socket ``timeout``, the call's ``deadline``, retries on 429, 5xx and
refused connections honouring ``Retry-After``, the body and stream caps, the
``silence_timeout``, secret redaction and typed errors) with four things
made per protocol by a subclass:

- where a call goes (:meth:`NativeEndpoint._request_url`) and how the key is
  sent (:meth:`NativeEndpoint._headers`);
- the request body, built from the Chat Completions-shaped messages and
  options that :func:`lionops.middles.api.communicate` hands every endpoint
  (a pure ``request`` module per protocol);
- how a server-sent-event stream is folded into one answer (a pure
  ``stream`` module per protocol: :class:`Folder`);
- how an answer becomes a :class:`NativeCompletion` (a pure ``response``
  module per protocol).

A :class:`NativeCompletion` is read by ``communicate`` exactly as a Chat
Completions answer: ``finish_reason`` ``"length"`` for a cut answer and
``"content_filter"`` for a refused one (both returned as a
:class:`~lionops.models.RawOutput`, never parsed), tool calls in the Chat
Completions form (so the same action requests reach the same ``act()``), the
reasoning kept apart from the text, and ``native``: the provider's own
content of the turn (thinking blocks with their signatures, reasoning items,
thought parts), which the endpoint sends back unchanged on the next turn.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx2
from pydantic import SecretStr

from .._json import loads as bounded_json
from ..errors import ConfigurationError, EndpointProviderError, EndpointResponseError
from .openai.config import BODY_PREVIEW
from .openai.response import Answers, ChatCompletion
from .openai.stream import LINE_BREAK, EventFields
from .openai.transport import ChatCompletionsEndpoint

__all__ = ["NativeEndpoint", "NativeCompletion", "NativeAnswers", "Folder", "usage_record",
           "count", "loads_object", "data_url", "cc_calls", "tool_specs", "json_schema_format"]


#: Named events that carry no part of the answer (Anthropic's keep-alive ``ping``):
#: not counted as chunks of the answer.
_NOT_CHUNKS = frozenset({"ping"})


@dataclass(frozen=True, slots=True)
class NativeCompletion(ChatCompletion):
    """A native answer, normalized like a Chat Completions one.

    Attributes:
        native: the provider's own content of the turn, sent back unchanged
            on the next turn (``{"protocol": ..., "content": [...]}``), or ``None``.
        stop_reason: the provider's own stop or finish reason, as sent.
    """

    native: dict[str, Any] | None = field(default=None, repr=False)
    stop_reason: str | None = None


def usage_record(*, input_total: int | None, output: int | None, cache_read: int | None = None,
                 cache_write: int | None = None, reasoning: int | None = None) -> dict[str, int]:
    """A usage mapping in the Chat Completions convention (``prompt_tokens``
    counts cached input, ``completion_tokens`` counts reasoning), with the
    cache and reasoning counts beside it under the names lionops reports."""
    out: dict[str, int] = {}
    if input_total is not None:
        out["prompt_tokens"] = int(input_total)
    if output is not None:
        out["completion_tokens"] = int(output)
    if input_total is not None and output is not None:
        out["total_tokens"] = int(input_total) + int(output)
    for key, value in (("cache_read_input_tokens", cache_read), ("cache_creation_input_tokens", cache_write),
                       ("reasoning_tokens", reasoning)):
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    return out


def count(value: Any) -> int | None:
    """``value`` when it is a token count (an int, not a bool, not negative), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def mapped_options(options: dict[str, Any], dropped: Collection[str], renamed: dict[str, str]) -> dict[str, Any]:
    """A request's options as a protocol's body keys: ``None`` values and the
    ``dropped`` keys left out, the ``renamed`` keys under their protocol name."""
    return {renamed.get(key, key): value for key, value in options.items()
            if value is not None and key not in dropped}


def event_kind(data: dict[str, Any], event: str | None) -> str | None:
    """The event's type (its ``type``, else the SSE event name); a type that is
    not text names no event, so it is ignored as unknown events are."""
    kind = data.get("type") or event
    return kind if isinstance(kind, str) else None


class Folder:
    """Folds one protocol's server-sent events into the answer a plain call returns.

    Subclasses implement :meth:`feed` (one event; ``True`` once the stream's
    last event arrived) and :meth:`result` (the assembled answer object,
    or a typed error for a stream that ended early).
    """

    def __init__(self, answers: NativeAnswers, status: int) -> None:
        self.answers = answers
        self.status = status

    def feed(self, event: str | None, data: Any) -> bool:  # pragma: no cover - per protocol
        raise NotImplementedError

    def result(self, ended: bool) -> dict[str, Any]:  # pragma: no cover - per protocol
        raise NotImplementedError

    def settled(self) -> bool:
        """Whether the answer is whole though the stream has no last event of its
        own (Gemini's chunk with the finish reason); what follows is read only
        for ``stream_end_grace``."""
        return False

    def broken(self, what: str) -> EndpointResponseError:
        return EndpointResponseError(
            f"{self.answers.provider}: the event stream from POST {self.answers.url} {what}",
            provider=self.answers.provider, url=self.answers.url,
        )


@dataclass(frozen=True, slots=True)
class NativeAnswers:
    """How a native endpoint's answers are read: the Chat Completions
    :class:`~lionops.endpoints.openai.response.Answers` (typed, scrubbed
    errors) with the protocol's own ``normalize``."""

    base: Answers
    normalize: Callable[[dict[str, Any], NativeAnswers], dict[str, Any]]

    @property
    def provider(self) -> str:
        return self.base.provider

    @property
    def url(self) -> str:
        return self.base.url

    def response_error(self, what: str, status: int, text: str) -> EndpointResponseError:
        return self.base.response_error(what, status, text)

    def decode_json(self, text: str, status: int, what: str) -> Any:
        return self.base.decode_json(text, status, what)

    def provider_error(self, err: Any, status: int, where: str, *, retryable: bool = False) -> EndpointProviderError:
        """The provider's own error object as a typed error; ``retryable``
        marks an error the provider says is passing (overloaded, internal)."""
        if isinstance(err, dict) and "message" not in err and isinstance(err.get("error"), dict):
            err = err["error"]
        if isinstance(err, dict) and err.get("code") is None:
            code = err.get("type") or err.get("status")
            if code is not None:
                err = {**err, "code": code}
        out = self.base.provider_error(err, status, where)
        out.retryable = retryable  # type: ignore[attr-defined]
        return out

    def completion(self, data: Any, *, latency: float, attempts: int, retries: list[dict[str, Any]],
                   n: Any = None) -> NativeCompletion:
        if not isinstance(data, dict):
            raise self.base.response_error("an answer that is not a JSON object", 200, str(data)[:BODY_PREVIEW])
        fields = self.normalize(data, self)
        return NativeCompletion(latency_s=latency, attempts=attempts, retries=list(retries), raw=data, **fields)


class NativeEndpoint(ChatCompletionsEndpoint):
    """The Chat Completions transport speaking a provider's native protocol.

    Takes the same keywords as
    :class:`~lionops.endpoints.openai.transport.ChatCompletionsEndpoint`
    (``timeout``, ``deadline``, ``max_retries``, ``retry_after_cap``,
    backoff, ``stream``, ``silence_timeout``, ``max_response_bytes``,
    ``native_tools``, ``headers``, ``verify``, default request options), and
    reads its key and base URL from the variables its registered
    :class:`~lionops.endpoints.registry.ProviderSpec` names.
    """

    #: The registered provider name this class serves (:mod:`lionops.endpoints.registry`).
    provider_name: ClassVar[str]
    #: Which messages' ``native`` content this endpoint sends back (:func:`lionops.middles.api.provider_messages`).
    native_protocol: ClassVar[str]
    #: The header the key goes in (``None``: ``Authorization: Bearer``), and headers every request carries.
    key_header: ClassVar[str | None] = None
    fixed_headers: ClassVar[dict[str, str]] = {}
    #: The stream folder and the answer normalizer of the protocol.
    folder_class: ClassVar[type[Folder]]
    normalizer: ClassVar[Callable[[dict[str, Any], NativeAnswers], dict[str, Any]]]

    def __init__(self, provider: str | None = None, model: str | None = None, base_url: str | None = None,
                 api_key: str | SecretStr | None = None, *args: Any, **kw: Any) -> None:
        # The registry's spec of the provider gives the default base URL and the key and URL variables.
        super().__init__(provider or self.provider_name, model, base_url, api_key, *args, **kw)

    # ------------------------------------------------------------ per protocol

    def _path(self, stream: bool) -> str:  # pragma: no cover - per protocol
        """The request path after the base URL."""
        raise NotImplementedError

    def _build(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
               stream: bool) -> dict[str, Any]:  # pragma: no cover - per protocol
        """The protocol's request body."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """The request URL as shown (no credentials, no query)."""
        return f"{self._root}{self._path(bool(getattr(self, 'stream', False)))}"

    def _request_url(self, stream: bool = False) -> str:
        base, query = self._base_and_query()
        query = "&".join(q for q in (query, self._stream_query(stream)) if q)
        return f"{base}{self._path(stream)}" + (f"?{query}" if query else "")

    def _stream_query(self, stream: bool) -> str:
        return ""

    def _headers(self) -> dict[str, str]:
        if self.key_header is None:
            return {**super()._headers(), **self.fixed_headers}
        headers = {"Content-Type": "application/json", **self.fixed_headers}
        headers.update({k: v.get_secret_value() for k, v in self._extra_headers.items()})
        if self.has_api_key:
            assert self._api_key is not None
            headers[self.key_header] = self._api_key.get_secret_value()
        return headers

    def request_body(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        """The protocol's body from Chat Completions-shaped ``messages`` and
        options (default options first); ``stream`` defaults to the endpoint's.

        Raises:
            ConfigurationError: no model name.
        """
        stream = options.pop("stream", None)
        merged = {**self.default_options, **options}
        model = merged.pop("model", None) or self.model
        if not model:
            raise ConfigurationError(f"{self.provider}: no model name; pass iModel(model=...)")
        return self._build(str(model), messages, merged, self.stream if stream is None else bool(stream))

    def _base_and_query(self) -> tuple[str, str]:
        from urllib.parse import urlsplit, urlunsplit

        full = urlsplit(self._base_url.get_secret_value())
        return urlunsplit((full.scheme, full.netloc, full.path.rstrip("/"), "", "")), full.query

    @property
    def _root(self) -> str:
        """The public base URL without a trailing slash."""
        return self.base_url.rstrip("/")

    def _folder(self, status: int) -> Folder:
        return self.folder_class(self._answers, status)

    @property
    def _answers(self) -> NativeAnswers:  # type: ignore[override]
        """How this endpoint's answers are read: made once per URL shown (the
        stream flag may change it)."""
        url = self.url
        made: NativeAnswers | None = self.__dict__.get("_made_answers")
        if made is None or made.url != url or made.provider != self.provider:
            made = NativeAnswers(Answers(self.provider, url, self.scrub, self.preview), type(self).normalizer)
            self.__dict__["_made_answers"] = made
        return made

    # ------------------------------------------------------------ IO

    async def _exchange_on(self, client: httpx2.AsyncClient, target: httpx2.URL | str, content: bytes, attempt: int,
                           started: list[int]) -> dict[str, Any]:
        answers = self._answers
        async with client.stream("POST", target, content=content, headers=self._headers()) as response:
            started.append(response.status_code)
            status = response.status_code
            try:
                if not response.is_success:
                    raise self._status_error(await self._buffered(response), self.url, attempt)
                if "text/event-stream" in response.headers.get("content-type", "").lower():
                    return await self._read_native_events(response, answers)
                raw = await self._read_body(response)
            except httpx2.DecodingError as exc:
                raise answers.response_error(f"a body that cannot be decoded ({type(exc).__name__})", status,
                                             "") from None
            ctype = response.headers.get("content-type") or "no content type"
        text = raw.decode("utf-8-sig", errors="replace")
        if text.lstrip().startswith(("data:", "event:", ":")):  # an event stream labelled as something else
            folder = self._folder(status)
            fields = EventFields()
            done = self._fold(folder, fields.feed(LINE_BREAK.split(text), end=True), answers, status)
            return folder.result(done)
        data = answers.decode_json(text, status, f"a body that is not JSON ({ctype})")
        if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
            folder = self._folder(status)  # a stream sent as one JSON array (Gemini without alt=sse)
            done = any([folder.feed(None, d) for d in data])
            return folder.result(done or True)
        if not isinstance(data, dict):
            raise answers.response_error("a JSON body that is not an object", status, text)
        return data

    def _fold(self, folder: Folder, payloads: list[tuple[str | None, str]], answers: NativeAnswers,
              status: int) -> bool:
        done = False
        for event, payload in payloads:
            if payload.strip() == "[DONE]":
                return True
            data = answers.decode_json(payload, status, "a stream event that is not JSON")
            done = folder.feed(event, data) or done
        return done

    async def _read_native_events(self, response: httpx2.Response, answers: NativeAnswers) -> dict[str, Any]:
        """Fold a server-sent-event stream into one answer object, bounded as
        the Chat Completions stream is: ``silence_timeout`` between ``data:``
        events (comments do not count) and ``max_response_bytes`` in all.
        What follows a whole answer without a last event of its own (a
        trailing usage chunk after Gemini's finish reason) is folded for at
        most ``stream_end_grace`` (:meth:`_stream_events`)."""
        folder = self._folder(response.status_code)
        status = response.status_code
        whole = await self._stream_events(response, lambda payloads: self._fold(folder, payloads, answers, status),
                                          settled=folder.settled, skip=_NOT_CHUNKS)
        return folder.result(whole)

    def _status_error(self, response: httpx2.Response, url: str, attempt: int) -> Any:
        """The Chat Completions status error, with the provider's error type
        (``overloaded_error``, ``RESOURCE_EXHAUSTED``) named in the message."""
        err = super()._status_error(response, url, attempt)
        kind = _error_kind(response)
        kind = self.scrub(kind) if kind else kind  # the provider's text may echo a credential
        if kind and err.args:
            err.args = (f"{err.args[0]} [{kind[:80]}]", *err.args[1:])
        err.code = kind  # type: ignore[attr-defined]
        return err

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r}, "
            f"base_url={self.base_url!r}, api_key={'set' if self.has_api_key else 'unset'}, "
            f"timeout={self.timeout:g}, deadline={self.deadline:g}, max_retries={self.max_retries}, "
            f"stream={self.stream})"
        )

    __str__ = __repr__


def _error_kind(response: httpx2.Response) -> str | None:
    """The provider's error type of an error body: Anthropic's ``error.type``,
    Google's ``error.status``, OpenAI's ``error.code`` / ``error.type``."""
    try:
        data = bounded_json(response.text)
    except ValueError:  # not JSON, or nested past the bound (JSONLimitError)
        return None
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return None
    for key in ("type", "status", "code"):
        if isinstance(err.get(key), str) and err[key]:
            return str(err[key])
    return None


def loads_object(text: Any) -> dict[str, Any] | None:
    """``text`` decoded as a JSON object, else ``None``."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        return None
    try:
        value = bounded_json(text or "{}", what="tool-call arguments")
    except ValueError:  # not JSON, or nested past the bound (JSONLimitError)
        return None
    return value if isinstance(value, dict) else None



def data_url(url: str) -> tuple[str, str] | None:
    """``(media type, base64 data)`` of a ``data:`` URL, else ``None``."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, _, data = url[5:].partition(";base64,")
    return head or "application/octet-stream", data


def cc_calls(message: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(id, name, arguments)`` of a Chat Completions assistant message's
    ``tool_calls`` (arguments that are not a JSON object are sent as ``{}``)."""
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append((str(call.get("id") or ""), fn["name"], loads_object(fn.get("arguments")) or {}))
    return out


def tool_specs(tools: Any) -> list[tuple[str, str | None, dict[str, Any]]]:
    """``(name, description, parameters schema)`` of Chat Completions ``tools``."""
    out = []
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out.append((fn["name"], fn.get("description"),
                        dict(params) if isinstance(params, dict) else {"type": "object", "properties": {}}))
    return out


def json_schema_format(response_format: Any) -> tuple[str, dict[str, Any], bool] | None:
    """``(name, schema, strict)`` of a Chat Completions ``json_schema`` response format, else ``None``."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        return None
    return str(spec.get("name") or "response"), spec["schema"], bool(spec.get("strict"))
