"""The application the Temporal tests run: durable branches, real tools, workflows.

Worker processes run it (``python -m tests.temporal_app worker ...``);
workflow code imports it passed through the sandbox (tests/temporal_workflows.py),
as docs/temporal.md recommends for durable branch definitions. Tools
append one line per run to the file named by ``LIONOPS_TEST_EFFECTS``, so a
test counts what ran how many times across processes. The model is the
loopback OpenAI-compatible server at ``LIONOPS_TEST_BASE_URL``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

from lionops import Branch, UsageLimits, iModel
from lionops.messages import to_jsonable
from lionops.temporal import ActivityConfig, DurableBranch, DurableError, HumanApproval, LionopsPlugin, idempotency_key
from lionops.testing import Reply, completion, error_body, tool_call

SYSTEM = "You are the shop assistant."
#: The worker's model key: it must never appear in a workflow history.
API_KEY = "sk-test-temporal-worker-key"


class Answer(BaseModel):
    answer: str
    confidence: float


class FrozenAnswer(BaseModel):
    """A frozen caller model: its response type cannot hold action responses."""

    model_config = ConfigDict(frozen=True)
    answer: str
    confidence: float


def _effect(kind: str, **fields: Any) -> None:
    path = os.environ.get("LIONOPS_TEST_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": kind, "pid": os.getpid(), **fields}) + "\n")
            fh.flush()


def _key() -> str | None:
    try:
        return idempotency_key()
    except DurableError:  # run in process, not as an activity
        return None


def lookup(item: str) -> dict[str, Any]:
    """Look an item up.

    Args:
        item: the item name.
    """
    _effect("lookup", item=item, key=_key())
    return {"item": item, "price": 12}


async def charge(amount: int) -> dict[str, Any]:
    """Charge the customer.

    Args:
        amount: cents to charge.
    """
    key = _key()
    _effect("charge_start", amount=amount, key=key)
    await asyncio.sleep(float(os.environ.get("LIONOPS_TEST_CHARGE_S", "0")))
    _effect("charge", amount=amount, key=key)
    return {"charged": amount}


def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: the item name.
    """
    _effect("ship", item=item, key=_key())
    if item == "forbidden":
        raise ValueError("cannot ship that")
    return f"shipped {item}"


TOOLS = [lookup, charge, ship]


def _cents(value: Any) -> Any:
    """Dollars as a decimal string ("15.00") to integer cents; not idempotent on purpose."""
    return round(float(value) * 100) if isinstance(value, str) else value * 100


Cents = Annotated[int, BeforeValidator(_cents)]


def pay(amount: Cents, memo: Annotated[str, Field(alias="Memo")] = "") -> dict[str, Any]:
    """Pay an amount given in dollars.

    Args:
        amount: dollars, as a decimal string.
        memo: a note for the payee.
    """
    _effect("pay", amount=amount, memo=memo, key=_key())
    return {"paid_cents": amount}


def chat_model() -> iModel:
    """Built on the worker, from its environment (never in workflow code)."""
    return iModel(provider="openai", model="m", base_url=os.environ["LIONOPS_TEST_BASE_URL"], api_key=API_KEY)


FAST_TOOLS = ActivityConfig(
    start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=2),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
)
#: The response models a client may name in run_operations (only registered types are rebuilt).
MODELS = [Answer, FrozenAnswer]
FAST_MODEL = ActivityConfig(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3),
)

shop = DurableBranch("shop", chat_model=chat_model, tools=TOOLS, system=SYSTEM, response_models=MODELS,
                     model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
approvals = DurableBranch(
    "approvals", chat_model=chat_model, tools=TOOLS, system=SYSTEM,
    gate=HumanApproval(timeout=timedelta(seconds=3)), model_activity=FAST_MODEL, tool_activity=FAST_TOOLS,
)
#: For the scale test: the default tool activity (a 30 s heartbeat timeout), so
#: a worker slowed down by a busy machine is not taken for a dead one.
bulk = DurableBranch("bulk", chat_model=chat_model, tools=TOOLS, system=SYSTEM, response_models=MODELS,
                     model_activity=FAST_MODEL)
#: What the observers of the ``observed`` branch saw (workflow code, in the
#: worker's process): ``(point, function)`` and ``("writeback", function)``.
OBSERVED: list[tuple[str, str]] = []


def observe(point: str) -> Any:
    def handler(payload: dict[str, Any]) -> None:
        OBSERVED.append((point, payload["function"]))
    return handler


class Recorder:
    """A context provider: records each response offered to it."""

    def writeback(self, response: Any) -> None:
        OBSERVED.append(("writeback", response.function))


OBSERVERS = {"tool_pre": observe("tool_pre"), "tool_post": observe("tool_post"), "tool_error": observe("tool_error")}
observed = DurableBranch("observed", chat_model=chat_model, tools=TOOLS, system=SYSTEM, hooks=OBSERVERS,
                         context_providers=[Recorder()], model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)


async def never_answers(invocation: Any) -> bool:
    """An async gate (workflow code) that waits for a condition that never holds."""
    await workflow.wait_condition(lambda: False)
    return True


def allow_all(invocation: Any) -> bool:
    return True


#: Two approval gates: each decides for itself.
twice = DurableBranch(
    "twice", chat_model=chat_model, tools=TOOLS, system=SYSTEM,
    gate=[HumanApproval(timeout=timedelta(seconds=20)), allow_all,
          HumanApproval(timeout=timedelta(seconds=20), functions={"charge", "ship"})],
    model_activity=FAST_MODEL, tool_activity=FAST_TOOLS,
)
#: An approval that waits long enough for a worker to be killed and replaced.
patient = DurableBranch("patient", chat_model=chat_model, tools=TOOLS, system=SYSTEM, response_models=MODELS,
                        gate=HumanApproval(timeout=timedelta(minutes=5)),
                        model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
#: Approvals a busy machine cannot miss (lookup, charge) and one that times out soon (ship).
mixed = DurableBranch("mixed", chat_model=chat_model, tools=TOOLS, system=SYSTEM,
                      gate=[HumanApproval(timeout=timedelta(minutes=5), functions={"lookup", "charge"}),
                            HumanApproval(timeout=timedelta(seconds=1), functions={"ship"})],
                      model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
#: A gate that never answers, bounded by gate_timeout (a durable timer).
stalled = DurableBranch("stalled", chat_model=chat_model, tools=TOOLS, system=SYSTEM, gate=never_answers,
                        gate_timeout=1.0, model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
#: A tool whose validation is not idempotent, behind an approval gate.
payments = DurableBranch("payments", chat_model=chat_model, tools=[pay], system=SYSTEM,
                         gate=HumanApproval(timeout=timedelta(seconds=20)),
                         model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
#: Random gate lists for the property test: (gate list, the tools each gate covers).
GATE_LISTS: dict[str, list[frozenset[str] | None]] = {
    "g1": [None],
    "g2": [None, frozenset({"charge"})],
    "g3": [frozenset({"lookup", "charge"}), None, frozenset({"ship"})],
}
gated = {
    name: DurableBranch(f"gated_{name}", chat_model=chat_model, tools=TOOLS, system=SYSTEM,
                        gate=[HumanApproval(timeout=timedelta(seconds=1.5), functions=f) for f in fns],
                        model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
    for name, fns in GATE_LISTS.items()
}
#: Usage limits, per workflow run: two model requests and two tool calls; a tiny cost.
limited = DurableBranch("limited", chat_model=chat_model, tools=TOOLS, system=SYSTEM,
                        limits=UsageLimits(requests=2, tool_calls=2),
                        model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
#: No model request at all: the first is past the limit.
stingy = DurableBranch("stingy", chat_model=chat_model, tools=TOOLS, system=SYSTEM, limits=UsageLimits(requests=0),
                       model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
costly = DurableBranch("costly", chat_model=chat_model, tools=TOOLS, system=SYSTEM,
                       limits=UsageLimits(cost=0.00001), model_activity=FAST_MODEL, tool_activity=FAST_TOOLS)
PLUGIN = LionopsPlugin(shop, approvals, bulk, observed, twice, patient, mixed, stalled, payments, limited, stingy,
                       costly, *gated.values())

# ------------------------------------------------------------ exit-trigger cases

_ANSWER = json.dumps({"answer": "ok", "confidence": 0.9})
_ACTIONS = json.dumps({"answer": "ok", "confidence": 0.9, "action_requests": []})

#: case name -> (operate keywords, the model's reply)
CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "skip_validation": ({"skip_validation": True, "response_format": Answer}, completion("plain words")),
    "mismatch_return_value": ({"response_format": Answer}, completion("not json at all", finish_reason="length")),
    "mismatch_return_none": ({"response_format": Answer, "handle_validation": "return_none"},
                             completion("nope", finish_reason="length")),
    "mismatch_raise": ({"response_format": Answer, "handle_validation": "raise"},
                       completion("nope", finish_reason="length")),
    "actions_disabled": ({"response_format": Answer, "actions": True, "invoke_actions": False}, completion(_ANSWER)),
    "no_action_param": ({"response_format": Answer}, completion(_ANSWER)),
    "no_requests": ({"response_format": Answer, "actions": True}, completion(_ANSWER)),
    "no_responses": ({"response_format": Answer, "actions": True}, completion(_ACTIONS)),
    "enriched": (
        {"response_format": Answer, "actions": True, "action_strategy": "sequential"},
        completion(_ANSWER, tool_calls=[
            tool_call("lookup", {"item": "tea"}, "c1"), tool_call("ship", {"item": "forbidden"}, "c2"),
        ]),
    ),
    "no_response_slot": (
        {"response_format": FrozenAnswer, "actions": True},
        completion(json.dumps({"answer": "ok", "confidence": 0.9,
                               "action_requests": [{"function": "lookup", "arguments": {"item": "tea"}}]})),
    ),
    "failed": ({"response_format": Answer}, Reply(body=error_body("bad request"), status=400)),
    "failed_in_prepare": ({"handle_validation": "sometimes"}, completion("unused")),
    # usage limits (the branch's, CASE_LIMITS): before the model request; before a parse-model re-ask
    "over_limit": ({"response_format": Answer}, completion(_ANSWER)),
    "over_limit_in_parse": ({"response_format": Answer}, completion("plain prose")),
}

#: The usage limits of the branch a case runs on (durable: the branch of that name).
CASE_LIMITS: dict[str, tuple[str, UsageLimits]] = {
    "over_limit": ("stingy", UsageLimits(requests=0)),
    "over_limit_in_parse": ("limited", UsageLimits(requests=2, tool_calls=2)),
}


#: Three operate() calls of one conversation (a tool selector given as a function and a name).
CONVERSATION: list[dict[str, Any]] = [
    {"instruction": "case:no_action_param", "response_format": Answer},
    {"instruction": "case:enriched", "response_format": Answer, "actions": True,
     "action_strategy": "sequential", "tools": [lookup, "ship"]},
    {"instruction": "case:skip_validation", "skip_validation": True, "clear_messages": True},
]


def case_kwargs(case: str) -> dict[str, Any]:
    return {"instruction": f"case:{case}", **CASES[case][0]}


def reply_for(request: Any) -> Any:
    """The loopback server's answer: by the ``case:`` of the last user message."""
    text = ""
    for msg in reversed(request.body.get("messages", [])):  # parse retries repeat the instruction
        if isinstance(msg.get("content"), str) and "case:" in msg["content"]:
            text = msg["content"]
            break
    case = text.split("case:", 1)[1].split()[0] if "case:" in text else ""
    if case == "run_loop":
        return run_loop_reply(request)
    if case in CASES:
        return CASES[case][1]
    if case == "flaky":  # the first model-call attempt fails (its three HTTP requests), the next succeeds
        FLAKY.append(request)
        if len(FLAKY) <= 3:
            return Reply(body=error_body("overloaded", "server_error"), status=503)
        return completion(_ANSWER)
    # a parse retry (no case word) of an answer that was not JSON: still not JSON
    return SCRIPTS.get(case, completion("still not json"))


FLAKY: list[Any] = []


def run_loop_reply(request: Any) -> Any:
    """A three-round run: a tool call in each of the first two rounds, then the answer
    (the round is how many next-round instructions the request carries)."""
    from lionops.pipeline.loop import NEXT_ROUND_INSTRUCTION

    n = sum(1 for m in request.body.get("messages", []) if NEXT_ROUND_INSTRUCTION in str(m.get("content")))
    if n < 2:
        item = ("tea", "cup")[n]
        return completion(json.dumps({"answer": "checking", "confidence": 0.5,
                                      "action_requests": [{"function": "lookup", "arguments": {"item": item}}]}))
    return completion(_ANSWER)


#: The keywords of the durable run (RunWorkflow) and of its in-process twin.
RUN_LOOP = {"response_format": Answer, "action_strategy": "sequential"}

#: Replies of the other scenarios, by the ``case:`` word of the instruction.
SCRIPTS: dict[str, Any] = {
    "three_tools": completion(_ANSWER, tool_calls=[
        tool_call("lookup", {"item": "tea"}, "t1"), tool_call("charge", {"amount": 1200}, "t2"),
        tool_call("ship", {"item": "tea"}, "t3"),
    ]),
    "approve_three": completion(_ANSWER, tool_calls=[
        tool_call("lookup", {"item": "tea"}, "a1"), tool_call("charge", {"amount": 500}, "a2"),
        tool_call("ship", {"item": "tea"}, "a3"),
    ]),
    "one_tool": completion(_ANSWER, tool_calls=[tool_call("lookup", {"item": "cup"}, "o1")]),
    "pay": completion(_ANSWER, tool_calls=[tool_call("pay", {"amount": "15.00", "Memo": "tea"}, "p1")]),
}


def run_record(traced_or_error: Any, branch: Branch) -> dict[str, Any]:
    """What a test workflow returns: the trace, the result or error, the messages."""
    out: dict[str, Any] = {"trace": branch.traces[-1].to_dict(), "messages": branch.messages.to_list(),
                           "logs": [e.to_dict() for e in branch.logs]}
    if isinstance(traced_or_error, BaseException):
        out["error"] = f"{type(traced_or_error).__name__}: {traced_or_error}"
    else:
        out["result"] = to_jsonable(traced_or_error.result)
    return out




#: Workflow activations a worker runs at once. Temporal fails an activation
#: that has not yielded within 2 s of wall time (its deadlock detector), and
#: on a busy shared machine many activations queued behind one GIL can take
#: that long; a small number keeps each one quick.
WORKFLOW_TASKS = 8


async def _worker(address: str, task_queue: str, sticky_s: float, max_cached: int | None = None) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from .temporal_workflows import WORKFLOWS

    client = await Client.connect(address, plugins=[PLUGIN])
    worker = Worker(client, task_queue=task_queue, workflows=WORKFLOWS,
                    sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_s),
                    max_concurrent_activities=64, max_concurrent_workflow_tasks=WORKFLOW_TASKS,
                    **({} if max_cached is None else {"max_cached_workflows": max_cached}))
    print("worker ready", flush=True)
    await worker.run()


async def _replay(paths: list[str]) -> None:
    """Replay recorded histories (JSON files) with temporalio's Replayer in this
    fresh process: nothing the workflows use was loaded by running them first."""
    from pathlib import Path

    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from .temporal_workflows import WORKFLOWS

    replayer = Replayer(workflows=WORKFLOWS, plugins=[PLUGIN])
    for path in paths:
        history = WorkflowHistory.from_json(Path(path).stem, Path(path).read_text())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        print(json.dumps({"history": Path(path).name, "failure": None if result.replay_failure is None
                          else str(result.replay_failure)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["worker", "replay"])
    parser.add_argument("histories", nargs="*", help="replay: history JSON files")
    parser.add_argument("--address")
    parser.add_argument("--task-queue")
    parser.add_argument("--sticky-timeout", type=float, default=1.0)
    parser.add_argument("--max-cached", type=int, default=None,
                        help="max_cached_workflows (0: every workflow task replays the history)")
    args = parser.parse_args()
    if args.command == "replay":
        asyncio.run(_replay(args.histories))
    else:
        asyncio.run(_worker(args.address, args.task_queue, args.sticky_timeout, args.max_cached))


if __name__ == "__main__":
    main()
