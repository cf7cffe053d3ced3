"""Human approval of tool calls: a gate that waits for a decision sent to the workflow.

A :class:`HumanApproval` in a durable branch's ``gate`` holds each tool call
it covers until an approval or a denial arrives for its call id (one per tool
call *and* gate: each gate of a list decides for itself), through the
Temporal update ``lionops.decide`` (or the signal ``lionops.decision``), or
until ``timeout`` passes, which denies (fail closed). The query
``lionops.pending`` lists the calls waiting. Every decision is recorded in
the trace (``trace.meta["approvals"]``), the event log (``approval``) and
on the tool call's ``action_request``/``action_response`` messages
(``metadata["approval"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict
from temporalio import workflow

from ..errors import ConfigurationError
from ..trace import current_meta
from .errors import ApprovalError

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

    from ..tools import ToolInvocation
    from .branch import _RunState

__all__ = [
    "HumanApproval", "Decision", "ApprovalRecord", "approve", "deny", "pending_approvals",
    "DECIDE_UPDATE", "DECIDE_SIGNAL", "PENDING_QUERY",
]

DECIDE_UPDATE = "lionops.decide"
DECIDE_SIGNAL = "lionops.decision"
PENDING_QUERY = "lionops.pending"


class Decision(BaseModel):
    """An approval or denial of one pending tool call, with who and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    approved: bool
    by: str
    reason: str | None = None


class ApprovalRecord(BaseModel):
    """What was decided about one tool call (``decision="timed_out"`` denies)."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    function: str
    arguments: dict[str, Any]
    #: the position of the deciding gate in the durable branch's ``gate`` list
    gate: int = 0
    #: the position of the tool call in its batch of requests
    index: int | None = None
    decision: Literal["approved", "denied", "timed_out"]
    approved: bool
    by: str | None = None
    reason: str | None = None
    requested_at: str
    decided_at: str


@dataclass(frozen=True, slots=True)
class HumanApproval:
    """A gate: each covered tool call waits for a human decision.

    Args:
        timeout: how long a call waits (``timedelta`` or seconds of workflow
            time); when it passes the call is denied (``decision="timed_out"``).
        functions: the tool names that need approval; ``None`` (default): all.
    """

    timeout: timedelta | float
    functions: frozenset[str] | None = field(default=None)

    def __post_init__(self) -> None:
        seconds = self.timeout.total_seconds() if isinstance(self.timeout, timedelta) else float(self.timeout)
        if not seconds > 0:
            raise ConfigurationError(f"HumanApproval timeout must be positive, got {self.timeout!r}")
        if self.functions is not None:
            object.__setattr__(self, "functions", frozenset(self.functions))

    @property
    def timeout_s(self) -> float:
        return self.timeout.total_seconds() if isinstance(self.timeout, timedelta) else float(self.timeout)

    async def wait(self, state: _RunState, call_id: str, invocation: ToolInvocation, gate: int = 0) -> bool:
        """Hold ``invocation`` until a decision for ``call_id`` or the timeout
        (workflow code); ``gate`` is this gate's position in the gate list."""
        if self.functions is not None and invocation.function not in self.functions:
            return True
        requested = workflow.now().isoformat()
        state.pending[call_id] = {
            "call_id": call_id, "function": invocation.function, "gate": gate, "index": invocation.index,
            "arguments": dict(invocation.arguments), "requested_at": requested,
        }
        try:
            await workflow.wait_condition(lambda: call_id in state.decisions, timeout=self.timeout_s)
            decision: Decision | None = state.decisions[call_id]
        except TimeoutError:
            decision = None
        finally:
            state.pending.pop(call_id, None)
        record = ApprovalRecord(
            call_id=call_id, function=invocation.function, arguments=dict(invocation.arguments),
            gate=gate, index=invocation.index,
            decision="timed_out" if decision is None else ("approved" if decision.approved else "denied"),
            approved=bool(decision and decision.approved),
            by=decision.by if decision else None,
            reason=decision.reason if decision else f"no decision within {self.timeout_s:g}s",
            requested_at=requested, decided_at=workflow.now().isoformat(),
        )
        state.records.append(record)
        meta = current_meta()
        if meta is not None:
            meta.setdefault("approvals", []).append(record.model_dump())
        return record.approved


def check_decision(state: _RunState, decision: Decision) -> None:
    """Raise ApprovalError unless ``decision`` names a call that is waiting."""
    if decision.call_id in state.decisions:
        raise ApprovalError(f"tool call {decision.call_id!r} was already decided")
    if decision.call_id not in state.pending:
        raise ApprovalError(
            f"no tool call {decision.call_id!r} is waiting for approval; waiting: {sorted(state.pending)}"
        )


# ------------------------------------------------------------ client side

async def pending_approvals(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    """The tool calls of a workflow waiting for a decision (``call_id``,
    ``function``, ``arguments``, ``requested_at``, ``gate``: the position of
    the waiting gate in the gate list, ``index``: the call's position in its
    batch). A call behind two approval gates is listed once per gate, the
    second only after the first approved it."""
    return list(await handle.query(PENDING_QUERY))


async def _send(handle: WorkflowHandle[Any, Any], decision: Decision, signal: bool) -> None:
    if signal:
        await handle.signal(DECIDE_SIGNAL, decision)
    else:
        await handle.execute_update(DECIDE_UPDATE, decision)


async def approve(handle: WorkflowHandle[Any, Any], call_id: str, *, by: str, reason: str | None = None,
                  signal: bool = False) -> None:
    """Approve a pending tool call through the update ``lionops.decide``: the
    workflow rejects an unknown or already decided call id
    (``WorkflowUpdateFailedError``). With ``signal=True`` the signal
    ``lionops.decision`` is sent instead: no answer, a bad one is logged and
    ignored by the workflow."""
    await _send(handle, Decision(call_id=call_id, approved=True, by=by, reason=reason), signal)


async def deny(handle: WorkflowHandle[Any, Any], call_id: str, *, by: str, reason: str | None = None,
               signal: bool = False) -> None:
    """Deny a pending tool call (the model sees the governance denial payload);
    ``signal`` as for :func:`approve`."""
    await _send(handle, Decision(call_id=call_id, approved=False, by=by, reason=reason), signal)
