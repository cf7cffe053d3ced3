"""Actions off (the default) and a model answer that requests tools: the exit
stays ``no_action_param`` and no tool runs, but the trace counts the requests
(``meta["unrun_action_requests"]``) and a warning says how to run them."""

from __future__ import annotations

import dataclasses
import json
import warnings
from typing import Any

import pytest
from pydantic import BaseModel

from lionops import Branch
from lionops.testing import OpenAIServer, completion, tool_call
from tests.helpers import ScriptedMiddle
from tests.openai_server import make_model

pytestmark = pytest.mark.anyio

HOW = "pass actions=True to operate\\(\\) to run requested tools"


class Answer(BaseModel):
    text: str


def _branch(ran: list[str], **kw: Any) -> Branch:
    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "ok"
    return Branch(tools=[refund], **kw)


@pytest.mark.parametrize("fmt", [None, Answer], ids=["text", "model"])
async def test_native_tool_calls_with_actions_off_are_counted_and_warned_about(fmt, anyio_backend):
    ran: list[str] = []
    calls = [tool_call("refund", {"order_id": "7"}), tool_call("refund", {"order_id": "8"})]
    with OpenAIServer([completion(json.dumps({"text": "done"}), tool_calls=calls)]) as server:
        model = make_model(server)
        branch = _branch(ran, chat_model=model)
        try:
            with pytest.warns(UserWarning, match=r"requested 2 tool call\(s\) but actions are off.*" + HOW):
                result = await branch.operate(instruction="Refund 7 and 8", response_format=fmt)
        finally:
            await model.aclose()
    trace = branch.traces[-1]
    assert trace.exit == "no_action_param" and ran == []
    assert trace.meta["unrun_action_requests"] == 2
    assert trace.to_dict()["meta"]["unrun_action_requests"] == 2
    assert (result.text == "done") if fmt else (result == json.dumps({"text": "done"}))


async def test_action_requests_in_a_middles_result_are_counted_and_warned_about(anyio_backend):
    ran: list[str] = []
    answer = {"text": "done", "action_requests": [{"function": "refund", "arguments": {"order_id": "7"}}]}
    branch = _branch(ran)
    with pytest.warns(UserWarning, match=r"requested 1 tool call\(s\)"):
        result = await branch.operate(instruction="Refund 7", middle=ScriptedMiddle(answer))
    assert result == answer and ran == []
    assert branch.traces[-1].exit == "no_action_param" and branch.traces[-1].meta["unrun_action_requests"] == 1


async def test_an_answer_without_requests_is_not_noted(anyio_backend):
    branch = _branch([])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await branch.operate(instruction="Hi", middle=ScriptedMiddle({"text": "hello"}))
    assert branch.traces[-1].exit == "no_action_param" and "unrun_action_requests" not in branch.traces[-1].meta


async def test_with_actions_on_the_same_requests_run_and_nothing_is_noted(anyio_backend):
    ran: list[str] = []
    branch = _branch(ran)
    answer = {"text": "done", "action_requests": [{"function": "refund", "arguments": {"order_id": "7"}}]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await branch.operate(instruction="Refund 7", middle=ScriptedMiddle(answer), actions=True)
    assert ran == ["7"] and "unrun_action_requests" not in branch.traces[-1].meta


async def test_a_result_of_its_own_type_is_not_read_for_requests(anyio_backend):
    from collections.abc import Iterator, Mapping

    class Watched(Mapping[str, Any]):
        def __init__(self, data: dict[str, Any]) -> None:
            self._data, self.reads = data, 0

        def __getitem__(self, key: str) -> Any:
            self.reads += 1
            return self._data[key]

        def get(self, key: str, default: Any = None) -> Any:
            self.reads += 1
            return self._data.get(key, default)

        def __iter__(self) -> Iterator[str]:
            return iter(self._data)

        def __len__(self) -> int:
            return len(self._data)

    result = Watched({"action_requests": [{"function": "refund", "arguments": {"order_id": "7"}}]})
    branch = _branch([])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = await branch.operate(instruction="Refund 7", middle=ScriptedMiddle(result))
    assert out is result and result.reads == 0


@dataclasses.dataclass
class AnswerRecord:
    text: str


@pytest.mark.parametrize("fmt", [None, Answer, AnswerRecord, {"type": "object"}],
                         ids=["text", "model", "dataclass", "json-schema"])
async def test_action_requests_in_the_answers_json_are_counted_where_the_result_drops_them(fmt, anyio_backend):
    # Actions off: the format has no action_requests field (or there is no
    # format), so validation drops the requests the model wrote into its JSON.
    ran: list[str] = []
    requests = [{"function": "refund", "arguments": {"order_id": str(i)}} for i in (7, 8, 9)]
    with OpenAIServer([completion(json.dumps({"text": "done", "action_requests": requests}))]) as server:
        model = make_model(server)
        branch = _branch(ran, chat_model=model)
        try:
            with pytest.warns(UserWarning, match=r"requested 3 tool call\(s\) but actions are off.*" + HOW):
                await branch.operate(instruction="Refund 7, 8 and 9", response_format=fmt)
        finally:
            await model.aclose()
    trace = branch.traces[-1]
    assert trace.exit == "no_action_param" and ran == []
    assert trace.to_dict()["meta"]["unrun_action_requests"] == 3


@pytest.mark.parametrize("answer", [{"text": "no action_requests here"}, {"text": "x", "action_requests": []},
                                    {"text": "x", "action_requests": "refund"}], ids=["in-text", "empty", "not-a-list"])
async def test_an_answer_that_only_mentions_requests_is_not_noted(answer, anyio_backend):
    with OpenAIServer([completion(json.dumps(answer))]) as server:
        model = make_model(server)
        branch = _branch([], chat_model=model)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", UserWarning)
                await branch.operate(instruction="Hi", response_format=Answer)
        finally:
            await model.aclose()
    assert "unrun_action_requests" not in branch.traces[-1].meta


async def test_the_warning_names_the_callers_line_not_lionops(anyio_backend):
    """The warning is attributed to the line that awaited ``operate()``, a line
    the caller can change, never to a file inside lionops."""
    answer = {"text": "done", "action_requests": [{"function": "refund", "arguments": {"order_id": "7"}}]}
    branch = _branch([])
    with pytest.warns(UserWarning, match=r"requested 1 tool call\(s\)") as caught:
        await branch.operate(instruction="Refund 7", middle=ScriptedMiddle(answer))
    assert [w.filename for w in caught] == [__file__]
