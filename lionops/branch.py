"""``Branch``: one conversation with its model, tools, governance and history.

``await branch.operate(**kw)`` runs ADR-0022 as the machine in
``states/operate.toml`` and appends the call's :class:`~lionops.Trace` to
``branch.traces`` (also when it raises).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import hmac
import inspect
import json
import logging
import math
import os
import types
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Never, Self, Unpack

import anyio
import anyio.to_thread
from pydantic import BaseModel

from ._alcall import AlcallParams
from ._defaults import (
    DEFAULT_ACTION_CALL_PARAMS,
    DEFAULT_GATE_TIMEOUT,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_OBSERVER_TIMEOUT,
)
from ._files import atomic_write_text
from ._hooks import HookPoint, check_one_argument
from ._limits import UsageLimits, UsageSoFar
from ._names import closest
from ._secrets import scrubbed_message
from ._text import safe_str
from ._warn import warn_caller
from .errors import (
    ArgumentTypeError,
    ConfigurationError,
    MisspelledKeywordError,
    ResumeError,
    SnapshotError,
    did_you_mean,
)
from .governance import REASON_LIMIT, Approve, Defer, Deny, PendingCall, kept_reason
from .messages import EventLog, MessageLog, to_jsonable
from .models import ActionResponseModel
from .observability import observe
from .params import ACTION_STRATEGIES, ActionParam
from .pipeline.act import act as act_fn
from .pipeline.context import Authorization, OperationContext
from .pipeline.loop import (
    DEFAULT_MAX_ROUNDS,
    RunContext,
    resumed_keywords,
    run_context,
    run_from_dict,
    run_loop,
    run_to_dict,
)
from .pipeline.machine import ENGINES, run_operation, start_operation
from .pipeline.prepare import OperateKwargs, check_flags
from .pipeline.resume import DecisionLedger, Suspensions, as_response_model, claim, release
from .run import Ran
from .tools import ActionManager, Tool, ToolInvocation
from .trace import Trace, Traced

if TYPE_CHECKING:
    from .engine.engines import Engine
    from .imodel import iModel

__all__ = ["Branch", "OperateKwargs"]

logger = logging.getLogger("lionops.branch")

#: What a gate check answers: allow (``True``), deny (``False``, or ``Deny`` with
#: the reason the model is told), or defer the call to a later decision (``Defer``).
GateAnswer = bool | Deny | Defer
GateCheck = Callable[[ToolInvocation], "GateAnswer | Awaitable[GateAnswer]"]


class _InThread:
    """A sync gate check run in a worker thread that a timeout can abandon."""

    def __init__(self, check: Callable[[ToolInvocation], Any]) -> None:
        self.check = check
        self.__qualname__ = getattr(check, "__qualname__", None) or type(check).__name__

    async def __call__(self, invocation: ToolInvocation) -> Any:
        return await anyio.to_thread.run_sync(self.check, invocation, abandon_on_cancel=True)
HookHandler = Callable[[dict[str, Any]], Any]


def _bound(seconds: float | None) -> float:
    """A ``move_on_after`` delay: ``None`` means no bound."""
    return math.inf if seconds is None else seconds


#: the hook points in definition order (iterating the enum per Branch is not free)
_HOOK_POINTS = tuple(HookPoint)


def _new_id() -> str:
    """A random version-4 UUID as 32 hex digits, what ``uuid.uuid4().hex``
    gives, without building the ``UUID`` object."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    return raw.hex()


def _message(exc: BaseException) -> str:
    """An exception's message for a gate's denial reason and log: at most 200
    characters, credentials and the values of secret environment variables removed."""
    return scrubbed_message(safe_str(exc), os.environ)


def _refuse_unknown_keywords(unknown: dict[str, Any]) -> None:
    """Refuse keywords ``Branch()`` does not take: a near miss names the
    keyword meant (``MisspelledKeywordError``), anything else lists the
    keywords there are. The values are never shown (one may be a key)."""
    known = [p for p in inspect.signature(Branch.__init__).parameters if p not in ("self", "unknown")]
    for keyword in unknown:
        near = closest(keyword, known)
        if near:
            raise MisspelledKeywordError(keyword, near[0], where="Branch()", rest="Branch() takes no other keywords")
    raise ArgumentTypeError(
        f"Branch() got unexpected keywords {sorted(unknown)}; it takes {', '.join(known)} "
        "(operate() options such as response_format or actions go to operate() or run())")


#: Gates already warned about for answering something other than a bool.
_WARNED_NOT_BOOL: set[str] = set()


#: The longest denial reason a model is told (characters).
DENIAL_REASON_LIMIT = REASON_LIMIT


def denial_reason(deny: Deny) -> str:
    """The reason of a gate's :class:`Deny` as the model is told it: at most
    :data:`DENIAL_REASON_LIMIT` characters, secrets replaced (empty when none given)."""
    return (kept_reason(deny.reason) or "") if deny.reason else ""


def _warn_not_bool(name: str, verdict: object) -> None:
    """Log and warn, once per gate, that it answered ``verdict`` instead of a bool."""
    if name in _WARNED_NOT_BOOL:
        return
    _WARNED_NOT_BOOL.add(name)
    text = (f"gate {name} returned {type(verdict).__name__}, not a bool, so the tool call was denied; "
            "a gate check must return True to allow the call or False to deny it"
            " (or lionops.Defer(reason=...) to have a person decide later)"
            + (" (a missing 'return'?)" if verdict is None else ""))
    logger.warning("%s", text)
    warn_caller(text)


def _check_limit(name: str, value: Any, *, integer: bool = False) -> Any:
    """``None`` or a positive number (an int for counts); else TypeError/ConfigurationError."""
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ArgumentTypeError(
            f"{name} must be {'an int' if integer else 'a number'} or None, got {type(value).__name__}")
    if not value > 0:
        raise ConfigurationError(f"{name} must be > 0 or None, got {value!r}")
    return value


#: the one frozen ActionParam of an ``act()`` call without ``call_params`` and
#: ``tools``, by (strategy, suppress_errors, verbose_action); any other call builds its own
_ACT_PARAMS: dict[tuple[str, bool, bool], ActionParam] = {
    (strategy, suppress, verbose): ActionParam(action_call_params=DEFAULT_ACTION_CALL_PARAMS, tools=None,
                                               strategy=strategy, suppress_errors=suppress, verbose_action=verbose)
    for strategy in ACTION_STRATEGIES for suppress in (False, True) for verbose in (False, True)}


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
        gate_timeout: seconds one gate check may take; past it the call is
            denied (decision ``timed_out``). ``None``: no bound. Default 30.
        observer_timeout: seconds one hook handler or context-provider
            writeback may take; past it, it is abandoned and logged
            (``hook_timeout``, ``writeback_timeout``). ``None``: no bound. Default 30.
        max_requests: action requests one ``act()`` runs; the ones past it
            get error payloads (decision ``rejected``) and never run.
            ``None``: no cap. Default 64.
        max_messages: keep at most this many messages besides the system
            message: older ones are dropped after each ``operate()`` and
            ``act()``, which bounds both what is kept and what is resent to
            the model. ``None`` (default): keep everything.
        max_traces: keep at most this many traces (the newest). ``None``
            (default): keep every trace.
        max_logs: keep at most this many event-log entries (the newest;
            log subscribers still get every entry as it is written).
            ``None`` (default): keep every entry.
        limits: :class:`~lionops.UsageLimits` on model requests, reported
            tokens, tool calls and cost, checked before each model request
            (exit ``over_limit``, ``UsageLimitExceeded``) and each tool call
            (decision ``over_limit``). ``branch.usage`` holds the usage so far
            (shared with forks). ``None`` (default): no limits.

    Attributes:
        messages: ordered :class:`~lionops.messages.Message` list. It grows
            with every call (the whole history is resent each call) unless
            ``max_messages`` is set, and it is shared by concurrent calls on
            this branch: a call sees the others' turns. Run independent
            calls on :meth:`fork` copies.
        logs: the event log (actions, denials, errors, hook failures);
            :meth:`clear_logs` empties it.
        traces: one :class:`Trace` per ``operate()`` call, in call order;
            :meth:`clear_traces` empties it.
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
        gate_timeout: float | None = DEFAULT_GATE_TIMEOUT,
        observer_timeout: float | None = DEFAULT_OBSERVER_TIMEOUT,
        max_requests: int | None = DEFAULT_MAX_REQUESTS,
        max_messages: int | None = None,
        max_traces: int | None = None,
        max_logs: int | None = None,
        limits: UsageLimits | None = None,
        **unknown: Never,
    ) -> None:
        if unknown:
            _refuse_unknown_keywords(unknown)
        if isinstance(engine, str) and engine not in ENGINES:
            raise ConfigurationError(
                f"Branch(engine={engine!r}) is not an engine{did_you_mean(engine, ENGINES)}; "
                f"known: {sorted(ENGINES)}, or an engine object")
        self.gate_timeout = _check_limit("gate_timeout", gate_timeout)
        self.observer_timeout = _check_limit("observer_timeout", observer_timeout)
        self.max_requests = _check_limit("max_requests", max_requests, integer=True)
        self.max_messages = _check_limit("max_messages", max_messages, integer=True)
        self.max_traces = _check_limit("max_traces", max_traces, integer=True)
        self.max_logs = _check_limit("max_logs", max_logs, integer=True)
        if limits is not None and not isinstance(limits, UsageLimits):
            raise ArgumentTypeError(f"limits must be a lionops.UsageLimits or None, got {type(limits).__name__}")
        self.limits = limits
        #: what this branch (and its forks, which share it) used: requests, tokens, tool calls, cost
        self.usage = UsageSoFar()
        self.id = _new_id()
        self.name = name
        self.user = user
        self.chat_model = chat_model
        self.parse_model = parse_model or chat_model
        self.messages = MessageLog()
        self.logs = EventLog()
        self.acts = ActionManager()
        self.traces: list[Trace] = []
        #: call configurations already prepared (ADR-0022 D1; made at the second call of one),
        #: see :func:`lionops.pipeline.prepare.prepared_key`, and the hash of the last one seen
        self._prepared: dict[Any, Any] | None = None
        self._prepared_seen = 0
        #: operations a gate's ``Defer`` suspended, and the calls decided so far
        self.suspensions = Suspensions()
        #: call id of a deferred call -> the run that waits on it (resume_run)
        self._suspended_runs: dict[str, RunContext] = {}
        self.engine = engine
        self._gates: list[GateCheck] = []
        #: names of the gates a restored snapshot's branch had (see restore())
        self._restored_gates: tuple[str, ...] = ()
        self._hooks: dict[HookPoint, list[HookHandler]] = {p: [] for p in _HOOK_POINTS}
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

    def gate(self, check: GateCheck, *, blocking: bool = False) -> GateCheck:
        """Add an authorization check ``check(ToolInvocation) -> bool | Deny | Defer``
        (or an awaitable of one).

        Every check must return ``True`` for a tool to run; with none, all
        invocations are allowed. Usable as a decorator.

        ``blocking``: ``check`` is sync code that may block (a prompt to a
        person, a policy service called without async): it runs in a worker
        thread, so ``gate_timeout`` bounds the wait even when the check never
        returns (the call is denied as ``timed_out``; the thread is abandoned
        and its late answer ignored). A sync check that is not ``blocking``
        runs inline, which is cheapest but cannot be interrupted. An abandoned
        thread holds one of anyio's worker threads (40 by default) until its
        check returns, and the interpreter waits for it at exit; an async check
        marked ``blocking`` is a ``TypeError``. A check that cannot be called with
        one positional argument is a :class:`~lionops.errors.GateSignatureError`.
        """
        check_one_argument(check, "gate", "check(invocation) -> bool")
        if blocking and (inspect.iscoroutinefunction(check)
                         or inspect.iscoroutinefunction(type(check).__call__)):
            raise ArgumentTypeError(
                f"gate {getattr(check, '__qualname__', type(check).__name__)} is async: "
                "blocking=True is for sync code (an async check is awaited and its timeout cancels it)")
        self._gates.append(_InThread(check) if blocking else check)
        return check

    def __setattr__(self, name: str, value: Any) -> None:
        """``branch.authorize = check`` is checked as a gate is when registered:
        a value that cannot be called with one argument (not callable, no
        parameter, a required keyword-only one) is a
        :class:`~lionops.errors.GateSignatureError`, never a denial of every call."""
        if name == "authorize":
            check_one_argument(value, "authorize", "authorize(invocation) -> bool")
        if name == "authorization":
            check_one_argument(value, "authorization", "authorization(invocation) -> Authorization")
            check = value
            value = types.MethodType(_bounded_authorization(lambda _branch, invocation: check(invocation)), self)
        object.__setattr__(self, name, value)

    def __init_subclass__(cls, **kw: Any) -> None:
        """A subclass's own ``authorization()`` is asked as ``authorize`` is:
        within ``gate_timeout``, failing closed (it raises, hangs or answers
        anything but an :class:`Authorization`: denied)."""
        super().__init_subclass__(**kw)
        own = cls.__dict__.get("authorization")
        if inspect.isfunction(own) and not getattr(own, "_bounded", False):
            cls.authorization = _bounded_authorization(own)  # type: ignore[method-assign]

    async def authorize(self, invocation: ToolInvocation) -> bool:
        """Whether ``invocation`` may run: the one authorization hook
        (ADR-0022 D4; safety invariant 2). ``act()`` asks it about every
        request that can run, through :meth:`authorization`.

        Branch's own asks every gate in registration order. Fails closed: a
        check that raises, returns anything but a bool, or does not answer
        within ``gate_timeout`` seconds denies (logged as ``gate_error`` /
        ``gate_timeout``); so does an answer that comes late from a gate that
        could not be interrupted. Both are deliberate differences from the
        shipped code, which let the exception escape and waited forever.

        A subclass may override it, or a callable may be set on the branch
        (``branch.authorize = check``): that one is asked instead, with no gate
        registered too, under the same fail-closed rules, and :meth:`fork` keeps it.
        """
        return (await self._ask_gates(invocation)).decision == "allowed"

    async def authorization(self, invocation: ToolInvocation) -> Authorization:
        """The decision ``act()`` records for ``invocation``: :meth:`authorize`
        asked, with the reason of a denial. While :meth:`authorize` is Branch's
        own, the gates' reasons (which gate denied, timed out or failed) are
        kept; an overridden one (or one set on the branch) is awaited within
        ``gate_timeout`` and fails closed as a gate does."""
        if self._own("authorize", _AUTHORIZE):
            return await self._ask_gates(invocation)
        return await self._ask(self.authorize, "authorize", invocation)

    def needs_authorization(self) -> bool:
        """Whether :meth:`authorization` has anything to ask: a gate is
        registered, or :meth:`authorize` (or :meth:`authorization`) is not
        Branch's own. Without either every invocation is allowed, so ``act()``
        records the request as allowed without building the invocation."""
        return (bool(self._gates) or not self._own("authorize", _AUTHORIZE)
                or not self._own("authorization", _AUTHORIZATION))

    def _own(self, name: str, func: Callable[..., Any]) -> bool:
        """Whether the hook ``name`` is Branch's own ``func`` bound to this
        branch: the same method of another branch (a policy branch the hook
        was set to) is a policy of its own, asked as any other."""
        hook = getattr(self, name)
        return getattr(hook, "__func__", None) is func and getattr(hook, "__self__", None) is self

    async def _ask(self, check: Callable[[ToolInvocation], Any], name: str,
                   invocation: ToolInvocation, *, record: bool = False) -> Authorization:
        """One check asked within ``gate_timeout``, failing closed; with
        ``record``, an :class:`Authorization` answer is taken as it is."""
        deadline = anyio.current_time() + _bound(self.gate_timeout)
        cut = False
        try:
            verdict = check(invocation)
            # only an awaited answer can be interrupted: its own timer (a bool never is one)
            if type(verdict) is not bool and inspect.isawaitable(verdict):
                with anyio.CancelScope(deadline=deadline) as scope:
                    verdict = await verdict
                cut = scope.cancelled_caught
        except Exception as exc:  # noqa: BLE001 - fail closed
            message = _message(exc)
            self.logs.log("gate_error", {
                "function": invocation.function, "error": message, "type": type(exc).__name__,
            })
            return Authorization("denied", f"gate {name} raised {type(exc).__name__}: {message}")
        # A gate that cannot be interrupted (sync code that blocks, an async
        # one that shields itself) still answers late: a late answer denies.
        if cut or anyio.current_time() >= deadline:
            self.logs.log("gate_timeout", {
                "function": invocation.function, "gate": name, "timeout_s": self.gate_timeout,
            })
            return Authorization("timed_out", f"gate {name} did not answer within {self.gate_timeout}s")
        return self._answer(name, verdict, invocation, record)

    def _answer(self, name: str, verdict: Any, invocation: ToolInvocation, record: bool = False) -> Authorization:
        """What a gate's answer decides: ``True``/``False``, :class:`Defer`, or
        :class:`Deny` (its reason, bounded and without secrets, is also told
        to the model); anything else denies. With ``record``, an
        :class:`Authorization` answer (a policy's own ``authorization()``) is taken as it is."""
        if verdict is True:  # the common answer: the one shared allowed decision
            return _ALLOWED
        if record and _is_authorization(verdict):
            return Authorization(*verdict)
        if isinstance(verdict, Defer):
            return Authorization("deferred", kept_reason(verdict.reason))
        if isinstance(verdict, Deny):
            told = denial_reason(verdict) or None
            return Authorization("denied", f"denied by gate {name} ({verdict.by})" + (f": {told}" if told else ""),
                                 told)
        if not isinstance(verdict, bool):
            self.logs.log("gate_error", {
                "function": invocation.function,
                "error": f"gate returned {type(verdict).__name__}, not bool",
                "type": "TypeError",
            })
            _warn_not_bool(name, verdict)
            return Authorization("denied", f"gate {name} returned {type(verdict).__name__}, not bool")
        return Authorization("allowed" if verdict else "denied", None if verdict else f"denied by gate {name}")

    async def _ask_gates(self, invocation: ToolInvocation) -> Authorization:
        """Every gate in registration order; the first that denies (or times
        out) decides. A gate that defers does not end the asking: a later
        gate may still deny; else the call is deferred (the first reason)."""
        deferred: Authorization | None = None
        for check in list(self._gates):
            name = getattr(check, "__qualname__", None) or type(check).__name__
            answer = await self._ask(check, name, invocation)
            if answer.decision == "deferred":
                deferred = deferred or answer
            elif answer.decision != "allowed":
                return answer
        return deferred or _ALLOWED

    def has_hooks(self, point: HookPoint) -> bool:
        """Whether ``point`` has handlers (payload summaries are built only for them)."""
        return bool(self._hooks[point])

    def on(self, point: HookPoint | str, handler: HookHandler) -> HookHandler:
        """Register a tool hook (sync or async) for ``HookPoint.TOOL_PRE``,
        ``TOOL_POST`` or ``TOOL_ERROR``; it receives the payload dict.
        A handler that raises is logged (``hook_error``) and ignored; one that
        does not return within ``observer_timeout`` seconds is abandoned and
        logged (``hook_timeout``)."""
        point = HookPoint(point)
        check_one_argument(handler, "hook", "handler(payload)")
        self._hooks[point].append(handler)
        return handler

    async def emit(self, point: HookPoint, payload: dict[str, Any]) -> None:
        """Call the hooks of ``point`` with ``payload``; failures and timeouts
        are logged, never raised. A ``BaseException`` that is not an
        ``Exception`` (a stray cancellation, ``KeyboardInterrupt``) propagates."""
        if observe.observers:  # instrumentation seam
            observe.note("hook", point=point.value, handlers=len(self._hooks[point]))
        for handler in list(self._hooks[point]):
            with anyio.move_on_after(_bound(self.observer_timeout)) as scope:
                try:
                    out = handler(payload)
                    if inspect.isawaitable(out):
                        await out
                except Exception as exc:  # noqa: BLE001 - observers never change the outcome
                    logger.warning("hook %s failed: %s", point.value, safe_str(exc))
                    self.logs.log("hook_error", {
                        "hook": point.value, "error": safe_str(exc), "type": type(exc).__name__,
                    })
            if scope.cancelled_caught:
                logger.warning("hook %s timed out after %ss", point.value, self.observer_timeout)
                self.logs.log("hook_timeout", {"hook": point.value, "timeout_s": self.observer_timeout})

    def add_context_provider(self, provider: Any) -> Any:
        """Register a context provider; its ``writeback(ActionResponseModel)``
        (sync or async) is offered every non-None response before enrichment,
        denials and errors included (ADR-0022 D4)."""
        if not callable(getattr(provider, "writeback", None)):
            raise ArgumentTypeError("a context provider needs a callable writeback(response) method")
        check_one_argument(provider.writeback, "context provider", "writeback(response)")
        self._providers.append(provider)
        return provider

    async def offer_writeback(self, responses: list[ActionResponseModel]) -> None:
        """Offer each response to each provider; failures are logged, never
        raised; each writeback gets ``observer_timeout`` seconds, past which it
        is abandoned and logged (``writeback_timeout``)."""
        for provider in list(self._providers):
            for response in responses:
                with anyio.move_on_after(_bound(self.observer_timeout)) as scope:
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
                if scope.cancelled_caught:
                    logger.warning("context provider writeback timed out after %ss", self.observer_timeout)
                    self.logs.log("writeback_timeout", {
                        "provider": type(provider).__name__, "function": response.function,
                        "timeout_s": self.observer_timeout,
                    })

    # ------------------------------------------------------------ operations

    async def operate_traced(self, **kw: Unpack[OperateKwargs]) -> Traced:
        """``operate()`` returning ``Traced(result, trace)`` ."""
        return await run_operation(*self._operation(kw))

    def _operation(self, kw: OperateKwargs) -> tuple[OperationContext, Any]:
        """The context of an ``operate()`` call with keywords ``kw`` (a fresh
        dict of this call's own) and the engine it names."""
        kwargs: dict[str, Any] = kw  # type: ignore[assignment]
        engine = kwargs.pop("engine", None)
        # ADR-0022 D1: the facade default is the truthy "concurrent", always
        # forwarded, so it shadows Instruct.action_strategy (documented seam).
        kwargs.setdefault("action_strategy", "concurrent")
        return OperationContext(branch=self, call_kwargs=kwargs), engine

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
            TypeError: a boolean keyword (``actions``, ``invoke_actions``,
                ...) that is not a bool.
            ConfigurationError: bad strategy or no endpoint.
            Exception: adapter errors and unsuppressed tool errors, unchanged.
        """
        if type(self).operate_traced is not _OPERATE_TRACED or "operate_traced" in self.__dict__:
            # an operate_traced of a subclass's own, or set on the branch: it is called
            return (await self.operate_traced(**kw)).result
        # operate_traced() and run_operation() without their coroutine frames:
        # two frames less for every call waiting
        run, _ = start_operation(*self._operation(kw))
        return await run

    def pending_calls(self) -> list[PendingCall]:
        """The deferred calls waiting for a decision, oldest operation first,
        each operation's in request order (see :meth:`resume`)."""
        return self.suspensions.pending_calls()

    async def resume_traced(self, decisions: dict[str, Approve | Deny], *,
                            response_format: type[BaseModel] | None = None) -> Traced:
        """:meth:`resume` returning ``Traced(result, trace)``."""
        work = claim(self.suspensions, self.acts, decisions)
        try:
            if response_format is not None:
                as_response_model(work.op, response_format)
            return await run_operation(OperationContext(branch=self, resume=work))
        finally:
            release(self.suspensions, work)

    async def resume(self, decisions: dict[str, Approve | Deny], *,
                     response_format: type[BaseModel] | None = None) -> Any:
        """Continue a suspended operation with decisions ``{call_id: Approve(by=...) | Deny(by=...)}``.

        Every decision is checked before anything runs. Approved calls run
        with exactly the values their gates saw (no second validation), once;
        denied ones get a denial payload; a call without a decision stays
        pending (the trace ends at ``deferred`` again). When none waits, the
        responses of the whole round are offered to writeback and attached to
        the result (``enrich``), which is returned. The trace starts
        ``prepare`` → ``resumed`` → ``act``; each decision (who, when, why)
        is in ``trace.meta["approvals"]``, the event log (``approval``) and
        the messages (``metadata["approval"]``).

        ``response_format``: the model the operation was asked for. After
        :meth:`restore` the suspended result is its JSON data (a dict); given
        the model, it comes back as that model (the call's response type,
        with ``action_responses`` attached), as in the process that deferred.

        Raises:
            UnknownCallError: a call id no suspended operation holds.
            CallAlreadyDecidedError: a call decided before.
            ToolChangedError: an approved call's tool is gone or its
                definition (or the stored arguments) changed.
            ResumeError: decisions for calls of several operations, or a
                stored result that is not ``response_format`` data.
            TypeError: a decision that is not ``Approve`` or ``Deny``.
        """
        return (await self.resume_traced(decisions, response_format=response_format)).result

    async def run_traced(self, instruction: Any = None, *, response_format: Any = None, tools: Any = True,
                         max_rounds: int = DEFAULT_MAX_ROUNDS, **operate_kw: Any) -> Ran:
        """:meth:`run` returning ``Ran(result, run_trace)``."""
        return await self._run(run_context(self, instruction, response_format, tools, max_rounds, operate_kw))

    async def run(self, instruction: Any = None, *, response_format: Any = None, tools: Any = True,
                  max_rounds: int = DEFAULT_MAX_ROUNDS, **operate_kw: Any) -> Any:
        """Run operate() rounds until the model answers: the run machine
        (``states/run.toml``, docs/api.md "The run loop").

        Each round is one ``operate()`` with ``actions=True`` (the tools
        ``tools=`` offers; all registered by default; ``tools=False``: none);
        its tool results go into the branch's messages, so the next round's
        model request carries them. The loop ends at the first round whose
        model made no request that was acted on (exit ``answered``), and
        returns that round's result. ``operate_kw`` are operate()'s keywords
        (``middle``, ``reason``, ``handle_validation`` ...), the same for
        every round.

        Raises:
            MaxRoundsError: ``max_rounds`` rounds ran (default
                :data:`~lionops.pipeline.loop.DEFAULT_MAX_ROUNDS`) and the
                last still acted on tool calls (exit ``max_rounds``).
            UsageLimitExceeded: a usage limit of the branch (``limits=``),
                counted over every round (exit ``over_limit``).
            Exception: what a round's ``operate()`` raised (exit ``failed``).

        A round whose gate deferred a call ends the run at ``deferred``:
        ``branch.pending_calls()`` lists the calls and :meth:`resume_run`
        continues the loop.
        """
        return (await self.run_traced(instruction, response_format=response_format, tools=tools,
                                      max_rounds=max_rounds, **operate_kw)).result

    async def resume_run(self, decisions: dict[str, Approve | Deny], *, max_rounds: int | None = None,
                         **operate_kw: Any) -> Ran:
        """Continue a run that ended at ``deferred``: its first round resumes
        the suspended operation with ``decisions`` (see :meth:`resume`), the
        next rounds ask the model again with the run's keywords. Returns
        ``Ran(result, run_trace)`` of the continued run (``start`` →
        ``resumed`` → ``round`` ...); its rounds count from there
        (``max_rounds``: default the run's own).

        A suspended run is in :meth:`snapshot`; after :meth:`restore` its
        plain keywords come from the file, and its object keywords
        (``response_format=`` model, ``middle=``, ...) must be given here
        again (``operate_kw`` overlays the run's keywords).

        Raises:
            ResumeError: the decisions name no call of one suspended run; a
                restored run's object keyword missing, or a response model
                with another JSON schema than the run's.
            Exception: what :meth:`run` and :meth:`resume` raise.
        """
        return await self._run(self._resumed_run(decisions, max_rounds, operate_kw))

    def _resumed_run(self, decisions: dict[str, Approve | Deny], max_rounds: int | None,
                     operate_kw: dict[str, Any] | None = None) -> RunContext:
        """The context of ``resume_run(decisions, max_rounds=, **operate_kw)``: the suspended run's keywords."""
        self._check_restored_gates()
        if not isinstance(decisions, Mapping):
            raise ArgumentTypeError("decisions must be a non-empty mapping {call_id: Approve(...) | Deny(...)}")
        runs = {id(self._suspended_runs[c]): self._suspended_runs[c] for c in decisions if c in self._suspended_runs}
        if len(runs) != 1:
            raise ResumeError("the decisions name no call of a suspended run, or calls of several runs: "
                              "give the decisions for one run (branch.pending_calls())")
        (old,) = runs.values()
        if "actions" in (operate_kw or {}):
            raise ConfigurationError("resume_run() takes no actions=: the run's rounds keep their tools")
        kw = resumed_keywords(old, dict(operate_kw or {}))
        engine = kw.pop("engine", old.engine)
        rounds = old.max_rounds if max_rounds is None else max_rounds
        if (self.chat_model is None and kw.get("chat_model") is None and kw.get("middle") is None
                and not (isinstance(rounds, int) and rounds <= 1)):
            # checked before anything is decided: the approved calls would run, then the next round fail
            raise ResumeError("the continued run asks the model again after the resumed round, and this branch "
                              "has no chat_model: give it to Branch.restore(path, chat_model=..., tools=...) "
                              "(or middle= here); nothing was decided")
        return RunContext(self, kw, rounds, engine, resume=dict(decisions))

    def _check_restored_gates(self) -> None:
        """Refuse to resume a restored branch before a gate of each name the
        snapshot recorded is registered again (nothing decided yet)."""
        missing = sorted(set(self._restored_gates) - {_gate_name(check) for check in self._gates})
        if missing:
            raise ResumeError(
                f"the snapshot's branch had the gates {missing}, and this restored branch has not registered "
                "them: register each again (branch.gate(check)) before resuming, so the calls and rounds "
                "that follow pass the same gates; nothing was decided")

    async def _run(self, ctx: RunContext) -> Ran:
        try:
            ran = await run_loop(ctx)
        finally:
            self._suspended_runs = {c: r for c, r in self._suspended_runs.items()
                                    if c in {p.call_id for p in self.pending_calls()}}
        if ran.trace.exit == "deferred":
            for call in self.pending_calls():
                self._suspended_runs.setdefault(call.call_id, ctx)
        return ran

    async def act(
        self,
        action_request: Any,
        *,
        strategy: str = "concurrent",
        suppress_errors: bool = True,
        verbose_action: bool = False,
        call_params: AlcallParams | None = None,
        tools: Any = None,
    ) -> list[ActionResponseModel | None]:
        """Run action requests through :func:`lionops.act` with an ActionParam
        built from these keywords (ADR-0022 D4).

        ``tools`` is the offered set, as ``operate(tools=...)``: ``None`` (the
        default) offers every registered tool; a name, Tool or list of them
        offers only those, and a request for any other registered tool gets
        a ``not_offered`` error payload. Each response's ``.record`` is the
        typed :class:`~lionops.models.ActionRecord` of its decision.
        """
        check_flags({"suppress_errors": suppress_errors, "verbose_action": verbose_action})
        param = (_ACT_PARAMS.get((strategy, suppress_errors, verbose_action))
                 if call_params is None and tools is None and type(strategy) is str else None)
        if param is None:
            param = ActionParam(
                action_call_params=call_params or DEFAULT_ACTION_CALL_PARAMS,
                tools=tools,
                strategy=strategy,
                suppress_errors=suppress_errors,
                verbose_action=verbose_action,
            )
        try:
            return await act_fn(self, action_request, param)
        finally:
            self.trim_history()

    # ------------------------------------------------------------ history

    def clear_messages(self) -> None:
        """Remove all messages but the system message."""
        self.messages.clear(keep_system=True)

    def clear_logs(self) -> None:
        """Remove every event-log entry (log subscribers stay subscribed)."""
        self.logs.clear()

    def clear_traces(self) -> None:
        """Remove every kept trace."""
        self.traces.clear()

    def trim_history(self) -> None:
        """Apply ``max_messages``, ``max_traces`` and ``max_logs`` now (oldest
        first out); every ``operate()`` and ``act()`` does so when it ends."""
        if self.max_messages is not None:
            self.messages.keep_last(self.max_messages)
        if self.max_traces is not None and len(self.traces) > self.max_traces:
            del self.traces[: len(self.traces) - self.max_traces]
        if self.max_logs is not None:
            self.logs.keep_last(self.max_logs)

    def fork(self, *, messages: bool = False, name: str | None = None) -> Self:
        """A new branch of this one's class with its models, tools, gates,
        hooks, context providers, limits, engine, system message and every
        other policy it holds (an ``authorize`` set on the branch, a
        subclass's attributes), and its own id and empty logs and traces:
        calls on forks never see each other's turns. ``__init__`` is not run
        again, so a subclass whose constructor takes other arguments forks too.

        ``messages=True`` copies the current history too (copies of the
        messages: later changes on either side stay apart). Tools, gates,
        hooks and providers are the same objects, registered anew, so
        registering one later on either branch does not change the other.
        Other attributes are the same objects (a shallow copy).
        """
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        _copy_slots(self, new)
        for hook in ("authorize", "authorization"):  # a hook bound to this branch is bound to the fork
            method = self.__dict__.get(hook)
            if getattr(method, "__self__", None) is self:
                object.__setattr__(new, hook, types.MethodType(method.__func__, new))  # type: ignore[union-attr]
        new.id = _new_id()
        if name is not None:
            new.name = name
        new.messages = MessageLog()
        new.logs = EventLog()
        new.traces = []
        new._prepared = None
        new.suspensions = Suspensions()
        new.acts = ActionManager()
        for msg in self.messages:
            if messages or msg.role == "system":
                new.messages.add(msg.role, copy.deepcopy(msg.content), sender=msg.sender,
                                 recipient=new.id if msg.recipient == self.id else msg.recipient,
                                 metadata=copy.deepcopy(msg.metadata))
        new.acts.register(list(self.acts.select()))
        new._gates = list(self._gates)
        new._restored_gates = self._restored_gates
        new._hooks = {p: list(h) for p, h in self._hooks.items()}
        new._providers = list(self._providers)
        return new

    def dump_logs(self, path: str | Path) -> Path:
        """Write the event log as JSON to ``path`` atomically."""
        return self.logs.dump(path)

    def _runs_to_list(self) -> list[dict[str, Any]]:
        """The suspended runs (``resume_run``) as data, each with the calls it waits on."""
        calls: dict[int, list[str]] = {}
        runs: dict[int, RunContext] = {}
        for call_id, run in self._suspended_runs.items():
            calls.setdefault(id(run), []).append(call_id)
            runs[id(run)] = run
        return [run_to_dict(run, calls[key]) for key, run in runs.items()]

    def snapshot(self, path: str | Path, *, key: str | bytes | None = None) -> Path:
        """Write messages, logs, traces, the usage so far, the usage limits,
        the names of the gates, the suspended operations (their pending
        calls) and the suspended runs (their keywords, objects by name: see
        :meth:`resume_run`) as one JSON document, atomically.

        ``key``: sign the document (HMAC-SHA256 over its canonical JSON), so
        that :meth:`restore` with the same key refuses a file anyone changed
        (a pending call's arguments and their digest included). Without a
        key the file is trusted as it is: keep it where only the app writes.
        """
        doc: dict[str, Any] = {
            "branch": self.id,
            "name": self.name,
            "messages": self.messages.to_list(),
            "logs": self.logs.to_list(),
            # trace meta holds adapter facts that may not be JSON
            "traces": [to_jsonable(t.to_dict()) for t in self.traces],
            "suspended": self.suspensions.to_dict(),
            "runs": self._runs_to_list(),
            "usage": self.usage.as_dict(),
            "limits": None if self.limits is None else dataclasses.asdict(self.limits),
            "gates": [_gate_name(check) for check in self._gates],
        }
        if key is not None:
            doc = json.loads(json.dumps(doc))  # what restore() reads back is what is signed
            doc["signature"] = {"alg": "hmac-sha256", "value": _signature(doc, key)}
        written = atomic_write_text(path, json.dumps(doc, indent=2))
        if self.suspensions.ledger is None and self.suspensions.ops:
            # from now on its calls are decided once with every restore of the file
            self.suspensions.ledger = DecisionLedger.beside(written)
        return written

    @classmethod
    def restore(cls, path: str | Path, *, chat_model: iModel | None = None, tools: Any = None,
                key: str | bytes | None = None, **kwargs: Any) -> Self:
        """A branch rebuilt from :meth:`snapshot` in this (or another) process:
        its id, name, messages, event log, traces and suspended operations,
        with ``chat_model``, ``tools`` and the other ``Branch`` keywords given
        here (code never comes from the file: it is read as data, and only
        the tools registered here can run a resumed call).

        A suspended result that was a model instance comes back as its JSON
        data (a dict), and ``enrich`` attaches ``action_responses`` to it;
        ``resume(..., response_format=Model)`` gives it back as the model.

        The usage limits come back from the file unless ``limits=`` is given.
        Gates are code, so they are not in the file, only their names: a
        restored branch refuses :meth:`resume_run` (``ResumeError``, nothing
        decided) until a gate of each name is registered again
        (``branch.gate(check)``), because the rounds that follow ask the
        model again and their calls must pass the gates the first process
        had. :meth:`resume` runs only the calls decided by hand.

        ``key``: the key the file was signed with (``snapshot(path, key=)``);
        a signed file needs it, and a file that does not match it is refused.

        Raises:
            SnapshotError: the file is not a branch snapshot, is signed and
                no key (or another key) was given, or a key was given and
                the file is not signed.
        """
        try:
            doc = json.loads(Path(path).read_text())
            _check_signature(path, doc, key)
            if "limits" not in kwargs and isinstance(doc.get("limits"), dict):
                kwargs["limits"] = UsageLimits(**doc["limits"])
            branch = cls(chat_model=chat_model, tools=tools, **kwargs)
            branch._restored_gates = tuple(str(name) for name in doc.get("gates") or ())
            branch.id = str(doc["branch"])
            branch.name = doc.get("name", branch.name)
            branch.messages = MessageLog()
            for m in doc["messages"]:
                msg = branch.messages.add(m["role"], m["content"], sender=m.get("sender"),
                                          recipient=m.get("recipient"), metadata=dict(m.get("metadata") or {}))
                if isinstance(m.get("timestamp"), (int, float)):
                    msg.timestamp = m["timestamp"]
            for e in doc["logs"]:
                branch.logs.log(str(e["kind"]), dict(e["content"]))
            branch.traces = [Trace.from_dict(t) for t in doc["traces"]]
            branch.suspensions = Suspensions.from_dict(doc.get("suspended", {}))
            branch.suspensions.ledger = DecisionLedger.beside(path)
            for d in doc.get("runs", []):
                run, calls = run_from_dict(branch, d)
                branch._suspended_runs.update(dict.fromkeys(calls, run))
            branch.usage = UsageSoFar.from_dict(doc.get("usage", {}))
        except SnapshotError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise SnapshotError(f"{path} is not a branch snapshot: {type(exc).__name__}: {safe_str(exc)}") from None
        return branch

    def __repr__(self) -> str:
        return (
            f"Branch(id={self.id[:8]}, name={self.name!r}, model={self.chat_model!r}, "
            f"tools={self.acts.names}, messages={len(self.messages)}, traces={len(self.traces)})"
        )


def _gate_name(check: Any) -> str:
    """The name a gate is recorded under in a snapshot: its qualified name."""
    return str(getattr(check, "__qualname__", None) or type(check).__qualname__)


def _signature(doc: dict[str, Any], key: str | bytes) -> str:
    """HMAC-SHA256 of ``doc``'s canonical JSON under ``key``."""
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, bytes) or not key:
        raise ArgumentTypeError("key must be a non-empty str or bytes")
    body = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def _check_signature(path: str | Path, doc: Any, key: str | bytes | None) -> None:
    """Refuse a snapshot whose signature the key does not confirm (the key is never shown)."""
    signature = doc.pop("signature", None) if isinstance(doc, dict) else None
    if key is None:
        if signature is not None:
            raise SnapshotError(f"{path} is signed: give Branch.restore(path, key=...) the key it was signed with")
        return
    if not isinstance(signature, dict) or signature.get("alg") != "hmac-sha256":
        raise SnapshotError(f"{path} is not signed (or not with hmac-sha256), and a key was given: refused")
    value = signature.get("value")
    if not isinstance(value, str) or not hmac.compare_digest(value, _signature(doc, key)):
        raise SnapshotError(f"{path} does not match its signature under the key given: the file was changed "
                            "after it was written, or another key signed it; refused")


def _is_authorization(value: Any) -> bool:
    """Whether ``value`` reads as an :class:`Authorization`: a decision, its
    reason and, optionally, what the model is told."""
    return (isinstance(value, tuple) and len(value) in (2, 3)
            and value[0] in ("allowed", "denied", "timed_out", "deferred")
            and all(part is None or isinstance(part, str) for part in value[1:])
            and (len(value) == 2 or value[2] is None or value[0] == "denied"))  # only a denial tells the model


def _bounded_authorization(own: Callable[[Any, ToolInvocation], Any]) -> Callable[..., Any]:
    """``own`` (an ``authorization(branch, invocation)``) asked through :meth:`Branch._ask`."""
    async def authorization(self: Branch, invocation: ToolInvocation) -> Authorization:
        return await self._ask(functools.partial(own, self), "authorization", invocation, record=True)

    functools.update_wrapper(authorization, own)
    authorization._bounded = True  # type: ignore[attr-defined]
    return authorization


#: Branch's own operate_traced as defined: operate() runs the operation itself
#: only while the branch's class (or the branch) has not replaced it
_OPERATE_TRACED = Branch.operate_traced


def _copy_slots(source: Any, target: Any) -> None:
    """The values ``source`` holds in the ``__slots__`` of its classes, set on ``target``."""
    for cls in type(source).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            name = f"_{cls.__name__.lstrip('_')}{slot}" if slot.startswith("__") and not slot.endswith("__") else slot
            try:
                value = object.__getattribute__(source, name)
            except AttributeError:
                continue
            object.__setattr__(target, name, value)


_AUTHORIZE = Branch.authorize
_AUTHORIZATION = Branch.authorization
_ALLOWED = Authorization("allowed", None)
