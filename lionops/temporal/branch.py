"""``DurableBranch``: a branch whose ``operate()`` runs as Temporal workflow code.

The operate machine (guards, prepare, schema, validate, gate decisions,
enrich, the bookkeeping of act) runs in the workflow, where it is
deterministic: the same history replays to the same transitions. Exactly its
effects are activities: the model call (one activity per ``operate``, the
Middle awaited once, ADR-0022 D3) and each tool invocation (one activity
each, after authorization, ADR-0022 D4). The conversation lives in workflow
state, one :class:`~lionops.Branch` per durable branch and workflow run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Unpack

import pydantic_core
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

from .._frozen import thaw
from .._hooks import HookPoint, check_one_argument
from .._limits import UsageLimits, UsageSoFar, price_requests
from .._text import safe_str
from ..branch import Branch, OperateKwargs
from ..clock import Clock
from ..errors import (
    ConfigurationError,
    EndpointAuthError,
    EndpointStatusError,
    LionopsError,
    RemovedKeywordError,
    UsageLimitExceeded,
)
from ..governance import Approve, Deny, PendingCall, call_digest, jsonable_arguments
from ..messages import EventLog, LogEntry, MessageLog, to_jsonable
from ..models import ActionRecord
from ..observability import observe
from ..pipeline.adapter import select_middle
from ..pipeline.context import OperationContext
from ..pipeline.loop import DEFAULT_MAX_ROUNDS, run_context, run_loop
from ..pipeline.machine import PHASES
from ..run import Ran
from ..runtime import current_runtime, use_runtime
from ..tools import ActionManager, Tool, ToolArgumentsError, ToolInvocation, UnknownToolError
from ..trace import Traced
from ._codec import (
    WORKER_OWNED,
    decode_kwargs,
    decode_result,
    encode_kwargs,
    encode_result,
    register_type,
    restore_messages,
)
from .approval import (
    DECIDE_SIGNAL,
    DECIDE_UPDATE,
    PENDING_QUERY,
    ApprovalRecord,
    HumanApproval,
    check_decisions,
    read_decisions,
    rejection,
    take_decisions,
)
from .errors import DurableArgumentError, DurableError, NotInWorkflowError, remote_error

__all__ = ["DurableBranch", "ActivityConfig", "WorkflowClock", "idempotency_key", "MODEL_ACTIVITY", "TOOL_ACTIVITY"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class ActivityConfig:
    """How the workflow schedules an activity (Temporal's own options).

    ``retry_policy`` is Temporal's: a retried activity runs its body again
    (at-least-once). ``heartbeat_timeout`` lets Temporal notice a dead
    worker before ``start_to_close_timeout``; tool activities heartbeat
    while the tool runs.
    """

    start_to_close_timeout: timedelta = timedelta(minutes=10)
    heartbeat_timeout: timedelta | None = None
    schedule_to_close_timeout: timedelta | None = None
    retry_policy: RetryPolicy | None = None
    task_queue: str | None = None

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"start_to_close_timeout": self.start_to_close_timeout}
        for name in ("heartbeat_timeout", "schedule_to_close_timeout", "retry_policy", "task_queue"):
            value = getattr(self, name)
            if value is not None:
                opts[name] = value
        return opts


#: Default model activity: three attempts; configuration and 4xx errors are final.
MODEL_ACTIVITY = ActivityConfig(retry_policy=RetryPolicy(maximum_attempts=3))
#: Default tool activity: a tool's own exception is final (an error payload);
#: a lost worker is noticed within 30 s and the invocation runs again.
TOOL_ACTIVITY = ActivityConfig(heartbeat_timeout=timedelta(seconds=30), retry_policy=RetryPolicy(maximum_attempts=5))

_IDEMPOTENCY_KEY: ContextVar[str | None] = ContextVar("lionops_idempotency_key", default=None)
#: The number of the operate() running in this workflow task (approval call ids).
_OPERATION: ContextVar[int] = ContextVar("lionops_operation", default=0)


def idempotency_key() -> str:
    """The idempotency key of the tool invocation running in this activity.

    ``<workflow id>/<branch>/<operate() number>/<tool run number>``: the same
    for every attempt of one invocation (a retry after a lost worker
    included) and for the same invocation in another run of the same
    workflow id (a reset, a continued run), since it is not derived from the
    run id; different for every other invocation: a tool that
    must not repeat an external effect passes it to the system it calls (a
    payment API's idempotency key, a unique row id). Raises
    :class:`DurableError` outside a durable tool activity.
    """
    key = _IDEMPOTENCY_KEY.get()
    if key is None:
        raise DurableError("idempotency_key() is only available inside a durable tool activity")
    return key


class WorkflowClock(Clock):
    """Workflow time: deterministic, so a replayed trace has the same timings."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, float(seconds)))  # a durable timer in workflow code

    def monotonic(self) -> float:
        return workflow.time()

    def time(self) -> float:
        return workflow.now().timestamp()

    def perf_counter_ns(self) -> int:
        return int(workflow.time() * 1_000_000_000)


class _WorkflowMessages(MessageLog):
    """Messages numbered per branch and stamped with workflow time."""

    def __init__(self) -> None:
        super().__init__()
        self._next = 1

    def add(self, role: Any, content: Any, **kw: Any) -> Any:
        kw["id"] = self._next
        kw.setdefault("timestamp", workflow.now().timestamp())
        msg = super().add(role, content, **kw)
        self._next += 1
        return msg


class _WorkflowLog(EventLog):
    """Event log entries stamped with workflow time."""

    def log(self, kind: str, content: dict[str, Any], *, record: ActionRecord | None = None) -> LogEntry:
        entry = LogEntry(kind=kind, content=content, timestamp=workflow.now().timestamp(), record=record)
        self._items.append(entry)
        if self._sinks:
            self._forward(entry)
        return entry


class _RunState:
    """What one workflow run holds: its branches and its approvals."""

    def __init__(self) -> None:
        self.branches: dict[str, Branch] = {}
        self.operations: dict[str, int] = {}
        self.pending: dict[str, PendingCall] = {}
        self.decisions: dict[str, Approve | Deny] = {}
        #: call id -> who decided what (or that it timed out): nothing is decided twice
        self.decided: dict[str, str] = {}
        self.records: list[ApprovalRecord] = []
        #: tool activities started per (branch, operate() number): the idempotency keys
        self.tool_runs: dict[tuple[str, int], int] = {}


def _in_workflow() -> bool:
    return workflow.in_workflow()


def _quiet(exc: BaseException | None) -> bool:
    """Whether observers are told nothing now (``lionops.observability.observe.quiet``):
    while the workflow replays its history (what ran was reported when it
    ran), and for the end of a seam that an eviction of the workflow from
    the worker's cache cancelled (the run goes on elsewhere; it did not fail)."""
    if workflow.unsafe.is_replaying():
        return True
    if exc is None:
        return False
    runtime = workflow._Runtime.maybe_current()  # the workflow instance: is it being evicted?
    return bool(getattr(runtime, "_deleting", False))


def _run_state() -> _RunState:
    if not _in_workflow():
        raise NotInWorkflowError("DurableBranch.operate() runs in Temporal workflow code; in process use Branch")
    instance = workflow.instance()
    state = getattr(instance, "_lionops_state", None)
    if state is None:
        state = _RunState()
        try:
            instance._lionops_state = state
        except AttributeError as exc:
            raise DurableError(
                f"{type(instance).__name__} must allow attributes (no __slots__) to hold lionops state"
            ) from exc
        _install_handlers(state)
    return state


def _install_handlers(state: _RunState) -> None:
    # The payload arrives raw: its size and depth are checked before it is
    # decoded (approval.read_decisions). The validator runs only when an
    # update is first delivered; the handler also on replay, deterministically.
    def validate(raw: RawValue) -> None:
        try:
            check_decisions(state, read_decisions(raw))
        except LionopsError as exc:
            raise rejection(exc) from None

    def on_update(raw: RawValue) -> None:
        try:
            take_decisions(state, read_decisions(raw))
        except LionopsError as exc:
            raise rejection(exc) from None

    def on_signal(raw: RawValue) -> None:
        try:
            take_decisions(state, read_decisions(raw))
        except LionopsError as exc:  # a signal cannot be rejected: log and ignore
            workflow.logger.warning("ignored decisions: %s", safe_str(exc))

    def on_query() -> list[PendingCall]:
        return sorted(state.pending.values(), key=lambda p: (p.operation, p.index, p.gate or 0))

    workflow.set_update_handler(DECIDE_UPDATE, on_update, validator=validate)
    workflow.set_signal_handler(DECIDE_SIGNAL, on_signal)
    workflow.set_query_handler(PENDING_QUERY, on_query)


def _from_activity(exc: ActivityError) -> BaseException:
    """The exception an activity raised, as the workflow sees it (a RemoteError named like it)."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return remote_error(cause.type, cause.message)
    if isinstance(cause, TemporalTimeoutError):
        kind = cause.type.name if cause.type else "timeout"
        return remote_error("TimeoutError", f"activity {exc.activity_type} timed out ({kind})")
    return exc


def _limit_error(cause: Any, details: list[Any]) -> UsageLimitExceeded | None:
    """The UsageLimitExceeded a model activity failed with, rebuilt (else ``None``)."""
    if not (isinstance(cause, ApplicationError) and cause.type == "UsageLimitExceeded" and len(details) > 1):
        return None
    facts = details[1]
    try:
        return UsageLimitExceeded(str(facts["limit"]), facts["value"], dict(facts["usage"]))
    except (KeyError, TypeError, ValueError):
        return None


def _final(exc: BaseException) -> bool:
    """Errors a retry cannot change: configuration, authentication, 4xx (not 408/429)."""
    if isinstance(exc, (ConfigurationError, RemovedKeywordError, DurableArgumentError, EndpointAuthError, TypeError)):
        return True
    return isinstance(exc, EndpointStatusError) and 400 <= exc.status < 500 and exc.status not in (408, 409, 429)


def _activity_failure(exc: BaseException, *, final: bool) -> ApplicationError:
    """An ApplicationError carrying only the type name and the secret-free text (no chain)."""
    return ApplicationError(safe_str(exc), type=type(exc).__name__, non_retryable=final)


async def _prepared(branch: Branch, kwargs: dict[str, Any]) -> OperationContext:
    """An operation context after the pure ``prepare`` and ``schema`` phases."""
    ctx = OperationContext(branch=branch, call_kwargs=kwargs)
    await PHASES["prepare"](ctx)
    await PHASES["schema"](ctx)
    return ctx


def _tool_names(selector: Any) -> Any:
    """A ``tools=`` selector with Tool objects and callables replaced by their names."""
    def name(item: Any) -> Any:
        if isinstance(item, str) or item is True or item is None:
            return item
        return getattr(item, "name", None) or getattr(item, "__name__", None) or item

    if isinstance(selector, (list, tuple)):
        return [name(item) for item in selector]
    return name(selector)


def _apply_turn(branch: Branch, turn: dict[str, Any], clear_messages: bool) -> None:
    """Record on the workflow's branch what the Middle recorded on the worker's."""
    if clear_messages:
        branch.clear_messages()
    restore_messages(branch.messages, turn.get("messages") or [], keep_ids=False)
    for entry in turn.get("logs") or []:
        branch.logs.log(entry["kind"], entry["content"])
    meta = current_runtime().trace_meta
    if meta is not None:
        meta.update(turn.get("meta") or {})


class _ActivityMiddle:
    """The workflow-side Middle: the model call is one activity (ADR-0022 D3)."""

    def __init__(self, durable: DurableBranch, kwargs: dict[str, Any]) -> None:
        self._durable = durable
        self._kwargs = kwargs
        self.__qualname__ = f"{durable.name}.model"

    async def __call__(self, branch: Branch, instruction: Any, chat_param: Any, parse_param: Any = None,
                       clear_messages: bool = False, skip_validation: bool = False) -> Any:
        durable = self._durable
        payload = {"kwargs": self._kwargs, "messages": branch.messages.to_list(), "branch_id": branch.id,
                   "usage": branch.usage.as_dict()}
        try:
            out = await workflow.execute_activity(
                durable.model_activity_name, payload, summary="model call", **durable.model_activity.options()
            )
        except ActivityError as exc:
            # A failed call still recorded what the Middle did before it raised
            # (the user turn, the trace facts), as it does in process.
            cause = exc.cause
            details = list(cause.details) if isinstance(cause, ApplicationError) else []
            if details and isinstance(details[0], dict):
                _apply_turn(branch, details[0], clear_messages)
            over = _limit_error(cause, details)
            if over is not None:  # a parse-model re-ask in the activity would pass a limit
                raise over from None
            raise _from_activity(exc) from None
        _apply_turn(branch, out, clear_messages)
        candidates = (getattr(parse_param, "response_format", None), getattr(chat_param, "response_format", None))
        return decode_result(out["result"], candidates)

    def __repr__(self) -> str:
        return f"_ActivityMiddle({self._durable.name!r})"


class DurableBranch:
    """The worker-side definition of a branch whose operations run on Temporal.

    Args:
        name: names the activities (``<name>.model``, ``<name>.tool.<tool>``)
            and the branch; letters, digits, ``_ . -``.
        chat_model: the ``iModel`` the model activity calls, or a zero-argument
            function returning one, called on the worker for each model call
            (so keys and clients are never built in workflow code). Not
            needed with ``middle``.
        tools: callables or :class:`~lionops.Tool` objects; their schemas and
            argument validation are used in the workflow, their bodies run as
            activities.
        system: the system message.
        gate: an authorization check ``check(ToolInvocation) -> bool`` (sync or
            async, workflow code: deterministic), a :class:`HumanApproval`, or
            a list of them, asked in order (ADR-0022 D4).
        hooks: ``{HookPoint or name: handler or [handlers]}`` (workflow code).
        context_providers: objects with ``writeback(response)`` (workflow code).
        middle: a Middle the model activity awaits instead of selecting one from
            ``chat_model`` (``communicate`` or ``run_and_collect``).
        model_activity / tool_activity: Temporal options of the activities.
        limits: :class:`~lionops.UsageLimits` of the branch in each workflow
            run, checked in workflow code before each model activity and
            each tool activity is scheduled (fail before effect), and in the
            model activity before each parse-model re-ask; going over ends
            the operation at ``over_limit`` (``UsageLimitExceeded``), as in process.
    """

    def __init__(
        self,
        name: str,
        *,
        chat_model: Any = None,
        tools: Any = None,
        system: str | None = None,
        gate: Any = None,
        hooks: Mapping[HookPoint | str, Any] | None = None,
        context_providers: Iterable[Any] = (),
        middle: Any = None,
        model_activity: ActivityConfig = MODEL_ACTIVITY,
        tool_activity: ActivityConfig = TOOL_ACTIVITY,
        response_models: Iterable[type[BaseModel]] = (),
        gate_timeout: float | None = None,
        limits: UsageLimits | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(f"a durable branch name is letters, digits, '_', '.', '-', got {name!r}")
        if chat_model is None and middle is None:
            raise ConfigurationError(f"DurableBranch {name!r} needs chat_model= or middle=")
        if limits is not None and not isinstance(limits, UsageLimits):
            raise DurableArgumentError(f"limits= takes a lionops.UsageLimits, got {type(limits).__name__}")
        self.name = name
        self.limits = limits
        self.chat_model = chat_model
        self.middle = middle
        self.system = system
        self.model_activity = model_activity
        self.tool_activity = tool_activity
        manager = ActionManager()
        if tools is not None:
            manager.register(tools)
        self.tools: list[Tool] = [manager.get(n) for n in manager.names]  # type: ignore[misc]
        self._by_name = {t.name: t for t in self.tools}
        for t in self.tools:
            _check_crossing(t)
        self.response_models = tuple(response_models)
        for cls in self.response_models:
            register_type(cls)
        gates = _checked_gates(name, gate, manager, gate_timeout)
        self.gate_timeout = gate_timeout
        self.gates: list[Any] = gates
        self.hooks: dict[HookPoint, list[Any]] = {}
        for point, handlers in (hooks or {}).items():
            items = handlers if isinstance(handlers, (list, tuple)) else [handlers]
            self.hooks.setdefault(HookPoint(point), []).extend(items)
        self.context_providers = list(context_providers)
        for p in self.context_providers:
            if not callable(getattr(p, "writeback", None)):
                raise DurableArgumentError("a context provider needs a callable writeback(response) method")
        self._activities: list[Callable[..., Any]] | None = None

    # ------------------------------------------------------------ names

    @property
    def model_activity_name(self) -> str:
        return f"{self.name}.model"

    def tool_activity_name(self, tool: str) -> str:
        return f"{self.name}.tool.{tool}"

    # ------------------------------------------------------------ workflow side

    def branch(self) -> Branch:
        """This workflow run's :class:`~lionops.Branch` of this durable branch
        (its messages, logs and traces); workflow code only."""
        state = _run_state()
        branch = state.branches.get(self.name)
        if branch is None:
            branch = state.branches[self.name] = self._new_workflow_branch(state)
        return branch

    def _new_workflow_branch(self, state: _RunState) -> Branch:
        # Workflow code cannot block and is bounded by Temporal's own task
        # deadline: a gate waits only as long as gate_timeout says (a
        # HumanApproval as long as its own timeout), hooks and context
        # providers are not given timers of their own.
        branch = Branch(tools=list(self.tools), name=self.name, limits=self.limits,
                        gate_timeout=self.gate_timeout, observer_timeout=None)
        branch.id = workflow.uuid4().hex
        branch.messages = _WorkflowMessages()
        branch.logs = _WorkflowLog()
        if self.system is not None:
            branch.messages.add("system", self.system, sender="system", recipient=branch.id)
        for position, g in enumerate(self.gates):
            branch.gate(self._approval_check(state, g, position) if isinstance(g, HumanApproval) else g)
        for point, handlers in self.hooks.items():
            for h in handlers:
                branch.on(point, h)
        for p in self.context_providers:
            branch.add_context_provider(p)
        return branch

    def _approval_check(self, state: _RunState, approval: HumanApproval,
                        position: int) -> Callable[[ToolInvocation], Any]:
        """The check of one approval gate: its decisions are keyed by tool call and gate."""
        async def check(invocation: ToolInvocation) -> bool | Deny:
            if not approval.covers(invocation.function):
                return True
            op = _OPERATION.get()
            arguments = thaw(invocation.arguments)
            tool = invocation.tool or self._by_name[invocation.function]
            call = PendingCall(
                call_id=f"{self.name}-{op}-{invocation.index}-{position}", function=invocation.function,
                arguments=arguments, reason=f"waiting for approval (gate {position}, {approval.timeout_s:g}s)",
                digest=call_digest(invocation.function, tool.offered_schema.json, jsonable_arguments(arguments)),
                index=invocation.index or 0, operation=f"{workflow.info().workflow_id}/{self.name}/{op}",
                deferred_at=workflow.now().isoformat(), gate=position,
            )
            return await approval.wait(state, call)
        check.__qualname__ = f"HumanApproval#{position}"
        return check

    async def operate(self, **kw: Unpack[OperateKwargs]) -> Any:
        """``Branch.operate`` in workflow code: same keywords, same result."""
        return (await self.operate_traced(**kw)).result

    async def operate_traced(self, **kw: Unpack[OperateKwargs]) -> Traced:
        """``Branch.operate_traced`` in workflow code: ``Traced(result, trace)``.

        The keywords are those of ``Branch.operate`` except the worker-side
        ``chat_model``, ``parse_model``, ``middle`` and ``engine``
        (:class:`DurableArgumentError`); values sent to the model activity
        must be JSON data, pydantic models or importable model classes.
        Raises what ``Branch.operate`` raises; an activity's exception
        arrives as a :class:`RemoteError` named like the original.
        """
        state = _run_state()
        for name in WORKER_OWNED:
            if name in kw:
                raise DurableArgumentError(
                    f"{name}= is worker-side in a durable branch: set it on DurableBranch({self.name!r}, ...)"
                )
        crossing = dict(kw)
        if "tools" in crossing:  # a tool selector crosses by name
            crossing["tools"] = _tool_names(crossing["tools"])
        payload = encode_kwargs(crossing, drop=("call_params",))
        branch = self.branch()
        op = state.operations[self.name] = state.operations.get(self.name, 0) + 1
        first_message = len(branch.messages)
        token = _OPERATION.set(op)
        hush = observe.quiet.set(_quiet)
        try:
            with use_runtime(tool_runner=self._run_tool, clock=WorkflowClock()):
                return await branch.operate_traced(**kw, middle=_ActivityMiddle(self, payload))  # type: ignore[misc]
        finally:
            observe.quiet.reset(hush)
            _OPERATION.reset(token)
            prefix = f"{self.name}-{op}-"
            _mark_approvals(branch, first_message, [r for r in state.records if r.call_id.startswith(prefix)])

    async def run(self, instruction: Any = None, **kw: Any) -> Any:
        """``Branch.run`` in workflow code: same keywords, same result."""
        return (await self.run_traced(instruction, **kw)).result

    async def run_traced(self, instruction: Any = None, *, response_format: Any = None, tools: Any = True,
                         max_rounds: int = DEFAULT_MAX_ROUNDS, **operate_kw: Any) -> Ran:
        """``Branch.run_traced`` in workflow code: the run machine drives the
        rounds as workflow code, each round one :meth:`operate_traced` (its model
        call and each tool call an activity), so a worker that dies mid-run
        resumes the loop where it was. Returns ``Ran(result, run_trace)``;
        raises what ``Branch.run`` raises. A durable branch waits for a person
        inside the workflow (``HumanApproval``), so its runs never end at
        ``deferred``; with ``limits=`` a run ends at ``over_limit`` as in process."""
        ctx = run_context(self.branch(), instruction, response_format, tools, max_rounds, operate_kw)

        async def one_round(kw: dict[str, Any]) -> Traced:
            return await self.operate_traced(**kw)

        ctx.operate = one_round
        hush = observe.quiet.set(_quiet)
        try:
            with use_runtime(clock=WorkflowClock()):
                return await run_loop(ctx)
        finally:
            observe.quiet.reset(hush)

    async def _run_tool(self, tool: Tool, kwargs: dict[str, Any]) -> Any:
        """The runtime tool_runner of workflow code: one activity per invocation
        (after authorization), given exactly the validated arguments the gates
        saw; the activity does not validate them again."""
        arguments = _crossed(tool, kwargs)
        state = _run_state()
        op = (self.name, _OPERATION.get())
        run = state.tool_runs[op] = state.tool_runs.get(op, 0) + 1
        key = f"{workflow.info().workflow_id}/{self.name}/{op[1]}/{run}"
        try:
            return await workflow.execute_activity(
                self.tool_activity_name(tool.name), {"arguments": arguments, "key": key},
                summary=tool.name, **self.tool_activity.options(),
            )
        except ActivityError as exc:
            raise _from_activity(exc) from None

    # ------------------------------------------------------------ worker side

    def activities(self) -> list[Callable[..., Any]]:
        """The activity functions of this branch (the plugin registers them)."""
        if self._activities is None:
            self._activities = [self._model_activity()] + [self._tool_activity(t) for t in self.tools]
        return list(self._activities)

    def _chat_model(self) -> Any:
        """The model of one model call: ``chat_model``, or what its factory returns now."""
        model = self.chat_model
        if isinstance(model, (types.FunctionType, types.MethodType, functools.partial)):
            return model()
        return model

    async def response_type(self, kwargs: dict[str, Any]) -> Any:
        """The response type an ``operate(**kwargs)`` of this branch validates
        into (the generated Operative type when one is built), or ``None``."""
        ctx = await _prepared(Branch(tools=list(self.tools), name=self.name), dict(kwargs))
        return getattr(ctx.parse_param, "response_format", None)

    def _model_activity(self) -> Callable[..., Any]:
        durable = self

        @activity.defn(name=self.model_activity_name)
        async def model_call(payload: dict[str, Any]) -> dict[str, Any]:
            return await durable._call_model(payload)

        return model_call

    async def _call_model(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The model activity: rebuild the branch, prepare and schema (pure), await the Middle once."""
        try:
            branch = Branch(chat_model=self._chat_model(), tools=list(self.tools), name=self.name,
                            limits=self.limits)
            branch.usage = UsageSoFar(**payload.get("usage") or {})  # parse-model re-asks are checked here
            branch.id = payload["branch_id"]
            restore_messages(branch.messages, payload["messages"])
            ctx = await _prepared(branch, decode_kwargs(payload["kwargs"]))
            middle = self.middle if self.middle is not None else select_middle(ctx)
        except Exception as exc:
            raise _activity_failure(exc, final=True) from None
        history = list(branch.messages)  # held, so no new message can reuse an old one's id()
        before = {id(m) for m in history}
        meta: dict[str, Any] = {}

        def turn() -> dict[str, Any]:
            meta["middle"] = getattr(middle, "__qualname__", None) or type(middle).__name__
            return {
                "messages": [m.to_dict() for m in branch.messages if id(m) not in before],
                "logs": branch.logs.to_list(),
                "meta": to_jsonable(meta),
            }

        try:
            with use_runtime(trace_meta=meta):
                result = await middle(branch, ctx.instruction, ctx.chat_param, ctx.parse_param,
                                      ctx.clear_messages, skip_validation=ctx.skip_validation)
            # Priced here, where the requests were made: the workflow counts
            # the cost without looking a price up (a price table is not workflow code).
            price_requests(self.limits, meta)
        except UsageLimitExceeded as exc:
            facts = {"limit": exc.limit, "value": exc.value, "usage": exc.usage}
            raise ApplicationError(safe_str(exc), turn(), facts, type="UsageLimitExceeded",
                                   non_retryable=True) from None
        except Exception as exc:
            raise ApplicationError(
                safe_str(exc), turn(), type=type(exc).__name__, non_retryable=_final(exc)
            ) from None
        return {"result": encode_result(result), **turn()}

    def _tool_activity(self, tool: Tool) -> Callable[..., Any]:
        # Sync bodies run in a worker thread, so heartbeats continue while they run.
        runner = tool if tool.is_async else Tool(tool.func, name=tool.name, description=tool.description, blocking=True)

        @activity.defn(name=self.tool_activity_name(tool.name))
        async def tool_call(payload: dict[str, Any]) -> Any:
            # The arguments are the values the workflow validated and its gates
            # approved, as they were (see _crossed): validating them again
            # could change them (a validator is not idempotent).
            kwargs = payload["arguments"]
            if not isinstance(kwargs, dict):
                raise _activity_failure(ToolArgumentsError(tool.name, "arguments are not a mapping"), final=True)
            info = activity.info()
            key = _IDEMPOTENCY_KEY.set(str(payload.get("key") or f"{info.workflow_id}/{info.activity_id}"))
            try:
                async with _heartbeating(info.heartbeat_timeout):
                    output = await runner._call(kwargs)
            except Exception as exc:
                raise _activity_failure(exc, final=True) from None
            finally:
                _IDEMPOTENCY_KEY.reset(key)
            try:
                return pydantic_core.to_jsonable_python(output)
            except Exception as exc:  # noqa: BLE001 - the same failure act() reports in process
                raise ApplicationError(
                    f"output of {tool.name!r} is not JSON-serializable ({type(output).__name__}): {safe_str(exc)}",
                    type="ToolOutputError", non_retryable=True,
                ) from None

        return tool_call

    def __repr__(self) -> str:
        return f"DurableBranch({self.name!r}, tools={[t.name for t in self.tools]}, gates={len(self.gates)})"


@contextlib.asynccontextmanager
async def _heartbeating(timeout: timedelta | None) -> Any:
    """Heartbeat every third of ``timeout`` while the body runs (nothing without a timeout)."""
    if not timeout:
        yield
        return
    period = max(0.05, timeout.total_seconds() / 3)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(period)

    task = asyncio.create_task(beat())  # activities run on asyncio (temporalio)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _mark_approvals(branch: Branch, first: int, records: list[ApprovalRecord]) -> None:
    """Put the approval records of each call on its action messages (added
    since ``first``): ``metadata["approvals"]`` holds one record per approval
    gate that decided, in gate order; ``metadata["approval"]`` the last one
    (the deciding one)."""
    if not records:
        return
    groups: dict[Any, list[ApprovalRecord]] = {}
    for rec in records:
        groups.setdefault(rec.index if rec.index is not None else rec.call_id, []).append(rec)
    todo = list(groups.values())
    messages = list(branch.messages)[first:]
    for i, msg in enumerate(messages):
        if msg.role != "action_request" or not isinstance(msg.content, dict):
            continue
        for group in todo:
            rec = group[-1]
            if msg.content.get("function") == rec.function and msg.content.get("arguments") == rec.arguments:
                marks = {"approval": rec.model_dump(), "approvals": [r.model_dump() for r in group]}
                msg.metadata.update(marks)
                if i + 1 < len(messages) and messages[i + 1].role == "action_response":
                    messages[i + 1].metadata.update(marks)
                todo.remove(group)
                break
    for group in todo:  # a call act() recorded no message for: keep the records in the log
        for rec in group:
            branch.logs.log("approval_unmatched", rec.model_dump())
    for rec in records:
        branch.logs.log("approval", {**rec.model_dump(), "branch": branch.id})


_JSON_SCALARS: tuple[Any, ...] = (str, int, float, bool, type(None), None)


def _lossy(annotation: Any) -> str | None:
    """Why a validated value of ``annotation`` may not arrive unchanged as JSON
    (``None``: its values are JSON values already, so they cross as they are)."""
    if annotation is Any or any(annotation is t for t in _JSON_SCALARS):
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:  # validators change the value before the gate sees it: the type is what crosses
        return _lossy(args[0])
    if origin is typing.Literal:
        bad = [a for a in args if type(a) not in (str, int, float, bool, type(None))]
        return f"Literal value {bad[0]!r}" if bad else None
    if origin in (typing.Union, types.UnionType) or origin is list or annotation is list:
        for a in args:
            reason = _lossy(a)
            if reason:
                return reason
        return None
    if origin is dict or annotation is dict:
        if args and not (args[0] is str or args[0] is Any):
            return f"mapping keys of type {getattr(args[0], '__name__', args[0])!r}"
        return _lossy(args[1]) if len(args) == 2 else None
    return f"type {getattr(annotation, '__name__', None) or annotation!r}"


def _check_crossing(tool: Tool) -> None:
    """Refuse, when the durable branch is defined, a tool whose validated
    arguments cannot cross to its activity unchanged (ConfigurationError)."""
    model = tool.arguments_model
    fields = [(name, f.annotation) for name, f in model.model_fields.items()]
    for cls in model.__mro__:
        extra = getattr(cls, "__annotations__", {}).get("__pydantic_extra__")
        if extra is not None:
            fields.append(("**kwargs", extra))
            break
    for name, annotation in fields:
        reason = _lossy(annotation)
        if reason is not None:
            raise ConfigurationError(
                f"tool {tool.name!r}: parameter {name!r} has {reason}, whose validated values cannot "
                "cross to a Temporal activity unchanged; a durable tool takes JSON values "
                "(str, int, float, bool, None, lists and str-keyed dicts of them, Literal, Any)"
            )


def _same(a: Any, b: Any) -> bool:
    """Equal values of exactly the same types, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:  # NaN crosses as NaN
        return bool(b != b)
    return bool(a == b)


def _crossed(tool: Tool, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` as the activity will receive them; DurableArgumentError when
    JSON would change any value (a tool argument is never silently altered)."""
    try:
        data = pydantic_core.from_json(pydantic_core.to_json(kwargs))
    except Exception as exc:  # noqa: BLE001 - any value JSON cannot hold
        raise DurableArgumentError(
            f"tool {tool.name!r}: its validated arguments cannot cross to the activity: {safe_str(exc)}"
        ) from None
    if not _same(data, kwargs):
        raise DurableArgumentError(
            f"tool {tool.name!r}: its validated arguments would not arrive unchanged at the activity "
            "(a value JSON does not hold as it is); not run"
        )
    return kwargs


def _checked_gates(name: str, gate: Any, manager: ActionManager, gate_timeout: float | None) -> list[Any]:
    """``gate=`` as a list, each entry checked: a callable check taking one
    argument or a ``HumanApproval`` naming only registered tools, no object
    listed twice, and a ``gate_timeout`` that cuts no approval's own timeout."""
    gates = [] if gate is None else (list(gate) if isinstance(gate, (list, tuple)) else [gate])
    for g in gates:
        if not (isinstance(g, HumanApproval) or callable(g)):
            raise DurableArgumentError(f"a gate is a callable check or a HumanApproval, got {type(g).__name__}")
        if not isinstance(g, HumanApproval):
            check_one_argument(g, "gate", "check(invocation) -> bool")
        else:  # a misspelled name would never be held for approval: refused
            for function in sorted(g.functions or ()):
                if function not in manager:
                    raise UnknownToolError(function, manager.names, selector=True)
    if len({id(g) for g in gates}) != len(gates):
        raise ConfigurationError(
            f"DurableBranch {name!r}: the same gate object is listed twice in gate=; "
            "list it once (a second approval is a second HumanApproval(...))"
        )
    if gate_timeout is not None:
        if not gate_timeout > 0:
            raise ConfigurationError(f"gate_timeout must be positive seconds or None, got {gate_timeout!r}")
        for g in gates:
            if isinstance(g, HumanApproval) and g.timeout_s > gate_timeout:
                raise ConfigurationError(
                    f"DurableBranch {name!r}: gate_timeout={gate_timeout:g}s would cut the "
                    f"HumanApproval timeout of {g.timeout_s:g}s; raise gate_timeout or leave it None"
                )
    return gates
