"""OpenAI-compatible Chat Completions over one reused ``httpx.AsyncClient``.

:class:`ChatCompletionsEndpoint` backs ``iModel(provider="openai", ...)`` and
the compatible aliases (``vllm``, ``ollama``, ``llamacpp``, ``lmstudio``,
``openrouter``). It sends one ``POST {base_url}/chat/completions`` per
logical call, retries 429 and 5xx answers and refused connections a bounded
number of times, and turns every failure into a typed
:class:`~lionops.errors.EndpointError`.

Every answer is read through httpx's streaming API, capped at
``max_response_bytes`` counted after decompression, and normalized: a body or
stream that is not a complete answer (the provider's ``error``, no choices, a
stream without a finish reason) is a typed error, never a partial answer.

Every wait (``Retry-After``, backoff) goes through :func:`lionops.clock.sleep`.
Three time bounds apply: ``timeout`` bounds each socket operation (one
connect, one write, one read), ``deadline`` bounds the whole call (every
attempt, every retry wait, a whole stream), and ``max_retries`` bounds the
number of requests. The deadline is measured on :func:`lionops.clock.monotonic`.

The API key is held as a :class:`pydantic.SecretStr`, sent only in the
``Authorization`` header, and removed from every message this module
writes: reprs, log records and exception text, before any
text is cut to a preview. Exceptions carry no chain (the HTTP library's
exceptions hold the request headers). httpx's and httpcore's log records are
scrubbed of every live endpoint's secrets. A base URL's query may hold
credentials too: it is never shown; user info in a base URL is refused.
"""

from __future__ import annotations

import codecs
import contextlib
import email.utils
import functools
import importlib.util
import json
import logging
import os
import re
import ssl
import time
import weakref
import zlib
from collections.abc import AsyncIterator, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import anyio.lowlevel
import httpx
from pydantic import SecretStr
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from .. import clock
from .._secrets import replace_secrets, scrub_url, url_query_secrets
from .._names import near_miss
from .._frozen import freeze
from ..adapters.common import per_request_model, request_model_of, request_schema
from ..runtime import current_runtime
from ..trace import current_meta
from ..errors import (
    ConfigurationError,
    EndpointAuthError,
    EndpointConnectionError,
    EndpointError,
    EndpointProviderError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
    MisspelledKeywordError,
)

__all__ = [
    "ChatCompletionsEndpoint",
    "ChatCompletion",
    "PROVIDER_DEFAULTS",
    "parse_retry_after",
    "strict_json_schema",
    "StreamAccumulator",
    "StructuredMode",
    "DEFAULT_DEADLINE",
    "call_deadline",
    "scrubbed_preview",
    "DEFAULT_MAX_RESPONSE_BYTES",
]

logger = logging.getLogger("lionops.http")

#: Request URLs that hold credentials (user info, query) -> the form shown.
_SHOWN_URLS: dict[str, str] = {}


#: Every live endpoint, so the HTTP libraries' log records can be scrubbed of their secrets.
_LIVE: weakref.WeakSet[ChatCompletionsEndpoint] = weakref.WeakSet()


class _RedactingFilter(logging.Filter):
    """Keeps endpoint secrets out of httpx's and httpcore's log records.

    httpx logs every request URL at INFO level: a lionops endpoint's URL is
    logged in its public form (no query), as lionops shows it. httpcore's
    DEBUG records show response headers, where an echoing server may return
    the key: every record's text is scrubbed of every live endpoint's
    secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and _SHOWN_URLS:
            record.args = tuple(
                _SHOWN_URLS.get(str(arg), arg) if isinstance(arg, httpx.URL) else arg for arg in record.args
            )
        endpoints = list(_LIVE)
        if endpoints:
            try:
                text = record.getMessage()
            except Exception:  # noqa: BLE001 - a record that cannot format is left to logging
                return True
            clean = text
            for endpoint in endpoints:
                clean = endpoint.scrub(clean)
            if clean != text:
                record.msg, record.args = clean, ()
        return True


#: Filters on a logger do not see its children's records, so each is named.
_HTTP_LOGGERS = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "httpcore.http2",
                 "httpcore.proxy", "httpcore.socks")
_FILTER = _RedactingFilter()
for _name in _HTTP_LOGGERS:
    logging.getLogger(_name).addFilter(_FILTER)

StructuredMode = Literal["json_schema", "json_object", "prompt"]


@dataclass(frozen=True, slots=True)
class _ProviderDefaults:
    base_url: str
    key_env: str | None
    base_url_env: str | None


#: provider -> default base URL and the environment variables it reads.
#: Local servers read no key variable, so a cloud key is never sent to them.
PROVIDER_DEFAULTS: dict[str, _ProviderDefaults] = {
    "openai": _ProviderDefaults("https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openrouter": _ProviderDefaults("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", None),
    "vllm": _ProviderDefaults("http://127.0.0.1:8000/v1", None, None),
    "ollama": _ProviderDefaults("http://127.0.0.1:11434/v1", None, None),
    "llamacpp": _ProviderDefaults("http://127.0.0.1:8080/v1", None, None),
    "lmstudio": _ProviderDefaults("http://127.0.0.1:1234/v1", None, None),
}

#: The endpoint's own keywords: a near miss of one is refused, not sent as a request option.
_ENDPOINT_KEYWORDS = (
    "provider", "model", "base_url", "api_key", "timeout", "max_retries", "deadline", "retry_after_cap",
    "backoff_initial", "backoff_factor", "backoff_max", "structured_output", "stream", "headers", "verify",
    "native_tools", "silence_timeout", "max_response_bytes",
)

#: Request keys the adapter owns; default options may not set them.
_RESERVED = frozenset({"messages"})

_BODY_PREVIEW = 300

#: The default total time for one call (retries, waits and streaming included), seconds.
DEFAULT_DEADLINE = 600.0

#: When the running adapter call must end (:func:`lionops.clock.monotonic`),
#: so every ``chat()`` inside it (a parse-model re-ask too) ends by then; ``None`` outside one.
_CALL_ENDS_AT: ContextVar[float | None] = ContextVar("lionops_call_ends_at", default=None)


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[float]:
    """Bound every ``chat()`` made in this context (and tasks started from it)
    to end within ``seconds`` from now: the total of one adapter call. Nested
    bounds keep the earlier end. Yields the end time.

    Raises:
        ConfigurationError: ``seconds`` is not a positive number.
    """
    ends = clock.monotonic() + _check_deadline(seconds)
    outer = _CALL_ENDS_AT.get()
    token = _CALL_ENDS_AT.set(ends if outer is None else min(outer, ends))
    try:
        yield ends
    finally:
        _CALL_ENDS_AT.reset(token)


#: The default cap on a response body, counted after decompression.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024



@dataclass(frozen=True, slots=True)
class ChatCompletion:
    """The first choice of one Chat Completions answer, normalized.

    Attributes:
        text: the assistant text (parts joined), or ``None``.
        refusal: the provider's refusal text, or ``None``.
        tool_calls: the raw ``tool_calls`` entries (``{"id", "type",
            "function": {"name", "arguments"}}``), arguments still JSON text;
            every entry the server sent, also one that is not an object.
        finish_reason: ``"stop"``, ``"length"``, ``"tool_calls"``,
            ``"content_filter"``, ... or ``None``.
        usage: token counts (``prompt_tokens``, ``completion_tokens``,
            ``total_tokens``); empty when the server sent none.
        model: the model name the server reports.
        latency_s: wall time of the whole call in seconds, retries included.
        attempts: HTTP requests made (1 + retries).
        retries: one ``{"status", "delay_s"}`` per retry, in order.
        raw: the decoded response body.
        reasoning: the text of ``reasoning_content`` / ``reasoning`` fields
            (or their stream deltas), kept as a fact; never parsed.
        choices: how many choices the server sent (merged into this answer
            unless the request asked for ``n > 1``).
    """

    text: str | None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    latency_s: float = 0.0
    attempts: int = 1
    retries: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    reasoning: str | None = field(default=None, repr=False)
    choices: int = 1


def _seconds(number: float) -> float | None:
    """A delay read from a header, at least 0; ``None`` (unreadable, so the
    backoff applies) for ``nan``, which is no number of seconds."""
    return None if number != number else max(0.0, number)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (delta seconds
    or an HTTP-date), never negative; ``None`` when absent or unreadable."""
    with contextlib.suppress(ValueError, TypeError):
        ms = _seconds(float(headers.get("retry-after-ms")) / 1000.0)  # type: ignore[arg-type]
        if ms is not None:
            return ms
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    with contextlib.suppress(ValueError):
        return _seconds(float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _admits_null(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_admits_null(n) for n in node.get("anyOf", ()))


def _strictify(node: Any) -> bool:
    """Make ``node`` (in place) a strict-mode schema; ``False`` when it cannot be one."""
    if isinstance(node, list):
        return all(_strictify(n) for n in node)
    if not isinstance(node, dict):
        return True
    if "oneOf" in node or "allOf" in node or "patternProperties" in node:
        return False
    is_object = node.get("type") == "object" or "properties" in node
    if is_object:
        extra = node.get("additionalProperties")
        props = node.get("properties")
        if extra not in (None, False) or not props:
            return False  # a free-form object (dict[str, Any]) cannot be strict
        required = list(node.get("required", []))
        for name, prop in props.items():
            if name in required:
                continue
            # An optional field may become required only if null means "left out".
            if not (isinstance(prop, dict) and prop.get("default", ...) is None and _admits_null(prop)):
                return False
            prop.pop("default", None)
            required.append(name)
        node["required"] = required
        node["additionalProperties"] = False
    for key in ("properties", "$defs", "definitions"):
        if key in node and not all(_strictify(v) for v in node[key].values()):
            return False
    for key in ("items", "anyOf", "prefixItems"):
        if key in node and not _strictify(node[key]):
            return False
    return True


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A strict-mode copy of ``schema``, or ``None`` when strict mode would change its meaning.

    Strict mode requires every property and no free-form objects. An
    optional field whose default is ``None`` and whose type admits null is
    made required-and-nullable (the same meaning). Any other optional field
    (``tags: list = []``), a ``dict[str, Any]`` (the action request
    ``arguments``), ``oneOf``/``allOf`` or ``patternProperties`` makes the
    schema non-strict, so leaving out an optional field never becomes fatal
    (a schema is strict only where strictness cannot reject a valid answer).
    """
    copy = json.loads(json.dumps(schema))
    return copy if _strictify(copy) else None


def _json_schema_option(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``json_schema`` response format of ``schema``, strict when strict mode keeps its meaning."""
    strict = strict_json_schema(schema)
    spec = {"name": _schema_name(schema), "schema": strict or schema, "strict": strict is not None}
    return {"type": "json_schema", "json_schema": spec}


def _schema_name(schema: dict[str, Any]) -> str:
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(schema.get("title") or "response"))
    return name[:64] or "response"


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """One verifying SSL context per process (building one costs tens of ms)."""
    return httpx.create_ssl_context()


def scrubbed_preview(text: str, scrub: Any, longest: int, limit: int = _BODY_PREVIEW) -> str:
    """The first ``limit`` characters of ``scrub(text)``: scrubbed before the
    cut, so a secret that straddles the cut is removed whole, never shown in part.

    ``longest`` is the length of the longest secret. Only a prefix of ``text``
    is scrubbed, one whose scrubbed form is ``longest`` characters longer than
    the preview: a secret cut by the end of that prefix can then only sit in
    those extra characters, never in the preview.
    """
    window = 2 * (limit + longest)
    while True:
        clean = scrub(text[:window])
        if window >= len(text) or len(clean) >= limit + longest:
            return clean[:limit]
        window *= 4


class ChatCompletionsEndpoint:
    """An OpenAI-compatible Chat Completions endpoint (the API path of ADR-0022 D3).

    Args:
        provider: a key of :data:`PROVIDER_DEFAULTS` (default ``"openai"``).
        model: the model name sent as ``model``.
        base_url: the API root (``.../v1``); default from the provider's
            environment variable (``OPENAI_BASE_URL`` for ``openai``) or
            :data:`PROVIDER_DEFAULTS`.
        api_key: the bearer key (surrounding whitespace removed); default
            from the provider's environment variable (``OPENAI_API_KEY``).
            ``None`` sends no Authorization.
        timeout: seconds one socket operation may wait (one connect, one
            write, one read of the body, a pool slot). It does not bound the
            call: a server that sends a byte every few seconds never trips it.
        deadline: seconds for the whole call: every attempt, every retry wait
            and a whole stream. A retry whose wait would pass the deadline is
            not made. Per call: ``chat(..., deadline=...)`` (so
            ``operate(..., deadline=...)``). Default 600.
        max_retries: retries after the first request on 429, 5xx and refused
            connections (2 → at most 3 requests).
        retry_after_cap: the longest ``Retry-After`` honoured, in seconds; a
            larger value raises :class:`~lionops.errors.EndpointRateLimitError`
            at once instead of waiting.
        backoff_initial, backoff_factor, backoff_max: the wait before retry
            *n* when the server gives no ``Retry-After``:
            ``min(backoff_initial * backoff_factor ** (n - 1), backoff_max)`` s.
        structured_output: how a pydantic response format is asked for:
            ``"json_schema"`` (native ``response_format``, strict when the
            schema allows it), ``"json_object"`` (JSON mode, schema in the
            prompt) or ``"prompt"`` (schema in the prompt only).
        stream: ask for a server-sent-event stream by default (``stream=`` per
            call wins); chunks are assembled into one answer, tool-call deltas
            by index, id or position. A stream cuts the read timeout to
            the gap between chunks rather than the whole answer.
        silence_timeout: the longest a stream may go without a ``data:``
            event, in seconds; keep-alive comments (``: ping``) do not reset
            it. Past it the call raises
            :class:`~lionops.errors.EndpointTimeoutError`.
        max_response_bytes: the largest response body read, counted after
            decompression (plain and streamed); a larger one raises
            :class:`~lionops.errors.EndpointResponseError` without reading
            further. Default 16 MiB.
        native_tools: send the offered tools as native ``tools`` also when a
            caller model exists (``communicate`` otherwise asks for the
            requests inside the structured answer, see docs/semantics.md).
        headers: extra HTTP headers for every request.
        verify: TLS verification: ``True`` (system defaults, one shared
            context), ``False``, a CA bundle path or an ``ssl.SSLContext``.
        **default_options: request options sent with every call
            (``temperature``, ``max_tokens``, ...); per-call options win.

    Raises:
        ConfigurationError: unknown provider, bad numbers, an unknown
            ``structured_output``, ``messages`` in the default options, or
            user info in ``base_url``.
        MisspelledKeywordError (a TypeError): a default option is a near
            miss of one of these keywords (``timout``, ``api_kye``).

    ``is_cli`` is false. The client is created lazily inside the running
    event loop (asyncio or trio) and reused by every call made in that loop;
    call :meth:`aclose` when done.
    """

    is_cli = False

    def __init__(
        self,
        provider: str = "openai",
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | SecretStr | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        *,
        deadline: float = DEFAULT_DEADLINE,
        retry_after_cap: float = 60.0,
        backoff_initial: float = 0.5,
        backoff_factor: float = 2.0,
        backoff_max: float = 8.0,
        structured_output: StructuredMode = "json_schema",
        stream: bool = False,
        headers: Mapping[str, str] | None = None,
        verify: bool | str | ssl.SSLContext = True,
        silence_timeout: float = 60.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        native_tools: bool = False,
        **default_options: Any,
    ) -> None:
        defaults = PROVIDER_DEFAULTS.get(provider)
        if defaults is None:
            raise ConfigurationError(f"unknown provider {provider!r}; known: {sorted(PROVIDER_DEFAULTS)}")
        if max_retries < 0 or timeout <= 0 or retry_after_cap < 0:
            raise ConfigurationError("max_retries must be >= 0, timeout > 0, retry_after_cap >= 0")
        deadline = _check_deadline(deadline)
        if silence_timeout <= 0 or max_response_bytes <= 0:
            raise ConfigurationError("silence_timeout and max_response_bytes must be > 0")
        if structured_output not in ("json_schema", "json_object", "prompt"):
            raise ConfigurationError(f"structured_output must be json_schema, json_object or prompt, got {structured_output!r}")
        reserved = _RESERVED & set(default_options)
        if reserved:
            raise ConfigurationError(f"{sorted(reserved)} cannot be default options")
        for name in default_options:  # ``timout=``, ``api_kye=`` would be sent in every request body
            suggestion = near_miss(name, _ENDPOINT_KEYWORDS)
            if suggestion is not None:
                raise MisspelledKeywordError(name, suggestion, where=f"iModel(provider={provider!r})")
        if api_key is None and defaults.key_env:
            api_key = os.environ.get(defaults.key_env) or None
        if base_url is None and defaults.base_url_env:
            base_url = os.environ.get(defaults.base_url_env) or None
        self.provider = provider
        self.model = model
        full_url = (base_url or defaults.base_url).rstrip("/")
        try:
            has_userinfo = "@" in urlsplit(full_url).netloc
        except ValueError:
            raise ConfigurationError(f"{provider}: base_url is not a valid URL") from None
        if has_userinfo:
            # httpx would send it as Basic auth in place of the bearer key, and
            # an echoing server would return it: refused, never shown.
            raise ConfigurationError(
                f"{provider}: base_url must not contain user info ('user:password@'); "
                "pass the key as api_key= or a header in headers="
            )
        # The query may carry credentials (``?api-key=``): only the public form is shown.
        self._base_url = SecretStr(full_url)
        self.base_url = scrub_url(full_url)
        if self.base_url != full_url:
            _SHOWN_URLS[str(httpx.URL(self._request_url()))] = self.url
        if isinstance(api_key, str):  # a key read from a file often ends in a newline
            api_key = SecretStr(api_key.strip())
        self._api_key = api_key
        self.timeout = float(timeout)
        self.deadline = deadline
        self.max_retries = int(max_retries)
        self.retry_after_cap = float(retry_after_cap)
        self.backoff_initial = float(backoff_initial)
        self.backoff_factor = float(backoff_factor)
        self.backoff_max = float(backoff_max)
        self.structured_output: StructuredMode = structured_output
        self.stream = bool(stream)
        self.silence_timeout = float(silence_timeout)
        self.max_response_bytes = int(max_response_bytes)
        self.native_tools = bool(native_tools)
        self._extra_headers = {k: SecretStr(v) for k, v in (headers or {}).items()}
        self.verify = verify
        self.default_options = dict(default_options)
        self._client: httpx.AsyncClient | None = None
        self._client_token: Any = None
        _LIVE.add(self)

    # ------------------------------------------------------------ secrets

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None and bool(self._api_key.get_secret_value())

    def _secrets(self) -> list[str]:
        """Every form of every secret value, longest first (so a form holding
        another goes whole): as given, stripped, escaped as in a ``repr``
        (the HTTP library quotes a header it refuses), and the credential of
        an ``<scheme> <credential>`` header value (a server may echo only it)."""
        found = [self._api_key, *self._extra_headers.values(), *map(SecretStr, url_query_secrets(self._base_url.get_secret_value()))]
        forms: set[str] = set()
        for secret in found:
            value = secret.get_secret_value() if secret is not None else ""
            forms.update((value, value.strip(), repr(value)[1:-1]))
            forms.update(part for part in value.split()[1:] if len(part) >= 8)
        return sorted((v for v in forms if len(v) >= 4), key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """``text`` with the API key, extra header values and the base URL's
        query values replaced by ``***``."""
        return replace_secrets(text, self._secrets())

    def preview(self, text: str) -> str:
        """At most 300 characters of ``text``, secrets removed before the cut."""
        secrets = self._secrets()
        return scrubbed_preview(text, self.scrub, len(secrets[0]) if secrets else 0)

    # ------------------------------------------------------------ client

    @property
    def url(self) -> str:
        """The Chat Completions URL as shown (``{base_url}/chat/completions``)."""
        return f"{self.base_url}/chat/completions"

    def _request_url(self) -> str:
        full = urlsplit(self._base_url.get_secret_value())
        return urlunsplit((full.scheme, full.netloc, f"{full.path}/chat/completions", full.query, ""))

    def _client_for_loop(self) -> httpx.AsyncClient:
        """The client of the running event loop, created on first use.

        A client cannot move between event loops; one made in a loop that has
        since ended is dropped and a new one made for the current loop. While
        the runtime has an ``http_transport`` (:func:`lionops.runtime.use_runtime`),
        a light client over that transport is used instead and the cached one
        is left alone.
        """
        override = current_runtime().http_transport
        if override is not None:  # owned by whoever set it; the client holds no sockets
            return httpx.AsyncClient(transport=override, timeout=httpx.Timeout(self.timeout), trust_env=False)
        token = anyio.lowlevel.current_token()
        if self._client is None or self._client_token != token:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout),
                verify=_default_ssl_context() if self.verify is True else self.verify,
            )
            self._client_token = token
        return self._client

    async def aclose(self) -> None:
        """Close the client of the current event loop (a later call makes a new one)."""
        client, self._client, self._client_token = self._client, None, None
        if client is not None:
            await client.aclose()

    # ------------------------------------------------------------ structured output

    def structured_options(self, response_format: Any) -> tuple[dict[str, Any], bool]:
        """Request options asking for ``response_format``, and whether the
        schema must also go into the prompt.

        For a pydantic model the *request* model is rendered (never
        ``action_responses``, ADR-0022 D2). In ``"json_schema"`` mode the
        answer is ``{"response_format": {"type": "json_schema", "json_schema":
        {"name", "schema", "strict"}}}`` with ``strict`` true only when
        :func:`strict_json_schema` allows it; ``"json_object"`` asks for JSON
        mode and puts the schema in the prompt; ``"prompt"`` only puts it in
        the prompt. A dict that already is a ``response_format``
        (``{"type": "json_schema" | "json_object" | "text", ...}``) is sent as is.
        """
        if isinstance(response_format, dict) and response_format.get("type") in ("json_schema", "json_object", "text"):
            return {"response_format": response_format}, False
        schema = request_schema(response_format)
        if schema is None:
            return {}, False
        if self.structured_output == "prompt":
            return {}, True
        if self.structured_output == "json_object":
            return {"response_format": {"type": "json_object"}}, True
        model = request_model_of(response_format)
        if model is None:
            return {"response_format": _json_schema_option(schema)}, False
        # Built once per request model (the strict conversion walks and copies the schema).
        option = per_request_model(model, "json_schema_option", lambda m: freeze(_json_schema_option(schema)))
        return {"response_format": option}, False

    # ------------------------------------------------------------ calls

    def request_body(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        """The JSON body: ``model``, ``messages``, default options, then ``options``.

        ``stream`` (default: the endpoint's) adds ``"stream": true`` and, unless
        given, ``stream_options={"include_usage": true}``.

        Raises:
            ConfigurationError: no model name.
        """
        stream = options.pop("stream", None)
        body: dict[str, Any] = {"model": self.model}
        body.update(self.default_options)
        body.update({k: v for k, v in options.items() if v is not None})
        if not body.get("model"):
            raise ConfigurationError(f"{self.provider}: no model name; pass iModel(model=...)")
        if self.stream if stream is None else stream:
            body["stream"] = True
            body.setdefault("stream_options", {"include_usage": True})
        body["messages"] = messages
        return body

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
        """One logical Chat Completions call.

        Args:
            messages: OpenAI-shaped messages (``role``, ``content``, ...).
            **options: request options (``tools``, ``response_format``,
                ``temperature``, ...); ``None`` values are left out.
                ``deadline`` (seconds) is not sent: it replaces the endpoint's
                deadline for this call.

        Returns:
            The normalized first choice (:class:`ChatCompletion`).

        Raises:
            EndpointAuthError: 401/403 (never retried).
            EndpointRateLimitError: 429 after the retries, or a
                ``Retry-After`` above ``retry_after_cap``.
            EndpointStatusError: any other 4xx, or 5xx after the retries.
            EndpointTimeoutError: one socket operation waited past ``timeout``
                (``limit="timeout"``), or the call would outlast its
                ``deadline`` (``limit="deadline"``; a retry whose wait would
                pass it is not made).
            EndpointConnectionError: refused/reset connection after the retries.
            EndpointResponseError: a 2xx body that is not a completion object
                (or a stream chunk that is not JSON).
            ConfigurationError: no model name, or a bad ``deadline``.

        Every error carries ``attempts`` and ``retries``, and no exception
        chain. The trace of the running ``operate()`` gets ``http_attempts``,
        ``http_retries`` and ``http_statuses`` (one per attempt; ``None`` for
        an attempt without an HTTP answer), also when the call fails: those
        of its first call (a parse model's re-ask does not replace them).
        """
        deadline = self.deadline if options.get("deadline") is None else _check_deadline(options["deadline"])
        options.pop("deadline", None)
        body = self.request_body(messages, **options)
        client = self._client_for_loop()
        retries: list[dict[str, Any]] = []
        statuses: list[int | None] = []
        ends_at = clock.monotonic() + deadline
        inherited = _CALL_ENDS_AT.get()
        if inherited is not None:  # inside an adapter call: its total bounds this call too
            ends_at = min(ends_at, inherited)
        stopped_by_deadline: list[float] = []

        def past_deadline(state: Any) -> bool:
            """tenacity stop: the next wait would end after the deadline."""
            wait = float(state.upcoming_sleep)
            if clock.monotonic() + wait >= ends_at:
                stopped_by_deadline.append(wait)
                return True
            return False

        def before_sleep(state: Any) -> None:
            exc = state.outcome.exception()
            delay = float(state.next_action.sleep)
            retries.append({"status": getattr(exc, "status", None), "delay_s": delay})
            logger.info("%s: retry %d in %.2f s after %s", self.provider, state.attempt_number, delay, type(exc).__name__)

        async def attempt_once(number: int) -> dict[str, Any]:
            try:
                data = await self._attempt(client, body, number, ends_at, deadline)
            except EndpointError as exc:
                statuses.append(getattr(exc, "status", None))
                raise
            statuses.append(200)
            return data

        started = time.perf_counter()
        attempts = 1
        failure: EndpointError | None = None
        try:
            try:
                # The first request runs outside the retry loop, so an answered
                # call pays nothing for it; a retryable failure enters it below.
                data = await attempt_once(1)
            except EndpointError as first:
                if not (_retryable(first) and self.max_retries):
                    raise
                replay: list[EndpointError] = [first]
                retrying = AsyncRetrying(
                    stop=stop_after_attempt(self.max_retries + 1) | past_deadline,
                    wait=self._wait,
                    retry=retry_if_exception(_retryable),
                    sleep=clock.sleep,
                    before_sleep=before_sleep,
                    reraise=True,
                )
                async for attempt in retrying:
                    with attempt:
                        attempts = attempt.retry_state.attempt_number
                        if replay:  # attempt 1, already made: its failure decides the first wait
                            raise replay.pop()
                        data = await attempt_once(attempts)
            latency = time.perf_counter() - started
            done = self._completion(data, latency=latency, attempts=attempts, retries=retries, n=body.get("n"))
        except EndpointError as exc:
            failure = exc
        meta = current_meta()
        if meta is not None and "http_statuses" not in meta:  # the adapter call's own; a parse re-ask adds none
            meta.update(http_attempts=attempts, http_retries=list(retries), http_statuses=list(statuses))
        if failure is None:
            return done
        if stopped_by_deadline:
            failure = self._deadline_error(
                deadline, attempts,
                f"the retry after {type(failure).__name__} ({self._status_text(failure)}) "
                f"would wait {stopped_by_deadline[-1]:g} s",
            )
        raise self._settled(failure, attempts, retries)

    async def _attempt(self, client: httpx.AsyncClient, body: dict[str, Any], attempt: int,
                       ends_at: float, deadline: float) -> dict[str, Any]:
        """One request, cancelled when the call's deadline passes."""
        left = ends_at - clock.monotonic()
        if left <= 0:
            raise self._deadline_error(deadline, attempt - 1, "no time was left for another request")
        with anyio.CancelScope(deadline=anyio.current_time() + left) as scope:
            return await self._post_once(client, body, attempt)
        # Only this scope's own cancellation gets here (a caller's propagates).
        assert scope.cancelled_caught
        raise self._deadline_error(deadline, attempt, f"attempt {attempt} was still running")

    def _deadline_error(self, deadline: float, attempts: int, what: str) -> EndpointTimeoutError:
        err = EndpointTimeoutError(
            f"{self.provider}: POST {self.url} ran out of its total deadline of {deadline:g} s: {what}",
            limit="deadline", seconds=deadline, provider=self.provider, url=self.url,
        )
        err.attempts = attempts
        return err

    @staticmethod
    def _status_text(err: EndpointError) -> str:
        status = getattr(err, "status", None)
        return f"HTTP {status}" if status is not None else "no HTTP answer"

    @staticmethod
    def _settled(err: EndpointError, attempts: int, retries: list[dict[str, Any]]) -> EndpointError:
        """``err`` as the call's failure: attempts and retries on it, the attempt
        count in its message, and no exception chain (the HTTP library's
        exceptions hold the request headers)."""
        err.attempts = max(attempts, 1)
        err.retries = list(retries)
        if err.attempts > 1 and err.args and f"after {err.attempts} attempts" not in str(err.args[0]):
            err.args = (f"{err.args[0]} (after {err.attempts} attempts)", *err.args[1:])
        err.__cause__ = None
        err.__context__ = None
        err.__suppress_context__ = True
        return err

    def _wait(self, state: Any) -> float:
        """tenacity wait: the server's ``Retry-After`` when given, else backoff."""
        retry_after = getattr(state.outcome.exception(), "retry_after", None)
        if retry_after is not None:
            return float(retry_after)
        n = state.attempt_number
        return min(self.backoff_initial * self.backoff_factor ** (n - 1), self.backoff_max)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        headers.update({k: v.get_secret_value() for k, v in self._extra_headers.items()})
        if self.has_api_key:
            assert self._api_key is not None
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    async def _post_once(self, client: httpx.AsyncClient, body: dict[str, Any], attempt: int) -> dict[str, Any]:
        """One HTTP request; the decoded (or stream-assembled) completion object."""
        url = self.url
        logger.debug("%s: POST %s model=%s attempt=%d stream=%s", self.provider, url, body.get("model"),
                     attempt, bool(body.get("stream")))
        try:
            return await self._exchange(client, body, attempt)
        except httpx.TimeoutException as exc:
            raise EndpointTimeoutError(
                f"{self.provider}: POST {url}: one {_TIMEOUT_KINDS.get(type(exc).__name__, 'socket operation')} "
                f"waited longer than the timeout of {self.timeout:g} s ({type(exc).__name__})",
                limit="timeout", seconds=self.timeout, provider=self.provider, url=url,
            ) from None
        except httpx.TransportError as exc:
            err = EndpointConnectionError(
                f"{self.provider}: cannot reach POST {url}: {self.preview(str(exc)) or type(exc).__name__}",
                provider=self.provider, url=url,
            )
            err.retryable = isinstance(exc, httpx.ConnectError)  # type: ignore[attr-defined]
            raise err from None
        except httpx.HTTPError as exc:  # too many redirects, an invalid URL, ...
            raise EndpointResponseError(
                f"{self.provider}: POST {url}: {type(exc).__name__}: {self.preview(str(exc))}",
                provider=self.provider, url=url,
            ) from None

    # ------------------------------------------------------------ answers

    async def _exchange(self, client: httpx.AsyncClient, body: dict[str, Any], attempt: int) -> dict[str, Any]:
        """Send ``body`` and read the answer through httpx's streaming API, so
        no body is held past ``max_response_bytes`` (counted decompressed).

        An event stream is assembled chunk by chunk, also when the request did
        not ask for one; a plain JSON answer is used as is, also when it did
        (a server that ignores ``stream: true``)."""
        async with client.stream("POST", self._request_url(), json=body, headers=self._headers()) as response:
            logger.debug("%s: %s %d", self.provider, self.url, response.status_code)
            status = response.status_code
            try:
                if not response.is_success:
                    raise self._status_error(await self._buffered(response), self.url, attempt)
                if "text/event-stream" in response.headers.get("content-type", "").lower():
                    return await self._read_events(response)
                raw = await self._read_body(response)
            except httpx.DecodingError as exc:
                raise self._response_error(f"a body that cannot be decoded ({type(exc).__name__}: {exc})"[:300],
                                           status, "") from None
            ctype = response.headers.get("content-type") or "no content type"
        text = raw.decode("utf-8-sig", errors="replace")  # a byte-order mark is not part of the JSON
        if text.lstrip().startswith(("data:", ":")):
            return self._events_of_text(text, status)  # an event stream labelled as something else
        data = self._decode_json(text, status, f"a body that is not JSON ({ctype})")
        if not isinstance(data, dict):
            raise self._response_error("a JSON body that is not an object", status, text)
        if data.get("object") == "chat.completion.chunk":  # one stream chunk sent as the whole body
            acc = StreamAccumulator()
            self._fold_chunk(acc, data, text, status)
            return self._stream_end(acc, False, status)
        return data

    async def _read_body(self, response: httpx.Response, *, truncate: bool = False) -> bytes:
        """The decompressed body, at most ``max_response_bytes``; past the cap
        the read stops and raises (``truncate``: returns what was read)."""
        data = bytearray()
        async for chunk in _decoded(response):
            data += chunk
            if len(data) > self.max_response_bytes:
                if truncate:
                    return bytes(data[: self.max_response_bytes])
                raise self._too_large(response.status_code)
        return bytes(data)

    async def _buffered(self, response: httpx.Response) -> httpx.Response:
        """An error response with its body read (capped), for :meth:`_status_error`."""
        try:
            raw = await self._read_body(response, truncate=True)
        except httpx.DecodingError:
            raw = b""  # the status still decides (a 503 stays retryable); its body is unreadable
        headers = [(k, v) for k, v in response.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=raw, request=response.request)

    def _too_large(self, status: int) -> EndpointResponseError:
        return EndpointResponseError(
            f"{self.provider}: POST {self.url} answered {status} with a body larger than "
            f"max_response_bytes={self.max_response_bytes} (counted decompressed); reading stopped",
            provider=self.provider, url=self.url,
        )

    def _decode_json(self, text: str, status: int, what: str) -> Any:
        try:
            return json.loads(text)
        except RecursionError:
            raise self._response_error("JSON nested too deep to decode", status, text) from None
        except ValueError:
            raise self._response_error(what, status, text) from None

    async def _read_events(self, response: httpx.Response) -> dict[str, Any]:
        """Assemble a server-sent-event stream into one completion object.

        Every wait for the next ``data:`` event is bounded by
        ``silence_timeout`` (comments and blank lines do not reset it); the
        bytes read are bounded by ``max_response_bytes``."""
        acc, fields = StreamAccumulator(), _EventFields()
        chunks = _decoded(response).__aiter__()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending, total, ended = "", 0, False
        last_data = anyio.current_time()
        try:
            while not ended:
                chunk: bytes | None = None
                wait = last_data + self.silence_timeout - anyio.current_time()
                with anyio.move_on_after(max(wait, 0.0)):
                    try:
                        chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        ended = True
                if chunk is None and not ended:
                    raise EndpointTimeoutError(
                        f"{self.provider}: the stream from POST {self.url} sent no data event for "
                        f"{self.silence_timeout:g} s (silence_timeout; keep-alive comments do not count)",
                        provider=self.provider, url=self.url,
                    )
                if chunk:
                    total += len(chunk)
                    if total > self.max_response_bytes:
                        raise self._too_large(response.status_code)
                pending += decoder.decode(chunk or b"", final=ended)
                held = "" if ended or not pending.endswith("\r") else "\r"  # maybe the first half of \r\n
                lines = _LINE_BREAK.split(pending[: len(pending) - len(held)])
                pending = "" if ended else lines.pop() + held
                payloads = fields.feed(lines, end=ended)
                if payloads:
                    last_data = anyio.current_time()
                if self._fold_events(acc, payloads, response.status_code):
                    return self._stream_end(acc, True, response.status_code)
        finally:
            with contextlib.suppress(Exception):
                await chunks.aclose()  # type: ignore[attr-defined]
        return self._stream_end(acc, False, response.status_code)

    def _events_of_text(self, text: str, status: int) -> dict[str, Any]:
        """A whole event stream already read (one sent without its content type)."""
        acc = StreamAccumulator()
        payloads = _EventFields().feed(_LINE_BREAK.split(text), end=True)
        return self._stream_end(acc, self._fold_events(acc, payloads, status), status)

    def _fold_events(self, acc: StreamAccumulator, payloads: list[tuple[str | None, str]], status: int) -> bool:
        """Fold ``data:`` payloads into ``acc``; ``True`` once ``[DONE]`` is seen.

        A chunk carrying the provider's ``error``, or any data of an ``event:
        error``, ends the call with :class:`~lionops.errors.EndpointProviderError`."""
        for event, payload in payloads:
            if payload == "[DONE]":
                return True
            if event == "error":
                try:
                    data: Any = json.loads(payload)
                except (ValueError, RecursionError):
                    data = payload
                err = data.get("error") or data if isinstance(data, dict) else data
                raise self._provider_error(err or "an error event", status, "a stream error event")
            chunk = self._decode_json(payload, status, "a stream chunk that is not JSON")
            self._fold_chunk(acc, chunk, payload, status)
        return False

    def _fold_chunk(self, acc: StreamAccumulator, chunk: Any, payload: str, status: int) -> None:
        err = _error_of(chunk)
        if err is not None:
            raise self._provider_error(err, status, "a stream chunk carrying an error")
        try:
            acc.add(chunk)
        except ValueError as exc:
            raise self._response_error(f"a malformed stream chunk ({exc})", status, payload) from None

    def _stream_end(self, acc: StreamAccumulator, done: bool, status: int) -> dict[str, Any]:
        if acc.finish_reason is None:
            # Cut off: never pass part of an answer on as a whole one.
            how = "[DONE] before any finish reason" if done else "an end before a finish reason or [DONE]"
            raise self._response_error(f"an incomplete stream ({how})", status, "".join(acc.text))
        return acc.completion()

    def _provider_error(self, err: Any, status: int, where: str) -> EndpointProviderError:
        """The provider's own error (``{"message", "code", ...}`` or text) as a typed error."""
        message = err.get("message") if isinstance(err, dict) else err
        message = self.scrub(message if isinstance(message, str) else json.dumps(err, default=str))
        code = err.get("code") if isinstance(err, dict) else None
        return EndpointProviderError(
            f"{self.provider}: POST {self.url} answered {status} with {where}: {message[:_BODY_PREVIEW]!r}"
            + (f" (code {code!r})" if code is not None else ""),
            provider_message=message[:_BODY_PREVIEW], code=code, provider=self.provider, url=self.url,
        )

    def _response_error(self, what: str, status: int, text: str) -> EndpointResponseError:
        return EndpointResponseError(
            f"{self.provider}: POST {self.url} answered {status} with {what}: {self.preview(text)!r}",
            provider=self.provider, url=self.url,
        )

    def _status_error(self, response: httpx.Response, url: str, attempt: int) -> EndpointStatusError:
        status = response.status_code
        body = self.preview(response.text)
        detail = self.preview(_error_message(response).strip()) or response.reason_phrase
        retry_after = parse_retry_after(response.headers)
        kw: dict[str, Any] = dict(status=status, body=body, attempts=attempt, provider=self.provider, url=url)
        message = f"{self.provider}: HTTP {status} from POST {url}: {detail}"
        retryable = status == 429 or status >= 500
        if retryable and retry_after is not None and retry_after > self.retry_after_cap:
            retryable = False
            message += f" (server asks to retry after {retry_after:g} s, above the cap of {self.retry_after_cap:g} s)"
        elif attempt > 1:
            message += f" (after {attempt} attempts)"
        err: EndpointStatusError
        if status in (401, 403):
            err = EndpointAuthError(message, **kw)
            retryable = False
        elif status == 429:
            err = EndpointRateLimitError(message, retry_after=retry_after, **kw)
        else:
            err = EndpointStatusError(message, **kw)
        err.retryable = retryable  # type: ignore[attr-defined]
        err.retry_after = retry_after  # type: ignore[attr-defined]
        return err

    def _completion(self, data: Any, *, latency: float, attempts: int,
                    retries: list[dict[str, Any]], n: Any = None) -> ChatCompletion:
        """The normalized answer of a decoded body (see :class:`ChatCompletion`).

        Every choice of the requested answer is read: with ``n`` unset or 1,
        all choices the server sent are merged, in index order, into one
        answer (some servers put the text in ``choices[0]`` and the tool
        call in ``choices[1]``); with ``n > 1`` the answer is the lowest-index
        choice and the others stay in ``raw``. A body that is not a
        completion (an ``error`` object, no or null ``choices``, a choice or
        message that is not an object) raises a typed error; nothing of it
        is passed on."""

        def bad(what: str) -> EndpointResponseError:  # the body is shown only when it is refused
            return self._response_error(what, 200, _dumps_preview(data))

        if not isinstance(data, dict):
            raise bad("a JSON body that is not an object")
        err = _error_of(data)
        if err is not None:
            raise self._provider_error(err, 200, "an error object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise bad("no choices")
        picked: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        for pos, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise bad("a choice that is not an object")
            message = choice.get("message") or {}
            if not isinstance(message, dict):
                raise bad("a message that is not an object")
            if not isinstance(message.get("tool_calls") or [], list):
                raise bad("tool_calls that is not a list")
            if message.get("function_call") is not None and not isinstance(message["function_call"], dict):
                raise bad("a function_call that is not an object")
            if choice.get("finish_reason") == "error" or choice.get("error"):
                err = choice.get("error") or _text_of(message.get("content")) or "finish_reason 'error'"
                raise self._provider_error(err, 200, "a choice that ended in an error")
            index = choice.get("index")
            picked.append((index if isinstance(index, int) else pos, choice, message))
        picked.sort(key=lambda item: item[0])
        if isinstance(n, int) and n > 1:
            picked = picked[:1]
        texts = [t for t in (_text_of(m.get("content")) for _, _, m in picked) if t]
        refusals = [r for _, _, m in picked for r in _refusals_of(m)]
        reasoning = [r for _, _, m in picked for r in _reasoning_of(m)]
        calls, seen = [], {}
        for index, _, m in picked:
            for call in _calls_of(m):
                call_id = call.get("id") if isinstance(call, dict) else None
                if isinstance(call_id, str) and call_id and seen.setdefault(call_id, index) != index:
                    raise bad(f"the tool-call id {call_id[:64]!r} in choice {seen[call_id]} and again in choice "
                              f"{index} (one call or two cannot be told)")
                calls.append(call)
        usage = data.get("usage") or {}
        return ChatCompletion(
            text="\n".join(texts) if texts else (_text_of(picked[0][2].get("content"))),
            refusal="\n".join(refusals) or None,
            tool_calls=calls,
            finish_reason=_merged_finish([c.get("finish_reason") for _, c, _ in picked]),
            usage={k: v for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else {},
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            latency_s=latency,
            attempts=attempts,
            retries=retries,
            raw=data,
            reasoning="\n".join(reasoning) or None,
            choices=len(choices),
        )

    def __repr__(self) -> str:
        return (
            f"ChatCompletionsEndpoint(provider={self.provider!r}, model={self.model!r}, "
            f"base_url={self.base_url!r}, api_key={'set' if self.has_api_key else 'unset'}, "
            f"timeout={self.timeout:g}, deadline={self.deadline:g}, max_retries={self.max_retries}, "
            f"structured_output={self.structured_output!r})"
        )

    __str__ = __repr__


class StreamAccumulator:
    """Assembles ``chat.completion.chunk`` objects into one ``chat.completion``.

    Each choice ``index`` is assembled on its own (all of them are kept; the
    endpoint decides how choices make one answer). Text, refusal and
    reasoning deltas (``reasoning_content`` / ``reasoning``) are
    concatenated; reasoning never joins the text. A ``finish_reason`` of
    ``""`` or ``null`` is no end; the last real one counts.

    Tool-call deltas are told apart the way servers key them. A delta with
    an ``index`` joins the call at that index; when it carries an ``id``
    other than that call's, it joins the call of that id at the same index
    (servers that share one index among calls), starts a new call when it
    also names a function (a new call under a repeated index), and else
    still joins by index (servers that send a new id with every fragment).
    A new index is a new call, even under an id seen before (servers that
    repeat one id). A delta without an ``index`` joins the call with its
    ``id`` (a new id is a new call); one with neither joins the latest call,
    unless it names a function while the latest call already has a name
    (servers that key by nothing). ``arguments`` sent as a JSON object rather
    than text are used whole; an object mixed with text fragments for one
    call is an error.

    A chunk of the wrong shape (``choices``, ``delta`` or ``tool_calls`` of
    the wrong type, a tool-call delta that is not an object, an ``id`` that
    is not text, an ``index`` that is not an integer, ``arguments`` that are
    neither text nor an object) raises ``ValueError``: a fragment is never
    dropped, so a call is never assembled from part of its arguments.
    """

    def __init__(self) -> None:
        self._choices: dict[int, _ChoiceParts] = {}
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.id: str | None = None

    def _choice(self, index: int) -> _ChoiceParts:
        if index not in self._choices:
            self._choices[index] = _ChoiceParts()
        return self._choices[index]

    @property
    def text(self) -> list[str]:
        """The text deltas of every choice, in choice order."""
        return [t for i in sorted(self._choices) for t in self._choices[i].text]

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The tool calls of every choice, in choice order."""
        return [c for i in sorted(self._choices) for c in self._choices[i].calls]

    @property
    def finish_reason(self) -> str | None:
        """The first choice's finish reason, else any choice's; ``None`` while none ended."""
        reasons = [self._choices[i].finish_reason for i in sorted(self._choices)]
        return next((r for r in reasons if r), None)

    def add(self, chunk: dict[str, Any]) -> None:
        """Fold one chunk in; chunks without choices (the usage chunk) are fine."""
        if not isinstance(chunk, dict):
            raise ValueError("a chunk that is not an object")
        self.model = chunk.get("model") if isinstance(chunk.get("model"), str) else self.model
        self.id = chunk.get("id") if isinstance(chunk.get("id"), str) else self.id
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in _list_of(chunk, "choices"):
            if not isinstance(choice, dict):
                raise ValueError("a choice that is not an object")
            index = choice.get("index", 0)
            if not isinstance(index, int) or isinstance(index, bool):
                raise ValueError(f"a choice index that is not an integer: {index!r}"[:200])
            parts = self._choice(index)
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise ValueError("a delta that is not an object")
            content = _text_of(delta["content"]) if isinstance(delta.get("content"), (str, list)) else None
            if content:
                parts.text.append(content)
            parts.refusal.extend(_refusals_of(delta))
            parts.reasoning.extend(_reasoning_of(delta))
            for entry in _list_of(delta, "tool_calls"):
                parts.add_call(entry)
            legacy = delta.get("function_call")
            if legacy is not None:
                if not isinstance(legacy, dict):
                    raise ValueError("a function_call delta that is not an object")
                parts.add_call({"index": _LEGACY_CALL, "function": legacy})
            if choice.get("error"):
                parts.error = choice["error"]
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                parts.finish_reason = choice["finish_reason"]

    def completion(self) -> dict[str, Any]:
        """The assembled ``chat.completion`` object (one choice per index seen)."""
        choices = []
        for index in sorted(self._choices) or [0]:
            parts = self._choices.get(index) or _ChoiceParts()
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(parts.text) if parts.text else None,
                "refusal": "".join(parts.refusal) if parts.refusal else None,
            }
            if parts.reasoning:
                message["reasoning_content"] = "".join(parts.reasoning)
            if parts.calls:
                message["tool_calls"] = parts.calls
            choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": parts.finish_reason}
            if parts.error is not None:
                choice["error"] = parts.error
            choices.append(choice)
        return {
            "id": self.id, "object": "chat.completion", "model": self.model,
            "choices": choices, "usage": self.usage or {},
        }


#: An event-stream line ends with CR LF, LF or CR alone.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class _EventFields:
    """Server-sent-event lines -> ``(event name, data)`` per ``data:`` line;
    the event name holds until the blank line that ends the event."""

    def __init__(self) -> None:
        self.event: str | None = None
        self.data: list[str] = []
        self.first = True

    def feed(self, lines: list[str], *, end: bool = False) -> list[tuple[str | None, str]]:
        """The events that ``lines`` complete. The ``data:`` lines of one event
        are joined with newlines, as the event-stream format says; a data line
        that follows a whole JSON payload or ``[DONE]`` without the blank line
        between starts a new event (servers that leave the blank line out).
        A byte-order mark before the first line is ignored. With ``end``, an
        event still open is completed."""
        out: list[tuple[str | None, str]] = []
        for raw in lines:
            line = raw.rstrip("\r")
            if self.first:
                line, self.first = line.removeprefix("\ufeff"), False
            if not line:
                self._dispatch(out)
                self.event = None
            elif line.startswith("event:"):
                self.event = line[6:].strip() or None
            elif line.startswith("data:"):
                if self.data and _whole_payload("\n".join(self.data)):
                    self._dispatch(out)
                self.data.append(line[5:].strip())
        if end:
            self._dispatch(out)
        return out

    def _dispatch(self, out: list[tuple[str | None, str]]) -> None:
        data, self.data = "\n".join(self.data), []
        if data.strip():  # an event with empty data (``data:`` alone, a keep-alive) is no event
            out.append((self.event, data))


def _whole_payload(data: str) -> bool:
    if data == "[DONE]":
        return True
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


class _ChoiceParts:
    """The deltas of one streamed choice (see :class:`StreamAccumulator`)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.error: Any = None
        self._by_id: dict[str, int] = {}
        self._by_index: dict[int, int] = {}
        self._index_of: dict[int, int] = {}

    def _position(self, index: Any, call_id: Any, name: Any) -> int | None:
        if index is not None:
            pos = self._by_index.get(index)
            if pos is None:
                return None  # a new index is a new call (even under an id seen before)
            call = self.calls[pos]
            if not call_id or call["id"] in (None, call_id):
                return pos
            own = self._by_id.get(call_id)
            if own is not None and self._index_of.get(own) == index:
                return own  # one index shared by calls told apart by their ids
            if name and call["function"]["name"]:
                return None  # a new call under a repeated index
            return pos  # an unknown id on a fragment: the index decides
        if call_id:
            return self._by_id.get(call_id)  # a new id without an index is a new call
        if not self.calls or (name and self.calls[-1]["function"]["name"]):
            return None  # a second name, keyed by nothing that joins it to the last call
        return len(self.calls) - 1

    def add_call(self, entry: Any) -> None:
        if not isinstance(entry, dict):
            raise ValueError("a tool-call delta that is not an object")
        index, call_id = entry.get("index"), entry.get("id")
        fn = entry.get("function") or {}
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise ValueError(f"a tool-call index that is not an integer: {index!r}"[:200])
        if call_id is not None and not isinstance(call_id, str):
            raise ValueError(f"a tool-call id that is not text: {call_id!r}"[:200])
        if not isinstance(fn, dict) or not isinstance(fn.get("arguments", ""), (str, dict, type(None))):
            raise ValueError("a tool-call function or arguments fragment of the wrong type")
        name = fn.get("name") if isinstance(fn.get("name"), str) else None
        pos = self._position(index, call_id or None, name)
        if pos is None:
            self.calls.append({"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
            pos = len(self.calls) - 1
        call = self.calls[pos]
        if index is not None:
            self._by_index[index] = pos
            self._index_of.setdefault(pos, index)
        if call_id:
            call["id"] = call["id"] or call_id
            self._by_id.setdefault(call_id, pos)
        if name and not call["function"]["name"]:
            call["function"]["name"] = name
        _join_arguments(call["function"], fn.get("arguments"))


def _join_arguments(fn: dict[str, Any], part: Any) -> None:
    """Append an ``arguments`` fragment: text is concatenated, an object is used whole."""
    have = fn["arguments"]
    if part is None or part == "":
        return
    if isinstance(part, dict):
        if have == "" or have == part:
            fn["arguments"] = part
            return
        raise ValueError("tool-call arguments sent both as an object and as other fragments")
    if isinstance(have, dict):
        raise ValueError("tool-call arguments sent both as an object and as text")
    # Some servers resend the whole text so far in each delta: a fragment that
    # starts with everything already received replaces it instead of doubling it.
    fn["arguments"] = part if have and part.startswith(have) else have + part


#: Decompressed bytes produced per step when lionops inflates a body itself.
_INFLATE_STEP = 1 << 16


@functools.cache
def _decodable() -> frozenset[str]:
    """The content codings httpx decodes here: its own, and ``br`` / ``zstd``
    when their optional packages are installed."""
    found = {"identity", "gzip", "x-gzip", "deflate"}
    if importlib.util.find_spec("brotli") or importlib.util.find_spec("brotlicffi"):
        found.add("br")
    if importlib.util.find_spec("zstandard"):
        found.add("zstd")
    return frozenset(found)


async def _decoded(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes after content decoding, at most 64 KiB at a time.

    gzip and deflate are inflated here with a bound per step, so one small
    compressed chunk never becomes a large buffer before the size cap can
    count it; other encodings (``br``, ``zstd``) are decoded by httpx.
    """
    encoding = response.headers.get("content-encoding", "").strip().lower()
    unknown = [c for c in (c.strip() for c in encoding.split(",")) if c and c not in _decodable()]
    if unknown:
        # httpx passes a coding it has no decoder for through as is: compressed
        # bytes would be read as the answer.
        raise httpx.DecodingError(f"Content-Encoding {unknown[0][:40]!r}, which this installation cannot decode")
    if encoding not in ("gzip", "x-gzip", "deflate"):
        async for chunk in response.aiter_bytes():
            yield chunk
        return
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding != "deflate" else zlib.MAX_WBITS)
    first = True
    async for raw in response.aiter_raw():
        pending = raw
        while pending:
            try:
                out = inflater.decompress(pending, _INFLATE_STEP)
            except zlib.error as exc:
                if not (first and encoding == "deflate"):
                    raise httpx.DecodingError(str(exc)) from None
                inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
                out = inflater.decompress(pending, _INFLATE_STEP)
            first = False
            pending = inflater.unconsumed_tail
            if out:
                yield out
    tail = inflater.flush()
    if tail:
        yield tail


def _error_of(obj: Any) -> Any:
    """The provider error an answer object carries: its ``error`` (object or
    text), or the object itself when it is an error (``"object": "error"``,
    ``"type": "error"``); ``None`` when it carries none."""
    if not isinstance(obj, dict):
        return None
    if obj.get("error"):
        return obj["error"]
    if obj.get("object") == "error" or obj.get("type") == "error":
        return obj
    return None


#: The tool-call index under which a stream's legacy ``function_call`` deltas join.
_LEGACY_CALL = -1


def _calls_of(message: dict[str, Any]) -> list[Any]:
    """A message's tool calls: its ``tool_calls``, then the legacy
    ``function_call`` (``{"name", "arguments"}``) as one more call, so a server
    that answers in the older shape has its call run, never dropped."""
    calls = list(message.get("tool_calls") or [])
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and legacy:
        calls.append({"id": None, "type": "function", "function": legacy})
    return calls


def _refusals_of(message: dict[str, Any]) -> list[str]:
    """The refusal text of a message or delta: its ``refusal``, and content
    parts of type ``refusal``."""
    out = [message["refusal"]] if isinstance(message.get("refusal"), str) and message["refusal"] else []
    content = message.get("content")
    if isinstance(content, list):
        out.extend(p["refusal"] for p in content
                   if isinstance(p, dict) and p.get("type") == "refusal" and isinstance(p.get("refusal"), str)
                   and p["refusal"])
    return out


def _reasoning_of(message: dict[str, Any]) -> list[str]:
    """The reasoning text of a message or delta: ``reasoning_content``,
    ``reasoning``, and content parts of type ``reasoning`` / ``thinking``."""
    out = []
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("reasoning", "thinking"):
                value = part.get("text") or part.get("thinking") or part.get("reasoning")
                if isinstance(value, str) and value:
                    out.append(value)
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            out.append(value)
        elif isinstance(value, dict) and isinstance(value.get("content"), str):
            out.append(value["content"])
    return out


_FINISH_RANK = {"length": 0, "content_filter": 1, "tool_calls": 2, "function_call": 2, "stop": 3}


def _merged_finish(reasons: list[Any]) -> str | None:
    """One finish reason for merged choices: a cut-off or filter wins, then tool calls."""
    real = [r for r in reasons if isinstance(r, str) and r]
    if not real:
        return None
    return min(real, key=lambda r: _FINISH_RANK.get(r, 4))


def _retryable(exc: BaseException) -> bool:
    """Whether a failed request may be made again (429, 5xx, a refused connection)."""
    return bool(getattr(exc, "retryable", False))


def _dumps_preview(data: Any) -> str:
    try:
        return json.dumps(data, default=str)[: 4 * _BODY_PREVIEW]
    except (ValueError, RecursionError):
        return repr(data)[: 4 * _BODY_PREVIEW]


#: httpx timeout exception -> the socket operation it bounds.
_TIMEOUT_KINDS = {"ConnectTimeout": "connect", "ReadTimeout": "read", "WriteTimeout": "write",
                  "PoolTimeout": "wait for a pooled connection"}


def _check_deadline(value: Any) -> float:
    """``value`` as a deadline in seconds; ``ConfigurationError`` unless a positive number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"deadline must be a positive number of seconds, got {value!r}")
    return float(value)


def _list_of(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` as a list (absent or null: empty); ``ValueError`` for another type."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key} that is not a list")
    return value


def _text_of(content: Any) -> str | None:
    """Assistant ``content`` as text: a string, or the text parts of a list."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "output_text")]
        return "".join(parts) if parts else None
    return str(content)


def _error_message(response: httpx.Response) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body, uncut
    (the caller removes secrets, then cuts)."""
    try:
        data = response.json()
    except ValueError:
        return response.text
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if isinstance(data.get("message"), str):
            return data["message"]
    return response.text

