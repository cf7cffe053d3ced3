"""Values derived from a caller's class, kept on that class.

A process-wide dictionary keyed by a class keeps the class alive for as long
as the process runs, and a weak one does not help when the value refers back
to its key (a generated subclass of the caller's model, a generated model
that names its dataclass): a service that makes its response types at run
time would keep every one of them. Kept in the class's own namespace, the
cache is collected with the class.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["class_cache"]

#: the attribute of a class's own namespace that holds its cache
_ATTR = "__lionops_cache__"
#: the caches of classes that take no attributes (kept for the process's life, as before)
_FALLBACK: dict[type, dict[Any, Any]] = {}
_LOCK = threading.Lock()


def class_cache(cls: type) -> dict[Any, Any]:
    """The cache of values derived from ``cls`` itself (never one of its bases'),
    made on first use."""
    cache: dict[Any, Any] | None = cls.__dict__.get(_ATTR)
    if cache is not None:
        return cache
    with _LOCK:
        cache = cls.__dict__.get(_ATTR)
        if cache is None:
            cache = {}
            try:
                setattr(cls, _ATTR, cache)
            except (TypeError, AttributeError):  # a built-in or a class that refuses attributes
                cache = _FALLBACK.setdefault(cls, cache)
    return cache
