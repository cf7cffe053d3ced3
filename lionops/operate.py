"""``operate``: the coordinator (ADR-0022 D2–D4) over prepared parameters.

``prepare_operate_kw`` (D1) lives in :mod:`lionops.pipeline.prepare`; the
call runs as the machine in ``states/operate.toml``
(:mod:`lionops.pipeline.machine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._names import PROVIDER_OPTIONS
from .pipeline.context import BranchLike, OperationContext
from .pipeline.machine import run_operation
from .pipeline.prepare import REMOVED_KEYWORDS, misspelled_keyword, prepare_operate_kw
from .pipeline.validate import HANDLE_VALIDATION_VALUES

if TYPE_CHECKING:
    from .operative import Operative
    from .params import ActionParam, ChatParam, ParseParam

__all__ = [
    "prepare_operate_kw", "operate", "REMOVED_KEYWORDS", "HANDLE_VALIDATION_VALUES",
    "PROVIDER_OPTIONS", "misspelled_keyword",
]


async def operate(
    branch: BranchLike,
    instruction: Any,
    chat_param: ChatParam,
    action_param: ActionParam | None = None,
    parse_param: ParseParam | None = None,
    handle_validation: str = "return_value",
    invoke_actions: bool = True,
    skip_validation: bool = False,
    clear_messages: bool = False,
    reason: bool = False,
    field_models: list[Any] | None = None,
    operative: Operative | None = None,
    middle: Any = None,
) -> Any:
    """The coordinator (ADR-0022 D2–D4) over already-prepared parameters.

    Runs the operate machine from ``prepare`` (which has nothing left to
    normalize) to a terminal state; the trace is appended to
    ``branch.traces`` (also when this raises). Returns a model instance, a
    mapping, text or ``None``; raises what the machine's exit raises (see
    ``diagrams/operate.md``).
    """
    ctx = OperationContext(
        branch=branch, instruction=instruction, chat_param=chat_param,
        action_param=action_param, parse_param=parse_param,
        handle_validation=handle_validation, invoke_actions=invoke_actions,
        skip_validation=skip_validation, clear_messages=clear_messages,
        reason=reason, field_models=field_models, operative=operative, middle=middle,
    )
    return (await run_operation(ctx)).result
