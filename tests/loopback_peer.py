"""A loopback HTTP peer base for testing real CLI agents.

``LoopbackPeer`` serves on 127.0.0.1 (a free port) in a background thread;
subclasses implement :meth:`LoopbackPeer.answer` for POST requests. Every
request's path, headers and JSON body are kept (``paths``, ``headers``,
``requests``). Anything the subclass does not answer gets a 404. It never
reaches beyond loopback.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Answer:
    """What a peer sends back: ``status``, ``body`` bytes, content type and extra
    ``headers``; with ``hold_s``, the body is sent without a length and the
    connection then stays open and silent that long (a stalled stream)."""

    __slots__ = ("status", "body", "content_type", "headers", "hold_s")

    def __init__(self, status: int, body: bytes, content_type: str = "application/json",
                 headers: dict[str, str] | None = None, hold_s: float = 0.0) -> None:
        self.status, self.body, self.content_type = status, body, content_type
        self.headers = dict(headers or {})
        self.hold_s = hold_s


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    """Server-sent events: ``event: NAME`` (when named) and one ``data:`` line each."""
    parts = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(parts).encode()


class LoopbackPeer:
    """Start with ``with Peer(...) as peer:``; ``peer.base_url`` is its address."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        #: TCP connections accepted (a client that reuses its connection opens one).
        self.connections = 0
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                with peer._lock:
                    peer.connections += 1

            def _send(self, answer: Answer) -> None:
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                if answer.hold_s:
                    self.send_header("connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("content-length", str(len(answer.body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)
                if answer.hold_s:
                    self.wfile.flush()
                    peer._stopping.wait(answer.hold_s)

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                with peer._lock:
                    peer.paths.append(self.path)
                    peer.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    request = {"_raw": raw.decode("utf-8", "replace")}
                answer = peer.answer(self.path, request)
                if answer is None:
                    self._not_found()
                    return
                with peer._lock:
                    peer.requests.append(request)
                self._send(answer)

            def _not_found(self) -> None:
                body = json.dumps({"error": {"type": "not_found_error", "message": self.path}})
                self._send(Answer(404, body.encode()))

            def do_GET(self) -> None:  # noqa: N802
                with peer._lock:
                    peer.paths.append(self.path)
                self._not_found()

            do_HEAD = do_GET

        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class Tripwire(LoopbackPeer):
    """A peer that answers nothing and records every request (``CONNECT`` too).

    Set as ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` of a CLI (with
    ``NO_PROXY`` naming loopback), it catches any attempt of a proxy-aware
    client to reach another host: ``paths`` must stay empty.
    """

    def __init__(self) -> None:
        super().__init__()
        handler = self._server.RequestHandlerClass
        peer = self

        def do_connect(self: Any) -> None:
            with peer._lock:
                peer.paths.append(f"CONNECT {self.path}")
            self._not_found()

        handler.do_CONNECT = do_connect  # type: ignore[attr-defined]

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        return None

    def proxy_env(self) -> dict[str, str]:
        url = self.base_url
        return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "ALL_PROXY": url, "http_proxy": url, "https_proxy": url,
                "all_proxy": url, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
