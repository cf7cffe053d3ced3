"""ADR-0022 D3: the adapter phase awaits the selected Middle exactly once and
reads, once, what the result says about itself."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .._limits import count_request, reserve_request
from ..errors import ConfigurationError, UsageLimitExceeded
from ..middles.api import communicate
from ..middles.cli import run_and_collect
from ..observability import observe
from ..params import RunParam
from .context import OperationContext
from .enrich import can_attach_responses

__all__ = ["phase", "select_middle", "read_requests"]


def select_middle(ctx: OperationContext) -> Any:
    """D3: the caller's middle wins; RunParam or a CLI-backed chat model selects
    ``run_and_collect``; otherwise ``communicate``."""
    if ctx.middle is not None:
        return ctx.middle
    if isinstance(ctx.chat_param, RunParam) or getattr(ctx.branch.chat_model, "is_cli", False):
        return run_and_collect
    return communicate


def read_requests(result: Any) -> Any:
    """``action_requests`` of a model attribute or mapping key; text and others: ``None`` (D4)."""
    if isinstance(result, BaseModel):
        return getattr(result, "action_requests", None)
    if isinstance(result, Mapping):
        return result.get("action_requests")
    return None


async def phase(ctx: OperationContext) -> None:
    """D3: await the selected Middle exactly once."""
    middle = ctx.middle
    if middle is None:
        middle = select_middle(ctx)
    ctx.middle_name = getattr(middle, "__qualname__", None) or type(middle).__name__
    ctx.meta["middle"] = ctx.middle_name
    branch = ctx.branch
    limits, used = getattr(branch, "limits", None), getattr(branch, "usage", None)
    if used is not None:  # a limit is checked, and the request counted, before the request is made
        over = ctx.limit_error = reserve_request(limits, used)
        if over is not None:
            ctx.meta["usage_limit"] = {"limit": over.limit, "value": over.value, "usage": over.usage}
            return
    ctx.adapter_calls += 1
    call = middle(
        ctx.branch,
        ctx.instruction,
        ctx.chat_param,
        ctx.parse_param,
        ctx.clear_messages,
        skip_validation=ctx.skip_validation,
    )
    try:
        result = ctx.result = await (observe.observe_adapter(ctx, call) if observe.observers else call)
    except UsageLimitExceeded as over:  # a parse-model re-ask would pass a limit: it was not made
        ctx.limit_error = over
        ctx.meta["usage_limit"] = {"limit": over.limit, "value": over.value, "usage": over.usage}
        if used is not None:
            count_request(limits, used, ctx.meta, reserved=True)
        return
    except Exception:
        # The request was counted when it was made; what the endpoint
        # reported before the failure counts too (a price that cannot be
        # worked out does not hide the failure itself).
        if used is not None:
            with contextlib.suppress(ConfigurationError):
                count_request(limits, used, ctx.meta, reserved=True)
        raise
    if used is not None:
        count_request(limits, used, ctx.meta, reserved=True)
    # What the result says about itself may run its code (a property, a
    # Mapping's get, a metaclass's __instancecheck__): read it once, here, so
    # the guards decide on plain values and act() runs the requests they saw.
    # Each is read only where the machine asks (D3: validation before the
    # gate; requests never read when validation is skipped or failed, or
    # actions are off).
    if ctx.skip_validation:
        return
    ctx.mismatch = ctx.model_class is not None and not isinstance(result, ctx.model_class)
    if ctx.mismatch or not ctx.invoke_actions or ctx.action_param is None:
        return
    ctx.requests = read_requests(result)
    ctx.attachable = ctx.requests is not None and can_attach_responses(result, ctx.operative)
