"""The operation context: all per-call data, kept apart from the machine,
and :class:`BranchLike`, what the pipeline needs of a branch.

``transitions`` decorates a separate carrier object with trigger methods, so
a trigger named ``skip_validation`` never shadows the ``skip_validation``
field here.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from .._hooks import HookPoint
    from ..errors import UsageLimitExceeded
    from ..messages import EventLog, MessageLog
    from ..models import ActionRecord, ActionResponseModel
    from ..operative import Operative
    from ..params import ActionParam, ChatParam, ParseParam
    from ..tools import ActionManager, ToolInvocation
    from ..trace import Trace

__all__ = ["OperationContext", "BranchLike", "Authorization"]


class Authorization(NamedTuple):
    """What authorization decided about one invocation (ADR-0022 D4):
    ``decision`` is ``"allowed"``, ``"denied"``, ``"timed_out"`` or
    ``"deferred"`` (a gate answered ``Defer``);
    ``reason`` says why it was not allowed (``None`` when allowed)."""

    decision: Literal["allowed", "denied", "timed_out", "deferred"]
    reason: str | None
    #: what the model is told of a denial (a gate's ``Deny(reason=...)``,
    #: bounded, secrets replaced); ``None``: the plain denial payload
    told: str | None = None


class BranchLike(Protocol):
    """What the pipeline reads and calls on a branch (``lionops.Branch`` is one).

    The pipeline depends on this shape only, so it never imports the façade.
    """

    id: str
    user: str | None
    chat_model: Any
    parse_model: Any
    acts: ActionManager
    messages: MessageLog
    logs: EventLog
    traces: list[Trace]
    engine: Any
    max_requests: int | None
    gate_timeout: float | None

    def has_hooks(self, point: HookPoint) -> bool:
        """Whether ``point`` has handlers (their payloads are built only then)."""
        ...

    def needs_authorization(self) -> bool:
        """Whether :meth:`authorization` has anything to ask (else all is allowed)."""
        ...

    async def authorization(self, invocation: ToolInvocation) -> Authorization:
        """The decision on ``invocation``: the branch's ``authorize`` hook asked, failing closed."""
        ...

    def emit(self, point: HookPoint, payload: dict[str, Any]) -> Awaitable[None]: ...

    def offer_writeback(self, responses: list[ActionResponseModel]) -> Awaitable[None]: ...

    def trim_history(self) -> None: ...


@dataclass(slots=True, eq=False)
class OperationContext:
    """Everything one ``operate()`` call reads and writes.

    Inputs are either ``call_kwargs`` (the public keywords, normalized by the
    ``prepare`` phase) or the prepared parameters themselves (the coordinator
    called directly).
    """

    branch: BranchLike
    call_kwargs: dict[str, Any] | None = None
    # prepared (D1)
    instruction: Any = None
    chat_param: ChatParam | None = None
    parse_param: ParseParam | None = None
    action_param: ActionParam | None = None
    handle_validation: str = "return_value"
    invoke_actions: bool = True
    skip_validation: bool = False
    clear_messages: bool = False
    reason: bool = False
    field_models: list[Any] | None = None
    operative: Operative | None = None
    middle: Any = None
    #: the branch's cached preparation these parameters came from (``None``:
    #: prepared for this call alone); the schema phase keeps its result there
    prepared_entry: Any = None
    # schema (D2)
    model_class: type | None = None
    tool_schemas_published: bool = False
    #: the Tools whose schemas were published (D2): only these can run
    offered: tuple[Any, ...] | None = None
    schema_done: bool = False
    # adapter (D3)
    middle_name: str | None = None
    adapter_calls: int = 0
    result: Any = None
    #: read once from the result by the adapter phase; the guards see only these
    mismatch: bool = False
    requests: Any = None
    attachable: bool = False
    # act / enrich (D4)
    acted: bool = False
    responses: list[ActionResponseModel | None] | None = None
    kept_responses: list[ActionResponseModel] | None = None
    enriched: bool = False
    #: the typed decision of every request act() handled, in request order
    actions: list[ActionRecord] = field(default_factory=list)
    #: calls a gate deferred that still wait for a decision (act ends at ``deferred``)
    deferred: bool = False
    #: a resumption of a suspended operation (its first transition is ``resumed``)
    resume: Any = None
    #: the usage limit the next model request would pass (the adapter phase made no request)
    limit_error: UsageLimitExceeded | None = None
    # failure
    error: BaseException | None = None
    meta: dict[str, Any] = field(default_factory=dict)
