"""Behaviours every call keeps: a MessageLog subclass's own request and
response writers, a parameter copy's derived values, and one governed
decision per action request whatever the AlcallParams."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest
from pydantic import BaseModel

from lionops import Branch, act
from lionops._alcall import AlcallParams
from lionops.messages import Message, MessageLog
from lionops.params import ActionParam, ChatParam, ParseParam


class _Redacting(MessageLog):
    """A history that never keeps a request's arguments (its own writers, not ``add``)."""

    __slots__ = ()

    def add_action_request(self, function: Any, arguments: Any, **kw: Any) -> Message:
        return super().add_action_request(function, "<redacted>", **kw)

    def add_action_response(self, function: Any, arguments: Any, output: Any, **kw: Any) -> Message:
        return super().add_action_response(function, "<redacted>", output, **kw)


def login(user: str, password: str) -> str:
    """Log in."""
    return f"welcome {user}"


class _Answer(BaseModel):
    done: bool = True


async def _proposes_a_login(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                            clear_messages: bool = False, skip_validation: bool = False) -> Any:
    return parse_param.response_format.model_validate({"action_requests": [
        {"function": "login", "arguments": {"user": "ann", "password": "hunter2"}},
        {"function": "missing", "arguments": {"password": "hunter2"}},
    ]})


def test_an_exchange_goes_through_a_subclass_s_own_request_and_response_writers() -> None:
    log = _Redacting()
    request, response = log.add_action_exchange("login", {"password": "hunter2"}, "ok", sender="b",
                                                recipient="login", metadata={"index": 0})
    assert request.content == {"function": "login", "arguments": "<redacted>"}
    assert response.content == {"function": "login", "arguments": "<redacted>", "output": "ok"}
    assert list(log) == [request, response]
    assert (request.sender, request.recipient, response.sender, response.recipient) == ("b", "login", "login", "b")


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
async def test_act_writes_through_a_message_log_subclass_s_own_writers(anyio_backend: str, strategy: str) -> None:
    branch = Branch(tools=[login])
    branch.messages = _Redacting()
    await branch.operate(instruction="log in", response_format=_Answer, actions=True, middle=_proposes_a_login,
                         action_strategy=strategy)
    actions = [m for m in branch.messages if m.role in ("action_request", "action_response")]
    assert [m.metadata["decision"] for m in actions] == ["allowed", "allowed", "rejected", "rejected"]
    assert all(m.content["arguments"] == "<redacted>" for m in actions)
    assert "hunter2" not in repr(branch.messages.to_list())


@dataclasses.dataclass(frozen=True)
class _Prompted(ChatParam):
    """A ChatParam with a value derived from its fields, computed once."""

    @functools.cached_property
    def prompt(self) -> str:
        return f"{self.guidance} / {self.context}"


@dataclasses.dataclass(frozen=True)
class _Strict(ParseParam):
    @functools.cached_property
    def strict(self) -> bool:
        return self.handle_validation == "raise"


def test_with_updates_derives_a_subclass_s_cached_values_again() -> None:
    first = _Prompted(guidance="be brief", context="Oslo")
    assert first.prompt == "be brief / Oslo"
    changed = first.with_updates(context="Lisbon")
    assert changed.prompt == "be brief / Lisbon"
    assert first.prompt == "be brief / Oslo"
    assert changed == _Prompted(guidance="be brief", context="Lisbon")

    lax = _Strict(response_format=None)
    assert lax.strict is False
    assert lax.with_updates(handle_validation="raise").strict is True


@pytest.mark.anyio
@pytest.mark.parametrize("attempts", [1, 2])
@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
async def test_a_failing_request_is_decided_once_with_retries_configured(anyio_backend: str, strategy: str,
                                                                        attempts: int) -> None:
    """With ``suppress_errors=False`` and ``retry_attempts`` set, a request
    that fails (a tool raising, an unknown tool) is still one governed
    decision: the gate asked once, the tool called once, one log entry."""
    asked: list[str] = []
    called: list[int] = []

    def charge(amount: int) -> int:
        """Charge a card (a side effect that must not repeat)."""
        called.append(amount)
        raise RuntimeError("card declined")

    def note(text: str) -> str:
        """Keep a note."""
        return text

    branch = Branch(tools=[charge, note])
    branch.gate(lambda call: asked.append(call.function) is None)
    requests = [{"function": "note", "arguments": {"text": "a"}}, {"function": "charge", "arguments": {"amount": 5}}]
    param = ActionParam(action_call_params=AlcallParams(retry_attempts=attempts), strategy=strategy,
                        suppress_errors=False)
    with pytest.raises(RuntimeError, match="card declined"):
        await act(branch, requests, param)
    assert called == [5]
    assert sorted(asked) == ["charge", "note"]
    entries = [e for e in branch.logs if e.kind in ("action", "denied", "action_error")]
    assert sorted(e.content["index"] for e in entries) == [0, 1]
    assert [m.metadata["decision"] for m in branch.messages] == ["allowed", "allowed", "error", "error"]


async def _proposes_a_non_str_key(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                                  clear_messages: bool = False, skip_validation: bool = False) -> Any:
    # a Middle of the caller's own: its result is a plain dict, its arguments any mapping
    return {"action_requests": [{"function": "login", "arguments": {"user": "ann", "password": "x"}},
                                {"function": "login", "arguments": {1: "ann"}}]}


@pytest.mark.anyio
async def test_arguments_with_a_key_that_is_not_a_str_are_a_rejected_answer(anyio_backend: str) -> None:
    """A request whose arguments have a non-str key is rejected (its tool never
    runs) and answered like any other: ``act()`` and ``operate()`` return
    every response, the tool that ran included, instead of raising."""
    branch = Branch(tools=[login])
    [response] = await branch.act({"function": "login", "arguments": {1: "ann", "user": "bob"}})
    assert response.record.decision == "rejected" and response.record.raw_arguments == {1: "ann", "user": "bob"}
    assert response.function == "login" and response.arguments == {"1": "ann", "user": "bob"}
    assert response.output["type"] == "ToolArgumentsError"

    result = await branch.operate(instruction="log in", actions=True, middle=_proposes_a_non_str_key)
    assert branch.traces[-1].exit == "enriched"
    assert [r["output"] if isinstance(r, dict) else r.output for r in result["action_responses"]][0] == "welcome ann"
    assert [a.decision for a in branch.traces[-1].actions] == ["allowed", "rejected"]


class _Untellable(Exception):
    """An exception whose text cannot be made."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


async def _fails_untellably(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                            clear_messages: bool = False, skip_validation: bool = False) -> Any:
    raise _Untellable()


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["compiled", "transitions"])
async def test_a_phase_failure_without_text_is_recorded_and_raised_as_itself(anyio_backend: str, engine: str) -> None:
    """The failed row is recorded and the phase's own exception re-raised,
    also when its ``str()`` raises (as tool errors are already worded)."""
    branch = Branch(engine=engine)
    with pytest.raises(_Untellable):
        await branch.operate(instruction="x", middle=_fails_untellably)
    trace = branch.traces[-1]
    assert trace.states == ["prepare", "schema", "adapter", "raised"]
    assert trace.exit == "failed"
    assert trace.error is not None and trace.error.startswith("_Untellable: ")


def test_a_record_s_init_annotations_resolve_in_its_module() -> None:
    """A record's ``__init__`` resolves its annotations as the dataclass
    does (``typing.get_type_hints``, ``inspect.signature(..., eval_str=True)``):
    it runs in the globals of the class's module."""
    import inspect
    import typing

    from lionops import models, params
    from lionops.models import ActionRecord

    hints = typing.get_type_hints(ActionRecord.__init__)
    assert {k: v for k, v in hints.items() if k != "return"} == typing.get_type_hints(ActionRecord)
    signature = inspect.signature(ActionRecord, eval_str=True)
    assert signature.parameters["arguments"].annotation == dict[str, Any] | None
    assert ActionRecord.__init__.__globals__ is vars(models)
    for cls in (ChatParam, ParseParam, params.RunParam):
        assert cls.__init__.__globals__ is vars(params)
