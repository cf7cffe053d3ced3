"""Outcomes: what the caller gets when the machine enters a terminal state.

Each is named by a transition's ``outcome`` in ``states/operate.toml``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn

from pydantic import BaseModel

from .._formats import caller_value
from .._warn import warn_caller
from ..errors import MismatchError, RefusalError, TruncatedOutputError
from .context import OperationContext

logger = logging.getLogger(__name__)

__all__ = ["OUTCOMES", "mismatch_error"]


def mismatch_error(ctx: OperationContext) -> MismatchError:
    """The D3 ValueError: expected model name and ``repr(result)[:200]``.

    A ``RawOutput`` result carries why it was not coerced: ``"length"`` gives
    :class:`TruncatedOutputError`, ``"refusal"`` :class:`RefusalError`.
    """
    mc = ctx.model_class
    expected = getattr(mc, "__name__", repr(mc))
    received = repr(ctx.result)[:200]
    reason = getattr(ctx.result, "reason", None) if isinstance(ctx.result, str) else None
    detail = getattr(ctx.result, "detail", None) if isinstance(ctx.result, str) else None
    cls: type[MismatchError] = MismatchError
    if reason == "length":
        cls = TruncatedOutputError
    elif reason == "refusal":
        cls = RefusalError
    return cls(expected, received, reason=reason, detail=detail)


def return_result(ctx: OperationContext) -> Any:
    """The result; one of a dataclass or ``TypedDict`` format in the caller's type."""
    return caller_value(ctx.result)


def return_unrun_requests(ctx: OperationContext) -> Any:
    """The result of a call without actions (exit ``no_action_param``, ADR-0022 D4).

    No tool runs. When the model asked for tools anyway (native tool calls,
    ``action_requests`` in the result, or in the answer's JSON where the
    result has no such field), their number goes on the trace
    (``meta["unrun_action_requests"]``) and a ``UserWarning`` says how to
    run them.
    """
    native, in_answer = ctx.meta.get("tool_calls"), ctx.meta.get("answer_action_requests")
    requests = _proposed(ctx.result)
    count = max(native if type(native) is int else 0, in_answer if type(in_answer) is int else 0,
                len(requests) if type(requests) is list else 0)
    if count:
        ctx.meta["unrun_action_requests"] = count
        text = (f"the model requested {count} tool call(s) but actions are off for this call, so none ran; "
                "pass actions=True to operate() to run requested tools (each through the gate)")
        logger.warning("%s", text)
        warn_caller(text)
    return caller_value(ctx.result)


def _proposed(result: Any) -> Any:
    """The ``action_requests`` of a plain ``dict`` or a pydantic model's field,
    read without running the result's own code (a ``Mapping``'s ``get``, a
    property): with actions off, nothing a result defines is called."""
    if type(result) is dict:
        return result.get("action_requests")
    if isinstance(result, BaseModel) and "action_requests" in type(result).__pydantic_fields__:
        return vars(result).get("action_requests")
    return None


def return_none(ctx: OperationContext) -> None:
    return None


def raise_mismatch(ctx: OperationContext) -> NoReturn:
    raise mismatch_error(ctx)


def raise_usage_limit(ctx: OperationContext) -> NoReturn:
    assert ctx.limit_error is not None
    raise ctx.limit_error


def raise_error(ctx: OperationContext) -> NoReturn:
    assert ctx.error is not None
    raise ctx.error


#: outcome name (as in states/operate.toml) -> function of the context.
OUTCOMES: dict[str, Callable[[OperationContext], Any]] = {
    f.__name__: f for f in (return_result, return_unrun_requests, return_none, raise_mismatch, raise_usage_limit,
                            raise_error)
}
