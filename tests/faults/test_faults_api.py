"""Faults, cancellation and bad input through the API adapter.

Every test drives ``operate()`` through the real ``communicate`` Middle and a
real ``iModel(provider="openai")`` against a real HTTP peer on loopback: the
scripted :class:`~lionops.testing.OpenAIServer`, or :class:`RawPeer` for
faults an HTTP server library will not produce (a reset mid-body). The
invariants: the adapter is awaited once per ``operate()`` (the HTTP retries
are the endpoint's own); a failure propagates as itself and the trace ends
``adapter → raised`` via ``failed``; no tool runs and the gate is never
asked unless a valid request reached ``act()``; no task or connection
outlives the call; no secret appears in any error, log or trace.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
import sniffio
from hypothesis import given, settings
from hypothesis import strategies as st

from lionops import Branch, communicate, iModel
from lionops.clock import Clock, RecordingClock, use_clock
from lionops.errors import (
    EndpointConnectionError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
)
from lionops.testing import OpenAIServer, Reply, completion, error_body, tool_call
from tests.faults.test_faults_observers import FAULTY, raising
from tests.helpers import Governed, ToolBox, cancel_once, polled
from tests.openai_server import make_model, server  # noqa: F401 - fixtures
from tests.strategies import Recorder, allowed, expected_output, hostile_value, make_tools

pytestmark = pytest.mark.anyio

SECRET_KEY = "sk-test-SENTINEL-KEY-4711"
SECRET_HEADER = "hdr-SENTINEL-0815"
SECRET_QUERY = "qry-SENTINEL-1234"
SECRETS = (SECRET_KEY, SECRET_HEADER, SECRET_QUERY)


# ---------------------------------------------------------------- real parts used by the tests


def governed(chat_model: Any) -> Governed:
    return Governed(chat_model, communicate)


class GatedClock(Clock):
    """A clock whose sleeps block until cancelled; ``waiting`` is set on the first."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.waiting = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(float(seconds))
        self.waiting.set()
        await anyio.sleep_forever()


class RawPeer:
    """A TCP peer on 127.0.0.1 that reads each HTTP request and hands the
    connection to ``answer(conn)`` (for faults no HTTP server library makes)."""

    def __init__(self, answer: Callable[[socket.socket], None]) -> None:
        self.answer = answer
        self.requests = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.02)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                self.answer(conn)

    def __enter__(self) -> RawPeer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()


def reset_mid_body(conn: socket.socket) -> None:
    """Headers promising 4000 bytes, part of a completion, then a TCP reset."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
                 b'{"id": "chatcmpl-1", "choices": [{"message": {"content": null, "tool_calls": [')
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def established_to(port: int) -> int:
    """Open (ESTABLISHED) IPv4 client connections to 127.0.0.1:``port``, from /proc/net/tcp."""
    count = 0
    with open("/proc/net/tcp", encoding="ascii") as fh:
        for line in fh.readlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == port and fields[3] == "01":
                count += 1
    return count


def live_tasks() -> int:
    """Tasks alive in the running event loop (asyncio or trio)."""
    if sniffio.current_async_library() == "trio":
        import trio

        def count(task: Any) -> int:
            return 1 + sum(count(child) for nursery in task.child_nurseries for child in nursery.child_tasks)

        return count(trio.lowlevel.current_root_task())
    import asyncio

    return len(asyncio.all_tasks())


def secret_model(base_url: str, **kw: Any) -> iModel:
    """A model whose key, an extra header and a URL query parameter are secrets."""
    options: dict[str, Any] = {"timeout": 5, **kw}
    return iModel(provider="openai", model="gpt-4o-mini", base_url=f"{base_url}?api-key={SECRET_QUERY}",
                  api_key=SECRET_KEY, headers={"X-Api-Token": SECRET_HEADER}, **options)


def everything_shown(err: BaseException, branch: Branch, model: Any, caplog: Any) -> str:
    return "\n".join([
        str(err), repr(err), "".join(traceback.format_exception(err)), caplog.text,
        repr(model), repr(model.endpoint), repr(branch),
        json.dumps(branch.messages.to_list()), json.dumps(branch.logs.to_list()),
        branch.traces[-1].to_json(),
    ])


def check_cancelled(g: Governed, scope: anyio.CancelScope) -> None:
    assert scope.cancelled_caught  # propagated to the scope, not swallowed
    g.check_failed(anyio.get_cancelled_exc_class())
    assert [m.role for m in g.branch.messages] == ["user"]


WEATHER = completion(None, tool_calls=[tool_call("get_weather", {"city": "Paris"})])


# ---------------------------------------------------------------- cancellation


async def test_cancelled_while_the_request_is_in_flight(server):
    """The server has the request and never answers; cancel: no tool, no gate,
    the connection is closed, no task outlives the call."""
    server.push(Reply(hang=True), WEATHER)
    m = make_model(server)
    g = governed(m)
    tasks_before = live_tasks()
    port = int(server.url.rsplit(":", 1)[1])
    seen_open: list[int] = []

    def in_flight() -> bool:
        if server.chat_requests:
            seen_open.append(established_to(port))
            return True
        return False

    scope = await cancel_once(polled(in_flight), g.operate)
    check_cancelled(g, scope)
    assert seen_open == [1] and established_to(port) == 0  # the cancelled connection is closed
    assert live_tasks() == tasks_before
    assert len(server.chat_requests) == 1
    assert await g.branch.operate(instruction="again", actions=True) is not None  # still usable
    assert g.box.calls == {"get_weather": 1}
    await m.aclose()


@pytest.mark.parametrize("first", ["503", "429-retry-after"])
async def test_cancelled_while_a_retry_waits(server, first):
    """Cancelled while the endpoint waits to retry (the clock's sleep blocks):
    one HTTP request, no retry sent, no tool, trace adapter → raised."""
    if first == "503":
        server.push(Reply(error_body("busy", "server_error"), status=503))
    else:
        server.push(Reply(error_body("slow down", "requests"), status=429, headers={"Retry-After": "7"}))
    server.push(WEATHER)
    m = make_model(server)
    g = governed(m)
    tasks_before = live_tasks()
    with use_clock(GatedClock()) as clk:
        scope = await cancel_once(clk.waiting.wait, g.operate)
    check_cancelled(g, scope)
    assert clk.sleeps == ([0.5] if first == "503" else [7.0])
    assert len(server.chat_requests) == 1
    assert live_tasks() == tasks_before
    await m.aclose()


@pytest.mark.parametrize("wrapper", ["move_on_after", "fail_after"])
async def test_timeouts_around_an_api_operate_are_not_swallowed(server, wrapper):
    """A caller deadline shorter than the endpoint timeout: ``move_on_after``
    reports cancelled_caught, ``fail_after`` raises anyio's TimeoutError, not
    the endpoint's; the trace ends adapter → raised."""
    server.push(Reply(hang=True), WEATHER)
    m = make_model(server, timeout=30)
    g = governed(m)
    if wrapper == "move_on_after":
        with anyio.move_on_after(0.2) as scope:
            await g.operate()
        assert scope.cancelled_caught
    else:
        with pytest.raises(TimeoutError) as info:
            with anyio.fail_after(0.2):
                await g.operate()
        assert not isinstance(info.value, EndpointTimeoutError)
    g.check_failed()
    await g.branch.operate(instruction="again", actions=True)
    assert g.box.calls == {"get_weather": 1} and [t.exit for t in g.branch.traces] == ["failed", "enriched"]
    await m.aclose()


# ---------------------------------------------------------------- transport faults and bad bodies

TRUNCATED = '{"id": "chatcmpl-9", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "'
ECHOED = error_body(f"upstream said: key {SECRET_KEY}, token {SECRET_HEADER}, query {SECRET_QUERY}", "server_error")

#: kind -> (replies, model options, error type, HTTP requests made, clock sleeps)
TRANSPORT = {
    "refused": (None, {"max_retries": 2}, EndpointConnectionError, 0, [0.5, 1.0]),
    "reset-mid-body": ("reset", {"max_retries": 2}, EndpointResponseError, 1, []),
    "never-answers": ([Reply(hang=True)], {"timeout": 0.3, "max_retries": 0}, EndpointTimeoutError, 1, []),
    "500-until-out": ([Reply(ECHOED, status=500)] * 3, {"max_retries": 2}, EndpointStatusError, 3, [0.5, 1.0]),
    "429-until-out": ([Reply(ECHOED, status=429, headers={"Retry-After": "1"})] * 2, {"max_retries": 1},
                      EndpointRateLimitError, 2, [1.0]),
    "not-json": ([Reply(f"<html>502 Bad Gateway {SECRET_KEY}</html>")], {}, EndpointResponseError, 1, []),
    "truncated-json": ([Reply(TRUNCATED)], {}, EndpointResponseError, 1, []),
    "no-choices": ([Reply({"object": "chat.completion", "choices": None})], {}, EndpointResponseError, 1, []),
}


@pytest.mark.parametrize("kind", list(TRANSPORT))
async def test_transport_faults_are_one_logical_call_raised_as_themselves(kind, caplog):
    """Each transport fault: the adapter awaited once, the endpoint's own HTTP
    retries only, the typed error raised as itself (never wrapped), no tool,
    no gate, no assistant message, and no secret in anything shown."""
    replies, options, error, requests, sleeps = TRANSPORT[kind]
    caplog.set_level(logging.DEBUG)
    with contextlib.ExitStack() as stack:
        if replies == "reset":
            peer = stack.enter_context(RawPeer(reset_mid_body))
            base, made = peer.base_url, lambda: peer.requests
        else:
            srv = stack.enter_context(OpenAIServer(replies or ()))
            base = srv.base_url
            # a client that timed out has sent its request before the handler may read it
            def made(srv: OpenAIServer = srv) -> int:
                return len([r for r in srv.wait_for_requests(requests) if r.path.endswith("/chat/completions")])
            if replies is None:
                srv.stop()  # nothing listens there any more: connection refused
        m = secret_model(base, **options)
        g = governed(m)
        with use_clock(RecordingClock()) as clk, pytest.raises(error) as info:
            await g.operate()
        await m.aclose()
        assert made() == requests and clk.sleeps == sleeps
    assert type(info.value) is error
    g.check_failed()
    assert type(info.value).__name__ in g.branch.traces[-1].error
    shown = everything_shown(info.value, g.branch, m, caplog)
    assert not [s for s in SECRETS if s in shown]


#: tool_calls a server may send that are not a list of call objects; each
#: entry must become one request marked invalid, answered with an error payload.
ODD_CALLS = {
    "arguments-a-json-list": {"id": "c1", "type": "function",
                              "function": {"name": "get_weather", "arguments": ["Paris"]}},
    "arguments-a-json-number": {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": 42}},
    "arguments-true": {"id": "c3", "type": "function", "function": {"name": "get_weather", "arguments": True}},
    "function-a-string": {"id": "c4", "type": "function", "function": "get_weather"},
    "function-missing": {"id": "c5", "type": "function"},
    "name-not-a-string": {"id": "c6", "type": "function", "function": {"name": ["get_weather"], "arguments": "{}"}},
    "entry-a-string": "get_weather",
    "entry-null": None,
    "entry-a-list": ["get_weather", {"city": "Paris"}],
    "arguments-deep": {"id": "c7", "type": "function", "function": {"name": "get_weather", "arguments": "[" * 100_000}},
}


async def test_odd_tool_call_entries_are_each_answered_never_run(server):
    """Every odd entry is kept in place as a request marked invalid and
    answered with an error payload; the valid siblings around them run."""
    ok = tool_call("get_weather", {"city": "Oslo"})
    calls = [ok, *ODD_CALLS.values(), tool_call("search", {"q": "lion"})]
    server.push(completion(None, tool_calls=calls))
    m = make_model(server)
    g = governed(m)
    result, trace = await g.branch.operate_traced(instruction="q", actions=True, middle=g.middle)
    await m.aclose()
    assert trace.exit == "enriched"
    out = result.action_responses
    assert len(out) == len(calls)
    assert [r.is_error for r in out] == [False] + [True] * len(ODD_CALLS) + [False]
    assert all(r.output["type"] == "InvalidActionRequest" for r in out[1:-1])
    assert g.box.calls == {"get_weather": 1, "search": 1} and sorted(g.asked) == ["get_weather", "search"]
    summaries = g.branch.messages.by_role("assistant")[0].metadata["tool_calls"]
    assert len(summaries) == len(calls) and all("invalid" in s for s in summaries[1:-1])
    json.dumps(g.branch.messages.to_list())


@pytest.mark.parametrize("key,value", [
    ("tool_calls", {"id": "c1", "function": {"name": "get_weather"}}), ("tool_calls", "get_weather"),
    ("tool_calls", 7), ("message", "get_weather"), ("message", ["get_weather"]),
])
async def test_tool_calls_or_message_of_the_wrong_type_are_a_response_error(server, key, value):
    body = completion(None)
    if key == "message":
        body["choices"][0]["message"] = value
    else:
        body["choices"][0]["message"]["tool_calls"] = value
    server.push(body)
    m = make_model(server)
    g = governed(m)
    with pytest.raises(EndpointResponseError, match=key):
        await g.operate()
    await m.aclose()
    g.check_failed()


async def test_ten_thousand_tool_calls_one_response_each(server):
    """10k native tool calls (valid, unknown, non-object): one response each,
    in order; only the valid ones run."""
    calls = []
    for i in range(10_000):
        if i % 10 == 3:
            calls.append(tool_call("nope", {"q": str(i)}))
        elif i % 10 == 7:
            calls.append(tool_call("search", f'["{i}"]'))
        else:
            calls.append(tool_call("search", {"q": str(i)}))
    server.push(completion(None, tool_calls=calls))
    m = make_model(server, timeout=30)
    g = governed(m)
    g.branch.max_requests = 10_000  # above the default cap of requests per call
    result = await g.operate()
    await m.aclose()
    out = result.action_responses
    assert len(out) == 10_000
    assert [r.output if not r.is_error else None for r in out] == [
        None if i % 10 in (3, 7) else [str(i)] for i in range(10_000)]
    assert g.box.calls == {"search": 8000}


async def test_ten_megabytes_of_arguments_over_http(server):
    """10 MB of arguments in one tool call: invoked once with the whole value;
    10 MB that is not an object: an invalid request with a bounded error."""
    blob = "x" * 10_000_000
    server.push(completion(None, tool_calls=[tool_call("search", {"q": blob}),
                                             tool_call("search", json.dumps([blob]))]))
    m = make_model(server, timeout=30, max_response_bytes=64 * 1024 * 1024)  # above the 16 MiB default
    g = governed(m)
    result = await g.operate()
    await m.aclose()
    ok, bad = result.action_responses
    assert g.box.args == [("search", {"q": blob})] and ok.output == [blob]
    assert bad.is_error and len(bad.output["error"]) < 1000
    assert all(len(e.content.get("arguments", "")) <= 203 for e in g.branch.logs if isinstance(e.content, dict)
               and isinstance(e.content.get("arguments"), str))


# ---------------------------------------------------------------- hostile completions (hypothesis)

NAMES = st.sampled_from(["echo", "add", "ping", "nope", "", "echo "])
ARGS = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=8)}).map(json.dumps),
    st.fixed_dictionaries({"a": st.integers(-20, 20), "b": st.integers(-20, 20)}).map(json.dumps),
    hostile_value.filter(lambda v: not isinstance(v, (bytes, float))),
    hostile_value.filter(lambda v: not isinstance(v, (bytes, float))).map(json.dumps),
)
CALL = st.one_of(
    st.builds(lambda n, a: {"id": "c", "type": "function", "function": {"name": n, "arguments": a}}, NAMES, ARGS),
    st.dictionaries(st.sampled_from(["id", "type", "function", "index"]), hostile_value, max_size=3)
    .filter(lambda d: not any(isinstance(v, (bytes, float)) for v in d.values())),
    hostile_value.filter(lambda v: not isinstance(v, (bytes, float))),
)


def valid_call(call: Any) -> tuple[str, dict[str, Any]] | None:
    """``(function, arguments)`` when ``call`` is a well-formed call of a
    registered tool with arguments that fit its signature, else ``None``."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or fn.get("name") not in ("echo", "add", "ping"):
        return None
    args = fn.get("arguments")
    if args in ("", None):  # no arguments at all: an empty object
        args = {}
    try:  # JSON text, encoded twice at most
        for _ in range(2):
            args = json.loads(args) if isinstance(args, str) else args
    except (ValueError, RecursionError):
        return None
    if not isinstance(args, dict):
        return None
    fits = {"echo": lambda a: set(a) == {"text"} and type(a["text"]) is str,
            "add": lambda a: set(a) == {"a", "b"} and all(type(a[k]) is int for k in "ab"),
            "ping": lambda a: a == {}}[fn["name"]]
    return (fn["name"], args) if fits(args) else None


def stream_chunk(delta: Any) -> dict[str, Any]:
    return {"id": "s", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta}]}


CALL_DELTA = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}

#: Stream chunks of the wrong shape: each is an EndpointResponseError, never a
#: call assembled from the fragments that could be read.
BAD_CHUNKS = {
    "chunk-a-list": [stream_chunk({})["choices"]],
    "choices-a-number": [{"id": "s", "choices": 3}],
    "choice-a-string": [{"id": "s", "choices": ["delta"]}],
    "delta-a-string": [stream_chunk("get_weather")],
    "tool-calls-a-mapping": [stream_chunk({"tool_calls": CALL_DELTA})],
    "entry-a-string": [stream_chunk({"tool_calls": ["get_weather"]})],
    "id-a-list": [stream_chunk({"tool_calls": [{**CALL_DELTA, "id": ["c1"]}]})],
    "index-a-list": [stream_chunk({"tool_calls": [{**CALL_DELTA, "index": [0]}]})],
    "index-text": [stream_chunk({"tool_calls": [{**CALL_DELTA, "index": "0"}]})],
    "function-a-string": [stream_chunk({"tool_calls": [{**CALL_DELTA, "function": "get_weather"}]})],
    "arguments-a-list": [stream_chunk({"tool_calls": [CALL_DELTA]}),
                         stream_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ["Paris"]}}]})],
    "arguments-object-then-text": [
        stream_chunk({"tool_calls": [{**CALL_DELTA, "function": {"name": "get_weather", "arguments": {"city": "P"}}}]}),
        stream_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "aris\"}"}}]})],
}


@pytest.mark.parametrize("case", list(BAD_CHUNKS))
async def test_malformed_stream_chunks_are_a_response_error(server, case):
    server.push(Reply(stream=BAD_CHUNKS[case]))
    m = make_model(server, stream=True)
    g = governed(m)
    with pytest.raises(EndpointResponseError, match="malformed stream chunk"):
        await g.operate()
    await m.aclose()
    g.check_failed()


@pytest.fixture(scope="module")
def shared_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@settings(max_examples=max(1, settings.default.max_examples // 3))
@given(calls=st.lists(CALL, max_size=6), stream=st.booleans())
async def test_hostile_tool_calls_from_the_server(shared_server, calls, stream):
    """Whatever the server puts in ``tool_calls`` (plain, or streamed one call
    per chunk): the gate is asked about exactly the well-formed calls of a
    registered tool with fitting arguments, those it allows run, every entry
    gets one response in order, and nothing but EndpointResponseError
    escapes (then nothing ran)."""
    rec = Recorder()
    body = completion(None, tool_calls=None)
    body["choices"][0]["message"]["tool_calls"] = calls
    if stream:  # one chunk per call, each call its own index and id (merging split deltas is tested elsewhere)
        chunks = [stream_chunk({"tool_calls": [{**call, "index": i, "id": f"s{i}"}
                                               if isinstance(call, dict) else call]})
                  for i, call in enumerate(calls)]
        shared_server.push(Reply(stream=chunks))
    else:
        shared_server.push(body)
    m = make_model(shared_server, stream=stream)
    b = Branch(chat_model=m, tools=make_tools(rec))
    b.gate(rec.gate)
    try:
        out = await b.operate(instruction="q", actions=True)
    except EndpointResponseError:
        assert rec.invoked == [] and rec.asked == []
        return
    finally:
        await m.aclose()
    trace = b.traces[-1]
    valid = [v for v in map(valid_call, calls) if v is not None]
    canon = lambda calls: sorted(json.dumps(c, sort_keys=True) for c in calls)  # noqa: E731
    assert canon(rec.asked) == canon(valid)
    assert canon(rec.invoked) == canon(v for v in valid if allowed(*v))
    if not calls:
        assert trace.exit in ("no_requests", "no_responses")
        return
    assert trace.exit == "enriched" and len(out.action_responses) == len(calls)
    for call, resp in zip(calls, out.action_responses, strict=True):
        v = valid_call(call)
        if v is None:
            assert resp.is_error
        elif allowed(*v):
            assert resp.output == expected_output(*v)


# ---------------------------------------------------------------- observers during an API turn

RETRY_THEN_CALLS = (
    Reply(error_body("slow down", "requests"), status=429, headers={"Retry-After": "1"}),
    completion(None, tool_calls=[tool_call("get_weather", {"city": "Lima"}), tool_call("nope", {}),
                                 tool_call("search", "[1]"), tool_call("run_shell", {"cmd": "ls"})]),
)


async def api_turn(server: OpenAIServer, setup: Callable[[Branch], Any]) -> tuple[Any, Branch, ToolBox]:
    server.push(*RETRY_THEN_CALLS)
    m = make_model(server)
    box = ToolBox()
    b = Branch(chat_model=m, tools=box.tools())
    setup(b)
    with use_clock(RecordingClock()):
        out = await b.operate(instruction="q", actions=True)
    await m.aclose()
    return ([r.output for r in out.action_responses], b.traces[-1].exit,
            [m.role for m in b.messages]), b, box


#: (observer, exception, async?); log sinks are sync callables only.
OBSERVERS = [pytest.param(observer, *p.values, id=f"{observer}-{p.id}")
             for observer in ("hook", "writeback", "log_sink")
             for p in FAULTY if not (observer == "log_sink" and p.values[1])]


@pytest.mark.parametrize("observer,exc,is_async", OBSERVERS)
async def test_raising_observers_during_an_api_turn_change_nothing(server, observer, exc, is_async):
    """A raising hook, context-provider writeback or log sink during a turn
    with an HTTP retry, valid, unknown and non-object calls: logged, and the
    outcome, messages and tools run are those of a turn without it."""
    expected, _, box0 = await api_turn(server, lambda b: None)

    def setup(b: Branch) -> None:
        if observer == "hook":
            for point in ("tool_pre", "tool_post", "tool_error"):
                b.on(point, raising(exc, is_async))
        elif observer == "writeback":
            b.add_context_provider(type("Faulty", (), {"writeback": staticmethod(raising(exc, is_async))})())
        else:
            b.logs.subscribe(raising(exc, is_async))

    got, b, box = await api_turn(server, setup)
    assert got == expected and box.calls == box0.calls == {"get_weather": 1, "run_shell": 1}
    error_kind = {"hook": "hook_error", "writeback": "writeback_error", "log_sink": "sink_error"}[observer]
    assert b.logs.of_kind(error_kind)
    if observer == "log_sink":  # the http_retry entry reached the sink (and failed there) too
        assert len(b.logs.of_kind("sink_error")) == len([e for e in b.logs if e.kind != "sink_error"])
        assert b.logs.of_kind("http_retry")


@pytest.mark.parametrize("verdict", [RuntimeError("authorizer down"), None, "yes"])
async def test_faulty_authorizer_during_an_api_turn_denies(server, verdict):
    def check(inv: Any) -> Any:
        if isinstance(verdict, BaseException):
            raise verdict
        return verdict

    (outputs, exit_, _), b, box = await api_turn(server, lambda b: b.gate(check))
    assert box.total == 0 and exit_ == "enriched"
    assert [o.get("error") == "denied by governance gate" for o in outputs] == [True, False, False, True]
    assert len(b.logs.of_kind("gate_error")) == 2


# ---------------------------------------------------------------- shared branch, one iModel

CONCURRENT = 24


def kind_of(i: int) -> str:
    return {0: "hang", 1: "status_400", 2: "retry_then_ok"}.get(i % 6, "ok")


async def test_concurrent_api_operates_through_one_imodel_lose_nothing():
    """24 concurrent operate() calls on one Branch through one iModel (one
    HTTP client): some hang and are cancelled, some get a 400, some are
    retried; each trace is whole and carries its own call's facts, every
    message and log entry is there once, each call made its own request(s)."""
    seen_429: set[str] = set()
    lock = threading.Lock()

    def answer(request: Any) -> Reply:
        tag = request.body["messages"][-1]["content"]
        kind = kind_of(int(tag[1:]))
        if kind == "hang":
            return Reply(hang=True)
        if kind == "status_400":
            return Reply(error_body(f"bad {tag}"), status=400)
        with lock:
            first = kind == "retry_then_ok" and tag not in seen_429
            seen_429.add(tag)
        if first:
            return Reply(error_body("slow down", "requests"), status=429, headers={"Retry-After": "0"})
        return Reply(completion(None, model=f"m-{tag}", tool_calls=[tool_call("search", {"q": tag})]))

    with OpenAIServer(answer) as srv:
        m = make_model(srv)
        box = ToolBox()
        b = Branch(chat_model=m, tools=box.tools())
        sunk: list[Any] = []
        b.logs.subscribe(sunk.append)
        scopes: dict[int, anyio.CancelScope] = {}
        results: dict[int, Any] = {}
        hangs = [i for i in range(CONCURRENT) if kind_of(i) == "hang"]

        async def call(i: int) -> None:
            with anyio.CancelScope() as scope:
                scopes[i] = scope
                try:
                    results[i] = await b.operate(instruction=f"c{i}", actions=True)
                except EndpointStatusError as exc:
                    results[i] = exc

        def hung_requests() -> int:
            return sum(1 for r in srv.chat_requests if kind_of(int(r.body["messages"][-1]["content"][1:])) == "hang")

        with use_clock(RecordingClock()), anyio.fail_after(20):  # safety net only
            async with anyio.create_task_group() as tg:
                for i in range(CONCURRENT):
                    tg.start_soon(call, i)
                while len(results) < CONCURRENT - len(hangs) or hung_requests() < len(hangs):
                    await anyio.sleep(0.005)
                for i in hangs:
                    scopes[i].cancel()
        await m.aclose()

    assert len(b.traces) == CONCURRENT
    by_model = {t.meta.get("model"): t for t in b.traces if t.meta.get("model")}
    for i in range(CONCURRENT):
        kind = kind_of(i)
        if kind in ("ok", "retry_then_ok"):
            t = by_model[f"m-c{i}"]
            assert t.exit == "enriched" and t.meta["http_attempts"] == (2 if kind == "retry_then_ok" else 1)
            assert results[i].action_responses[0].output == [f"c{i}"]
        elif kind == "status_400":
            assert isinstance(results[i], EndpointStatusError) and f"bad c{i}" in str(results[i])
        else:
            assert scopes[i].cancelled_caught and i not in results
    failed = [t for t in b.traces if t.exit == "failed"]
    assert len(failed) == sum(kind_of(i) in ("hang", "status_400") for i in range(CONCURRENT))
    assert all(t.states[-2:] == ["adapter", "raised"] for t in failed)
    ok = sorted(i for i in range(CONCURRENT) if kind_of(i) in ("ok", "retry_then_ok"))
    assert sorted(a["q"] for _, a in box.args) == sorted(f"c{i}" for i in ok)
    users = [m.content for m in b.messages.by_role("user")]
    assert sorted(users) == sorted(f"c{i}" for i in range(CONCURRENT))
    assert len(b.messages.by_role("assistant")) == len(b.messages.by_role("action_response")) == len(ok)
    retried = sum(kind_of(i) == "retry_then_ok" for i in range(CONCURRENT))
    assert [e.kind for e in b.logs].count("http_retry") == retried
    assert sunk == list(b.logs)
