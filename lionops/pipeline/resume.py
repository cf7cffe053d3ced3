"""Suspended operations: calls a gate deferred, and their resumption (ADR-0022 D4).

When a gate answers :class:`~lionops.governance.Defer`, ``act()`` records the
call as ``deferred`` and does not run it; the calls the gates allowed in the
same round run at once (the documented policy: an allowed call never waits
for another call's decision). The ``act`` phase then keeps the round as a
:class:`Suspended` operation on the branch, and the machine ends at
``deferred`` → ``suspended``.

``Branch.resume(decisions)`` checks every decision before anything runs
(:func:`claim`), then drives a new trace ``prepare`` → ``resumed`` → ``act``:
approved calls run with exactly the values their gates saw (never validated a
second time in process; after a restore, decoded from the stored JSON and
refused unless they dump back to it unchanged), denied ones get a denial
payload, each decision is recorded (trace ``meta["approvals"]``, the event
log ``approval``, the messages' ``metadata["approval"]``). When no call of
the round waits any more, ``enrich`` attaches every response of the round.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .._defaults import DEFAULT_ACTION_CALL_PARAMS
from .._text import safe_str
from ..errors import (
    ArgumentTypeError,
    CallAlreadyDecidedError,
    ConfigurationError,
    ResumeError,
    SnapshotError,
    ToolChangedError,
    UnknownCallError,
)
from ..governance import (
    Approve,
    DecisionRecord,
    Deny,
    PendingCall,
    call_digest,
    jsonable_arguments,
    kept_reason,
    now_iso,
)
from ..messages import to_jsonable
from ..models import ActionRecord
from ..observability import observe
from ..operative import shared_operative
from ..params import ActionParam
from ..tools import Tool, ToolArgumentsError
from . import act as act_module
from .act import DENIAL_ERROR, _Batch, _record, _Request, invoke
from .context import OperationContext
from .enrich import can_attach_responses

__all__ = [
    "DecisionLedger", "Suspended", "Suspensions", "ResumeWork", "suspend", "claim", "release", "phase", "act_phase",
    "as_response_model",
]


@dataclass(eq=False, slots=True)
class Suspended:
    """One operation waiting at ``suspended``: its round and its pending calls."""

    id: str
    result: Any
    attachable: bool
    action_param: ActionParam
    #: the decided records of the round (allowed calls that ran, denials...), by index
    records: list[ActionRecord]
    pending: dict[str, PendingCall]
    #: call id -> the raw arguments and provider call id of its request
    requests: dict[str, tuple[Any, str | None]]
    #: call id -> the validated values the gate saw (in this process only; absent after a restore)
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: call id -> the Tool its gates saw (in this process only; absent after a restore)
    tools: dict[str, Tool] = field(default_factory=dict)
    operative: Any = None
    #: resumptions of this operation in flight (only the last to end enriches)
    running: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept in a branch snapshot (data only)."""
        param = self.action_param
        call_params = param.action_call_params or DEFAULT_ACTION_CALL_PARAMS
        return {
            "id": self.id, "result": to_jsonable(self.result), "attachable": self.attachable,
            "strategy": param.strategy, "suppress_errors": param.suppress_errors,
            "tool_timeout": call_params.retry_timeout,
            "records": [r.to_dict() for r in self.records],
            "pending": [p.model_dump(mode="json") for p in self.pending.values()],
            "requests": {k: {"raw_arguments": to_jsonable(raw), "provider_call_id": pid}
                         for k, (raw, pid) in self.requests.items()},
        }

    @classmethod
    def from_dict(cls, d: Any) -> Suspended:
        """Rebuild from :meth:`to_dict` (plain data: a dict result stays a dict)."""
        try:
            pending = [PendingCall.model_validate(p) for p in d["pending"]]
            requests = d["requests"]
            lost = [p.call_id for p in pending if not isinstance(requests.get(p.call_id), dict)]
            if lost:  # a pending call without its request could be decided but never answered
                raise SnapshotError(f"malformed suspended operation: no request for pending calls {lost[:5]}")
            timeout = d.get("tool_timeout")
            param = ActionParam(
                strategy=str(d["strategy"]), suppress_errors=d["suppress_errors"] is True,
                action_call_params=(DEFAULT_ACTION_CALL_PARAMS if timeout is None
                                    else type(DEFAULT_ACTION_CALL_PARAMS)(retry_timeout=float(timeout))),
            )
            return cls(
                id=str(d["id"]), result=d.get("result"), attachable=d.get("attachable") is True,
                action_param=param, records=[ActionRecord.from_dict(r) for r in d["records"]],
                pending={p.call_id: p for p in pending},
                requests={k: (v.get("raw_arguments"), v.get("provider_call_id")) for k, v in d["requests"].items()},
            )
        except SnapshotError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SnapshotError(f"malformed suspended operation: {type(exc).__name__}: {safe_str(exc)}") from None


@dataclass(frozen=True, slots=True)
class DecisionLedger:
    """The decisions taken on the calls of one snapshot file, kept beside it
    (``<file>.decided/``, one file per call, named by a hash of its id and
    created exclusively): every branch restored from the file, in any
    process, decides a call only if no other did, so restoring a snapshot
    twice never runs a call twice."""

    directory: Path

    @classmethod
    def beside(cls, path: str | os.PathLike[str]) -> DecisionLedger:
        return cls(Path(str(Path(path).resolve()) + ".decided"))

    def _file(self, call_id: str) -> Path:
        return self.directory / hashlib.sha256(call_id.encode()).hexdigest()

    def take(self, call_id: str, verdict: str) -> str | None:
        """Record ``verdict`` for the call; ``None`` when this was the first
        decision, else what was decided before."""
        file = self._file(call_id)
        try:
            self.directory.mkdir(exist_ok=True)
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            try:
                return file.read_text() or "decided by another restore of the snapshot"
            except OSError:
                return "decided by another restore of the snapshot"
        except OSError as exc:  # no record of the decision can be kept: nothing is decided
            raise ResumeError(f"cannot record the decision beside the snapshot ({self.directory}): "
                              f"{type(exc).__name__}") from None
        with os.fdopen(fd, "w") as out:
            out.write(verdict)
        return None

    def give_back(self, call_id: str) -> None:
        """Forget the decision of a call that did not run (its resumption ended first)."""
        self._file(call_id).unlink(missing_ok=True)


@dataclass(eq=False, slots=True)
class Suspensions:
    """A branch's suspended operations, and every call decided so far
    (call id -> who decided what), so nothing is decided twice; ``ledger``:
    the decisions of the snapshot file the branch was restored from or
    first written to, shared by every restore of it."""

    ops: dict[str, Suspended] = field(default_factory=dict)
    decided: dict[str, str] = field(default_factory=dict)
    ledger: DecisionLedger | None = None

    def forget(self, call_id: str) -> None:
        """A decided call that did not run is undecided again."""
        self.decided.pop(call_id, None)
        if self.ledger is not None:
            self.ledger.give_back(call_id)

    def pending_calls(self) -> list[PendingCall]:
        return [p for op in self.ops.values() for p in sorted(op.pending.values(), key=lambda p: p.index)]

    def to_dict(self) -> dict[str, Any]:
        return {"operations": [op.to_dict() for op in self.ops.values()], "decided": dict(self.decided)}

    @classmethod
    def from_dict(cls, d: Any) -> Suspensions:
        if not isinstance(d, dict):
            raise SnapshotError(f"malformed suspensions: {type(d).__name__}")
        ops = [Suspended.from_dict(op) for op in d.get("operations", [])]
        decided = d.get("decided", {})
        if not isinstance(decided, dict) or not all(isinstance(v, str) for v in decided.values()):
            raise SnapshotError("malformed decided calls")
        return cls({op.id: op for op in ops}, dict(decided))


@dataclass(eq=False, slots=True)
class ResumeWork:
    """What one resumption runs: checked decisions with the values each approved call gets."""

    op: Suspended
    #: call id -> (its pending call, the decision, the arguments an approved call runs with, its tool),
    #: in request order
    calls: dict[str, tuple[PendingCall, Approve | Deny, dict[str, Any] | None, Tool | None]]
    #: whether the ``act`` phase took the calls (else :func:`release` gives them back)
    started: bool = False


def _new_call_id() -> str:
    return "deferred_" + os.urandom(8).hex()


def suspend(ctx: OperationContext, suspensions: Suspensions) -> Suspended | None:
    """After ``act()``: keep the round of ``ctx`` as a suspended operation
    when a gate deferred one of its calls (``None`` when none was deferred)."""
    deferred = [r for r in ctx.actions if r.decision == "deferred"]
    if not deferred:
        return None
    assert ctx.action_param is not None
    op = Suspended(
        id=os.urandom(8).hex(), result=ctx.result, attachable=ctx.attachable, action_param=ctx.action_param,
        records=[r for r in ctx.actions if r.decision != "deferred"], pending={}, requests={},
        operative=ctx.operative,
    )
    at = now_iso()
    taken = set(suspensions.decided) | {p.call_id for p in suspensions.pending_calls()}
    for rec in deferred:
        # the provider's call id, unless it is not one (absent) or names another call already
        call_id = rec.call_id if rec.call_id and rec.call_id not in taken else _new_call_id()
        taken.add(call_id)
        tool = ctx.branch.acts.get(rec.function)
        assert tool is not None and rec.arguments is not None  # a deferred call validated against its tool
        values = copy.deepcopy(rec.arguments)
        stored = jsonable_arguments(values)
        op.values[call_id] = values
        op.tools[call_id] = tool
        op.requests[call_id] = (rec.raw_arguments, rec.call_id)
        op.pending[call_id] = PendingCall(
            call_id=call_id, function=rec.function, arguments=copy.deepcopy(values), reason=rec.reason or "",
            digest=call_digest(rec.function, tool.offered_schema.json, stored), index=rec.index,
            operation=op.id, deferred_at=at,
        )
    suspensions.ops[op.id] = op
    ctx.meta["suspended"] = {"operation": op.id, "pending": list(op.pending)}
    return op


def _arguments(op: Suspended, call: PendingCall, tool: Tool | None) -> dict[str, Any]:
    """The values an approved call runs with: the very values the gate saw
    (a copy), or after a restore the stored JSON decoded into the tool's
    parameter types, refused unless it dumps back to exactly what was stored
    and the tool's definition is the one the call was deferred with."""
    if tool is None:
        raise ToolChangedError(call.call_id, call.function, "no tool of that name is registered")
    values = op.values.get(call.call_id)
    seen = op.tools.get(call.call_id)
    if seen is not None and tool is not seen:  # in process: the very Tool its gates saw
        raise ToolChangedError(call.call_id, call.function,
                               "a tool of that name was registered anew since it was deferred")
    stored = jsonable_arguments(values) if values is not None else call.arguments
    if call_digest(call.function, tool.offered_schema.json, stored) != call.digest:
        raise ToolChangedError(call.call_id, call.function,
                               "the tool's definition or the stored arguments differ from the deferred call")
    if values is not None:
        return copy.deepcopy(values)
    try:
        rebuilt = tool.validate_arguments(dict(call.arguments))
    except (ToolArgumentsError, ValueError) as exc:
        raise ToolChangedError(call.call_id, call.function, f"stored arguments do not decode: {exc}") from None
    if jsonable_arguments(rebuilt) != call.arguments and not _fixed_point(tool, rebuilt, call.arguments):
        raise ToolChangedError(call.call_id, call.function, "stored arguments do not decode to the same values")
    return rebuilt


def _fixed_point(tool: Tool, values: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether values decoded from a call's stored JSON differ from it only
    in the order of lists the values do not hold in order (a set, written
    in the order of the process that stored it), and decode again to
    themselves: a validator that changes what it is given is never one."""
    dumped = jsonable_arguments(values)
    if _unordered(dumped) != _unordered(stored):
        return False
    try:
        return bool(tool.validate_arguments(dumped) == values)
    except (ToolArgumentsError, ValueError):
        return False


def _unordered(data: Any) -> Any:
    """JSON data with every list's items in one order (to compare sets' JSON forms)."""
    if isinstance(data, dict):
        return {k: _unordered(v) for k, v in data.items()}
    if isinstance(data, list):
        items = [_unordered(v) for v in data]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return data


def _take(suspensions: Suspensions, ledger: DecisionLedger, op: Suspended, verdicts: dict[str, str]) -> None:
    """Record each decision in the snapshot's ledger, all or none: a call a
    branch restored from the same file decided is ``CallAlreadyDecidedError``
    (and decided here too: it no longer waits)."""
    taken: list[str] = []
    try:
        for call_id, verdict in verdicts.items():
            before = ledger.take(call_id, verdict)
            if before is not None:
                suspensions.decided[call_id] = before
                del op.pending[call_id]
                raise CallAlreadyDecidedError(call_id, before)
            taken.append(call_id)
    except ResumeError:
        for done in taken:
            ledger.give_back(done)
        raise


def claim(suspensions: Suspensions, tools: Any, decisions: Any) -> ResumeWork:
    """Check every decision, then mark each call decided (before anything
    runs, so no call is decided or run twice). Raises a ResumeError (nothing
    decided) for an unknown call, one decided before, decisions spanning
    operations, or a changed tool; TypeError for a value that is not
    ``Approve``/``Deny``."""
    if not isinstance(decisions, Mapping) or not decisions:
        raise ArgumentTypeError("decisions must be a non-empty mapping {call_id: Approve(...) | Deny(...)}")
    owners: dict[str, Suspended] = {}
    for call_id, decision in decisions.items():
        if not isinstance(decision, (Approve, Deny)):
            raise ArgumentTypeError(f"decision for {call_id!r} must be Approve or Deny, got {type(decision).__name__}")
        if call_id in suspensions.decided:
            raise CallAlreadyDecidedError(call_id, suspensions.decided[call_id])
        owner = next((op for op in suspensions.ops.values() if call_id in op.pending), None)
        if owner is None:
            raise UnknownCallError(call_id, [p.call_id for p in suspensions.pending_calls()])
        owners[call_id] = owner
    if len({id(op) for op in owners.values()}) > 1:
        raise ResumeError("the decisions are for calls of several suspended operations; resume each on its own")
    op = next(iter(owners.values()))
    calls: dict[str, tuple[PendingCall, Approve | Deny, dict[str, Any] | None, Tool | None]] = {}
    for call in sorted((op.pending[c] for c in decisions), key=lambda p: p.index):
        decision = decisions[call.call_id]
        if isinstance(decision, Approve):
            tool = tools.get(call.function)
            calls[call.call_id] = (call, decision, _arguments(op, call, tool), tool)
        else:
            calls[call.call_id] = (call, decision, None, None)
    # Claimed at once, with nothing awaited since the checks: no other
    # resumption can decide these calls, and none lists them as pending;
    # nor can a branch restored from the same snapshot (its ledger).
    verdicts = {call_id: ("approved" if isinstance(decision, Approve) else "denied") + f" by {decision.by}"
                for call_id, (_, decision, _, _) in calls.items()}
    if suspensions.ledger is not None:
        _take(suspensions, suspensions.ledger, op, verdicts)
    for call_id, verdict in verdicts.items():
        suspensions.decided[call_id] = verdict
        del op.pending[call_id]
    op.running += 1
    return ResumeWork(op, calls)


def as_response_model(op: Suspended, response_format: Any) -> None:
    """Give a restored suspended result (its JSON data, a dict) back the type
    of ``response_format``, the model the operation was asked for: validated
    into the call's generated response type (its fields plus the action
    fields), so ``enrich`` attaches the responses to a model, as in the
    process that deferred. A result that is a model already must be one.

    Raises:
        ArgumentTypeError: ``response_format`` is not a pydantic model class.
        ResumeError: the stored result does not validate into it, or is a
            model of another class.
    """
    if not (isinstance(response_format, type) and issubclass(response_format, BaseModel)):
        raise ArgumentTypeError(f"response_format must be a pydantic model class, got {response_format!r}")
    result = op.result
    if isinstance(result, BaseModel):
        if not isinstance(result, response_format):
            raise ResumeError(f"the suspended result is a {type(result).__name__}, not a {response_format.__name__}")
        return
    if not isinstance(result, dict):
        raise ResumeError(f"the suspended result is a {type(result).__name__}, not {response_format.__name__} data")
    reason = "reason" in result and "reason" not in response_format.model_fields
    operative = shared_operative(response_format, reason=reason, actions=True).fresh()
    try:
        model = operative.response_type.model_validate(result)
    except ValidationError as exc:
        raise ResumeError(f"the suspended result is not {response_format.__name__} data: "
                          f"{safe_str(exc.errors()[0]['msg'])}") from None
    op.result, op.operative = model, operative
    op.attachable = op.attachable and can_attach_responses(model, operative)


def release(suspensions: Suspensions, work: ResumeWork) -> None:
    """Give back the calls of a resumption that ended before its ``act``
    phase took them (cancelled on the way): nothing of them ran, so they are
    pending and undecided again."""
    if work.started:
        return
    work.started = True
    work.op.running -= 1
    for call_id, (call, _, _, _) in work.calls.items():
        suspensions.forget(call_id)
        work.op.pending[call_id] = call


async def phase(ctx: OperationContext, suspensions: Suspensions) -> None:
    """The ``act`` phase of a resumption: run or deny each decided call, record every decision."""
    work: ResumeWork = ctx.resume
    work.started = True
    op, branch = work.op, ctx.branch
    ctx.result = op.result  # what the caller gets also while calls still wait (exit deferred)
    ctx.meta["resumed"] = op.id
    call_params = op.action_param.action_call_params or DEFAULT_ACTION_CALL_PARAMS
    batch = _Batch(branch, op.action_param, {})
    approvals = ctx.meta.setdefault("approvals", [])
    notes: dict[int, dict[str, Any]] = {}
    left = dict(work.calls)
    try:
        for call_id, (call, decision, values, tool) in work.calls.items():
            del left[call_id]
            raw, provider_id = op.requests.pop(call_id)
            op.values.pop(call_id, None)
            op.tools.pop(call_id, None)
            approved = isinstance(decision, Approve)
            reason = kept_reason(decision.reason)
            note = DecisionRecord(
                call_id=call_id, function=call.function, decision="approved" if approved else "denied",
                by=decision.by, reason=reason, deferred_at=call.deferred_at, decided_at=now_iso(),
            ).model_dump()
            approvals.append(note)
            notes[call.index] = note
            branch.logs.log("approval", {**note, "branch": branch.id, "operation": op.id})
            req = _Request(call.index, call.function, raw, None, provider_id)
            if approved:
                assert tool is not None and values is not None
                await observe.tool_call(branch, req, invoke(batch, req, tool, raw, values, copy.deepcopy(values),
                                                           call_params.retry_timeout))
            else:
                output = {"error": DENIAL_ERROR, "function": call.function, "by": decision.by, "reason": reason}
                why = f"denied by {decision.by}" + (f": {reason}" if reason else "")
                batch.keep(_record(req, raw, "denied", arguments=dict(call.arguments), reason=why, output=output))
    finally:
        for call_id, (call, _, _, _) in left.items():  # never reached (an earlier call raised): pending again
            suspensions.forget(call_id)
            op.pending[call_id] = call
        new = sorted(batch.records.values(), key=lambda r: r.index)
        ctx.actions.extend(new)
        op.records.extend(new)
        _write_messages(branch, new, notes)
        op.running -= 1
    if op.pending or op.running:  # calls wait, or another resumption of the round is still running
        ctx.deferred = True
        return
    suspensions.ops.pop(op.id, None)
    ctx.attachable, ctx.operative = op.attachable, op.operative
    ctx.action_param = op.action_param
    ctx.responses = [r.response() for r in sorted(op.records, key=lambda r: r.index)]
    ctx.acted = True


def _write_messages(branch: Any, records: list[ActionRecord], notes: dict[int, dict[str, Any]]) -> None:
    for rec in records:
        meta: dict[str, Any] = {"index": rec.index, "decision": rec.decision, "approval": notes.get(rec.index)}
        if rec.call_id is not None:
            meta["call_id"] = rec.call_id
        branch.messages.add_action_exchange(rec.function, rec.raw_arguments, rec.output, sender=branch.id,
                                            recipient=rec.function, metadata=meta)


async def act_phase(ctx: OperationContext) -> None:
    """D4, the ``act`` state's handler: a resumption's decided calls, else
    every request through ``act()``; a round with deferred calls is kept as
    a suspended operation (the machine then takes ``deferred``)."""
    suspensions = getattr(ctx.branch, "suspensions", None)
    if ctx.resume is not None:
        assert suspensions is not None
        await phase(ctx, suspensions)
        return
    await act_module.phase(ctx)
    if any(r.decision == "deferred" for r in ctx.actions):
        if not isinstance(suspensions, Suspensions):
            raise ConfigurationError(f"{type(ctx.branch).__name__} cannot hold deferred tool calls")
        suspend(ctx, suspensions)
        ctx.deferred, ctx.acted = True, False
