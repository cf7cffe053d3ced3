"""``Branch``: one conversation with its model, tools, governance and history.

``await branch.operate(**kw)`` runs ADR-0022 as the machine in
``states/operate.toml`` and appends the call's :class:`~lionops.Trace` to
``branch.traces`` (also when it raises).
"""

from __future__ import annotations

import inspect
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack



from . import observe
from ._defaults import DEFAULT_ACTION_CALL_PARAMS
from .act import act as act_fn
from .alcall import AlcallParams
from .engine.context import OperationContext
from .engine.engines import Engine
from .hooks import HookPoint, safe_str
from .messages import EventLog, MessageLog, atomic_write_text, to_jsonable
from .models import ActionResponseModel, Instruct
from .operate import _resolve_engine, run_context
from .params import ActionParam
from .tools import ActionManager, Tool, ToolInvocation
from .trace import Trace, Traced

if TYPE_CHECKING:
    from .imodel import iModel

__all__ = ["Branch", "OperateKwargs"]

logger = logging.getLogger("lionops.branch")

GateCheck = Callable[[ToolInvocation], "bool | Awaitable[bool]"]
HookHandler = Callable[[dict[str, Any]], Any]


class OperateKwargs(TypedDict, total=False):
    """The keywords of ``Branch.operate`` (ADR-0022 D1); extra keywords are
    model invocation options."""

    instruct: Instruct | dict[str, Any]
    instruction: Any
    guidance: Any
    context: Any
    sender: Any
    recipient: Any
    progression: Any
    chat_model: iModel
    invoke_actions: bool
    tool_schemas: list[dict[str, Any]]
    images: list[Any]
    image_detail: Literal["low", "high", "auto"]
    parse_model: iModel
    skip_validation: bool
    handle_validation: Literal["raise", "return_value", "return_none"]
    tools: Any
    operative: Any
    response_format: Any
    actions: bool
    reason: bool
    call_params: AlcallParams
    action_strategy: Literal["sequential", "concurrent"]
    verbose_action: bool
    field_models: list[Any]
    include_token_usage_to_model: bool
    clear_messages: bool
    stream_persist: bool
    persist_dir: str
    snapshot_dir: str
    middle: Any
    engine: Engine | str


class Branch:
    """A conversation branch.

    Args:
        chat_model: the default ``iModel`` for ``operate()``.
        parse_model: the model used for parse retries (default: ``chat_model``).
        system: an optional system message.
        tools: callables or :class:`Tool` objects to register.
        user: the default sender name of instructions.
        name: a label shown in ``repr``.
        engine: ``"compiled"`` (default, the hot path) or ``"transitions"``
            (the reference engine), or an engine object.

    Attributes:
        messages: ordered :class:`~lionops.messages.Message` list.
        logs: the event log (actions, denials, errors, hook failures).
        traces: one :class:`Trace` per ``operate()`` call, in call order.
        acts: the registered tools (``acts.get_tool_schema(tools=...)``).
    """

    def __init__(
        self,
        *,
        chat_model: iModel | None = None,
        parse_model: iModel | None = None,
        system: str | None = None,
        tools: Any = None,
        user: str | None = None,
        name: str | None = None,
        engine: Engine | str | None = None,
    ) -> None:
        self.id = uuid.uuid4().hex
        self.name = name
        self.user = user
        self.chat_model = chat_model
        self.parse_model = parse_model or chat_model
        self.messages = MessageLog()
        self.logs = EventLog()
        self.acts = ActionManager()
        self.traces: list[Trace] = []
        self.engine = engine
        self._gates: list[GateCheck] = []
        self._hooks: dict[HookPoint, list[HookHandler]] = {p: [] for p in HookPoint}
        self._providers: list[Any] = []
        if system is not None:
            self.messages.add("system", system, sender="system", recipient=self.id)
        if tools is not None:
            self.register_tools(tools)

    # ------------------------------------------------------------ tools & governance

    def register_tools(self, tools: Callable[..., Any] | Tool | list[Any], *, update: bool = False) -> list[Tool]:
        """Register callables or Tools; returns the Tool objects.

        Raises ``ValueError`` on a duplicate name unless ``update``.
        """
        return self.acts.register(tools, update=update)

    def gate(self, check: GateCheck) -> GateCheck:
        """Add an authorization check ``check(ToolInvocation) -> bool | Awaitable[bool]``.

        Every check must return ``True`` for a tool to run; with none, all
        invocations are allowed. Usable as a decorator.
        """
        self._gates.append(check)
        return check

    async def authorize(self, invocation: ToolInvocation) -> bool:
        """Ask every gate about ``invocation`` (ADR-0022 D4; safety invariant 2).

        Fails closed: a check that raises, or returns anything but a bool,
        denies (logged as ``gate_error``). This is a deliberate difference from
        the shipped code, which let the exception escape.
        """
        for check in list(self._gates):
            try:
                verdict = check(invocation)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:  # noqa: BLE001 - fail closed
                self.logs.log("gate_error", {
                    "function": invocation.function, "error": safe_str(exc), "type": type(exc).__name__,
                })
                return False
            if not isinstance(verdict, bool):
                self.logs.log("gate_error", {
                    "function": invocation.function,
                    "error": f"gate returned {type(verdict).__name__}, not bool",
                    "type": "TypeError",
                })
                return False
            if not verdict:
                return False
        return True

    def on(self, point: HookPoint | str, handler: HookHandler) -> HookHandler:
        """Register a tool hook (sync or async) for ``HookPoint.TOOL_PRE``,
        ``TOOL_POST`` or ``TOOL_ERROR``; it receives the payload dict.
        A handler that raises is logged (``hook_error``) and ignored."""
        self._hooks[HookPoint(point)].append(handler)
        return handler

    async def emit(self, point: HookPoint, payload: dict[str, Any]) -> None:
        """Call the hooks of ``point`` with ``payload``; failures are logged, never raised."""
        if observe.observers:  # instrumentation seam
            observe.note("hook", point=point.value, handlers=len(self._hooks[point]))
        for handler in list(self._hooks[point]):
            try:
                out = handler(payload)
                if inspect.isawaitable(out):
                    await out
            except Exception as exc:  # noqa: BLE001 - observers never change the outcome
                logger.warning("hook %s failed: %s", point.value, safe_str(exc))
                self.logs.log("hook_error", {"hook": point.value, "error": safe_str(exc), "type": type(exc).__name__})

    def add_context_provider(self, provider: Any) -> Any:
        """Register a context provider; its ``writeback(ActionResponseModel)``
        (sync or async) is offered every non-None response before enrichment,
        denials and errors included (ADR-0022 D4)."""
        if not callable(getattr(provider, "writeback", None)):
            raise TypeError("a context provider needs a callable writeback(response) method")
        self._providers.append(provider)
        return provider

    async def offer_writeback(self, responses: list[ActionResponseModel]) -> None:
        """Offer each response to each provider; failures are logged, never raised."""
        for provider in list(self._providers):
            for response in responses:
                try:
                    out = provider.writeback(response)
                    if inspect.isawaitable(out):
                        await out
                except Exception as exc:  # noqa: BLE001 - observers never change the outcome
                    logger.warning("context provider writeback failed: %s", safe_str(exc))
                    self.logs.log("writeback_error", {
                        "provider": type(provider).__name__, "function": response.function,
                        "error": safe_str(exc), "type": type(exc).__name__,
                    })

    # ------------------------------------------------------------ operations

    async def _run(self, ctx: OperationContext, engine: Engine | str | None = None) -> Traced:
        return await run_context(ctx, _resolve_engine(engine, self.engine), self.traces)

    async def operate_traced(self, **kw: Unpack[OperateKwargs]) -> Traced:
        """``operate()`` returning ``Traced(result, trace)`` ."""
        kwargs: dict[str, Any] = dict(kw)
        engine = kwargs.pop("engine", None)
        # ADR-0022 D1: the facade default is the truthy "concurrent", always
        # forwarded, so it shadows Instruct.action_strategy (documented seam).
        kwargs.setdefault("action_strategy", "concurrent")
        ctx = OperationContext(branch=self, call_kwargs=kwargs)
        return await self._run(ctx, engine)

    async def operate(self, **kw: Unpack[OperateKwargs]) -> Any:
        """Run one composed operation (ADR-0022 D1–D4) as the operate machine.

        Keywords are those of ``prepare_operate_kw`` (``instruction``,
        ``response_format``, ``actions``, ``reason``, ``handle_validation``,
        ``skip_validation``, ``invoke_actions``, ``middle``, ...); extra
        keywords become model invocation options, except the removed
        ``request_model``, ``operative_model`` and ``imodel`` (TypeError).

        Returns the validated result: a model instance (enriched with
        ``action_responses`` when actions ran), a mapping, text, or ``None``.

        Raises:
            ValueError: mismatch under ``handle_validation="raise"`` (D3), or
                malformed action requests (D4).
            ConfigurationError: bad strategy or no endpoint.
            Exception: adapter errors and unsuppressed tool errors, unchanged.
        """
        return (await self.operate_traced(**kw)).result

    async def act(
        self,
        action_request: Any,
        *,
        strategy: str = "concurrent",
        suppress_errors: bool = True,
        verbose_action: bool = False,
        call_params: AlcallParams | None = None,
    ) -> list[ActionResponseModel]:
        """Run action requests through :func:`lionops.act` with an ActionParam
        built from these keywords (ADR-0022 D4)."""
        param = ActionParam(
            action_call_params=call_params or DEFAULT_ACTION_CALL_PARAMS,
            strategy=strategy,
            suppress_errors=suppress_errors,
            verbose_action=verbose_action,
        )
        return await act_fn(self, action_request, param)

    # ------------------------------------------------------------ history

    def clear_messages(self) -> None:
        """Remove all messages but the system message."""
        self.messages.clear(keep_system=True)

    def dump_logs(self, path: str | Path) -> Path:
        """Write the event log as JSON to ``path`` atomically."""
        return self.logs.dump(path)

    def snapshot(self, path: str | Path) -> Path:
        """Write messages, logs and traces as one JSON document, atomically."""
        doc = {
            "branch": self.id,
            "name": self.name,
            "messages": self.messages.to_list(),
            "logs": self.logs.to_list(),
            # trace meta holds adapter facts that may not be JSON
            "traces": [to_jsonable(t.to_dict()) for t in self.traces],
        }
        return atomic_write_text(path, json.dumps(doc, indent=2))

    def __repr__(self) -> str:
        return (
            f"Branch(id={self.id[:8]}, name={self.name!r}, model={self.chat_model!r}, "
            f"tools={self.acts.names}, messages={len(self.messages)}, traces={len(self.traces)})"
        )
