"""ADR-0022 D4, after act(): offer writeback, attach ``action_responses``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..observability import observe
from .context import OperationContext

__all__ = ["phase", "can_attach_responses"]


def can_attach_responses(result: Any, operative: Any) -> bool:
    """Whether ``action_responses`` can be set on ``result`` in place (D4).

    Computed once per call by the ``adapter`` phase (``ctx.attachable``);
    the gate (``requests_present`` / ``responses_unattachable``) and the
    ``enrich`` phase both read that one value, so tools run exactly for
    results enrich can attach to: a ``dict`` whose item assignment is
    ``dict``'s own, or an instance of the call's generated response type (it
    declares ``action_responses``) that is not frozen and keeps pydantic's
    own attribute assignment. A Mapping that is not a dict, a dict class with
    its own ``__setitem__``, a foreign model, a frozen model, a model class
    with its own ``__setattr__``: no slot.
    """
    if isinstance(result, dict):
        return getattr(type(result), "__setitem__", None) is dict.__setitem__
    if not isinstance(result, BaseModel) or operative is None:
        return False
    rtype = operative.response_type
    cls = type(result)
    return (
        isinstance(rtype, type) and isinstance(result, rtype)
        and "action_responses" in cls.__pydantic_fields__
        and not cls.model_config.get("frozen", False)
        and getattr(cls, "__setattr__", None) is BaseModel.__setattr__
    )


async def phase(ctx: OperationContext) -> None:
    """D4: drop None responses, offer writeback, attach action_responses."""
    kept = [r for r in (ctx.responses or []) if r is not None]
    ctx.kept_responses = kept
    if not kept:
        return
    offer = ctx.branch.offer_writeback(kept)
    await (observe.observe_step("writeback", offer, responses=len(kept)) if observe.observers else offer)
    result = ctx.result
    # The gate admitted the result only if this same fact held, so a result
    # without a slot never reaches here; if one did, `enriched` stays false,
    # no guard of `enrich` holds, and the machine fails with an
    # InternalInvariantError instead of claiming an enrichment it did not do.
    if not ctx.attachable:
        return
    if isinstance(result, BaseModel):
        assert ctx.operative is not None
        # The call's own Operative (a copy when schema's is shared) holds the result.
        operative = ctx.operative = ctx.operative.for_result(result)
        ctx.result = operative.update_response_model({"action_responses": kept})
    else:
        result["action_responses"] = kept
    ctx.enriched = True
