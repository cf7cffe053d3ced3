"""Line decoding and event collection of CLI streams (no subprocess)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionops.endpoints.cli import (
    ClaudeStreamCollector,
    CLIRun,
    LineDecoder,
    _failure_message,
)
from tests.cli_support import FIXTURES

SESSIONS = sorted(p.name for p in FIXTURES.glob("*.jsonl"))


def decode(chunks: list[bytes]) -> tuple[list[dict], dict[str, int], tuple[int, str] | None]:
    decoder = LineDecoder()
    events: list[dict] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events, decoder.counts, decoder.corrupt


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


@given(name=st.sampled_from(SESSIONS), cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=40))
def test_any_split_of_the_stream_decodes_the_same(name, cuts):
    data = (FIXTURES / name).read_bytes()
    assert decode(split_at(data, cuts)) == decode([data])


def test_byte_at_a_time_with_multibyte_text():
    line = json.dumps({"type": "assistant", "text": "café ☕"}, ensure_ascii=False).encode() + b"\n"
    events, _, corrupt = decode([line[i:i + 1] for i in range(len(line))])
    assert events == [{"type": "assistant", "text": "café ☕"}] and corrupt is None


def test_blank_noise_crlf_and_a_last_line_without_newline():
    data = b'\n  \r\nnot json\r\n[1]\r\n{"type":"a"}\r\n"str"\n{"type":"b"}'
    events, counts, corrupt = decode([data])
    assert events == [{"type": "a"}, {"type": "b"}]
    assert counts == {"lines": 5, "events": 2, "noise": 3, "blank": 2, "recovered": 0}
    assert corrupt is None


def test_a_split_line_is_rebuilt_and_the_injected_event_kept():
    data = (FIXTURES / "split_line.jsonl").read_bytes()
    events, counts, corrupt = decode([data])
    assert [e["type"] for e in events] == ["system", "rate_limit_event", "assistant", "result"]
    assert events[2]["message"]["content"][0]["text"] == '{"answer": 16}'
    assert counts["recovered"] == 1 and corrupt is None


def test_split_without_injected_event_is_rebuilt():
    line = json.dumps({"type": "assistant", "text": "hello world"})
    events, counts, corrupt = decode([(line[:20] + "\n" + line[20:] + "\n").encode()])
    assert events == [json.loads(line)] and counts["recovered"] == 1 and corrupt is None


def test_an_unrecoverable_head_is_reported_and_following_events_survive():
    events, counts, corrupt = decode([(FIXTURES / "corrupt_line.jsonl").read_bytes()])
    assert [e["type"] for e in events] == ["system", "rate_limit_event", "result"]
    assert corrupt is not None and corrupt[0] == 3 and corrupt[1].startswith('{"type":"assistant"')


def test_truncated_last_line_is_corrupt():
    _, _, corrupt = decode([b'{"type":"system"}\n{"type":"assistant","message":{"cont'])
    assert corrupt == (2, '{"type":"assistant","message":{"cont')


def test_a_head_never_swallows_more_than_max_joins_lines():
    data = b'{"type":"assistant","x":"a\nb\nc\nd\ne\n{"type":"result"}\n'
    events, _, corrupt = decode([data])
    assert corrupt is not None and corrupt[0] == 1
    assert events == [{"type": "result"}]


def collect(events: list[dict]) -> CLIRun:
    run = CLIRun(provider="claude_code")
    collector = ClaudeStreamCollector(run)
    for event in events:
        collector.handle(event)
    collector.finish()
    return run


def assistant(*blocks: dict, parent: str | None = None) -> dict:
    return {"type": "assistant", "message": {"content": list(blocks)}, "parent_tool_use_id": parent}


def test_answer_is_the_text_after_the_last_cli_tool_call():
    run = collect([
        assistant({"type": "text", "text": "Let me check."}),
        assistant({"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}),
        assistant({"type": "text", "text": "sub-agent chatter"}, parent="t1"),
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}},
        assistant({"type": "text", "text": "{\"answer\": 1}"}),
        {"type": "result", "subtype": "success", "is_error": False, "result": "{\"answer\": 1}"},
    ])
    assert run.text == '{"answer": 1}'
    assert [(e.kind, e.function, e.arguments) for e in run.tool_events] == [
        ("request", "Read", {"file_path": "a"}), ("response", "Read", {"file_path": "a"}),
    ]


def test_result_text_is_used_only_when_no_assistant_text_was_seen():
    run = collect([{"type": "result", "subtype": "success", "is_error": False, "result": "late"}])
    assert run.text == "late" and run.finished
    assert collect([{"type": "result", "subtype": "success", "result": ""}]).text is None


@pytest.mark.parametrize("event", [
    {"type": "result", "subtype": "error_max_turns", "is_error": True, "errors": []},
    {"type": "result", "subtype": "error_during_execution", "is_error": True},
    {"type": "result", "subtype": "error_during_execution"},
])
def test_error_results_always_have_a_message(event):
    run = collect([event])
    assert run.is_error and run.error_message
    assert event["subtype"] in run.error_message


def test_failure_message_keeps_every_reported_error():
    msg = _failure_message("error_during_execution", "", [{"message": "a"}, "b"], 529)
    assert msg == "a; b; API error status 529"
