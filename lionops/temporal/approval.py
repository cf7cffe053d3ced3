"""Human approval of tool calls: a gate that waits for a decision sent to the workflow.

A :class:`HumanApproval` in a durable branch's ``gate`` holds each tool call
it covers until an :class:`~lionops.Approve` or a :class:`~lionops.Deny`
arrives for its call id (one per tool call *and* gate: each gate of a list
decides for itself), or until ``timeout`` passes, which denies (fail
closed). The types are those of an in-process deferred call
(docs/governance.md), so one approval screen serves both:

- the query ``lionops.pending`` lists the waiting calls as
  :class:`~lionops.PendingCall` records, with the same binding hash;
- the update ``lionops.decide`` (or the signal ``lionops.decision``) takes
  ``{call_id: Approve(...) | Deny(...)}``, as ``branch.resume`` does: every
  decision is checked before any is taken, calls without a decision keep
  waiting, and an unknown or already decided call id rejects the whole
  update (:class:`~lionops.UnknownCallError`,
  :class:`~lionops.CallAlreadyDecidedError`).

Every decision (who, when, why) is recorded in the trace
(``trace.meta["approvals"]``), the event log (``approval``) and on the tool
call's ``action_request``/``action_response`` messages
(``metadata["approval"]``), as :class:`ApprovalRecord`, a
:class:`~lionops.governance.DecisionRecord` with the gate's facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from .._json import loads as bounded_json
from .._text import safe_str
from ..errors import (
    ArgumentTypeError,
    CallAlreadyDecidedError,
    ConfigurationError,
    JSONLimitError,
    LionopsError,
    UnknownCallError,
)
from ..governance import Approve, DecisionRecord, Deny, PendingCall, TaggedDecision, kept_reason
from ..trace import current_meta
from .errors import ApprovalError

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

    from .branch import _RunState

__all__ = [
    "HumanApproval", "ApprovalRecord", "decide", "approve", "deny", "pending_approvals",
    "DECIDE_UPDATE", "DECIDE_SIGNAL", "PENDING_QUERY", "MAX_DECISIONS_BYTES", "MAX_DECISIONS_DEPTH",
]

DECIDE_UPDATE = "lionops.decide"
DECIDE_SIGNAL = "lionops.decision"
PENDING_QUERY = "lionops.pending"
#: The largest decisions payload a workflow reads (bytes of JSON); a larger one is refused unread.
MAX_DECISIONS_BYTES = 64 * 1024
#: The deepest nesting a decisions payload may have (``{call_id: {"by": ...}}`` is 2).
MAX_DECISIONS_DEPTH = 4

_DECISIONS: TypeAdapter[dict[str, Approve | Deny]] = TypeAdapter(dict[str, TaggedDecision])


class ApprovalRecord(DecisionRecord):
    """What was decided about one tool call held by a ``HumanApproval``: the
    in-process :class:`~lionops.governance.DecisionRecord` (call id, function,
    decision, who, why, when deferred and decided; ``decision="timed_out"``
    denies) with the gate's facts."""

    arguments: dict[str, Any]
    #: the position of the deciding gate in the durable branch's ``gate`` list
    gate: int = 0
    #: the position of the tool call in its batch of requests
    index: int | None = None
    approved: bool


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

    def covers(self, function: str) -> bool:
        return self.functions is None or function in self.functions

    async def wait(self, state: _RunState, call: PendingCall) -> bool | Deny:
        """Hold ``call`` until a decision for its call id or the timeout
        (workflow code): ``True`` when approved, the :class:`~lionops.Deny`
        when denied (its reason is told to the model, as in process),
        ``False`` when no decision came in time."""
        state.pending[call.call_id] = call
        try:
            await workflow.wait_condition(lambda: call.call_id in state.decisions, timeout=self.timeout_s)
            decision: Approve | Deny | None = state.decisions[call.call_id]
        except TimeoutError:
            decision = None
        finally:
            state.pending.pop(call.call_id, None)
        if decision is None:
            state.decided.setdefault(call.call_id, f"timed out after {self.timeout_s:g}s")
        record = ApprovalRecord(
            call_id=call.call_id, function=call.function, arguments=dict(call.arguments),
            gate=call.gate or 0, index=call.index,
            decision="timed_out" if decision is None else ("approved" if isinstance(decision, Approve) else "denied"),
            approved=isinstance(decision, Approve),
            by=decision.by if decision else None,
            reason=kept_reason(decision.reason) if decision else f"no decision within {self.timeout_s:g}s",
            deferred_at=call.deferred_at, decided_at=workflow.now().isoformat(),
        )
        state.records.append(record)
        meta = current_meta()
        if meta is not None:
            meta.setdefault("approvals", []).append(record.model_dump())
        return decision if isinstance(decision, Deny) else record.approved


# ------------------------------------------------------------ workflow side

def read_decisions(raw: RawValue) -> dict[str, Approve | Deny]:
    """The decisions of an update or signal payload, read within bounds:
    :class:`~lionops.errors.JSONLimitError` past :data:`MAX_DECISIONS_BYTES`
    or :data:`MAX_DECISIONS_DEPTH` (checked before decoding),
    :class:`~lionops.errors.ArgumentTypeError` for anything but a non-empty
    mapping ``{call_id: Approve | Deny}``."""
    payload = raw.payload
    encoding = payload.metadata.get("encoding", b"")
    if encoding != b"json/plain":
        raise ArgumentTypeError(f"decisions must be JSON, got encoding {encoding[:40]!r}")
    data = bounded_json(payload.data, max_depth=MAX_DECISIONS_DEPTH, max_chars=MAX_DECISIONS_BYTES,
                        what="a decisions payload")
    if not isinstance(data, dict) or not data:
        raise ArgumentTypeError("decisions must be a non-empty mapping {call_id: Approve(...) | Deny(...)}")
    try:
        return _DECISIONS.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ArgumentTypeError(f"decisions must be Approve or Deny: {where}: {first['msg']}") from None


def check_decisions(state: _RunState, decisions: Mapping[str, Approve | Deny]) -> None:
    """Raise unless every decision names a call that is waiting: a call
    decided before (approved, denied or timed out) is
    :class:`~lionops.CallAlreadyDecidedError`, any other id
    :class:`~lionops.UnknownCallError`."""
    for call_id in decisions:
        if call_id in state.decided:
            raise CallAlreadyDecidedError(call_id, state.decided[call_id])
        if call_id not in state.pending:
            raise UnknownCallError(call_id, state.pending)


def take_decisions(state: _RunState, decisions: Mapping[str, Approve | Deny]) -> None:
    """Check every decision, then take them all (none is taken when one is refused)."""
    check_decisions(state, decisions)
    for call_id, decision in decisions.items():
        verb = "approved" if isinstance(decision, Approve) else "denied"
        state.decided[call_id] = f"{verb} by {decision.by}"
        state.decisions[call_id] = decision


def rejection(exc: LionopsError) -> ApplicationError:
    """What the client gets for refused decisions: the error's type, its
    secret-free message and the facts to rebuild it (:func:`decide`)."""
    facts: dict[str, Any] = {}
    for name in ("call_id", "pending", "decided", "limit", "found", "maximum"):
        if hasattr(exc, name):
            facts[name] = getattr(exc, name)
    return ApplicationError(safe_str(exc), facts, type=type(exc).__name__, non_retryable=True)


# ------------------------------------------------------------ client side

def _rebuilt(error_type: str | None, message: str, facts: dict[str, Any]) -> LionopsError:
    """The typed error the workflow refused the decisions with."""
    try:
        if error_type == "UnknownCallError":
            return UnknownCallError(facts["call_id"], facts["pending"])
        if error_type == "CallAlreadyDecidedError":
            return CallAlreadyDecidedError(facts["call_id"], facts["decided"])
        if error_type == "JSONLimitError":
            return JSONLimitError(message, limit=facts["limit"], found=facts["found"], maximum=facts["maximum"])
        if error_type == "ArgumentTypeError":
            return ArgumentTypeError(message)
    except (KeyError, TypeError):
        pass
    return ApprovalError(f"the workflow refused the decisions: {error_type}: {message}")


async def pending_approvals(handle: WorkflowHandle[Any, Any]) -> list[PendingCall]:
    """The tool calls of a workflow waiting for a decision, as
    :class:`~lionops.PendingCall` records (``gate``: the position of the
    waiting gate in the gate list, ``index``: the call's position in its
    batch). A call behind two approval gates is listed once per gate, the
    second only after the first approved it."""
    return list(await handle.query(PENDING_QUERY, result_type=list[PendingCall]))


async def decide(handle: WorkflowHandle[Any, Any], decisions: Mapping[str, Approve | Deny], *,
                 signal: bool = False) -> None:
    """Send ``{call_id: Approve(by=..., reason=...) | Deny(by=..., reason=...)}``
    to the workflow, as ``branch.resume`` takes them in process.

    Through the update ``lionops.decide`` the workflow checks every decision
    before it takes any; a refusal raises here, with nothing taken:
    :class:`~lionops.UnknownCallError`, :class:`~lionops.CallAlreadyDecidedError`,
    :class:`~lionops.errors.JSONLimitError` (a payload past the bounds),
    :class:`~lionops.errors.ArgumentTypeError`, else :class:`ApprovalError`.
    With ``signal=True`` the signal ``lionops.decision`` is sent instead: no
    answer; the workflow logs and ignores decisions it refuses.
    """
    from temporalio.client import WorkflowUpdateFailedError

    if not isinstance(decisions, Mapping) or not decisions:
        raise ArgumentTypeError("decisions must be a non-empty mapping {call_id: Approve(...) | Deny(...)}")
    for call_id, decision in decisions.items():
        if not isinstance(decision, (Approve, Deny)):
            raise ArgumentTypeError(f"decision for {call_id!r} must be Approve or Deny, got {type(decision).__name__}")
    payload = {str(k): v.model_dump(mode="json") for k, v in decisions.items()}
    if signal:
        await handle.signal(DECIDE_SIGNAL, payload)
        return
    try:
        await handle.execute_update(DECIDE_UPDATE, payload)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        if not isinstance(cause, ApplicationError):
            raise ApprovalError(f"the workflow refused the decisions: {safe_str(cause)}") from None
        facts = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
        raise _rebuilt(cause.type, cause.message, facts) from None


async def approve(handle: WorkflowHandle[Any, Any], call_id: str, *, by: str, reason: str | None = None,
                  signal: bool = False) -> None:
    """``decide(handle, {call_id: Approve(by=by, reason=reason)}, signal=signal)``."""
    await decide(handle, {call_id: Approve(by=by, reason=reason)}, signal=signal)


async def deny(handle: WorkflowHandle[Any, Any], call_id: str, *, by: str, reason: str | None = None,
               signal: bool = False) -> None:
    """``decide(handle, {call_id: Deny(by=by, reason=reason)}, signal=signal)``: the
    model sees the governance denial payload."""
    await decide(handle, {call_id: Deny(by=by, reason=reason)}, signal=signal)
