"""Usage limits of a durable branch, on the real dev server.

The worker process of tests/peers/test_temporal_durable.py (its ``env``
fixture), with no workflow cache (``--max-cached 0``: every workflow task
replays the history on a process that never ran it), serves the
``limited`` and ``costly`` branches of tests/temporal_app.py. The limits
are checked in workflow code before a model or tool activity is scheduled,
and in the model activity before a parse-model re-ask; going over ends the
operation at ``over_limit`` as in process. Each history replays again in
this process and in a fresh one. Temporal's client runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests.peers.test_temporal_durable import env, replays, replays_in_a_fresh_process  # noqa: E402, F401 - fixture
from tests.temporal_support import requires_temporal  # noqa: E402

pytestmark = requires_temporal


def run(env: Any, branch: str, cases: list[str]) -> tuple[list[dict[str, Any]], Any]:
    """Run the cases as operate() calls of one workflow; its records and history."""
    from tests.temporal_workflows import OperationsWorkflow

    async def main() -> tuple[list[dict[str, Any]], Any]:
        client = await env.client()
        h = await client.start_workflow(OperationsWorkflow.run, args=[branch, cases],
                                        id=f"{env.queue}-{branch}-{uuid.uuid4().hex[:6]}", task_queue=env.queue)
        return await h.result(), await h.fetch_history()

    return asyncio.run(main())


def scheduled(history: Any) -> Counter[str]:
    """The activities the workflow scheduled, by type."""
    from temporalio.api.enums.v1 import EventType

    return Counter(e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                   if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)


def ran(env: Any, history: Any) -> list[str]:
    return [e["kind"] for e in env.ran(history.workflow_id)]


def test_a_model_or_tool_activity_past_a_limit_is_never_scheduled(env, tmp_path):
    records, history = run(env, "limited", ["three_tools", "one_tool", "one_tool"])
    first, second, third = records
    assert [a["decision"] for a in first["trace"]["actions"]] == ["allowed", "allowed", "over_limit"]
    assert first["trace"]["exit"] == "enriched"
    assert [a["decision"] for a in second["trace"]["actions"]] == ["over_limit"]
    assert third["error"].startswith("UsageLimitExceeded: usage limit requests=2")
    assert third["trace"]["exit"] == "over_limit"
    assert third["trace"]["meta"]["usage_limit"]["limit"] == "requests"
    assert third["usage"]["requests"] == 2 and third["usage"]["tool_calls"] == 2
    assert scheduled(history) == {"limited.model": 2, "limited.tool.lookup": 1, "limited.tool.charge": 1}
    assert ran(env, history) == ["lookup", "charge_start", "charge"]
    asyncio.run(replays([history]))
    replays_in_a_fresh_process([history], tmp_path)


def test_a_parse_model_request_past_a_limit_is_never_made_in_the_activity(env, tmp_path):
    """Prose under a response model: the model activity asks the parse model
    once (the second request), then stops before a third; the activity is not
    retried, and the operation ends at over_limit in the workflow."""
    before = len(env.server.chat_requests)
    [record], history = run(env, "limited", ["prose"])
    assert len(env.server.chat_requests) - before == 2
    assert record["error"].startswith("UsageLimitExceeded: usage limit requests=2")
    assert record["trace"]["exit"] == "over_limit"
    assert len(record["trace"]["meta"]["parse_requests"]) == 1
    assert record["usage"]["requests"] == 2
    assert scheduled(history) == {"limited.model": 1}
    asyncio.run(replays([history]))


def test_a_cost_limit_is_priced_in_the_activity_and_checked_in_the_workflow(env):
    records, history = run(env, "costly", ["no_action_param", "no_action_param"])
    first, second = records
    assert first["trace"]["meta"]["cost_usd"] > 0  # priced where the request was made
    assert second["trace"]["exit"] == "over_limit" and second["trace"]["meta"]["usage_limit"]["limit"] == "cost"
    assert scheduled(history) == {"costly.model": 1}
    asyncio.run(replays([history]))
