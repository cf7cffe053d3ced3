"""Read-only JSON containers for what is built once and shared by every call.

A :class:`FrozenDict` is a real ``dict`` and a :class:`FrozenList` a real
``list`` (``json.dumps``, ``==`` and ``isinstance`` work, httpx2 encodes them
as it encodes plain ones), but every mutating method raises ``TypeError``,
so a caller that tries to change a shared schema is told so instead of
changing it for the next call. ``copy``, ``deepcopy`` and ``pickle`` give
back a read-only copy; :func:`thaw` gives a plain, mutable one.
"""

from __future__ import annotations

from typing import Any

from .errors import ReadOnlyError

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` whose mutating methods raise ``TypeError`` (see the module docstring)."""

    __slots__ = ()
    _refusal = "this mapping is shared and read-only; copy it to change it"

    def _refuse(self, *_: Any, **__: Any) -> None:
        raise ReadOnlyError(self._refusal)

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __reduce_ex__(self, protocol: Any) -> Any:  # copy, deepcopy, pickle: rebuilt whole
        return (type(self), (dict(self),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"


class FrozenList(list):  # type: ignore[type-arg]
    """A ``list`` whose mutating methods raise ``TypeError`` (see the module docstring)."""

    __slots__ = ()

    def _refuse(self, *_: Any, **__: Any) -> None:
        raise ReadOnlyError("this list is shared and read-only; copy it to change it")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"


def freeze(value: Any) -> Any:
    """A read-only deep copy of JSON-shaped data (dicts, lists and tuples, scalars)."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of JSON-shaped data."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
