"""Installing an ``__init__`` generated from source lines, once per class (as
``dataclasses`` generates its own): the frozen records built on every call use
one that skips the frozen ``__setattr__``."""

from __future__ import annotations

import sys
from typing import Any, TypeVar

__all__ = ["install_init"]

T = TypeVar("T")


def install_init(cls: type[T], params: list[str], body: list[str], namespace: dict[str, Any]) -> type[T]:
    """Make ``def __init__(<params>): <body>`` and install it on ``cls``, with
    the qualified name and annotations of the ``__init__`` it replaces.
    ``params`` and ``body`` are built from field names (identifiers) and names
    of ``namespace`` only. As ``dataclasses`` does, the function runs in the
    globals of ``cls``'s module (so its annotations resolve there, for
    ``typing.get_type_hints`` and ``inspect.signature(..., eval_str=True)``)
    and reads the names of ``namespace`` as closure variables."""
    names = [name for name in namespace if name != "__name__"]
    source = "\n".join([
        f"def __create_init__({', '.join(names)}):",
        f"    def __init__({', '.join(params)}):",
        *(f"    {line}" for line in body),
        "    return __init__",
    ])
    module = sys.modules.get(cls.__module__)
    scope: dict[str, Any] = {}
    exec(source, vars(module) if module is not None else {}, scope)  # noqa: S102 - see above
    init = scope["__create_init__"](**{name: namespace[name] for name in names})
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = cls.__init__.__annotations__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
