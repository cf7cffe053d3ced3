"""Deferred tool calls: the gate answer :class:`Defer`, the decisions
:class:`Approve` and :class:`Deny`, and :class:`PendingCall`, what a
suspended operation waits on (see docs/governance.md).

A gate check may return ``Defer(reason=...)`` instead of ``True``/``False``.
The call is not run; the operation ends at the exit ``deferred`` (state
``suspended``), and ``branch.pending_calls()`` lists it. ``branch.resume()``
takes one decision per call id and runs exactly the stored call, once.

Everything here is plain data: a :class:`PendingCall` dumps to JSON and
loads back without importing anything named in it.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import to_jsonable_python

from ._secrets import scrubbed_message

__all__ = [
    "Defer", "Approve", "Deny", "TaggedDecision", "PendingCall", "DecisionRecord", "call_digest", "jsonable_arguments",
    "now_iso", "kept_reason", "REASON_LIMIT",
]


class Defer(BaseModel):
    """A gate answer: neither allow nor deny now; a person decides later.

    The call waits as a :class:`PendingCall` until ``branch.resume()`` gets
    an :class:`Approve` or a :class:`Deny` for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1)


class Approve(BaseModel):
    """A decision: run the deferred call, exactly as it was deferred."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    by: str = Field(min_length=1)
    reason: str | None = None
    #: tells an approval from a denial in their JSON form (a durable approval's update payload)
    kind: Literal["approve"] = "approve"

    @field_validator("by")
    @classmethod
    def _kept_by(cls, by: str) -> str:
        """Who decided, kept as a reason is: bounded, credentials replaced."""
        return kept_reason(by) or by


class Deny(BaseModel):
    """A decision: never run the deferred call; the model gets a denial payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    by: str = Field(min_length=1)
    reason: str | None = None
    #: tells a denial from an approval in their JSON form
    kind: Literal["deny"] = "deny"

    @field_validator("by")
    @classmethod
    def _kept_by(cls, by: str) -> str:
        """Who decided, kept as a reason is: bounded, credentials replaced."""
        return kept_reason(by) or by


#: One decision as data: ``{"kind": "approve" | "deny", "by": ..., "reason": ...}``.
TaggedDecision = Annotated[Approve | Deny, Field(discriminator="kind")]


class PendingCall(BaseModel):
    """A deferred tool call waiting for a decision.

    Attributes:
        call_id: the key of its decision in ``branch.resume({call_id: ...})``
            (the provider's call id, else one made when it was deferred).
        function: the tool's name.
        arguments: the validated argument values the gate saw (their JSON
            form after a restore); an approved call runs with exactly these.
        reason: what the gate said when it deferred.
        digest: SHA-256 over the tool's offered definition and the
            arguments: a call whose tool changed since is refused.
        index: position of the request in its round.
        operation: the id of the suspended operation that holds it.
        deferred_at: when it was deferred (UTC, ISO 8601).
        gate: the position of the waiting gate in a durable branch's
            ``gate=`` list (a ``HumanApproval``); ``None`` in process.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    function: str
    arguments: dict[str, Any]
    reason: str
    digest: str
    index: int
    operation: str
    deferred_at: str
    gate: int | None = None


class DecisionRecord(BaseModel):
    """One decision on a deferred call: who, when, why (in the trace's
    ``meta["approvals"]``, the event log as ``approval``, and the
    ``metadata["approval"]`` of the call's messages). ``timed_out``: a
    durable ``HumanApproval`` got no decision in time (denied, ``by`` is
    ``None``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    function: str
    decision: Literal["approved", "denied", "timed_out"]
    by: str | None
    reason: str | None
    deferred_at: str
    decided_at: str


#: The longest reason (a gate's ``Defer`` or ``Deny``, a person's decision) lionops keeps or tells (characters).
REASON_LIMIT = 200


def kept_reason(reason: str | None) -> str | None:
    """A reason as it is kept (pending calls, records, log, messages, traces,
    snapshots, spans) and told to the model: at most :data:`REASON_LIMIT`
    characters (``...`` marks a cut), credentials and the values of secret
    environment variables replaced by ``[redacted]``."""
    if reason is None:
        return None
    return scrubbed_message(reason, os.environ, limit=REASON_LIMIT)


def now_iso() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat()


def jsonable_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The JSON form of validated argument values (pydantic's rules)."""
    out = to_jsonable_python(arguments)
    assert isinstance(out, dict)
    return out


def call_digest(function: str, definition: str, arguments: dict[str, Any]) -> str:
    """SHA-256 (hex) binding a call to its tool definition (the offered
    schema's JSON text) and the JSON form of its arguments."""
    doc = json.dumps({"function": function, "definition": definition, "arguments": arguments},
                     sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(doc.encode()).hexdigest()
