"""Checks made in prepare, before any request: misspelled operate() keywords
and generated fields that would replace a field of the caller's model."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from lionops import Branch, ConfigurationError, iModel
from lionops.errors import MisspelledKeywordError
from lionops.fields import Spec
from lionops.models import ActionRequestModel, Reason
from lionops.operate import PROVIDER_OPTIONS, misspelled_keyword
from lionops.operative import Step
from lionops.testing import completion
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, sent, server  # noqa: F401 - fixtures

# ---------------------------------------------------------------- misspelled keywords

MISSPELLED = {
    "handle_validaton": "handle_validation",
    "handel_validation": "handle_validation",
    "actoins": "actions",
    "action": "actions",
    "reasn": "reason",
    "respone_format": "response_format",
    "skip_validaton": "skip_validation",
    "invoke_action": "invoke_actions",
    "tool": "tools",
    "instrution": "instruction",
    "clear_message": "clear_messages",
    "engin": "engine",
}


@pytest.mark.anyio
@pytest.mark.parametrize("wrong", list(MISSPELLED))
async def test_a_misspelled_keyword_is_refused_before_any_request(server, wrong):
    server.push(completion('{"answer": 1}'))
    m = make_model(server)
    branch = Branch(chat_model=m)
    with pytest.raises(TypeError) as info:
        await branch.operate(instruction="q", response_format=Answer, **{wrong: "raise"})
    await m.aclose()
    err = info.value
    assert isinstance(err, MisspelledKeywordError)
    assert err.keyword == wrong and err.suggestion == MISSPELLED[wrong]
    assert f"did you mean {MISSPELLED[wrong]!r}" in str(err)
    assert server.chat_requests == []


#: Request options of OpenAI-compatible servers, with a value each.
REAL_OPTIONS: dict[str, Any] = {
    "temperature": 0.2, "top_p": 0.9, "max_tokens": 64, "max_completion_tokens": 64, "seed": 7,
    "stop": ["\n\n"], "n": 1, "user": "u-1", "presence_penalty": 0.1, "frequency_penalty": 0.1,
    "logit_bias": {"50256": -100}, "logprobs": True, "top_logprobs": 2, "tool_choice": "auto",
    "parallel_tool_calls": True, "metadata": {"k": "v"}, "store": False, "reasoning_effort": "low",
    "service_tier": "auto", "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1,
    "reasoning": {"effort": "low"}, "verbosity": "low", "prompt_cache_key": "k",
    "structured_outputs": {"choice": ["a", "b"]},
}


@pytest.mark.anyio
async def test_real_provider_options_are_sent_never_flagged(server):
    """The ADR-0022 D1 rule stands: remaining keywords are request options."""
    server.push(completion('{"answer": 1}'))
    m = make_model(server)
    result = await Branch(chat_model=m).operate(instruction="q", response_format=Answer, **REAL_OPTIONS)
    await m.aclose()
    assert result.answer == 1
    body = sent(server)
    assert {k: body[k] for k in REAL_OPTIONS} == REAL_OPTIONS


def test_no_known_provider_option_is_a_near_miss():
    assert [k for k in sorted(PROVIDER_OPTIONS) if misspelled_keyword(k)] == []
    assert misspelled_keyword("x_custom_flag") is None and misspelled_keyword("n") is None


# ---------------------------------------------------------------- generated-field clashes


class WithReason(BaseModel):
    answer: int
    reason: str


class WithRequests(BaseModel):
    answer: int
    action_requests: list[str] = []


class WithRequired(BaseModel):
    answer: int
    action_required: str = "no"


class WithResponses(BaseModel):
    answer: int
    action_responses: dict[str, Any] = {}


class WithAlias(BaseModel):
    answer: int
    why: str = Field("", alias="reason")


class SameReason(BaseModel):
    """Declares the very fields reason/actions add: nothing is replaced."""

    answer: int
    reason: Reason | None = None
    action_requests: list[ActionRequestModel] | None = None


CLASHES = {
    "reason": (WithReason, {"reason": True}, "reason=True", "'reason'"),
    "action_requests": (WithRequests, {"actions": True}, "actions=True", "'action_requests'"),
    "action_required": (WithRequired, {"actions": True}, "actions=True", "'action_required'"),
    "action_responses": (WithResponses, {"actions": True}, "actions=True", "'action_responses'"),
    "field_models": (Answer, {"field_models": [Spec(str, name="answer")]}, "field_models", "'answer'"),
    "alias": (WithAlias, {"reason": True}, "reason=True", "'why'"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(CLASHES))
async def test_a_generated_field_that_replaces_the_callers_is_refused(server, case):
    model, kw, source, field = CLASHES[case]
    server.push(completion('{"answer": 1, "reason": "because"}'))
    m = make_model(server)
    branch = Branch(chat_model=m, tools=ToolBox().tools())
    with pytest.raises(ConfigurationError) as info:
        await branch.operate(instruction="q", response_format=model, **kw)
    await m.aclose()
    text = str(info.value)
    assert source in text and field in text and model.__name__ in text
    assert server.chat_requests == []
    with pytest.raises(ConfigurationError):
        Step.request_operative(base_type=model, **{k: v for k, v in kw.items() if k != "field_models"},
                               fields={"answer": kw["field_models"][0]} if "field_models" in kw else None)


@pytest.mark.anyio
async def test_a_field_spec_replacing_a_generated_field_is_refused(server):
    m = make_model(server)
    with pytest.raises(ConfigurationError, match="reason=True also adds"):
        await Branch(chat_model=m).operate(instruction="q", response_format=Answer, reason=True,
                                           field_models=[Spec(str, name="reason")])
    await m.aclose()
    assert server.chat_requests == []


@pytest.mark.anyio
async def test_fields_of_the_same_type_are_no_clash(server):
    server.push(completion('{"answer": 1, "reason": {"title": "t", "content": "c", "confidence_score": 0.5}}'))
    m = make_model(server)
    result = await Branch(chat_model=m).operate(instruction="q", response_format=SameReason, reason=True,
                                                field_models=[Spec(int, name="answer")])
    await m.aclose()
    assert result.answer == 1 and result.reason.content == "c"


@pytest.mark.anyio
async def test_actions_off_means_no_action_field_clash(server):
    """invoke_actions=False adds no action fields, so nothing clashes."""
    server.push(completion('{"answer": 1, "action_requests": ["x"]}'))
    m = make_model(server)
    result = await Branch(chat_model=m).operate(instruction="q", response_format=WithRequests,
                                                actions=True, invoke_actions=False)
    await m.aclose()
    assert result.action_requests == ["x"]


@pytest.mark.anyio
async def test_a_misspelled_instruct_key_is_refused(server):
    """An Instruct mapping ignores unknown keys: a near miss would be lost silently."""
    m = make_model(server)
    with pytest.raises(MisspelledKeywordError, match="did you mean 'instruction'"):
        await Branch(chat_model=m).operate(instruct={"instrution": "q"}, response_format=Answer)
    await m.aclose()
    assert server.chat_requests == []


SENTINEL = "SENTINEL-key-5e0c7a"


@pytest.mark.parametrize(("wrong", "right"), [
    ("timout", "timeout"), ("api_kye", "api_key"), ("deadlin", "deadline"), ("base_ur", "base_url"),
    ("max_retires", "max_retries"), ("retry_after_cpa", "retry_after_cap"), ("hedaers", "headers"),
])
def test_a_misspelled_model_option_is_refused_not_sent(wrong, right):
    """An API iModel sends unknown options with every request: a near miss of
    its own option (``api_kye=`` holding a key) is refused, the value unshown."""
    with pytest.raises(MisspelledKeywordError) as info:
        iModel(provider="openai", model="m", api_key="k", **{wrong: SENTINEL})
    assert info.value.suggestion == right and SENTINEL not in str(info.value)


@pytest.mark.anyio
async def test_real_options_on_the_model_are_sent(server):
    server.push(completion("ok"))
    m = make_model(server, **REAL_OPTIONS)
    assert (await m.endpoint.chat([{"role": "user", "content": "hi"}])).text == "ok"
    await m.aclose()
    body = sent(server)
    assert {k: body[k] for k in REAL_OPTIONS} == REAL_OPTIONS


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["keyword", "instruct"])
async def test_an_unknown_action_strategy_is_refused_before_any_request(server, where):
    """D1: with actions on, a strategy act() cannot run is a ConfigurationError in
    prepare: the model is never asked (it was refused only after the model call)."""
    from lionops import Instruct

    server.push(completion('{"answer": 1}'))
    m = make_model(server)
    box = ToolBox()
    branch = Branch(chat_model=m, tools=box.tools())
    kw: dict[str, Any] = (
        {"instruction": "q", "action_strategy": "parallel"} if where == "keyword"
        else {"instruct": Instruct.model_construct(instruction="q", action_strategy="parallel"),
              "action_strategy": None}
    )
    with pytest.raises(ConfigurationError, match="action_strategy must be one of .*'parallel'"):
        await branch.operate(response_format=Answer, actions=True, **kw)
    await m.aclose()
    assert server.chat_requests == [] and box.total == 0
    assert branch.traces[-1].exit == "failed" and branch.traces[-1].transitions[-1].source == "prepare"


@pytest.mark.anyio
async def test_a_strategy_is_not_checked_when_actions_are_off(server):
    """D1: without actions no ActionParam is built, so its strategy is never read."""
    server.push(completion('{"answer": 1}'))
    m = make_model(server)
    out = await Branch(chat_model=m).operate(instruction="q", response_format=Answer, action_strategy="parallel")
    await m.aclose()
    assert isinstance(out, Answer) and out.answer == 1
