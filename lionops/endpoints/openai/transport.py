"""Transport and retry: the one module of the OpenAI family that does HTTP IO.

:class:`ChatCompletionsEndpoint` sends one ``POST {base_url}/chat/completions``
per logical call over one reused ``httpx2.AsyncClient`` (or the runtime's
``http_transport``), reads every answer through httpx2's streaming API with
its size capped after decompression, retries 429, 5xx and refused
connections within the call's deadline (honouring ``Retry-After``), and hands
the body to :mod:`.response` or the event stream to :mod:`.stream`.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import email.utils
import functools
import importlib.util
import json
import logging
import os
import ssl
import time
import weakref
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio.lowlevel
import httpx2
from pydantic import SecretStr
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from ... import clock
from ..._frozen import FrozenDict, FrozenList
from ..._json import loads as bounded_json
from ..._names import near_miss
from ..._secrets import is_secret_name, replace_secrets, scrub_url, scrubbed_preview, url_query_secrets
from ...errors import (
    BaseURLError,
    ConfigurationError,
    EndpointAuthError,
    EndpointConnectionError,
    EndpointError,
    EndpointProviderError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
    MissingAPIKeyError,
    MisspelledKeywordError,
)
from ...observability import observe
from ...runtime import current_runtime
from ...trace import current_meta
from ..registry import ProviderSpec, provider_spec
from .config import (
    _CALL_ENDS_AT,
    ENDPOINT_KEYWORDS,
    LIMIT_KEYWORDS,
    RESERVED,
    RETRY_KEYWORDS,
    Limits,
    RetryPolicy,
    StructuredMode,
    check_base_url,
    check_deadline,
)
from .response import WHOLE_FINISH_REASONS, Answers, ChatCompletion
from .stream import LINE_BREAK, EventFields, StreamAccumulator, events_of_text, fold_chunk, fold_events, stream_end

__all__ = ["ChatCompletionsEndpoint", "parse_retry_after"]

logger = logging.getLogger("lionops.http")

#: Request URLs that hold credentials (user info, query) -> the form shown.
_SHOWN_URLS: dict[str, str] = {}


#: Every live endpoint, so the HTTP libraries' log records can be scrubbed of their secrets.
_LIVE: weakref.WeakSet[ChatCompletionsEndpoint] = weakref.WeakSet()


class _RedactingFilter(logging.Filter):
    """Keeps endpoint secrets out of httpx2's and httpcore2's log records.

    httpx2 logs every request URL at INFO level: a lionops endpoint's URL is
    logged in its public form (no query), as lionops shows it. httpcore2's
    DEBUG records show response headers, where an echoing server may return
    the key: every record's text is scrubbed of every live endpoint's
    secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and _SHOWN_URLS:
            record.args = tuple(
                _SHOWN_URLS.get(str(arg), arg) if isinstance(arg, httpx2.URL) else arg for arg in record.args
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
_HTTP_LOGGERS = ("httpx2", "httpcore2", "httpcore2.connection", "httpcore2.http11", "httpcore2.http2",
                 "httpcore2.proxy", "httpcore2.socks")
_FILTER = _RedactingFilter()
for _name in _HTTP_LOGGERS:
    logging.getLogger(_name).addFilter(_FILTER)


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
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _reading_cookies_when_set(client: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """``client``, whose cookie jar reads an answer only when it sets a cookie.

    httpx2 hands every response to the standard library's cookie jar, which
    costs more than the rest of reading a small answer; a response without
    ``Set-Cookie`` (or ``Set-Cookie2``) gives the jar nothing to store, so it
    is not handed over. Cookies that are set are kept and sent as before."""
    cookies = client.cookies
    extract = cookies.extract_cookies

    def extract_cookies(response: httpx2.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            extract(response)

    cookies.extract_cookies = extract_cookies  # type: ignore[method-assign]
    return client


def _bound_groups(retry: RetryPolicy | None, limits: Limits | None,
                  options: dict[str, Any]) -> tuple[RetryPolicy, Limits]:
    """The two groups of an endpoint's bounds: ``retry`` and ``limits`` (their
    defaults when ``None``), refined by the documented one-by-one keywords
    (``timeout=``, ``max_retries=``, ...), which are taken out of ``options``."""
    retry_kw = {k: options.pop(k) for k in RETRY_KEYWORDS if k in options}
    limit_kw = {k: options.pop(k) for k in LIMIT_KEYWORDS if k in options}
    for name, group, cls in (("retry", retry, RetryPolicy), ("limits", limits, Limits)):
        if group is not None and not isinstance(group, cls):
            raise ConfigurationError(f"{name} must be a {cls.__name__}, got {type(group).__name__}")
    return dataclasses.replace(retry or RetryPolicy(), **retry_kw), dataclasses.replace(limits or Limits(), **limit_kw)


def _check_settings(provider: str, verify: bool | str | ssl.SSLContext, structured_output: str,
                    options: dict[str, Any]) -> None:
    """Refuse, at construction, settings that would otherwise fail at the first
    call or be sent in every request body."""
    if isinstance(verify, str) and not os.path.exists(verify):  # else a FileNotFoundError at the first call
        raise ConfigurationError(f"{provider}: verify names no CA bundle file or directory: {verify!r}")
    if structured_output not in ("json_schema", "json_object", "prompt"):
        raise ConfigurationError(
            f"structured_output must be json_schema, json_object or prompt, got {structured_output!r}")
    reserved = RESERVED & set(options)
    if reserved:
        raise ConfigurationError(f"{sorted(reserved)} cannot be default options")
    for name in options:  # ``timout=``, ``api_kye=`` would be sent in every request body
        suggestion = near_miss(name, ENDPOINT_KEYWORDS)
        if suggestion is not None:
            raise MisspelledKeywordError(name, suggestion, where=f"iModel(provider={provider!r})")


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """One verifying SSL context per process (building one costs tens of ms)."""
    return httpx2.create_ssl_context()


class ChatCompletionsEndpoint:
    """An OpenAI-compatible Chat Completions endpoint (the API path of ADR-0022 D3).

    Args:
        provider: a registered Chat Completions provider
            (:mod:`lionops.endpoints.registry`; default ``"openai"``).
        model: the model name sent as ``model``.
        base_url: the API root (``.../v1``); default from the provider's
            environment variable (``OPENAI_BASE_URL`` for ``openai``) or
            the provider's registered default.
        api_key: the bearer key (surrounding whitespace removed); default
            from the provider's environment variable (``OPENAI_API_KEY``).
            ``None`` sends no Authorization.
        retry: a :class:`~lionops.endpoints.openai.RetryPolicy` (``max_retries``,
            ``retry_after_cap``, ``backoff_*``); each of its fields may also be
            given as a keyword of its own, which wins.
        limits: a :class:`~lionops.endpoints.openai.Limits` (``timeout``,
            ``deadline``, ``silence_timeout``, ``max_response_bytes``); each
            may also be given as a keyword of its own, which wins.
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

    #: Finish reasons that mark a whole answer (:data:`~lionops.endpoints.openai.response.WHOLE_FINISH_REASONS`);
    #: an answer with none of them is returned uncoerced and runs no tool. A host
    #: whose whole answers end with another reason: ``endpoint.whole_finish_reasons
    #: = WHOLE_FINISH_REASONS | {"done"}``.
    whole_finish_reasons: frozenset[str] = WHOLE_FINISH_REASONS

    is_cli = False
    #: Seconds a stream's reader waits, after the stream's last event, for the
    #: end of its body, so the connection can be reused (:meth:`_stream_events`).
    stream_end_grace: float = 0.05

    def __init__(
        self,
        provider: str = "openai",
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | SecretStr | None = None,
        *,
        retry: RetryPolicy | None = None,
        limits: Limits | None = None,
        structured_output: StructuredMode = "json_schema",
        stream: bool = False,
        headers: Mapping[str, str] | None = None,
        verify: bool | str | ssl.SSLContext = True,
        native_tools: bool = False,
        **default_options: Any,
    ) -> None:
        defaults: ProviderSpec = provider_spec(provider)
        if defaults.is_cli or defaults.base_url is None:
            raise ConfigurationError(f"provider {provider!r} is not a Chat Completions provider")
        self.retry, self.limits = _bound_groups(retry, limits, default_options)
        _check_settings(provider, verify, structured_output, default_options)
        if api_key is None and defaults.key_env:
            api_key = os.environ.get(defaults.key_env) or None
        if base_url is None and defaults.base_url_env:
            base_url = os.environ.get(defaults.base_url_env) or None
        self.provider = provider
        self.otel_name = defaults.otel_name
        self.model = model
        self._set_base_url((base_url or defaults.base_url).rstrip("/"))
        if isinstance(api_key, str):  # a key read from a file often ends in a newline
            api_key = SecretStr(api_key.strip())
        self._api_key = api_key
        # A cloud provider without a key is refused before the first request
        # (not here: a recorded call replayed through the runtime's transport needs none).
        self._key_env_missing: str | None = None
        if defaults.needs_key and not self.has_api_key and not any(map(is_secret_name, headers or {})):
            self._key_env_missing = defaults.key_env
        self.structured_output: StructuredMode = structured_output
        self.stream = bool(stream)
        self.native_tools = bool(native_tools)
        self._extra_headers = {k: SecretStr(v) for k, v in (headers or {}).items()}
        self.verify = verify
        self.default_options = dict(default_options)
        self._client: httpx2.AsyncClient | None = None
        self._client_token: Any = None
        _LIVE.add(self)

    def _set_base_url(self, full_url: str) -> None:
        """Check the whole base URL now (not as a connection error at the first
        call) and keep it secret: only its public form is shown."""
        provider = self.provider
        check_base_url(provider, full_url)
        try:
            httpx2.URL(full_url)
        except httpx2.InvalidURL as exc:  # its text may quote the URL, query included: only its kind is shown
            raise BaseURLError(f"{provider}: base_url is refused by the HTTP client ({type(exc).__name__})",
                               fault="unreadable") from None
        # The query may carry credentials (``?api-key=``): only the public form is shown.
        self._base_url = SecretStr(full_url)
        self.base_url = scrub_url(full_url)
        if self.base_url != full_url:
            _SHOWN_URLS[str(httpx2.URL(self._request_url()))] = self.url
        # httpx2 parses a URL given as text on every request: a URL without
        # credentials is parsed once here; one with a query secret is built
        # per request, so no attribute of the endpoint holds it.
        self._target: httpx2.URL | None = httpx2.URL(self._request_url()) if self.base_url == full_url else None

    # ------------------------------------------------------------ bounds (read from the two groups)

    @property
    def timeout(self) -> float:
        return self.limits.timeout

    @property
    def deadline(self) -> float:
        return self.limits.deadline

    @property
    def silence_timeout(self) -> float:
        return self.limits.silence_timeout

    @property
    def max_response_bytes(self) -> int:
        return self.limits.max_response_bytes

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    @property
    def retry_after_cap(self) -> float:
        return self.retry.retry_after_cap

    # ------------------------------------------------------------ secrets

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None and bool(self._api_key.get_secret_value())

    def _secrets(self) -> list[str]:
        """Every form of every secret value, longest first (so a form holding
        another goes whole): as given, stripped, escaped as in a ``repr``
        (the HTTP library quotes a header it refuses), and the credential of
        an ``<scheme> <credential>`` header value (a server may echo only it)."""
        in_url = map(SecretStr, url_query_secrets(self._base_url.get_secret_value()))
        found = [self._api_key, *self._extra_headers.values(), *in_url]
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

    @property
    def _answers(self) -> Answers:
        """How this endpoint's answers are read and its refusals worded."""
        return Answers(self.provider, self.url, self.scrub, self.preview)

    # ------------------------------------------------------------ client

    @property
    def url(self) -> str:
        """The Chat Completions URL as shown (``{base_url}/chat/completions``)."""
        return f"{self.base_url}/chat/completions"

    def _request_url(self) -> str:
        full = urlsplit(self._base_url.get_secret_value())
        return urlunsplit((full.scheme, full.netloc, f"{full.path}/chat/completions", full.query, ""))

    def _client_for_loop(self) -> httpx2.AsyncClient:
        """The client of the running event loop, created on first use.

        A client cannot move between event loops; one made in a loop that has
        since ended is dropped and a new one made for the current loop. While
        the runtime has an ``http_transport`` (:func:`lionops.runtime.use_runtime`),
        a light client over that transport is used instead and the cached one
        is left alone.
        """
        override = current_runtime().http_transport
        if override is not None:  # owned by whoever set it; the client holds no sockets
            return _reading_cookies_when_set(
                httpx2.AsyncClient(transport=override, timeout=httpx2.Timeout(self.timeout), trust_env=False))
        token = anyio.lowlevel.current_token()
        if self._client is None or self._client_token != token:
            self._client = _reading_cookies_when_set(httpx2.AsyncClient(
                timeout=httpx2.Timeout(self.timeout),
                verify=_default_ssl_context() if self.verify is True else self.verify,
            ))
            self._client_token = token
        return self._client

    async def aclose(self) -> None:
        """Close the client of the current event loop (a later call makes a new one)."""
        client, self._client, self._client_token = self._client, None, None
        if client is not None:
            await client.aclose()

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
            MissingAPIKeyError: a cloud provider with no API key (nothing sent).

        Every error carries ``attempts`` and ``retries``, and no exception
        chain. The trace of the running ``operate()`` gets ``http_attempts``,
        ``http_retries`` and ``http_statuses`` (one per attempt; ``None`` for
        an attempt without an HTTP answer), also when the call fails: those
        of its first call (a parse model's re-ask does not replace them).
        """
        deadline = self.deadline if options.get("deadline") is None else check_deadline(options["deadline"])
        options.pop("deadline", None)
        body = self.request_body(messages, **options)
        self._check_key()
        client = self._client_for_loop()
        retries: list[dict[str, Any]] = []
        statuses: list[int | None] = []
        ends_at = clock.monotonic() + deadline
        inherited = _CALL_ENDS_AT.get()
        if inherited is not None:  # inside an adapter call: its total bounds this call too
            ends_at = min(ends_at, inherited)
        stopped_by_deadline: list[float] = []

        def before_sleep(state: Any) -> None:
            exc = state.outcome.exception()
            delay = float(state.next_action.sleep)
            retries.append({"status": getattr(exc, "status", None), "delay_s": delay})
            logger.info("%s: retry %d in %.2f s after %s", self.provider, state.attempt_number, delay,
                        type(exc).__name__)

        async def attempt_once(number: int) -> dict[str, Any]:
            try:
                data = await self._attempt(client, body, number, ends_at, deadline)
            except EndpointError as exc:
                statuses.append(getattr(exc, "status", None))
                if getattr(exc, "limit", None) != "deadline":
                    earlier.append(f"attempt {number}: {type(exc).__name__} ({self._status_text(exc)})")
                raise
            statuses.append(200)
            return data

        started = time.perf_counter()
        attempts = 1
        failure: EndpointError | None = None
        earlier: list[str] = []  # each failed attempt's outcome, named by a deadline error
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
                    stop=stop_after_attempt(self.max_retries + 1) | _PastDeadline(ends_at, stopped_by_deadline),
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
                            raise replay.pop() from None  # its chain is dropped below anyway
                        data = await attempt_once(attempts)
            latency = time.perf_counter() - started
            done = self._answers.completion(data, latency=latency, attempts=attempts, retries=retries, n=body.get("n"))
        except EndpointError as exc:
            failure = self._with_unfinished(exc, started, attempts, retries, body.get("n"))
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
        if getattr(failure, "limit", None) == "deadline" and earlier:
            failure.earlier_attempts = list(earlier)  # type: ignore[attr-defined]
            failure.args = (f"{failure.args[0]}; earlier: {'; '.join(earlier)}", *failure.args[1:])
        raise self._settled(failure, attempts, retries)

    def _check_key(self) -> None:
        """Refuse a call of a cloud provider that has no key, before any request
        (a call served by the runtime's transport, a replay, needs none)."""
        if self._key_env_missing is not None and current_runtime().http_transport is None:
            raise MissingAPIKeyError(
                f"{self.provider}: no API key, so no request was sent: pass iModel(..., api_key=...) or set the "
                f"environment variable {self._key_env_missing} (a server of your own that needs no key: pass its "
                "base_url= and any api_key=; for Chat Completions, a local provider such as 'vllm' or 'ollama' "
                "needs none)", variable=self._key_env_missing)

    def _with_unfinished(self, exc: EndpointError, started: float, attempts: int,
                         retries: list[dict[str, Any]], n: Any) -> EndpointError:
        """``exc``; a stream that ended with ``[DONE]`` but no finish reason gets
        what it carried as a ``ChatCompletion`` in ``unfinished`` (never returned)."""
        if isinstance(exc, EndpointResponseError) and isinstance(exc.unfinished, dict):
            try:
                exc.unfinished = self._answers.completion(
                    exc.unfinished, latency=time.perf_counter() - started, attempts=attempts, retries=retries, n=n)
            except EndpointError:
                exc.unfinished = None
        return exc

    async def _attempt(self, client: httpx2.AsyncClient, body: dict[str, Any], attempt: int,
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
        return self.retry.backoff(state.attempt_number)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        headers.update({k: v.get_secret_value() for k, v in self._extra_headers.items()})
        if self.has_api_key:
            assert self._api_key is not None
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    async def _post_once(self, client: httpx2.AsyncClient, body: dict[str, Any], attempt: int) -> dict[str, Any]:
        """One HTTP request; the decoded (or stream-assembled) completion object."""
        url = self.url
        logger.debug("%s: POST %s model=%s attempt=%d stream=%s", self.provider, url, body.get("model"),
                     attempt, bool(body.get("stream")))
        try:
            return await self._exchange(client, body, attempt)
        except httpx2.TimeoutException as exc:
            raise EndpointTimeoutError(
                f"{self.provider}: POST {url}: one {_TIMEOUT_KINDS.get(type(exc).__name__, 'socket operation')} "
                f"waited longer than the timeout of {self.timeout:g} s ({type(exc).__name__})",
                limit="timeout", seconds=self.timeout, provider=self.provider, url=url,
            ) from None
        except httpx2.TransportError as exc:
            hint = " (is a server listening there? check base_url)" if isinstance(exc, httpx2.ConnectError) else ""
            err = EndpointConnectionError(
                f"{self.provider}: cannot reach POST {url}: {self.preview(str(exc)) or type(exc).__name__}{hint}",
                provider=self.provider, url=url,
            )
            err.retryable = isinstance(exc, httpx2.ConnectError)  # type: ignore[attr-defined]
            raise err from None
        except httpx2.HTTPError as exc:  # too many redirects, an invalid URL, ...
            raise EndpointResponseError(
                f"{self.provider}: POST {url}: {type(exc).__name__}: {self.preview(str(exc))}",
                provider=self.provider, url=url,
            ) from None

    # ------------------------------------------------------------ answers

    def _target_for(self, body: dict[str, Any]) -> httpx2.URL | str:
        """The request URL of ``body`` (a native protocol's stream flag may change it)."""
        return self._target if self._target is not None else self._request_url()

    def _wire_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body as sent (a native protocol may carry the stream flag in the URL instead)."""
        return body

    async def _exchange(self, client: httpx2.AsyncClient, body: dict[str, Any], attempt: int) -> dict[str, Any]:
        """Send ``body`` and read the answer through httpx2's streaming API, so
        no body is held past ``max_response_bytes`` (counted decompressed).

        An event stream is assembled chunk by chunk, also when the request did
        not ask for one; a plain JSON answer is used as is, also when it did
        (a server that ignores ``stream: true``)."""
        target = self._target_for(body)
        content = _body_bytes(self._wire_body(body))
        started: list[int] = []
        try:
            return await self._exchange_on(client, target, content, attempt, started)
        except (httpx2.RemoteProtocolError, httpx2.ReadError) as exc:
            if not started and not _malformed_head(exc):
                raise  # refused or reset before any answer: a connection error
            head = f"answered {started[0]}" if started else "answered with a head that cannot be read"
            raise EndpointResponseError(
                f"{self.provider}: POST {self.url} {head}, and the answer was malformed or broken off: "
                f"{type(exc).__name__}: {self.preview(str(exc)) or 'no detail'}",
                provider=self.provider, url=self.url,
            ) from None

    async def _exchange_on(self, client: httpx2.AsyncClient, target: httpx2.URL | str, content: bytes, attempt: int,
                           started: list[int]) -> dict[str, Any]:
        async with client.stream("POST", target, content=content, headers=self._headers()) as response:
            started.append(response.status_code)
            logger.debug("%s: %s %d", self.provider, self.url, response.status_code)
            status = response.status_code
            try:
                if not response.is_success:
                    raise self._status_error(await self._buffered(response), self.url, attempt)
                if "text/event-stream" in response.headers.get("content-type", "").lower():
                    return await self._read_events(response)
                raw = await self._read_body(response)
            except httpx2.DecodingError as exc:
                raise self._answers.response_error(f"a body that cannot be decoded ({type(exc).__name__}: {exc})"[:300],
                                           status, "") from None
            ctype = response.headers.get("content-type") or "no content type"
        text = raw.decode("utf-8-sig", errors="replace")  # a byte-order mark is not part of the JSON
        if text.lstrip().startswith(("data:", ":")):
            return events_of_text(text, status, self._answers)  # an event stream labelled as something else
        data = self._answers.decode_json(text, status, f"a body that is not JSON ({ctype})")
        if not isinstance(data, dict):
            raise self._answers.response_error("a JSON body that is not an object", status, text)
        if data.get("object") == "chat.completion.chunk":  # one stream chunk sent as the whole body
            acc = StreamAccumulator()
            fold_chunk(acc, data, text, status, self._answers)
            return stream_end(acc, False, status, self._answers)
        return data

    async def _read_body(self, response: httpx2.Response, *, truncate: bool = False) -> bytes:
        """The decompressed body, at most ``max_response_bytes``; past the cap
        the read stops and raises (``truncate``: returns what was read).

        A body sent as is (no ``Content-Encoding``) with a ``Content-Length``
        within the cap is read in one piece: the HTTP library reads no more
        than that length, and the length read is checked again."""
        headers = response.headers
        length = headers.get("content-length")
        if not truncate and length is not None and "content-encoding" not in headers and length.isdigit() \
                and int(length) <= self.max_response_bytes:
            raw = await response.aread()
            if len(raw) > self.max_response_bytes:  # a transport that sent more than it announced
                raise self._too_large(response.status_code)
            return raw
        data = bytearray()
        async for chunk in _decoded(response):
            data += chunk
            if len(data) > self.max_response_bytes:
                if truncate:
                    return bytes(data[: self.max_response_bytes])
                raise self._too_large(response.status_code)
        return bytes(data)

    async def _buffered(self, response: httpx2.Response) -> httpx2.Response:
        """An error response with its body read (capped), for :meth:`_status_error`."""
        try:
            raw = await self._read_body(response, truncate=True)
        except httpx2.DecodingError:
            raw = b""  # the status still decides (a 503 stays retryable); its body is unreadable
        headers = [(k, v) for k, v in response.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx2.Response(response.status_code, headers=headers, content=raw, request=response.request)

    def _too_large(self, status: int) -> EndpointResponseError:
        return EndpointResponseError(
            f"{self.provider}: POST {self.url} answered {status} with a body larger than "
            f"max_response_bytes={self.max_response_bytes} (counted decompressed); reading stopped",
            provider=self.provider, url=self.url,
        )

    async def _read_events(self, response: httpx2.Response) -> dict[str, Any]:
        """Assemble a server-sent-event stream into one completion object.

        Every wait for the next ``data:`` event is bounded by
        ``silence_timeout`` (comments and blank lines do not reset it); the
        bytes read are bounded by ``max_response_bytes``. A stream held open
        past a finish reason without ``[DONE]`` ends there with its answer."""
        acc = StreamAccumulator()
        status = response.status_code
        try:
            whole = await self._stream_events(response, lambda payloads: fold_events(acc, payloads, status,
                                                                                     self._answers))
        except EndpointTimeoutError as exc:
            # A finish reason came and the server holds the stream open without
            # [DONE]: the answer, as when the body ends there (stream_end).
            if exc.limit != "silence_timeout" or acc.finish_reason is None:
                raise
            whole = False
        return stream_end(acc, whole, status, self._answers)

    async def _stream_events(self, response: httpx2.Response, fold: Callable[[list[tuple[str | None, str]]], bool],
                             *, settled: Callable[[], bool] | None = None,
                             skip: frozenset[str] = frozenset()) -> bool:
        """Read a server-sent-event stream, handing ``fold`` the events (name,
        ``data``) of each chunk read; whether the stream's answer is whole.

        Bounds: each wait for the next ``data:`` event by ``silence_timeout``
        (comments and blank lines do not reset it), the bytes read by
        ``max_response_bytes``. One cancel scope covers the whole read, its
        deadline moved to ``silence_timeout`` after each chunk that brought a
        ``data:`` event: the same bound as a scope per read, at one scope a
        stream.

        Once ``fold`` says the stream's last event arrived, what is left (normally
        the body's closing chunk, already received with that event) is read
        and ignored, so a body read to its end puts the connection back in the
        pool for the next call (one left unread closes it, and the next call
        connects again); once ``settled`` says the answer is whole though the
        stream has no last event of its own (Gemini's chunk with the finish
        reason), what follows is still folded (a trailing usage chunk), and a
        provider's error sent in that time is still its typed error. Either
        wait is bounded by ``stream_end_grace`` (and the stream's own
        bounds); a server that holds the stream open, cuts it or sends more
        past that is cut off there, the answer kept.
        """
        reader = _EventReader(self, response)
        ending: str | None = None  # "done": the last event arrived; "settled": the answer is whole
        ends_at = 0.0
        try:
            with anyio.CancelScope(deadline=reader.deadline) as scope:
                try:
                    while (payloads := await reader.batch()) is not None:
                        if ending == "settled":
                            fold(payloads)
                        elif ending is None:
                            if payloads:  # time to first chunk, time per chunk
                                _note_chunks(payloads, skip=skip)
                            if fold(payloads):
                                ending = "done"
                            elif settled is not None and settled():
                                ending = "settled"
                            if ending is not None:
                                ends_at = anyio.current_time() + self.stream_end_grace
                        deadline = reader.deadline if ending is None else min(reader.deadline, ends_at)
                        if deadline != scope.deadline:
                            scope.deadline = deadline
                except EndpointProviderError:
                    raise
                except (EndpointError, httpx2.HTTPError):
                    if ending is None:
                        raise
                    return True  # past the answer's end: cut off there, the answer kept
        finally:
            await reader.aclose()
        if scope.cancelled_caught and ending is None:
            raise EndpointTimeoutError(
                f"{self.provider}: the stream from POST {self.url} sent no data event for "
                f"{self.silence_timeout:g} s (silence_timeout; keep-alive comments do not count)",
                limit="silence_timeout", seconds=self.silence_timeout, provider=self.provider, url=self.url,
            )
        return ending is not None

    def _status_error(self, response: httpx2.Response, url: str, attempt: int) -> EndpointStatusError:
        status = response.status_code
        body = self.preview(response.text)
        detail = self.preview(_error_message(response).strip() or response.reason_phrase)
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

    def __repr__(self) -> str:
        return (
            f"ChatCompletionsEndpoint(provider={self.provider!r}, model={self.model!r}, "
            f"base_url={self.base_url!r}, api_key={'set' if self.has_api_key else 'unset'}, "
            f"timeout={self.timeout:g}, deadline={self.deadline:g}, max_retries={self.max_retries}, "
            f"structured_output={self.structured_output!r})"
        )

    __str__ = __repr__


#: The JSON encoding httpx2 gives a ``json=`` body (compact, UTF-8 as is, no NaN).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
#: id -> (a deeply read-only shared container, its JSON text); cleared when full.
_ENCODED: dict[int, tuple[Any, str]] = {}
_ENCODED_MAX = 512


def _deeply_frozen(value: Any) -> bool:
    """Whether every container in ``value`` is read-only (so its JSON text never changes)."""
    if isinstance(value, FrozenDict):
        return all(_deeply_frozen(v) for v in value.values())
    if isinstance(value, (FrozenList, tuple)):  # a tuple may hold a mutable list
        return all(_deeply_frozen(v) for v in value)
    return not isinstance(value, (dict, list))


#: How deep below the body a plain dict or list is written part by part, so a
#: shared read-only container inside it (the answer schema under ``text.format``
#: or ``generationConfig``, a tool's ``input_schema``) is encoded once.
_PLAIN_DEPTH = 3


def _json_text(value: Any, depth: int = 1) -> str:
    """``value`` as JSON text, the same text as ``_ENCODE(value)``; a shared
    read-only container (a request schema, a tool schema: built once per type
    and configuration), also inside a plain dict or list of the body's first
    levels (the offered tools, the answer format), is encoded once."""
    kind = type(value)
    if kind is dict and value and depth < _PLAIN_DEPTH and all(type(key) is str for key in value):
        return "{" + ",".join(f"{_ENCODE(key)}:{_json_text(item, depth + 1)}" for key, item in value.items()) + "}"
    if kind is list and value and depth < _PLAIN_DEPTH:
        return "[" + ",".join([_json_text(item, depth + 1) for item in value]) + "]"
    if kind is int:  # the encoder's own text of an int, without its set-up
        return int.__repr__(value)
    if kind is bool or value is None:
        return _CONSTANTS[value]
    return _shared_text(value)


_CONSTANTS = {True: "true", False: "false", None: "null"}


def _shared_text(value: Any) -> str:
    if isinstance(value, (FrozenDict, FrozenList)):
        hit = _ENCODED.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        text = _ENCODE(value)
        if _deeply_frozen(value):
            if len(_ENCODED) >= _ENCODED_MAX:
                _ENCODED.clear()
            _ENCODED[id(value)] = (value, text)
        return text
    return _ENCODE(value)


def _body_bytes(body: dict[str, Any]) -> bytes:
    """The request body as httpx2 encodes ``json=body``, byte for byte, without
    encoding the shared schemas and tool specs again on every request."""
    if not all(type(key) is str for key in body):  # JSON's own key conversion
        return _ENCODE(body).encode()
    return ("{" + ",".join(f"{_ENCODE(key)}:{_json_text(value)}" for key, value in body.items()) + "}").encode()


#: Decompressed bytes produced per step when lionops inflates a body itself.
_INFLATE_STEP = 1 << 16


@functools.cache
def _decodable() -> frozenset[str]:
    """The content codings httpx2 decodes here: its own, and ``br`` / ``zstd``
    when their optional packages are installed."""
    found = {"identity", "gzip", "x-gzip", "deflate"}
    if importlib.util.find_spec("brotli") or importlib.util.find_spec("brotlicffi"):
        found.add("br")
    if importlib.util.find_spec("zstandard"):
        found.add("zstd")
    return frozenset(found)


async def _decoded(response: httpx2.Response) -> AsyncIterator[bytes]:
    """The body's bytes after content decoding, at most 64 KiB at a time.

    gzip and deflate are inflated here with a bound per step, so one small
    compressed chunk never becomes a large buffer before the size cap can
    count it; other encodings (``br``, ``zstd``) are decoded by httpx2.
    """
    encoding = response.headers.get("content-encoding", "").strip().lower()
    unknown = [c for c in (c.strip() for c in encoding.split(",")) if c and c not in _decodable()]
    if unknown:
        # httpx2 passes a coding it has no decoder for through as is: compressed
        # bytes would be read as the answer.
        raise httpx2.DecodingError(f"Content-Encoding {unknown[0][:40]!r}, which this installation cannot decode")
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
                    raise httpx2.DecodingError(str(exc)) from None
                inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
                out = inflater.decompress(pending, _INFLATE_STEP)
            first = False
            pending = inflater.unconsumed_tail
            if out:
                yield out
    tail = inflater.flush()
    if tail:
        yield tail


class _EventReader:
    """The events (name, ``data``) of a server-sent-event stream, one list per
    chunk read (the last one flushed at the end), for every protocol's
    stream; the bytes read are bounded by ``max_response_bytes``, and
    :attr:`deadline` is when ``silence_timeout`` passes after the last chunk
    that brought a ``data:`` event (the reader's caller holds the scope)."""

    __slots__ = ("_endpoint", "_status", "_fields", "_chunks", "_decoder", "_pending", "_total", "_ended", "_cr",
                 "deadline")

    def __init__(self, endpoint: ChatCompletionsEndpoint, response: httpx2.Response) -> None:
        self._endpoint = endpoint
        self._status = response.status_code
        self._fields = EventFields()
        self._chunks = _decoded(response).__aiter__()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending, self._total, self._ended = "", 0, False
        self._cr = False  # the text read so far ends with a CR: a LF next is its CRLF's second half
        self.deadline = anyio.current_time() + endpoint.silence_timeout

    async def batch(self) -> list[tuple[str | None, str]] | None:
        """The events of the next chunk read (maybe none); ``None`` after the end."""
        if self._ended:
            return None
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            chunk, self._ended = b"", True
        if chunk:
            self._total += len(chunk)
            if self._total > self._endpoint.max_response_bytes:
                raise self._endpoint._too_large(self._status)
        ended = self._ended
        text = self._decoder.decode(chunk, final=ended)
        if text:
            # A CR ending a read is a line break at once (a stream held open
            # after its last event loses nothing); a LF starting the next read
            # is the second half of its CRLF, no line of its own.
            if self._cr and text[0] == "\n":
                text = text[1:]
            self._cr = text.endswith("\r")
        lines = LINE_BREAK.split(self._pending + text)
        self._pending = "" if ended else lines.pop()
        payloads = self._fields.feed(lines, end=ended)
        if payloads:
            self.deadline = anyio.current_time() + self._endpoint.silence_timeout
        return payloads

    async def aclose(self) -> None:
        """Release the response's byte stream (the reader may stop early)."""
        with contextlib.suppress(Exception):
            await self._chunks.aclose()  # type: ignore[attr-defined]


class _PastDeadline(stop_base):
    """tenacity stop: the next wait would end after ``ends_at``; each such wait is kept in ``stopped``."""

    def __init__(self, ends_at: float, stopped: list[float]) -> None:
        self.ends_at = ends_at
        self.stopped = stopped

    def __call__(self, retry_state: RetryCallState) -> bool:
        wait = float(retry_state.upcoming_sleep)
        if clock.monotonic() + wait >= self.ends_at:
            self.stopped.append(wait)
            return True
        return False


def _retryable(exc: BaseException) -> bool:
    """Whether a failed request may be made again (429, 5xx, a refused connection)."""
    return bool(getattr(exc, "retryable", False))


#: httpx2 timeout exception -> the socket operation it bounds.
_TIMEOUT_KINDS = {"ConnectTimeout": "connect", "ReadTimeout": "read", "WriteTimeout": "write",
                  "PoolTimeout": "wait for a pooled connection"}


def _malformed_head(exc: httpx2.HTTPError) -> bool:
    """Whether ``exc`` says the server answered with a head the HTTP library
    refused (a bad or conflicting ``Content-Length``, ...), as opposed to
    closing the connection before any answer."""
    return isinstance(exc, httpx2.RemoteProtocolError) and "without sending a response" not in str(exc)


def _error_message(response: httpx2.Response) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body, uncut
    (the caller removes secrets, then cuts)."""
    try:
        data = bounded_json(response.text, what="the error body")
    except ValueError:  # not JSON, or past the bounds (JSONLimitError)
        return response.text
    if isinstance(data, dict):
        err = data.get("error")
        for message in (err.get("message") if isinstance(err, dict) else None, err, data.get("message")):
            if isinstance(message, str):
                return message
    return response.text


def _note_chunks(payloads: list[tuple[str | None, str]], *, skip: frozenset[str] = frozenset()) -> None:
    """Tell the observers that stream chunks arrived (their timing: time to
    first chunk); ``[DONE]`` and events named in ``skip`` are not chunks."""
    if not observe.observers:
        return
    count = sum(1 for event, payload in payloads if payload != "[DONE]" and event not in skip)
    if count:
        observe.note("stream_chunk", count=count)
