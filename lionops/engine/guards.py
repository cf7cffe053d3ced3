"""Guards: pure, synchronous predicates over the operation context.

Each is named by a ``guard`` in ``states/operate.toml``; the guard table is
the whole control flow of ``operate()``. No guard has an effect: reading
``action_requests`` from a model attribute or mapping key is the most any
guard does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from .context import OperationContext

__all__ = ["GUARDS", "read_requests", "is_mismatch", "can_attach_responses"]

Guard = Callable[[OperationContext], bool]


def read_requests(result: Any) -> Any:
    """``action_requests`` of a model attribute or mapping key; text and others: ``None`` (D4)."""
    if isinstance(result, BaseModel):
        return getattr(result, "action_requests", None)
    if isinstance(result, Mapping):
        return result.get("action_requests")
    return None


def can_attach_responses(result: Any, operative: Any) -> bool:
    """Whether ``action_responses`` can be set on ``result`` in place (D4).

    The one predicate both the gate (``requests_present`` /
    ``responses_unattachable``) and the ``enrich`` phase use, so tools run
    exactly for results enrich can attach to: a ``dict`` whose item
    assignment is ``dict``'s own, or an instance of the call's generated
    response type (it declares ``action_responses``) that is not frozen and
    keeps pydantic's own attribute assignment. A Mapping that is not a dict,
    a dict class with its own ``__setitem__``, a foreign model, a frozen
    model, a model class with its own ``__setattr__``: no slot.
    """
    if isinstance(result, dict):
        return getattr(type(result), "__setitem__", None) is dict.__setitem__
    if not isinstance(result, BaseModel) or operative is None:
        return False
    rtype = operative.response_type
    cls = type(result)
    return (
        isinstance(rtype, type) and isinstance(result, rtype)
        and "action_responses" in cls.model_fields
        and not cls.model_config.get("frozen", False)
        and getattr(cls, "__setattr__", None) is BaseModel.__setattr__
    )


def is_mismatch(ctx: OperationContext) -> bool:
    """A caller model class exists and the result is not an instance of it (D3)."""
    return ctx.model_class is not None and not isinstance(ctx.result, ctx.model_class)


def phase_raised(ctx: OperationContext) -> bool:
    return ctx.error is not None


def preparation_succeeded(ctx: OperationContext) -> bool:
    return ctx.chat_param is not None


def schema_published(ctx: OperationContext) -> bool:
    return ctx.schema_done and (ctx.action_param is None or ctx.tool_schemas_published)


def adapter_awaited_once(ctx: OperationContext) -> bool:
    return ctx.adapter_calls == 1


def skip_validation_set(ctx: OperationContext) -> bool:
    return bool(ctx.skip_validation)


def mismatch_policy_return_value(ctx: OperationContext) -> bool:
    return is_mismatch(ctx) and ctx.handle_validation == "return_value"


def mismatch_policy_return_none(ctx: OperationContext) -> bool:
    return is_mismatch(ctx) and ctx.handle_validation == "return_none"


def mismatch_policy_raise(ctx: OperationContext) -> bool:
    return is_mismatch(ctx) and ctx.handle_validation == "raise"


def validation_passed(ctx: OperationContext) -> bool:
    return not ctx.skip_validation and not is_mismatch(ctx)


def invoke_actions_false(ctx: OperationContext) -> bool:
    return not ctx.invoke_actions


def action_param_absent(ctx: OperationContext) -> bool:
    return ctx.action_param is None


def requests_absent(ctx: OperationContext) -> bool:
    return read_requests(ctx.result) is None


def responses_unattachable(ctx: OperationContext) -> bool:
    return (ctx.action_param is not None and read_requests(ctx.result) is not None
            and not can_attach_responses(ctx.result, ctx.operative))


def requests_present(ctx: OperationContext) -> bool:
    return (ctx.action_param is not None and read_requests(ctx.result) is not None
            and can_attach_responses(ctx.result, ctx.operative))


def all_requests_acted(ctx: OperationContext) -> bool:
    return ctx.acted


def responses_empty(ctx: OperationContext) -> bool:
    return not ctx.kept_responses


def result_enriched(ctx: OperationContext) -> bool:
    return ctx.enriched


#: guard name (as in states/operate.toml) -> predicate.
GUARDS: dict[str, Guard] = {
    f.__name__: f
    for f in (
        phase_raised, preparation_succeeded, schema_published, adapter_awaited_once,
        skip_validation_set, mismatch_policy_return_value, mismatch_policy_return_none,
        mismatch_policy_raise, validation_passed, invoke_actions_false, action_param_absent,
        requests_absent, responses_unattachable, requests_present, all_requests_acted, responses_empty, result_enriched,
    )
}
