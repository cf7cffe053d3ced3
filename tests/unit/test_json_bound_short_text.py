"""The bounded JSON loader skips its bracket count for a text no longer than
the depth bound (it cannot nest deeper); one character more is counted."""

from __future__ import annotations

import pytest

from lionops._json import check_text, loads
from lionops.errors import JSONLimitError


@pytest.mark.parametrize("kind", [str, bytes])
def test_a_text_as_long_as_the_bound_nests_at_most_that_deep(kind):
    at_bound = "[" * 4 + "]" * 4  # 8 characters, depth 4
    text = at_bound.encode() if kind is bytes else at_bound
    assert check_text(text, max_depth=8) is text
    assert loads(text, max_depth=4) == [[[[]]]]
    with pytest.raises(JSONLimitError):
        loads(text, max_depth=3)  # 8 characters, bound 3: counted and refused


@pytest.mark.parametrize("kind", [str, bytes])
def test_one_character_past_the_bound_is_counted(kind):
    deep = "[" * 5 + "]" * 5  # 10 characters, depth 5
    text = deep.encode() if kind is bytes else deep
    with pytest.raises(JSONLimitError):
        check_text(text, max_depth=4)
    with pytest.raises(JSONLimitError, match="characters"):
        check_text(text, max_depth=64, max_chars=9)  # the size bound still applies first
