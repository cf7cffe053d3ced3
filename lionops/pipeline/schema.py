"""ADR-0022 D2: the schema phase (tool schemas, the Operative, the response format)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..fields import to_fields_dict
from ..operative import operative_for, shared_operative
from ..params import ParseParam
from .context import OperationContext

__all__ = ["phase", "model_class_of"]


def model_class_of(response_format: Any) -> type[BaseModel] | None:
    """The caller model class of a response format (D2): a BaseModel subclass,
    or the type of a BaseModel instance; a dict schema gives ``None``."""
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        return response_format
    if isinstance(response_format, BaseModel):
        return type(response_format)
    return None


async def phase(ctx: OperationContext) -> None:
    """D2: tool schemas, model class, Operative, effective response format.

    Without actions this reads only the prepared parameters (and the
    branch's parse model, which the cached preparation was checked
    against): the result is kept on the branch's cached preparation and
    reused by the next call of that configuration. With actions it reads the
    branch's tools, which can change between calls: worked out every call."""
    entry = ctx.prepared_entry
    if entry is not None and entry.schema is not None and ctx.chat_param is entry.prepared.chat_param:
        ctx.model_class, ctx.operative, ctx.chat_param, ctx.parse_param = entry.schema
        ctx.schema_done = True
        return
    cp = ctx.chat_param
    assert cp is not None
    action_param = ctx.action_param
    # Each parameter is copied at most once, with all of its changes, and
    # not at all when nothing changes (they are frozen: sharing is safe).
    cp_changes: dict[str, Any] = {}
    if action_param is not None:
        # tools=None offers every registered tool; an empty selector ([], set()) offers none
        selected = ctx.branch.acts.select(True if action_param.tools is None else action_param.tools)
        cp_changes["tool_schemas"] = [t.offered_schema for t in selected]  # shared, read-only
        # The offered tools are the allowed tools: act() runs only these.
        ctx.offered = tuple(selected)
        ctx.tool_schemas_published = True

    response_fmt = cp.response_format
    model_class = model_class_of(response_fmt)
    fields_dict = to_fields_dict(ctx.field_models)
    operative = ctx.operative
    if operative is None and (model_class or action_param or fields_dict or ctx.reason):
        # Without named fields the configuration's shared Operative: enrich
        # writes the result only to a copy of it (Operative.for_result).
        if fields_dict:
            operative = operative_for(model_class, reason=ctx.reason, actions=action_param is not None,
                                      fields=fields_dict)
        else:
            operative = shared_operative(model_class, reason=ctx.reason, actions=action_param is not None)
        response_fmt = cp_changes["response_format"] = operative.response_type or model_class
    pp = ctx.parse_param
    if pp is None:
        pp = ParseParam(response_format=response_fmt, imodel=ctx.branch.parse_model, handle_validation="return_value")
    elif "response_format" in cp_changes:
        pp = pp.with_updates(handle_validation="return_value", response_format=response_fmt)
    elif pp.handle_validation != "return_value":
        pp = pp.with_updates(handle_validation="return_value")
    if cp_changes:
        cp = cp.with_updates(**cp_changes)
    if (entry is not None and action_param is None and ctx.operative is None
            and ctx.chat_param is entry.prepared.chat_param and ctx.parse_param is entry.prepared.parse_param):
        entry.schema = (model_class, operative, cp, pp)
    ctx.model_class = model_class
    ctx.operative = operative
    ctx.chat_param = cp
    ctx.parse_param = pp
    ctx.schema_done = True
