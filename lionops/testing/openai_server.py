"""A loopback OpenAI-compatible Chat Completions server (stdlib only).

:class:`OpenAIServer` listens on ``127.0.0.1`` on a free port in a daemon
thread and answers ``POST /v1/chat/completions`` with scripted
:class:`Reply` objects, in order. It records every request it receives with
every credential header (``Authorization``, ``x-api-key``, ...) redacted and
the query left out, so recorded
fixtures never hold a key. It serves the tests and ``make demo``; it is a real HTTP
peer, so the adapter under test runs its whole transport path.

    with OpenAIServer([Reply(body=completion("hi"))]) as server:
        model = iModel(provider="openai", model="m", base_url=server.base_url, api_key="k")

Payload builders (:func:`completion`, :func:`tool_call`, :func:`error_body`)
produce the provider's response shapes.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .._secrets import MARK, is_secret_name, redact_header, scrub_url
from ..errors import NotStartedError

__all__ = [
    "OpenAIServer", "Reply", "RecordedRequest", "completion", "chunked", "tool_call", "error_body",
    "load_recording", "replay", "REDACTED",
]

#: What a recorded ``Authorization: Bearer <key>`` header is replaced with.
REDACTED = f"Bearer {MARK}"

_ids = itertools.count(1)


def tool_call(name: str, arguments: str | dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """One ``tool_calls`` entry; a dict ``arguments`` is JSON-encoded as providers do."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{next(_ids):04d}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    refusal: str | None = None,
    model: str = "gpt-4o-mini-2024-07-18",
    prompt_tokens: int = 52,
    completion_tokens: int = 17,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice.

    ``finish_reason`` defaults to ``"tool_calls"`` when tool calls are given,
    else ``"stop"``. ``cached_tokens`` (part of ``prompt_tokens``) and
    ``reasoning_tokens`` (part of ``completion_tokens``) fill the usage details.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{next(_ids):08d}",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens, "audio_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": "fp_0aa8d3e20b",
    }


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def chunked(done: dict[str, Any], pieces: int = 3) -> list[dict[str, Any]]:
    """A ``chat.completion`` as the chunks a server streams: the content and
    each tool call's arguments split into ``pieces`` deltas (tool-call deltas
    carry ``index``; id and name come in the first), then the finish reason,
    then a usage chunk."""
    choice = done["choices"][0]
    message = choice["message"]
    head = {"id": done["id"], "object": "chat.completion.chunk", "created": done["created"], "model": done["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": "" if message.get("content") is not None else None})]
    if message.get("content"):
        out += [chunk({"content": part}) for part in _pieces(message["content"], pieces)]
    if message.get("refusal"):
        out += [chunk({"refusal": part}) for part in _pieces(message["refusal"], pieces)]
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": fn["name"], "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                for part in _pieces(fn["arguments"], pieces)]
    out.append(chunk({}, choice["finish_reason"]))
    out.append({**head, "choices": [], "usage": done["usage"]})
    return out


def error_body(message: str, type_: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI error object ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@dataclass(slots=True)
class Reply:
    """One scripted answer.

    Attributes:
        body: a dict (sent as JSON), a str or bytes (sent as is).
        status: the HTTP status.
        headers: extra response headers (``Retry-After``, ...).
        hang: never answer; the handler waits until the server stops (or
            ``hang_s`` seconds), so the client's timeout fires.
        hang_s: the longest a hanging handler waits, in seconds.
        stream: ``chat.completion.chunk`` objects sent as server-sent events
            (``data: {...}`` lines, then ``data: [DONE]`` unless ``done`` is
            false) instead of ``body``. An item that is a ``str`` is sent as
            is (``": ping\\n\\n"``, ``"event: error\\n"``, ``"data: [DONE]\\n\\n"``).
        done: end ``stream`` with ``data: [DONE]``.
        pause_s: seconds between stream events.
        then: what a stream does after its events: ``"end"`` (the body
            ends), ``"ping"`` (a ``: ping`` comment every ``ping_every_s``
            seconds, never a data event) or ``"silence"`` (nothing), both
            until the server stops or ``hang_s`` passes.
        ping_every_s: the interval of ``then="ping"`` comments.
        content_type: the ``Content-Type`` sent instead of the usual one.
        drip_s: send the body one byte at a time, this many seconds apart
            (a server that is slow but never silent for long).
        echo: send every request header back unredacted (a careless
            gateway): as an ``x-echo-<name>`` response header, and in place of
            the text ``{request_headers}`` in the body.
    """

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False
    hang_s: float = 30.0
    stream: list[dict[str, Any] | str] | None = None
    done: bool = True
    pause_s: float = 0.0
    then: str = "end"
    ping_every_s: float = 0.05
    content_type: str | None = None
    drip_s: float | None = None
    echo: bool = False


@dataclass(slots=True)
class RecordedRequest:
    """One request the server received; ``headers`` has Authorization redacted."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "headers": self.headers, "body": self.body}


ReplySource = Iterable["Reply | dict[str, Any]"] | Callable[[RecordedRequest], "Reply | dict[str, Any]"]


class OpenAIServer:
    """A scripted OpenAI-compatible server on ``127.0.0.1`` (see the module docstring).

    Args:
        replies: answers in order (a dict is ``Reply(body=dict)``), or a
            function of the :class:`RecordedRequest` returning one. When the
            script runs out the server answers 500 with an explanatory error.

    Attributes:
        requests: every request received, in order (Authorization redacted).
        url: ``http://127.0.0.1:<port>``; ``base_url``: ``url + "/v1"``.
    """

    def __init__(self, replies: ReplySource = ()) -> None:
        self._source: Callable[[RecordedRequest], Reply | dict[str, Any]] | None = (
            replies if callable(replies) else None
        )
        self._queue: list[Reply] = [] if callable(replies) else [_as_reply(r) for r in replies]
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._closing = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ script

    def push(self, *replies: Reply | dict[str, Any]) -> None:
        """Append answers to the script."""
        with self._lock:
            self._queue.extend(_as_reply(r) for r in replies)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The requests made to ``.../chat/completions``."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def wait_for_requests(self, count: int, *, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests have arrived, or ``timeout``
        seconds pass; return the requests received so far.

        A client that gives up early (a short ``timeout``) has sent its request
        before the server's handler thread may have read it: wait here before
        counting what arrived.
        """
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.requests) >= count, timeout=timeout)
            return list(self.requests)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        if self._source is not None:
            return _as_reply(self._source(request))
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        return Reply(error_body("scripted server: no reply left for this request", "server_error"), status=500)

    # ------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise NotStartedError("server not started: call start() or use it in a with block")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> OpenAIServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        server = self

        class Handler(_Handler):
            owner = server

        self._closing.clear()
        self._httpd = _HTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
            name="lionops-openai-server", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging handlers, stop serving and close the socket."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._httpd is not None else "stopped"
        return f"OpenAIServer({where}, requests={len(self.requests)}, scripted={len(self._queue)})"


def load_recording(path: str | Path) -> dict[str, Any]:
    """A recorded conversation: ``{"description", "exchanges": [{"request": {...},
    "response": {"status", "headers", "body"}}]}`` (requests redacted)."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def _shape(body: Any) -> dict[str, Any]:
    """What a replayed request must share with its recording: the model's
    tools and the name of the requested response schema."""
    body = body if isinstance(body, dict) else {}
    fmt = body.get("response_format") or {}
    return {
        "tools": sorted(t.get("function", {}).get("name", "") for t in body.get("tools") or []),
        "response_format": (fmt.get("json_schema") or {}).get("name") or fmt.get("type"),
    }


def replay(recording: dict[str, Any]) -> Callable[[RecordedRequest], Reply]:
    """Replies that serve ``recording``'s responses in order.

    A request whose tools or response schema differ from the recorded one
    gets a 400 naming the difference, so a replay never answers a question
    that was not asked.
    """
    exchanges = list(recording["exchanges"])
    lock = threading.Lock()

    def reply(request: RecordedRequest) -> Reply:
        with lock:
            if not exchanges:
                return Reply(error_body("recording: no exchange left for this request", "server_error"), status=500)
            exchange = exchanges.pop(0)
        want, got = _shape(exchange["request"].get("body")), _shape(request.body)
        if want != got:
            return Reply(error_body(f"recording: request differs from the recorded one: want {want}, got {got}"),
                         status=400)
        response = exchange["response"]
        return Reply(response.get("body"), status=response.get("status", 200),
                     headers=dict(response.get("headers") or {}))

    return reply


def _as_reply(item: Reply | dict[str, Any]) -> Reply:
    return item if isinstance(item, Reply) else Reply(body=item)


class _HTTPServer(ThreadingHTTPServer):
    # The stdlib's listen backlog of 5 overflows when many calls connect at
    # once; the kernel then resets some of those connections.
    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections end after this many seconds

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def handle(self) -> None:
        # A client that stops reading mid-body (a size cap, a silence bound)
        # resets the connection; that ends this connection, quietly.
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            self.close_connection = True

    @property
    def _route(self) -> str:
        """The request path without its query (a query may carry a key, as
        ``?api-key=`` does on some gateways): routed on, recorded, shown."""
        return scrub_url(self.path)

    def _record(self, body: Any) -> RecordedRequest:
        headers = {k.lower(): redact_header(v)[0] if is_secret_name(k) else v for k, v in self.headers.items()}
        req = RecordedRequest(self.command, self._route, headers, body, time.time())
        with self.owner._arrived:
            self.owner.requests.append(req)
            self.owner._arrived.notify_all()
        return req

    def _send_stream(self, reply: Reply) -> None:
        """Server-sent events, written one by one (chunked transfer encoding)."""
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type or "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()

        def write(text: str) -> None:
            data = text.encode()
            if reply.drip_s is None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                return
            for i in range(len(data)):  # one byte per chunk, drip_s apart
                if self.owner._closing.wait(reply.drip_s):
                    raise ConnectionAbortedError("the server is closing")
                self.wfile.write(b"1\r\n" + data[i:i + 1] + b"\r\n")
                self.wfile.flush()

        events = [e if isinstance(e, str) else f"data: {json.dumps(e)}\n\n" for e in reply.stream or []]
        if reply.done:
            events.append("data: [DONE]\n\n")
        for i, event in enumerate(events):
            if i and reply.pause_s:
                self.owner._closing.wait(reply.pause_s)
            write(event)
        if reply.then in ("ping", "silence"):
            until = time.monotonic() + reply.hang_s
            while not self.owner._closing.is_set() and time.monotonic() < until:
                if reply.then == "ping":
                    write(": ping\n\n")
                self.owner._closing.wait(reply.ping_every_s)
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send(self, reply: Reply) -> None:
        body = reply.body
        if reply.stream is not None:
            self._send_stream(reply)
            return
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            ctype = "application/json"
        elif isinstance(body, bytes):
            data, ctype = body, "application/octet-stream"
        else:
            data, ctype = str(body or "").encode(), "text/plain; charset=utf-8"
        if reply.echo:
            data = self._echo(data)
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type or ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        if reply.echo:
            for key, value in self.headers.items():
                self.send_header(f"x-echo-{key.lower()}", value)
        self.end_headers()
        if reply.drip_s is None:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            if self.owner._closing.wait(reply.drip_s):
                self.close_connection = True
                return
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()

    def _echo(self, data: bytes) -> bytes:
        """``data`` with ``{request_headers}`` replaced by the raw request headers
        (JSON-escaped, so a JSON body stays JSON)."""
        raw = json.dumps(json.dumps(dict(self.headers.items())))[1:-1]
        return data.replace(b"{request_headers}", raw.encode())

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._record(None)
        if self.path.rstrip("/").endswith("/models"):
            self._send(Reply({"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model"}]}))
        else:
            self._send(Reply(error_body(f"no route {self.path}"), status=404))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._record(raw.decode(errors="replace"))
            self._send(Reply(error_body("We could not parse the JSON body of your request."), status=400))
            return
        request = self._record(body)
        if not self._route.rstrip("/").endswith("/chat/completions"):
            self._send(Reply(error_body(f"no route {self._route}"), status=404))
            return
        if not isinstance(body, dict) or not body.get("model") or not isinstance(body.get("messages"), list):
            self._send(Reply(error_body("'model' and 'messages' are required properties."), status=400))
            return
        reply = self.owner._next_reply(request)
        if reply.hang:
            self.owner._closing.wait(reply.hang_s)
            self.close_connection = True
            return
        try:
            self._send(reply)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
