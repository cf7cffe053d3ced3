"""Each protocol's stream, folded, is the answer its plain body gives.

For any turn (text, thinking, parallel tool calls with any JSON arguments,
each streamed in fragments as the providers document), folding the events
with the protocol's folder and normalizing gives the same text, tool calls,
reasoning, finish reason and usage as normalizing the plain body. Pure: the
folders and normalizers, no IO.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lionops.endpoints._native import NativeAnswers
from lionops.endpoints.anthropic.response import normalize as anthropic_normalize
from lionops.endpoints.anthropic.stream import MessagesFolder
from lionops.endpoints.google.response import normalize as google_normalize
from lionops.endpoints.google.stream import GenerateFolder
from lionops.endpoints.openai.response import Answers
from lionops.endpoints.openai_responses.response import normalize as responses_normalize
from lionops.endpoints.openai_responses.stream import ResponsesFolder
from lionops.errors import EndpointResponseError
from tests.native_recordings import (
    Turn,
    anthropic_body,
    anthropic_events,
    google_body,
    google_chunks,
    responses_body,
    responses_events,
)

NORMALIZE = {"anthropic": anthropic_normalize, "openai_responses": responses_normalize, "google": google_normalize}
FOLDER = {"anthropic": MessagesFolder, "openai_responses": ResponsesFolder, "google": GenerateFolder}


def answers(protocol: str) -> NativeAnswers:
    return NativeAnswers(Answers(protocol, "http://peer", lambda s: s, lambda s: s[:300]), NORMALIZE[protocol])


def fold(protocol: str, turn: Turn, **kw):
    folder = FOLDER[protocol](answers(protocol), 200)
    if protocol == "anthropic":
        events = [(e, json.loads(json.dumps(d))) for e, d in anthropic_events(turn, **kw)]
    elif protocol == "openai_responses":
        events = [(e, json.loads(json.dumps(d))) for e, d in responses_events(turn, **kw)]
    else:
        events = [(None, c) for c in google_chunks(turn, **kw)]
    done = False
    for event, data in events:
        done = folder.feed(event, data) or done
    return folder.result(done)


def plain(protocol: str, turn: Turn):
    return {"anthropic": anthropic_body, "openai_responses": responses_body, "google": google_body}[protocol](turn)


def facts(protocol: str, data):
    out = NORMALIZE[protocol](data, answers(protocol))
    calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in out["tool_calls"]]
    return out["text"], calls, out["reasoning"], out["finish_reason"], out["usage"]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                        max_size=3), max_leaves=8)
turns = st.builds(
    Turn,
    text=st.none() | st.text(min_size=1, max_size=40),
    calls=st.lists(st.tuples(st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True), st.sampled_from(["a", "b"]),
                             st.dictionaries(st.text(max_size=6), json_values, max_size=3)),
                   max_size=3, unique_by=lambda c: c[0]),
    thinking=st.none() | st.text(min_size=1, max_size=30),
).filter(lambda t: t.text is not None or t.calls or t.thinking is not None)


@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "google"])
@settings(max_examples=max(1, settings.default.max_examples // 3))
@given(turn=turns)
def test_a_folded_stream_is_the_plain_answer(protocol, turn):
    assert facts(protocol, fold(protocol, turn)) == facts(protocol, plain(protocol, turn))


@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "google"])
def test_a_stream_without_its_end_is_broken_off(protocol):
    with pytest.raises(EndpointResponseError, match="broken off"):
        fold(protocol, Turn(text="partial"), cut=True)


event_shapes = st.dictionaries(
    st.sampled_from(["type", "index", "delta", "content_block", "message", "usage", "error", "output_index", "item",
                     "response", "candidates", "promptFeedback", "usageMetadata", "status", "output", "content",
                     "stop_reason", "finishReason", "parts", "arguments", "text"]),
    json_values | st.sampled_from(["message_start", "content_block_delta", "message_stop", "response.completed",
                                   "response.output_text.delta", "error", "text_delta", "input_json_delta",
                                   "completed", "failed", "incomplete", "STOP", "SAFETY"]),
    max_size=6)


@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "google"])
@settings(max_examples=max(1, settings.default.max_examples // 3))
@given(events=st.lists(st.tuples(st.none() | st.text(max_size=12), event_shapes | json_values), max_size=8))
def test_hostile_events_give_an_answer_or_a_typed_error(protocol, events):
    """Whatever a server streams, folding and normalizing it gives an answer or an ``EndpointError``."""
    from lionops.errors import EndpointError

    folder = FOLDER[protocol](answers(protocol), 200)
    try:
        done = False
        for event, data in events:
            done = folder.feed(event, data) or done
        NORMALIZE[protocol](folder.result(done), answers(protocol))
    except EndpointError:
        pass


@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "google"])
@pytest.mark.parametrize("kind", [[None], {"a": 1}, 7, True])
def test_an_event_type_that_is_not_text_is_an_unknown_event(protocol, kind):
    """A ``type`` that is a list, object, number or bool names no event: it is
    ignored as unknown events are, never a TypeError from a lookup."""
    from lionops.errors import EndpointError

    folder = FOLDER[protocol](answers(protocol), 200)
    try:
        folder.feed(None, {"type": kind, "delta": "x"})
        NORMALIZE[protocol](folder.result(False), answers(protocol))
    except EndpointError:
        pass
