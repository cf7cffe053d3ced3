"""The runtime of one operation: every seam where lionops meets the outside.

An ``operate()`` call talks to the world in a few places only: the HTTP
transport of API endpoints, the transport that runs CLI agents, the runner
that invokes tools, the clock every wait sleeps on, a check made just before
tools are dispatched, and the trace facts adapters record. Normally each is
the real thing (``None`` here). Record/replay, durable workflows and tests
swap them, all at once, with :func:`use_runtime`.

The runtime is one immutable object held in one context variable, so it
follows anyio child tasks and a change never leaks out of its ``with`` block.
This module is the bottom of the house: it imports nothing of lionops.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ArgumentTypeError, did_you_mean

if TYPE_CHECKING:  # httpx2 itself is imported by the API transport, when one is first used
    import httpx2

__all__ = ["Runtime", "ClockLike", "current_runtime", "use_runtime"]


class ClockLike(Protocol):
    """What lionops needs of a clock (``lionops.clock.Clock`` is the real one)."""

    def time(self) -> float: ...

    def perf_counter_ns(self) -> int: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


#: ``await runner(tool, kwargs)``: runs one tool with its validated arguments.
ToolRunner = Callable[[Any, dict[str, Any]], Awaitable[Any]]
#: ``await transport(endpoint, argv, stdin, stdout)``: one CLI agent run.
CLITransport = Callable[[Any, list[str], str, Any], Awaitable[Any]]
#: ``check(requests)``: sees one call's checked requests before any dispatch;
#: it may return the indices that must never be dispatched, each with the
#: exception raised when ``act()`` reaches it.
DispatchCheck = Callable[[list[tuple[int, Any, Any, "str | None"]]], "Mapping[int, BaseException] | None"]


@dataclasses.dataclass(frozen=True, slots=True)
class Runtime:
    """The seams in force for the current context (``None``: the real one).

    Attributes:
        http_transport: an httpx2 transport that carries API requests instead
            of the network.
        cli_transport: runs a CLI agent turn instead of spawning the process.
        tool_runner: invokes tools instead of calling their functions.
        clock: the clock for every sleep, deadline and trace timing.
        before_dispatch: called with one call's requests once each shape is
            checked; what it raises ends ``act()`` with nothing dispatched,
            and reaching a request whose index it returns raises the
            exception it gives for it (nothing authorized, hooked, invoked
            or offered to a context provider).
        trace_meta: the ``meta`` dict of the trace being recorded.
    """

    http_transport: httpx2.AsyncBaseTransport | None = None
    cli_transport: CLITransport | None = None
    tool_runner: ToolRunner | None = None
    clock: ClockLike | None = None
    before_dispatch: DispatchCheck | None = None
    trace_meta: dict[str, Any] | None = None

    def __repr__(self) -> str:
        swapped = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]
        return f"Runtime(swapped={swapped!r})"


_RUNTIME: contextvars.ContextVar[Runtime] = contextvars.ContextVar("lionops_runtime", default=Runtime())


def current_runtime() -> Runtime:
    """The runtime of the current context."""
    return _RUNTIME.get()


#: the seams, in field order, and the setters of their slots.
_SEAMS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Runtime))
_SET = tuple(getattr(Runtime, name).__set__ for name in _SEAMS)
_SET_HTTP, _SET_CLI, _SET_RUNNER, _SET_CLOCK, _SET_CHECK, _SET_META = _SET
_new = object.__new__


def _replaced(cur: Runtime, changes: dict[str, Any]) -> Runtime:
    """``cur`` with ``changes``: what ``dataclasses.replace`` gives, with the
    slots set directly (the frozen ``__init__`` goes through
    ``object.__setattr__`` for every field, ``replace`` walks the fields too)."""
    get = changes.get
    runtime = _new(Runtime)
    _SET_HTTP(runtime, get("http_transport", cur.http_transport))
    _SET_CLI(runtime, get("cli_transport", cur.cli_transport))
    _SET_RUNNER(runtime, get("tool_runner", cur.tool_runner))
    _SET_CLOCK(runtime, get("clock", cur.clock))
    _SET_CHECK(runtime, get("before_dispatch", cur.before_dispatch))
    _SET_META(runtime, get("trace_meta", cur.trace_meta))
    return runtime


class _Filling:
    """A :class:`Runtime` being filled: the same slots, in the same order,
    without the frozen ``__setattr__``, so each is set by a plain attribute
    store; the filled object's ``__class__`` is then set to ``Runtime``
    (Python allows that between two classes of the same layout), and from
    then on it is a ``Runtime`` like any other: frozen, equal to one built
    directly, with its repr."""

    __slots__ = _SEAMS
    http_transport: Any
    cli_transport: Any
    tool_runner: Any
    clock: Any
    before_dispatch: Any
    trace_meta: Any


def _enter_trace(meta: dict[str, Any]) -> contextvars.Token[Runtime]:
    """``use_runtime(trace_meta=meta).__enter__()`` for the driver's one seam,
    without the context manager: the current runtime with ``meta`` set
    (copied field by field into a :class:`_Filling`), the token to give
    :func:`_leave`."""
    cur = _RUNTIME.get()
    runtime = _new(_Filling)
    runtime.http_transport = cur.http_transport
    runtime.cli_transport = cur.cli_transport
    runtime.tool_runner = cur.tool_runner
    runtime.clock = cur.clock
    runtime.before_dispatch = cur.before_dispatch
    runtime.trace_meta = meta
    runtime.__class__ = Runtime  # type: ignore[assignment]
    return _RUNTIME.set(runtime)  # type: ignore[arg-type]


#: Restore the runtime :func:`_enter_trace` replaced (``ContextVar.reset`` of its token).
_leave = _RUNTIME.reset


class _Swap:
    """The context manager :func:`use_runtime` returns."""

    __slots__ = ("_changes", "_token")

    def __init__(self, changes: dict[str, Any]) -> None:
        if not _SEAM_SET.issuperset(changes):
            unknown = changes.keys() - _SEAM_SET
            hint = did_you_mean(next(iter(unknown)), _SEAMS) if len(unknown) == 1 else ""
            raise ArgumentTypeError(
                f"use_runtime() got unknown seams {sorted(unknown)!r}{hint}; known: {list(_SEAMS)!r}")
        self._changes = changes
        self._token: contextvars.Token[Runtime] | None = None

    def __enter__(self) -> Runtime:
        current = _RUNTIME.get()
        changes = self._changes
        for name, value in changes.items():
            if getattr(current, name) is not value:
                runtime = _replaced(current, changes)
                self._token = _RUNTIME.set(runtime)
                return runtime
        return current  # nothing changes: the context variable is left as it is

    def __exit__(self, *exc_info: object) -> None:
        token, self._token = self._token, None
        if token is not None:
            _RUNTIME.reset(token)


_SEAM_SET = frozenset(_SEAMS)


def use_runtime(**changes: Any) -> contextlib.AbstractContextManager[Runtime]:
    """Swap the named seams for the ``with`` block (and tasks started in it).

    Unnamed seams keep their current value; the previous runtime is restored
    on exit, whatever happens inside. A name that is not a seam raises
    ``TypeError``. When every named seam already has its value, the block
    runs in the current runtime unchanged.
    """
    return _Swap(changes)
