"""The decisions of the machine: the guards and the validation policy (ADR-0022 D3).

Guards are pure, synchronous predicates over the operation context.

Each is named by a ``guard`` in ``states/operate.toml``; the guard table is
the whole control flow of ``operate()``. No guard has an effect or calls
user code: what a result says about itself (its ``action_requests``, whether
it is an instance of the caller's model, whether enrich can attach to it)
is read once, by the ``adapter`` phase, into plain values on the context.
"""

from __future__ import annotations

from collections.abc import Callable

from .context import OperationContext

__all__ = ["GUARDS", "HANDLE_VALIDATION_VALUES"]

#: The validation policies of a result that is not the caller's model (D3).
HANDLE_VALIDATION_VALUES = ("raise", "return_value", "return_none")

Guard = Callable[[OperationContext], bool]


def phase_raised(ctx: OperationContext) -> bool:
    return ctx.error is not None


def preparation_succeeded(ctx: OperationContext) -> bool:
    return ctx.chat_param is not None


def resume_requested(ctx: OperationContext) -> bool:
    return ctx.resume is not None


def schema_published(ctx: OperationContext) -> bool:
    return ctx.schema_done and (ctx.action_param is None or ctx.tool_schemas_published)


def adapter_awaited_once(ctx: OperationContext) -> bool:
    return ctx.adapter_calls == 1 and ctx.limit_error is None


def request_limit_reached(ctx: OperationContext) -> bool:
    return ctx.limit_error is not None


def skip_validation_set(ctx: OperationContext) -> bool:
    return bool(ctx.skip_validation)


def mismatch_policy_return_value(ctx: OperationContext) -> bool:
    return ctx.mismatch and ctx.handle_validation == "return_value"


def mismatch_policy_return_none(ctx: OperationContext) -> bool:
    return ctx.mismatch and ctx.handle_validation == "return_none"


def mismatch_policy_raise(ctx: OperationContext) -> bool:
    return ctx.mismatch and ctx.handle_validation == "raise"


def validation_passed(ctx: OperationContext) -> bool:
    return not ctx.skip_validation and not ctx.mismatch


def invoke_actions_false(ctx: OperationContext) -> bool:
    return not ctx.invoke_actions


def action_param_absent(ctx: OperationContext) -> bool:
    return ctx.action_param is None


def requests_absent(ctx: OperationContext) -> bool:
    return ctx.requests is None


def responses_unattachable(ctx: OperationContext) -> bool:
    return ctx.action_param is not None and ctx.requests is not None and not ctx.attachable


def requests_present(ctx: OperationContext) -> bool:
    return ctx.action_param is not None and ctx.requests is not None and ctx.attachable


def calls_deferred(ctx: OperationContext) -> bool:
    return ctx.deferred


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
        phase_raised, preparation_succeeded, resume_requested, schema_published, adapter_awaited_once,
        request_limit_reached,
        skip_validation_set, mismatch_policy_return_value, mismatch_policy_return_none,
        mismatch_policy_raise, validation_passed, invoke_actions_false, action_param_absent,
        requests_absent, responses_unattachable, requests_present, calls_deferred, all_requests_acted,
        responses_empty, result_enriched,
    )
}
