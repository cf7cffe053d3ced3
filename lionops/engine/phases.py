"""Phase handlers: the only places where the machine has effects.

Each is named by a state's ``handler`` in ``states/operate.toml``. A handler
mutates the operation context; the guards then decide which trigger fires.
``validate`` and ``gate`` have no handler: they are decisions only.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from .. import observe
from ..fields import to_fields_dict
from ..operative import operative_for
from ..params import ParseParam, RunParam
from .context import OperationContext

__all__ = ["PHASES", "select_middle", "model_class_of", "read_requests", "can_attach_responses"]

logger = logging.getLogger("lionops.operate")

Phase = Callable[[OperationContext], Awaitable[None]]


@functools.cache
def _module(name: str) -> ModuleType:
    """A lionops module that imports this one, imported on first use.

    An import statement in a phase would run the import machinery on every
    call (~0.8 µs); attributes are still looked up at each call.
    """
    return importlib.import_module(name, "lionops")


def model_class_of(response_format: Any) -> type[BaseModel] | None:
    """The caller model class of a response format (D2): a BaseModel subclass,
    or the type of a BaseModel instance; a dict schema gives ``None``."""
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        return response_format
    if isinstance(response_format, BaseModel):
        return type(response_format)
    return None


def select_middle(ctx: OperationContext) -> Any:
    """D3: the caller's middle wins; RunParam or a CLI-backed chat model selects
    ``run_and_collect``; otherwise ``communicate``."""
    if ctx.middle is not None:
        return ctx.middle
    if isinstance(ctx.chat_param, RunParam) or getattr(ctx.branch.chat_model, "is_cli", False):
        return _module(".middles.cli").run_and_collect
    return _module(".middles.api").communicate


def read_requests(result: Any) -> Any:
    """``action_requests`` of a model attribute or mapping key; text and others: ``None`` (D4)."""
    if isinstance(result, BaseModel):
        return getattr(result, "action_requests", None)
    if isinstance(result, Mapping):
        return result.get("action_requests")
    return None


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
        and "action_responses" in cls.model_fields
        and not cls.model_config.get("frozen", False)
        and getattr(cls, "__setattr__", None) is BaseModel.__setattr__
    )


async def prepare(ctx: OperationContext) -> None:
    """D1: normalize the public keywords (when given) into typed parameters."""
    if ctx.call_kwargs is None:
        return
    p = _module(".operate").prepare_operate_kw(ctx.branch, **ctx.call_kwargs)
    ctx.instruction = p["instruction"]
    ctx.chat_param = p["chat_param"]
    ctx.parse_param = p["parse_param"]
    ctx.action_param = p["action_param"]
    ctx.handle_validation = p["handle_validation"]
    ctx.invoke_actions = p["invoke_actions"]
    ctx.skip_validation = p["skip_validation"]
    ctx.clear_messages = p["clear_messages"]
    ctx.operative = p["operative"]
    ctx.middle = p["middle"]
    ctx.field_models = p["field_models"]
    ctx.reason = bool(p["reason"])


async def schema(ctx: OperationContext) -> None:
    """D2: tool schemas, model class, Operative, effective response format."""
    cp = ctx.chat_param
    assert cp is not None
    branch = ctx.branch
    # Each parameter is copied once, with all of its changes.
    cp_changes: dict[str, Any] = {}
    if ctx.action_param is not None:
        selected = branch.acts.select(ctx.action_param.tools or True)
        cp_changes["tool_schemas"] = [t.offered_schema for t in selected]  # shared, read-only
        # The offered tools are the allowed tools: act() runs only these.
        ctx.offered = tuple(selected)
        ctx.tool_schemas_published = True

    model_class = model_class_of(cp.response_format)
    fields_dict = to_fields_dict(ctx.field_models)
    operative = ctx.operative
    response_fmt = cp.response_format
    if operative is None and (model_class or ctx.action_param or fields_dict or ctx.reason):
        operative = operative_for(
            model_class, reason=ctx.reason, actions=ctx.action_param is not None, fields=fields_dict
        )
        response_fmt = operative.response_type or model_class
        cp_changes["response_format"] = response_fmt
    if ctx.parse_param is None:
        pp = ParseParam(response_format=response_fmt, imodel=branch.parse_model, handle_validation="return_value")
    elif "response_format" in cp_changes:
        pp = ctx.parse_param.with_updates(handle_validation="return_value", response_format=response_fmt)
    else:
        pp = ctx.parse_param.with_updates(handle_validation="return_value")
    if cp_changes:
        cp = cp.with_updates(**cp_changes)
    ctx.model_class = model_class
    ctx.operative = operative
    ctx.chat_param = cp
    ctx.parse_param = pp
    ctx.schema_done = True


async def adapter(ctx: OperationContext) -> None:
    """D3: await the selected Middle exactly once."""
    middle = select_middle(ctx)
    ctx.middle_name = getattr(middle, "__qualname__", None) or type(middle).__name__
    ctx.meta["middle"] = ctx.middle_name
    ctx.adapter_calls += 1
    call = middle(
        ctx.branch,
        ctx.instruction,
        ctx.chat_param,
        ctx.parse_param,
        ctx.clear_messages,
        skip_validation=ctx.skip_validation,
    )
    result = ctx.result = await (observe.observe_adapter(ctx, call) if observe.observers else call)
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


async def act(ctx: OperationContext) -> None:
    """D4: every request through act()."""
    assert ctx.action_param is not None
    ctx.responses = await _module(".act").act(
        ctx.branch, ctx.requests, ctx.action_param, offered=ctx.offered, records=ctx.actions,
    )
    ctx.acted = True


async def enrich(ctx: OperationContext) -> None:
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
        ctx.operative.response_model = result
        ctx.result = ctx.operative.update_response_model({"action_responses": kept})
    else:
        result["action_responses"] = kept
    ctx.enriched = True


#: handler name (as in states/operate.toml) -> coroutine function.
PHASES: dict[str, Phase] = {f.__name__: f for f in (prepare, schema, adapter, act, enrich)}
