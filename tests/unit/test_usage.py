"""One usage record (lionops.usage.Usage): every provider's counts read one way.

Input includes cache reads and writes; output includes reasoning; a count the
provider did not report is None; the provider's own object is kept as ``raw``.
The shapes are the providers' documented (and, for the CLIs, recorded) ones.
"""

from __future__ import annotations

import pytest

from lionops.usage import Usage

#: (reader, the provider's usage object, the expected counts)
CASES = [
    pytest.param(Usage.from_chat_completions, {
        "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0},
    }, dict(input_tokens=1200, output_tokens=300, cache_read_tokens=1024, reasoning_tokens=256), id="chat-completions"),
    pytest.param(Usage.from_chat_completions, {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
                 dict(input_tokens=9, output_tokens=2), id="chat-completions-plain"),
    pytest.param(Usage.from_chat_completions, {
        "prompt_tokens": 50, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 30},
    }, dict(input_tokens=50, output_tokens=5, cache_read_tokens=10, cache_write_tokens=30),
        id="chat-completions-cache-write"),
    pytest.param(Usage.from_responses, {
        "input_tokens": 328, "input_tokens_details": {"cached_tokens": 128},
        "output_tokens": 52, "output_tokens_details": {"reasoning_tokens": 40}, "total_tokens": 380,
    }, dict(input_tokens=328, output_tokens=52, cache_read_tokens=128, reasoning_tokens=40), id="responses"),
    pytest.param(Usage.from_responses, {  # Codex's turn.completed (recorded from codex 0.169.0)
        "input_tokens": 2400, "cached_input_tokens": 2000, "cache_write_input_tokens": 0,
        "output_tokens": 80, "reasoning_output_tokens": 16,
    }, dict(input_tokens=2400, output_tokens=80, cache_read_tokens=2000, cache_write_tokens=0, reasoning_tokens=16),
        id="codex"),
    pytest.param(Usage.from_anthropic, {
        "input_tokens": 20, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 300, "output_tokens": 70,
    }, dict(input_tokens=1320, output_tokens=70, cache_read_tokens=1000, cache_write_tokens=300), id="anthropic"),
    pytest.param(Usage.from_anthropic, {  # Claude Code's result event (recorded from 2.1.328)
        "input_tokens": 642, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 34,
        "output_tokens_details": {"thinking_tokens": 0}, "service_tier": "standard",
    }, dict(input_tokens=642, output_tokens=34, cache_read_tokens=0, cache_write_tokens=0, reasoning_tokens=0),
        id="claude-code"),
    pytest.param(Usage.from_gemini, {
        "promptTokenCount": 900, "cachedContentTokenCount": 600, "candidatesTokenCount": 40,
        "thoughtsTokenCount": 100, "totalTokenCount": 1040,
    }, dict(input_tokens=900, output_tokens=140, cache_read_tokens=600, reasoning_tokens=100), id="gemini"),
    pytest.param(Usage.from_gemini, {  # the Gemini CLI's stats (recorded from 0.61.0)
        "total_tokens": 1860, "input_tokens": 1800, "output_tokens": 60, "cached": 1200, "input": 600,
        "duration_ms": 547, "tool_calls": 1,
    }, dict(input_tokens=1800, output_tokens=60, cache_read_tokens=1200), id="gemini-cli"),
    pytest.param(Usage.from_gemini, {"input": 600, "cached": 1200, "output_tokens": 60},
                 dict(input_tokens=1800, output_tokens=60, cache_read_tokens=1200), id="gemini-cli-uncached-only"),
]


@pytest.mark.parametrize(("read", "raw", "expected"), CASES)
def test_every_provider_is_read_one_way(read, raw, expected) -> None:
    usage = read(raw)
    counts = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    assert {k: getattr(usage, k) for k in counts} == {k: expected.get(k) for k in counts}
    assert usage.raw == raw and usage.total_tokens == expected["input_tokens"] + expected["output_tokens"]
    assert usage.as_dict()["total_tokens"] == usage.total_tokens
    with pytest.raises(TypeError):
        usage.raw["input_tokens"] = 0  # type: ignore[index]


@pytest.mark.parametrize("read", [Usage.from_chat_completions, Usage.from_responses, Usage.from_anthropic,
                                  Usage.from_gemini])
@pytest.mark.parametrize("raw", [None, "12", [], {}, {"prompt_tokens": -1, "input_tokens": True, "output_tokens": 1.5}])
def test_no_counts_or_bad_counts_are_none_never_zero(read, raw) -> None:
    usage = read(raw)
    assert not usage and usage.total_tokens is None and usage.as_dict() == {}
    assert repr(usage) == "Usage()"


def test_the_record_is_public_frozen_and_shown_briefly() -> None:
    import dataclasses

    import lionops

    usage = lionops.Usage.from_chat_completions({"prompt_tokens": 3, "completion_tokens": 4})
    assert repr(usage) == "Usage(input_tokens=3, output_tokens=4)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.input_tokens = 1  # type: ignore[misc]


def test_anthropic_cache_counts_without_input_tokens_are_no_input_total() -> None:
    from lionops.endpoints.anthropic.response import usage_of

    raw = {"cache_read_input_tokens": 1000, "cache_creation_input_tokens": 300, "output_tokens": 70}
    usage = Usage.from_anthropic(raw)
    assert usage.input_tokens is None and usage.cache_read_tokens == 1000 and usage.cache_write_tokens == 300
    assert "prompt_tokens" not in usage_of(raw)  # the endpoint's dict record says the same
