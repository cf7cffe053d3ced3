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


async def test_cli_stop_reason_is_that_of_the_latest_message(tmp_path):
    """An earlier message cut at max_tokens, followed by a complete final
    answer, is not a cut-off: the stop reason is the latest message's."""
    import json as _json

    from lionops import Branch
    from tests.cli_support import FIXTURES, fake_model
    from tests.helpers import Answer

    lines = [_json.loads(x) for x in (FIXTURES / "fenced_json.jsonl").read_text().splitlines() if x.strip()]
    early = _json.loads(_json.dumps(lines[1]))
    early["message"]["content"][0]["text"] = "thinking..."
    early["message"]["stop_reason"] = "max_tokens"
    final = lines[1]  # stop_reason null, the complete fenced answer
    result = dict(lines[2])
    result.pop("stop_reason", None)
    session = tmp_path / "late_answer.jsonl"
    session.write_text("".join(_json.dumps(x) + "\n" for x in (lines[0], early, final, result)))
    out = await Branch(chat_model=fake_model(str(session))).operate(instruction="x", response_format=Answer)
    assert isinstance(out, Answer) and out.answer == 42
