"""Installing an ``__init__`` generated from source lines, once per class (as
``dataclasses`` generates its own): the frozen records built on every call use
one that skips the frozen ``__setattr__``."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["install_init"]

T = TypeVar("T")


def install_init(cls: type[T], params: list[str], body: list[str], namespace: dict[str, Any]) -> type[T]:
    """Make ``def __init__(<params>): <body>`` in ``namespace`` and install it
    on ``cls``, with the qualified name and annotations of the ``__init__`` it
    replaces. ``params`` and ``body`` are built from field names (identifiers)
    and names of ``namespace`` only."""
    exec(f"def __init__({', '.join(params)}):\n" + "\n".join(body), namespace)  # noqa: S102 - see above
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = cls.__init__.__annotations__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
