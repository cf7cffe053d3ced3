"""Records copied and assigned: ``with_updates`` on parameter dataclasses keeps
every field (``init=False`` ones, subclasses without slots), and a trace's
``transitions`` can be assigned."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lionops.params import ChatParam


def test_with_updates_keeps_init_false_fields() -> None:
    @dataclass(slots=True, frozen=True)
    class Tagged(ChatParam):
        tag: int = field(default=7, init=False)

    copy = Tagged().with_updates(sender="a")
    assert copy.sender == "a"
    assert copy.tag == 7


def test_with_updates_on_a_subclass_without_slots() -> None:
    @dataclass(frozen=True)
    class Extended(ChatParam):
        extra: int = 0

    copy = Extended(extra=3).with_updates(sender="a")
    assert (copy.sender, copy.extra) == ("a", 3)
    assert Extended(extra=3).with_updates(extra=5).extra == 5
    with pytest.raises(TypeError):
        Extended().with_updates(bogus=1)


def test_trace_transitions_can_be_assigned() -> None:
    from lionops import Trace, TransitionRecord

    trace = Trace()
    trace._rows.append(("failed", "prepare", "raised", {"phase_raised": True}, 1, 1, "E: x"))
    kept = [TransitionRecord("failed", "prepare", "raised", {"phase_raised": True})]
    trace.transitions = kept
    assert trace.transitions == kept and trace.states == ["prepare", "raised"]
