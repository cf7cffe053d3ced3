"""httpx transports that record exchanges and serve them back.

:class:`RecordingTransport` forwards to a real transport and keeps each
exchange, redacted, as an :class:`~lionops.replay.cassette.HttpExchange`.
:class:`ReplayTransport` answers from recorded exchanges without any
network: a request is matched on method, URL and normalized body (JSON
decoded and redacted), the first unused equal exchange serving it. Both
are installed through :data:`lionops.endpoints.openai.HTTP_TRANSPORT`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .cassette import ErrorRecord, HttpExchange, HttpRequestRecord, HttpResponseRecord
from .divergence import ReplayDivergence, first_difference
from .redact import Redactor

__all__ = ["RecordingTransport", "ReplayTransport", "match_key"]

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
        return json.loads(text), None
    except ValueError:
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


class RecordingTransport(httpx.AsyncBaseTransport):
    """Forwards to ``inner`` (default: a new ``httpx.AsyncHTTPTransport``) and
    appends every exchange to ``exchanges``, redacted by ``redactor``.

    Secrets found in credential headers are removed from the whole exchange.
    Streamed answers are read whole and kept as text. A transport error is
    recorded (``error``) and re-raised.
    """

    def __init__(self, redactor: Redactor, exchanges: list[Any],
                 inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.redactor = redactor
        self.exchanges = exchanges
        self._inner = inner or httpx.AsyncHTTPTransport()

    def _request(self, request: httpx.Request) -> tuple[HttpRequestRecord, Redactor]:
        headers, found = self.redactor.headers(request.headers.multi_items())
        redactor = self.redactor.with_secrets(found)
        body, text = _decode(request.content)
        headers = {k: v for k, v in headers.items() if k not in _DROP_REQUEST}
        record = HttpRequestRecord(
            method=request.method, url=redactor.url(str(request.url)), headers=headers,
            body=redactor.value(body), text=None if text is None else redactor.text(text),
        )
        return record, redactor

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        record, redactor = self._request(request)
        try:
            response = await self._inner.handle_async_request(request)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
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
        return httpx.Response(response.status_code, headers=kept, content=content, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _served(exchange: HttpExchange, request: httpx.Request) -> httpx.Response:
    if exchange.response is None:
        assert exchange.error is not None
        kind = getattr(httpx, exchange.error.type, None)
        if not (isinstance(kind, type) and issubclass(kind, httpx.TransportError)):
            kind = httpx.TransportError
        raise kind(exchange.error.message, request=request)
    rec = exchange.response
    if rec.text is not None:
        content = rec.text.encode()
    elif rec.body is not None:
        content = json.dumps(rec.body).encode()
    else:
        content = b""
    return httpx.Response(rec.status, headers=rec.headers, content=content, request=request)


class ReplayTransport(httpx.AsyncBaseTransport):
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

    def __init__(self, exchanges: list[Any], redactor: Redactor,
                 on_divergence: Callable[[ReplayDivergence], None] | None = None, *, operation: int = 0) -> None:
        self.exchanges = [e for e in exchanges if isinstance(e, HttpExchange)]
        self.used = [False] * len(self.exchanges)
        self.redactor = redactor
        self.on_divergence = on_divergence
        self.operation = operation
        self.requests = 0

    def _key(self, rec: HttpRequestRecord) -> tuple[str, str, Any]:
        return match_key(rec.method, rec.url, rec.body, rec.text, self.redactor)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        _, found = self.redactor.headers(request.headers.multi_items())
        redactor = self.redactor.with_secrets(found)
        body, text = _decode(request.content)
        live = match_key(request.method, str(request.url), body, text, redactor)
        number = self.requests
        self.requests += 1
        for i, exchange in enumerate(self.exchanges):
            if not self.used[i] and self._key(exchange.request) == live:
                self.used[i] = True
                return _served(exchange, request)
        raise self._diverged(number, live)

    def _diverged(self, number: int, live: tuple[str, str, Any]) -> ReplayDivergence:
        pending = [e for e, u in zip(self.exchanges, self.used) if not u]
        where = f"{live[0]} {live[1]}"
        if not pending:
            message = f"request {number} ({where}) asks for an exchange the recording lacks: all {len(self.exchanges)} are used"
            expected = None
        else:
            want = self._key(pending[0].request)
            parts = ("method", "url", "body")
            diff = first_difference(dict(zip(parts, want)), dict(zip(parts, live)), "request")
            message = f"request {number} ({where}) matches no recorded exchange; nearest differs at {diff}"
            expected = f"{want[0]} {want[1]}"
        err = ReplayDivergence(message, kind="exchange", index=number, expected=expected, actual=where,
                               operation=self.operation)
        if self.on_divergence is not None:
            self.on_divergence(err)
        return err

    @property
    def unused(self) -> list[int]:
        """Indices of recorded HTTP exchanges no request used."""
        return [i for i, u in enumerate(self.used) if not u]
