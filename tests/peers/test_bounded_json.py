"""Depth is bounded everywhere foreign JSON is read (lionops._json): an error
body, an answer body, a stream event (data and error events), tool-call
arguments (native and in the answer's body), a CLI agent's event line, a
cassette, a trace. Nested past ``MAX_JSON_DEPTH`` (256) levels, or past the
interpreter's recursion limit, each gives a typed lionops error (or an
invalid request, never run), never a ``RecursionError``; brackets inside
strings do not count, and JSON within the bound is read as before.
Loopback OpenAI-compatible server and the fake CLI agent (a real subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lionops import Branch
from lionops._json import MAX_JSON_DEPTH, loads
from lionops.errors import (
    EndpointProviderError,
    EndpointResponseError,
    EndpointStatusError,
    JSONLimitError,
    LionopsError,
)
from lionops.replay import Cassette, CassetteError
from lionops.testing import Reply, completion, tool_call
from lionops.trace import Trace
from tests.cli_support import fake_model
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "user", "content": "x"}]
#: past our bound but within the recursion limit; past the recursion limit; far past it
DEPTHS = [MAX_JSON_DEPTH + 1, 1_200, 100_000]


def deep(depth: int, kind: str = "[") -> str:
    """JSON nested ``depth`` levels: lists, or objects (``{"k": {"k": ... 1}}``)."""
    return '{"k": ' * depth + "1" + "}" * depth if kind == "{" else "[" * depth + "]" * depth


def test_the_shared_loader_bounds_depth_and_size_and_counts_no_string():
    for depth in DEPTHS:
        for kind in "[{":
            with pytest.raises(JSONLimitError) as info:
                loads(deep(depth, kind))
            assert info.value.limit == "depth" and info.value.maximum == MAX_JSON_DEPTH
            assert isinstance(info.value, ValueError) and isinstance(info.value, LionopsError)
    assert loads(deep(MAX_JSON_DEPTH)) is not None  # at the bound: read
    assert loads(json.dumps({"q": "[" * 10_000 + '"{' * 500})) == {"q": "[" * 10_000 + '"{' * 500}
    with pytest.raises(JSONLimitError) as info:
        loads('"' + "x" * 100 + '"', max_chars=50)
    assert info.value.limit == "size"


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("status", [500, 400, 429])
async def test_a_deep_error_body_is_a_status_error(server, depth, status):  # noqa: F811
    server.push(Reply(body='{"error": {"message": ' + deep(depth) + "}}", status=status,
                      content_type="application/json"))
    m = make_model(server, max_retries=0)
    try:
        with pytest.raises(EndpointStatusError) as info:
            await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()
    assert info.value.status == status


@pytest.mark.parametrize("depth", DEPTHS)
async def test_a_deep_answer_body_is_a_response_error(server, depth):  # noqa: F811
    server.push(Reply(body='{"choices": ' + deep(depth) + "}", content_type="application/json"))
    m = make_model(server)
    try:
        with pytest.raises(EndpointResponseError, match="nested too deep"):
            await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("event", ["data", "error"])
async def test_a_deep_stream_event_is_a_typed_error(server, depth, event):  # noqa: F811
    lines = ([f"data: {deep(depth)}\n\n"] if event == "data"
             else ["event: error\n", f"data: {{\"error\": {deep(depth)}}}\n\n"])
    server.push(Reply(stream=lines))
    m = make_model(server, stream=True, max_retries=0)
    try:
        with pytest.raises((EndpointResponseError, EndpointProviderError)):
            await m.endpoint.chat(MESSAGES)
    finally:
        await m.aclose()


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("where", ["native", "body"])
async def test_deep_tool_call_arguments_are_an_invalid_request_never_run(server, depth, where):  # noqa: F811
    arguments = '{"city": ' + deep(depth) + "}"
    if where == "native":
        answer = completion('{"answer": 1}', tool_calls=[tool_call("get_weather", arguments),
                                                         tool_call("search", {"q": "[" * 300})])
    else:
        answer = completion('{"answer": 1, "action_requests": [{"function": "get_weather", "arguments": '
                            + json.dumps(arguments) + '}, {"function": "search", "arguments": {"q": "'
                            + "[" * 300 + '"}}]}')
    server.push(answer)
    box = ToolBox()
    m = make_model(server)
    branch = Branch(chat_model=m, tools=box.tools())
    try:
        await branch.operate(instruction="go", response_format=Answer, actions=True)
    finally:
        await m.aclose()
    decisions = {a.function: a.decision for a in branch.traces[-1].actions}
    assert box.calls["get_weather"] == 0
    if where == "native":  # one invalid request; the sibling within bounds runs
        assert decisions == {"get_weather": "invalid", "search": "allowed"} and dict(box.calls) == {"search": 1}
    else:  # the answer's body does not validate: a mismatch, nothing runs
        assert decisions == {} and branch.traces[-1].exit != "failed"


@pytest.mark.parametrize("depth", DEPTHS)
async def test_a_deep_cli_event_is_no_raw_recursion_error(tmp_path: Path, depth):
    session = tmp_path / "deep.jsonl"
    source = Path(__file__).parent.parent / "fixtures" / "cli" / "two_tool_uses.jsonl"
    lines = source.read_text().splitlines()
    session.write_text("\n".join([lines[0], '{"type": "assistant", "message": ' + deep(depth, "{") + "}",
                                  *lines[1:]]) + "\n")
    branch = Branch(chat_model=fake_model(str(session)), tools=ToolBox().tools())
    try:
        await branch.operate(instruction="go", response_format=Answer, actions=True)
    except LionopsError:
        pass  # a typed refusal is as good as reading past the line


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_cassette_or_trace_is_a_typed_error(depth):
    with pytest.raises(CassetteError, match="nested too deep"):
        Cassette.loads('{"format": "lionops-cassette", "version": 1, "operations": ' + deep(depth) + "}")
    with pytest.raises(ValueError, match="nested too deep"):
        Trace.from_json('{"format": 1, "meta": ' + deep(depth, "{") + "}")
