"""Loopback servers of the native provider protocols (stdlib only).

:class:`ResponsesServer` (OpenAI Responses, ``POST /v1/responses``),
:class:`AnthropicServer` (Anthropic Messages, ``POST /v1/messages``) and
:class:`GeminiServer` (Gemini ``:generateContent`` and
``:streamGenerateContent?alt=sse``) listen on ``127.0.0.1`` on a free port in
a daemon thread and answer each POST with the next item of their script. A
:class:`Turn` (text, tool calls, reasoning, how it ends) is rendered in the
protocol's documented shape: a plain body, or the protocol's event stream
when the request asks for one. Every request's path, headers (credentials
redacted unless ``redact=False``) and JSON body are kept. Use them to test an
application against the three protocols without a network:

    with AnthropicServer(Turn(text="hello")) as server:
        model = iModel(provider="anthropic", model="claude-x", base_url=server.base_url, api_key="k")

:func:`native_reply` renders a turn as one protocol answers it (plain or
streamed) and :func:`native_error` an HTTP error in the protocol's error
shape; a script item may also be a :class:`NativeReply` or a function of the
request body returning either.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal

from .._secrets import is_secret_name, redact_header
from ..errors import ConfigurationError, NotStartedError

__all__ = [
    "NativeReply", "NativeServer", "ResponsesServer", "AnthropicServer", "GeminiServer", "LoopbackServer",
    "Turn", "native_reply", "native_error", "sse", "PROTOCOLS", "USAGE", "anthropic_body", "anthropic_events",
    "responses_body", "responses_events", "google_body", "google_chunks",
]

#: The protocol names, as ``iModel(provider=...)`` takes them.
Protocol = Literal["openai_responses", "anthropic", "google"]


class NativeReply:
    """What a server sends back: ``status``, ``body`` bytes, content type and
    extra ``headers``; with ``hold_s``, the body is sent without a length and
    the connection then stays open and silent that long (a stalled stream)."""

    __slots__ = ("status", "body", "content_type", "headers", "hold_s")

    def __init__(self, status: int, body: bytes, content_type: str = "application/json",
                 headers: dict[str, str] | None = None, hold_s: float = 0.0) -> None:
        self.status, self.body, self.content_type = status, body, content_type
        self.headers = dict(headers or {})
        self.hold_s = hold_s

    def __repr__(self) -> str:
        held = f", hold_s={self.hold_s:g}" if self.hold_s else ""
        return f"NativeReply({self.status}, {self.content_type}, {len(self.body)} bytes{held})"


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    """Server-sent events: ``event: NAME`` (when named) and one ``data:`` line each."""
    parts = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(parts).encode()


#: The three native protocols.
PROTOCOLS: tuple[Protocol, ...] = ("openai_responses", "anthropic", "google")

#: Usage of every recorded turn: input (cached part), output (reasoning part).
USAGE = {"input": 1200, "cached": 1000, "cache_write": 50, "output": 40, "reasoning": 8}


@dataclass
class Turn:
    """One assistant turn, protocol-neutral.

    ``thinking``: the reasoning text (sent with a signature / encrypted
    content / thought signature); ``text``: the answer text; ``calls``:
    ``(id, name, arguments)`` tool calls (parallel when several); ``end``:
    ``"done"``, ``"cut"`` (token limit), ``"refused"``.
    """

    text: str | None = None
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    thinking: str | None = None
    end: str = "done"


SIGNATURE = "EqQBCkgIARABGAIiQPeerSignatureOfTheThinkingBlock=="
ENCRYPTED = "gAAAAABpeerEncryptedReasoningContent=="
THOUGHT_SIGNATURE = base64.b64encode(b"a peer thought signature").decode()


def _fragments(text: str, n: int = 3) -> list[str]:
    size = max(1, len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# ------------------------------------------------------------------ Anthropic


def anthropic_content(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.thinking is not None:
        blocks.append({"type": "thinking", "thinking": turn.thinking, "signature": SIGNATURE})
    if turn.text is not None:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in turn.calls]
    return blocks


def _anthropic_stop(turn: Turn) -> str:
    if turn.end == "cut":
        return "max_tokens"
    if turn.end == "refused":
        return "refusal"
    return "tool_use" if turn.calls else "end_turn"


def _anthropic_usage() -> dict[str, Any]:
    return {"input_tokens": USAGE["input"] - USAGE["cached"] - USAGE["cache_write"],
            "cache_read_input_tokens": USAGE["cached"], "cache_creation_input_tokens": USAGE["cache_write"],
            "output_tokens": USAGE["output"]}


def anthropic_body(turn: Turn, model: str = "claude-peer") -> dict[str, Any]:
    return {"id": "msg_01peer", "type": "message", "role": "assistant", "model": model,
            "content": anthropic_content(turn), "stop_reason": _anthropic_stop(turn), "stop_sequence": None,
            "usage": _anthropic_usage()}


def anthropic_events(turn: Turn, model: str = "claude-peer", error: dict[str, Any] | None = None,
                     cut: bool = False) -> list[tuple[str | None, dict[str, Any]]]:
    usage = _anthropic_usage()
    events: list[tuple[str | None, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
        "id": "msg_01peer", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}),
        ("ping", {"type": "ping"})]
    for index, block in enumerate(anthropic_content(turn)):
        kind = block["type"]
        start: dict[str, Any]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": f} for f in _fragments(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": SIGNATURE})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": f} for f in _fragments(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": f} for f in _fragments(json.dumps(block["input"]))]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if error is not None:
            events.append(("error", {"type": "error", "error": error}))
            return events
    if cut:
        return events
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": _anthropic_stop(turn), "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


# ------------------------------------------------------------------ OpenAI Responses


def responses_output(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.thinking is not None:
        items.append({"type": "reasoning", "id": "rs_peer", "summary": [
            {"type": "summary_text", "text": turn.thinking}], "encrypted_content": ENCRYPTED})
    if turn.text is not None:
        part = ({"type": "refusal", "refusal": turn.text} if turn.end == "refused"
                else {"type": "output_text", "text": turn.text, "annotations": []})
        items.append({"type": "message", "id": "msg_peer", "status": "completed", "role": "assistant",
                      "content": [part]})
    items += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": n, "arguments": json.dumps(a),
               "status": "completed"} for i, n, a in turn.calls]
    return items


def _responses_usage() -> dict[str, Any]:
    return {"input_tokens": USAGE["input"], "input_tokens_details": {"cached_tokens": USAGE["cached"]},
            "output_tokens": USAGE["output"], "output_tokens_details": {"reasoning_tokens": USAGE["reasoning"]},
            "total_tokens": USAGE["input"] + USAGE["output"]}


def responses_body(turn: Turn, model: str = "gpt-peer", status: str | None = None,
                   error: dict[str, Any] | None = None) -> dict[str, Any]:
    status = status or ("incomplete" if turn.end == "cut" else "completed")
    body: dict[str, Any] = {"id": "resp_peer", "object": "response", "created_at": 1700000000, "status": status,
                            "model": model, "output": responses_output(turn), "usage": _responses_usage(),
                            "error": error, "incomplete_details": None, "parallel_tool_calls": True,
                            "tool_choice": "auto", "tools": []}
    if status == "incomplete":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    return body


def responses_events(turn: Turn, model: str = "gpt-peer", status: str | None = None,
                     error: dict[str, Any] | None = None, cut: bool = False,
                     error_event: dict[str, Any] | None = None) -> list[tuple[str | None, dict[str, Any]]]:
    final = responses_body(turn, model, status, error)
    head = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": head}),
        ("response.in_progress", {"type": "response.in_progress", "response": head})]
    for index, item in enumerate(final["output"]):
        kind = item["type"]
        start = {**item, "status": "in_progress"}
        if kind == "message":
            start["content"] = []
        elif kind == "function_call":
            start["arguments"] = ""
        elif kind == "reasoning":
            start["summary"] = []
        events.append(("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": index, "item": start}))
        if kind == "reasoning":
            events.append(("response.reasoning_summary_part.added", {
                "type": "response.reasoning_summary_part.added", "item_id": item["id"], "output_index": index,
                "summary_index": 0, "part": {"type": "summary_text", "text": ""}}))
            for f in _fragments(item["summary"][0]["text"]):
                events.append(("response.reasoning_summary_text.delta", {
                    "type": "response.reasoning_summary_text.delta", "item_id": item["id"], "output_index": index,
                    "summary_index": 0, "delta": f}))
        elif kind == "message":
            part = item["content"][0]
            empty = {**part, "refusal": ""} if part["type"] == "refusal" else {**part, "text": ""}
            events.append(("response.content_part.added", {
                "type": "response.content_part.added", "item_id": item["id"], "output_index": index,
                "content_index": 0, "part": empty}))
            name = "response.refusal.delta" if part["type"] == "refusal" else "response.output_text.delta"
            for f in _fragments(part.get("text") or part.get("refusal") or ""):
                events.append((name, {"type": name, "item_id": item["id"], "output_index": index,
                                      "content_index": 0, "delta": f}))
            events.append(("response.content_part.done", {
                "type": "response.content_part.done", "item_id": item["id"], "output_index": index,
                "content_index": 0, "part": part}))
        else:
            for f in _fragments(item["arguments"]):
                events.append(("response.function_call_arguments.delta", {
                    "type": "response.function_call_arguments.delta", "item_id": item["id"],
                    "output_index": index, "delta": f}))
            events.append(("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": index,
                "arguments": item["arguments"]}))
        events.append(("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": index, "item": item}))
    if error_event is not None:
        events.append(("error", {"type": "error", **error_event}))
        return events
    if cut:
        return events
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete",
                "failed": "response.failed"}[final["status"]]
    events.append((terminal, {"type": terminal, "response": final}))
    for n, (_, data) in enumerate(events):
        data["sequence_number"] = n
    return events


# ------------------------------------------------------------------ Gemini


def google_parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if turn.thinking is not None:
        parts.append({"text": turn.thinking, "thought": True})
    if turn.text is not None:
        parts.append({"text": turn.text})
    for n, (i, name, args) in enumerate(turn.calls):
        part: dict[str, Any] = {"functionCall": {"id": i, "name": name, "args": args}}
        if n == 0:
            part["thoughtSignature"] = THOUGHT_SIGNATURE
        parts.append(part)
    return parts


def _google_finish(turn: Turn) -> str:
    return {"cut": "MAX_TOKENS", "refused": "SAFETY"}.get(turn.end, "STOP")


def _google_usage() -> dict[str, Any]:
    return {"promptTokenCount": USAGE["input"], "cachedContentTokenCount": USAGE["cached"],
            "candidatesTokenCount": USAGE["output"] - USAGE["reasoning"], "thoughtsTokenCount": USAGE["reasoning"],
            "totalTokenCount": USAGE["input"] + USAGE["output"]}


def google_body(turn: Turn, model: str = "gemini-peer", finish: str | None = None) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": google_parts(turn)},
                            "finishReason": finish or _google_finish(turn), "index": 0}],
            "usageMetadata": _google_usage(), "modelVersion": model, "responseId": "peer-response"}


def google_chunks(turn: Turn, model: str = "gemini-peer", finish: str | None = None,
                  cut: bool = False) -> list[dict[str, Any]]:
    pieces: list[dict[str, Any]] = []
    for part in google_parts(turn):
        if "text" in part and "thoughtSignature" not in part:
            pieces += [{**part, "text": f} for f in _fragments(part["text"], 2)]
        else:
            pieces.append(part)
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}], "modelVersion": model,
         "responseId": "peer-response"} for p in pieces]
    if not cut:
        chunks[-1]["candidates"][0]["finishReason"] = finish or _google_finish(turn)
        chunks[-1]["usageMetadata"] = _google_usage()
    return chunks


# ------------------------------------------------------------------ rendering


def native_reply(protocol: str, turn: Turn, *, stream: bool, **kw: Any) -> NativeReply:
    """``turn`` as ``protocol`` answers it, plain or streamed (``kw``: the
    protocol renderer's options, e.g. ``cut=True`` for a stream broken off,
    ``finish="MAX_TOKENS"`` for Gemini)."""
    if protocol == "anthropic":
        if stream:
            return NativeReply(200, sse(anthropic_events(turn, **kw)), "text/event-stream")
        return NativeReply(200, json.dumps(anthropic_body(turn)).encode())
    if protocol == "openai_responses":
        if stream:
            return NativeReply(200, sse(responses_events(turn, **kw)), "text/event-stream")
        return NativeReply(200, json.dumps(responses_body(turn, **kw)).encode())
    if stream:
        return NativeReply(200, sse([(None, c) for c in google_chunks(turn, **kw)]), "text/event-stream")
    return NativeReply(200, json.dumps(google_body(turn, **kw)).encode())


def native_error(protocol: str, status: int, kind: str, message: str,
                 headers: dict[str, str] | None = None) -> NativeReply:
    """An HTTP error as ``protocol`` sends it."""
    if protocol == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    elif protocol == "openai_responses":
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    else:
        body = {"error": {"code": status, "message": message, "status": kind}}
    return NativeReply(status, json.dumps(body).encode(), headers=headers)




# ------------------------------------------------------------------ servers


class LoopbackServer:
    """A loopback HTTP server on ``127.0.0.1`` (a free port) in a daemon thread.

    Subclasses implement :meth:`answer` for POST requests; anything it does
    not answer (``None``) gets a 404. Every request's path, headers and JSON
    body are kept (``paths``, ``headers``, ``requests``); credential headers
    (``Authorization``, ``x-api-key``, ``x-goog-api-key``, ...) are recorded
    redacted unless ``redact=False``. ``connections`` counts the TCP
    connections accepted (a client that reuses its connection opens one).
    Start it with ``with ...:`` or :meth:`start`; ``url`` is its address.
    """

    def __init__(self, *, redact: bool = True) -> None:
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.connections = 0
        self.redact = redact
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.handler_class = _handler_for(self)

    def answer(self, path: str, request: dict[str, Any]) -> NativeReply | None:
        """The reply to a POST of ``request`` (its JSON body) to ``path``; ``None``: a 404.
        This base answers nothing."""
        return None

    def _record_headers(self, headers: Any) -> dict[str, str]:
        out = {k.lower(): v for k, v in headers.items()}
        if self.redact:
            out = {k: (redact_header(v)[0] if is_secret_name(k) else v) for k, v in out.items()}
        return out

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise NotStartedError(f"{type(self).__name__} not started: call start() or use it in a with block")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """The ``base_url`` a client of this server takes."""
        return self.url

    def start(self) -> Any:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler_class)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True,
                                        name=f"lionops-{type(self).__name__}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release held answers, stop serving and close the socket."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"{type(self).__name__}({where}, requests={len(self.requests)}, connections={self.connections})"


def _handler_for(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # the head and a small body in one write (no wait on a delayed acknowledgement)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server.connections += 1

        def _send(self, reply: NativeReply) -> None:
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            if reply.hold_s:
                self.send_header("connection", "close")
                self.close_connection = True
            else:
                self.send_header("content-length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
            if reply.hold_s:
                server._stopping.wait(reply.hold_s)

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            with server._lock:
                server.paths.append(self.path)
                server.headers.append(server._record_headers(self.headers))
            try:
                request = json.loads(raw or b"{}")
            except ValueError:
                request = {"_raw": raw.decode("utf-8", "replace")}
            reply = server.answer(self.path, request)
            if reply is None:
                self._not_found()
                return
            with server._lock:
                server.requests.append(request)
            self._send(reply)

        def _not_found(self) -> None:
            body = json.dumps({"error": {"type": "not_found_error", "message": self.path}})
            self._send(NativeReply(404, body.encode()))

        def do_GET(self) -> None:  # noqa: N802
            with server._lock:
                server.paths.append(self.path)
            self._not_found()

        do_HEAD = do_GET

    return Handler


#: One item of a server's script.
Script = Turn | NativeReply | Callable[[dict[str, Any]], "Turn | NativeReply"]


class NativeServer(LoopbackServer):
    """Answers each POST with the next item of ``script``; the last one
    repeats. An item is a :class:`NativeReply`, a :class:`Turn` (rendered in
    :attr:`protocol`'s shape, streamed when the request asks for a stream)
    or a function of the request body returning either.

    Args:
        *script: the answers, in order.
        redact: record credential headers redacted (default).
    """

    #: The protocol a :class:`Turn` is rendered in (``None``: only ready replies).
    protocol: ClassVar[Protocol | None] = None
    #: What ``base_url`` adds to the server's address.
    api_root: ClassVar[str] = ""

    def __init__(self, *script: Script, redact: bool = True) -> None:
        super().__init__(redact=redact)
        self.script: list[Script] = []
        self.push(*script)

    def push(self, *script: Script) -> None:
        """Append answers to the script.

        Raises:
            ConfigurationError: an item that is not a :class:`Turn`, a
                :class:`NativeReply` or a function (a list given whole, say:
                the items are separate arguments), or a :class:`Turn` for a
                server without a protocol.
        """
        given: tuple[object, ...] = script  # typed as Script, but a caller may pass anything
        for item in given:
            if not isinstance(item, (Turn, NativeReply)) and not callable(item):
                name = type(self).__name__
                raise ConfigurationError(
                    f"{name} script item {type(item).__name__} is not a Turn, a NativeReply or a function of "
                    f"the request body; give the items as separate arguments: {name}(Turn(...), Turn(...)), "
                    f"or {name}(*items) for a list")
        if self.protocol is None and any(isinstance(item, Turn) for item in script):
            raise ConfigurationError(f"{type(self).__name__} has no protocol to send a Turn in: script a "
                                     "NativeReply, or use ResponsesServer, AnthropicServer or GeminiServer")
        with self._lock:
            self.script.extend(script)

    @property
    def base_url(self) -> str:
        """The ``base_url`` ``iModel(provider=...)`` takes for this server."""
        return self.url + self.api_root

    def answer(self, path: str, request: dict[str, Any]) -> NativeReply | None:
        with self._lock:
            if not self.script:
                step: Script = native_error(self.protocol or "openai_responses", 500, "server_error",
                                            f"{type(self).__name__}: the script is empty")
            else:
                step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if callable(step) and not isinstance(step, (Turn, NativeReply)):
            step = step(request)
        if isinstance(step, Turn):
            if self.protocol is None:  # a scripted function's Turn: a server error, as the client sees it
                return native_error("openai_responses", 500, "server_error",
                                    f"{type(self).__name__} has no protocol to send a Turn in")
            stream = bool(request.get("stream")) or "streamGenerateContent" in path
            return native_reply(self.protocol, step, stream=stream)
        return step

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return (f"{type(self).__name__}({where}, requests={len(self.requests)}, scripted={len(self.script)}, "
                f"connections={self.connections})")


class ResponsesServer(NativeServer):
    """The OpenAI Responses API: ``POST {base_url}/responses`` (``base_url`` ends in ``/v1``).

    For ``iModel(provider="openai_responses", base_url=server.base_url, ...)``."""

    protocol: ClassVar[Protocol | None] = "openai_responses"
    api_root: ClassVar[str] = "/v1"


class AnthropicServer(NativeServer):
    """The Anthropic Messages API: ``POST {base_url}/v1/messages``.

    For ``iModel(provider="anthropic", base_url=server.base_url, ...)``."""

    protocol: ClassVar[Protocol | None] = "anthropic"


class GeminiServer(NativeServer):
    """The Gemini API: ``POST {base_url}/v1beta/models/{model}:generateContent``
    and ``:streamGenerateContent?alt=sse``.

    For ``iModel(provider="google", base_url=server.base_url, ...)``."""

    protocol: ClassVar[Protocol | None] = "google"
