"""Branch messages and the event log.

``branch.messages`` is an ordered :class:`MessageLog` of :class:`Message`
(roles ``system``, ``user``, ``assistant``, ``action_request``,
``action_response``); ``branch.logs`` is an ordered :class:`EventLog` of
:class:`LogEntry`. Both dump atomically to JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, TypeAdapter

from ._files import atomic_write_text
from ._text import safe_str
from .errors import ArgumentTypeError, ConfigurationError, did_you_mean

if TYPE_CHECKING:
    from .models import ActionRecord

__all__ = ["Message", "MessageLog", "LogEntry", "EventLog", "Role", "to_jsonable"]

Role = Literal["system", "user", "assistant", "action_request", "action_response"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "action_request", "action_response"})

_ids = itertools.count(1)

logger = logging.getLogger("lionops.messages")


#: Containers nested deeper than this are written as a placeholder string.
MAX_JSONABLE_DEPTH = 200


def to_jsonable(value: Any) -> Any:
    """Best-effort conversion of ``value`` into JSON-compatible data (never raises).

    Opaque objects become their ``repr``; a container that contains itself
    becomes ``"<cycle>"``; nesting past :data:`MAX_JSONABLE_DEPTH` becomes
    ``"<nested too deep>"`` (so ``json.dumps`` of the result cannot recurse
    without bound either).
    """
    return _jsonable(value, set(), 0)


@functools.lru_cache(maxsize=256)
def _adapter(cls: type) -> TypeAdapter[Any]:
    return TypeAdapter(cls)


def _jsonable(value: Any, active: set[int], depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, type):
        return value.__name__
    if depth >= MAX_JSONABLE_DEPTH:
        return "<nested too deep>"
    if isinstance(value, BaseModel):
        try:
            return value.model_dump(mode="json")
        except Exception:  # noqa: BLE001
            return _repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # as pydantic dumps it
        try:
            return _jsonable(_adapter(type(value)).dump_python(value, mode="json"), active, depth)
        except Exception:  # noqa: BLE001
            return _repr(value)
    if not isinstance(value, (dict, list, tuple, set, frozenset)):
        return _repr(value)
    if id(value) in active:
        return "<cycle>"
    active.add(id(value))
    try:
        if isinstance(value, dict):
            return {str(k): _jsonable(v, active, depth + 1) for k, v in value.items()}
        return [_jsonable(v, active, depth + 1) for v in value]
    finally:
        active.discard(id(value))


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - RecursionError, a raising __repr__
        return f"<unrepresentable {type(value).__name__}>"


@dataclass(slots=True)
class Message:
    """One branch message.

    ``content`` is the text or structured payload; ``metadata`` carries
    extras such as token usage and latency on assistant messages.
    """

    role: Role
    content: Any
    sender: str | None = None
    recipient: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: int = field(default_factory=_ids.__next__)
    timestamp: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "content": to_jsonable(self.content),
            "sender": self.sender,
            "recipient": self.recipient,
            "metadata": to_jsonable(self.metadata),
            "timestamp": self.timestamp,
        }

    def __repr__(self) -> str:
        text = repr(self.content)
        if len(text) > 80:
            text = text[:77] + "..."
        return f"Message(role={self.role!r}, content={text})"


#: makes a Message whose fields are then set one by one (MessageLog.add_action_exchange)
_new_message = object.__new__
_next_id = _ids.__next__
#: the clock of a message's and an entry's timestamp (their dataclass default factory)
_now = time.time


def _check_role(role: Any) -> None:
    """Refuse a role that is not one of the five, naming the closest."""
    if not isinstance(role, str) or role not in ROLES:
        hint = did_you_mean(role, ROLES) if isinstance(role, str) else ""
        raise ConfigurationError(f"unknown message role {role!r}{hint}; expected one of {sorted(ROLES)}")


class MessageLog:
    """Ordered messages of a branch; list-like (len, iteration, indexing)."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[Message] = []

    def add(self, role: Role, content: Any, **kw: Any) -> Message:
        """Append a message and return it. ``role`` must be one of the five roles."""
        _check_role(role)
        msg = Message(role=role, content=content, **kw)
        self._items.append(msg)
        return msg

    def add_action_request(self, function: Any, arguments: Any, **kw: Any) -> Message:
        """Append an ``action_request`` message: ``{"function", "arguments"}``."""
        return self.add("action_request", {"function": function, "arguments": arguments}, **kw)

    def add_action_response(self, function: Any, arguments: Any, output: Any, **kw: Any) -> Message:
        """Append an ``action_response`` message: ``{"function", "arguments", "output"}``."""
        return self.add("action_response", {"function": function, "arguments": arguments, "output": output}, **kw)

    def add_action_exchange(self, function: Any, arguments: Any, output: Any, *, sender: str | None,
                            recipient: str | None, metadata: dict[str, Any]) -> tuple[Message, Message]:
        """Append an ``action_request`` message from ``sender`` to ``recipient``
        and its ``action_response`` back (what :meth:`add_action_request` then
        :meth:`add_action_response` append); the request gets a copy of ``metadata``.
        A subclass with its own :meth:`add`, :meth:`add_action_request` or
        :meth:`add_action_response` gets both through them."""
        if self._writers_overridden():
            return (self.add_action_request(function, arguments, sender=sender, recipient=recipient,
                                            metadata=dict(metadata)),
                    self.add_action_response(function, arguments, output, sender=recipient, recipient=sender,
                                             metadata=metadata))
        return self._append_exchanges(sender, ((function, arguments, output, recipient, metadata),))[0]

    def add_action_exchanges(self, exchanges: Iterable[tuple[Any, Any, Any, str | None, dict[str, Any]]], *,
                             sender: str | None) -> list[tuple[Message, Message]]:
        """:meth:`add_action_exchange` for each ``(function, arguments, output,
        recipient, metadata)`` in order, all from ``sender`` (what ``act()``
        writes for a batch). A subclass with its own :meth:`add_action_exchange`
        (or any of the writers it uses) gets each exchange through it."""
        if type(self).add_action_exchange is not MessageLog.add_action_exchange or self._writers_overridden():
            return [self.add_action_exchange(function, arguments, output, sender=sender, recipient=recipient,
                                             metadata=metadata)
                    for function, arguments, output, recipient, metadata in exchanges]
        return self._append_exchanges(sender, exchanges)

    def _writers_overridden(self) -> bool:
        cls = type(self)
        return (cls.add is not MessageLog.add or cls.add_action_request is not MessageLog.add_action_request
                or cls.add_action_response is not MessageLog.add_action_response)

    def _append_exchanges(self, sender: str | None, exchanges: Iterable[tuple[Any, Any, Any, str | None,
                                                                               dict[str, Any]]]
                          ) -> list[tuple[Message, Message]]:
        # Each message is filled as Message's own __init__ fills it (its seven
        # fields, the next id, the time now), without the call's keyword and
        # default-factory handling: two per exchange, appended as a pair.
        written: list[tuple[Message, Message]] = []
        items = self._items
        for function, arguments, output, recipient, metadata in exchanges:
            request = _new_message(Message)
            request.role = "action_request"
            request.content = {"function": function, "arguments": arguments}
            request.sender = sender
            request.recipient = recipient
            request.metadata = dict(metadata)
            request.id = _next_id()
            request.timestamp = _now()
            response = _new_message(Message)
            response.role = "action_response"
            response.content = {"function": function, "arguments": arguments, "output": output}
            response.sender = recipient
            response.recipient = sender
            response.metadata = metadata
            response.id = _next_id()
            response.timestamp = _now()
            items += (request, response)
            written.append((request, response))
        return written

    def clear(self, keep_system: bool = True) -> None:
        """Remove messages; the system message stays unless ``keep_system`` is false."""
        self._items = [m for m in self._items if keep_system and m.role == "system"]

    def keep_last(self, n: int) -> None:
        """Keep the system message(s) and the last ``n`` other messages (``n``
        an int >= 0: an ArgumentTypeError or ConfigurationError otherwise)."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise ArgumentTypeError(f"keep_last takes an int, got {type(n).__name__}")
        if n < 0:
            raise ConfigurationError(f"keep_last takes a count >= 0, got {n}")
        others = [i for i, m in enumerate(self._items) if m.role != "system"]
        if len(others) > n:
            drop = set(others[: len(others) - n])
            self._items = [m for i, m in enumerate(self._items) if i not in drop]

    def by_role(self, role: Role) -> list[Message]:
        """The messages of ``role``; an unknown role is a ConfigurationError naming
        the closest roles (a misspelling would otherwise find nothing)."""
        _check_role(role)
        return [m for m in self._items if m.role == role]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self._items))

    def __getitem__(self, index: int) -> Message:
        return self._items[index]

    def to_list(self) -> list[dict[str, Any]]:
        return [m.to_dict() for m in self._items]

    def __repr__(self) -> str:
        return f"MessageLog({len(self._items)} messages)"


@dataclass(slots=True)
class LogEntry:
    """One event-log entry: ``kind`` (e.g. ``"action"``, ``"action_error"``,
    ``"denied"``, ``"hook_error"``) and a JSON-compatible ``content``.

    The entry of a tool decision also carries its typed ``record`` (the
    request's :class:`~lionops.models.ActionRecord`; ``content`` is made from
    it), which is not part of the JSON form.
    """

    kind: str
    content: dict[str, Any]
    timestamp: float = field(default_factory=time.time)
    record: ActionRecord | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "content": to_jsonable(self.content), "timestamp": self.timestamp}


#: makes a LogEntry whose fields are then set one by one (EventLog.log)
_new_entry = object.__new__


class EventLog:
    """Ordered event log of a branch (ADR-0022 D4 "durable event logging").

    ``subscribe(sink)`` forwards every new entry to ``sink(entry)``, a sync
    callable (to reach async code, hand the entry to a memory object stream
    with ``send_nowait``). A sink that raises is logged as a ``sink_error``
    entry, which is not forwarded, and never changes the operation.
    """

    __slots__ = ("_items", "_sinks")

    def __init__(self) -> None:
        self._items: list[LogEntry] = []
        self._sinks: list[Callable[[LogEntry], Any]] = []

    def log(self, kind: str, content: dict[str, Any], *, record: ActionRecord | None = None) -> LogEntry:
        """Append an entry (``record``: the typed decision it reports) and forward it."""
        # filled as LogEntry's own __init__ fills it (the time now), without
        # the call's keyword and default-factory handling
        entry = _new_entry(LogEntry)
        entry.kind = kind
        entry.content = content
        entry.timestamp = _now()
        entry.record = record
        self._items.append(entry)
        if self._sinks:
            self._forward(entry)
        return entry

    def subscribe(self, sink: Callable[[LogEntry], Any]) -> Callable[[], None]:
        """Forward each new entry to ``sink``; returns a function that unsubscribes it.

        Raises ``TypeError`` for an async function: ``log()`` is synchronous.
        """
        if inspect.iscoroutinefunction(sink):
            raise ArgumentTypeError("a log sink must be a sync callable; forward to async code with send_nowait")
        self._sinks.append(sink)

        def unsubscribe() -> None:
            if sink in self._sinks:
                self._sinks.remove(sink)

        return unsubscribe

    def _forward(self, entry: LogEntry) -> None:
        for sink in list(self._sinks):
            try:
                sink(entry)
            except Exception as exc:  # noqa: BLE001 - observers never change the outcome
                logger.warning("log sink %r failed: %s", sink, safe_str(exc))
                self._items.append(LogEntry("sink_error", {
                    "sink": getattr(sink, "__qualname__", type(sink).__name__),
                    "kind": entry.kind, "error": safe_str(exc), "type": type(exc).__name__,
                }))

    def clear(self) -> None:
        """Remove every entry; subscribers stay subscribed."""
        self._items.clear()

    def keep_last(self, n: int) -> None:
        """Keep the newest ``n`` entries (``n`` an int >= 0); subscribers stay subscribed."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise ArgumentTypeError(f"keep_last takes an int, got {type(n).__name__}")
        if n < 0:
            raise ConfigurationError(f"keep_last takes a count >= 0, got {n}")
        if len(self._items) > n:
            del self._items[: len(self._items) - n]

    def of_kind(self, kind: str) -> list[LogEntry]:
        return [e for e in self._items if e.kind == kind]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(list(self._items))

    def __getitem__(self, index: int) -> LogEntry:
        return self._items[index]

    def to_list(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self._items]

    def dump(self, path: str | os.PathLike[str]) -> Path:
        """Write the log as JSON to ``path`` atomically."""
        return atomic_write_text(path, json.dumps(self.to_list(), indent=2))

    def __repr__(self) -> str:
        return f"EventLog({len(self._items)} entries)"
