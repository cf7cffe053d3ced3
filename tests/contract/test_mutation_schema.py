"""The parse parameters the schema phase gives the Middle when ``operate()``
is called without any: the call's generated response type, the branch's
``parse_model`` and ``handle_validation="return_value"`` (the Middle contract
returns a mismatch; the validate phase decides). Scripted Middle (a real
object), real iModels on the loopback server, the public API only.
"""

from __future__ import annotations

import pytest

from lionops import Branch, ChatParam, ParseParam, operate
from tests.helpers import Answer, ScriptedMiddle, as_response
from tests.openai_server import make_model, model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_operate_without_parse_param_gives_the_middle_the_branch_parse_model(server, model):  # noqa: F811
    parse_model = make_model(server, model="gpt-4o-parse")
    try:
        branch = Branch(chat_model=model, parse_model=parse_model)
        mid = ScriptedMiddle(as_response({"answer": 3}))
        out = await operate(branch, "q", ChatParam(response_format=Answer, imodel=model), middle=mid)
        [seen] = mid.seen
        pp = seen["parse_param"]
        assert pp.imodel is parse_model
        assert pp.handle_validation == "return_value"
        assert pp.response_format is seen["chat_param"].response_format
        assert isinstance(out, pp.response_format) and out.answer == 3
    finally:
        await parse_model.aclose()


async def test_operate_without_parse_param_keeps_a_schema_response_format_for_the_parse(server, model):  # noqa: F811
    # A JSON schema (not a model) as the response format: no operative is
    # built, and the parse parameters carry the same schema.
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    mid = ScriptedMiddle({"answer": 3})
    out = await operate(Branch(chat_model=model), "q", ChatParam(response_format=schema, imodel=model), middle=mid)
    [seen] = mid.seen
    assert seen["parse_param"].response_format == {"type": "object", "properties": {"answer": {"type": "integer"}},
                                                   "required": ["answer"]}
    assert seen["chat_param"].response_format == seen["parse_param"].response_format
    assert out == {"answer": 3}


async def test_parameters_that_need_no_change_reach_the_middle_as_given(model):  # noqa: F811
    # Frozen parameters are shared, not copied, when the schema phase changes
    # nothing: no tools, no Operative (a dict schema), and the parse
    # parameters already return a mismatch to the validate phase.
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    cp = ChatParam(response_format=schema, imodel=model)
    pp = ParseParam(response_format=schema, imodel=model, handle_validation="return_value")
    mid = ScriptedMiddle({"answer": 3})
    assert await operate(Branch(chat_model=model), "q", cp, parse_param=pp, middle=mid) == {"answer": 3}
    [seen] = mid.seen
    assert seen["chat_param"] is cp and seen["parse_param"] is pp


async def test_a_parse_param_of_another_policy_is_copied_with_return_value_and_its_own_format(model):  # noqa: F811
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    other = {"type": "object"}
    cp = ChatParam(response_format=schema, imodel=model)
    pp = ParseParam(response_format=other, imodel=model, handle_validation="raise")
    mid = ScriptedMiddle({"answer": 3})
    await operate(Branch(chat_model=model), "q", cp, parse_param=pp, middle=mid)
    [seen] = mid.seen
    assert seen["chat_param"] is cp
    got = seen["parse_param"]
    assert got is not pp and got.handle_validation == "return_value" and got.response_format is other
    assert (got.imodel, got.alcall_params, got.fuzzy_match_params) == (pp.imodel, pp.alcall_params,
                                                                        pp.fuzzy_match_params)
    assert pp.handle_validation == "raise"  # the caller's is left alone
