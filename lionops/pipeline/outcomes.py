"""Outcomes: what the caller gets when the machine enters a terminal state.

Each is named by a transition's ``outcome`` in ``states/operate.toml``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from ..errors import MismatchError, RefusalError, TruncatedOutputError
from .context import OperationContext

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
    return ctx.result


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
    f.__name__: f for f in (return_result, return_none, raise_mismatch, raise_usage_limit, raise_error)
}
