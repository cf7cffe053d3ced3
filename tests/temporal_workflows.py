"""The test workflows. Durable branch definitions are imported passed through
the sandbox, so each workflow run uses the worker's one definition."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from .temporal_app import (
        CASE_LIMITS,
        CASES,
        CONVERSATION,
        PLUGIN,
        RUN_LOOP,
        Answer,
        approvals,
        case_kwargs,
        observed,
        run_record,
        shop,
    )


@workflow.defn
class CaseWorkflow:
    """Run one operate() of ``shop`` with a case's keywords; return its record."""

    @workflow.run
    async def run(self, case: str) -> dict[str, Any]:
        kwargs = case_kwargs(case) if case in CASES else {
            "instruction": f"case:{case}", "response_format": Answer, "actions": True,
            "action_strategy": "sequential",
        }
        durable = approvals if case.startswith("approve") else shop
        if case in CASE_LIMITS:
            durable = {b.name: b for b in PLUGIN.durable_branches}[CASE_LIMITS[case][0]]
        if case.startswith("approve"):
            kwargs["action_strategy"] = "concurrent"
        try:
            traced = await durable.operate_traced(**kwargs)
        except Exception as exc:  # noqa: BLE001 - the record keeps the error
            return run_record(exc, durable.branch())
        return run_record(traced, durable.branch())


WORKFLOWS = [CaseWorkflow]


@workflow.defn
class ConversationWorkflow:
    """Three operate() calls on one durable branch in one run: the conversation
    is workflow state; the third clears the messages first."""

    @workflow.run
    async def run(self) -> dict[str, Any]:
        for step in CONVERSATION:
            await shop.operate(**step)
        branch = shop.branch()
        return {"messages": branch.messages.to_list(), "traces": [t.to_dict() for t in branch.traces]}


WORKFLOWS.append(ConversationWorkflow)


@workflow.defn
class ObservedWorkflow:
    """One operate() of the ``observed`` branch (hooks and a context provider)."""

    @workflow.run
    async def run(self, case: str) -> dict[str, Any]:
        return run_record(await observed.operate_traced(**case_kwargs(case)), observed.branch())


WORKFLOWS.append(ObservedWorkflow)


@workflow.defn
class BranchWorkflow:
    """One operate() of the durable branch named ``branch`` for the scripted
    ``case`` (actions, concurrent or sequential), optionally with ``context``."""

    @workflow.run
    async def run(self, branch: str, case: str, strategy: str = "concurrent",
                  context: Any = None) -> dict[str, Any]:
        durable = {b.name: b for b in PLUGIN.durable_branches}[branch]
        kwargs: dict[str, Any] = {"instruction": f"case:{case}", "response_format": Answer, "actions": True,
                                  "action_strategy": strategy}
        if context is not None:
            kwargs["context"] = context
        try:
            traced = await durable.operate_traced(**kwargs)
        except Exception as exc:  # noqa: BLE001 - the record keeps the error
            return run_record(exc, durable.branch())
        return run_record(traced, durable.branch())


WORKFLOWS.append(BranchWorkflow)


@workflow.defn
class RunWorkflow:
    """One branch.run() of ``shop`` as workflow code: three rounds; its run trace and messages."""

    @workflow.run
    async def run(self) -> dict[str, Any]:
        result, run = await shop.run_traced("case:run_loop", **RUN_LOOP)
        return {"run": run.to_dict(), "result": result.model_dump(mode="json"),
                "messages": shop.branch().messages.to_list()}


WORKFLOWS.append(RunWorkflow)


@workflow.defn
class OperationsWorkflow:
    """operate() calls of one durable branch in one run, one per case, until
    one raises; each call's record (usage limits add up over the run)."""

    @workflow.run
    async def run(self, branch: str, cases: list[str]) -> list[dict[str, Any]]:
        durable = {b.name: b for b in PLUGIN.durable_branches}[branch]
        records = []
        for case in cases:
            kwargs: dict[str, Any] = {"instruction": f"case:{case}", "response_format": Answer, "actions": True,
                                      "action_strategy": "sequential"}
            try:
                traced = await durable.operate_traced(**kwargs)
            except Exception as exc:  # noqa: BLE001 - the record keeps the error
                records.append({**run_record(exc, durable.branch()), "usage": durable.branch().usage.as_dict()})
                break
            records.append({**run_record(traced, durable.branch()), "usage": durable.branch().usage.as_dict()})
        return records


WORKFLOWS.append(OperationsWorkflow)
