"""Bad input gets a clear, early, typed error that says how to fix it: a
misspelled name suggests the closest registered ones; a gate check that cannot
be called as lionops calls it is refused when it is registered; a gate that
answers something other than a bool is denied and says what to return; a gate
that raises has its message (bounded, scrubbed) in the denial reason."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from lionops import Branch, HookPoint, ToolInvocation
from lionops.errors import (
    ArgumentTypeError,
    ConfigurationError,
    GateSignatureError,
    LionopsError,
    UnknownStateError,
    UnknownToolError,
)

pytestmark = pytest.mark.anyio


def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def lookup(order_id: str) -> str:
    """Look an order up."""
    return order_id


def reset(order_id: str) -> str:
    """Reset an order."""
    return order_id


def _branch(**kw: Any) -> Branch:
    return Branch(tools=[refund, lookup, reset], **kw)


# --------------------------------------------------------------------------- misspelled names


@pytest.mark.parametrize("selector", [["refnd"], "refnd", ("refund", "refnd"), {"refnd"}])
def test_a_misspelled_tool_in_a_selector_suggests_the_registered_name(selector):
    branch = _branch()
    with pytest.raises(UnknownToolError) as ei:
        branch.acts.select(selector)
    err = ei.value
    assert isinstance(err, ValueError) and isinstance(err, LookupError) and isinstance(err, LionopsError)
    assert err.suggestions == ["refund"] and "did you mean 'refund'?" in str(err)


async def test_a_misspelled_tool_in_operate_is_refused_before_any_request(anyio_backend):
    branch = _branch()
    with pytest.raises(UnknownToolError, match=r"^tool 'lokup' is not registered \(did you mean 'lookup'\?\)$"):
        await branch.operate(instruction="refund order 7", tools=["lokup"], actions=True)
    assert len(branch.messages) == 0


async def test_a_model_asking_for_a_misspelled_tool_is_told_the_closest_names(anyio_backend):
    branch = _branch()
    [out] = await branch.act({"function": "refund_order", "arguments": {"order_id": "7"}})
    assert out is not None and out.output["type"] == "UnknownToolError"
    assert "did you mean 'refund'?" in out.output["error"]


def test_a_name_with_nothing_close_lists_the_names_without_a_guess():
    with pytest.raises(UnknownToolError, match=r"^tool 'zzzzzz' is not registered$") as ei:
        _branch().acts.select(["zzzzzz"])
    assert ei.value.suggestions == []


@pytest.mark.parametrize(("call", "hint"), [
    (lambda b: b.on("tool_pr", lambda p: None), "'tool_pre'"),
    (lambda b: b.messages.add("asistant", "hi"), "'assistant'"),
    (lambda b: b.operate_traced(instruction="x", engine="compild"), "'compiled'"),
])
async def test_other_misspelled_names_suggest_the_closest(call, hint, anyio_backend):
    branch = _branch()
    with pytest.raises(ConfigurationError, match="did you mean " + hint):
        out = call(branch)
        if hasattr(out, "__await__"):
            await out


def test_a_misspelled_state_and_a_misspelled_seam_suggest_the_closest():
    from lionops.pipeline.machine import get_engine
    from lionops.runtime import use_runtime

    definition = get_engine("compiled").definition
    with pytest.raises(UnknownStateError, match="did you mean 'prepare'") as ei:
        definition.state("prepar")
    assert isinstance(ei.value, KeyError)
    with pytest.raises(ArgumentTypeError, match="did you mean 'clock'"):
        use_runtime(clok=None)


def test_a_duplicate_tool_and_a_non_callable_tool_are_typed():
    branch = _branch()
    with pytest.raises(ConfigurationError, match="already registered"):
        branch.register_tools(refund)
    with pytest.raises(ArgumentTypeError, match="Tool needs a callable"):
        branch.register_tools([42])


# --------------------------------------------------------------------------- gates


def _no_argument() -> bool:
    return True


def _two_arguments(invocation: ToolInvocation, extra: str) -> bool:
    return True


def _keyword_only(*, invocation: ToolInvocation) -> bool:
    return True


class _Policy:
    def __call__(self) -> bool:
        return True


@pytest.mark.parametrize("check", [_no_argument, _two_arguments, _keyword_only, _Policy(), lambda: True])
def test_a_gate_with_the_wrong_signature_is_refused_when_registered(check):
    branch = _branch()
    with pytest.raises(GateSignatureError, match=r"cannot be called with one argument.*check\(invocation\) -> bool"):
        branch.gate(check)
    with pytest.raises(GateSignatureError):
        branch.gate(check, blocking=True)
    assert isinstance(GateSignatureError("x"), TypeError)
    assert not branch.needs_authorization()


@pytest.mark.parametrize("check", [
    lambda invocation: True,
    lambda invocation, extra=None: True,
    lambda *args: True,
    print,  # a built-in whose signature cannot be read is taken as it is
])
def test_a_gate_callable_with_one_argument_is_accepted(check):
    assert _branch().gate(check) is check


def test_a_hook_and_a_writeback_with_the_wrong_signature_are_refused():
    branch = _branch()
    with pytest.raises(GateSignatureError, match=r"handler\(payload\)"):
        branch.on(HookPoint.TOOL_PRE, lambda: None)

    class Provider:
        def writeback(self) -> None:
            return None

    with pytest.raises(GateSignatureError, match=r"writeback\(response\)"):
        branch.add_context_provider(Provider())


@pytest.mark.parametrize("answer", [None, "yes", 1])
async def test_a_gate_answering_a_non_bool_denies_and_warns_once_what_to_return(answer, anyio_backend, caplog):
    branch = _branch()

    def forgetful_gate(invocation: ToolInvocation) -> Any:
        return answer

    forgetful_gate.__qualname__ = f"forgetful_gate_{type(answer).__name__}_{anyio_backend}"
    branch.gate(forgetful_gate)
    with pytest.warns(UserWarning, match="must return True to allow the call or False to deny it") as caught:
        first = await branch.act({"function": "refund", "arguments": {"order_id": "1"}})
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line, not lionops'
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second answer does not warn again
        second = await branch.act({"function": "refund", "arguments": {"order_id": "2"}})
    for [out] in (first, second):
        assert out is not None and out.record.decision == "denied"
        assert out.record.reason == f"gate {forgetful_gate.__qualname__} returned {type(answer).__name__}, not bool"
    assert any("must return True" in r.getMessage() for r in caplog.records)
    assert (answer is None) == ("missing 'return'" in str(caught[0].message))


async def test_a_raising_gate_puts_its_message_in_the_reason_scrubbed_and_bounded(anyio_backend, monkeypatch):
    monkeypatch.setenv("PAYMENTS_API_KEY", "pk-live-0123456789abcdef")
    branch = _branch()

    def audit(invocation: ToolInvocation) -> bool:
        raise PermissionError("order 7 is locked by pk-live-0123456789abcdef; "
                              "Authorization: Bearer abcdefghijklmnop " + "x" * 500)

    branch.gate(audit)
    [out] = await branch.act({"function": "refund", "arguments": {"order_id": "7"}})
    assert out is not None and out.record.decision == "denied"
    reason = out.record.reason
    assert reason.startswith("gate test_a_raising_gate_puts_its_message_in_the_reason_scrubbed_and_bounded."
                             "<locals>.audit raised PermissionError: order 7 is locked by [redacted]; ")
    assert "pk-live" not in reason and "abcdefghijklmnop" not in reason and reason.endswith("...")
    assert len(reason) < 400
    logged = [e for e in branch.logs if e.kind == "gate_error"]
    assert logged and "pk-live" not in str(logged[-1].content) and "abcdefghijklmnop" not in str(logged[-1].content)


def test_a_durable_branch_refuses_a_misspelled_approval_name_and_a_wrong_gate_signature():
    pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")
    from lionops import iModel
    from lionops.temporal import DurableBranch, HumanApproval

    model = iModel(provider="ollama", model="llama3.2")
    # A misspelled name would never be held for approval: refused with the closest tool.
    with pytest.raises(UnknownToolError, match=r"tool 'refnd' is not registered \(did you mean 'refund'\?\)"):
        DurableBranch("shop", chat_model=model, tools=[refund, lookup],
                      gate=HumanApproval(timeout=60, functions={"refnd"}))
    with pytest.raises(GateSignatureError, match=r"check\(invocation\) -> bool"):
        DurableBranch("shop", chat_model=model, tools=[refund], gate=_no_argument)
    ok = DurableBranch("shop", chat_model=model, tools=[refund], gate=[HumanApproval(timeout=60, functions={"refund"})])
    assert ok.gates
