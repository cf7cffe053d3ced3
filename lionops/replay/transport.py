"""httpx2 transports that record exchanges and serve them back.

:class:`RecordingTransport` forwards to a real transport and keeps each
exchange, redacted, as an :class:`~lionops.replay.cassette.HttpExchange`.
:class:`ReplayTransport` answers from recorded exchanges without any
network: a request is matched on method, URL and normalized body (JSON
decoded and redacted), the first unused equal exchange serving it. Both
are installed as the runtime's ``http_transport`` (:func:`lionops.runtime.use_runtime`).
:class:`RecordedExchanges` is the bookkeeping it shares with the CLI replay
(:mod:`lionops.replay.cli`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from .._json import loads as bounded_json
from .._redact import Redactor
from .cassette import ErrorRecord, HttpExchange, HttpRequestRecord, HttpResponseRecord
from .divergence import ReplayDivergence, same_json, unmatched_exchange

__all__ = ["RecordingTransport", "ReplayTransport", "RecordedExchanges", "match_key"]

#: Response headers not worth keeping: transfer framing, dates, cookies.
_DROP_RESPONSE = frozenset({
    "content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive",
    "date", "set-cookie", "server",
})
#: Request headers not worth keeping: framing and the (port-bearing) host.
_DROP_REQUEST = frozenset({"host", "content-length", "connection"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _decode(content: bytes) -> tuple[Any, str | None]:
    """``(json, None)`` when ``content`` is JSON, else ``(None, text)``."""
    if not content:
        return None, None
    text = content.decode("utf-8", errors="replace")
    try:
        return bounded_json(text), None
    except ValueError:  # not JSON, or past the bounds (JSONLimitError): kept as text
        return None, text


def match_url(url: str) -> str:
    """The URL as matched: scheme, host, port, path, query; a loopback host
    with any port counts as ``localhost`` (a local server's port is incidental)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host in _LOOPBACK:
        host = "localhost"
    elif parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), parts.query, ""))


def match_key(method: str, url: str, body: Any, text: str | None, redactor: Redactor) -> tuple[str, str, Any]:
    """``(method, url, body)`` as compared on replay (body redacted)."""
    return method.upper(), match_url(redactor.url(url)), redactor.value(body if text is None else text)


class RecordingTransport(httpx2.AsyncBaseTransport):
    """Forwards to ``inner`` (default: a new ``httpx2.AsyncHTTPTransport``) and
    appends every exchange to ``exchanges``, redacted by ``redactor``.

    Secrets found in credential headers are removed from the whole exchange.
    Streamed answers are read whole and kept as text. A transport error is
    recorded (``error``) and re-raised.
    """

    def __init__(self, redactor: Redactor, exchanges: list[Any],
                 inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.redactor = redactor
        self.exchanges = exchanges
        self._inner = inner or httpx2.AsyncHTTPTransport()

    def _request(self, request: httpx2.Request) -> tuple[HttpRequestRecord, Redactor]:
        headers, found = self.redactor.headers(request.headers.multi_items())
        redactor = self.redactor.with_secrets(found)
        body, text = _decode(request.content)
        headers = {k: v for k, v in headers.items() if k not in _DROP_REQUEST}
        record = HttpRequestRecord(
            method=request.method, url=redactor.url(str(request.url)), headers=headers,
            body=redactor.value(body), text=None if text is None else redactor.text(text),
        )
        return record, redactor

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        record, redactor = self._request(request)
        try:
            response = await self._inner.handle_async_request(request)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
        except httpx2.TransportError as exc:
            error = ErrorRecord(type=type(exc).__name__, message=redactor.text(str(exc)))
            self.exchanges.append(HttpExchange(request=record, error=error))
            raise
        kept = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROP_RESPONSE]
        headers, _ = redactor.headers(kept)
        body, text = _decode(content)
        self.exchanges.append(HttpExchange(request=record, response=HttpResponseRecord(
            status=response.status_code, headers=headers,
            body=redactor.value(body), text=None if text is None else redactor.text(text),
        )))
        return httpx2.Response(response.status_code, headers=kept, content=content, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _served(exchange: HttpExchange, request: httpx2.Request) -> httpx2.Response:
    if exchange.response is None:
        assert exchange.error is not None
        kind = getattr(httpx2, exchange.error.type, None)
        if not (isinstance(kind, type) and issubclass(kind, httpx2.TransportError)):
            kind = httpx2.TransportError
        raise kind(exchange.error.message, request=request)
    rec = exchange.response
    if rec.text is not None:
        content = rec.text.encode()
    elif rec.body is not None:
        content = json.dumps(rec.body).encode()
    else:
        content = b""
    return httpx2.Response(rec.status, headers=rec.headers, content=content, request=request)


class RecordedExchanges:
    """The recorded exchanges of one ``kind``, each served at most once.

    Args:
        exchanges: the operation's recorded exchanges in order (those of
            ``kind`` are kept).
        redactor: normalizes both sides before comparing.
        on_divergence: called with each :class:`ReplayDivergence` before it
            is raised (the raise may be swallowed by code under test).
        operation: the operation's position in the cassette.
    """

    kind: type = object

    def __init__(self, exchanges: list[Any], redactor: Redactor,
                 on_divergence: Callable[[ReplayDivergence], None] | None = None, *, operation: int = 0) -> None:
        self.exchanges: list[Any] = [e for e in exchanges if isinstance(e, self.kind)]
        self.used = [False] * len(self.exchanges)
        self.redactor = redactor
        self.on_divergence = on_divergence
        self.operation = operation
        self.asked = 0

    def take(self, matches: Callable[[Any], bool]) -> Any | None:
        """The first unused exchange ``matches`` accepts, now marked used."""
        for i, exchange in enumerate(self.exchanges):
            if not self.used[i] and matches(exchange):
                self.used[i] = True
                return exchange
        return None

    def nearest(self) -> Any | None:
        """The first unused exchange (what a mismatch is compared with)."""
        return next((e for e, u in zip(self.exchanges, self.used, strict=False) if not u), None)

    def report(self, err: ReplayDivergence) -> ReplayDivergence:
        if self.on_divergence is not None:
            self.on_divergence(err)
        return err

    @property
    def unused(self) -> list[int]:
        """Indices (among exchanges of this kind) of those never served."""
        return [i for i, u in enumerate(self.used) if not u]

    def describe(self, index: int) -> str:  # pragma: no cover - per kind
        raise NotImplementedError


class ReplayTransport(RecordedExchanges, httpx2.AsyncBaseTransport):
    """Serves recorded ``exchanges`` (HTTP ones) with no network.

    Args:
        exchanges: the recorded exchanges in order.
        redactor: normalizes both sides before comparing.
        on_divergence: called with the :class:`ReplayDivergence` before it is
            raised (the raise may be swallowed by code under test).

    Raises (from ``handle_async_request``):
        ReplayDivergence: no unused recorded exchange has this request's
            method, URL and normalized body.
    """

    kind = HttpExchange

    def _key(self, rec: HttpRequestRecord) -> tuple[str, str, Any]:
        return match_key(rec.method, rec.url, rec.body, rec.text, self.redactor)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        _, found = self.redactor.headers(request.headers.multi_items())
        redactor = self.redactor.with_secrets(found)
        body, text = _decode(request.content)
        live = match_key(request.method, str(request.url), body, text, redactor)
        number = self.asked
        self.asked += 1
        exchange = self.take(lambda e: same_json(self._key(e.request), live))
        if exchange is not None:
            return _served(exchange, request)
        parts = ("method", "url", "body")
        pending = self.nearest()
        nearest = None
        if pending is not None:
            want = self._key(pending.request)
            nearest = (dict(zip(parts, want, strict=False)), f"{want[0]} {want[1]}")
        raise self.report(unmatched_exchange(
            "request", "request", number, f"{live[0]} {live[1]}", nearest, dict(zip(parts, live, strict=False)),
            total=len(self.exchanges), operation=self.operation))

    def describe(self, index: int) -> str:
        rec = self.exchanges[index].request
        return f"{rec.method} {rec.url}"
