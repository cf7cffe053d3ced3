"""Bulk slot access for the slotted records built on every ``operate()`` call
(the frozen parameter dataclasses, the operation context).

A slot's member descriptor reads and sets that slot directly, skipping a
frozen dataclass's ``__setattr__``. Mapping :data:`set_slot` over the
descriptors of a class sets many slots in one C-level loop instead of one
Python statement per field::

    exhaust(map(set_slot, descriptors, repeat(obj), values))  # obj.<slot> = value, each

:data:`exhaust` is the itertools "consume" recipe: it runs an iterator to
its end and keeps nothing.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["slot_descriptors", "get_slot", "set_slot", "exhaust"]

#: ``get_slot(descriptor, obj)`` is ``obj.<slot>``
get_slot = types.MemberDescriptorType.__get__
#: ``set_slot(descriptor, obj, value)`` is ``obj.<slot> = value``, frozen or not
set_slot = types.MemberDescriptorType.__set__
#: ``exhaust(iterator)`` runs ``iterator`` to its end
exhaust: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend


def slot_descriptors(cls: type, names: Iterable[str]) -> tuple[types.MemberDescriptorType, ...] | None:
    """The slot descriptors of ``cls`` for ``names``, or ``None`` when one of
    them is not a slot (a subclass without slots keeps its fields in ``__dict__``)."""
    found = tuple(getattr(cls, name, None) for name in names)
    if all(isinstance(d, types.MemberDescriptorType) for d in found):
        return found  # type: ignore[return-value]
    return None
