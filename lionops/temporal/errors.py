"""Typed errors of :mod:`lionops.temporal` (all under :class:`~lionops.errors.LionopsError`)."""

from __future__ import annotations

import builtins
import functools
from typing import Any

from ..errors import LionopsError

__all__ = [
    "DurableError", "DurableArgumentError", "NotInWorkflowError", "RemoteError",
    "DurableOperationError", "ApprovalError", "remote_error",
]


class DurableError(LionopsError):
    """Base class of the errors raised by the Temporal layer."""


class DurableArgumentError(DurableError, TypeError):
    """A keyword cannot run durably: it names a worker-side part (``chat_model``,
    ``middle``, ...) or its value cannot cross to a Temporal activity."""


class NotInWorkflowError(DurableError, RuntimeError):
    """A workflow-only call (``DurableBranch.operate``, ``.branch()``) was made
    outside Temporal workflow code."""


class ApprovalError(DurableError, ValueError):
    """A workflow refused decisions for a reason without a typed error of its
    own (an unknown or already decided call is
    :class:`~lionops.UnknownCallError` or :class:`~lionops.CallAlreadyDecidedError`,
    as in process)."""


class RemoteError(DurableError):
    """An exception raised in an activity (the model call or a tool), seen in
    the workflow.

    Its class is named like the original (``EndpointStatusError``,
    ``ValueError``...) so traces, error payloads and messages read exactly as
    in process; for a built-in exception type it is also an instance of that
    type. ``remote_type`` is the original type name.
    """

    remote_type: str = "Exception"


@functools.cache
def _remote_class(type_name: str) -> type[RemoteError]:
    base = getattr(builtins, type_name, None)
    bases: tuple[type, ...] = (RemoteError,)
    if isinstance(base, type) and issubclass(base, Exception) and base is not Exception:
        bases = (RemoteError, base)
    attrs = {"remote_type": type_name, "__module__": __name__}
    try:
        cls = type(type_name, bases, attrs)
        cls("probe")  # a built-in whose constructor takes more than a message is not combined
    except TypeError:
        cls = type(type_name, (RemoteError,), attrs)
    return cls


def remote_error(type_name: str | None, message: str) -> RemoteError:
    """A :class:`RemoteError` named ``type_name`` with ``message``."""
    name = type_name if type_name and type_name.isidentifier() else "RemoteError"
    if name == "RemoteError":
        return RemoteError(message)
    return _remote_class(name)(message)


class DurableOperationError(DurableError):
    """One operation started by :func:`~lionops.temporal.run_operations` failed.

    Returned (not raised) as the ``result`` of its ``Traced`` so the other
    operations' results are kept. ``error_type`` and ``message`` are those of
    the exception ``operate()`` raised in the workflow; ``workflow_id`` names it.
    """

    def __init__(self, error_type: str, message: str, workflow_id: str | None = None) -> None:
        self.error_type = error_type
        self.message = message
        self.workflow_id = workflow_id
        super().__init__(f"{error_type}: {message}")

    def __repr__(self) -> str:
        return f"DurableOperationError({self.error_type!r}, {self.message!r}, workflow_id={self.workflow_id!r})"

    def __reduce__(self) -> Any:
        return (DurableOperationError, (self.error_type, self.message, self.workflow_id))
