"""Request shapes and the request cap in the governed ``act()`` path: exactly
``max_requests`` requests all run, a provider ``call_id`` is carried only as
text, and a request whose function is not a string is still recorded under a
readable recipient. Real tool functions, the public API only.
"""

from __future__ import annotations

import pytest

from lionops import ActionParam, ActionRequestModel, Branch, act
from tests.helpers import ToolBox

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("suppress", [False, True])
async def test_exactly_max_requests_requests_all_run(suppress):
    box = ToolBox()
    branch = Branch(tools=box.tools(), max_requests=2)
    responses = await act(branch, [{"function": "search", "arguments": {"q": "a"}},
                                   {"function": "search", "arguments": {"q": "b"}}],
                          ActionParam(suppress_errors=suppress))
    assert sorted(q["q"] for _, q in box.args) == ["a", "b"]
    assert [r.output for r in responses] == [["a"], ["b"]]


async def test_a_request_past_the_cap_keeps_its_arguments_and_error_type():
    box = ToolBox()
    branch = Branch(tools=box.tools(), max_requests=1)
    responses = await act(branch, [{"function": "search", "arguments": {"q": "a"}},
                                   {"function": "search", "arguments": {"q": "b"}}],
                          ActionParam(suppress_errors=True))
    rec = responses[1].record
    assert (rec.raw_arguments, rec.error_type, rec.invoked) == ({"q": "b"}, "RequestLimitError", False)


async def test_a_call_id_is_carried_from_a_model_request_and_only_as_text():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    responses = await act(branch, [
        ActionRequestModel(function="search", arguments={"q": "a"}, call_id="m-1"),
        {"function": "search", "arguments": {"q": "b"}, "call_id": 5},
    ], ActionParam())
    assert [r.record.call_id for r in responses] == ["m-1", None]
    assert [m.metadata.get("call_id") for m in branch.messages] == ["m-1", "m-1", None, None]


async def test_a_request_with_a_non_string_function_is_recorded_to_a_readable_recipient():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    [response] = await act(branch, [{"function": 123, "arguments": {}}], ActionParam(suppress_errors=True))
    assert box.total == 0
    assert response.record.decision == "invalid"
    got = [(m.role, m.sender, m.recipient) for m in branch.messages]
    assert got == [("action_request", branch.id, "123"), ("action_response", "123", branch.id)]


async def test_a_call_id_is_carried_from_a_request_model_of_the_caller_s_own():
    from pydantic import BaseModel

    class OwnRequest(BaseModel):
        function: str
        arguments: dict
        call_id: str | None = None

    class Bare(BaseModel):  # no call_id field at all
        function: str
        arguments: dict

    box = ToolBox()
    branch = Branch(tools=box.tools())
    responses = await act(branch, [OwnRequest(function="search", arguments={"q": "a"}, call_id="own-1"),
                                   Bare(function="search", arguments={"q": "b"})], ActionParam())
    assert [r.record.call_id for r in responses] == ["own-1", None]
    assert [m.metadata.get("call_id") for m in branch.messages] == ["own-1", "own-1", None, None]
