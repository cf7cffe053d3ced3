"""One governed operate() on both backends: tools run after validation and the
result is enriched."""

import pytest

from lionops import Branch
from tests.helpers import Answer, ScriptedMiddle, ToolBox, as_response

pytestmark = pytest.mark.anyio


async def test_operate_runs_tools_after_validation_and_enriches():
    box = ToolBox()
    branch = Branch(tools=box.tools())
    middle = ScriptedMiddle(as_response({
        "answer": 1,
        "action_requests": [{"function": "get_weather", "arguments": {"city": "Paris"}}],
    }))
    result, trace = await branch.operate_traced(
        instruction="q", response_format=Answer, actions=True, middle=middle
    )
    assert middle.calls == 1
    assert box.calls["get_weather"] == 1
    assert result.answer == 1
    assert result.action_responses[0].output == {"city": "Paris", "temp_c": 20}
    assert trace.states == ["prepare", "schema", "adapter", "validate", "gate", "act", "enrich", "returned"]
    assert trace.exit == "enriched"
    assert branch.traces == [trace]
