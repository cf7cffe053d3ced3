"""The operation context: all per-call data, kept apart from the machine.

``transitions`` decorates a separate carrier object with trigger methods, so
a trigger named ``skip_validation`` never shadows the ``skip_validation``
field here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..branch import Branch
    from ..models import ActionRecord, ActionResponseModel
    from ..operative import Operative
    from ..params import ActionParam, ChatParam, ParseParam

__all__ = ["OperationContext"]


@dataclass(slots=True, eq=False)
class OperationContext:
    """Everything one ``operate()`` call reads and writes.

    Inputs are either ``call_kwargs`` (the public keywords, normalized by the
    ``prepare`` phase) or the prepared parameters themselves (the coordinator
    called directly).
    """

    branch: Branch
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
    # schema (D2)
    model_class: type | None = None
    tool_schemas_published: bool = False
    offered: frozenset[str] | None = None
    schema_done: bool = False
    # adapter (D3)
    middle_name: str | None = None
    adapter_calls: int = 0
    result: Any = None
    # act / enrich (D4)
    requests: Any = None
    acted: bool = False
    responses: list[ActionResponseModel | None] | None = None
    kept_responses: list[ActionResponseModel] | None = None
    enriched: bool = False
    #: the typed decision of every request act() handled, in request order
    actions: list[ActionRecord] = field(default_factory=list)
    # failure
    error: BaseException | None = None
    meta: dict[str, Any] = field(default_factory=dict)
