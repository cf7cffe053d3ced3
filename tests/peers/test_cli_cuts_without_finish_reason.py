"""A CLI that reports no finish reason (Gemini CLI): every answer that stops
inside a JSON value is a cut, wherever the value starts, and nothing in a cut
ever runs; a whole answer is never taken for a cut. Through real subprocesses
(tests/fake_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lionops import Branch
from lionops.errors import TruncatedOutputError
from lionops.middles.cli import ends_inside_json
from lionops.models import RawOutput
from tests.cli_support import WITH_ACTIONS, fake_model
from tests.helpers import Answer, ToolBox

pytestmark = pytest.mark.anyio

CALL = '{"answer": 7, "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}}]'


def gemini_session(path: Path, *deltas: str) -> Path:
    events = [{"type": "init", "session_id": "g1", "model": "gemini-2.5-pro"},
              {"type": "message", "role": "user", "content": "echo"}]
    events += [{"type": "message", "role": "assistant", "content": d, "delta": True} for d in deltas]
    events.append({"type": "result", "status": "success", "stats": {"input": 10, "output_tokens": 5}})
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


CUTS = {
    # a brace in the prose before the cut value
    "prose_brace": ("I read {city} from the request.\n", CALL + ', "reason": "it is sun'),
    # a reasoning block holding a whole JSON value, then the cut answer
    "after_reasoning": ('<think>the plan is {"answer": 7}</think>\n', CALL + ', "note": "x'),
    # a whole JSON value, then the cut answer
    "second_value": ('{"draft": true}\n', CALL + ', "note": "x'),
    # a raw newline inside the string the cut falls in
    "raw_newline": (CALL + ', "note": "line one\n', "line two"),
    # the cut falls inside a \\u escape
    "unicode_escape": (CALL + ', "note": "caf', "\\u00e"),
    # the cut falls inside an exponent
    "exponent": ('{"answer": 1e', "-"),
    # broken earlier (a bad escape, a leading zero), then cut: the value never closes
    "bad_escape": (CALL + r', "path": "C:\qth", "note": "x',),
    "leading_zero": ('{"answer": 7, "n": 01, "note": "cut',),
}


@pytest.mark.parametrize("deltas", list(CUTS.values()), ids=list(CUTS))
async def test_a_cut_anywhere_in_the_answer_never_runs_a_tool(tmp_path, deltas):
    session = gemini_session(tmp_path / "g.jsonl", *deltas)
    box = ToolBox()
    branch = Branch(chat_model=fake_model(str(session), provider="gemini", model="m"), tools=box.tools())
    with pytest.raises(TruncatedOutputError, match="reports no finish reason"):
        await branch.operate(instruction="go", response_format=Answer, actions=True, handle_validation="raise")
    (answer,) = [m for m in branch.messages if m.role == "assistant"]
    assert isinstance(answer.content, RawOutput) and answer.content.reason == "length"
    assert "".join(deltas).endswith(str(answer.content)) and "<think>" not in str(answer.content)
    assert box.total == 0


WHOLE = {
    # a JSON string holding one fence marker
    "fence_in_a_string": CALL[:-1] + '], "note": "wrap code in ``` fences"}',
    # prose with a closed fence and a brace after the answer
    "prose_after": "```json\n" + CALL + "}\n```\nThat is {all}.",
}


@pytest.mark.parametrize("text", list(WHOLE.values()), ids=list(WHOLE))
async def test_a_whole_answer_is_not_taken_for_a_cut(tmp_path, text):
    session = gemini_session(tmp_path / "g.jsonl", text)
    box = ToolBox()
    branch = Branch(chat_model=fake_model(str(session), provider="gemini", model="m"), tools=box.tools())
    out, trace = await branch.operate_traced(instruction="go", response_format=Answer, actions=True,
                                             handle_validation="raise")
    assert out.answer == 7 and box.calls == {"get_weather": 1} and trace.states == WITH_ACTIONS


def test_a_text_of_many_braces_is_read_in_bounded_work():
    # Each brace of the prose costs one decode at most, up to a bound; past it: a cut.
    assert ends_inside_json("{x} " * 100 + '{"answer": 1}') is False
    assert ends_inside_json("{x} " * 1000 + '{"answer": 1}') is True
    assert ends_inside_json("[" * 100_000) is False  # too deep to follow: never a RecursionError
