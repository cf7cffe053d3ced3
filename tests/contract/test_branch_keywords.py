"""``Branch()`` refuses what it cannot use at construction, saying what was meant.

A misspelled keyword (``tool=``, ``systme=``) is a ``MisspelledKeywordError``
naming the keyword meant; an operate() option given to the branch is an
``ArgumentTypeError`` listing the keywords there are; an engine name that is
no engine is a ``ConfigurationError`` at construction, not at the first
``operate()``. Values are never shown: one may be a key.
"""
from __future__ import annotations

import pytest

from lionops import Branch
from lionops.errors import ArgumentTypeError, ConfigurationError, LionopsError, MisspelledKeywordError

SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize("keyword, meant", [
    ("tool", "tools"), ("systme", "system"), ("chat_modle", "chat_model"), ("limit", "limits"),
    ("max_trace", "max_traces"), ("gate_timeot", "gate_timeout"),
])
def test_a_near_miss_names_the_keyword_meant(keyword: str, meant: str) -> None:
    with pytest.raises(MisspelledKeywordError) as caught:
        Branch(**{keyword: SECRET})
    err = caught.value
    assert isinstance(err, TypeError) and isinstance(err, LionopsError)
    assert (err.keyword, err.suggestion) == (keyword, meant)
    assert f"did you mean {meant!r}" in str(err) and "Branch()" in str(err)
    assert SECRET not in str(err) and "request options" not in str(err)


@pytest.mark.parametrize("keyword", ["response_format", "handle_validation", "bogus"])
def test_a_keyword_far_from_any_lists_the_keywords_there_are(keyword: str) -> None:
    with pytest.raises(ArgumentTypeError) as caught:
        Branch(**{keyword: SECRET})
    text = str(caught.value)
    assert isinstance(caught.value, TypeError)
    assert keyword in text and "chat_model" in text and "limits" in text and SECRET not in text


@pytest.mark.parametrize("engine", ["compild", "transition", "fast", ""])
def test_an_engine_name_that_is_no_engine_is_refused_at_construction(engine: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Branch(engine=engine)
    assert repr(engine) in str(caught.value) and "compiled" in str(caught.value)


@pytest.mark.parametrize("engine", [None, "compiled", "transitions"])
def test_the_engines_there_are_are_taken(engine: str | None) -> None:
    assert Branch(engine=engine).engine == engine
