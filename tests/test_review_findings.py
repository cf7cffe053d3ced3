"""Breaks found by reviewing the hot-path performance changes, each kept as a
regression test."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lionops.params import ChatParam

pytestmark = pytest.mark.anyio


def test_with_updates_keeps_init_false_fields() -> None:
    @dataclass(slots=True, frozen=True)
    class Tagged(ChatParam):
        tag: int = field(default=7, init=False)

    copy = Tagged().with_updates(sender="a")
    assert copy.sender == "a"
    assert copy.tag == 7
