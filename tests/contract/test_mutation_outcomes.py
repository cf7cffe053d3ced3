"""The mismatch outcome under ``handle_validation="raise"``: its error type,
expected name, received text, reason and detail, each written out literally.

A reason is only ever read from the raw text a model gave (a ``RawOutput``);
a model or dict result that happens to carry a ``reason`` attribute or key is
a plain mismatch. Scripted Middles (real objects), the public API only.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lionops import Branch, MismatchError
from tests.helpers import Answer, ScriptedMiddle

pytestmark = pytest.mark.anyio


class Cut(BaseModel):
    """A foreign model that looks like a truncated output."""

    reason: str = "length"
    detail: str = "cut"


async def test_a_foreign_model_with_a_reason_field_is_a_plain_mismatch():
    branch = Branch()
    with pytest.raises(MismatchError) as info:
        await branch.operate(instruction="q", response_format=Answer, handle_validation="raise",
                             middle=ScriptedMiddle(Cut()))
    err = info.value
    assert type(err) is MismatchError
    assert (err.expected, err.received, err.reason, err.detail) == (
        "Answer", "Cut(reason='length', detail='cut')", None, None)


async def test_a_plain_text_result_is_a_plain_mismatch():
    branch = Branch()
    with pytest.raises(MismatchError) as info:
        await branch.operate(instruction="q", response_format=Answer, handle_validation="raise",
                             middle=ScriptedMiddle("not an answer"))
    err = info.value
    assert type(err) is MismatchError
    assert (err.expected, err.received, err.reason, err.detail) == ("Answer", "'not an answer'", None, None)
